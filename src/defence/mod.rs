//! Defence by effect: loopgate's own wiring in each CLI's settings, checked and healed.

pub mod host_files;
pub mod plugin_files;
pub mod sanction;
pub mod settings_file;
pub mod wiring;
pub mod wiring_check;
