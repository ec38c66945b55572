//! agentctl against a real daemon: text, `--json`, exit codes.

use agentd_tests::{StandaloneDaemon, agentctl};
use serde_json::Value;

#[test]
fn status_in_text_and_json() {
    let d = StandaloneDaemon::start(&[], &[]);
    let (code, out, err) = agentctl(&d.socket, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with(&format!("agentd {}", env!("CARGO_PKG_VERSION"))), "{out}");
    assert!(out.contains(&format!("pid {}", d.pid())), "{out}");
    let (code, out, _) = agentctl(&d.socket, &["--json", "status"]);
    assert_eq!(code, 0);
    let info: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(info["pid"], Value::from(d.pid()));
    assert_eq!(info["protocol_version"], Value::from(1));
    assert_eq!(info["features"], serde_json::json!(["test-tools"]), "the test build says what it carries");
    assert_eq!(info["socket"], Value::from(d.socket.to_str().unwrap()));
}

#[test]
fn session_create_list_show_close() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap();
    let (code, out, err) =
        agentctl(&d.socket, &["session", "create", "--cwd", cwd, "--mode", "plan", "--allow", "Read(src/**)"]);
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_owned();
    assert_eq!(id.len(), 36, "prints just the id: {out:?}");

    let (code, out, _) = agentctl(&d.socket, &["session", "list"]);
    assert_eq!(code, 0);
    assert!(out.contains(&id) && out.contains("plan"), "{out}");

    let (code, out, _) = agentctl(&d.socket, &["--json", "session", "show", &id]);
    assert_eq!(code, 0);
    let s: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["mode"], "plan");
    assert_eq!(s["permissions"]["allow"][0], "Read(src/**)");
    assert_eq!(s["cwd"], Value::from(std::fs::canonicalize(work.path()).unwrap().to_str().unwrap()));

    let (code, out, _) = agentctl(&d.socket, &["--json", "session", "list"]);
    assert_eq!(code, 0);
    let l: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(l["sessions"].as_array().unwrap().len(), 1);

    let (code, out, _) = agentctl(&d.socket, &["session", "close", &id]);
    assert_eq!((code, out.trim()), (0, format!("closed {id}").as_str()));

    let (code, _, err) = agentctl(&d.socket, &["session", "show", &id]);
    assert_eq!(code, 1, "a refused request exits 1");
    assert!(err.contains("no open session") && err.contains("unknown_session"), "{err}");
    let (code, out, _) = agentctl(&d.socket, &["--json", "session", "close", &id]);
    assert_eq!(code, 1);
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["code"], -32001);
}

