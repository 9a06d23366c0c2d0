mod common;
mod e2e;
mod faults;
mod fuzz;
mod protocol;
mod robustness;
mod scenario_runner;
mod stop_gate;
