//! A tool call's identity: the tool and its input, canonical and with what does not change the
//! question masked, so the same call asked again is recognised however it was worded.

use crate::judge::noise;
use crate::protocol::tool::ToolClass;
use crate::util::canon::{write_canonical, write_canonical_masked, Digest16, Hasher};
use serde_json::Value;

/// Hash of a tool call: the tool name plus its input as JSON with recursively sorted keys.
///
/// A shell command's `description` is the model's commentary, not the call: the same command
/// with a reworded description is the same call.
///
/// A question asked again with only a fresh temp name, a timestamp, a UUID, a shell comment, a
/// literal `echo` label, a commit message or the way its output is shown (`2>&1`, `| tail`)
/// changed is the same question ([`noise::mask_input`], [`noise::command_as_asked`]);
/// not in what a Write or an Edit puts in a file, which is judged by the state it leaves.
pub fn call_key(tool: &str, input: &Value) -> Digest16 {
    let mut h = Hasher::new();
    h.update(tool.as_bytes());
    h.update(&[0u8]);
    let masked = !ToolClass::of(tool).changes_files();
    let write = |v: &Value, h: &mut Hasher| {
        if masked {
            write_canonical_masked(v, h, noise::mask_input);
        } else {
            write_canonical(v, h);
        }
    };
    match input {
        Value::Object(m) if matches!(tool, "Bash" | "PowerShell") => {
            let mut m = m.clone();
            m.remove("description");
            if let Some(Value::String(cmd)) = m.get_mut("command") {
                if let Some((asked, _)) = noise::command_as_asked(cmd) {
                    *cmd = asked;
                }
            }
            write(&Value::Object(m), &mut h);
        }
        _ => write(input, &mut h),
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_never_matters() {
        let a = json!({"b": 1, "a": {"y": [1, {"q": 2, "p": 1}], "x": null}});
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":null,"y":[1,{"p":1,"q":2}]},"b":1}"#).unwrap();
        assert_eq!(call_key("Bash", &a), call_key("Bash", &b));
    }

    #[test]
    fn tool_name_and_values_matter() {
        let a = json!({"command": "ls"});
        assert_ne!(call_key("Bash", &a), call_key("Other", &a));
        assert_ne!(
            call_key("Bash", &a),
            call_key("Bash", &json!({"command": "ls "}))
        );
        // Array order is meaningful (argument lists).
        assert_ne!(
            call_key("T", &json!({"a": [1, 2]})),
            call_key("T", &json!({"a": [2, 1]}))
        );
    }

    #[test]
    fn a_reworded_description_is_the_same_shell_call() {
        assert_eq!(
            call_key(
                "Bash",
                &json!({"command": "npm test", "description": "run tests"})
            ),
            call_key(
                "Bash",
                &json!({"command": "npm test", "description": "again"})
            )
        );
        assert_ne!(
            call_key("Other", &json!({"q": 1, "description": "a"})),
            call_key("Other", &json!({"q": 1, "description": "b"}))
        );
    }
}
