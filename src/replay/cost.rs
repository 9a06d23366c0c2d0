//! What a loop cost: the calls and tokens the model spent between a loop's first repeat and its
//! end, read from the session's transcript (its assistant messages carry token usage).
//!
//! Only the person's commands (`report`, `status --session`, `replay`) read transcripts; no hook
//! call does. Prices are list prices, and only for the models in [`PRICES`]
//! (`replay::pricing`, which the loop budget shares).

use serde::Serialize;
use serde_json::{json, Value};

pub use super::pricing::{price, Usage, PRICES, PRICES_DATE};

/// One model response: the lines of a transcript that share a `message.id`.
#[derive(Debug, Clone, Default)]
struct Step {
    at_ms: u64,
    model: String,
    usage: Usage,
    /// Its tool calls: `tool_use` id, and the call itself (name and input) to spot repeats.
    calls: Vec<(String, String)>,
    /// A person's prompt, not a model response: a loop does not go on across one.
    prompt: bool,
}

/// A transcript as a list of responses and prompts, in order.
#[derive(Debug, Clone, Default)]
pub struct Transcript {
    steps: Vec<Step>,
}

/// A transcript line's `timestamp`, in ms since the epoch (0 when it has none).
pub fn ms(line: &Value) -> u64 {
    line["timestamp"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64)
}

/// Reads a Claude Code transcript's text; lines it does not understand are skipped.
pub fn read(text: &str) -> Transcript {
    let mut steps: Vec<Step> = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let msg = &v["message"];
        match v["type"].as_str() {
            Some("user") if msg["content"].is_string() && v["isMeta"] != true => {
                steps.push(Step {
                    at_ms: ms(&v),
                    prompt: true,
                    ..Step::default()
                });
                ids.push(String::new());
            }
            Some("assistant") => {
                let id = msg["id"].as_str().unwrap_or("").to_string();
                let calls = msg["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| c["type"] == "tool_use")
                    .map(|c| {
                        let id = c["id"].as_str().unwrap_or("").to_string();
                        (id, format!("{}{}", c["name"], c["input"]))
                    });
                let usage = Usage::of(&msg["usage"]);
                // Claude Code writes one line per content block, each with the message's usage.
                if !id.is_empty() && ids.last() == Some(&id) {
                    let last = steps.last_mut().expect("a step per id");
                    last.calls.extend(calls);
                    last.usage = usage;
                    continue;
                }
                steps.push(Step {
                    at_ms: ms(&v),
                    model: msg["model"].as_str().unwrap_or("").to_string(),
                    usage,
                    calls: calls.collect(),
                    prompt: false,
                });
                ids.push(id);
            }
            _ => {}
        }
    }
    Transcript { steps }
}

/// A decision loopgate took (or would have): the detector, the call it was about, when.
#[derive(Debug, Clone)]
pub struct Decision {
    pub detector: String,
    pub tool_use_id: Option<String>,
    pub at_ms: u64,
}

/// What one loop cost.
#[derive(Debug, Clone, Serialize)]
pub struct LoopCost {
    pub detector: String,
    /// The loop's first repeat, and the response that ended it (the last decision's).
    pub from: String,
    pub to: String,
    pub decisions: usize,
    pub calls: usize,
    pub tokens: u64,
    pub usage: Usage,
    /// The model of most of the loop's responses.
    pub model: String,
    /// At list price ([`PRICES`]); `None` when the model is not in the table.
    pub list_price_usd: Option<f64>,
}

impl Transcript {
    /// The response holding call `id`, else the last response at or before `at_ms`.
    fn step_of(&self, d: &Decision) -> Option<usize> {
        if let Some(id) = &d.tool_use_id {
            if let Some(i) = self
                .steps
                .iter()
                .position(|s| s.calls.iter().any(|(c, _)| c == id))
            {
                return Some(i);
            }
        }
        self.steps
            .iter()
            .rposition(|s| !s.prompt && s.at_ms <= d.at_ms)
    }

    /// Where the loop that `d` is about began repeating: the second of the same call in a row
    /// within the turn (the first one was not yet a loop), else `d`'s own response.
    fn first_repeat(&self, at: usize, d: &Decision) -> usize {
        let key = d.tool_use_id.as_ref().and_then(|id| {
            self.steps[at]
                .calls
                .iter()
                .find(|(c, _)| c == id)
                .map(|(_, k)| k.clone())
        });
        let Some(key) = key else { return at };
        let mut same: Vec<usize> = vec![at];
        for i in (0..at).rev() {
            let s = &self.steps[i];
            if s.prompt {
                break;
            }
            if s.calls.iter().any(|(_, k)| *k == key) {
                same.push(i);
            }
        }
        // `same` runs newest first: the second-oldest is the first repeat.
        if same.len() >= 2 {
            same[same.len() - 2]
        } else {
            at
        }
    }