#[test]
fn relative_cwd_is_resolved_by_agentctl_and_bad_cwd_is_reported() {
    let d = StandaloneDaemon::start(&[], &[]);
    let (code, _, err) = agentctl(&d.socket, &["session", "create", "--cwd", "/definitely/not/here"]);
    assert_eq!(code, 1);
    assert!(err.contains("cwd") && err.contains("does not exist"), "{err}");
    // A relative --cwd is resolved against agentctl's working directory.
    let (code, out, err) = agentctl(&d.socket, &["--json", "session", "create", "--cwd", "e2e/.."]);
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let cwd = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    assert_eq!(created["session"]["cwd"], Value::from(cwd.to_str().unwrap()));
    // Without --cwd, agentctl's own working directory is the workspace.
    let (code, out, err) = agentctl(&d.socket, &["--json", "session", "create"]);
    assert_eq!(code, 0, "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let here = std::fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    assert_eq!(created["session"]["cwd"], Value::from(here.to_str().unwrap()));
}

#[test]
fn unreachable_daemon_says_so_and_how_to_start_it() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("nobody-home.sock");
    let (code, out, err) = agentctl(&socket, &["status"]);
    assert_eq!(code, 3, "{err}");
    assert!(out.is_empty());
    assert!(err.contains("not running") && err.contains(socket.to_str().unwrap()), "{err}");
    assert!(err.contains("agentd --socket") && err.contains("systemctl --user"), "{err}");
    let (code, out, _) = agentctl(&socket, &["--json", "session", "list"]);
    assert_eq!(code, 3);
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(e["error"]["kind"], "unreachable");
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = agentctl(&dir.path().join("s"), &["session", "frobnicate"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, _) = agentctl(&dir.path().join("s"), &["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("EXIT CODES"), "{out}");
    // Issue 49 #13: a command's own flags first, the global ones (the
    // connection, --json) under their own heading after them.
    for command in [&["call"][..], &["run"], &["session", "create"], &["watch"]] {
        let mut args = command.to_vec();
        args.push("--help");
        let (code, out, _) = agentctl(&dir.path().join("s"), &args);
        assert_eq!(code, 0, "{out}");
        let (own, global) = out.split_once("\nGlobal options:\n").unwrap_or_else(|| panic!("{command:?}: {out}"));
        for flag in ["--socket", "--connect", "--cert", "--key", "--ca", "--json"] {
            assert!(!own.contains(&format!(" {flag} ")) && global.contains(&format!(" {flag} ")), "{flag}: {out}");
        }
    }
}

#[test]
fn call_runs_one_tool_and_exits_4_when_its_result_is_an_error() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    let cwd = work.path().to_str().unwrap();
    let (code, out, err) = agentctl(&d.socket, &["call", "Read", r#"{"file_path": "notes.txt"}"#, "--cwd", cwd]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "1\talpha\n2\tbeta\n");
    assert!(err.contains("Read 2 lines"), "{err}");
    let (code, out, _) = agentctl(
        &d.socket,
        &["--json", "call", "Grep", "--arg", "pattern=beta", "--arg", "output_mode=count", "--cwd", cwd],
    );
    assert_eq!(code, 0);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((r["name"].as_str(), r["is_error"].as_bool()), (Some("Grep"), Some(false)));
    let (code, _, err) =
        agentctl(&d.socket, &["call", "Bash", "--arg", "command=exit 3", "--mode", "bypass", "--cwd", cwd]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("exit code 3"), "{err}");
    let (code, out, _) = agentctl(&d.socket, &["call", "NoSuchTool", "--cwd", cwd]);
    assert_eq!(code, 4);
    assert!(out.contains("no tool named"), "{out}");
    // Issue 49 #13: input agentctl itself finds wrong exits 2, as a bad
    // command line does (README's exit codes).
    let (code, _, err) = agentctl(&d.socket, &["call", "Read", "{not json", "--cwd", cwd]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not JSON"), "{err}");
    let (code, _, err) = agentctl(&d.socket, &["call", "Read", "--arg", "file_path", "--cwd", cwd]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("not key=value"), "{err}");
    let (code, _, err) = agentctl(&d.socket, &["run", "/definitely/not/here.jsonl", "--cwd", cwd]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = agentctl(&d.socket, &["session", "create", "--cwd", cwd, "--env", "NOVALUE"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("expected NAME=VALUE"), "{err}");
    // The temporary sessions are gone.
    let (_, out, _) = agentctl(&d.socket, &["--json", "session", "list"]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["sessions"], serde_json::json!([]));
}

#[test]
fn cancel_reports_what_it_stopped() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let (_, id, _) = agentctl(&d.socket, &["session", "create", "--cwd", work.path().to_str().unwrap()]);
    let (code, out, err) = agentctl(&d.socket, &["cancel", id.trim()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "nothing was running\n");
    let (code, _, err) = agentctl(&d.socket, &["cancel", "no-such-session"]);
    assert_eq!(code, 1);
    assert!(err.contains("unknown_session"), "{err}");
}

#[test]
fn run_submits_a_turn_from_json_lines_and_streams_it() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("x.txt"), "content\n").unwrap();
    let blocks = work.path().join("turn.jsonl");
    std::fs::write(
        &blocks,
        "{\"name\": \"Bash\", \"input\": {\"command\": \"echo hi\"}}\n\n{\"id\": \"r\", \"name\": \"Read\", \"input\": {\"file_path\": \"x.txt\"}}\n",
    )
    .unwrap();
    let cwd = work.path().to_str().unwrap();
    let file = blocks.to_str().unwrap();
    let (code, out, err) = agentctl(&d.socket, &["run", file, "--cwd", cwd, "--mode", "bypass"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("✓ t1") && out.contains("    hi") && out.contains("✓ r") && out.contains("completed"),
        "{out}"
    );
    let (code, out, _) = agentctl(&d.socket, &["--json", "run", file, "--cwd", cwd, "--mode", "bypass"]);
    assert_eq!(code, 0);
    let types: Vec<String> =
        out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["type"].as_str().unwrap().to_owned()).collect();
    assert_eq!(types.first().map(String::as_str), Some("tool/queued"));
    assert_eq!(types.last().map(String::as_str), Some("turn/completed"));
    std::fs::write(&blocks, "{\"name\": \"Bash\", \"input\": {\"command\": \"exit 7\"}}\n").unwrap();
    let (code, out, _) = agentctl(&d.socket, &["run", file, "--cwd", cwd, "--mode", "bypass"]);
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("✗ t1"), "{out}");
    // The README's path: a session made with the protocol's spelling of a
    // mode, then two runs in it (their ids do not collide), the second
    // from the model API's own blocks in one pretty-printed array.
    let (code, id, err) = agentctl(&d.socket, &["session", "create", "--cwd", cwd, "--mode", "accept_edits"]);
    assert_eq!(code, 0, "{err}");
    let id = id.trim();
    std::fs::write(&blocks, "{\"name\": \"Read\", \"input\": {\"file_path\": \"x.txt\"}}\n").unwrap();
    for _ in 0..2 {
        let (code, out, err) = agentctl(&d.socket, &["run", file, "--session", id]);
        assert_eq!(code, 0, "{out} {err}");
    }
    std::fs::write(
        &blocks,
        "[\n  {\"type\": \"tool_use\", \"id\": \"toolu_01\", \"name\": \"Read\",\n   \"input\": {\"file_path\": \"x.txt\"}}\n]\n",
    )
    .unwrap();
    let (code, out, err) = agentctl(&d.socket, &["run", file, "--session", id]);
    assert_eq!(code, 0, "{out} {err}");
    assert!(out.contains("✓ toolu_01"), "{out}");
    for bad in ["\"a string\"", "[1]", "{\"type\": \"text\"}"] {
        std::fs::write(&blocks, bad).unwrap();
        let (code, _, err) = agentctl(&d.socket, &["run", file, "--session", id]);
        assert_eq!(code, 2, "a clear error, not a panic, and agentctl's own (issue 49 #13): {err}");
        assert!(err.contains("block 1"), "{err}");
    }
}

#[test]
fn run_answers_permission_requests_with_yes_and_denies_them_without_a_terminal() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    std::fs::write(&blocks, "{\"id\": \"w\", \"name\": \"Bash\", \"input\": {\"command\": \"touch made\"}}\n").unwrap();
    let (cwd, file) = (work.path().to_str().unwrap(), blocks.to_str().unwrap());
    // stdin is not a terminal and there is no /dev/tty (a session of its
    // own, without a controlling terminal): denied at once, with a hint.
    let out = std::process::Command::new("setsid")
        .arg("-w")
        .arg(agentd_tests::bin_path("agentctl"))
        .args(["--socket", d.socket.to_str().unwrap(), "run", file, "--cwd", cwd])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (code, out, err) =
        (out.status.code(), String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(code, Some(4), "{out}");
    assert!(out.contains("asking") && out.contains("✗ w") && err.contains("--yes"), "{out}{err}");
    // Issue 49 #13: truthful about who refused, and no hint to answer what
    // is answered at once.
    assert!(out.contains("nobody could be asked") && !out.contains("the user refused"), "{out}");
    assert!(out.contains("(refusing: nobody to ask)") && !out.contains("agentctl respond"), "{out}");
    assert!(!work.path().join("made").exists());
    let (code, out, err) = agentctl(&d.socket, &["run", "--yes", file, "--cwd", cwd]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("approved") && out.contains("✓ w"), "{out}");
    assert!(out.contains("(allowing: --yes)") && !out.contains("agentctl respond"), "{out}");
    assert!(work.path().join("made").exists());
}

#[test]
fn watch_follows_a_session_until_it_closes() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap();
    let (_, sid, _) = agentctl(&d.socket, &["session", "create", "--cwd", cwd]);
    let sid = sid.trim().to_owned();
    let watch = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .args(["--socket", d.socket.to_str().unwrap(), "watch", &sid, "--after-seq", "0"])
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the watcher is connected (the status call is the other connection).
    agentd_tests::eventually_blocking("watch connects", || {
        let (_, out, _) = agentctl(&d.socket, &["--json", "status"]);
        serde_json::from_str::<Value>(&out).map(|v| v["connections"].as_u64() >= Some(2)).unwrap_or(false)
    });
    let (code, _, err) = agentctl(&d.socket, &["call", "Grep", "--arg", "pattern=x", "--session", &sid]);
    assert_eq!(code, 0, "{err}");
    // A message from another session shows too.
    let (_, peer, _) = agentctl(&d.socket, &["session", "create", "--cwd", cwd, "--name", "w-peer"]);
    let input = format!(r#"{{"to": "{sid}", "message": "tests pass\nall of them"}}"#);
    let (code, _, err) = agentctl(&d.socket, &["call", "SendMessage", &input, "--session", peer.trim()]);
    assert_eq!(code, 0, "{err}");
    agentctl(&d.socket, &["session", "close", &sid]);
    let out = watch.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.contains("executing") && out.contains("yielded") && out.contains("session closed"), "{out}");
    assert!(out.contains(&format!("message   from w-peer [{}]: tests pass\n", peer.trim())), "{out}");
}

/// `watch` on a session where nothing runs says so (once), rather than
/// print nothing, and then shows what comes.
#[test]
fn watch_says_a_session_is_idle() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap();
    let (_, sid, _) = agentctl(&d.socket, &["session", "create", "--cwd", cwd]);
    let sid = sid.trim().to_owned();
    let (code, _, err) = agentctl(&d.socket, &["call", "Grep", "--arg", "pattern=x", "--session", &sid]);
    assert_eq!(code, 0, "{err}");
    let mut watch = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .args(["--socket", d.socket.to_str().unwrap(), "watch", &sid])
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(watch.stdout.take().unwrap()));
    let first = lines.next().unwrap().unwrap();
    assert!(first.contains("is idle: nothing is running now"), "{first}");
    agentctl(&d.socket, &["session", "close", &sid]);
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(rest.iter().any(|l| l.contains("session closed")), "{rest:?}");
    assert!(watch.wait().unwrap().success(), "watch ends with its session");
}

#[test]
fn completions_and_man_page_come_from_the_command_definition() {
    let dir = tempfile::tempdir().unwrap();
    let nowhere = dir.path().join("none.sock");
    let (code, out, _) = agentctl(&nowhere, &["completions", "bash"]);
    assert_eq!(code, 0, "no daemon needed");
    assert!(out.contains("agentctl") && out.contains("session") && out.contains("watch"), "{}", &out[..200]);
    let (code, out, _) = agentctl(&nowhere, &["man"]);
    assert_eq!(code, 0);
    assert!(out.starts_with(".ie") || out.starts_with(".TH"), "{}", &out[..100]);
    assert!(out.contains("EXIT CODES"), "the exit codes are in the manual");
    assert!(!out.contains("agentctl\\-status(1)"), "no page it does not have is named");
    assert!(out.contains("agentctl status (agentctl man status)"), "{out}");
    let (code, out, _) = agentctl(&nowhere, &["man", "call"]);
    assert_eq!(code, 0);
    assert!(out.contains(".TH agentctl-call") && out.contains("\\-\\-session"), "{out}");
    let (code, _, err) = agentctl(&nowhere, &["man", "nosuch"]);
    assert_eq!(code, 2, "{err}");
    // A reader that is already gone (`| head`): a quiet end, not a panic.
    for args in [&["completions", "bash"][..], &["man"][..]] {
        let (read, write) = nix::unistd::pipe().unwrap();
        drop(read);
        let out = std::process::Command::new(agentd_tests::bin_path("agentctl"))
            .args(args)
            .stdout(std::process::Stdio::from(write))
            .stderr(std::process::Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
    }
}

#[test]
fn ctrl_c_during_run_cancels_the_turn_and_no_colour_off_a_terminal() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    // A duration no other test uses: the test waits for this very sleep.
    std::fs::write(
        &blocks,
        "{\"id\": \"long\", \"name\": \"Bash\", \"input\": {\"command\": \"echo tick-run; sleep 30.0417\"}}\n",
    )
    .unwrap();
    let child = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .args(["--socket", d.socket.to_str().unwrap(), "run", blocks.to_str().unwrap(), "--mode", "bypass"])
        .current_dir(work.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // Interrupt once the command runs (its sleep exists).
    agentd_tests::eventually_blocking("the command starts", || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline")).map(|c| c.starts_with(b"sleep\x0030.0417")).unwrap_or(false)
        })
    });
    let started = std::time::Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(4), "{stdout}");
    // Issue 49 #7: the one-line summary says why; the output, once, below.
    let summary = "✗ long: cancelled: the user interrupted this call\n    cancelled: the user interrupted this call\n";
    assert!(stdout.contains(summary), "{stdout}");
    assert_eq!(stdout.matches("\n    tick-run\n").count(), 1, "{stdout}");
    assert!(!stdout.contains("\ntick-run"), "the output is not in the summary line: {stdout}");
    assert!(!stdout.contains('\x1b'), "no colour when stdout is not a terminal");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cancelling the turn"));
}

