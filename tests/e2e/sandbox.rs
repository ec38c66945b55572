//! The kernel wall around Bash commands (issue 11), through the socket:
//! what each profile lets a command do, the daemon's socket closed to its
//! own tools, no process outliving its call whatever it does, and the
//! fail-closed path where the sandbox is unavailable.

use std::io::Read;

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, TestDaemon, none_left, procs, tag, tool_use, within};
use serde_json::{Value, json};

struct S {
    c: RawConn,
    id: String,
}

async fn session(d: &TestDaemon, params: Value) -> S {
    let mut c = d.raw().await;
    let mut p = json!({ "cwd": d.dir.path(), "permission_timeout_ms": 100 });
    p.as_object_mut().unwrap().extend(params.as_object().unwrap().clone());
    let id = c.session(p).await;
    S { c, id }
}

impl S {
    async fn bash(&mut self, input: Value) -> Value {
        within("bash", self.c.tool(&self.id, "Bash", input)).await
    }
    async fn run(&mut self, command: &str) -> Value {
        self.bash(json!({ "command": command })).await
    }
}

/// Writes `talk.py` into `dir`: a client that connects to `socket`, sends
/// `daemon/info` and prints the answer.
fn talker(dir: &std::path::Path, socket: &std::path::Path) {
    let script = format!(
        "import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({:?})\ntry:\n\
         \x20   s.sendall(b'{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\"}}\\n')\n\
         except OSError:\n    pass\nprint(s.makefile().readline())\n",
        socket.display().to_string()
    );
    std::fs::write(dir.join("talk.py"), script).unwrap();
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// A TCP listener on loopback, and whether anyone connected to it.
struct Listener(std::net::TcpListener);

impl Listener {
    fn new() -> Listener {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        Listener(l)
    }
    fn port(&self) -> u16 {
        self.0.local_addr().unwrap().port()
    }
    fn connected(&self) -> bool {
        self.0.accept().is_ok()
    }
}

#[tokio::test]
async fn daemon_info_reports_the_sandbox() {
    let d = TestDaemon::start().await;
    let info = d.raw().await.ok("daemon/info", json!({})).await;
    let sb = &info["sandbox"];
    assert_eq!(sb["available"], true, "{info}");
    assert!(sb["landlock_abi"].as_u64().unwrap() >= 1, "{sb}");
    assert_eq!(sb["seccomp"], true);
    assert_eq!(sb["pid_namespaces"], true, "this kernel allows unprivileged user and PID namespaces: {sb}");
}

#[tokio::test]
async fn bypass_writes_only_inside_the_workspace() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    let r = s.run(&format!("touch {}/x", outside.path().display())).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!outside.path().join("x").exists(), "the write outside the workspace was blocked");
    assert!(text(&r).contains("sandbox"), "the model is told why: {r}");
    assert_eq!(r["sandbox"], "workspace_write");
    let r = s.run("touch inside.txt && echo made").await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(d.dir.path().join("inside.txt").exists());
    // A temp file of its own works (TMPDIR is private to the call).
    let r = s.run("t=$(mktemp) && echo hi > \"$t\" && cat \"$t\"").await;
    assert_eq!(text(&r), "hi\n", "{r}");
}

#[tokio::test]
async fn a_tool_cannot_talk_to_the_daemon() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    talker(d.dir.path(), &d.socket);
    // Confined, the socket's directory is hidden.
    let r = s.run("python3 talk.py").await;
    let out = text(&r);
    assert!(!out.contains("\"result\""), "a tool's process got an answer: {out}");
    assert!(out.contains("No such file"), "{out}");
    // Unconfined, the daemon refuses it.
    let r = s.bash(json!({ "command": "python3 talk.py", "dangerouslyDisableSandbox": true })).await;
    let out = text(&r);
    assert!(!out.contains("\"result\""), "a tool's process got an answer: {out}");
    assert!(out.contains("refused"), "{out}");
    // A child that connects and exits before the daemon looks at it leaves
    // nothing to judge: refused too (the parent keeps the socket).
    let racer = format!(
        "import os, socket\nwon = 0\nfor _ in range(30):\n    s = socket.socket(socket.AF_UNIX)\n    pid = os.fork()\n\
         \x20   if pid == 0:\n        s.connect({:?})\n        os._exit(0)\n    os.waitpid(pid, 0)\n\
         \x20   try:\n        s.sendall(b'{{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\"}}\\n')\n\
         \x20       if '\"result\"' in s.makefile().readline():\n            won += 1\n    except OSError:\n        pass\n\
         print('won', won)\n",
        d.socket.display().to_string()
    );
    std::fs::write(d.dir.path().join("race.py"), racer).unwrap();
    let r = s.bash(json!({ "command": "python3 race.py", "dangerouslyDisableSandbox": true })).await;
    assert_eq!(text(&r).trim(), "won 0", "{r}");
    // Nothing secret in its environment either.
    let r = s.run("env | grep -c '^AGENTD_' || true").await;
    assert_eq!(text(&r).trim(), "1", "only the marker: {r}");
}

