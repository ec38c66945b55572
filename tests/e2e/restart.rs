//! A daemon that dies and comes back: sessions, events, granted rules and
//! the file-state cache survive; what was running ends with an error result;
//! nothing is left behind. Through the real binary, killed with SIGKILL and
//! started again on the same socket and state directory.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, none_left, procs, tag, tool_use};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A daemon started with `args`, a workspace `ws` in its directory, and
/// a runtime to talk to it.
fn start_with_ws(args: &[&str]) -> (StandaloneDaemon, PathBuf, tokio::runtime::Runtime) {
    let d = StandaloneDaemon::start(args, &[]);
    let ws = d.dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    (d, ws, rt())
}

fn text(v: &Value) -> String {
    v["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// Waits until the store's record of `id` (saved by the daemon's periodic
/// flush) holds every one of `needles`.
async fn saved(d: &StandaloneDaemon, id: &str, needles: &[&str]) {
    let path = d.dir.path().join("state/store").join(id).join("session.json");
    agentd_tests::eventually("the session is saved", || {
        let record = std::fs::read_to_string(&path).unwrap_or_default();
        needles.iter().all(|n| record.contains(n))
    })
    .await;
}

fn kill9(d: &mut StandaloneDaemon) {
    d.signal(Signal::SIGKILL);
    d.wait_exit();
}

#[test]
fn a_killed_daemon_comes_back_with_its_sessions_and_ends_what_ran() {
    let (mut d, ws, rt) = start_with_ws(&[]);
    std::fs::write(ws.join("notes.txt"), "one\ntwo\n").unwrap();
    let t = tag();
    let (id, seen_seq, turn) = rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let call = |name: &str, input: Value| json!({ "session_id": id, "name": name, "input": input });
        c.ok("tool/call", call("Read", json!({ "file_path": "notes.txt" }))).await;
        c.ok("tool/call", call("TodoWrite", json!({ "todos": [{"content": "Survive", "status": "in_progress", "activeForm": "Surviving"}] }))).await;
        // Outside any sandbox too (no PID namespace ends it with the daemon):
        // the next daemon ends it from the process ledger.
        let bare = c.session(json!({ "cwd": ws, "mode": "bypass", "sandbox": { "mode": "off" } })).await;
        c.ok("turn/submit", json!({ "session_id": bare, "tool_uses": [tool_use("bare", "Bash", json!({ "command": format!("setsid sleep 2000{t} & sleep 2000{t}") }))] })).await;
        let mut events = EventStream::open(&d.socket, &id, Some(0)).await.unwrap();
        let r = c
            .ok("turn/submit", json!({ "session_id": id, "tool_uses": [tool_use("long", "Bash", json!({ "command": format!("sleep 1000{t}") }))] }))
            .await;
        let turn = r["turn_id"].as_str().unwrap().to_owned();
        let seen = events.until(|e| e["tool_use_id"] == "long" && e["type"] == "tool/started").await;
        saved(&d, &id, &["Survive", "notes.txt"]).await;
        (id, seen.last().unwrap()["seq"].as_u64().unwrap(), turn)
    });
    assert!(!procs(&format!("sleep 1000{t}")).is_empty());
    assert!(procs(&format!("sleep 2000{t}")).len() >= 2);
    kill9(&mut d);
    d.restart();
    rt.block_on(async {
        // Nothing of the dead daemon's commands survives.
        none_left(&format!("sleep 1000{t}")).await;
        none_left(&format!("sleep 2000{t}")).await;
        let mut c = RawConn::connect(&d.socket).await;
        let list = c.ok("session/list", json!({})).await;
        assert!(list["sessions"].as_array().unwrap().iter().any(|s| s["session_id"] == json!(id)), "{list}");
        let info = c.ok("session/get", json!({ "session_id": id })).await;
        assert_eq!(info["todos"][0]["content"], "Survive", "{info}");
        // The stream replays from before the kill, then the call's end.
        let mut events = EventStream::open(&d.socket, &id, Some(0)).await.unwrap();
        let all = events.until(|e| e["type"] == "turn/completed" && e["turn_id"] == json!(turn)).await;
        let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "every event, in order: {all:?}");
        assert!(seqs.len() as u64 > seen_seq);
        let result = all.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == "long").unwrap();
        assert_eq!(result["is_error"], true);
        assert!(text(result).contains("interrupted: the daemon restarted"), "{result}");
        // After a client's last seen seq, only what came later.
        let mut resumed = EventStream::open(&d.socket, &id, Some(seen_seq)).await.unwrap();
        let later = resumed.until(|e| e["type"] == "turn/completed").await;
        assert_eq!(later[0]["seq"].as_u64(), Some(seen_seq + 1));
        // The file-state cache survived: Edit works without reading again.
        let r = c
            .tool(&id, "Edit", json!({ "file_path": "notes.txt", "old_string": "two", "new_string": "2" }))
            .await;
        assert_eq!(r["is_error"], false, "{r}");
        // The turn of the interrupted call is over; new work goes on.
        let r = c.request("turn/submit", json!({ "session_id": id, "turn_id": turn, "tool_uses": [tool_use("x", "Read", json!({ "file_path": "notes.txt" }))] })).await;
        assert!(r["error"]["message"].as_str().unwrap_or_default().contains("has ended"), "{r}");
        // Closing deletes its records.
        c.ok("session/close", json!({ "session_id": id })).await;
    });
    assert!(!d.dir.path().join("state/store").join(&id).exists());
    assert!(!d.dir.path().join("state/sessions").join(&id).exists());
}

