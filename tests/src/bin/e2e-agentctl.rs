//! `agentctl` as built for the e2e tests: the same [`agentctl::cli::main`]
//! as the real binary, in a target of this package so `cargo test` builds it fresh.

fn main() -> std::process::ExitCode {
    agentctl::cli::main()
}