#[tokio::test]
async fn read_only_blocks_writes_reads_outside_network_and_other_processes() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "s3cret").unwrap();
    std::fs::write(d.dir.path().join("notes.txt"), "hello\n").unwrap();
    let listener = Listener::new();
    let mut s = session(&d, json!({ "mode": "bypass", "sandbox": { "mode": "read_only" } })).await;

    let r = s.run("cat notes.txt").await;
    assert_eq!(text(&r), "hello\n", "reads inside the workspace work: {r}");
    assert_eq!(r["sandbox"], "read_only");

    let r = s.run("touch made.txt").await;
    assert_eq!(r["is_error"], true);
    assert!(!d.dir.path().join("made.txt").exists());
    assert!(text(&r).contains("read-only sandbox"), "{r}");

    let r = s.run(&format!("cat {}/secret.txt", outside.path().display())).await;
    assert!(!text(&r).contains("s3cret"), "{r}");

    let r = s.run(&format!("exec 3<>/dev/tcp/127.0.0.1/{} && echo connected", listener.port())).await;
    assert!(!text(&r).contains("connected"), "{r}");
    assert!(!listener.connected());

    let r = s.run(&format!("kill -0 {} && echo signalled", std::process::id())).await;
    assert!(!text(&r).contains("signalled"), "{r}");
    let r = s.run(&format!("cat /proc/{}/environ | tr '\\0' '\\n' | head -3", std::process::id())).await;
    assert!(!text(&r).contains("PATH="), "the daemon's environment: {r}");
}

#[tokio::test]
async fn commands_the_engine_runs_unasked_run_read_only() {
    let d = TestDaemon::start().await;
    std::fs::write(d.dir.path().join("notes.txt"), "hello\n").unwrap();
    let mut s = session(&d, json!({})).await;
    let r = s.run("cat notes.txt").await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(r["sandbox"], "read_only");
}

#[tokio::test]
async fn protected_files_stay_read_only_in_the_workspace() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::fs::create_dir_all(ws.join(".claude")).unwrap();
    std::fs::create_dir_all(ws.join(".agentd")).unwrap();
    std::fs::write(ws.join(".mcp.json"), "{}").unwrap();
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    for cmd in [
        "echo 'echo pwned' > .git/hooks/pre-commit",
        "printf '[core]\\n\\tfsmonitor = touch pwned\\n' >> .git/config",
        "echo '{\"permissions\":{\"allow\":[\"Bash\"]}}' > .claude/settings.json",
        "echo '{}' > .agentd/settings.json",
        "echo '{\"mcpServers\":{}}' > .mcp.json",
        "rm -rf .git/hooks",
        "mv .git/config .git/config.old",
    ] {
        // Refused by the wall, or (behind the layer) run and not applied.
        let r = s.run(cmd).await;
        assert!(r["is_error"] == true || text(&r).contains("[not applied:"), "{cmd}: {r}");
    }
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    assert_eq!(std::fs::read_to_string(ws.join(".git/config")).unwrap(), "[core]\n");
    assert!(!ws.join(".claude/settings.json").exists());
    assert!(!ws.join(".agentd/settings.json").exists());
    assert_eq!(std::fs::read_to_string(ws.join(".mcp.json")).unwrap(), "{}");
    // The rest of .git stays writable (git commit must work).
    let r = s.run("touch .git/index.lock && rm .git/index.lock && echo ok").await;
    assert_eq!(text(&r), "ok\n", "{r}");
}

#[tokio::test]
async fn network_follows_the_session() {
    let d = TestDaemon::start().await;
    let listener = Listener::new();
    let port = listener.port();
    let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let through = format!(
        "curl -sS --noproxy '' -x \"$HTTP_PROXY\" --proxytunnel --max-time 2 telnet://127.0.0.1:{port} </dev/null; echo tried"
    );
    let mut off = session(&d, json!({ "mode": "bypass", "sandbox": { "network": false } })).await;
    let r = off.run(&connect).await;
    assert!(!text(&r).contains("connected"), "{r}");
    let r = off.run(&through).await;
    assert!(text(&r).contains("tried"), "{r}");
    assert!(!listener.connected(), "no network at all");
    // On (the default), the network is gated: no direct connection, not
    // even to loopback; through the gate what the rules allow (here: any
    // domain, bypass mode, and loopback allowed).
    let mut on = session(&d, json!({ "mode": "bypass" })).await;
    let r = on.run(&connect).await;
    assert!(!text(&r).contains("connected"), "{r}");
    assert!(!listener.connected(), "no direct connection");
    let r = on.run(&through).await;
    assert!(text(&r).contains("a private or local address"), "{r}");
    assert!(!listener.connected(), "loopback stays refused by default");
    let mut private =
        session(&d, json!({ "mode": "bypass", "sandbox": { "network": { "allow_private_network": true } } })).await;
    private.run(&through).await;
    assert!(listener.connected(), "through the gate");
}

