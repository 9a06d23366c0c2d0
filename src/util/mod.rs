//! Small pure helpers every layer may use: canonical hashing, words for people, wildcards,
//! JSON read as JavaScript reads it.

pub mod canon;
pub mod js_json;
pub mod wildcard;
pub mod words;