    /// One cost per loop: decisions of one detector with no prompt of the person between them.
    pub fn loops(&self, decisions: &[Decision]) -> Vec<LoopCost> {
        let mut placed: Vec<(usize, &Decision)> = decisions
            .iter()
            .filter_map(|d| Some((self.step_of(d)?, d)))
            .collect();
        placed.sort_by_key(|(i, d)| (*i, d.at_ms));
        let mut groups: Vec<Vec<(usize, &Decision)>> = Vec::new();
        for (i, d) in placed {
            let joins = groups.iter_mut().rev().find(|g| {
                let (last, ld) = g[g.len() - 1];
                ld.detector == d.detector && !self.steps[last..=i].iter().any(|s| s.prompt)
            });
            match joins {
                Some(g) => g.push((i, d)),
                None => groups.push(vec![(i, d)]),
            }
        }
        // Each group's span of responses; spans that overlap are one loop that several detectors
        // saw, counted once.
        let mut spans: Vec<(usize, usize, Vec<String>, usize)> = groups
            .iter()
            .map(|g| {
                let (first, d0) = g[0];
                let end = g.iter().map(|(i, _)| *i).max().unwrap_or(first);
                (
                    self.first_repeat(first, d0),
                    end,
                    vec![d0.detector.clone()],
                    g.len(),
                )
            })
            .collect();
        spans.sort_by_key(|s| (s.0, s.1));
        let mut merged: Vec<(usize, usize, Vec<String>, usize)> = Vec::new();
        for s in spans {
            match merged.last_mut() {
                Some(m) if s.0 <= m.1 => {
                    m.1 = m.1.max(s.1);
                    for d in s.2 {
                        if !m.2.contains(&d) {
                            m.2.push(d);
                        }
                    }
                    m.3 += s.3;
                }
                _ => merged.push(s),
            }
        }
        merged
            .into_iter()
            .map(|(start, end, detectors, n)| self.cost(start, end, detectors.join("+"), n))
            .collect()
    }

    fn cost(&self, start: usize, end: usize, detector: String, decisions: usize) -> LoopCost {
        let span = &self.steps[start..=end];
        let mut usage = Usage::default();
        let mut models: Vec<(&str, usize)> = Vec::new();
        for s in span.iter().filter(|s| !s.prompt) {
            usage.add(&s.usage);
            match models.iter_mut().find(|(m, _)| *m == s.model) {
                Some(m) => m.1 += 1,
                None => models.push((&s.model, 1)),
            }
        }
        let model = models
            .iter()
            .max_by_key(|(_, n)| *n)
            .map_or("", |(m, _)| *m)
            .to_string();
        LoopCost {
            detector,
            from: crate::platform::clock::rfc3339(span[0].at_ms),
            to: crate::platform::clock::rfc3339(span[span.len() - 1].at_ms),
            decisions,
            calls: span.iter().map(|s| s.calls.len()).sum(),
            tokens: usage.total(),
            usage,
            list_price_usd: (models.len() == 1).then(|| price(&model, &usage)).flatten(),
            model,
        }
    }
}

/// The largest transcript read for a loop's cost.
const MAX_TRANSCRIPT: u64 = 1 << 30;

/// `12,345`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// One line per loop, then a total: what `report`, `status --session` and `replay` print.
pub fn describe(loops: &[LoopCost], indent: &str) -> Vec<String> {
    let mut out = Vec::new();
    for l in loops {
        out.push(format!(
            "{indent}{} loop {} → {}: {}, {} tokens{}",
            l.detector,
            short_time(&l.from),
            short_time(&l.to),
            crate::util::words::count(l.calls as u64, "call"),
            thousands(l.tokens),
            priced(l.list_price_usd, &l.model)
        ));
    }
    out
}

/// The total of `loops`: calls, tokens, and the list price of those whose model is known.
pub fn total(loops: &[LoopCost]) -> String {
    let calls: usize = loops.iter().map(|l| l.calls).sum();
    let tokens: u64 = loops.iter().map(|l| l.tokens).sum();
    let priced: Vec<f64> = loops.iter().filter_map(|l| l.list_price_usd).collect();
    let money = match priced.len() {
        0 => String::new(),
        n if n == loops.len() => format!(", ${:.2} at list price", priced.iter().sum::<f64>()),
        n => format!(
            ", ${:.2} at list price for the {n} of them on a model with a list price here",
            priced.iter().sum::<f64>()
        ),
    };
    format!(
        "spent inside {}: {}, {} tokens{money}",
        crate::util::words::count(loops.len() as u64, "loop"),
        crate::util::words::count(calls as u64, "call"),
        thousands(tokens)
    )
}

