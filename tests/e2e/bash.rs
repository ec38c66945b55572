//! The Bash tool through the socket: streaming output, timeouts and cancel
//! that leave no process behind, capped output, semantic exit codes,
//! background jobs, `cd` persistence, interrupt behaviour.

use std::time::{Duration, Instant};

use agentd_tests::{EventStream, RawConn, TestDaemon, none_left, procs, tag, tool_use, within};
use serde_json::{Value, json};

struct S {
    c: RawConn,
    id: String,
}

async fn session(d: &TestDaemon, mode: &str) -> S {
    let mut c = d.raw().await;
    // Nobody answers permission requests here: a short timeout ends them.
    let params = json!({ "cwd": d.dir.path(), "mode": mode, "permission_timeout_ms": 100 });
    let id = c.session(params).await;
    S { c, id }
}

impl S {
    async fn bash(&mut self, input: Value) -> Value {
        within("bash", self.c.tool(&self.id, "Bash", input)).await
    }
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn output_streams_before_the_command_ends() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let mut events = EventStream::open(&d.socket, &s.id, None).await.unwrap();
    let uses = vec![tool_use("b", "Bash", json!({ "command": "echo first; sleep 1; echo second" }))];
    s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses, "end": true })).await;
    let events = events.until(|e| e["type"] == "turn/completed").await;
    let first = events.iter().position(|e| e["type"] == "tool/progress" && e["data"]["text"] == "first\n").unwrap();
    let result = events.iter().position(|e| e["type"] == "tool/result").unwrap();
    assert!(first < result);
    assert_eq!(events[result]["content"][0]["text"], "first\nsecond\n");
}

/// A foreground command that reaches its timeout is moved to the
/// background, not killed (Claude Code 2.1.332): the result says after how
/// long, in 2.1.332's words and as `timedOutAfterMs`, and names the job;
/// its output so far stays in the job's file, the job's output goes on
/// there, and TaskStop ends the whole tree.
#[tokio::test]
async fn a_command_that_reaches_its_timeout_moves_to_the_background_and_stops_as_a_job() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let t = tag();
    let started = Instant::now();
    let command = format!("echo before; sleep {t} & sleep {t} & sleep 0.5; echo after; wait");
    let r = s.bash(json!({ "command": command, "timeout": 300 })).await;
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(r["is_error"], false, "{r}");
    let job = r["structured_content"]["backgroundTaskId"].as_str().unwrap().to_owned();
    let file = r["structured_content"]["backgroundOutputPath"].as_str().unwrap().to_owned();
    assert_eq!(r["structured_content"]["timedOutAfterMs"], 300, "{r}");
    assert!(
        text(&r).contains(&format!(
            "Command did not complete within its 0.3s timeout and was moved to the background (ID: {job}). \
             Output is being written to: {file}."
        )),
        "{r}"
    );
    // The job goes on: what it writes after the move reaches the file,
    // after what came before it.
    let deadline = Instant::now() + agentd_tests::STEP;
    loop {
        let all = std::fs::read_to_string(&file).unwrap_or_default();
        if all.contains("after\n") {
            assert!(all.starts_with("before\n"), "{all}");
            break;
        }
        assert!(Instant::now() < deadline, "the moved job's output never came: {all:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Both sleeps (and the shell, whose command line names them) live on.
    assert!(procs(&format!("sleep {t}")).len() >= 2, "the moved command was killed");
    let r = s.c.tool(&s.id, "TaskStop", json!({ "task_id": job })).await;
    assert!(text(&r).contains(&format!("Successfully stopped task: {job} (")), "{r}");
    none_left(&format!("sleep {t}")).await;
}

#[tokio::test]
async fn cancel_kills_setsid_escapees_and_term_ignoring_children() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let mut events = EventStream::open(&d.socket, &s.id, None).await.unwrap();
    let a = tag();
    let b = format!("{}1", tag());
    let commands = [
        // Both shells' command lines name the sleep too: 4 = two shells, two sleeps.
        ("escape", format!("bash -c 'sleep {a} & setsid sleep {a} & wait'"), format!("sleep {a}"), 4),
        ("stubborn", format!("trap '' TERM; sleep {b}; echo never"), format!("sleep {b}"), 2),
    ];
    for (id, command, needle, count) in commands {
        let uses = vec![tool_use(id, "Bash", json!({ "command": command }))];
        let turn = s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses })).await["turn_id"].clone();
        let deadline = Instant::now() + agentd_tests::STEP;
        while procs(&needle).len() < count {
            assert!(Instant::now() < deadline, "{id}: the sleeps never started");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s.c.ok("turn/cancel", json!({ "session_id": s.id, "turn_id": turn })).await;
        let done = events.until(|e| e["type"] == "tool/result" && e["tool_use_id"] == json!(id)).await;
        let r = done.last().unwrap();
        assert!(r["content"][0]["text"].as_str().unwrap().contains("killed: cancelled"), "{r}");
        none_left(&needle).await;
    }
}

