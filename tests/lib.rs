mod common;
mod protocol;
mod robustness;
mod stop_gate;
