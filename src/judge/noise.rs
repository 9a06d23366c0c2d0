//! The noise masks of [`crate::judge::outcome::normalise`], as a hand-written byte scanner: compiling the
//! equivalent regex cost every PostToolUse ~2 M instructions (63% of the call). The regex stays as
//! the reference in a property test (`tests` below): both must give the same output on any input.
//!
//! At each position the rules are tried in order and the first that matches wins (the regex's
//! leftmost-first alternation); a match is consumed whole, so no rule looks inside another's
//! match. ASCII only, as the reference (`(?-u)`): `\b` is an ASCII word boundary.
//!
//! | rule | matches | becomes |
//! |---|---|---|
//! | `url` | `http(s)://host/path?query` | host kept; each path/query token that holds a digit and is ≥ 6 long, or is ≥ 3 digits, `<id>` |
//! | `ts` | ISO dates with optional time (`:` or the file-name-safe `_`), fraction and zone; `h:mm:ss(.f)` | `<ts>` |
//! | `dur` | `1.23s`, `250ms`, `3m`; `1.5 s`, `3 seconds`, `2 mins` | `<dur>` |
//! | `uuid` | 8-4-4-4-12 hex | `<uuid>` |
//! | `hex` | a lowercase hex run (optional `0x`) with a digit next to a letter, ≥ 7 digits | `<hex>` (shorter: kept) |
//! | `pid` | `pid 123`, `PID: 9` | `<pid>` |
//! | `attempt` | `attempt 3`, `retry #2`, `try 1` | `<attempt>` |
//! | `tmp` | `/tmp/…`, `/var/folders/…`, `/private/var/…` up to a space, quote, `:` or `)` | `<tmp>` |
//!
//! The `dur` rule covers the summary and timing lines of the common test runners: jest's
//! `Time:        1.234 s`, vitest's `Duration  1.2s (transform 20ms, …)`, mocha's `(25ms)`,
//! pytest's `in 0.12s`, go test's `0.123s`, cargo's `finished in 0.01s`, rspec's
//! `Finished in 0.01 seconds (files took 0.1 seconds to load)`, Maven's `Time elapsed: 0.05 s`,
//! Gradle's `BUILD SUCCESSFUL in 3s`.

fn word(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `\b` at `i`: a word byte on exactly one side.
fn boundary(b: &[u8], i: usize) -> bool {
    let before = i > 0 && word(b[i - 1]);
    let after = i < b.len() && word(b[i]);
    before != after
}

/// End of the run of bytes from `i` satisfying `f`.
fn run(b: &[u8], mut i: usize, f: impl Fn(u8) -> bool) -> usize {
    while i < b.len() && f(b[i]) {
        i += 1;
    }
    i
}

/// `n` digits at `i`: their end.
fn digits_n(b: &[u8], i: usize, n: usize) -> Option<usize> {
    (i + n <= b.len() && b[i..i + n].iter().all(u8::is_ascii_digit)).then_some(i + n)
}

fn lit(b: &[u8], i: usize, s: &[u8]) -> Option<usize> {
    b[i..].starts_with(s).then_some(i + s.len())
}

fn lit_ci(b: &[u8], i: usize, s: &[u8]) -> Option<usize> {
    (b.len() - i >= s.len() && b[i..i + s.len()].eq_ignore_ascii_case(s)).then_some(i + s.len())
}

fn byte_in(b: &[u8], i: usize, set: &[u8]) -> Option<usize> {
    (i < b.len() && set.contains(&b[i])).then_some(i + 1)
}

/// ASCII `\s`.
fn space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `\d+` from `i` (at least one).
fn digits(b: &[u8], i: usize) -> Option<usize> {
    let e = run(b, i, |c| c.is_ascii_digit());
    (e > i).then_some(e)
}

fn ts(b: &[u8], i: usize) -> Option<usize> {
    ts_date(b, i).or_else(|| ts_clock(b, i))
}

/// `\d{4}-\d{2}-\d{2}(?:[T ]\d{2}[:_]\d{2}(?:[:_]\d{2}(?:[.,_]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?`
fn ts_date(b: &[u8], i: usize) -> Option<usize> {
    let mut p = digits_n(b, i, 4)?;
    p = lit(b, p, b"-")?;
    p = digits_n(b, p, 2)?;
    p = lit(b, p, b"-")?;
    p = digits_n(b, p, 2)?;
    let time = || -> Option<usize> {
        let mut q = byte_in(b, p, b"T ")?;
        q = digits_n(b, q, 2)?;
        // `_` too: the file-name-safe spelling (npm's `2026-11-24T14_23_45_678Z-debug-0.log`).
        q = byte_in(b, q, b":_")?;
        q = digits_n(b, q, 2)?;
        let secs = || -> Option<usize> {
            let r = digits_n(b, byte_in(b, q, b":_")?, 2)?;
            Some(
                byte_in(b, r, b".,_")
                    .and_then(|f| digits(b, f))
                    .unwrap_or(r),
            )
        };
        q = secs().unwrap_or(q);
        let zone = || -> Option<usize> {
            if let Some(z) = lit(b, q, b"Z") {
                return Some(z);
            }
            let h = digits_n(b, byte_in(b, q, b"+-")?, 2)?;
            lit(b, h, b":")
                .and_then(|c| digits_n(b, c, 2))
                .or_else(|| digits_n(b, h, 2))
        };
        Some(zone().unwrap_or(q))
    };
    Some(time().unwrap_or(p))
}

/// `\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b`
fn ts_clock(b: &[u8], i: usize) -> Option<usize> {
    if !boundary(b, i) {
        return None;
    }
    let h = [2, 1]
        .into_iter()
        .find_map(|n| digits_n(b, i, n).and_then(|e| lit(b, e, b":")))?;
    let m = lit(b, digits_n(b, h, 2)?, b":")?;
    let s = digits_n(b, m, 2)?;
    if let Some(f) = byte_in(b, s, b".,").and_then(|f| digits(b, f)) {
        if boundary(b, f) {
            return Some(f);
        }
    }
    boundary(b, s).then_some(s)
}

/// `\b\d+(?:\.\d+)?(?:ns|us|ms|s|m|h)\b` or `\b\d+(?:\.\d+)?\s(?:ms|sec|secs|seconds?|mins?|minutes?|s)\b`
fn dur(b: &[u8], i: usize) -> Option<usize> {
    if !boundary(b, i) {
        return None;
    }
    let int = digits(b, i)?;
    let num_ends = [lit(b, int, b".").and_then(|d| digits(b, d)), Some(int)];
    let unit = |p: usize, units: &[&[u8]]| {
        units
            .iter()
            .find_map(|u| lit(b, p, u).filter(|&e| boundary(b, e)))
    };
    const TIGHT: &[&[u8]] = &[b"ns", b"us", b"ms", b"s", b"m", b"h"];
    const SPACED: &[&[u8]] = &[
        b"ms", b"sec", b"secs", b"seconds", b"second", b"mins", b"min", b"minutes", b"minute", b"s",
    ];
    num_ends
        .iter()
        .flatten()
        .find_map(|&n| unit(n, TIGHT))
        .or_else(|| {
            num_ends.iter().flatten().find_map(|&n| {
                let sp = (n < b.len() && space(b[n])).then_some(n + 1)?;
                unit(sp, SPACED)
            })
        })
}

/// `\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b`
fn uuid(b: &[u8], i: usize) -> Option<usize> {
    if !boundary(b, i) {
        return None;
    }
    let mut p = i;
    for (k, n) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if k > 0 {
            p = lit(b, p, b"-")?;
        }
        if p + n > b.len() || !b[p..p + n].iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        p += n;
    }
    boundary(b, p).then_some(p)
}