#[tokio::test]
async fn yes_is_capped_and_the_full_output_is_in_a_file() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let r = s.bash(json!({ "command": "yes", "timeout": 1000 })).await;
    let out = text(&r);
    // At its timeout it went on as a job: stopped here, its output so far
    // is what is checked.
    let job = r["structured_content"]["backgroundTaskId"].as_str().unwrap().to_owned();
    s.c.tool(&s.id, "TaskStop", json!({ "task_id": job })).await;
    assert!(out.len() < 31_000 + 1000, "capped: {} bytes", out.len());
    assert!(out.starts_with("y\ny\n") && out.contains("characters of output elided"), "{}", &out[out.len() - 400..]);
    let file = out.rsplit("the full output is in ").next().unwrap().split(']').next().unwrap();
    let size = std::fs::metadata(file).unwrap().len();
    assert!(size > 30_000 && size <= 64 * 1024 * 1024, "{size}");
    // The daemon (this process) did not keep the output in memory.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let rss_kb: u64 =
        status.lines().find(|l| l.starts_with("VmRSS")).unwrap().split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(rss_kb < 512 * 1024, "RSS {rss_kb} kB");
}

#[tokio::test]
async fn exit_codes_mean_what_the_command_says() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "default").await;
    std::fs::write(d.dir.path().join("notes.txt"), "hello\n").unwrap();
    let r = s.bash(json!({ "command": "grep no-such-text notes.txt" })).await;
    assert_eq!(r["is_error"], false, "grep exit 1 is an answer: {r}");
    assert!(text(&r).contains("[exit code 1: No matches found]"));
    let r = s.bash(json!({ "command": "grep -q x no-such-file" })).await;
    assert_eq!(r["is_error"], true, "grep exit 2 is an error: {r}");
    assert!(text(&r).contains("[exit code 2]"), "{r}");
    let r = s.bash(json!({ "command": "test -e no-such-file" })).await;
    assert_eq!(r["is_error"], false);
    let r = s.bash(json!({ "command": "false" })).await;
    assert_eq!(r["is_error"], true);
}

