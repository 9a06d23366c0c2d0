//! Short previews of tool input for messages, state and the event log, with secrets masked:
//! the log must never become a second copy of the user's credentials.

use regex::bytes::Regex;
use serde_json::Value;
use std::sync::OnceLock;

const PREVIEW_CHARS: usize = 80;

fn secrets() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(concat!(
            // ASCII-only bytes (`(?-u)`): secrets are ASCII, and without Unicode classes the
            // pattern compiles several times faster.
            "(?-u)",
            // Private keys, whole (or to the end of a clipped text).
            r"(?P<pem>-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)(?s:.*?)(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\z)",
            // key = value, key: value, "key": "value", KEY_WITH_SECRET_IN_IT=value.
            r#"|(?P<kv>(?i:[A-Za-z0-9_.-]*(?:auth|key|secret|password|passwd|passphrase|pwd|token|credentials?|cookie|signature|webhook)[A-Za-z0-9_.-]*)["']?\s*[:=]\s*(?i:bearer\s+|basic\s+|token\s+)?)(?:"[^"\n]*"|'[^'\n]*'|[^\s'"&,;}\])`]+)"#,
            // --password X, --password=X, --token X …
            r"|(?P<flag>(?i:--?(?:password|passwd|pass|token|secret|api-key|apikey|access-token|auth-token|client-secret))(?:=|\s+))[^\s'\x22`)]+",
            // mysql -pPASS (only for the MySQL family: -p is a common flag elsewhere).
            r"|(?P<mysql>(?i:\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b)[^\n|;&]*?\s-p)[^\s'\x22`)]+",
            r"|(?P<bearer>(?i:\bbearer\s+))[A-Za-z0-9._~+/=-]{8,}",
            // A bare `pass` key (`DB_PASS=`, `SMTP_PASS_1=`, JSON "pass"), not `bypass`/`compass`.
            r#"|(?P<pass>(?i:(?:\b|_)pass(?:_[A-Za-z0-9_]*)?)["']?\s*[:=]\s*)(?:"[^"\n]*"|'[^'\n]*'|[^\s'"&,;}\])`]+)"#,
            // The password options of programs whose `-p`/`-a` is a password (elsewhere `-p` is
            // a common flag): `docker login -p`, `sshpass -p`, `redis-cli -a`.
            r"|(?P<progpw>(?i:\b(?:docker|podman|nerdctl|buildah|skopeo|helm|oras)\b[^\n|;&]*?\blogin\b[^\n|;&]*?\s-p(?:=|\s+)|\bsshpass\s+-p\s*|\bredis-cli\b[^\n|;&]*?\s-a\s+|\bhtpasswd\s+-[A-Za-z]*b[A-Za-z]*\s+(?:-\S+\s+)*\S+\s+\S+\s+))(?:'[^'\n]*'|\x22[^\x22\n]*\x22|[^\s'\x22`)]+)",
            // A password or token as the word after its name: netrc's `login u password p`,
            // npm's `config set //host/:_authToken VALUE`.
            r"|(?P<spaced>(?i:\b(?:login|user)\s+\S+\s+(?:password|passwd)\s+|:_(?:authToken|auth|password)\s+))[^\s'\x22`)]+",
            // curl's `-u user:pass` / `--user user:pass`: the password after the colon.
            r"|(?P<userpw>(?:\s-u\s*|--user(?:=|\s+))['\x22]?[^\s:'\x22]+:)[^\s'\x22`)]+",
            // An Azure SAS signature (`?sv=…&sig=…`), and `SharedAccessSignature=sr=…&sig=…`.
            r"|(?P<sig>(?:[?&;\s'\x22]|^)sig=)[^\s'\x22&;`)]+",
            // Known token shapes.
            r"|\b(?:sk-(?:ant-|proj-)?[A-Za-z0-9_-]{8,}|[sr]k_(?:live|test)_[A-Za-z0-9]{8,}|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}|(?:AKIA|ASIA)[0-9A-Z]{16}|xox[abeporst]-[A-Za-z0-9-]{8,}|xapp-[A-Za-z0-9-]{8,}|AIza[0-9A-Za-z_-]{20,}|hf_[A-Za-z0-9]{16,}|npm_[A-Za-z0-9]{20,}|glpat-[A-Za-z0-9_-]{16,}|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,})",
            // A token prefix cut by a clip (`ghp_abc…`): what is left is still part of a secret.
            r"|\b(?:sk-|[sr]k_(?:live|test)_|gh[pousr]_|github_pat_|AKIA|ASIA|xox[abeporst]-|xapp-|AIza|hf_|npm_|glpat-|eyJ)[A-Za-z0-9_.-]*…",
            // Slack's incoming webhooks: the URL is the credential.
            r"|(?P<hook>(?i:hooks\.slack\.com/services/))[A-Za-z0-9/_-]+",
            // URL credentials; the password may itself hold '@' (the last one ends it), and the
            // user may be empty (`redis://:pw@host`).
            r"|(?P<url>[a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s/]*@",
            // A URL's user info alone (`https://ghp_…@github.com`): a credential position.
            r"|(?P<user>[a-z][a-z0-9+.-]*://)[^\s:/@'\x22]+@",
            // Webhook URLs and bot URLs carry their credential in the path.
            r"|(?P<hookpath>(?i:https?://[^\s/'\x22]*/(?:[^\s/'\x22]+/)*?(?:webhooks?|hooks)/|https?://api\.telegram\.org/bot))[^\s'\x22`)]+",
        ))
        .expect("secret pattern compiles")
    })
}