#[test]
fn a_reader_that_leaves_early_ends_agentctl_quietly() {
    // `agentctl tools --all | head -c 1`: the pipe closes while agentctl
    // still prints; it must end without a panic message.
    let d = StandaloneDaemon::start(&[], &[]);
    let ws = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("\"$0\" --socket \"$1\" tools --all --cwd \"$2\" | head -c 1 >/dev/null")
        .arg(agentd_tests::bin_path("agentctl"))
        .arg(&d.socket)
        .arg(ws.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
}

/// Issue 49 #9: a request over the daemon's size limit is reported in the
/// daemon's words and exits 1, not as jsonrpsee's "… is not a pending
/// call; restart required".
#[test]
fn a_request_over_the_size_limit_is_refused_in_the_daemons_words() {
    let d = StandaloneDaemon::start(&["--max-request-bytes", "2000"], &[]);
    let work = tempfile::tempdir().unwrap();
    let big = format!("content={}", "x".repeat(3000));
    let args = ["call", "Write", "--arg", "file_path=big.txt", "--arg", &big, "--cwd", work.path().to_str().unwrap()];
    let (code, out, err) = agentctl(&d.socket, &args);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("exceeds the 2000-byte limit") && err.contains("request_too_large"), "{err}");
    assert!(!err.contains("pending call") && !err.contains("restart required"), "{err}");
    let mut json = vec!["--json"];
    json.extend(args);
    let (code, out, _) = agentctl(&d.socket, &json);
    assert_eq!(code, 1);
    let e: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((e["error"]["code"].as_i64(), e["error"]["kind"].as_str()), (Some(-32004), Some("request_too_large")));
}

