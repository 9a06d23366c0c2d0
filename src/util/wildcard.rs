//! Shell-style wildcard matching in time linear in the text for any pattern. The `glob` crate
//! backtracks: one word of many `*` and repeated letters took 15 s against a protected path,
//! past the CLI's hook timeout, and the call then ran unjudged. Here the pattern is a small
//! automaton whose states are all advanced together, one text character at a time.

/// What to treat as special, as in `glob::MatchOptions`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// `*`, `?` and `[…]` never match `/`.
    pub literal_separator: bool,
    /// `*`, `?` and `[…]` never match a `.` that starts the text or follows a `/`.
    pub literal_leading_dot: bool,
}

impl Options {
    /// As the shell expands a path word.
    pub const PATH: Options = Options {
        literal_separator: true,
        literal_leading_dot: true,
    };
}

#[derive(Debug, Clone)]
enum Tok {
    Char(char),
    Any,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    /// `*`: any run of characters (within one path component under `literal_separator`).
    Star,
    /// `**`: any run of characters, separators included.
    Deep,
    /// `**/`: zero or more whole directories; two states, at a component's start and inside one.
    DirStart,
    DirInside,
}

/// A pattern with a `[` that never closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unclosed;

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Pattern {
    toks: Vec<Tok>,
    /// How many characters a match needs at least (each non-star token takes one).
    min_len: usize,
}

impl Pattern {
    /// Compiles `pattern`; an unclosed `[` is an error, as in the `glob` crate.
    pub fn new(pattern: &str) -> Result<Pattern, Unclosed> {
        let chars: Vec<char> = pattern.chars().collect();
        let mut toks = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    let mut n = 0;
                    while i < chars.len() && chars[i] == '*' {
                        n += 1;
                        i += 1;
                    }
                    // A run of stars is one token: `***…` cannot multiply the states.
                    let whole_component =
                        n >= 2 && (toks.is_empty() || matches!(toks.last(), Some(Tok::Char('/'))));
                    if whole_component && chars.get(i) == Some(&'/') {
                        i += 1;
                        if !matches!(toks.last(), Some(Tok::DirInside)) {
                            toks.push(Tok::DirStart);
                            toks.push(Tok::DirInside);
                        }
                    } else if n >= 2 && whole_component && i == chars.len() {
                        toks.push(Tok::Deep);
                    } else if !matches!(toks.last(), Some(Tok::Star)) {
                        toks.push(Tok::Star);
                    }
                    continue;
                }
                '?' => toks.push(Tok::Any),
                '[' => {
                    let mut j = i + 1;
                    let negated = matches!(chars.get(j), Some('!'));
                    if negated {
                        j += 1;
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let c = *chars.get(j).ok_or(Unclosed)?;
                        if c == ']' && !first {
                            break;
                        }
                        first = false;
                        if chars.get(j + 1) == Some(&'-')
                            && chars.get(j + 2).is_some_and(|&e| e != ']')
                        {
                            ranges.push((c, chars[j + 2]));
                            j += 3;
                        } else {
                            ranges.push((c, c));
                            j += 1;
                        }
                    }
                    toks.push(Tok::Class { negated, ranges });
                    i = j;
                }
                c => toks.push(Tok::Char(c)),
            }
            i += 1;
        }
        let min_len = toks
            .iter()
            .filter(|t| !matches!(t, Tok::Star | Tok::Deep | Tok::DirStart | Tok::DirInside))
            .count();
        Ok(Pattern { toks, min_len })
    }

    /// Whether the whole of `text` matches, no special treatment of `/` or `.`.
    pub fn matches(&self, text: &str) -> bool {
        self.matches_with(text, Options::default())
    }

    pub fn matches_with(&self, text: &str, opts: Options) -> bool {
        let text: Vec<char> = text.chars().collect();
        if self.min_len > text.len() {
            return false;
        }
        let n = self.toks.len();
        let mut cur = vec![false; n + 1];
        let mut next = vec![false; n + 1];
        cur[0] = true;
        self.close(&mut cur);
        let mut prev = None;
        for &c in &text {
            let leading_dot =
                opts.literal_leading_dot && c == '.' && matches!(prev, None | Some('/'));
            let sep = c == '/';
            // What a wildcard may consume here.
            let wild_ok = !(leading_dot || opts.literal_separator && sep);
            next.iter_mut().for_each(|s| *s = false);
            let mut any = false;
            for s in 0..n {
                if !cur[s] {
                    continue;
                }
                let (stay, advance) = match &self.toks[s] {
                    Tok::Char(p) => (false, *p == c),
                    Tok::Any => (false, wild_ok),
                    Tok::Class { negated, ranges } => {
                        let inside = ranges.iter().any(|&(a, b)| a <= c && c <= b);
                        (false, wild_ok && inside != *negated)
                    }
                    Tok::Star => (wild_ok, false),
                    Tok::Deep => (!leading_dot, false),
                    Tok::DirStart => {
                        // An empty component (`a//b`) keeps the start; a character begins one.
                        if sep {
                            (true, false)
                        } else {
                            (false, !leading_dot)
                        }
                    }
                    Tok::DirInside => {
                        if sep {
                            // The component ended: back to a component's start.
                            next[s - 1] = true;
                            any = true;
                        }
                        (!sep, false)
                    }
                };
                if stay {
                    next[s] = true;
                    any = true;
                }
                if advance {
                    next[s + 1] = true;
                    any = true;
                }
            }
            if !any {
                return false;
            }
            self.close(&mut next);
            std::mem::swap(&mut cur, &mut next);
            prev = Some(c);
        }
        cur[n]
    }

    /// Adds the states reached without consuming a character: past a star, past `**/`.
    fn close(&self, set: &mut [bool]) {
        for s in 0..self.toks.len() {
            if !set[s] {
                continue;
            }
            match self.toks[s] {
                Tok::Star | Tok::Deep => set[s + 1] = true,
                // Zero directories: straight past both states.
                Tok::DirStart => set[s + 2] = true,
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, t: &str) -> bool {
        Pattern::new(p).unwrap().matches_with(t, Options::PATH)
    }

    #[test]
    fn agrees_with_the_shell() {
        assert!(m("*.toml", "loopgate.toml"));
        assert!(!m("*.toml", "a/loopgate.toml"));
        assert!(!m("*", ".claude"));
        assert!(m(".c*", ".claude"));
        assert!(m(
            "/h/*/l?opgate/[a-c]onfig.tom[!x]",
            "/h/u/loopgate/config.toml"
        ));
        assert!(!m("/h/*/x", "/h/u/v/x"));
        assert!(m("/h/**/x", "/h/u/v/x"));
        assert!(m("/h/**/x", "/h/x"));
        assert!(m("/h/**", "/h/u/v/x"));
        assert!(m("[]]", "]"));
        assert!(!m("[!a-z]", "q"));
        assert!(Pattern::new("[abc").is_err());
        assert!(Pattern::new("*a*b*").unwrap().matches("xxaxxbxx"));
    }

    /// The word of the issue: many stars and repeated letters against a long path. The old
    /// matcher took seconds; this one must stay far below the hook's budget.
    #[test]
    fn pathological_words_stay_linear() {
        let word = format!("/{}b", "*a".repeat(5000));
        let text = format!("/{}", "a".repeat(4000));
        let p = Pattern::new(&word).unwrap();
        let t = std::time::Instant::now();
        assert!(!p.matches_with(&text, Options::PATH));
        assert!(!p.matches(&"a".repeat(3000)));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            t.elapsed()
        );
    }
}