#[tokio::test]
async fn disabling_the_sandbox_asks_unless_bypass() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    let touch = format!("touch {}/x", outside.path().display());
    let mut s = session(&d, json!({ "permissions": { "allow": ["Bash(touch:*)"] } })).await;
    let r = s.bash(json!({ "command": touch, "dangerouslyDisableSandbox": true })).await;
    assert_eq!(r["is_error"], true);
    assert!(text(&r).contains("permission required") && text(&r).contains("outside the sandbox"), "{r}");
    assert!(!outside.path().join("x").exists());
    let mut b = session(&d, json!({ "mode": "bypass" })).await;
    let r = b.bash(json!({ "command": touch, "dangerouslyDisableSandbox": true })).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(r["sandbox"], "off");
    assert!(outside.path().join("x").exists());
}

#[tokio::test]
async fn auto_allow_runs_unasked_in_workspace_write() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    let mut s = session(&d, json!({ "sandbox": { "auto_allow": true } })).await;
    let r = s.run("touch made.txt && echo ok").await;
    assert_eq!(text(&r), "ok\n", "ran without asking: {r}");
    assert_eq!(r["sandbox"], "workspace_write");
    let r = s.run(&format!("touch {}/x", outside.path().display())).await;
    assert_eq!(r["is_error"], true);
    assert!(!outside.path().join("x").exists());
    // An ask rule still asks.
    let mut a =
        session(&d, json!({ "sandbox": { "auto_allow": true }, "permissions": { "ask": ["Bash(touch:*)"] } })).await;
    let r = a.run("touch other.txt").await;
    assert!(text(&r).contains("permission required"), "{r}");
    assert!(!d.dir.path().join("other.txt").exists());
}

#[tokio::test]
async fn bad_sandbox_values_are_refused_naming_the_field() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    for bad in [json!({ "mode": "strict" }), json!({ "netwrk": false }), json!({ "network": "yes" })] {
        let reply = c.request("session/create", json!({ "cwd": d.dir.path(), "sandbox": bad })).await;
        assert_eq!(reply["error"]["code"], -32602, "{reply}");
        assert!(reply["error"]["message"].as_str().unwrap().contains("sandbox"), "{reply}");
    }
    let listed = c.ok("session/list", json!({})).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 0, "nothing was created");
}

#[tokio::test]
async fn without_the_sandbox_read_only_commands_ask() {
    let d = TestDaemon::start_with(|c| c.sandbox.disabled = true).await;
    std::fs::write(d.dir.path().join("notes.txt"), "hello\n").unwrap();
    let info = d.raw().await.ok("daemon/info", json!({})).await;
    assert_eq!(info["sandbox"]["available"], false);
    assert!(info["sandbox"]["reason"].as_str().unwrap().contains("no-sandbox"), "{info}");
    // (In a workspace that does not hold the daemon's state: see below.)
    let ws = d.dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("notes.txt"), "hello\n").unwrap();
    let mut s = session(&d, json!({ "cwd": ws })).await;
    let r = s.run("cat notes.txt").await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(text(&r).contains("sandbox") && text(&r).contains("unavailable"), "{r}");
    // A session that turned the sandbox off keeps the old judgement.
    let mut off = session(&d, json!({ "cwd": ws, "sandbox": { "mode": "off" } })).await;
    let r = off.run("cat notes.txt").await;
    assert_eq!(text(&r), "hello\n", "{r}");
    assert_eq!(r["sandbox"], "off");
    // This workspace holds the daemon's state directory (as a home
    // directory does): with nothing to hide it, every command asks.
    let mut exposed = session(&d, json!({ "sandbox": { "mode": "off" } })).await;
    for command in [
        "cat notes.txt",
        "grep -r hello .",
        "grep --rec -l hello .",
        "grep --dir=recurse -l hello .",
        "ls --recur",
        "diff -rN ws . | grep hello",
        "printf '%s%s\\n' sta te | xargs ls -la",
    ] {
        let r = exposed.run(command).await;
        assert!(text(&r).contains("holds agentd's state directory"), "{command}: {r}");
    }
}

/// A command that leaves four kinds of escapee behind, each a `sleep` of
/// its own duration, then waits.
fn escapees() -> (String, Vec<String>) {
    let t = tag();
    let tags: Vec<String> = (1..=4).map(|i| format!("{t}{i}")).collect();
    let cmd = format!(
        "setsid env -i sleep {} & env -u AGENTD_PROCESS setsid sleep {} & (sleep {} &); \
         (trap '' TERM; exec sleep {}) & sleep 60",
        tags[0], tags[1], tags[2], tags[3]
    );
    (cmd, tags)
}

async fn all_started(tags: &[String]) {
    agentd_tests::eventually("every escapee started", || tags.iter().all(|t| !procs(&format!("sleep {t}")).is_empty()))
        .await;
}

async fn none_survive(tags: &[String]) {
    for t in tags {
        none_left(&format!("sleep {t}")).await;
    }
}