/// Fragments every alternative of the secret pattern contains (compared in lower case): a text
/// with none of them cannot match, and skipping the pattern spares most hook calls its compile
/// time, which is most of what a PreToolUse call costs.
const TRIGGERS: &[&str] = &[
    "auth",
    "key",
    "token",
    "secret",
    "pass",
    "pwd",
    "bearer",
    "sk-",
    "sk_",
    "rk_",
    "gh",
    "akia",
    "asia",
    "xox",
    "aiza",
    "hf_",
    "npm_",
    "glpat",
    "eyj",
    "://",
    "private",
    "credential",
    "cookie",
    "mysql",
    "mariadb",
    "curl",
    "login",
    "redis",
    "sig=",
    "xapp",
    "hook",
];

/// For each byte, the triggers that start with it (either case), as a bit set over [`TRIGGERS`].
const TRIGGERS_BY_START: [u32; 256] = {
    assert!(TRIGGERS.len() <= 32, "one bit per trigger");
    let mut by_start = [0u32; 256];
    let mut i = 0;
    while i < TRIGGERS.len() {
        let c = TRIGGERS[i].as_bytes()[0];
        by_start[c.to_ascii_lowercase() as usize] |= 1 << i;
        by_start[c.to_ascii_uppercase() as usize] |= 1 << i;
        i += 1;
    }
    by_start
};

/// Whether a trigger occurs in `text`, ASCII case ignored. One pass: at each byte only the
/// triggers starting with it are compared (twenty-five substring searches, each with its own
/// set-up, were a tenth of a PreToolUse call).
fn might_hold_secret(text: &str) -> bool {
    let b = text.as_bytes();
    (0..b.len()).any(|i| {
        let mut set = TRIGGERS_BY_START[b[i] as usize];
        while set != 0 {
            let t = TRIGGERS[set.trailing_zeros() as usize].as_bytes();
            if b.get(i..i + t.len())
                .is_some_and(|w| w.eq_ignore_ascii_case(t))
            {
                return true;
            }
            set &= set - 1;
        }
        false
    })
}

/// Replaces anything that looks like a credential with `***`, keeping the key name for context.
pub fn mask(text: &str) -> String {
    if !might_hold_secret(text) {
        return mask_bare_keys(text);
    }
    let out = secrets().replace_all(text.as_bytes(), |c: &regex::bytes::Captures| {
        for keep in [
            "pem", "kv", "flag", "mysql", "bearer", "pass", "progpw", "spaced", "userpw", "sig",
            "hook", "user", "hookpath",
        ] {
            if let Some(m) = c.name(keep) {
                return [m.as_bytes(), b"***"].concat();
            }
        }
        if let Some(m) = c.name("url") {
            return [m.as_bytes(), b"***@"].concat();
        }
        b"***".to_vec()
    });
    // Matches start and end on ASCII bytes, so no character is ever cut.
    mask_bare_keys(&String::from_utf8_lossy(&out))
}

/// The runs of bytes in `in_run` that `accept` takes (given the run and the byte after it):
/// one pass, no pattern.
fn runs<'b>(
    b: &'b [u8],
    in_run: impl Fn(u8) -> bool + 'b,
    accept: impl Fn(&[u8], Option<u8>) -> bool + 'b,
) -> impl Iterator<Item = (usize, usize)> + 'b {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() {
            if !in_run(b[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < b.len() && in_run(b[i]) {
                i += 1;
            }
            if accept(&b[start..i], b.get(i).copied()) {
                return Some((start, i));
            }
        }
        None
    })
}

