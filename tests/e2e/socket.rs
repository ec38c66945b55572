//! The socket: where it is, who may use it, and who owns it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Command, Stdio};

use agentd_tests::{ChildGuard, RawConn, StandaloneDaemon, TestDaemon, agentd_command, bin_path, eventually_blocking};
use serde_json::json;

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[tokio::test]
async fn socket_is_0600_in_a_0700_directory() {
    let d = TestDaemon::start().await;
    let meta = std::fs::symlink_metadata(&d.socket).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()));
    assert_eq!(meta.mode() & 0o7777, 0o600);
    assert_eq!(mode(d.socket.parent().unwrap()), 0o700);
    assert_eq!(mode(&d.dir.path().join("state")), 0o700);
}

#[test]
fn default_socket_is_under_xdg_runtime_dir_and_agentd_socket_overrides_it() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("xdg");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let spawn = |env: &[(&str, &std::path::Path)]| {
        let mut cmd = Command::new(bin_path("agentd"));
        cmd.arg("--state-dir").arg(dir.path().join("state")).env_remove("AGENTD_SOCKET");
        for (k, v) in env {
            cmd.env(k, v);
        }
        ChildGuard::spawn(cmd.stderr(Stdio::null()))
    };
    let expected = runtime.join("agentd/agentd.sock");
    let child = spawn(&[("XDG_RUNTIME_DIR", &runtime)]);
    eventually_blocking("default socket appears", || std::os::unix::net::UnixStream::connect(&expected).is_ok());
    assert_eq!(mode(&runtime.join("agentd")), 0o700);
    drop(child);

    let custom = dir.path().join("custom.sock");
    let _child = spawn(&[("XDG_RUNTIME_DIR", &runtime), ("AGENTD_SOCKET", &custom)]);
    eventually_blocking("AGENTD_SOCKET is used", || std::os::unix::net::UnixStream::connect(&custom).is_ok());
}

#[test]
fn a_second_daemon_does_not_steal_a_live_socket() {
    let first = StandaloneDaemon::start(&[], &[]);
    let out = agentd_command(&first.socket, &first.dir.path().join("state2"))
        .env_remove("AGENTD_SOCKET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already serving"), "{stderr}");
    assert!(stderr.contains(&first.pid().to_string()), "names the holder: {stderr}");
    // The first one still serves on the same socket file.
    let stream = std::os::unix::net::UnixStream::connect(&first.socket);
    assert!(stream.is_ok());
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists(), "a dead socket file is left behind");
    assert!(std::os::unix::net::UnixStream::connect(&path).is_err(), "and nothing answers on it");
    // Binding over the old file would fail with EADDRINUSE; the daemon replaces it.
    let d = TestDaemon::start_with(|c| c.socket = agentd::SocketConfig::Path(path.clone())).await;
    let mut c = RawConn::connect(&path).await;
    assert!(c.ok("daemon/info", json!({})).await["pid"].is_number());
    d.stop().await;
    assert!(!path.exists(), "removed at shutdown");
}

#[tokio::test]
async fn a_file_that_is_not_a_socket_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentd.sock");
    std::fs::write(&path, "user data").unwrap();
    let config = agentd::Config::new(agentd::SocketConfig::Path(path.clone()), dir.path().join("state"));
    let err = agentd::Daemon::bind(config).err().expect("bind refuses");
    assert!(matches!(err, agentd::DaemonError::NotASocket { .. }), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "user data");
}

#[tokio::test]
async fn a_peer_of_another_uid_is_refused() {
    let other = nix::unistd::geteuid().as_raw().wrapping_add(1);
    let d = TestDaemon::start_with(|c| c.allowed_uid = Some(other)).await;
    let mut c = RawConn::connect(&d.socket).await;
    let r = c.recv_some().await;
    assert_eq!(r["error"]["code"], json!(-32005), "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("refused"), "{r}");
    assert!(c.recv().await.is_none(), "and the connection is closed");
}

/// The real thing: the daemon runs as `nobody`, root connects (root passes
/// the 0600 permission check, SO_PEERCRED does not let it in). Needs root to
/// change uid; CI runs as root.
#[test]
fn a_real_process_of_another_uid_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not root: covered by a_peer_of_another_uid_is_refused only");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let nobody = 65534;
    nix::unistd::chown(dir.path(), Some(nobody.into()), Some(nobody.into())).unwrap();
    let socket = dir.path().join("agentd.sock");
    // A copy nobody can execute wherever the checkout lives.
    let exe = dir.path().join("agentd");
    std::fs::copy(bin_path("agentd"), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut child = std::process::Command::new(&exe);
    std::os::unix::process::CommandExt::uid(&mut child, nobody);
    std::os::unix::process::CommandExt::gid(&mut child, nobody);
    let _child = ChildGuard::spawn(
        child
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .env_remove("AGENTD_SOCKET")
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap()),
    );
    eventually_blocking("agentd as nobody listens", || socket.exists());
    let mut stream = None;
    eventually_blocking("connect", || {
        stream = std::os::unix::net::UnixStream::connect(&socket).ok();
        stream.is_some()
    });
    let mut reply = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(stream.unwrap()), &mut reply).unwrap();
    let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
    assert_eq!(reply["error"]["code"], json!(-32005), "{reply}");
    assert!(reply["error"]["message"].as_str().unwrap().contains("uid 0"), "{reply}");
    let log = dir.path().join("log");
    eventually_blocking("the refusal is logged", || {
        std::fs::read_to_string(&log).unwrap_or_default().contains("refused connection from another user")
    });
}

#[tokio::test]
async fn a_socket_directory_others_can_write_is_refused_unless_sticky() {
    let dir = tempfile::tempdir().unwrap();
    let open_dir = dir.path().join("open");
    std::fs::create_dir(&open_dir).unwrap();
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let config =
        agentd::Config::new(agentd::SocketConfig::Path(open_dir.join("agentd.sock")), dir.path().join("state"));
    let err = agentd::Daemon::bind(config).err().expect("refused");
    assert!(matches!(err, agentd::DaemonError::UnsafeDirectory { .. }), "{err}");
    assert!(err.to_string().contains("other users can write"), "{err}");
    assert!(!open_dir.join("agentd.sock").exists());

    // Sticky, like /tmp: others cannot replace our files there.
    std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let d = TestDaemon::start_with(|c| c.socket = agentd::SocketConfig::Path(open_dir.join("agentd.sock"))).await;
    d.stop().await;
}

#[test]
fn a_socket_directory_of_another_user_is_refused() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("not root: cannot give a directory to another user here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let theirs = dir.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    nix::unistd::chown(&theirs, Some(65534.into()), Some(65534.into())).unwrap();
    let config = agentd::Config::new(agentd::SocketConfig::Path(theirs.join("agentd.sock")), dir.path().join("state"));
    let err = agentd::Daemon::bind(config).err().expect("refused");
    assert!(err.to_string().contains("belongs to uid 65534"), "{err}");
}

#[test]
fn a_planted_lock_file_symlink_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("agentd.sock.lock")).unwrap();
    let config =
        agentd::Config::new(agentd::SocketConfig::Path(dir.path().join("agentd.sock")), dir.path().join("state"));
    assert!(agentd::Daemon::bind(config).is_err());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}