#[tokio::test]
async fn escapees_end_with_cancel_timeout_and_session_close() {
    let d = TestDaemon::start().await;
    // Cancel.
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    let (cmd, tags) = escapees();
    let uses = vec![tool_use("b", "Bash", json!({ "command": cmd }))];
    s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses, "end": true })).await;
    all_started(&tags).await;
    s.c.ok("turn/cancel", json!({ "session_id": s.id })).await;
    none_survive(&tags).await;
    // Timeout.
    let (cmd, tags) = escapees();
    let r = s.bash(json!({ "command": cmd, "timeout": 1500 })).await;
    assert!(text(&r).contains("timeout and was moved to the background"), "{r}");
    // Moved to the background at its timeout: TaskStop ends every escapee.
    let job = r["structured_content"]["backgroundTaskId"].as_str().unwrap().to_owned();
    s.c.tool(&s.id, "TaskStop", json!({ "task_id": job })).await;
    none_survive(&tags).await;
    // Session close, with a background job too.
    let (cmd, tags) = escapees();
    let (job, job_tags) = escapees();
    let r = s.bash(json!({ "command": job, "run_in_background": true })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let uses = vec![tool_use("c", "Bash", json!({ "command": cmd }))];
    s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses, "end": true })).await;
    all_started(&tags).await;
    all_started(&job_tags).await;
    s.c.ok("session/close", json!({ "session_id": s.id })).await;
    none_survive(&tags).await;
    none_survive(&job_tags).await;
}

#[tokio::test]
async fn escapees_end_with_the_daemon_sigterm_and_sigkill() {
    for signal in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGKILL] {
        let mut daemon = StandaloneDaemon::start(&["--shutdown-grace", "2"], &[]);
        let ws = tempfile::tempdir().unwrap();
        let mut c = RawConn::connect(&daemon.socket).await;
        let created = c.ok("session/create", json!({ "cwd": ws.path(), "mode": "bypass" })).await;
        let id = created["session_id"].as_str().unwrap().to_owned();
        if signal == nix::sys::signal::Signal::SIGTERM {
            // The real binary refuses every descendant, tool or not.
            talker(ws.path(), &daemon.socket);
            let r =
                c.tool(&id, "Bash", json!({ "command": "python3 talk.py", "dangerouslyDisableSandbox": true })).await;
            assert!(text(&r).contains("refused"), "{r}");
        }
        let (cmd, tags) = escapees();
        let mut events = EventStream::open(&daemon.socket, &id, None).await.unwrap();
        let uses = vec![tool_use("b", "Bash", json!({ "command": cmd }))];
        c.ok("turn/submit", json!({ "session_id": id, "tool_uses": uses, "end": true })).await;
        within("started", events.until(|e| e["type"] == "tool/started")).await;
        all_started(&tags).await;
        daemon.signal(signal);
        daemon.wait_exit();
        none_survive(&tags).await;
    }
}

#[test]
fn the_helper_refuses_to_run_for_a_parent_that_is_not_its_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report");
    let spec = json!({
        "profile": "read_only", "roots": [dir.path()], "read": [], "protect": [], "tmp": dir.path(),
        "network": false, "namespaces": true, "parent": 1, "foreground": true, "drain_ms": 0, "report": report,
    });
    let out = std::process::Command::new(agentd_tests::bin_path("agentd-sandbox"))
        .arg("--spec")
        .arg(spec.to_string())
        .arg("--")
        .args(["bash", "-c", "touch ran"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(!dir.path().join("ran").exists());
    let mut text = String::new();
    std::fs::File::open(&report).unwrap().read_to_string(&mut text).unwrap();
    assert!(text.contains("daemon is gone"), "{text}");
}

#[tokio::test]
async fn metadata_outside_the_workspace_cannot_change() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    let victim = outside.path().join("victim");
    std::fs::write(&victim, "x").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
    for sandbox in ["read_only", "workspace_write"] {
        let mut s = session(&d, json!({ "mode": "bypass", "sandbox": { "mode": sandbox } })).await;
        for cmd in [
            format!("chmod 4777 {}", victim.display()),
            format!("touch -d 2001-01-01 {}", victim.display()),
            format!("python3 -c 'import os; os.setxattr(\"{}\", \"user.x\", b\"1\")'", victim.display()),
        ] {
            let r = s.run(&cmd).await;
            assert_eq!(r["is_error"], true, "{sandbox}: {cmd}: {r}");
        }
        let meta = std::fs::metadata(&victim).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o644, "{sandbox}");
        assert!(
            meta.modified().unwrap()
                > std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000)
        );
    }
    // Inside the workspace, workspace_write may chmod (but not setuid).
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    let r = s.run("touch run.sh && chmod +x run.sh && test -x run.sh && echo ok").await;
    assert_eq!(text(&r), "ok\n", "{r}");
    let r = s.run("chmod u+s run.sh").await;
    assert_eq!(r["is_error"], true, "{r}");
}