#[tokio::test]
async fn grep_exit_1_does_not_cancel_siblings_but_a_failure_does() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "default").await;
    let mut events = EventStream::open(&d.socket, &s.id, None).await.unwrap();
    std::fs::write(d.dir.path().join("notes.txt"), "hello\n").unwrap();
    // Read-only commands: concurrency safe, they run side by side.
    let uses = vec![
        tool_use("grep", "Bash", json!({ "command": "grep no-such-text notes.txt" })),
        tool_use("sleep", "Bash", json!({ "command": "sleep 0.5" })),
    ];
    let turn = s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses, "end": true })).await;
    let evs = events.until(|e| e["type"] == "turn/completed" && e["turn_id"] == turn["turn_id"]).await;
    let sleep = evs.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == "sleep").unwrap();
    assert_eq!(sleep["is_error"], false, "{sleep}");

    let uses = vec![
        tool_use("fail", "Bash", json!({ "command": "false" })),
        tool_use("sleep2", "Bash", json!({ "command": "sleep 20" })),
    ];
    let started = Instant::now();
    let turn = s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses, "end": true })).await;
    let evs = events.until(|e| e["type"] == "turn/completed" && e["turn_id"] == turn["turn_id"]).await;
    let sleep = evs.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == "sleep2").unwrap();
    assert_eq!(sleep["is_error"], true);
    assert!(text(sleep).contains("Bash call fail") && text(sleep).contains("killed"), "{sleep}");
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[tokio::test]
async fn cd_persists_between_calls_and_exports_do_not() {
    let d = TestDaemon::start().await;
    std::fs::create_dir(d.dir.path().join("sub")).unwrap();
    let mut s = session(&d, "bypass").await;
    let r = s.bash(json!({ "command": "cd sub && export AGENTD_TEST_VAR=1" })).await;
    assert!(text(&r).contains("the shell's directory is now"), "{r}");
    let r = s.bash(json!({ "command": "pwd; echo \"var=${AGENTD_TEST_VAR:-unset}\"" })).await;
    let sub = std::fs::canonicalize(d.dir.path().join("sub")).unwrap();
    assert_eq!(text(&r), format!("{}\nvar=unset\n", sub.display()));
    // Leaving the workspace is not kept.
    let r = s.bash(json!({ "command": "cd /" })).await;
    assert!(text(&r).contains("outside the working directories"), "{r}");
    let r = s.bash(json!({ "command": "pwd" })).await;
    let root = std::fs::canonicalize(d.dir.path()).unwrap();
    assert_eq!(text(&r), format!("{}\n", root.display()));
}

/// `cd` as Claude Code 2.1.332 carries it: a command that succeeds and
/// ends inside the working directories (the workspace and the session's
/// added ones) moves the next call's shell; one that ends outside them
/// sends the shell back to the start folder; a failed one (any non-zero
/// exit, grep's 1 included) leaves it where it was.
#[tokio::test]
async fn cd_carries_on_success_resets_outside_the_working_directories_and_stays_on_failure() {
    let d = TestDaemon::start().await;
    let (root, sub, extra) = (d.dir.path().join("ws"), d.dir.path().join("ws/sub"), d.dir.path().join("extra"));
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(&extra).unwrap();
    let (root, sub, extra) = (
        std::fs::canonicalize(root).unwrap(),
        std::fs::canonicalize(sub).unwrap(),
        std::fs::canonicalize(extra).unwrap(),
    );
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": root, "mode": "bypass", "add_dirs": [extra] })).await;
    let pwd = async |c: &mut RawConn| text(&within("pwd", c.tool(&id, "Bash", json!({ "command": "pwd" }))).await);
    let bash = async |c: &mut RawConn, command: &str| {
        within(command, c.tool(&id, "Bash", json!({ "command": command }))).await
    };

    // Succeeds inside: carried.
    bash(&mut c, "cd sub").await;
    assert_eq!(pwd(&mut c).await, format!("{}\n", sub.display()));
    // Fails (after its cd, and with grep's answer-not-failure 1 too): stays.
    let r = bash(&mut c, "cd .. && false").await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!text(&r).contains("directory is now"), "a failed cd is not reported as carried: {r}");
    assert_eq!(pwd(&mut c).await, format!("{}\n", sub.display()));
    let r = bash(&mut c, "cd ..; grep -q no-such-text /dev/null").await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(pwd(&mut c).await, format!("{}\n", sub.display()));
    // An added working directory is inside.
    bash(&mut c, &format!("cd {}", extra.display())).await;
    assert_eq!(pwd(&mut c).await, format!("{}\n", extra.display()));
    // Succeeds outside: back to the start folder, not where it was.
    let r = bash(&mut c, "cd /").await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains(&format!("Shell cwd was reset to {}", root.display())), "{r}");
    assert_eq!(pwd(&mut c).await, format!("{}\n", root.display()));
}

#[tokio::test]
async fn reading_outside_the_workspace_asks_even_for_a_read_only_command() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "default").await;
    for command in ["cat /etc/hostname", "cat ~/.bashrc", "cat ../../etc/passwd", "grep --file=/etc/passwd x"] {
        let r = s.bash(json!({ "command": command })).await;
        assert!(text(&r).contains("permission required"), "{command}: {r}");
    }
}