/// The loops of each session in `events` (lines of `events.jsonl`) whose transcript is at hand,
/// by session; a session whose transcript is gone is left out.
pub fn from_events(events: &[Value]) -> Vec<(String, Vec<LoopCost>)> {
    let mut sessions: Vec<(String, String, Vec<Decision>)> = Vec::new();
    for e in events.iter().filter(|e| e["event"] != "reset") {
        let (Some(session), Some(path)) = (e["session"].as_str(), e["transcript_path"].as_str())
        else {
            continue;
        };
        let d = Decision {
            detector: e["detector"].as_str().unwrap_or("-").to_string(),
            tool_use_id: e["tool_use_id"].as_str().map(String::from),
            at_ms: ms(&json!({"timestamp": e["ts"]})),
        };
        match sessions
            .iter_mut()
            .find(|(s, p, _)| s == session && p == path)
        {
            Some(s) => s.2.push(d),
            None => sessions.push((session.to_string(), path.to_string(), vec![d])),
        }
    }
    sessions
        .into_iter()
        .filter_map(|(session, path, decisions)| {
            // The path came in a hook payload: only a regular file of a plausible size is read
            // (not a FIFO, a device or /dev/zero).
            let meta = std::fs::metadata(&path).ok()?;
            if !meta.is_file() || meta.len() > MAX_TRANSCRIPT {
                return None;
            }
            let text = std::fs::read_to_string(&path).ok()?;
            let loops = read(&text).loops(&decisions);
            (!loops.is_empty()).then_some((session, loops))
        })
        .collect()
}

/// The transcripts named by `events` that cannot be read (gone, moved, not a file, too big):
/// their loops' cost is not known, and `report` says so rather than nothing.
pub fn unreadable_transcripts(events: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events.iter().filter(|e| e["event"] != "reset") {
        let Some(path) = e["transcript_path"].as_str().filter(|p| !p.is_empty()) else {
            continue;
        };
        if out.iter().any(|p| p == path) {
            continue;
        }
        let readable = std::fs::metadata(path)
            .is_ok_and(|meta| meta.is_file() && meta.len() <= MAX_TRANSCRIPT);
        if !readable {
            out.push(path.to_string());
        }
    }
    out
}

fn priced(usd: Option<f64>, model: &str) -> String {
    match usd {
        Some(p) => format!(", ${p:.2} at {model} list price ({PRICES_DATE})"),
        None if model.is_empty() => String::new(),
        None => format!(" ({model}: no list price here)"),
    }
}

/// `2026-02-11T18:13:13.089Z` → `2026-02-11 18:13:13`.
fn short_time(t: &str) -> String {
    t.get(..19).unwrap_or(t).replace('T', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assistant(id: &str, at: &str, tool_id: &str, cmd: &str, out: u64) -> String {
        json!({"type": "assistant", "timestamp": at, "message": {"id": id, "model": "claude-sonnet-4-5-20250929",
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000, "output_tokens": out},
            "content": [{"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": cmd}}]}})
        .to_string()
    }

    #[test]
    fn a_loop_costs_from_its_first_repeat_to_its_last_decision() {
        let lines = [
            json!({"type": "user", "timestamp": "2026-01-01T00:00:00Z", "message": {"content": "fix it"}}).to_string(),
            assistant("m1", "2026-01-01T00:00:01Z", "t1", "pytest", 100),
            assistant("m2", "2026-01-01T00:00:02Z", "t2", "pytest", 100),
            assistant("m3", "2026-01-01T00:00:03Z", "t3", "pytest", 100),
            assistant("m4", "2026-01-01T00:00:04Z", "t4", "ls", 100),
        ];
        let t = read(&lines.join("\n"));
        let d = Decision {
            detector: "repeat".into(),
            tool_use_id: Some("t3".into()),
            at_ms: 0,
        };
        let loops = t.loops(&[d]);
        assert_eq!(loops.len(), 1);
        let l = &loops[0];
        assert_eq!(l.calls, 2, "t2 and t3: t1 was not yet a repeat");
        assert_eq!(l.tokens, 2 * 1110);
        let p = l.list_price_usd.unwrap();
        assert!((p - 2.0 * (10.0 * 3.0 + 1000.0 * 0.3 + 100.0 * 15.0) / 1e6).abs() < 1e-9);
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn unknown_models_have_no_price() {
        assert!(price("claude-opus-4-6", &Usage::default()).is_none());
        assert!(price("claude-opus-4-20250514", &Usage::default()).is_some());
    }
}