fn lower_hex(c: u8) -> bool {
    c.is_ascii_digit() || (b'a'..=b'f').contains(&c)
}

/// `\b(?:0x)?[0-9a-f]*(?:[0-9][a-f]|[a-f][0-9])[0-9a-f]*\b`: the match and whether it is long
/// enough (≥ 7 digits after `0x`) to be masked.
fn hex(b: &[u8], i: usize) -> Option<(usize, bool)> {
    if !boundary(b, i) {
        return None;
    }
    let body = |s: usize| -> Option<usize> {
        let e = run(b, s, lower_hex);
        let mixed = b[s..e]
            .windows(2)
            .any(|w| w[0].is_ascii_digit() != w[1].is_ascii_digit());
        (mixed && boundary(b, e)).then_some(e)
    };
    let (start, end) = match lit(b, i, b"0x").and_then(|s| Some((s, body(s)?))) {
        Some(m) => m,
        None => (i, body(i)?),
    };
    Some((end, end - start >= 7))
}

/// `(?i:\bpid\b)[\s:=#]*\d+`
fn pid(b: &[u8], i: usize) -> Option<usize> {
    if !boundary(b, i) {
        return None;
    }
    let w = lit_ci(b, i, b"pid").filter(|&e| boundary(b, e))?;
    digits(
        b,
        run(b, w, |c| space(c) || matches!(c, b':' | b'=' | b'#')),
    )
}

/// `(?i:\b(?:attempt|try|retry)\b)\s*#?\d+`
fn attempt(b: &[u8], i: usize) -> Option<usize> {
    if !boundary(b, i) {
        return None;
    }
    let w = [&b"attempt"[..], b"try", b"retry"]
        .into_iter()
        .find_map(|s| lit_ci(b, i, s).filter(|&e| boundary(b, e)))?;
    let s = run(b, w, space);
    let h = lit(b, s, b"#").unwrap_or(s);
    digits(b, h)
}

/// `(?:/tmp|/var/folders|/private/var)/[^\s'":)]+`
fn tmp(b: &[u8], i: usize) -> Option<usize> {
    let p = [&b"/tmp/"[..], b"/var/folders/", b"/private/var/"]
        .into_iter()
        .find_map(|s| lit(b, i, s))?;
    let e = run(b, p, |c| {
        !space(c) && !matches!(c, b'\'' | b'"' | b':' | b')')
    });
    (e > p).then_some(e)
}

/// `\bhttps?://[^\s'"<>)]+`: the URL's end and where its host ends.
fn url(b: &[u8], i: usize) -> Option<(usize, usize)> {
    if !boundary(b, i) {
        return None;
    }
    let s = lit(b, i, b"https://").or_else(|| lit(b, i, b"http://"))?;
    let end = run(b, s, url_byte);
    if end == s {
        return None;
    }
    let host = s + b[s..end].iter().position(|&c| c == b'/').unwrap_or(end - s);
    Some((end, host))
}

fn url_byte(c: u8) -> bool {
    !space(c) && !matches!(c, b'\'' | b'"' | b'<' | b'>' | b')')
}

fn id_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

/// A token of a URL's path or query that is an id: ≥ 3 digits, or a digit in ≥ 6 bytes.
fn is_id(t: &[u8]) -> bool {
    let digits = t.iter().filter(|c| c.is_ascii_digit()).count();
    (digits == t.len() && digits >= 3) || (digits > 0 && t.len() >= 6)
}

/// Copies a URL's path and query with its id tokens masked.
fn mask_url_path(path: &[u8], out: &mut Vec<u8>) {
    let mut i = 0;
    while i < path.len() {
        if id_byte(path[i]) {
            let e = run(path, i, id_byte);
            if is_id(&path[i..e]) {
                out.extend_from_slice(b"<id>");
            } else {
                out.extend_from_slice(&path[i..e]);
            }
            i = e;
        } else {
            out.push(path[i]);
            i += 1;
        }
    }
}