/// 40-character runs of base64 letters, the shape of an AWS secret access key, which no name
/// or prefix announces (a credentials CSV line, `aws configure` answers, `echo … > creds`).
fn bare_key_runs(b: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let in_key = |c: u8| c.is_ascii_alphanumeric() || c == b'/' || c == b'+';
    // Random keys mix both cases and digits; a git id is lower-case hex, a path has several
    // slashes, a long identifier rarely holds a digit in both halves.
    runs(b, in_key, |run, next| {
        run.len() == 40
            && next != Some(b'=')
            && run.iter().any(u8::is_ascii_uppercase)
            && run.iter().any(u8::is_ascii_lowercase)
            && run.iter().any(u8::is_ascii_digit)
            && run.iter().filter(|&&c| c == b'/').count() <= 2
    })
}

/// Runs that look like a random token whatever announces them (Vault's `hvs.…`, an age
/// `AGE-SECRET-KEY-1…`, a PyPI `pypi-…`, a bot token, a key of a service loopgate never heard
/// of): 32 characters or more of base64/base64url letters holding letters and digits, spread
/// the way random text is (at least 4.4 bits a character; words, identifiers and paths stay
/// below 4.1), and not a hexadecimal digest or id (git ids, SHA-256, UUIDs are not secrets).
fn random_token_runs(b: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let in_token = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'/' | b'+' | b'-' | b'_');
    runs(b, in_token, |run, _| {
        run.len() >= 32
            && run.iter().any(u8::is_ascii_digit)
            && run.iter().any(u8::is_ascii_alphabetic)
            && !run.iter().all(|c| c.is_ascii_hexdigit() || *c == b'-')
            && run.iter().filter(|&&c| c == b'/').count() <= 2
            && bits_per_char(run) >= 4.4
    })
}

/// Shannon entropy of the bytes of `run`, in bits a character.
fn bits_per_char(run: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    for &c in run {
        counts[c as usize] += 1;
    }
    let n = run.len() as f64;
    counts
        .iter()
        .filter(|&&k| k > 0)
        .map(|&k| {
            let p = f64::from(k) / n;
            -p * p.log2()
        })
        .sum()
}

fn mask_bare_keys(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut at = 0;
    let mut runs: Vec<(usize, usize)> = bare_key_runs(b).chain(random_token_runs(b)).collect();
    runs.sort_unstable();
    for (start, end) in runs {
        if start < at {
            continue;
        }
        out.extend_from_slice(&b[at..start]);
        out.extend_from_slice(b"***");
        at = end;
    }
    if at == 0 {
        return text.to_string();
    }
    out.extend_from_slice(&b[at..]);
    // The run is ASCII, so no character is cut.
    String::from_utf8_lossy(&out).into_owned()
}

/// A JSON key whose string value is a credential whatever it looks like (an MCP tool's
/// `{"password": "…"}`, request headers as an object): the key is not part of the string, so
/// the text pattern alone cannot see it.
fn secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .map(|c| match c {
            '-' | '.' | ' ' => '_',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    const PARTS: &[&str] = &[
        "password",
        "passwd",
        "passphrase",
        "secret",
        "api_key",
        "apikey",
        "access_key",
        "accesskey",
        "account_key",
        "accountkey",
        "private_key",
        "privatekey",
        "authorization",
        "credential",
        "cookie",
        "signature",
    ];
    PARTS.iter().any(|p| k.contains(p))
        || k.ends_with("token")
        || k.ends_with("_pass")
        || matches!(k.as_str(), "pass" | "pwd" | "sig" | "auth")
}

/// Masks every string in a JSON value, in place: the one pass text goes through on its way to
/// the event log, the state file, `status` and `report`.
pub fn mask_value(v: &mut Value) {
    match v {
        Value::String(s) => *s = mask(s),
        Value::Array(a) => a.iter_mut().for_each(mask_value),
        Value::Object(m) => m.iter_mut().for_each(|(k, v)| match v {
            Value::String(s) if secret_key(k) && !s.is_empty() => *s = "***".into(),
            v => mask_value(v),
        }),
        _ => {}
    }
}

/// A value serialised as JSON with every string masked.
pub fn masked_json<T: serde::Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut v = serde_json::to_value(value)?;
    mask_value(&mut v);
    serde_json::to_vec(&v)
}

/// Masks what a verdict says before it is shown (the answer to Claude Code) or stored.
pub fn mask_verdict(v: &mut crate::protocol::verdict::Verdict) {
    v.reason = mask(&v.reason);
    v.evidence.values_mut().for_each(mask_value);
}