#[tokio::test]
async fn the_cwd_file_is_not_a_way_to_read_or_hang() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "TOP-SECRET").unwrap();
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    let r =
        s.run(&format!("ln -sf {}/secret.txt \"$TMPDIR/.agentd-cwd\"; trap - EXIT", outside.path().display())).await;
    assert!(!text(&r).contains("TOP-SECRET"), "{r}");
    let r = s.run("ln -sf /proc/self/environ \"$TMPDIR/.agentd-cwd\"; trap - EXIT").await;
    assert!(!text(&r).contains("PATH="), "{r}");
    let r = s.run("mkfifo \"$TMPDIR/.agentd-cwd\"; trap - EXIT; echo done").await;
    assert_eq!(text(&r), "done\n", "{r}");
    // `..` in the directory it names does not lead out of the workspace.
    let r = s.run(&format!("trap - EXIT; echo {}/../../.. > \"$TMPDIR/.agentd-cwd\"", d.dir.path().display())).await;
    assert_eq!(r["is_error"], false, "{r}");
    let r = s.run("pwd").await;
    assert_eq!(text(&r).trim(), std::fs::canonicalize(d.dir.path()).unwrap().to_str().unwrap(), "{r}");
}

#[tokio::test]
async fn git_cannot_be_swapped_and_the_state_dir_is_read_only() {
    let d = TestDaemon::start().await;
    std::fs::create_dir_all(d.dir.path().join(".git/hooks")).unwrap();
    let mut s = session(&d, json!({ "mode": "bypass" })).await;
    // Moved away and a repository put in its place: its hooks are a
    // repository's hooks wherever it is, and are not applied.
    let r = s.run(
        "mv .git .git-real; git init -q . && printf '#!/bin/sh\\necho PWNED\\n' > .git/hooks/pre-commit && chmod +x \
         .git/hooks/pre-commit",
    )
    .await;
    assert!(r["is_error"] == true || text(&r).contains("[not applied:"), "{r}");
    assert!(!d.dir.path().join(".git/hooks/pre-commit").exists(), "{r}");
    // The workspace holds the daemon's state here: other calls' files in it
    // are not the command's to change, the call's own temp dir is.
    let r = s.run("touch state/planted").await;
    assert!(r["is_error"] == true || text(&r).contains("[not applied:"), "{r}");
    assert!(!d.dir.path().join("state/planted").exists());
    let r = s.run("echo hi > \"$TMPDIR/x\" && cat \"$TMPDIR/x\"").await;
    assert_eq!(text(&r), "hi\n", "{r}");
}

#[tokio::test]
async fn a_profile_that_cannot_be_applied_is_an_error_and_nothing_runs() {
    let d = TestDaemon::start().await;
    let extra = tempfile::tempdir().unwrap();
    let gone = extra.path().join("gone");
    std::fs::create_dir(&gone).unwrap();
    let mut s = session(&d, json!({ "mode": "bypass", "add_dirs": [gone] })).await;
    std::fs::remove_dir(&gone).unwrap();
    let r = s.run("touch ran.txt").await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(text(&r).contains("sandbox could not be applied"), "{r}");
    assert!(text(&r).contains("gone"), "names what failed: {r}");
    assert!(!d.dir.path().join("ran.txt").exists(), "nothing ran");
}

#[tokio::test]
async fn settings_a_command_creates_are_not_applied() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let mut s = session(&d, json!({ "permissions": { "allow": ["Bash(mkdir:*)", "Bash(cp:*)"] } })).await;
    std::fs::write(ws.join("planted.json"), "{\"permissions\":{\"allow\":[\"Bash\"]}}").unwrap();
    // The command runs behind the layer (or the older wall refuses it);
    // nothing is left behind, at the top or deeper (a session opened on
    // pkg/ would read them), in any case (a case-insensitive directory
    // takes `.CLAUDE` for `.claude`).
    for (cmd, planted) in [
        ("mkdir .claude/x", ".claude"),
        ("cp planted.json .mcp.json", ".mcp.json"),
        ("mkdir -p pkg/.claude && cp planted.json pkg/.claude/settings.json", "pkg/.claude"),
        ("mkdir -p lib/.CLAUDE && cp planted.json lib/.CLAUDE/settings.json", "lib/.CLAUDE"),
        (
            "mkdir -p a/b/c/d/e/f/g/.claude && cp planted.json a/b/c/d/e/f/g/.claude/settings.json",
            "a/b/c/d/e/f/g/.claude",
        ),
    ] {
        let r = s.run(cmd).await;
        assert_eq!(r["sandbox"], "workspace_write", "{r}");
        assert!(r["is_error"] == true || text(&r).contains("[not applied:"), "{cmd}: {r}");
        assert!(!ws.join(planted).exists(), "{cmd}: {r}");
    }
    // Settings that were there before are the user's: untouched.
    std::fs::create_dir(ws.join(".agentd")).unwrap();
    let r = s.run("mkdir .agentd/sub").await;
    assert!(r["is_error"] == true || text(&r).contains("[not applied:"), "{r}");
    assert!(ws.join(".agentd").is_dir());
    assert!(!ws.join(".agentd/sub").exists());
}

