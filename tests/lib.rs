mod big_inputs;
mod budget;
mod common;
mod config_change;
mod dialects;
mod e2e;
mod exempt;
mod faults;
mod first_hour;
mod fuzz;
mod guard_table;
mod halts;
mod heal;
#[cfg(unix)]
mod host_files;
mod layers;
#[cfg(unix)]
mod link_order;
#[cfg(unix)]
mod opencode_plugin;
mod operate;
#[cfg(unix)]
mod pinned_binary;
mod protocol;
mod readme;
mod replay;
mod robustness;
mod running_commands;
mod sanction;
mod scenario_runner;
mod secrets;
mod setup_agents;
mod statusline;
mod stop_gate;
mod tell;
mod uninstall;
mod wiring_check;