#[test]
fn a_pending_request_is_denied_after_a_restart_and_granted_rules_stay() {
    let (mut d, ws, rt) = start_with_ws(&[]);
    let id = rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws })).await;
        let mut events = EventStream::open(&d.socket, &id, None).await.unwrap();
        let submit = |uses: Value| json!({ "session_id": id, "tool_uses": uses });
        c.ok("turn/submit", submit(json!([tool_use("a", "Bash", json!({ "command": "touch a.txt" }))]))).await;
        let req = events.until(|e| e["type"] == "permission/request").await.pop().unwrap();
        c.ok(
            "permission/respond",
            json!({ "session_id": id, "request_id": req["request_id"], "decision": "allow_always", "rule": "Bash(touch:*)" }),
        )
        .await;
        events.until(|e| e["type"] == "tool/result" && e["tool_use_id"] == "a").await;
        c.ok("turn/submit", submit(json!([tool_use("b", "Bash", json!({ "command": "mkdir made" }))]))).await;
        events.until(|e| e["type"] == "permission/request" && e["tool_use_id"] == "b").await;
        saved(&d, &id, &["Bash(touch:*)"]).await;
        id
    });
    kill9(&mut d);
    d.restart();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let info = c.ok("session/get", json!({ "session_id": id })).await;
        assert_eq!(info["granted_rules"], json!(["Bash(touch:*)"]), "{info}");
        assert_eq!(info["pending_permissions"], json!([]));
        let mut events = EventStream::open(&d.socket, &id, Some(0)).await.unwrap();
        let all = events.until(|e| e["type"] == "tool/result" && e["tool_use_id"] == "b").await;
        let resolved = all.iter().rev().find(|e| e["type"] == "permission/resolved").unwrap();
        assert_eq!(resolved["allowed"], false, "{resolved}");
        assert!(resolved["reason"].as_str().unwrap().contains("restarted"));
        assert!(text(all.last().unwrap()).contains("interrupted"));
        assert!(!ws.join("made").exists());
        // The granted rule still allows, without asking.
        let r = c.tool(&id, "Bash", json!({ "command": "touch c.txt" })).await;
        assert_eq!(r["is_error"], false, "{r}");
        assert!(ws.join("c.txt").exists());
    });
}

#[test]
fn writes_killed_mid_way_leave_no_temporary_file() {
    let (mut d, ws, rt) = start_with_ws(&[]);
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let big = "x".repeat(4 * 1024 * 1024);
        // Writes back to back, on a connection of their own, until one is
        // caught in progress (a loaded machine may miss a few). Each to a
        // file of its own: a second write of a file not read since would be
        // refused at once, and leave no window to catch.
        let socket = d.socket.clone();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let Ok(mut w) = tokio::net::UnixStream::connect(&socket).await else { return };
            for i in 0..60 {
                let line = json!({ "jsonrpc": "2.0", "id": 1000 + i, "method": "tool/call",
                    "params": { "session_id": id, "name": "Write", "input": { "file_path": format!("f{i}.txt"), "content": big } } });
                if w.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                    return;
                }
            }
        });
        // Until a temporary file is seen (a write in progress), at most a
        // while: watched from a thread of its own, which spins (a write's
        // window is a few milliseconds; an async poll on a loaded machine
        // missed every one).
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let watcher = {
            let (seen, ws) = (seen.clone(), ws.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(60);
                while Instant::now() < deadline {
                    if std::fs::read_dir(&ws).unwrap().flatten().any(|e| e.file_name().to_string_lossy().contains(".agentd-")) {
                        seen.store(true, std::sync::atomic::Ordering::SeqCst);
                        return;
                    }
                }
            })
        };
        while !watcher.is_finished() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(seen.load(std::sync::atomic::Ordering::SeqCst), "no write was caught in progress");
        let _ = c;
    });
    kill9(&mut d);
    d.restart();
    let left: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".agentd-") || n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}\n{}", d.stderr());
    // Every file is whole: old or new, never cut.
    for e in std::fs::read_dir(&ws).unwrap().flatten() {
        assert_eq!(std::fs::metadata(e.path()).unwrap().len(), 4 * 1024 * 1024, "{}", e.path().display());
    }
}

