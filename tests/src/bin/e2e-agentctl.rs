//! `agentctl` as built for the e2e tests: the same [`agentd_client::cli::main`]
//! as the real binary, in a target of this package so `cargo test` builds it fresh.

fn main() -> std::process::ExitCode {
    agentd_client::cli::main()
}
