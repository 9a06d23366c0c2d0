//! Codex edits files with one tool, `apply_patch`, whose input is a patch text (observed:
//! `tool_input: {"command": "*** Begin Patch\n*** Add File: notes.txt\n+line one\n…"}`). A patch
//! that adds one file is a Write, one that updates one file is an Edit (its context and removed
//! lines as the old text, its context and added lines as the new), so the world state, the
//! modification detector and the guard judge Codex edits as they judge Claude Code's. Anything
//! else (several files, a deletion, a move) stays `apply_patch`, an edit of unknown files.

use serde_json::{json, Value};

enum Op<'a> {
    Add {
        path: &'a str,
        lines: Vec<&'a str>,
    },
    Update {
        path: &'a str,
        old: Vec<&'a str>,
        new: Vec<&'a str>,
    },
    Other,
}

pub fn as_claude_call(input: &Value) -> (String, Value) {
    let text = input.get("command").and_then(Value::as_str).unwrap_or("");
    let ops = parse(text);
    match ops.as_slice() {
        [Op::Add { path, lines }] => (
            "Write".into(),
            json!({"file_path": path, "content": join(lines, true)}),
        ),
        [Op::Update { path, old, new }] => (
            "Edit".into(),
            json!({"file_path": path, "old_string": join(old, false), "new_string": join(new, false)}),
        ),
        _ => ("apply_patch".into(), input.clone()),
    }
}

fn join(lines: &[&str], trailing_newline: bool) -> String {
    let mut s = lines.join("\n");
    if trailing_newline && !lines.is_empty() {
        s.push('\n');
    }
    s
}

fn parse(text: &str) -> Vec<Op<'_>> {
    let mut ops = Vec::new();
    for line in text.lines() {
        if let Some(path) = line.strip_prefix("*** Add File: ") {
            ops.push(Op::Add {
                path: path.trim(),
                lines: Vec::new(),
            });
        } else if let Some(path) = line.strip_prefix("*** Update File: ") {
            ops.push(Op::Update {
                path: path.trim(),
                old: Vec::new(),
                new: Vec::new(),
            });
        } else if line.starts_with("*** Delete File: ") || line.starts_with("*** Move to: ") {
            ops.push(Op::Other);
        } else if line.starts_with("*** ") || line.starts_with("@@") {
            continue;
        } else {
            match ops.last_mut() {
                Some(Op::Add { lines, .. }) => lines.push(line.strip_prefix('+').unwrap_or(line)),
                Some(Op::Update { old, new, .. }) => match line.as_bytes().first() {
                    Some(b'-') => old.push(&line[1..]),
                    Some(b'+') => new.push(&line[1..]),
                    _ => {
                        let l = line.strip_prefix(' ').unwrap_or(line);
                        old.push(l);
                        new.push(l);
                    }
                },
                _ => {}
            }
        }
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_added_file_is_a_write_and_one_update_an_edit() {
        let add = json!({"command": "*** Begin Patch\n*** Add File: notes.txt\n+line one\n+line two\n*** End Patch\n"});
        assert_eq!(
            as_claude_call(&add),
            (
                "Write".into(),
                json!({"file_path": "notes.txt", "content": "line one\nline two\n"})
            )
        );
        let update = json!({"command": "*** Begin Patch\n*** Update File: notes.txt\n@@\n line one\n-line two\n+line 2\n*** End Patch\n"});
        assert_eq!(
            as_claude_call(&update),
            (
                "Edit".into(),
                json!({"file_path": "notes.txt", "old_string": "line one\nline two", "new_string": "line one\nline 2"})
            )
        );
    }

    #[test]
    fn several_files_or_a_deletion_stay_a_patch() {
        let two = json!({"command": "*** Begin Patch\n*** Add File: a\n+x\n*** Add File: b\n+y\n*** End Patch\n"});
        assert_eq!(as_claude_call(&two).0, "apply_patch");
        let del = json!({"command": "*** Begin Patch\n*** Delete File: a\n*** End Patch\n"});
        assert_eq!(as_claude_call(&del).0, "apply_patch");
    }
}