/// Issue 49 #9: a daemon that stops mid-call (cleanly, or killed before it
/// can answer) is "interrupted: the daemon stopped" and exit 3, from
/// `call` and from `run`, never jsonrpsee's "restart required".
#[test]
fn a_daemon_stopped_mid_call_is_interrupted_and_exits_3() {
    use nix::sys::signal::Signal;
    for signal in [Signal::SIGTERM, Signal::SIGKILL] {
        for command in ["call", "run"] {
            let mut d = StandaloneDaemon::start(&[], &[]);
            let work = tempfile::tempdir().unwrap();
            let marker = agentd_tests::tag();
            let sleep = format!("sleep 300 # {marker}");
            let mut cmd = std::process::Command::new(agentd_tests::bin_path("agentctl"));
            cmd.arg("--socket").arg(&d.socket).current_dir(work.path());
            if command == "call" {
                cmd.args(["call", "Bash", "--mode", "bypass", "--arg"]).arg(format!("command={sleep}"));
            } else {
                let turn = work.path().join("turn.json");
                std::fs::write(&turn, serde_json::json!({"name": "Bash", "input": {"command": sleep}}).to_string())
                    .unwrap();
                cmd.args(["run", "--mode", "bypass"]).arg(&turn);
            }
            let child = cmd
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            // agentctl's own command line names the marker for `call`.
            let running = if command == "call" { 2 } else { 1 };
            agentd_tests::eventually_blocking("the command runs", || agentd_tests::procs(&marker).len() >= running);
            d.signal(signal);
            d.wait_exit();
            let out = child.wait_with_output().unwrap();
            let printed = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            // A killed daemon leaves its unconfined command to the next one.
            for pid in agentd_tests::procs(&marker) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL);
            }
            assert_eq!(out.status.code(), Some(3), "{signal:?} {command}: {printed}");
            assert!(printed.contains("interrupted: the daemon stopped"), "{signal:?} {command}: {printed}");
            assert!(!printed.contains("restart required"), "{signal:?} {command}: {printed}");
        }
    }
    // `watch` too: its stream ends with the daemon, not with the session.
    let mut d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let (_, sid, _) = agentctl(&d.socket, &["session", "create", "--cwd", work.path().to_str().unwrap()]);
    let watch = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .args(["--socket", d.socket.to_str().unwrap(), "watch", sid.trim()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Watching once the daemon counts its connection.
    agentd_tests::eventually_blocking("watch connects", || {
        let (_, out, _) = agentctl(&d.socket, &["--json", "status"]);
        serde_json::from_str::<Value>(&out).is_ok_and(|i| i["connections"].as_u64() == Some(2))
    });
    d.signal(Signal::SIGTERM);
    d.wait_exit();
    let out = watch.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "watch: {err}");
    assert!(err.contains("interrupted: the daemon stopped"), "watch: {err}");
}

