//! The `agentctl` binary; everything it does is in [`agentctl::cli`].

fn main() -> std::process::ExitCode {
    agentctl::cli::main()
}