#[test]
fn a_torn_or_corrupt_store_is_survived() {
    let (mut d, ws, rt) = start_with_ws(&[]);
    let (good, bad) = rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let mut ids = Vec::new();
        for _ in 0..2 {
            let id = c.session(json!({ "cwd": ws })).await;
            c.tool(&id, "Glob", json!({ "pattern": "*" })).await;
            ids.push(id);
        }
        (ids[0].clone(), ids[1].clone())
    });
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait_exit().code(), Some(0));
    let store = d.dir.path().join("state/store");
    // A torn last line in one, garbage for a record in the other.
    let log = store.join(&good).join("events.log");
    let before = std::fs::read(&log).unwrap();
    let mut torn = before.clone();
    torn.extend_from_slice(b"0badc0de {\"seq\":99,\"type\":\"tur");
    std::fs::write(&log, &torn).unwrap();
    std::fs::write(store.join(&bad).join("session.json"), b"{ not json").unwrap();
    d.restart();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let ids = c.session_ids().await;
        assert_eq!(ids, [good.as_str()], "{ids:?}");
        let mut events = EventStream::open(&d.socket, &good, Some(0)).await.unwrap();
        let all = events.until(|e| e["type"] == "turn/completed").await;
        assert_eq!(all[0]["seq"], 1);
        // New events follow the last whole one.
        c.tool(&good, "Glob", json!({ "pattern": "*" })).await;
        let next = events.until(|e| e["type"] == "tool/queued").await;
        assert_eq!(next.last().unwrap()["seq"].as_u64(), Some(all.last().unwrap()["seq"].as_u64().unwrap() + 1));
    });
    assert_eq!(std::fs::read(&log).unwrap()[..before.len()], before[..], "the torn line is cut off");
    let aside: Vec<String> = std::fs::read_dir(&store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{bad}.corrupt-")))
        .collect();
    assert_eq!(aside.len(), 1, "the unreadable session is moved aside");
    assert!(d.stderr().contains("cannot be read"), "{}", d.stderr());
}

#[test]
fn sighup_stops_cleanly_and_a_second_signal_leaves_nothing_running() {
    // SIGHUP: a clean stop; the session is back after the restart.
    let (mut d, ws, rt) = start_with_ws(&["--shutdown-grace", "120"]);
    let id = rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        c.session(json!({ "cwd": ws, "mode": "bypass", "sandbox": { "mode": "off" } })).await
    });
    d.signal(Signal::SIGHUP);
    assert_eq!(d.wait_exit().code(), Some(0), "{}", d.stderr());
    assert!(!d.socket.exists(), "the socket is removed");
    d.restart();
    // Commands that ignore SIGTERM, outside any sandbox, and two SIGTERMs.
    let t = tag();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        assert_eq!(c.ok("session/list", json!({})).await["sessions"][0]["session_id"], json!(id));
        for i in 0..3 {
            let cmd = format!("trap '' TERM; sleep 1000{t} & sleep 1000{t}; echo {i}");
            c.ok("turn/submit", json!({ "session_id": id, "tool_uses": [tool_use(&format!("s{i}"), "Bash", json!({ "command": cmd, "run_in_background": i == 0 }))] })).await;
        }
        agentd_tests::eventually("the commands run", || procs(&format!("sleep 1000{t}")).len() >= 4).await;
    });
    d.signal(Signal::SIGTERM);
    std::thread::sleep(Duration::from_millis(20));
    d.signal(Signal::SIGTERM);
    let status = d.wait_exit();
    assert!(!d.socket.exists(), "the socket is removed ({status})");
    rt.block_on(none_left(&format!("sleep 1000{t}")));
}