/// Issue 49 #10: the rules in force are listed with where each comes from
/// (`session/get`'s `rules_in_force`, `session show`), and Claude Code
/// settings that are not imported are said to be skipped: in
/// `daemon/info`'s notes (`status`), the session's `settings_notes`
/// (`session create`, `session show`) and the daemon's log.
#[test]
fn rules_in_force_are_shown_with_their_source_and_unimported_claude_settings_are_noted() {
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".config");
    agentd_tests::write_settings(
        &home.path().join(".claude/settings.json"),
        &serde_json::json!({"permissions": {"allow": ["Bash(make:*)"]}}),
    );
    let d = StandaloneDaemon::start(
        &[],
        &[("HOME", home.path().to_str().unwrap()), ("XDG_CONFIG_HOME", config.to_str().unwrap())],
    );
    let work = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(work.path()).unwrap();
    let project = ws.join(".claude/settings.json");
    agentd_tests::write_settings(&project, &serde_json::json!({"permissions": {"allow": ["Read(docs/**)"]}}));
    let cwd = ws.to_str().unwrap();

    let (code, out, err) = agentctl(&d.socket, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("note:") && out.contains(".claude/settings.json exists but is not read"), "{out}");
    assert!(out.contains("importClaudeSettings"), "{out}");
    assert!(d.stderr().contains("exists but is not read"), "the log says it too: {}", d.stderr());

    let (code, id, err) = agentctl(&d.socket, &["session", "create", "--cwd", cwd, "--deny", "Bash(rm:*)"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("note:") && err.contains("is not read"), "{err}");
    let (_, out, _) = agentctl(&d.socket, &["--json", "session", "show", id.trim()]);
    let s: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        s["rules_in_force"],
        serde_json::json!([
            {"kind": "deny", "rule": "Bash(rm:*)", "source": "session"},
            {"kind": "allow", "rule": "Read(docs/**)", "source": "project", "file": project.to_str().unwrap()},
        ]),
        "{s}"
    );
    assert!(s["settings_notes"][0].as_str().unwrap().contains("is not read"), "{s}");
    let (_, out, _) = agentctl(&d.socket, &["session", "show", id.trim()]);
    assert!(out.contains(&format!("allow:           Read(docs/**) (project: {})\n", project.display())), "{out}");
    assert!(out.contains("deny:            Bash(rm:*) (session)\n"), "{out}");
    assert!(out.contains("settings note:") && !out.contains("allow:           -"), "{out}");

    // Imported, the Claude Code file's rules are in force and named so.
    agentd_tests::write_settings(
        &config.join("agentd/settings.json"),
        &serde_json::json!({"importClaudeSettings": true, "permissions": {"ask": ["WebFetch"]}}),
    );
    let (code, out, err) = agentctl(&d.socket, &["--json", "session", "create", "--cwd", cwd]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("note:"), "{err}");
    let created: Value = serde_json::from_str(&out).unwrap();
    let rules = &created["session"]["rules_in_force"];
    let claude = home.path().join(".claude/settings.json");
    assert!(
        rules.as_array().unwrap().contains(&serde_json::json!(
            {"kind": "allow", "rule": "Bash(make:*)", "source": "claude_import", "file": claude.to_str().unwrap()}
        )),
        "{rules}"
    );
    let user = config.join("agentd/settings.json");
    assert!(
        rules.as_array().unwrap().contains(&serde_json::json!(
            {"kind": "ask", "rule": "WebFetch", "source": "user", "file": user.to_str().unwrap()}
        )),
        "{rules}"
    );
    assert_eq!(created["session"].get("settings_notes"), None, "{created}");
    let (_, out, _) = agentctl(&d.socket, &["status"]);
    assert!(!out.contains("is not read"), "{out}");
    // (These tests' daemons trust every project file, and say so.)
    assert!(out.contains("note:") && out.contains("--trust-project-files"), "{out}");
}

