//! The README's Python example runs as written against a real daemon.

use std::process::{Command, Stdio};

use agentd_tests::{StandaloneDaemon, client_stdout};

#[test]
fn the_readme_python_example_works() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme.find("```python\n").expect("README has a python block") + "```python\n".len();
    let code = &readme[start..start + readme[start..].find("```").unwrap()];
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let stdout = client_stdout(Command::new("python3").arg("-c").arg(code), work.path(), &d.socket);
    assert!(stdout.starts_with(env!("CARGO_PKG_VERSION")), "{stdout}");
    assert!(stdout.contains("TestEcho") && stdout.contains("session_id"), "{stdout}");
}

/// The README's "Use it" block, run as written in a scratch git repository
/// with a fresh HOME: the binaries are this build's, the daemon's socket
/// is waited for, and the endless `watch` is bounded (both as a user at a
/// terminal would do them).
#[test]
fn the_readme_use_it_block_runs_as_written() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let at = readme.find("## Use it").expect("README has Use it");
    let start = at + readme[at..].find("```sh\n").unwrap() + "```sh\n".len();
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    // This build's binaries (the tests' own copies: a clean checkout that
    // only ran the tests has no target/debug/agentd).
    let agentd = agentd_tests::bin_path("agentd").display().to_string();
    let agentctl = agentd_tests::bin_path("agentctl").display().to_string();
    let home = tempfile::tempdir().unwrap();
    let project = home.path().join("src/myproject");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("README.md"), "# myproject\n\nTODO: everything\n").unwrap();
    std::fs::write(project.join("main.rs"), "// TODO\nfn main() {}\n").unwrap();
    let git = Command::new("git").args(["init", "-q"]).current_dir(&project).status().unwrap();
    assert!(git.success());
    let runtime = home.path().join("run");
    std::fs::create_dir_all(&runtime).unwrap();
    let mut script = String::from("set -x\n");
    for line in block.lines() {
        if line.starts_with("cargo build") {
            continue;
        }
        let line =
            line.replace("target/release/agentd ", &format!("{agentd} ")).replace("target/release/agentctl", &agentctl);
        assert!(!line.contains("target/release/"), "a binary the test does not know: {line}");
        if line.contains("agentctl watch") {
            script.push_str(&format!("timeout 3 {line}\n"));
        } else {
            script.push_str(&line);
            script.push('\n');
        }
        if line.contains(&format!("{agentd} &")) {
            script.push_str(
                "for _ in $(seq 400); do [ -S \"$XDG_RUNTIME_DIR/agentd/agentd.sock\" ] && break; sleep 0.05; done\n",
            );
        }
    }
    script.push_str("kill %1; wait\n");
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(&project)
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("XDG_STATE_HOME")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("AGENTD_SOCKET")
        .env_remove("AGENTD_STATE_DIR")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("error: invalid value") && !text.contains("panicked"), "{text}");
    let sid = text.lines().find_map(|l| l.strip_prefix("+ sid=")).map(str::trim).unwrap_or_default();
    assert!(sid.len() >= 8 && !sid.contains('\''), "session create gave an id: {text}");
    assert!(text.contains("# myproject"), "Read printed the file: {text}");
    assert!(text.contains("completed"), "the run streamed its turn: {text}");
    assert!(text.contains(&format!("closed {sid}")), "closed at the end: {text}");
}

/// The README's example of the Python client runs as written.
#[test]
fn the_readme_python_client_example_works() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let at = readme.find("from agentd_client import Agentd").expect("README shows the Python client");
    let start = readme[..at].rfind("```python\n").unwrap() + "```python\n".len();
    let code = &readme[start..start + readme[start..].find("```").unwrap()];
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let mut python = Command::new("timeout");
    python.args(["60", "python3", "-c"]).arg(code);
    python.env("PYTHONPATH", concat!(env!("CARGO_MANIFEST_DIR"), "/../client/python"));
    let stdout = client_stdout(&mut python, work.path(), &d.socket);
    assert!(stdout.starts_with("t1 "), "{stdout}");
}