#[tokio::test]
async fn rules_allow_deny_and_ask_by_sub_command() {
    let d = TestDaemon::start().await;
    std::fs::create_dir_all(d.dir.path().join(".agentd")).unwrap();
    std::fs::write(
        d.dir.path().join(".agentd/settings.json"),
        r#"{"permissions": {"allow": ["Bash(touch:*)"], "deny": ["Bash(rm:*)", "Bash(oops"]}}"#,
    )
    .unwrap();
    let mut c = d.raw().await;
    let params =
        json!({ "cwd": d.dir.path(), "permissions": { "ask": ["Bash(git push:*)"] }, "permission_timeout_ms": 100 });
    let created = c.ok("session/create", params).await;
    let id = created["session_id"].as_str().unwrap().to_owned();
    let errors = created["session"]["rule_errors"].to_string();
    assert!(errors.contains("settings.json: rule 1") && errors.contains("Bash(oops"), "{errors}");
    let mut run = async |command: &str| {
        let r = c.tool(&id, "Bash", json!({ "command": command })).await;
        (r["is_error"].as_bool().unwrap(), text(&r))
    };
    let (err, _) = run("touch made-by-rule").await;
    assert!(!err, "an allow rule runs a command the tool would ask about");
    assert!(d.dir.path().join("made-by-rule").exists());
    let (err, out) = run("touch a && rm made-by-rule").await;
    assert!(err && out.contains("Bash(rm:*)") && out.contains("denies"), "{out}");
    assert!(d.dir.path().join("made-by-rule").exists(), "nothing ran");
    let (err, out) = run("touch x; curl x").await;
    assert!(err && out.contains("permission required"), "a partial match allows nothing: {out}");
    // A shell reading its commands from a pipe could run rm: the deny rule
    // fails closed.
    let (err, out) = run("touch x; curl x | sh").await;
    assert!(err && out.contains("Bash(rm:*)"), "{out}");
    let (err, out) = run("git push origin main").await;
    assert!(err && out.contains("Bash(git push:*)") && out.contains("asks"), "{out}");
    let (err, out) = run("touch $(id -u)").await;
    assert!(err && out.contains("permission required"), "substitutions are never allowed by a rule: {out}");
}

