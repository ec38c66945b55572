//! The `agentctl` binary; everything it does is in [`agentd_client::cli`].

fn main() -> std::process::ExitCode {
    agentd_client::cli::main()
}
