//! The README's Python example runs as written against a real daemon.

use std::process::{Command, Stdio};

use agentd_tests::StandaloneDaemon;

#[test]
fn the_readme_python_example_works() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme.find("```python\n").expect("README has a python block") + "```python\n".len();
    let code = &readme[start..start + readme[start..].find("```").unwrap()];
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .arg("-c")
        .arg(code)
        .current_dir(work.path())
        .env("AGENTD_SOCKET", &d.socket)
        .stdin(Stdio::null())
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.starts_with(env!("CARGO_PKG_VERSION")), "{stdout}");
    assert!(stdout.contains("TestEcho") && stdout.contains("session_id"), "{stdout}");
}