/// Masks volatile fragments of `text`; everything else is kept byte for byte.
pub fn mask(text: &str) -> String {
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    // Copy runs that cannot start a match in one go: every rule starts with a digit, a letter of
    // `pid`/`attempt`/`try`/`retry`/`http`, or `/`.
    while i < b.len() {
        let c = b[i];
        if !(c.is_ascii_alphanumeric() || c == b'/') {
            out.push(c);
            i += 1;
            continue;
        }
        if let Some((end, host)) = url(b, i) {
            out.extend_from_slice(&b[i..host]);
            mask_url_path(&b[host..end], &mut out);
            i = end;
            continue;
        }
        let masked: Option<(usize, &[u8])> = ts(b, i)
            .map(|e| (e, &b"<ts>"[..]))
            .or_else(|| dur(b, i).map(|e| (e, &b"<dur>"[..])))
            .or_else(|| uuid(b, i).map(|e| (e, &b"<uuid>"[..])))
            .or_else(|| hex(b, i).map(|(e, long)| (e, if long { &b"<hex>"[..] } else { &b[i..e] })))
            .or_else(|| pid(b, i).map(|e| (e, &b"<pid>"[..])))
            .or_else(|| attempt(b, i).map(|e| (e, &b"<attempt>"[..])))
            .or_else(|| tmp(b, i).map(|e| (e, &b"<tmp>"[..])));
        match masked {
            Some((end, with)) => {
                out.extend_from_slice(with);
                i = end;
            }
            None => {
                // One byte on: a date may start inside a word (the reference has no `\b` there).
                out.push(c);
                i += 1;
            }
        }
    }
    // Matches start and end on ASCII, so no multi-byte character is ever cut.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A temp name that changes on every run: mktemp's `tmp.AbC123xyz0` (any `prefix.XXXXXX` after
/// `tmp`), Python's `tmpk3j2_x9q`: `tmp`, an optional `.`/`_`/`-`, then 6 to 16 random bytes of
/// which one is a digit or a capital.
fn mktemp(b: &[u8], i: usize) -> Option<usize> {
    if !boundary(b, i) {
        return None;
    }
    let p = lit(b, i, b"tmp")?;
    let s = byte_in(b, p, b"._-").unwrap_or(p);
    let e = run(b, s, |c| c.is_ascii_alphanumeric() || c == b'_');
    let random = b[s..e]
        .iter()
        .any(|c| c.is_ascii_digit() || c.is_ascii_uppercase());
    ((6..=16).contains(&(e - s)) && random && boundary(b, e)).then_some(e)
}

/// The volatile fragments of a call's input masked, for its key: a timestamp, a UUID, a temp
/// name made fresh for each run. `None` when there is none (the common case, no allocation).
/// Narrower than [`mask`]: a PID, a number or a path under `/tmp` names something else.
pub fn mask_input(text: &str) -> Option<String> {
    let b = text.as_bytes();
    let mut out: Vec<u8> = Vec::new();
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if !c.is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let masked = ts(b, i)
            .map(|e| (e, &b"<ts>"[..]))
            .or_else(|| uuid(b, i).map(|e| (e, &b"<uuid>"[..])))
            .or_else(|| mktemp(b, i).map(|e| (e, &b"tmp.<tmp>"[..])));
        match masked {
            Some((end, with)) => {
                out.extend_from_slice(&b[copied..i]);
                out.extend_from_slice(with);
                copied = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if copied == 0 {
        return None;
    }
    out.extend_from_slice(&b[copied..]);
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// A shell command without its comments (`npm test  # once more`, a `# step 2` line): what the
/// model says to itself is not the command. `None` when there is none to drop, or when the
/// command holds a here-document (whose `#` lines are text).
pub fn without_shell_comments(cmd: &str) -> Option<String> {
    if !cmd.contains('#') || cmd.contains("<<") {
        return None;
    }
    let b = cmd.as_bytes();
    let mut out = String::with_capacity(cmd.len());
    let (mut quote, mut i, mut start, mut cut) = (None::<u8>, 0, 0, false);
    while i < b.len() {
        let c = b[i];
        match (quote, c) {
            (Some(b'\''), b'\'') | (Some(b'"'), b'"') => quote = None,
            (Some(b'"') | None, b'\\') => i += 1,
            (None, b'\'' | b'"') => quote = Some(c),
            (None, b'#') if i == 0 || space(b[i - 1]) || matches!(b[i - 1], b';' | b'&' | b'|') => {
                out.push_str(cmd[start..i].trim_end());
                let end = b[i..]
                    .iter()
                    .position(|&x| x == b'\n')
                    .map_or(b.len(), |p| i + p);
                (start, i, cut) = (end, end, true);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    if !cut {
        return None;
    }
    out.push_str(&cmd[start.min(b.len())..]);
    Some(out.trim().to_string())
}

/// A shell command's literal `echo`s to the terminal (`echo "Attempt 3: retry"; pytest`): the
/// model labelling its own output, like a comment, which changes nothing the command does.
/// Returns the command without them and the lines they print, so that the same command labelled
/// afresh is the same call with the same answer. Only a whole `;`, `&&` or newline separated part
/// that is `echo` and plain words counts: a pipe, a redirect, an expansion, a flag or a glob
/// keeps it (it feeds or changes something). `None` when there is none, or nothing else.
pub fn without_literal_echoes(cmd: &str) -> Option<(String, Vec<String>)> {
    // An echo that is a label needs another part beside it: no separator, nothing to drop.
    let parted = |c: &u8| matches!(c, b';' | b'\n' | b'&');
    if !cmd.contains("echo") || !cmd.as_bytes().iter().any(parted) || cmd.contains("<<") {
        return None;
    }
    let b = cmd.as_bytes();
    // (separator before, part) at the top level.
    let mut parts: Vec<(&str, &str)> = Vec::new();
    let (mut quote, mut i, mut start, mut sep) = (None::<u8>, 0, 0, "");
    while i < b.len() {
        let c = b[i];
        let cut = match (quote, c) {
            (Some(q), _) if c == q => {
                quote = None;
                0
            }
            (Some(b'"') | None, b'\\') => {
                i += 2;
                continue;
            }
            (Some(_), _) => 0,
            (None, b'\'' | b'"') => {
                quote = Some(c);
                0
            }
            (None, b';' | b'\n') => 1,
            (None, b'&') if b.get(i + 1) == Some(&b'&') => 2,
            _ => 0,
        };
        if cut > 0 {
            parts.push((sep, &cmd[start..i]));
            sep = &cmd[i..i + cut];
            i += cut;
            start = i;
            continue;
        }
        i += 1;
    }
    if quote.is_some() {
        return None;
    }
    parts.push((sep, &cmd[start..]));
    let mut kept = String::with_capacity(cmd.len());
    let mut echoed = Vec::new();
    for (sep, part) in parts {
        match literal_echo(part.trim()) {
            Some(text) if text.trim().is_empty() => {}
            Some(text) => echoed.push(text.trim().to_string()),
            None if part.trim().is_empty() => {}
            None => {
                if !kept.is_empty() {
                    kept.push_str(sep);
                }
                kept.push_str(part.trim());
            }
        }
    }
    (!echoed.is_empty() && !kept.is_empty()).then_some((kept, echoed))
}

/// What `echo word 'two words' "more"` prints, when every word is plain text (no expansion,
/// redirect, glob or flag).
fn literal_echo(part: &str) -> Option<String> {
    let rest = part.strip_prefix("echo")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let rest = rest.trim();
    if rest.starts_with('-') || rest.contains(|c| "$`\\><|&(){}[]*?~!".contains(c)) {
        return None;
    }
    let mut out = String::with_capacity(rest.len());
    let (mut quote, mut gap) = (None, false);
    for c in rest.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => out.push(c),
            (None, c) if c.is_whitespace() => gap = true,
            (None, c) => {
                if gap && !out.is_empty() {
                    out.push(' ');
                }
                gap = false;
                if matches!(c, '\'' | '"') {
                    quote = Some(c);
                } else {
                    out.push(c);
                }
            }
        }
    }
    Some(out)
}

/// The shell command as its call key reads it: without comments and literal echoes, and the
/// lines those echoes print (see [`without_literal_echoes`]). `None`: the command as it is.
pub fn bare_command(cmd: &str) -> Option<(String, Vec<String>)> {
    let uncommented = without_shell_comments(cmd);
    let cmd_now = uncommented.as_deref().unwrap_or(cmd);
    match without_literal_echoes(cmd_now) {
        Some(found) => Some(found),
        None => uncommented.map(|c| (c, Vec::new())),
    }
}

/// A shell command without what only changes how its output is shown: `2>&1`, `>/dev/null`, a
/// trailing `| head -50` or `| tail`, `|| true`, a leading `timeout 60` or `time`, quotes around a
/// plain word, `./` before an argument, runs of blanks. `npm test 2>&1 | tail -20` asks what
/// `npm test` asks: an agent that re-words a refused call this way is asking it again. `None` when
/// there is nothing to drop.
pub fn without_trivia(cmd: &str) -> Option<String> {
    const HINTS: &[&str] = &[
        "2>",
        ">/dev/null",
        "|",
        "timeout ",
        "time ",
        "./",
        "  ",
        "'",
        "\"",
        "\t",
    ];
    if !HINTS.iter().any(|h| cmd.contains(h)) || cmd.contains("<<") || cmd.contains('\n') {
        return None;
    }
    let mut words = shell_words(cmd);
    // Leading `timeout 60`, `timeout 5m`, `time`.
    loop {
        match words.as_slice() {
            ["time", _, ..] => {
                words.remove(0);
            }
            ["timeout", n, _, ..] if n.bytes().next().is_some_and(|c| c.is_ascii_digit()) => {
                words.drain(..2);
            }
            _ => break,
        }
    }
    words.retain(|w| {
        !matches!(
            *w,
            "2>&1" | "1>&2" | ">&2" | "2>/dev/null" | ">/dev/null" | "1>/dev/null" | "&>/dev/null"
        )
    });
    // A trailing `|| true` / `|| :`, then trailing pagers and cuts of the output.
    if let [.., "||", "true" | ":"] = words.as_slice() {
        words.truncate(words.len() - 2);
    }
    while let Some(bar) = words.iter().rposition(|w| *w == "|") {
        let tail = &words[bar + 1..];
        let shows = matches!(
            tail.first(),
            Some(&("head" | "tail" | "cat" | "less" | "more"))
        ) && tail[1..]
            .iter()
            .all(|w| w.starts_with('-') || w.bytes().all(|c| c.is_ascii_digit()));
        if !shows || bar == 0 {
            break;
        }
        words.truncate(bar);
    }
    let mut out = String::with_capacity(cmd.len());
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let w = unquoted(w);
        // `cat ./a` reads what `cat a` reads; `./build` and `build` are different programs.
        out.push_str(if i > 0 {
            w.strip_prefix("./").filter(|r| !r.is_empty()).unwrap_or(w)
        } else {
            w
        });
    }
    (out != cmd).then_some(out)
}

/// A word without the quotes around it when what they hold is plain (`"src/a.rs"` → `src/a.rs`).
fn unquoted(w: &str) -> &str {
    let b = w.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        let inner = &w[1..w.len() - 1];
        let plain = inner.bytes().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    b'/' | b'.' | b'_' | b'-' | b':' | b'=' | b',' | b'@' | b'+'
                )
        });
        if plain && !inner.is_empty() {
            return inner;
        }
    }
    w
}

