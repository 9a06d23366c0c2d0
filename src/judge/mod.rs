//! Judging one call: the observation ledger, the session state it lives in, outcomes and noise
//! masks, the detectors, and the engine that runs them. No I/O beyond reading the work tree.

pub mod budget;
pub mod call_key;
pub mod ceiling;
pub mod detectors;
pub mod engine;
pub mod halt;
pub mod ledger;
pub mod noise;
pub mod outcome;
pub mod redact;
pub mod state;
pub mod under_way;
pub mod wait;