#[test]
fn a_state_directory_others_can_write_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o777)).unwrap();
    // agentd on `state` fails; its stderr.
    let refused = || {
        let out = agentd_tests::agentd_command(&dir.path().join("s.sock"), &state).output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = refused();
    assert!(err.contains("others can write") && err.contains("chmod 700"), "{err}");

    // A volume mounted with Kubernetes' fsGroup: group-writable and
    // set-group-id. Refused, saying so and what to do; the directory it
    // suggests (inside) is made private and works.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o2775)).unwrap();
    let err = refused();
    let inside = state.join("agentd");
    assert!(err.contains("fsGroup") && err.contains(&format!("--state-dir {}", inside.display())), "{err}");
    let mut d = agentd_tests::ChildGuard::spawn(
        agentd_tests::agentd_command(&dir.path().join("s.sock"), &inside).stderr(std::process::Stdio::null()),
    );
    agentd_tests::eventually_blocking("it serves", || dir.path().join("s.sock").exists());
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&inside).unwrap().mode() & 0o777, 0o700);
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(d.0.id() as i32), nix::sys::signal::Signal::SIGTERM);
    d.wait_exit();
}

/// agentd's state directory is nobody's business but agentd's: with the
/// state inside a session's workspace (a workspace that is `$HOME` holds
/// the default one), no tool reads or writes it, walks skip it, and Bash
/// still works; only the session's own command output may be read.
#[test]
fn no_tool_reaches_the_state_directory() {
    let d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    let rt = rt();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let call = |name: &str, input: Value| json!({ "session_id": id, "name": name, "input": input });
        c.ok("tool/call", call("Write", json!({ "file_path": "notes.txt", "content": "TOPSECRET\n" }))).await;
        let events = format!("state/store/{id}/events.log");
        for (name, input) in [
            ("Read", json!({ "file_path": events })),
            ("Write", json!({ "file_path": "state/procs/1", "content": "1 x" })),
            ("Write", json!({ "file_path": format!("state/store/{id}/session.json"), "content": "{}" })),
            ("LS", json!({ "path": "state" })),
            ("Grep", json!({ "pattern": "TOPSECRET", "path": "state" })),
            ("Glob", json!({ "pattern": "**/*", "path": "state/store" })),
        ] {
            let r = c.ok("tool/call", call(name, input.clone())).await;
            assert!(text(&r).contains("agentd's state directory"), "{name} {input}: {r}");
        }
        // Walks over the workspace pass it by.
        let r = c.ok("tool/call", call("Grep", json!({ "pattern": "TOPSECRET" }))).await;
        assert_eq!(text(&r).trim(), ws.join("notes.txt").display().to_string(), "{r}");
        let r = c.ok("tool/call", call("Glob", json!({ "pattern": "**/events.log", "include_hidden": true }))).await;
        assert!(text(&r).contains("No files found"), "{r}");
        // Bash runs, and cannot see the store or the ledgers.
        let r = c.ok("tool/call", call("Bash", json!({ "command": "ls state/store state/procs | wc -l; cat state/store/*/events.log 2>&1 | head -c 200" }))).await;
        assert!(!text(&r).contains("TOPSECRET"), "{r}");
        // Another session's command output is hidden from this one's commands.
        let other = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let r = c.tool(&other, "Bash", json!({ "command": "seq 1 20000 | sed s/^/OTHERSECRET_/" })).await;
        assert!(text(&r).contains("the full output is in"), "{r}");
        let r = c.ok("tool/call", call("Bash", json!({ "command": "cat state/sessions/*/output/*.log 2>&1 | grep -c OTHERSECRET" }))).await;
        assert!(text(&r).starts_with('0'), "{r}");
        let plain = c.session(json!({ "cwd": ws })).await;
        // Unasked, a glob that reaches into agentd's state directory is no
        // read-only command (as a literal path there is not): it asks.
        let r = c.tool(&plain, "Bash", json!({ "command": "cat state/sessions/*/output/*.log 2>&1 | grep -c OTHERSECRET" })).await;
        assert!(text(&r).starts_with("permission required") && !text(&r).contains("OTHERSECRET_"), "{r}");
        let r = c.tool(&plain, "Bash", json!({ "command": "cat */sessions/*/output/*.log 2>&1 | grep -c OTHERSECRET" })).await;
        assert_eq!(r["sandbox"], "read_only", "{r}");
        assert!(text(&r).starts_with('0'), "{r}");
        // A command's full output stays readable by its session.
        let r = c.ok("tool/call", call("Bash", json!({ "command": "seq 1 20000" }))).await;
        let t = text(&r);
        let file = t.split("the full output is in ").nth(1).and_then(|rest| rest.split([']', ' ']).next()).expect(&t).to_owned();
        let r = c.ok("tool/call", call("Read", json!({ "file_path": file, "limit": 2 }))).await;
        assert_eq!(text(&r).lines().next().unwrap_or_default().trim(), "1\t1", "{r}");
    });
}