/// Issue 49 #13: one is singular in the one-line summaries ("Found 1
/// file", as Claude Code says; "1 line").
#[test]
fn summaries_say_one_file_and_one_line() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("only.txt"), "one line\n").unwrap();
    let cwd = work.path().to_str().unwrap();
    for (args, summary) in [
        (vec!["call", "Glob", "--arg", "pattern=*.txt"], "Found 1 file\n"),
        (vec!["call", "Read", "--arg", "file_path=only.txt"], "Read 1 line of 1\n"),
        (vec!["call", "Grep", "--arg", "pattern=one", "--arg", "output_mode=count"], "1 result in 1 file searched\n"),
        (vec!["call", "Bash", "--arg", "command=echo one", "--mode", "bypass"], "exit 0, 1 line\n"),
        (vec!["call", "Write", "--arg", "file_path=new.txt", "--arg", "content=x", "--mode", "bypass"], "(1 line)\n"),
    ] {
        let mut args = args;
        args.extend(["--cwd", cwd]);
        let (code, out, err) = agentctl(&d.socket, &args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert!(err.ends_with(summary), "{args:?}: {err:?}");
    }
    let (_, _, err) = agentctl(&d.socket, &["call", "Glob", "--arg", "pattern=*.none", "--cwd", cwd]);
    assert!(err.ends_with("Found 0 files\n"), "{err:?}");
}

