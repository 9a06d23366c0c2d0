mod big_inputs;
mod common;
mod dialects;
mod e2e;
mod faults;
mod fuzz;
mod guard_table;
#[cfg(unix)]
mod link_order;
mod operate;
mod protocol;
mod readme;
mod replay;
mod robustness;
mod scenario_runner;
mod secrets;
mod setup_agents;
mod stop_gate;
