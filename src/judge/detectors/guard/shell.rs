//! A Bash command line as the guard needs to see it: simple commands with their words and their
//! redirections. Words (quotes, backslashes) are split by `shlex`; this module only finds what
//! shlex does not know about — the unquoted control operators that separate commands (`;`, `&&`,
//! `|`, newlines …), redirections, here-documents, and command substitutions (`$(…)`, backticks,
//! `<(…)`), whose bodies are parsed as commands of their own.

/// One simple command: `words` after quote removal (expansions are left as written), its
/// redirections, and the text fed to its standard input when that text is in the command line
/// (a here-document, a here-string, or `echo …` piped into it).
#[derive(Debug, Default, Clone)]
pub struct Simple {
    pub words: Vec<String>,
    pub redirs: Vec<(String, String)>,
    pub stdin: Option<String>,
}

/// A parsed command line: its simple commands in order, and the bodies of its command
/// substitutions (each a command line of its own), which `__lg_sub_N__` stands for in words.
#[derive(Debug, Default)]
pub struct Script {
    pub commands: Vec<Simple>,
    pub substitutions: Vec<String>,
}

/// The placeholder a command substitution leaves in a word.
pub fn placeholder(n: usize) -> String {
    format!("__lg_sub_{n}__")
}

/// The index of the substitution a word is (or starts with), if any.
pub fn substitution_of(word: &str) -> Option<usize> {
    let rest = word.strip_prefix("__lg_sub_")?;
    let end = rest.find("__")?;
    rest[..end].parse().ok()
}

#[derive(Clone, Copy, PartialEq)]
enum Quote {
    None,
    Single,
    Double,
}

/// Piece of a command between operators.
enum Piece {
    Text(String),
    Redir(String),
    /// `|`: the next command reads this one's output.
    Pipe,
    /// `;`, `&&`, `||`, `&`, newline, parentheses, braces: a plain boundary.
    End,
}

pub fn parse(line: &str) -> Script {
    let mut script = Script::default();
    let pieces = scan(line, &mut script.substitutions);
    let mut current = Simple::default();
    let mut text = String::new();
    let mut pending_redir: Option<String> = None;
    let mut piped_in: Option<String> = None;
    let flush_text = |text: &mut String, current: &mut Simple, pending: &mut Option<String>| {
        let words = split_words(text);
        text.clear();
        let mut words = words.into_iter();
        if let Some(op) = pending.take() {
            match words.next() {
                Some(target) => {
                    if op.starts_with("<<") {
                        current.stdin = Some(target.clone());
                    }
                    current.redirs.push((op, target));
                }
                None => *pending = Some(op),
            }
        }
        current.words.extend(words);
    };
    for piece in pieces {
        match piece {
            Piece::Text(t) => {
                text.push_str(&t);
            }
            Piece::Redir(op) => {
                // `2>file`: the digits glued to the operator are a descriptor, not a word.
                let trimmed = text.trim_end_matches(|c: char| c.is_ascii_digit());
                if (trimmed.len() != text.len() && trimmed.ends_with([' ', '\t']))
                    || trimmed.is_empty()
                {
                    text.truncate(trimmed.len());
                }
                flush_text(&mut text, &mut current, &mut pending_redir);
                pending_redir = Some(op);
            }
            Piece::Pipe | Piece::End => {
                flush_text(&mut text, &mut current, &mut pending_redir);
                pending_redir = None;
                if current.stdin.is_none() {
                    current.stdin = piped_in.take();
                }
                piped_in = None;
                if matches!(piece, Piece::Pipe) {
                    piped_in = echoed_text(&current);
                }
                if !current.words.is_empty() || !current.redirs.is_empty() {
                    script.commands.push(std::mem::take(&mut current));
                } else {
                    current = Simple::default();
                }
            }
        }
    }
    flush_text(&mut text, &mut current, &mut pending_redir);
    if current.stdin.is_none() {
        current.stdin = piped_in;
    }
    if !current.words.is_empty() || !current.redirs.is_empty() {
        script.commands.push(current);
    }
    script
}

/// What `echo`/`printf` would write, when that is plain text in the command line.
pub(super) fn echoed_text(c: &Simple) -> Option<String> {
    let first = c.words.first()?;
    if !matches!(first.as_str(), "echo" | "printf") {
        return c.stdin.clone().filter(|_| first == "cat");
    }
    let args: Vec<&str> = c.words[1..]
        .iter()
        .map(String::as_str)
        .skip_while(|w| w.starts_with('-'))
        .collect();
    // printf's format and `echo -e` turn `\n` into a line break: what runs is lines.
    Some(args.join(" ").replace("\\n", "\n").replace("\\t", "\t"))
}