#[tokio::test]
async fn plan_mode_runs_read_only_tools_only_and_accept_edits_allows_edits() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let plan = c.session(json!({ "cwd": d.dir.path(), "mode": "plan" })).await;
    let r = c.tool(&plan, "Write", json!({ "file_path": "p.txt", "content": "x" })).await;
    assert!(text(&r).contains("plan mode"), "{r}");
    let r = c.tool(&plan, "Bash", json!({ "command": "ls" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let edits = c.session(json!({ "cwd": d.dir.path(), "mode": "accept_edits" })).await;
    let r = c.tool(&edits, "Write", json!({ "file_path": "e.txt", "content": "x" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let r = c.tool(&edits, "Bash", json!({ "command": "touch t" })).await;
    assert!(text(&r).contains("permission required"), "accept_edits is not bypass: {r}");
}

#[tokio::test]
async fn an_output_redirection_is_judged_like_an_edit_of_its_file() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path().join("via-link"), d.dir.path().join("link-out")).unwrap();
    let mut edits = session(&d, "accept_edits").await;
    let r = edits.bash(json!({ "command": "echo hi > r.txt && echo more >> r.txt" })).await;
    assert_eq!(r["is_error"], false, "accept_edits allows edits inside the workspace: {r}");
    assert_eq!(std::fs::read_to_string(d.dir.path().join("r.txt")).unwrap(), "hi\nmore\n");
    let out = outside.path().join("o.txt");
    for command in [
        format!("echo hi > {}", out.display()),
        "echo hi > link-out".to_owned(),
        "echo hi > $HOME/x".to_owned(),
        "echo hi >> \"./../escape.txt\"".to_owned(),
    ] {
        let r = edits.bash(json!({ "command": command })).await;
        assert!(text(&r).contains("permission required"), "{command}: {r}");
    }
    assert!(!out.exists() && !outside.path().join("via-link").exists());
    assert!(!d.dir.path().parent().unwrap().join("escape.txt").exists());
    let r = edits.bash(json!({ "command": "cat /etc/hostname > copy.txt" })).await;
    assert!(text(&r).contains("permission required"), "reading outside still asks: {r}");
    let mut default = session(&d, "default").await;
    let r = default.bash(json!({ "command": "echo hi > d.txt" })).await;
    assert!(text(&r).contains("permission required"), "default mode asks for edits: {r}");
}

#[tokio::test]
async fn without_bypass_a_command_that_writes_is_refused_and_reads_run() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "default").await;
    let r = s.bash(json!({ "command": "touch should-not-exist" })).await;
    assert_eq!(r["is_error"], true);
    assert!(text(&r).contains("permission required"), "{r}");
    assert!(!d.dir.path().join("should-not-exist").exists());
    let r = s.bash(json!({ "command": "echo reading is fine" })).await;
    assert_eq!(text(&r), "reading is fine\n");
}

#[tokio::test]
async fn background_jobs_run_report_and_die_with_kill_or_the_session() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let t = tag();
    let command = format!("for i in 1 2 3; do echo line$i; sleep 0.1; done; sleep {t}");
    let r = s.bash(json!({ "command": command, "run_in_background": true })).await;
    let job = text(&r).split("running in background with ID: ").nth(1).unwrap().split('.').next().unwrap().to_owned();
    let info = s.c.ok("session/get", json!({ "session_id": s.id })).await;
    assert_eq!(info["jobs"][0]["job_id"], json!(job));
    assert_eq!(info["jobs"][0]["status"], "running");
    let mut seen = String::new();
    let deadline = Instant::now() + agentd_tests::STEP;
    while !seen.contains("line3") {
        assert!(Instant::now() < deadline, "output never came: {seen}");
        let out = s.c.tool(&s.id, "BashOutput", json!({ "bash_id": job })).await;
        seen.push_str(&text(&out));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.contains("line1\n") && seen.contains("line2\n"), "{seen}");
    let k = s.c.tool(&s.id, "KillShell", json!({ "shell_id": job })).await;
    assert!(text(&k).contains(&format!("Successfully stopped task: {job} (")), "{k}");
    none_left(&format!("sleep {t}")).await;
    let out = s.c.tool(&s.id, "BashOutput", json!({ "job_id": job })).await;
    assert!(text(&out).contains("is killed"), "{out}");

    // Closing the session ends its jobs.
    let t2 = format!("{}2", tag());
    s.bash(json!({ "command": format!("sleep {t2}"), "run_in_background": true })).await;
    let deadline = Instant::now() + agentd_tests::STEP;
    while procs(&format!("sleep {t2}")).is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    s.c.ok("session/close", json!({ "session_id": s.id })).await;
    none_left(&format!("sleep {t2}")).await;
}

#[tokio::test]
async fn a_client_that_vanishes_mid_command_leaves_nothing_once_the_session_closes() {
    let d = TestDaemon::start().await;
    let t = tag();
    let id = {
        let mut s = session(&d, "bypass").await;
        let line = json!({"jsonrpc": "2.0", "id": 99, "method": "tool/call",
            "params": {"session_id": s.id, "name": "Bash", "input": {"command": format!("sleep {t}")}}});
        s.c.send_line(line.to_string()).await;
        let deadline = Instant::now() + agentd_tests::STEP;
        while procs(&format!("sleep {t}")).is_empty() {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s.id
    }; // the client is gone
    let mut other = d.raw().await;
    other.ok("session/close", json!({ "session_id": id })).await;
    none_left(&format!("sleep {t}")).await;
}

#[tokio::test]
async fn block_commands_finish_on_interrupt_cancel_commands_stop() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let mut events = EventStream::open(&d.socket, &s.id, None).await.unwrap();
    let uses = vec![
        tool_use("suite", "Bash", json!({ "command": "sleep 0.5; echo suite done", "on_interrupt": "block" })),
        tool_use("install", "Bash", json!({ "command": "sleep 0.5; echo installed", "on_interrupt": "cancel" })),
    ];
    // Not read-only (`echo` after `sleep` is, but `;` lists are fine): make
    // them run together by keeping both read-only.
    let turn = s.c.ok("turn/submit", json!({ "session_id": s.id, "tool_uses": uses, "end": true })).await;
    events.until(|e| e["type"] == "tool/started" && e["tool_use_id"] == "install").await;
    s.c.ok("turn/cancel", json!({ "session_id": s.id, "turn_id": turn["turn_id"] })).await;
    let evs = events.until(|e| e["type"] == "turn/completed").await;
    let result = |id: &str| evs.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == id).unwrap().clone();
    assert_eq!(text(&result("suite")), "suite done\n");
    assert!(text(&result("install")).contains("cancelled"), "{}", result("install"));
}

