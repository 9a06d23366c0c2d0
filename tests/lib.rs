mod common;
mod faults;
mod protocol;
mod robustness;
mod scenario_runner;
mod stop_gate;