/// A session whose plan file (in the state directory) holds a secret;
/// and that file.
async fn session_with_plan(d: &TestDaemon) -> (S, std::path::PathBuf) {
    let mut a = session(d, json!({})).await;
    let plan = std::fs::canonicalize(d.dir.path()).unwrap().join("state/plans").join(format!("{}.md", a.id));
    let r = a.c.tool(&a.id, "Write", json!({ "file_path": plan, "content": "SECRET-PLAN\n" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    (a, plan)
}

/// Review: another session's plan file (the state directory's `plans`) is
/// no confined command's business, as the sessions' records are not.
#[tokio::test]
async fn review_a_command_cannot_read_another_sessions_plan() {
    let d = TestDaemon::start().await;
    let (a, plan) = session_with_plan(&d).await;
    assert!(plan.exists());
    // Judged read-only: runs unasked (read_only profile).
    let mut b = session(&d, json!({})).await;
    let r = b.run(&format!("cat state/plans/{}.md", a.id)).await;
    assert!(!text(&r).contains("SECRET-PLAN"), "unasked read_only: {r}");
    // Approved: workspace_write.
    let mut c = session(&d, json!({ "mode": "bypass" })).await;
    let r = c.run("cat state/plans/*.md").await;
    assert!(!text(&r).contains("SECRET-PLAN"), "workspace_write: {r}");
    // The file tools reach no other session's plan either.
    let r = b.c.tool(&b.id, "Read", json!({ "file_path": plan })).await;
    assert!(r["is_error"] == true && !text(&r).contains("SECRET-PLAN"), "{r}");
}

/// Review: with the sandbox off, a command judged read-only runs unasked;
/// the state directory inside the workspace must not count as inside.
#[tokio::test]
async fn review_sandbox_off_a_read_of_the_state_dir_is_asked() {
    let d = TestDaemon::start().await;
    let (a, _) = session_with_plan(&d).await;
    let mut b = session(&d, json!({ "sandbox": { "mode": "off" } })).await;
    let r = b.run(&format!("cat state/plans/{}.md", a.id)).await;
    assert!(!text(&r).contains("SECRET-PLAN"), "{r}");
    let r = b.run("ls state").await;
    assert_eq!(r["is_error"], true, "{r}");
}

/// `agentd` with `args` on a fresh socket, waited for (it must exit on its
/// own within the deadline): its exit code and stderr.
fn agentd_exits(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = agentd_tests::agentd_command(&dir.path().join("agentd.sock"), &dir.path().join("state"));
    cmd.args(args).envs(env.iter().copied()).env_remove("AGENTD_SOCKET");
    let log = dir.path().join("stderr");
    cmd.stderr(std::fs::File::create(&log).unwrap()).env("RUST_LOG", "error");
    let status = agentd_tests::ChildGuard::spawn(&mut cmd).wait_exit();
    (status.code(), std::fs::read_to_string(log).unwrap_or_default())
}

#[test]
fn a_partial_sandbox_is_named_asks_instead_of_running_unasked_and_can_be_refused() {
    // Forced: the daemon believes the kernel has no user namespaces (as
    // under a container's default seccomp profile).
    let d = StandaloneDaemon::start(&["--sandbox-without", "namespaces"], &[]);
    std::fs::write(d.dir.path().join("notes.txt"), "hello\n").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let info = c.ok("daemon/info", json!({})).await;
        assert_eq!(info["sandbox"]["level"], "partial", "{info}");
        let missing: Vec<&str> = info["sandbox"]["walls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["applied"] == false)
            .map(|w| w["name"].as_str().unwrap())
            .collect();
        assert!(missing.contains(&"namespaces"), "{info}");
        let id = c.session(json!({ "cwd": d.dir.path(), "permission_timeout_ms": 50 })).await;
        let r = c.tool(&id, "Bash", json!({ "command": "cat notes.txt" })).await;
        assert_eq!(r["is_error"], true, "a judged read no longer runs unasked: {r}");
        assert!(text(&r).contains("sandbox is partial"), "{r}");
        // Approved commands still run confined, and name the missing walls.
        let bypass = c.session(json!({ "cwd": d.dir.path(), "mode": "bypass" })).await;
        let r = c.tool(&bypass, "Bash", json!({ "command": "cat notes.txt" })).await;
        assert!(text(&r).starts_with("hello"), "{r}");
        assert!(text(&r).contains("could not apply these walls of the sandbox: namespaces"), "{r}");
    });
    let (code, out, _) = agentd_tests::agentctl(&d.socket, &["status"]);
    assert!(code == 0 && out.contains("sandbox:     partial (missing: namespaces"), "{out}");
    let (code, _, err) = agentd_tests::agentctl(&d.socket, &["status", "--require-sandbox"]);
    assert!(code != 0 && err.contains("partial"), "a readiness probe fails: {code} {err}");

    // --require-sandbox refuses to start unless full, in one line.
    for (args, env, needle) in [
        (vec!["--require-sandbox", "--sandbox-without", "unix_sockets"], vec![], "missing unix_sockets"),
        (vec!["--sandbox-without", "namespaces"], vec![("AGENTD_REQUIRE_SANDBOX", "1")], "missing namespaces"),
        (vec!["--require-sandbox", "--no-sandbox"], vec![], "the sandbox level is none"),
        (vec!["--sandbox-without", "walls"], vec![], "no wall \"walls\""),
    ] {
        let (code, err) = agentd_exits(&args, &env);
        assert!(code.is_some_and(|c| c != 0), "{args:?}: {code:?} {err}");
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{args:?}: {err}");
    }
}

#[test]
fn require_sandbox_starts_where_the_sandbox_is_whole() {
    let plain = StandaloneDaemon::start(&[], &[]);
    let (_, out, _) = agentd_tests::agentctl(&plain.socket, &["status"]);
    drop(plain);
    if !out.contains("sandbox:     full") {
        // This machine's kernel lacks a wall: the daemon must refuse.
        let (code, err) = agentd_exits(&["--require-sandbox"], &[]);
        assert!(code.is_some_and(|c| c != 0) && err.contains("--require-sandbox"), "{out} {err}");
        return;
    }
    let d = StandaloneDaemon::start(&["--require-sandbox"], &[]);
    let (code, out, err) = agentd_tests::agentctl(&d.socket, &["status", "--require-sandbox"]);
    assert_eq!(code, 0, "{out} {err}");
}

#[tokio::test]
async fn with_the_sandbox_off_an_escapee_that_clears_its_environment_still_ends_with_its_call() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "mode": "bypass", "sandbox": { "mode": "off" } })).await;
    let t = tag();
    let r = s.run(&format!("setsid env -i sleep 300{t} & (env -i setsid sleep 301{t} &); echo started")).await;
    assert!(text(&r).contains("started") && r["sandbox"] == "off", "{r}");
    none_left(&format!("sleep 300{t}")).await;
    none_left(&format!("sleep 301{t}")).await;
}

