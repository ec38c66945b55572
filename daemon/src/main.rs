//! The `agentd` binary; everything it does is in [`agentd::cli`].

fn main() -> std::process::ExitCode {
    agentd::cli::main()
}