#[tokio::test]
async fn a_background_child_holding_the_pipe_does_not_hang_the_call() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let t = tag();
    let started = Instant::now();
    // The subshell's sleep keeps stdout open after bash exits: no EOF.
    let r = s.bash(json!({ "command": format!("(sleep {t} &); echo done") })).await;
    assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).starts_with("done\n") && text(&r).contains("ended 1 process"), "{r}");
    none_left(&format!("sleep {t}")).await;
}

/// Claude Code 2.1.332 offers TaskStop (KillShell and KillBash are its
/// earlier names, and rules naming them still apply) and has the model
/// Read a background job's output file instead of calling TaskOutput: the
/// start result and BashOutput name the file, and the session's Read reads
/// it while the job runs.
#[tokio::test]
async fn task_stop_is_offered_and_a_jobs_output_file_is_readable_by_read() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let listed = s.c.ok("tools/list", json!({ "session_id": s.id })).await;
    let names: Vec<&str> = listed["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"TaskStop") && !names.contains(&"KillShell"), "{names:?}");

    let t = tag();
    let r = s.bash(json!({ "command": format!("echo started-{t}; sleep {t}"), "run_in_background": true })).await;
    let out = text(&r);
    let job = out.split("running in background with ID: ").nth(1).unwrap().split('.').next().unwrap().to_owned();
    let file = out.split("Output is being written to: ").nth(1).unwrap().split(".\n").next().unwrap().to_owned();
    let deadline = Instant::now() + agentd_tests::STEP;
    loop {
        let read = s.c.tool(&s.id, "Read", json!({ "file_path": file })).await;
        if text(&read).contains(&format!("started-{t}")) {
            break;
        }
        assert!(Instant::now() < deadline, "Read never showed the job's output: {read}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let r = s.c.tool(&s.id, "BashOutput", json!({ "bash_id": job })).await;
    assert!(text(&r).contains(&format!("its whole output is in {file}")), "{r}");

    let r = s.c.tool(&s.id, "TaskStop", json!({ "task_id": job })).await;
    // 2.1.332's result: a JSON string.
    let said: Value = serde_json::from_str(&text(&r)).unwrap();
    assert_eq!(r["name"], "TaskStop", "{r}");
    assert!(said["message"].as_str().unwrap().starts_with(&format!("Successfully stopped task: {job} (")), "{said}");
    assert_eq!((said["task_id"].as_str(), said["task_type"].as_str()), (Some(job.as_str()), Some("local_bash")));
    none_left(&format!("sleep {t}")).await;
    let r = s.c.tool(&s.id, "KillShell", json!({ "shell_id": job })).await;
    assert!(text(&r).contains(&format!("Task {job} is not running (status: killed)")), "{r}");

    // A rule naming the old name applies to the new one: a blanket deny
    // takes the tool away.
    let mut c = d.raw().await;
    let id =
        c.session(json!({ "cwd": d.dir.path(), "mode": "bypass", "permissions": { "deny": ["KillShell"] } })).await;
    let listed = c.ok("tools/list", json!({ "session_id": id })).await;
    assert!(!listed["tools"].as_array().unwrap().iter().any(|t| t["name"] == "TaskStop"), "{listed}");
    let r = c.tool(&id, "KillBash", json!({ "task_id": "job_1" })).await;
    assert!(r["is_error"] == true && text(&r).contains("no tool named"), "{r}");
}

/// What Claude Code 2.1.332's Bash output carries beside stdout, in its
/// words and by its names (in the result's `structured_content`): the
/// conventional meaning of an exit code, and the files the session had
/// read whose modification time the command moved.
#[tokio::test]
async fn results_carry_the_return_code_interpretation_and_the_stale_read_hint() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let dir = d.dir.path();
    std::fs::write(dir.join("notes.txt"), "hello\n").unwrap();
    std::fs::write(dir.join("other.txt"), "other\n").unwrap();
    for (command, meaning) in [
        ("grep no-such-text notes.txt", "No matches found"),
        ("diff notes.txt other.txt", "Files differ"),
        ("test -e no-such-file", "Condition is false"),
        ("[ -e no-such-file ]", "Condition is false"),
    ] {
        let r = s.bash(json!({ "command": command })).await;
        assert_eq!(r["is_error"], false, "{command}: {r}");
        assert!(text(&r).contains(&format!("[exit code 1: {meaning}]")), "{command}: {r}");
        assert_eq!(r["structured_content"]["returnCodeInterpretation"], meaning, "{command}: {r}");
    }
    let r = s.bash(json!({ "command": "echo plain" })).await;
    assert!(r.get("structured_content").is_none(), "a plain command has no structured fields: {r}");

    // Read puts both files in the session's read cache; their times are
    // set well in the past so a write now moves them whatever the
    // filesystem's timestamp granularity.
    for name in ["notes.txt", "other.txt"] {
        let r = s.c.tool(&s.id, "Read", json!({ "file_path": dir.join(name) })).await;
        assert_eq!(r["is_error"], false, "{r}");
        let file = std::fs::File::options().write(true).open(dir.join(name)).unwrap();
        file.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(86_400)).unwrap();
    }
    let r = s.bash(json!({ "command": "echo more >> notes.txt" })).await;
    let hint = "[This command modified 1 file you've previously read: notes.txt. Call Read before editing.]";
    assert!(text(&r).contains(hint), "{r}");
    assert_eq!(r["structured_content"]["staleReadFileStateHint"], hint, "{r}");
    let r = s.bash(json!({ "command": "touch notes.txt other.txt; mkdir -p sub; touch sub/new" })).await;
    assert!(text(&r).contains("modified 2 files you've previously read: notes.txt, other.txt."), "{r}");
    // A command that only reads moves nothing.
    let r = s.bash(json!({ "command": "cat notes.txt" })).await;
    assert!(!text(&r).contains("previously read"), "{r}");
}