#[test]
fn a_masked_proc_is_a_missing_wall_not_a_full_sandbox() {
    // As a container runtime has it by default (and Kubernetes'
    // procMount: Default): parts of /proc covered, so a PID namespace's own
    // /proc cannot be mounted and a call would see every process.
    let masked = |program: &std::path::Path, args: &[&str]| {
        let mut cmd = std::process::Command::new("unshare");
        cmd.args([
            "--user",
            "--map-root-user",
            "--mount",
            "--",
            "sh",
            "-c",
            "mount -t tmpfs tmpfs /proc/sys && exec \"$0\" \"$@\"",
        ]);
        cmd.arg(program).args(args);
        cmd
    };
    let scratch = tempfile::tempdir().unwrap();
    let out = masked(&agentd_tests::bin_path("agentd-sandbox"), &["--probe", &scratch.path().display().to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(probe["namespaces"], false, "{probe}");
    assert_eq!(probe["network_namespace"], false, "{probe}");
    assert!(probe["namespaces_error"].as_str().unwrap().contains("/proc"), "{probe}");
    // Unmasked, the same probe finds the wall.
    let out = std::process::Command::new(agentd_tests::bin_path("agentd-sandbox"))
        .args(["--probe", &scratch.path().display().to_string()])
        .output()
        .unwrap();
    let probe: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(probe["namespaces"], true, "{probe}");
    // The daemon under --require-sandbox refuses to start, naming the /proc.
    let dir = tempfile::tempdir().unwrap();
    let out = masked(&agentd_tests::bin_path("agentd"), &["--require-sandbox", "--no-socket-activation"])
        .arg("--socket")
        .arg(dir.path().join("run/s.sock"))
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("RUST_LOG", "error")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("missing namespaces") && err.contains("unmasked /proc"), "{err}");
}

#[tokio::test]
async fn without_the_sandbox_a_walk_that_follows_links_asks() {
    // A link in the workspace to a file outside it: `grep -R` would read it
    // unasked where no sandbox stands (found by the second review).
    let d = TestDaemon::start().await;
    let (ws, outside) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(outside.path().join("secret.txt"), "OUTSIDE-MARK\n").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), ws.path().join("lk")).unwrap();
    std::fs::write(ws.path().join("inside.txt"), "INSIDE-MARK\n").unwrap();
    let mut s = session(&d, json!({ "cwd": ws.path(), "sandbox": { "mode": "off" } })).await;
    for walk in ["grep -R MARK .", "find -L . -name secret.txt", "rg -L MARK"] {
        let r = s.run(walk).await;
        assert_eq!(r["is_error"], true, "{walk}: {r}");
        assert!(text(&r).contains("permission required"), "{walk}: {r}");
        assert!(!text(&r).contains("OUTSIDE-MARK"), "{walk}: {r}");
    }
    // `grep -r` does not follow links: judged read-only, it runs.
    let r = s.run("grep -r MARK .").await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains("INSIDE-MARK") && !text(&r).contains("OUTSIDE-MARK"), "{r}");
}