/// What the call was about, in a few words: the command, the path or the pattern.
pub fn target(tool: &str, input: &Value) -> String {
    let field = |k: &str| input.get(k).and_then(Value::as_str);
    let raw = match tool {
        "Bash" => field("command"),
        "Grep" | "Glob" => field("pattern"),
        "WebFetch" => field("url"),
        "WebSearch" => field("query"),
        "Task" | "Agent" => field("description"),
        _ => None,
    }
    .or_else(|| field("file_path"))
    .or_else(|| field("notebook_path"))
    .or_else(|| field("path"))
    .or_else(|| field("command"))
    .or_else(|| field("url"));
    let text = match raw {
        Some(s) => s.to_string(),
        None => {
            let mut buf = Vec::new();
            crate::util::canon::write_canonical(input, &mut buf);
            String::from_utf8_lossy(&buf[..buf.len().min(4 * PREVIEW_CHARS)]).into_owned()
        }
    };
    // Mask before clipping, so a clipped secret cannot slip past the pattern.
    crate::protocol::payload::clip(&mask(&text), PREVIEW_CHARS)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The one-pass check finds a trigger exactly where lower-casing the text and searching
        /// for each trigger does (the reference it replaced).
        #[test]
        fn trigger_scan_matches_lowercase_contains(
            text in "(?s)(.{0,12}(AUTH|Key|tOkEn|sk-|gh|://|eyJ|Mysql|é|x){0,3}.{0,12}){0,3}"
        ) {
            let lower = text.to_ascii_lowercase();
            let reference = super::TRIGGERS.iter().any(|t| lower.contains(t));
            prop_assert_eq!(super::might_hold_secret(&text), reference);
        }
    }

    use super::*;
    use serde_json::json;

    /// Every format issue 10 lists, and the ones masked before: (text, the secret in it).
    pub fn secret_table() -> Vec<(String, String)> {
        let v: Value = serde_json::from_str(include_str!("../../tests/data/secrets.json")).unwrap();
        serde_json::from_value(v["cases"].clone()).unwrap()
    }

    #[test]
    fn secrets_are_masked() {
        let table = secret_table();
        assert!(table.len() >= 25);
        for (text, secret) in &table {
            let m = mask(text);
            assert!(!m.contains(secret), "{text} -> {m}");
            assert!(m.contains("***"), "{m}");
        }
        assert_eq!(mask("cargo test --release"), "cargo test --release");
        assert_eq!(mask("cargo test -p loopgate"), "cargo test -p loopgate");
        assert_eq!(mask("mkdir -p build/keys"), "mkdir -p build/keys");
        assert_eq!(
            mask("Bash `export API_KEY=abc123` failed"),
            "Bash `export API_KEY=***` failed"
        );
        assert!(!might_hold_secret("npm test -- --watch=false"));
        // The password forms of issue 21 stay narrow: a port, a flag, a commit id are left alone.
        for plain in [
            "docker run -p 8080:80 app",
            "ssh -p 2222 host",
            "git push -u origin main",
            "bypass=1 compass=north ./run",
            "git show 0123456789abcdef0123456789abcdef01234567",
            "curl -s https://example.com",
            // A git id, a path, a long identifier: 40 characters, but not an AWS secret's shape.
            "git show 0123456789abcdef0123456789abcdef01234567",
            "cat src/main/java/com/example/app/Ctl1.java",
            "export DESIGN=bold signal=3 assignee=bob",
            "cargo test ThisIsAVeryLongIdentifierNameForTestingX",
            "curl https://example.com/?page=2&sort=asc",
            // Long runs that are not random: digests and ids in hex, identifiers, paths.
            "sha256sum: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "docker rm 550e8400-e29b-41d4-a716-446655440000",
            "cargo test test_parse_config_with_2_files_and_nested_dirs",
            "ls tests/e2e/plugin_sanction_with_long_names_2024",
            "git clone https://github.com/loopgate/loopgate.git",
        ] {
            assert_eq!(mask(plain), plain);
        }
        let mut v = serde_json::json!({"a": ["PGPASSWORD=pgsecret99"], "b": 1});
        mask_value(&mut v);
        assert!(!v.to_string().contains("pgsecret99"), "{v}");
        // A credential named by its JSON key (an MCP tool's input, headers as an object) is
        // masked whatever its value looks like; a count or a plain field beside it is not.
        let mut v = json!({"password": "plain", "headers": {"X-Api-Key": "k1", "Authorization": "abc"},
            "access_token": "t", "max_tokens": 5, "tokens": "12k", "query": "select 1"});
        mask_value(&mut v);
        for gone in ["plain", "k1", "abc", "\"t\""] {
            assert!(!v.to_string().contains(gone), "{v}");
        }
        assert_eq!(v["max_tokens"], 5);
        assert_eq!(v["tokens"], "12k");
        assert_eq!(v["query"], "select 1");
    }

    #[test]
    fn target_picks_the_meaningful_field() {
        assert_eq!(
            target("Bash", &json!({"command": "npm test", "description": "d"})),
            "npm test"
        );
        assert_eq!(
            target("Edit", &json!({"file_path": "/p/a.rs", "old_string": "x"})),
            "/p/a.rs"
        );
        assert!(target("mcp__x__y", &json!({"q": 1})).contains("\"q\":1"));
    }
}