/// A command's words as the shell splits them at blanks, quotes and `$(…)` kept whole.
fn shell_words(cmd: &str) -> Vec<&str> {
    let b = cmd.as_bytes();
    let mut words = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if matches!(b[i], b' ' | b'\t') {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !matches!(b[i], b' ' | b'\t') {
            i = match b[i] {
                b'\'' => quoted_end(b, i + 1, b'\''),
                b'"' => quoted_end(b, i + 1, b'"'),
                b'\\' => i + 2,
                b'$' if b.get(i + 1) == Some(&b'(') => paren_end(b, i + 2),
                _ => i + 1,
            };
        }
        i = i.min(b.len());
        words.push(&cmd[start..i]);
    }
    words
}

/// A commit's message masked (`git commit -m "fix: x"` → `git commit -m <msg>`): the same commit
/// tried again under a new message is the same call, as a reworded description is. Only the
/// message of `-m`/`--message` (also in `-am`) in a command that runs `git … commit`. `None`
/// when there is none.
pub fn without_commit_message(cmd: &str) -> Option<String> {
    if !cmd.contains("commit") || !cmd.contains("git") || !cmd.contains("-") {
        return None;
    }
    let b = cmd.as_bytes();
    let mut out = String::with_capacity(cmd.len());
    let (mut copied, mut i, mut in_commit) = (0, 0, false);
    while i < b.len() {
        let end = word_end(b, i);
        if end == i {
            // A separator: a new simple command starts after `;`, `&&`, `|`, a newline.
            if matches!(b[i], b';' | b'&' | b'|' | b'\n') {
                in_commit = false;
            }
            i += 1;
            continue;
        }
        let word = &cmd[i..end];
        if word == "commit" {
            in_commit = cmd[..i].contains("git");
        } else if in_commit {
            if let Some(value) = message_of(b, word, i, end) {
                out.push_str(&cmd[copied..value.start]);
                out.push_str("<msg>");
                copied = value.end;
                i = value.end;
                continue;
            }
        }
        i = end;
    }
    if copied == 0 {
        return None;
    }
    out.push_str(&cmd[copied..]);
    Some(out)
}