/// Words of a piece of text, by shlex. Text shlex rejects (an unterminated quote, which the shell
/// would reject too) is split on whitespace, so nothing in it goes unseen.
fn split_words(text: &str) -> Vec<String> {
    if text.trim().is_empty() {
        return Vec::new();
    }
    shlex::split(text).unwrap_or_else(|| text.split_whitespace().map(str::to_string).collect())
}

/// Finds the unquoted operators of `line` and cuts it into pieces; command substitutions are
/// replaced by placeholders and their bodies collected.
fn scan(line: &str, subs: &mut Vec<String>) -> Vec<Piece> {
    let chars: Vec<char> = line.chars().collect();
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut quote = Quote::None;
    let mut heredocs: Vec<(String, bool, usize)> = Vec::new();
    let mut heredoc_count = 0;
    let mut bodies: Vec<String> = Vec::new();
    let mut i = 0;
    let push_text = |text: &mut String, pieces: &mut Vec<Piece>| {
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(text)));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        match quote {
            Quote::Single => {
                text.push(c);
                if c == '\'' {
                    quote = Quote::None;
                }
                i += 1;
                continue;
            }
            Quote::Double => {
                if c == '\\' {
                    text.push(c);
                    if let Some(n) = next {
                        text.push(n);
                    }
                    i += 2;
                    continue;
                }
                if c == '"' {
                    quote = Quote::None;
                    text.push(c);
                    i += 1;
                    continue;
                }
                if let Some(end) = substitution_at(&chars, i) {
                    let body: String = chars[body_start(&chars, i)..end].iter().collect();
                    text.push_str(&placeholder(subs.len()));
                    subs.push(body);
                    i = end + 1;
                    continue;
                }
                text.push(c);
                i += 1;
                continue;
            }
            Quote::None => {}
        }
        match c {
            '$' if next == Some('\'') => {
                // `$'…'`: C escapes decoded, then quoted as a plain single-quoted word.
                let (decoded, end) = ansi_c(&chars, i + 2);
                text.push('\'');
                text.push_str(&decoded.replace('\'', "'\\''"));
                text.push('\'');
                i = end;
            }
            '\\' => {
                text.push(c);
                if let Some(n) = next {
                    text.push(n);
                }
                i += 2;
            }
            '\'' => {
                quote = Quote::Single;
                text.push(c);
                i += 1;
            }
            '"' => {
                quote = Quote::Double;
                text.push(c);
                i += 1;
            }
            '#' if text.is_empty() || text.ends_with([' ', '\t']) => {
                // A comment runs to the end of the line.
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '$' | '`' if substitution_at(&chars, i).is_some() => {
                let end = substitution_at(&chars, i).unwrap_or(i);
                let body: String = chars[body_start(&chars, i)..end].iter().collect();
                text.push_str(&placeholder(subs.len()));
                subs.push(body);
                i = end + 1;
            }
            '<' | '>' if next == Some('(') => {
                // Process substitution: its body runs as a command of its own.
                let end = matching_paren(&chars, i + 1).unwrap_or(chars.len());
                let body: String = chars[(i + 2).min(end)..end].iter().collect();
                text.push_str(&placeholder(subs.len()));
                subs.push(body);
                i = end + 1;
            }
            '<' | '>' => {
                let mut op = String::from(c);
                let mut j = i + 1;
                while j < chars.len() && matches!(chars[j], '<' | '>' | '&' | '|' | '-') {
                    // `<<-` and `>&` and `>|` are one operator; `>&-` closes a descriptor.
                    if chars[j] == '-' && !op.starts_with("<<") && !op.ends_with('&') {
                        break;
                    }
                    if chars[j] == '|' && op != ">" {
                        break;
                    }
                    op.push(chars[j]);
                    j += 1;
                    if op.len() >= 3 {
                        break;
                    }
                }
                i = j;
                if op.starts_with("<<") && op != "<<<" {
                    // A here-document: the delimiter is the next word; its body starts on the
                    // next line and becomes the command's standard input.
                    let (word, after) = next_word(&chars, i);
                    let strip = op == "<<-";
                    let delim = shlex::split(&word)
                        .and_then(|w| w.into_iter().next())
                        .unwrap_or(word.clone());
                    heredocs.push((delim, strip, heredoc_count));
                    push_text(&mut text, &mut pieces);
                    pieces.push(Piece::Redir(op));
                    pieces.push(Piece::Text(format!(" {} ", heredoc_marker(heredoc_count))));
                    heredoc_count += 1;
                    i = after;
                } else {
                    push_text(&mut text, &mut pieces);
                    pieces.push(Piece::Redir(op));
                    text.push(' ');
                }
            }
            '&' if next == Some('>') => {
                // `&>file` and `&>>file`: both streams to a file.
                let op = if chars.get(i + 2) == Some(&'>') {
                    "&>>"
                } else {
                    "&>"
                };
                push_text(&mut text, &mut pieces);
                pieces.push(Piece::Redir(op.to_string()));
                text.push(' ');
                i += op.len();
            }
            '|' if next != Some('|') => {
                push_text(&mut text, &mut pieces);
                pieces.push(Piece::Pipe);
                i += if next == Some('&') { 2 } else { 1 };
            }
            ';' | '&' | '|' | '(' | ')' | '{' | '}' | '\n' => {
                let blank = text.trim().is_empty();
                let opens = c == '{' && blank && next.is_none_or(|n| n.is_whitespace());
                if matches!(c, '{' | '}') && !(opens || (c == '}' && blank)) {
                    // Braces are a group only as a command's first word (`{ a; }`): `${…}`,
                    // `a{b,c}` and find's `{}` are words.
                    text.push(c);
                    i += 1;
                    continue;
                }
                push_text(&mut text, &mut pieces);
                pieces.push(Piece::End);
                i += 1;
                if matches!(c, '&' | '|' | ';') && next == Some(c) {
                    i += 1;
                }
                if c == '\n' && !heredocs.is_empty() {
                    i = read_heredocs(&chars, i, &mut heredocs, &mut bodies);
                }
            }
            _ => {
                text.push(c);
                i += 1;
            }
        }
    }
    push_text(&mut text, &mut pieces);
    if heredoc_count > 0 {
        fill_heredocs(&mut pieces, &bodies);
    }
    pieces
}