/// Issue 49 #13: `session create` takes the session's network options,
/// its other workspace directories and project hooks, which error messages
/// point to.
#[test]
fn session_create_takes_network_add_dirs_and_project_hooks() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let cwd = work.path().to_str().unwrap();
    let (code, out, err) = agentctl(
        &d.socket,
        &[
            "--json",
            "session",
            "create",
            "--cwd",
            cwd,
            "--add-dir",
            other.path().to_str().unwrap(),
            "--enable-project-hooks",
            "--enable-project-mcp",
            "--allow-domain",
            "example.com",
            "--deny-domain",
            "evil.test",
            "--allow-private-network",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let s = &serde_json::from_str::<Value>(&out).unwrap()["session"];
    assert_eq!(s["add_dirs"], serde_json::json!([std::fs::canonicalize(other.path()).unwrap()]), "{s}");
    assert_eq!((s["enable_project_hooks"].as_bool(), s["enable_project_mcp"].as_bool()), (Some(true), Some(true)));
    assert_eq!(
        s["sandbox"]["network"],
        serde_json::json!({"allowed_domains": ["example.com"], "denied_domains": ["evil.test"], "allow_private_network": true}),
        "{s}"
    );
    let (code, out, err) = agentctl(&d.socket, &["--json", "session", "create", "--cwd", cwd, "--no-network"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["session"]["sandbox"]["network"], false);
    let (_, out, _) = agentctl(
        &d.socket,
        &["session", "show", serde_json::from_str::<Value>(&out).unwrap()["session_id"].as_str().unwrap()],
    );
    assert!(out.contains("network:         none"), "{out}");
    let (code, _, err) =
        agentctl(&d.socket, &["session", "create", "--cwd", cwd, "--no-network", "--allow-domain", "x.test"]);
    assert_eq!(code, 2, "conflicting flags are a bad command line: {err}");
}
