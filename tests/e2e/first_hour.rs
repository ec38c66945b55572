//! The first hour (issue 34): what a new user runs into. A daemon stops
//! when told even after its stderr went away; one state directory has one
//! daemon; a client that is interrupted leaves nothing running.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentd_tests::{StandaloneDaemon, agentd_command, bin_path, eventually_blocking, procs, tag};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Waits up to `limit` for `child` to exit.
fn exits_within(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn the_daemon_stops_when_told_after_its_stderr_is_gone() {
    for signal in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/agentd.sock");
        let mut child = agentd_command(&socket, &dir.path().join("state"))
            .env("RUST_LOG", "debug")
            .env_remove("AGENTD_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        eventually_blocking("the daemon listens", || std::os::unix::net::UnixStream::connect(&socket).is_ok());
        // The reader of its log goes away (a closed terminal, a pipe
        // whose reader exited): every later log write fails.
        drop(child.stderr.take());
        let _ = std::os::unix::net::UnixStream::connect(&socket);
        kill(Pid::from_raw(child.id() as i32), signal).unwrap();
        let status = exits_within(&mut child, Duration::from_secs(15));
        if status.is_none() {
            let _ = child.kill();
        }
        assert!(status.is_some_and(|s| s.success()), "{signal:?}: {status:?}");
    }
}

#[test]
fn one_state_directory_has_one_daemon() {
    let mut first = StandaloneDaemon::start(&[], &[]);
    let state = first.dir.path().join("state");
    let other = first.dir.path().join("other.sock");
    let out = agentd_command(&other, &state).env_remove("AGENTD_SOCKET").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is using the state directory"), "{err}");
    assert!(err.contains(&format!("pid {}", first.pid())), "names the other daemon: {err}");
    assert!(err.contains(&first.socket.display().to_string()), "and its socket: {err}");
    assert!(std::os::unix::net::UnixStream::connect(&other).is_err(), "the second one did not serve");
    assert!(std::os::unix::net::UnixStream::connect(&first.socket).is_ok(), "the first one still serves");
    // Killed, it leaves no lock behind: a restart starts at once.
    first.signal(Signal::SIGKILL);
    first.wait_exit();
    first.restart();
}

#[test]
fn an_interrupted_call_leaves_nothing_running() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    for signal in [Signal::SIGINT, Signal::SIGTERM] {
        let marker = tag();
        let mut call = Command::new(bin_path("agentctl"))
            .arg("--socket")
            .arg(&d.socket)
            .args(["call", "Bash", "--mode", "bypass", "--cwd"])
            .arg(work.path())
            .arg("--arg")
            .arg(format!("command=sleep 300 # {marker}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // agentctl's own command line names the marker too: the command
        // runs once another process does.
        eventually_blocking("the command runs", || procs(&marker).len() >= 2);
        kill(Pid::from_raw(call.id() as i32), signal).unwrap();
        assert!(exits_within(&mut call, Duration::from_secs(5)).is_some(), "agentctl exits");
        let gone = Instant::now();
        eventually_blocking("the command is ended", || procs(&marker).is_empty());
        assert!(gone.elapsed() < Duration::from_secs(5), "ended in {:?}", gone.elapsed());
        let out = Command::new(bin_path("agentctl"))
            .arg("--socket")
            .arg(&d.socket)
            .args(["--json", "session", "list"])
            .output()
            .unwrap();
        let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(0), "{signal:?}: no session left: {listed}");
    }
}

/// In a named session, Ctrl+C cancels the interrupted call only: its
/// command ends, the session and another client's command go on.
#[test]
fn an_interrupted_call_in_a_named_session_cancels_only_itself() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let (code, out, err) = agentd_tests::agentctl(
        &d.socket,
        &["--json", "session", "create", "--mode", "bypass", "--cwd", work.path().to_str().unwrap()],
    );
    assert_eq!(code, 0, "{err}");
    let created: serde_json::Value = serde_json::from_str(&out).unwrap();
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let call = |marker: &str| {
        Command::new(bin_path("agentctl"))
            .arg("--socket")
            .arg(&d.socket)
            .args(["call", "Bash", "--session", &sid, "--arg"])
            .arg(format!("command=echo tick-{marker}; sleep 300 # {marker}"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (mine, theirs) = (format!("mine{}", tag()), format!("theirs{}", tag()));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut events = rt.block_on(agentd_tests::EventStream::open(&d.socket, &sid, None)).unwrap();
    let mut interrupted = call(&mine);
    let mut other = call(&theirs);
    // Each agentctl's command line names its marker too.
    eventually_blocking("both commands run", || procs(&mine).len() >= 2 && procs(&theirs).len() >= 2);
    // Its output has reached the daemon (a loaded machine may take a while
    // to pass it on): the result must hold it once.
    let said_tick =
        |e: &serde_json::Value| e["type"] == "tool/progress" && e.to_string().contains(&format!("tick-{mine}"));
    rt.block_on(agentd_tests::within("the command's output", events.until(said_tick)));
    kill(Pid::from_raw(interrupted.id() as i32), Signal::SIGINT).unwrap();
    let status = exits_within(&mut interrupted, Duration::from_secs(10)).expect("agentctl exits");
    assert!(!status.success(), "a cancelled call is a failed call");
    let mut printed = String::new();
    std::io::Read::read_to_string(interrupted.stdout.as_mut().unwrap(), &mut printed).unwrap();
    assert!(printed.contains("cancel"), "the cancelled result is printed: {printed:?}");
    // Issue 49 #7: the output once (in the result), the summary one line.
    let mut said = String::new();
    std::io::Read::read_to_string(interrupted.stderr.as_mut().unwrap(), &mut said).unwrap();
    assert_eq!(printed.matches(&format!("tick-{mine}")).count(), 1, "{printed:?}");
    assert!(said.ends_with("\ncancelled: the user interrupted this call\n"), "{said:?}");
    assert!(!said.contains(&format!("tick-{mine}")), "{said:?}");
    eventually_blocking("the interrupted command is ended", || procs(&mine).is_empty());
    assert!(!procs(&theirs).is_empty(), "the other client's command goes on");
    let (code, out, _) = agentd_tests::agentctl(&d.socket, &["--json", "session", "list"]);
    assert_eq!(code, 0);
    let listed: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["sessions"].as_array().map(Vec::len), Some(1), "the session stays: {listed}");
    let _ = other.kill();
    let _ = other.wait();
}

/// Under systemd a daemon's commands see the service manager's `PATH`, not
/// the user's shell's. The user's settings' `env` (Claude Code's key) gives
/// commands — confined and unasked ones too — and command hooks the
/// variables named; a repository's settings cannot, and say so; a session
/// adds its own; a bad name is refused.
#[tokio::test]
async fn the_users_env_setting_reaches_commands_and_hooks_and_a_repositorys_does_not() {
    use agentd_tests::{RawConn, within};
    use serde_json::json;
    let home = tempfile::tempdir().unwrap();
    let tools = home.path().join(".cargo/bin");
    std::fs::create_dir_all(&tools).unwrap();
    let tool = tools.join("hello-agentd");
    std::fs::write(&tool, "#!/bin/sh\necho hello from the users toolchain\n").unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let saw = home.path().join("hook-saw");
    let config = home.path().join(".config/agentd");
    std::fs::create_dir_all(&config).unwrap();
    let user_path = format!("{}:/usr/local/bin:/usr/bin:/bin", tools.display());
    std::fs::write(
        config.join("settings.json"),
        json!({
            "env": { "PATH": user_path, "GREETING": "hello", "RETRIES": 3 },
            "hooks": { "PostToolUse": [{ "matcher": "Bash", "hooks": [
                { "type": "command", "command": format!("echo \"$GREETING $RETRIES\" > {}", saw.display()) }
            ] }] }
        })
        .to_string(),
    )
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join(".claude")).unwrap();
    std::fs::write(
        work.path().join(".claude/settings.json"),
        json!({ "env": { "PATH": "./evil", "LD_PRELOAD": "./evil.so" } }).to_string(),
    )
    .unwrap();
    let home_dir = home.path().to_str().unwrap();
    let d = StandaloneDaemon::start(
        &[],
        &[
            ("HOME", home_dir),
            ("XDG_CONFIG_HOME", &format!("{home_dir}/.config")),
            // What a user service starts with.
            ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ],
    );
    let mut c = RawConn::connect(&d.socket).await;
    let call = |id: &str, command: &str| json!({ "session_id": id, "name": "Bash", "input": { "command": command, "timeout": 60000 } });
    let text = |r: &serde_json::Value| r["content"][0]["text"].as_str().unwrap_or_default().to_owned();

    let bypass = c.ok("session/create", json!({ "cwd": work.path(), "mode": "bypass" })).await;
    let id = bypass["session_id"].as_str().unwrap();
    let info = &bypass["session"];
    assert_eq!(info["env"]["GREETING"], "hello", "{info}");
    assert_eq!(info["env"]["RETRIES"], "3", "numbers as their text: {info}");
    assert!(info["env"].get("LD_PRELOAD").is_none(), "{info}");
    assert!(info["rule_errors"].to_string().contains("cannot set the environment"), "{info}");
    let r = within(
        "bash",
        c.ok("tool/call", call(id, "hello-agentd; echo \"PATH=$PATH\"; echo \"P=${LD_PRELOAD:-none}\"")),
    )
    .await;
    let out = text(&r);
    assert!(out.contains("hello from the users toolchain"), "{r}");
    assert!(out.contains(&format!("PATH={user_path}")), "{r}");
    assert!(out.contains("P=none"), "the repository's env is not applied: {r}");
    agentd_tests::eventually("the PostToolUse hook saw the env", || {
        std::fs::read_to_string(&saw).is_ok_and(|s| s.trim() == "hello 3")
    })
    .await;

    // An unasked, read-only command in default mode: its environment is
    // scrubbed of secrets, but what the user set is kept.
    let plain = c.ok("session/create", json!({ "cwd": work.path(), "env": { "OWN": "mine", "GREETING": "hi" } })).await;
    let id = plain["session_id"].as_str().unwrap();
    let r = within("bash", c.ok("tool/call", call(id, "echo \"G=$GREETING O=$OWN\""))).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains("G=hi O=mine"), "the session's own win: {r}");

    for bad in [json!({ "1X": "v" }), json!({ "AGENTD_SOCKET": "/x" }), json!({ "A=B": "v" })] {
        let r = c.request("session/create", json!({ "cwd": work.path(), "env": bad })).await;
        assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains("env"), "{r}");
    }
}