/// The state directory may sit inside the socket's directory (hidden from
/// commands with it): Bash still runs.
#[test]
fn bash_runs_with_the_state_inside_the_socket_directory() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("s.sock");
    let mut child = agentd_tests::ChildGuard::spawn(
        agentd_tests::agentd_command(&socket, &dir.path().join("state")).stderr(std::process::Stdio::null()),
    );
    // The workspace elsewhere: the socket's directory would be hidden.
    let elsewhere = tempfile::tempdir().unwrap();
    let ws = elsewhere.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let rt = rt();
    rt.block_on(async {
        agentd_tests::eventually("the socket", || std::os::unix::net::UnixStream::connect(&socket).is_ok()).await;
        let mut c = RawConn::connect(&socket).await;
        let id = c.session(json!({ "cwd": ws })).await;
        let r = c.tool(&id, "Bash", json!({ "command": "echo hi" })).await;
        assert_eq!(text(&r), "hi\n", "{r}");
        // Its directory carries over, so the call's own files were reachable.
        let b = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        let r = c.tool(&b, "Bash", json!({ "command": "cd sub && echo in" })).await;
        assert!(
            text(&r).starts_with("in\n[the shell's directory is now ") && !text(&r).contains("No such file"),
            "{r}"
        );
        let r = c.tool(&b, "Bash", json!({ "command": "pwd" })).await;
        assert!(text(&r).trim_end().ends_with("/sub"), "{r}");
    });
    let _ = child.0.kill();
}

/// A change made by a tool call, and how `session/get` shows it.
type Row<'a> = (&'a str, Value, &'a dyn Fn(&Value) -> bool);

/// What the daemon acknowledges is on disk (issue 27): each change is
/// made, its answer read, the daemon SIGKILLed at once (no sleep) and
/// started again — and the change is there. Every row, several rounds (the
/// window is small).
#[test]
fn what_the_daemon_acknowledged_survives_a_kill_9_right_after() {
    let rt = rt();
    let mut d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let call = |id: &str, name: &str, input: Value| json!({ "session_id": id, "name": name, "input": input });
    let get = |d: &StandaloneDaemon, id: &str| {
        rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            c.ok("session/get", json!({ "session_id": id })).await
        })
    };
    for round in 0..3 {
        let id = rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            c.session(json!({ "cwd": work.path() })).await
        });
        // allow_always: the granted rule.
        rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            let mut events = EventStream::open(&d.socket, &id, None).await.unwrap();
            let uses = vec![tool_use("a", "Bash", json!({ "command": format!("touch r{round}") }))];
            c.ok("turn/submit", json!({ "session_id": id, "tool_uses": uses, "end": true })).await;
            let request = events.until(|e| e["type"] == "permission/request").await.pop().unwrap();
            let answer = json!({ "session_id": id, "request_id": request["request_id"], "decision": "allow_always", "rule": "Bash(touch:*)" });
            c.ok("permission/respond", answer).await;
        });
        kill9(&mut d);
        d.restart();
        assert_eq!(get(&d, &id)["granted_rules"], json!(["Bash(touch:*)"]), "round {round}: the granted rule");
        // TodoWrite, TaskCreate, Config, EnterPlanMode: each tool's change.
        let rows: [Row; 4] = [
            (
                "TodoWrite",
                json!({ "todos": [{ "content": "Survive", "status": "pending", "activeForm": "Surviving" }] }),
                &|info| info["todos"][0]["content"] == "Survive",
            ),
            ("TaskCreate", json!({ "subject": "Keep it", "description": "on disk" }), &|info| {
                info["tasks"][0]["subject"] == "Keep it"
            }),
            ("Config", json!({ "setting": "bash.max_output_chars", "value": 12345 }), &|_| true),
            ("EnterPlanMode", json!({}), &|info| info["mode"] == "plan"),
        ];
        for (tool, input, check) in rows {
            rt.block_on(async {
                let mut c = RawConn::connect(&d.socket).await;
                let r = c.ok("tool/call", call(&id, tool, input)).await;
                assert_eq!(r["is_error"], false, "{tool}: {r}");
            });
            kill9(&mut d);
            d.restart();
            let info = get(&d, &id);
            assert!(check(&info), "round {round}: {tool}'s change is lost: {info}");
            if tool == "Config" {
                let value = rt.block_on(async {
                    let mut c = RawConn::connect(&d.socket).await;
                    c.ok("tool/call", call(&id, "Config", json!({ "setting": "bash.max_output_chars" }))).await
                });
                assert!(text(&value).contains("12345"), "round {round}: the setting is lost: {value}");
            }
        }
        // ToolSearch: the tool it loaded stays loaded.
        let deferring = rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            let id = c.session(json!({ "cwd": work.path(), "tools": { "defer": { "mode": "always" } } })).await;
            let before = c.ok("tool/call", call(&id, "TestDeferred", json!({}))).await;
            assert_eq!(before["is_error"], true, "not loaded yet: {before}");
            let r = c.ok("tool/call", call(&id, "ToolSearch", json!({ "query": "select:TestDeferred" }))).await;
            assert_eq!(r["is_error"], false, "{r}");
            id
        });
        kill9(&mut d);
        d.restart();
        rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            let r = c.ok("tool/call", call(&deferring, "TestDeferred", json!({}))).await;
            assert_eq!(r["is_error"], false, "round {round}: the loaded tool is lost: {r}");
            // session/close: closed stays closed.
            c.ok("session/close", json!({ "session_id": deferring })).await;
        });
        kill9(&mut d);
        d.restart();
        let gone = rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            c.request("session/get", json!({ "session_id": deferring })).await
        });
        assert_eq!(gone["error"]["code"], -32001, "round {round}: a closed session came back: {gone}");
    }
}