/// Where the message of a commit's message flag `word` (at `start..end` of `b`) lies.
fn message_of(b: &[u8], word: &str, start: usize, end: usize) -> Option<std::ops::Range<usize>> {
    let next_word = || {
        let mut j = end;
        while j < b.len() && matches!(b[j], b' ' | b'\t') {
            j += 1;
        }
        (j < b.len()).then(|| j..word_end(b, j))
    };
    if word == "--message" {
        return next_word();
    }
    if let Some(v) = word.strip_prefix("--message=") {
        return (!v.is_empty()).then(|| end - v.len()..end);
    }
    // `-m msg`, `-am msg`, `-m"msg"`: short flags, the message after the `m`.
    let flags = word.strip_prefix('-').filter(|f| !f.starts_with('-'))?;
    let at = flags.find('m')?;
    if !flags[..at].bytes().all(|c| c.is_ascii_alphabetic()) {
        return None;
    }
    if at + 1 == flags.len() {
        next_word()
    } else {
        Some(start + 2 + at..end)
    }
}

/// The end of the shell word starting at `i` (`i` itself at a separator or a blank), quotes and
/// `$(…)` taken whole.
fn word_end(b: &[u8], mut i: usize) -> usize {
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'<' | b'>' => break,
            b'\'' => i = quoted_end(b, i + 1, b'\''),
            b'"' => i = quoted_end(b, i + 1, b'"'),
            b'\\' => i += 2,
            b'$' if b.get(i + 1) == Some(&b'(') => i = paren_end(b, i + 2),
            _ => i += 1,
        }
    }
    i.min(b.len())
}

/// Past the closing `quote`, from inside the quotes.
fn quoted_end(b: &[u8], mut i: usize, quote: u8) -> usize {
    while i < b.len() {
        match b[i] {
            c if c == quote => return i + 1,
            b'\\' if quote == b'"' => i += 2,
            b'$' if quote == b'"' && b.get(i + 1) == Some(&b'(') => i = paren_end(b, i + 2),
            _ => i += 1,
        }
    }
    b.len()
}

/// Past the `)` closing a `$(`, from inside it.
fn paren_end(b: &[u8], mut i: usize) -> usize {
    let mut depth = 1;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b'"' => {
                i = quoted_end(b, i + 1, b'"');
                continue;
            }
            b'\\' => i += 1,
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// The shell command as its call key and its answers read it: [`bare_command`], then without a
/// commit's message ([`without_commit_message`]) and what only changes how its output is shown
/// ([`without_trivia`]). `None`: the command as it is.
pub fn command_as_asked(cmd: &str) -> Option<(String, Vec<String>)> {
    let (bare, echoed) = match bare_command(cmd) {
        Some((c, e)) => (Some(c), e),
        None => (None, Vec::new()),
    };
    let now = bare.as_deref().unwrap_or(cmd);
    let masked = without_commit_message(now);
    let now = masked.as_deref().unwrap_or(now);
    let plain = without_trivia(now);
    let asked = plain.or(masked).or(bare)?;
    Some((asked, echoed))
}

/// The words of a shell command an answer may say back (`deploy --tag alpha` → `deploy`, `tag`,
/// `alpha`): at least 3 characters with a letter, at most 16 of them. See [`without_words`].
pub fn question_words(cmd: &str) -> Vec<&str> {
    let mut words: Vec<&str> = Vec::new();
    for w in cmd.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))) {
        let w = w.trim_matches(|c: char| matches!(c, '-' | '.' | '/'));
        if w.len() >= 3
            && w.len() <= 64
            && w.chars().any(char::is_alphabetic)
            && !words.contains(&w)
        {
            words.push(w);
            if words.len() == 16 {
                break;
            }
        }
    }
    words
}

