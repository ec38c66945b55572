//! `agentd-sandbox`: the helper agentd starts every Bash command through
//! (Landlock, seccomp, namespaces), built beside `agentd`; its code is the
//! `agentd-sandbox` crate (`daemon/sandbox`, see [`agentd_sandbox::helper`]).

fn main() -> std::process::ExitCode {
    agentd_sandbox::helper::main()
}
