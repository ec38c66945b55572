//! `agentd-sandbox`: the helper agentd starts every Bash command through
//! (Landlock, seccomp, namespaces); see [`agentd::sandbox::helper`].

fn main() -> std::process::ExitCode {
    agentd::sandbox::helper::main()
}