#[test]
fn placeholders_and_groups_a_killed_daemon_left_are_gone_after_the_next_start() {
    let mut d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let t = tag();
    let rt = rt();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        // A job in workspace_write: placeholders for the absent protected
        // paths while it runs, and a group in the process ledger.
        let input = json!({ "command": format!("X=1 sleep 1000{t}"), "run_in_background": true });
        let r = c.tool(&id, "Bash", input).await;
        assert!(r["job_id"].is_string() || text(&r).contains("job"), "{r}");
        agentd_tests::eventually("the job runs", || !procs(&format!("sleep 1000{t}")).is_empty()).await;
        assert!(ws.join(".claude").is_dir() && ws.join(".vscode").is_dir(), "placeholders while it runs");
        let ledger = std::fs::read_to_string(d.dir.path().join("state/placeholders/ledger")).unwrap();
        assert!(ledger.contains(".claude"), "{ledger}");
    });
    // Placeholders stay when the daemon dies (nobody removes them) ...
    kill9(&mut d);
    assert!(ws.join(".claude").is_dir());
    // ... and the next daemon removes them, and ends what the ledger names.
    d.restart();
    assert!(!ws.join(".claude").exists() && !ws.join(".vscode").exists(), "placeholders removed at start");
    rt.block_on(none_left(&format!("sleep 1000{t}")));
    let ledger = std::fs::read_to_string(d.dir.path().join("state/placeholders/ledger")).unwrap();
    assert!(ledger.is_empty(), "a new ledger: {ledger}");
}

/// A file-size limit on the daemon (`ulimit -f` in the shell that started
/// it) fails the write that hits it and does not kill the daemon (SIGXFSZ
/// is caught there); what the daemon runs gets SIGXFSZ as any program
/// does (caught, not ignored: an ignored signal would stay ignored across
/// `exec`).
#[test]
fn a_file_size_limit_fails_a_write_without_killing_the_daemon() {
    let d = StandaloneDaemon::start(&["--ephemeral", "--sandbox-helper", "/nonexistent/agentd-sandbox"], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let limit = std::process::Command::new("prlimit")
        .args(["--pid", &d.pid().to_string(), "--fsize=65536:65536"])
        .status()
        .unwrap();
    assert!(limit.success());
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let big = "x".repeat(100_000);
        let path = ws.join("big.txt");
        let input = json!({ "file_path": path, "content": big });
        let r = c.tool(&id, "Write", input).await;
        assert_eq!(r["is_error"], true, "{r}");
        // The daemon is still here, and what it runs (no sandbox helper:
        // bash itself) is killed by the signal.
        let command = "head -c 100000 /dev/zero > spawned.bin; echo \"status $?\"";
        let input = json!({ "command": command });
        let r = c.tool(&id, "Bash", input).await;
        assert!(text(&r).contains("status 153"), "{r}");
        c.ok("daemon/info", json!({})).await;
    });
}
