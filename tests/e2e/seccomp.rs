//! The container's seccomp profile (`deploy/seccomp/agentd.json`) around the
//! real daemon, helper and zygote, loaded as a real filter by
//! `e2e-seccomp-exec` (no container engine needed): every system call the
//! sandbox makes must be one the profile allows, or these tests fail here
//! instead of leaving a user's pods unready (issue 49: the helper's `setns`
//! and its `unshare` without `CLONE_NEWUSER` were refused in the image).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agentd_tests::{ChildGuard, bin_path, eventually_blocking};
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// Where the daemon runs: as `nobody` when the tests run as root (the image
/// runs agentd as an unprivileged user, whose namespaces are what the
/// profile must allow), as the test's own user otherwise.
struct Place {
    nobody: Option<agentd_tests::AsNobody>,
    own: Option<(tempfile::TempDir, PathBuf)>,
}

impl Place {
    fn new(ws_dirs: &[&str]) -> Place {
        if let Some(n) = agentd_tests::AsNobody::new(ws_dirs) {
            std::fs::copy(bin_path("seccomp-exec"), n.dir.path().join("seccomp-exec")).unwrap();
            std::fs::copy(repo().join("deploy/seccomp/agentd.json"), n.dir.path().join("profile.json")).unwrap();
            return Place { nobody: Some(n), own: None };
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        for d in std::iter::once("").chain(ws_dirs.iter().copied()) {
            std::fs::create_dir_all(ws.join(d)).unwrap();
        }
        std::fs::copy(repo().join("deploy/seccomp/agentd.json"), dir.path().join("profile.json")).unwrap();
        Place { nobody: None, own: Some((dir, ws)) }
    }

    fn dir(&self) -> &Path {
        match (&self.nobody, &self.own) {
            (Some(n), _) => n.dir.path(),
            (_, Some((d, _))) => d.path(),
            _ => unreachable!(),
        }
    }

    fn ws(&self) -> &Path {
        match (&self.nobody, &self.own) {
            (Some(n), _) => &n.ws,
            (_, Some((_, ws))) => ws,
            _ => unreachable!(),
        }
    }

    /// One of agentd's binaries (or the seccomp wrapper), to run here.
    fn command(&self, program: &str) -> Command {
        match &self.nobody {
            Some(n) => n.command(program),
            None => {
                let mut cmd = Command::new(bin_path(program));
                cmd.env("HOME", self.dir()).env_remove("AGENTD_SOCKET");
                cmd
            }
        }
    }

    fn program(&self, program: &str) -> PathBuf {
        match &self.nobody {
            Some(n) => n.dir.path().join(program),
            None => bin_path(program),
        }
    }
}

/// The daemon under the profile, started with `--require-sandbox` (as the
/// image starts it): it refuses to start unless every wall stands.
/// The daemon under the profile, serving, and its `agentctl --json status`:
/// it listens before it has probed the sandbox, and under
/// `--require-sandbox` exits then if a wall is missing, so it is ready once
/// a status request is answered, and failed once it exits.
fn daemon_under_profile(place: &Place) -> (ChildGuard, PathBuf, impl Fn() -> String, Value) {
    let (mut daemon, socket, log) = start_under_profile(place);
    let mut status = None;
    eventually_blocking("agentd under the container's profile answers (or exits)", || {
        if daemon.0.try_wait().unwrap().is_some() {
            return true;
        }
        let (code, out, _) = agentctl(place, &socket, &["--json", "status"]);
        status = (code == 0).then(|| serde_json::from_str::<Value>(&out).ok()).flatten();
        status.is_some()
    });
    if let Some(exit) = daemon.0.try_wait().unwrap() {
        panic!("agentd under deploy/seccomp/agentd.json exited ({exit}) instead of serving:\n{}", log());
    }
    (daemon, socket, log, status.unwrap())
}

fn start_under_profile(place: &Place) -> (ChildGuard, PathBuf, impl Fn() -> String) {
    let socket = place.dir().join("agentd.sock");
    let log_path = place.dir().join("log");
    let mut cmd = place.command("seccomp-exec");
    cmd.arg(place.dir().join("profile.json"))
        .arg(place.program("agentd"))
        .arg("--socket")
        .arg(&socket)
        .arg("--state-dir")
        .arg(place.dir().join("state"))
        .arg("--require-sandbox")
        .arg("--sandbox-helper")
        .arg(place.program("agentd-sandbox"))
        .stdin(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap());
    let daemon = ChildGuard::spawn(&mut cmd);
    let log = move || std::fs::read_to_string(&log_path).unwrap_or_default();
    (daemon, socket, log)
}

fn agentctl(place: &Place, socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = place
        .command("agentctl")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn the_container_profile_lets_the_sandbox_stand() {
    let place = Place::new(&[".git", ".git/hooks"]);
    let (_daemon, socket, log, status) = daemon_under_profile(&place);
    // Every wall stands: the helper's namespaces, Landlock, its own seccomp
    // filter on top of the profile's, the Unix-socket wall, the network gate.
    let sandbox = &status["sandbox"];
    assert_eq!(sandbox["level"], "full", "{sandbox:#}\n{}", log());
    for wall in sandbox["walls"].as_array().unwrap() {
        assert_eq!(wall["applied"], true, "{wall}");
    }
    let ws = place.ws().to_str().unwrap().to_owned();
    // An approved call (workspace_write, gated network: the unshare with a
    // network namespace) writes in the workspace, not in .git/hooks, and
    // has a /proc of its own.
    let command = "echo written > notes.txt; cat notes.txt; printf x > .git/hooks/pre-commit; \
                   tr '\\0' ' ' </proc/1/cmdline; echo";
    let (_, out, err) = agentctl(
        &place,
        &socket,
        &["--json", "call", "Bash", "--arg", &format!("command={command}"), "--mode", "bypass", "--cwd", &ws],
    );
    let result: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}\n{}", log()));
    let text = result.to_string();
    assert_eq!(result["sandbox"], "workspace_write", "{text}");
    assert_eq!(result["network"], "gated", "{text}");
    assert!(text.contains("written"), "{text}");
    assert!(text.contains("Read-only file system") || text.contains("[not applied:"), "{text}");
    assert!(text.contains("agentd-sandbox"), "PID 1 of the call is its helper: {text}");
    assert_eq!(std::fs::read_to_string(place.ws().join("notes.txt")).unwrap(), "written\n");
    assert!(!place.ws().join(".git/hooks/pre-commit").exists());
    // A call that runs unasked (read_only: no network namespace, the
    // other unshare).
    let (_, out, err) = agentctl(&place, &socket, &["--json", "call", "Bash", "--arg", "command=ls -a", "--cwd", &ws]);
    let result: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}\n{}", log()));
    let text = result.to_string();
    assert_eq!(result["sandbox"], "read_only", "{text}");
    assert!(text.contains("notes.txt"), "{text}");
}

/// The contrast: under the default container profile (the generator's
/// `--baseline`, without agentd's additions) the same start is refused,
/// naming the missing walls, so the filter the test installs does bite.
#[test]
fn the_default_container_profile_makes_agentd_refuse_to_start() {
    let place = Place::new(&[]);
    let out = Command::new("python3")
        .arg(repo().join("scripts/make-seccomp-profile.py"))
        .arg("--baseline")
        .arg("-o")
        .arg(place.dir().join("profile.json"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (mut daemon, _socket, log) = start_under_profile(&place);
    let status = daemon.wait_exit();
    assert!(!status.success(), "{status}\n{}", log());
    let log = log();
    assert!(log.contains("--require-sandbox:") && log.contains("namespaces"), "{log}");
}
