//! `agentd-sandbox` as built for the e2e tests: the same
//! [`agentd::sandbox::helper::main`] as the real helper, in a target of this
//! package so `cargo test` builds it fresh.

fn main() -> std::process::ExitCode {
    agentd::sandbox::helper::main()
}