/// Puts each here-document's body (quoted as one word) in place of its marker, in one pass over
/// the pieces: thousands of here-documents cost linear time.
fn fill_heredocs(pieces: &mut [Piece], bodies: &[String]) {
    const OPEN: &str = "__lg_heredoc_";
    for p in pieces.iter_mut() {
        let Piece::Text(t) = p else { continue };
        if !t.contains(OPEN) {
            continue;
        }
        let mut out = String::with_capacity(t.len());
        let mut rest = t.as_str();
        while let Some(at) = rest.find(OPEN) {
            out.push_str(&rest[..at]);
            let after = &rest[at + OPEN.len()..];
            let n = after
                .find("__")
                .and_then(|e| Some((after[..e].parse::<usize>().ok()?, e)));
            match n {
                Some((n, e)) => {
                    let body = bodies.get(n).map(String::as_str).unwrap_or("");
                    out.push_str(&shlex::try_quote(body).unwrap_or_default());
                    rest = &after[e + 2..];
                }
                None => {
                    out.push_str(OPEN);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        *t = out;
    }
}

/// The text of a `$'…'` string starting at `i` (after the quote), C escapes decoded, and where
/// the command line goes on.
fn ansi_c(chars: &[char], mut i: usize) -> (String, usize) {
    let mut out = String::new();
    let hex = |s: &[char]| u32::from_str_radix(&s.iter().collect::<String>(), 16).ok();
    while i < chars.len() && chars[i] != '\'' {
        if chars[i] != '\\' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let Some(&e) = chars.get(i + 1) else { break };
        i += 2;
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'e' | 'E' => out.push('\u{1b}'),
            'x' | 'u' | 'U' => {
                let max = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let n = chars[i..]
                    .iter()
                    .take(max)
                    .take_while(|c| c.is_ascii_hexdigit())
                    .count();
                if let Some(c) = hex(&chars[i..i + n]).and_then(char::from_u32) {
                    out.push(c);
                }
                i += n;
            }
            '0'..='7' => {
                let n = chars[i - 1..]
                    .iter()
                    .take(3)
                    .take_while(|c| ('0'..='7').contains(*c))
                    .count();
                let v: String = chars[i - 1..i - 1 + n].iter().collect();
                if let Some(c) = u32::from_str_radix(&v, 8).ok().and_then(char::from_u32) {
                    out.push(c);
                }
                i += n - 1;
            }
            other => out.push(other),
        }
    }
    (out, (i + 1).min(chars.len().max(i)))
}

/// Marker word standing for here-document `n`, replaced by its body once the body is read.
fn heredoc_marker(n: usize) -> String {
    format!("__lg_heredoc_{n}__")
}

/// Reads the bodies of pending here-documents from `i` (the start of the line after their
/// operator) into `bodies`, by here-document number. Returns where the command line goes on.
fn read_heredocs(
    chars: &[char],
    mut i: usize,
    heredocs: &mut Vec<(String, bool, usize)>,
    bodies: &mut Vec<String>,
) -> usize {
    for (delim, strip, n) in heredocs.drain(..) {
        let mut body = String::new();
        loop {
            let start = i;
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            let line: String = chars[start..i].iter().collect();
            i = (i + 1).min(chars.len().max(i));
            let cmp = if strip {
                line.trim_start_matches('\t')
            } else {
                &line
            };
            if cmp == delim || start >= chars.len() {
                break;
            }
            body.push_str(&line);
            body.push('\n');
        }
        if bodies.len() <= n {
            bodies.resize(n + 1, String::new());
        }
        bodies[n] = body;
    }
    i
}

/// The next word's raw text from `i` (skipping blanks), and where it ends.
fn next_word(chars: &[char], mut i: usize) -> (String, usize) {
    while i < chars.len() && matches!(chars[i], ' ' | '\t') {
        i += 1;
    }
    let start = i;
    let mut quote = Quote::None;
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (Quote::None, ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')') => break,
            (Quote::None, '\'') => quote = Quote::Single,
            (Quote::None, '"') => quote = Quote::Double,
            (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
            _ => {}
        }
        i += 1;
    }
    (chars[start..i].iter().collect(), i)
}

/// Where the body of the substitution starting at `i` begins.
fn body_start(chars: &[char], i: usize) -> usize {
    if chars[i] == '`' {
        i + 1
    } else {
        i + 2
    }
}

/// If a command substitution (`$(…)` or `` `…` ``) starts at `i`, the index of its closing
/// character.
fn substitution_at(chars: &[char], i: usize) -> Option<usize> {
    match (chars.get(i), chars.get(i + 1)) {
        (Some('$'), Some('(')) => Some(matching_paren(chars, i + 1).unwrap_or(chars.len())),
        (Some('`'), _) => {
            let mut j = i + 1;
            while j < chars.len() && chars[j] != '`' {
                if chars[j] == '\\' {
                    j += 1;
                }
                j += 1;
            }
            Some(j.min(chars.len()))
        }
        _ => None,
    }
}

/// The index of the `)` matching the `(` at `open`, quote-aware.
fn matching_paren(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut quote = Quote::None;
    let mut i = open;
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (Quote::Single, '\'') | (Quote::Double, '"') => quote = Quote::None,
            (Quote::Single, _) => {}
            (_, '\\') => i += 1,
            (Quote::None, '\'') => quote = Quote::Single,
            (Quote::None, '"') => quote = Quote::Double,
            (Quote::None, '(') => depth += 1,
            (Quote::None, ')') => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<Vec<String>> {
        parse(line).commands.into_iter().map(|c| c.words).collect()
    }

    #[test]
    fn commands_words_and_redirections() {
        assert_eq!(
            words("a 'b c'; d && e | f"),
            [vec!["a", "b c"], vec!["d"], vec!["e"], vec!["f"]]
        );
        let s = parse("echo x>out 2>&1 >> 'lo g' < in");
        let c = &s.commands[0];
        assert_eq!(c.words, ["echo", "x"]);
        let r: Vec<(&str, &str)> = c
            .redirs
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        assert_eq!(r, [(">", "out"), (">&", "1"), (">>", "lo g"), ("<", "in")]);
        // Operators inside quotes are text.
        assert_eq!(
            words("git commit -m 'a; b > c'"),
            [vec!["git", "commit", "-m", "a; b > c"]]
        );
    }

    #[test]
    fn substitutions_heredocs_and_pipes() {
        let s = parse("$(which loopgate) reset --all");
        assert_eq!(s.substitutions, ["which loopgate"]);
        assert_eq!(s.commands[0].words, ["__lg_sub_0__", "reset", "--all"]);
        assert_eq!(substitution_of("__lg_sub_0__"), Some(0));
        let s = parse("cat > f <<'EOF'\nloopgate reset --all\nEOF\necho done");
        assert_eq!(s.commands.len(), 2, "{:?}", s.commands);
        assert_eq!(
            s.commands[0].stdin.as_deref(),
            Some("loopgate reset --all\n")
        );
        let s = parse("echo 'loopgate reset --all' | sh");
        assert_eq!(s.commands[1].stdin.as_deref(), Some("loopgate reset --all"));
    }
}