/// `text` with each whole-word occurrence of `words` replaced by `§`: an answer that differs
/// only where it repeats the question's own words (`tag alpha rejected`, `tag beta rejected`) is
/// the same answer. Not on a line saying that something is not there (`ls: cannot access
/// 'dir-2': No such file or directory`): that answer is about the word itself, and a different
/// word asks about a different thing. `None` when no word is masked, or the text is too long to
/// be worth it (a long answer is told apart by the rest of it).
pub fn without_words(text: &str, words: &[&str]) -> Option<String> {
    if words.is_empty() || text.len() > 4 << 10 {
        return None;
    }
    let mut out = String::with_capacity(text.len());
    let mut hit = false;
    for line in text.split_inclusive('\n') {
        if says_missing(line) {
            out.push_str(line);
        } else {
            hit |= mask_words(line, words, &mut out);
        }
    }
    hit.then_some(out)
}

/// A line saying that what was asked about does not exist.
fn says_missing(line: &str) -> bool {
    const MISSING: [&str; 7] = [
        "no such file",
        "not found",
        "cannot access",
        "does not exist",
        "doesn't exist",
        "cannot find",
        "no match",
    ];
    let lower = line.to_ascii_lowercase();
    MISSING.iter().any(|m| lower.contains(m))
}

/// Appends `line` to `out` with `words` masked; whether any was.
fn mask_words(line: &str, words: &[&str], out: &mut String) -> bool {
    let b = line.as_bytes();
    let inner = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80;
    let (mut i, mut copied, mut hit) = (0, 0, false);
    while i < b.len() {
        if i > 0 && inner(b[i - 1]) || !inner(b[i]) {
            i += 1;
            continue;
        }
        let found = words.iter().find(|w| {
            b[i..].starts_with(w.as_bytes()) && !b.get(i + w.len()).is_some_and(|&c| inner(c))
        });
        match found {
            Some(w) => {
                out.push_str(&line[copied..i]);
                out.push('§');
                i += w.len();
                copied = i;
                hit = true;
            }
            None => i += 1,
        }
    }
    out.push_str(&line[copied..]);
    hit
}

/// `text` without the lines that are only one of `echoed` (what a command's literal echoes
/// printed); `None` when no line is.
pub fn without_lines(text: &str, echoed: &[String]) -> Option<String> {
    if echoed.is_empty() {
        return None;
    }
    let mut dropped = false;
    let kept: Vec<&str> = text
        .split('\n')
        .filter(|l| {
            let gone = echoed.iter().any(|e| e == l.trim());
            dropped |= gone;
            !gone
        })
        .collect();
    dropped.then(|| kept.join("\n"))
}

