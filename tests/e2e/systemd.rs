//! The systemd user units in `systemd/` pass `systemd-analyze verify`, and
//! the check is not vacuous: a broken copy fails it.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use agentd_tests::bin_path;

fn units_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd")
}

/// Runs `systemd-analyze verify --user` on `units` with a private
/// XDG_RUNTIME_DIR and a HOME whose `~/.local/bin/agentd` is the built binary
/// (the service's ExecStart).
fn verify(units: &[PathBuf]) -> (bool, String) {
    let home = tempfile::tempdir().unwrap();
    let runtime = home.path().join("runtime");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    std::fs::create_dir_all(home.path().join(".local/bin")).unwrap();
    std::os::unix::fs::symlink(bin_path("agentd"), home.path().join(".local/bin/agentd")).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["verify", "--user"])
        .args(units)
        .env("HOME", home.path())
        .env("XDG_RUNTIME_DIR", &runtime)
        .output()
        .expect("systemd-analyze is installed (Debian package systemd)");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // Other units installed on the machine may draw warnings of their own;
    // only lines about ours count.
    let ours = text.lines().filter(|l| l.contains("agentd")).count();
    (out.status.success() && ours == 0, text)
}

#[test]
fn units_pass_systemd_analyze_verify() {
    let dir = units_dir();
    let (ok, text) = verify(&[dir.join("agentd.socket"), dir.join("agentd.service")]);
    assert!(ok, "systemd-analyze verify complained:\n{text}");
}

#[test]
fn units_say_what_the_issue_requires() {
    let socket = std::fs::read_to_string(units_dir().join("agentd.socket")).unwrap();
    for line in ["ListenStream=%t/agentd/agentd.sock", "SocketMode=0600", "DirectoryMode=0700"] {
        assert!(socket.lines().any(|l| l.trim() == line), "agentd.socket lacks {line}");
    }
    let service = std::fs::read_to_string(units_dir().join("agentd.service")).unwrap();
    assert!(service.lines().any(|l| l.trim() == "Type=notify"), "agentd.service is not Type=notify");
}

#[test]
fn a_broken_unit_fails_verification() {
    let tmp = tempfile::tempdir().unwrap();
    let service = std::fs::read_to_string(units_dir().join("agentd.service")).unwrap();
    let broken = service.replace("%h/.local/bin/agentd", "%h/.local/bin/no-such-agentd");
    let path = tmp.path().join("agentd.service");
    std::fs::write(&path, broken).unwrap();
    std::fs::copy(units_dir().join("agentd.socket"), tmp.path().join("agentd.socket")).unwrap();
    let (ok, text) = verify(&[tmp.path().join("agentd.socket"), path]);
    assert!(!ok, "a missing ExecStart binary must fail verification");
    assert!(text.contains("no-such-agentd"), "{text}");
}