/// What a confined command might try on the sandbox's own machinery (an
/// attack review's attempts, kept): an x32 syscall number (refused as a
/// whole, ahead of the native table) and a descriptor of its helper's
/// control socket (the call's and the report's way back: close-on-exec,
/// never the command's).
#[tokio::test]
async fn a_command_gets_neither_x32_calls_nor_its_helpers_socket() {
    let d = TestDaemon::start().await;
    let probe = "python3 -c 'import ctypes, os\n\
                 libc = ctypes.CDLL(None, use_errno=True)\n\
                 for nr in (39, 101, 165):\n\
                 \x20   r = libc.syscall(0x40000000 | nr); print(\"x32\", nr, r, ctypes.get_errno())\n\
                 print(\"fds\", sorted(int(f) for f in os.listdir(\"/proc/self/fd\")))'";
    for mode in ["read_only", "workspace_write"] {
        let mut s = session(&d, json!({ "mode": "bypass", "sandbox": { "mode": mode } })).await;
        let r = s.run(probe).await;
        let out = text(&r);
        // getpid, ptrace, mount in x32 numbering: EPERM (1), whatever the
        // kernel would say of x32.
        for nr in [39, 101, 165] {
            assert!(out.contains(&format!("x32 {nr} -1 1\n")), "{mode}: {r}");
        }
        // stdin, stdout, stderr and the listing's own directory: nothing else.
        assert!(out.contains("fds [0, 1, 2, 3]"), "{mode}: {r}");
    }
}

/// A command gets every signal as a program expects it: SIGPIPE and
/// SIGXFSZ are ignored in the daemon (Rust's runtime, the daemon's own
/// file-size safety) and must not be in what it runs, or `yes | head -1`
/// fails with EPIPE and a loop writing to a closed pipe never ends.
#[tokio::test]
async fn commands_get_default_signal_dispositions_in_every_profile() {
    let d = TestDaemon::start().await;
    let probe = "yes | head -1; echo \"pipe ${PIPESTATUS[*]}\"; \
                 (ulimit -f 1; head -c 4096 /dev/zero > big) 2>/dev/null; echo \"xfsz $?\"; rm -f big; \
                 grep -E '^Sig(Ign|Blk)' /proc/self/status";
    for mode in ["read_only", "workspace_write", "off"] {
        let mut s = session(&d, json!({ "mode": "bypass", "sandbox": { "mode": mode } })).await;
        let r = s.run(probe).await;
        let out = text(&r);
        // 141: killed by SIGPIPE; 153: killed by SIGXFSZ (where the file
        // could be written at all: read_only cannot, and the shell's own
        // complaint about it goes to /dev/null with the subshell's stderr,
        // or it could arrive before `y` on a loaded machine).
        assert!(out.starts_with("y\npipe 141 0\n"), "{mode}: {r}");
        if mode != "read_only" {
            assert!(out.contains("xfsz 153"), "{mode}: {r}");
        }
        // Nothing ignored or blocked, the C library's own two included.
        assert!(out.contains("SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n"), "{mode}: {r}");
    }
}

/// A confined background job ends with its helper's report; what the
/// command wrote last (a whole pipe's worth, just before it exited) is
/// still read to the end, not cut when the job is declared over.
#[tokio::test]
async fn a_confined_job_s_last_output_is_not_lost_when_it_ends() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "sandbox": { "auto_allow": true } })).await;
    let expected: String = (1..=40_000).map(|i| format!("{i}\n")).collect();
    let mut jobs = Vec::new();
    for _ in 0..4 {
        let r = s.bash(json!({ "command": "seq 1 40000", "run_in_background": true })).await;
        jobs.push(
            text(&r).split("running in background with ID: ").nth(1).unwrap().split('.').next().unwrap().to_owned(),
        );
    }
    for job in jobs {
        let mut seen = String::new();
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        loop {
            assert!(std::time::Instant::now() < deadline, "job {job} never ended: {} bytes", seen.len());
            let input = json!({ "task_id": job, "timeout": 1000 });
            let r = s.c.tool(&s.id, "TaskOutput", input).await;
            let t = text(&r);
            match t.split_once(&format!("[job {job} ")) {
                // The status line, then the line naming the output file.
                Some((out, rest)) if rest.starts_with("exited with code 0]") => {
                    seen.push_str(out);
                    break;
                }
                Some((out, rest)) if rest.starts_with("is running]") => seen.push_str(out),
                _ => panic!("{r}"),
            }
        }
        assert_eq!(seen.len(), expected.len(), "job {job} lost output");
        assert!(seen == expected, "job {job}'s output differs");
    }
}