/// With `run_in_background`, `timeout` is the job's own limit (default
/// 1,800,000 ms, at most 7,200,000), not the foreground's 600,000.
#[tokio::test]
async fn a_background_jobs_timeout_is_its_own_limit() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, "bypass").await;
    let t = tag();
    // A limit long enough for a loaded machine's shell to start and
    // write, short enough to wait for.
    let r =
        s.bash(json!({ "command": format!("echo up; sleep {t}"), "run_in_background": true, "timeout": 1500 })).await;
    let job = text(&r).split("running in background with ID: ").nth(1).unwrap().split('.').next().unwrap().to_owned();
    let deadline = Instant::now() + agentd_tests::STEP;
    let mut seen = String::new();
    while !seen.contains("is killed") {
        assert!(Instant::now() < deadline, "the job outlived its timeout: {seen}");
        seen.push_str(&text(&s.c.tool(&s.id, "BashOutput", json!({ "bash_id": job })).await));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen.contains("up\n") && seen.contains("ran out of its timeout of 1500 ms"), "{seen}");
    none_left(&format!("sleep {t}")).await;

    // Past the foreground's most, within the background's.
    let r = s.bash(json!({ "command": "sleep 60", "run_in_background": true, "timeout": 7_200_000 })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let job = r["structured_content"]["backgroundTaskId"].as_str().unwrap().to_owned();
    assert!(r["structured_content"]["backgroundOutputPath"].as_str().unwrap().ends_with(".log"), "{r}");
    s.c.tool(&s.id, "TaskStop", json!({ "task_id": job })).await;
    let r = s.bash(json!({ "command": "sleep 60", "run_in_background": true, "timeout": 7_200_001 })).await;
    assert!(r["is_error"] == true && text(&r).contains("at most 7200000 ms"), "{r}");
    let r = s.bash(json!({ "command": "sleep 60", "timeout": 7_200_000 })).await;
    assert!(r["is_error"] == true && text(&r).contains("at most 600000 ms"), "the foreground's most stays: {r}");
}