/// [`mask`] and then every remaining number and id masked too: a hex-looking word with a digit,
/// and every digit run, become `#`. Two outputs with the same shape say the same up to numbers.
pub fn shape(masked: &str) -> String {
    let b = masked.as_bytes();
    let mut out = String::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if !word(b[i]) {
            let e = run(b, i, |c| !word(c));
            out.push_str(&masked[i..e]);
            i = e;
            continue;
        }
        let e = run(b, i, word);
        let w = &b[i..e];
        if w.iter().any(u8::is_ascii_digit) && w.iter().all(u8::is_ascii_hexdigit) {
            out.push('#');
        } else {
            let mut k = 0;
            while k < w.len() {
                if w[k].is_ascii_digit() {
                    out.push('#');
                    k = run(w, k, |c| c.is_ascii_digit());
                } else {
                    let m = run(w, k, |c| !c.is_ascii_digit());
                    out.push_str(&masked[i + k..i + m]);
                    k = m;
                }
            }
        }
        i = e;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_answer_is_compared_without_the_words_it_says_back() {
        use super::{question_words, without_words};
        let words = question_words("node scripts/generate.js --run alpha && echo ok");
        assert_eq!(
            words,
            ["node", "scripts/generate.js", "run", "alpha", "echo"]
        );
        let a = without_words("[run alpha] TypeError at scripts/generate.js:12", &words);
        let b = without_words(
            "[run bravo] TypeError at scripts/generate.js:12",
            &question_words("node scripts/generate.js --run bravo"),
        );
        assert_eq!(a.as_deref(), Some("[§ §] TypeError at §:12"));
        assert_eq!(a, b);
        // Whole words only: a word inside another is the answer's own.
        assert_eq!(without_words("alphabet runner", &["alpha", "run"]), None);
        // A line saying the thing asked about is not there is about that very word.
        let ls = question_words("ls missing-dir-2");
        assert_eq!(
            without_words(
                "ls: cannot access 'missing-dir-2': No such file or directory",
                &ls
            ),
            None
        );
        assert_eq!(without_words("no match here", &words), None);
    }

    #[test]
    fn literal_echoes_are_labels_and_anything_else_is_the_command() {
        use super::{bare_command, without_lines, without_literal_echoes as strip};
        let (cmd, echoed) = strip("echo \"Attempt 3: retry\"; pytest tests -x").unwrap();
        assert_eq!(cmd, "pytest tests -x");
        assert_eq!(echoed, ["Attempt 3: retry"]);
        assert_eq!(
            strip("echo '== a  b ==' && make && echo done").unwrap(),
            (
                "make".to_string(),
                vec!["== a  b ==".to_string(), "done".to_string()]
            )
        );
        // Still the command: an echo that feeds, writes, expands, globs or takes a flag, an
        // echo alone, and echo inside another command.
        for kept in [
            "echo y | apt install x",
            "echo 1 > .attempt; ./retry.sh",
            "echo $HOME; ls",
            "echo *.rs; ls",
            "echo -n x; ls",
            "echo hello",
            "grep echo src/main.rs",
            "echo a || make",
            "cat <<EOF\necho x\nEOF",
        ] {
            assert_eq!(strip(kept), None, "{kept}");
        }
        assert_eq!(
            bare_command("echo try 2 # again\nnpm test").unwrap().0,
            "npm test"
        );
        assert_eq!(
            without_lines(
                "Exit code 1\nAttempt 3: retry\nFAILED x",
                &["Attempt 3: retry".into()]
            ),
            Some("Exit code 1\nFAILED x".into())
        );
        assert_eq!(without_lines("FAILED x", &["Attempt".into()]), None);
    }

    #[test]
    fn a_call_input_is_masked_only_where_a_run_makes_it_fresh() {
        use super::mask_input;
        let a = mask_input("cd /tmp/tmp.AbC123xyz0 && python repro.py").unwrap();
        assert_eq!(
            a,
            mask_input("cd /tmp/tmp.q9ZkLm0PwE && python repro.py").unwrap()
        );
        assert_eq!(
            mask_input("python -m x --out tmpk3j2_x9q"),
            mask_input("python -m x --out tmpa81bc0dd")
        );
        assert_eq!(
            mask_input("grep 2026-11-24T14:23:45Z app.log"),
            mask_input("grep 2026-11-24T14:25:01Z app.log")
        );
        assert_eq!(mask_input("npm test"), None);
        assert_eq!(mask_input("cat /tmp/report1.txt && kill 4242"), None);
        assert_eq!(mask_input("ls tmpfiles template attempt"), None);
        // An attempt number may be a flag's value (`--retry 3`): kept.
        assert_eq!(mask_input("deploy --try 3"), None);
        use super::without_shell_comments as strip;
        assert_eq!(strip("npm test  # once more").as_deref(), Some("npm test"));
        assert_eq!(
            strip("# step 2\nnpm test # again\nls").as_deref(),
            Some("npm test\nls")
        );
        assert_eq!(strip("echo '# not a comment' \"#x\" a#b ${#v}"), None);
        assert_eq!(strip("cat <<EOF > a.md\n# Title\nEOF"), None);
        assert_eq!(strip("npm test"), None);
    }

    use super::*;
    use proptest::prelude::*;
    use regex::bytes::Regex;

    /// The reference: the noise pattern loopgate compiled on every PostToolUse before the
    /// scanner, extended by the URL-id and spaced-seconds rules.
    fn reference(text: &str) -> String {
        static RE: std::sync::OnceLock<(Regex, Regex)> = std::sync::OnceLock::new();
        let (re, id) = RE.get_or_init(|| (Regex::new(concat!(
            "(?-u)",
            r"(?P<url>\bhttps?://[^\s'\x22<>)]+)",
            r"|(?P<ts>\d{4}-\d{2}-\d{2}(?:[T ]\d{2}[:_]\d{2}(?:[:_]\d{2}(?:[.,_]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b)",
            r"|(?P<dur>\b\d+(?:\.\d+)?(?:ns|us|ms|s|m|h)\b|\b\d+(?:\.\d+)?\s(?:ms|sec|secs|seconds?|mins?|minutes?|s)\b)",
            r"|(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)",
            r"|(?P<hex>\b(?:0x)?[0-9a-f]*(?:[0-9][a-f]|[a-f][0-9])[0-9a-f]*\b)",
            r"|(?P<pid>(?i:\bpid\b)[\s:=#]*\d+)",
            r"|(?P<attempt>(?i:\b(?:attempt|try|retry)\b)\s*#?\d+)",
            r"|(?P<tmp>(?:/tmp|/var/folders|/private/var)/[^\s'\x22:)]+)",
        ))
        .unwrap(), Regex::new(r"(?-u)[A-Za-z0-9_-]+").unwrap()));
        let out = re.replace_all(text.as_bytes(), |c: &regex::bytes::Captures| {
            if let Some(m) = c.name("url") {
                let s = m.as_bytes();
                let after = s.iter().position(|&x| x == b':').unwrap() + 3;
                let host = after
                    + s[after..]
                        .iter()
                        .position(|&x| x == b'/')
                        .unwrap_or(s.len() - after);
                let mut v = s[..host].to_vec();
                v.extend_from_slice(&id.replace_all(&s[host..], |t: &regex::bytes::Captures| {
                    let t = t.get(0).unwrap().as_bytes();
                    let all_digits = t.iter().all(u8::is_ascii_digit);
                    let has_digit = t.iter().any(u8::is_ascii_digit);
                    if (all_digits && t.len() >= 3) || (has_digit && t.len() >= 6) {
                        b"<id>".to_vec()
                    } else {
                        t.to_vec()
                    }
                }));
                return v;
            }
            for name in ["ts", "dur", "uuid", "hex", "pid", "attempt", "tmp"] {
                if let Some(m) = c.name(name) {
                    let s = m.as_bytes();
                    let digits = s.strip_prefix(b"0x").unwrap_or(s);
                    if name == "hex" && digits.len() < 7 {
                        return s.to_vec();
                    }
                    return format!("<{name}>").into_bytes();
                }
            }
            Vec::new()
        });
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Text built from the pieces the rules look at, so matches, near-misses and boundaries
    /// are all common.
    fn noisy() -> impl Strategy<Value = String> {
        let pieces = prop::sample::select(vec![
            "0",
            "1",
            "7",
            "12",
            "2026",
            "59",
            "3f9a8c1",
            "deadbeef",
            "cafe",
            "a1",
            "0x",
            "x",
            "-",
            ":",
            ".",
            ",",
            " ",
            "\t",
            "\n",
            "T",
            "Z",
            "+",
            "#",
            "=",
            "_",
            "/",
            "'",
            "\"",
            ")",
            "<",
            ">",
            "s",
            "ms",
            "ns",
            "m",
            "h",
            "sec",
            "secs",
            "seconds",
            "min",
            "minutes",
            "pid",
            "PID",
            "attempt",
            "Try",
            "retry",
            "/tmp/",
            "/var/folders/",
            "/private/var/",
            "http://",
            "https://",
            "api",
            "é",
            "🦀",
            "e89b",
            "123e4567",
            "426614174000",
            "ok",
            "?q=",
            "&",
            "runs",
            "v1",
            "12:34:56",
            "1:02:03",
            "2026-11-21",
            "2026-11-21T10:00",
            " 10:00:01",
            "T10:00:01",
            "+02:00",
            "-0200",
            ".123",
            ",5",
            "1.5",
            "250",
            "0x3f9a8c1d",
            "123e4567-e89b-12d3-a456-426614174000",
            "/tmp/a.b",
            "pid: 42",
            "attempt #3",
            "9 s",
            "http://h:80/a1b2c3d4/123?x=42",
            "1.5 seconds",
        ]);
        prop::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(
            std::env::var("LOOPGATE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
        ))]
        #[test]
        fn scanner_matches_the_reference_regex(text in noisy()) {
            prop_assert_eq!(mask(&text), reference(&text));
        }

        #[test]
        fn scanner_matches_the_reference_on_any_text(text in any::<String>()) {
            prop_assert_eq!(mask(&text), reference(&text));
        }
    }

    #[test]
    fn known_noise_is_masked() {
        for (input, want) in [
            ("at 2026-11-21T10:00:01.5+02:00 ok", "at <ts> ok"),
            ("12:04:59 start", "<ts> start"),
            ("took 250ms and 1.5s", "took <dur> and <dur>"),
            (
                "Time:        1.234 s, estimated 2 s",
                "Time:        <dur>, estimated <dur>",
            ),
            (
                "Tests run: 3, Failures: 0, Time elapsed: 0.05 s - in a.B",
                "Tests run: 3, Failures: 0, Time elapsed: <dur> - in a.B",
            ),
            (
                "Finished in 0.01234 seconds (files took 0.1 seconds to load)",
                "Finished in <dur> (files took <dur> to load)",
            ),
            (
                "ok  \texample.com/pkg\t0.123s",
                "ok  \texample.com/pkg\t<dur>",
            ),
            ("=== 3 passed in 0.12s ===", "=== 3 passed in <dur> ==="),
            (
                "test result: ok. 3 passed; finished in 0.01s",
                "test result: ok. 3 passed; finished in <dur>",
            ),
            ("  3 passing (25ms)", "  3 passing (<dur>)"),
            ("BUILD SUCCESSFUL in 3s", "BUILD SUCCESSFUL in <dur>"),
            (
                "Duration  1.2s (transform 20ms, setup 0ms)",
                "Duration  <dur> (transform <dur>, setup <dur>)",
            ),
            (
                "see https://github.com/o/r/actions/runs/123456789/job/a1b2c3d4e5 now",
                "see https://github.com/o/r/actions/runs/<id>/job/<id> now",
            ),
            (
                "GET http://localhost:3000/api/v1/items/42?req=abc123xyz",
                "GET http://localhost:3000/api/v1/items/42?req=<id>",
            ),
            ("pid 4242, PID=17", "<pid>, <pid>"),
            ("retry #3", "<attempt>"),
            ("wrote /tmp/tmp.Xa12/out: done", "wrote <tmp>: done"),
            ("build 3f9a8c1d cafe add1", "build <hex> cafe add1"),
            ("3 tests failed", "3 tests failed"),
            ("naïve café 🦀 12 ms", "naïve café 🦀 <dur>"),
        ] {
            assert_eq!(mask(input), want, "{input:?}");
        }
    }

    #[test]
    fn shape_masks_every_number_and_id() {
        assert_eq!(shape("3 tests failed"), shape("4 tests failed"));
        assert_eq!(shape("test_42_fails at line 7"), "test_#_fails at line #");
        assert_eq!(shape("commit 3f9a8c1 and a1"), "commit # and #");
        assert_eq!(shape("<ts> <dur> cafe"), "<ts> <dur> cafe");
        assert_ne!(shape("3 tests failed"), shape("3 tests passed"));
        assert_eq!(shape("naïve 12é"), "naïve #é");
    }

    #[test]
    fn a_commit_is_the_same_call_under_another_message() {
        use super::without_commit_message as m;
        assert_eq!(
            m(r#"git commit -m "fix: one""#).as_deref(),
            Some("git commit -m <msg>")
        );
        assert_eq!(
            m("git add -A && git commit -am 'two' && git push").as_deref(),
            Some("git add -A && git commit -am <msg> && git push")
        );
        assert_eq!(
            m("git commit --message=three --no-verify").as_deref(),
            Some("git commit --message=<msg> --no-verify")
        );
        let heredoc = "git commit -m \"$(cat <<'EOF'\nfix: don't (really)\nEOF\n)\" && git log -1";
        assert_eq!(
            m(heredoc).as_deref(),
            Some("git commit -m <msg> && git log -1")
        );
        assert_eq!(m("git log -m --oneline"), None, "not a commit");
        assert_eq!(m("echo commit -m x"), None, "no git");
        assert_eq!(m("git commit --amend --no-edit"), None, "no message");
    }

    #[test]
    fn a_command_is_the_same_question_however_its_output_is_shown() {
        use super::without_trivia as t;
        let same = [
            "npm test 2>&1 | tail -20",
            "npm test 2>&1",
            "npm  test",
            "timeout 120 npm test",
            "npm test | head -n 50 | tail -5",
            "npm test || true",
            "time npm test 2>/dev/null",
        ];
        for cmd in same {
            assert_eq!(t(cmd).as_deref(), Some("npm test"), "{cmd}");
        }
        assert_eq!(
            t(r#"cat "config/settings.yml""#).as_deref(),
            Some("cat config/settings.yml")
        );
        assert_eq!(
            t("cat ./config/settings.yml").as_deref(),
            Some("cat config/settings.yml")
        );
        assert_eq!(t("npm test"), None);
        assert_eq!(
            t("./gradlew build").as_deref(),
            None,
            "./ of the program is kept"
        );
        assert_eq!(
            t("grep -n \"a b\" src | head").as_deref(),
            Some("grep -n \"a b\" src"),
            "a quoted phrase stays one quoted word"
        );
        assert_eq!(
            t("npm test | grep FAIL"),
            None,
            "a filter asks something else"
        );
        assert_eq!(t("ls | head"), Some("ls".to_string()));
    }
}
