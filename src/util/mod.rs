//! Small pure helpers every layer may use: canonical hashing, words for people, wildcards.

pub mod canon;
pub mod wildcard;
pub mod words;
