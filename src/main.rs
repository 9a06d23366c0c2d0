fn main() -> std::process::ExitCode {
    loopgate::main_entry()
}
