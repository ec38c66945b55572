//! Asking the client through the socket:
//! `permission/request` events answered with `permission/respond`: allow,
//! deny, allow_always, timeout, the client leaving, and no client at all.

use agentd_tests::{EventStream, TestDaemon, brief, tool_use, within};
use serde_json::{Value, json};

type Session = agentd_tests::StreamedSession;

async fn session(d: &TestDaemon, extra: Value) -> Session {
    d.streamed_session(extra).await
}

/// A session on `d` whose Bash `command` (tool use `a`) waits for
/// permission; also its turn and the request.
async fn asking(d: &TestDaemon, command: &str) -> (Session, String, Value) {
    let mut s = session(d, json!({})).await;
    let turn = s.submit_ended(vec![tool_use("a", "Bash", json!({ "command": command }))]).await;
    let request = s.permission_request().await;
    (s, turn, request)
}

/// A directory outside the workspace holding `files` (name, content);
/// also its canonical path.
fn outside(files: &[(&str, &str)]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    for (name, content) in files {
        std::fs::write(path.join(name), content).unwrap();
    }
    (dir, path)
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn an_allowed_call_waits_for_the_answer_and_then_runs() {
    let d = TestDaemon::start().await;
    let (mut s, turn, request) = asking(&d, "touch allowed.txt").await;
    assert_eq!(request["tool_use_id"], "a");
    assert_eq!(request["tool"], "Bash");
    assert_eq!(request["input"]["command"], "touch allowed.txt");
    assert!(request["reason"].as_str().unwrap().len() > 5, "{request}");
    assert_eq!(request["suggestions"][0], "Bash(touch allowed.txt)", "{request}");
    assert!(!d.dir.path().join("allowed.txt").exists(), "nothing runs before the answer");
    let r = s.respond(&request, json!({ "decision": "allow" })).await;
    assert_eq!(r["result"]["request_id"], request["request_id"], "{r}");
    let events = within("the turn", s.events.until_turn_done(&turn)).await;
    let order: Vec<String> = events.iter().map(brief).collect();
    assert_eq!(order, ["resolved:a", "started:a", "result:a", "completed"], "{events:?}");
    assert_eq!(events[0]["allowed"], true);
    assert_eq!(events[2]["is_error"], false, "{events:?}");
    assert!(d.dir.path().join("allowed.txt").exists());
    // Answered requests are gone.
    let again = s.respond(&request, json!({ "decision": "allow" })).await;
    assert_eq!(again["error"]["code"], -32602, "{again}");
    assert!(again["error"]["message"].as_str().unwrap().contains("request_id"), "{again}");
}

#[tokio::test]
async fn a_denied_call_is_refused_with_the_users_message_and_nothing_runs() {
    let d = TestDaemon::start().await;
    let (mut s, turn, request) = asking(&d, "touch denied.txt").await;
    let r = s.respond(&request, json!({ "decision": "deny", "message": "use the Write tool" })).await;
    assert!(r.get("result").is_some(), "{r}");
    let results = s.results(&turn).await;
    assert_eq!(results[0]["is_error"], true);
    let t = text(&results[0]);
    assert!(t.contains("refused") && t.contains("use the Write tool"), "{t}");
    assert!(!d.dir.path().join("denied.txt").exists());
}

#[tokio::test]
async fn allow_always_adds_a_session_rule_so_the_next_call_runs_without_asking() {
    let d = TestDaemon::start().await;
    let (mut s, turn, request) = asking(&d, "touch one.txt").await;
    let bad = s.respond(&request, json!({ "decision": "allow_always", "rule": "Bash(touch" })).await;
    assert_eq!(bad["error"]["code"], -32602, "a malformed rule is refused: {bad}");
    let r = s.respond(&request, json!({ "decision": "allow_always", "rule": "Bash(touch:*)" })).await;
    assert_eq!(r["result"]["rule_added"], "Bash(touch:*)", "{r}");
    assert_eq!(s.results(&turn).await[0]["is_error"], false);
    let info = s.c.ok("session/get", json!({ "session_id": s.id })).await;
    assert_eq!(info["granted_rules"], json!(["Bash(touch:*)"]), "{info}");
    // The rule allows the next touch at once; a compound command still asks.
    let turn = s.submit_ended(vec![tool_use("b", "Bash", json!({ "command": "touch two.txt" }))]).await;
    let events = within("the turn", s.events.until_turn_done(&turn)).await;
    assert!(events.iter().all(|e| e["type"] != "permission/request"), "{events:?}");
    assert!(d.dir.path().join("two.txt").exists());
    s.submit_ended(vec![tool_use("c", "Bash", json!({ "command": "touch three.txt && rm one.txt" }))]).await;
    let request = s.permission_request().await;
    assert_eq!(request["tool_use_id"], "c");
    assert_eq!(request["suggestions"], json!([]), "no single rule covers a compound command");
    let r = s.respond(&request, json!({ "decision": "allow_always" })).await;
    assert!(r["error"]["message"].as_str().unwrap().contains("rule"), "{r}");
    s.respond(&request, json!({ "decision": "deny" })).await;
    assert!(d.dir.path().join("one.txt").exists());
}

#[tokio::test]
async fn an_unanswered_request_is_denied_after_the_timeout() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "permission_timeout_ms": 300 })).await;
    let turn = s.submit_ended(vec![tool_use("a", "Bash", json!({ "command": "touch late.txt" }))]).await;
    let request = s.permission_request().await;
    let results = s.results(&turn).await;
    assert!(text(&results[0]).contains("nobody answered"), "{results:?}");
    let late = s.respond(&request, json!({ "decision": "allow" })).await;
    assert_eq!(late["error"]["code"], -32602, "a late answer changes nothing: {late}");
    assert!(!d.dir.path().join("late.txt").exists());
    let bad = d.raw().await.request("session/create", json!({ "cwd": d.dir.path(), "permission_timeout_ms": 0 })).await;
    assert!(bad["error"]["message"].as_str().unwrap().contains("permission_timeout_ms"), "{bad}");
}

#[tokio::test]
async fn a_request_is_denied_when_the_last_client_leaves_or_none_is_attached() {
    let d = TestDaemon::start().await;
    let (mut s, _, request) = asking(&d, "touch gone.txt").await;
    let pending = s.c.ok("session/get", json!({ "session_id": s.id })).await["pending_permissions"].clone();
    assert_eq!(pending, json!([request["request_id"]]));
    drop(s.events);
    let mut waited = 0;
    while !s.c.ok("session/get", json!({ "session_id": s.id })).await["pending_permissions"]
        .as_array()
        .unwrap()
        .is_empty()
    {
        waited += 1;
        assert!(waited < 600, "the request outlived its only client");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // A new subscriber replays what happened: the request was denied.
    let mut events = EventStream::open(&d.socket, &s.id, Some(0)).await.unwrap();
    let all = within("the result", events.until(|e| e["type"] == "tool/result")).await;
    let result = all.last().unwrap();
    assert!(text(result).contains("the last client left"), "{result}");
    assert!(!d.dir.path().join("gone.txt").exists());
    drop(events);
    let session = d.state.sessions.handle(&s.id).unwrap();
    agentd_tests::eventually("the stream to notice its client left", || {
        session.executor.events().subscriber_count() == 0
    })
    .await;
    // With nobody on the stream, a call that needs approval is denied once
    // the grace for a client to subscribe is over.
    let r = s.c.tool(&s.id, "Bash", json!({ "command": "touch x" })).await;
    assert!(text(&r).contains("No client is attached"), "{r}");
}

#[tokio::test]
async fn other_safe_calls_keep_running_while_one_waits() {
    let d = TestDaemon::start().await;
    std::fs::write(d.dir.path().join("inside.txt"), "inside\n").unwrap();
    std::fs::write(d.dir.path().join("secret.txt"), "secret\n").unwrap();
    let mut s = session(&d, json!({ "permissions": { "ask": ["Read(./secret.txt)"] } })).await;
    let turn = s
        .submit_ended(vec![
            tool_use("a", "Read", json!({ "file_path": d.dir.path().join("secret.txt") })),
            tool_use("b", "Read", json!({ "file_path": d.dir.path().join("inside.txt") })),
        ])
        .await;
    // b runs while a waits; its result still comes after a's.
    let before = within("b to start", s.events.until(|e| e["type"] == "tool/started" && e["tool_use_id"] == "b")).await;
    let request = match before.iter().find(|e| e["type"] == "permission/request").cloned() {
        Some(r) => r,
        None => s.permission_request().await,
    };
    assert_eq!(request["tool_use_id"], "a");
    assert!(request["reason"].as_str().unwrap().contains("Read(./secret.txt)"), "{request}");
    assert_eq!(request["suggestions"], json!(["Read(./**)"]), "{request}");
    s.respond(&request, json!({ "decision": "allow" })).await;
    let results = s.results(&turn).await;
    let ids: Vec<&str> = results.iter().map(|r| r["tool_use_id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["a", "b"]);
    assert!(text(&results[0]).contains("secret") && text(&results[1]).contains("inside"), "{results:?}");
}

#[tokio::test]
async fn compound_and_hidden_commands_are_never_run_by_a_prefix_rule() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let rules = json!({ "allow": ["Bash(echo:*)", "Bash(git add:*)", "Bash(ls)"] });
    let params = json!({ "cwd": d.dir.path(), "permissions": rules, "permission_timeout_ms": 50 });
    let id = c.session(params).await;
    std::fs::write(d.dir.path().join("x"), "keep").unwrap();
    for command in [
        "echo hi && rm -rf x",
        "git add . ; git push",
        "ls\ncurl x | sh",
        "echo ok & touch made",
        "echo $(touch made)",
        "echo `touch made`",
        "(touch made)",
        "{ rm x; }",
        "find . -exec sh -c 'touch made' \\;",
        "find . -delete",
        "echo hi > made",
    ] {
        let r = c.tool(&id, "Bash", json!({ "command": command })).await;
        let t = text(&r);
        assert!(r["is_error"] == true && t.contains("permission"), "{command:?} ran: {r}");
        assert!(d.dir.path().join("x").exists() && !d.dir.path().join("made").exists(), "{command:?} ran");
    }
    let r = c.tool(&id, "Bash", json!({ "command": "echo ok" })).await;
    assert_eq!((r["is_error"].clone(), text(&r)), (json!(false), "ok\n".to_owned()), "the rule itself works");
}

#[tokio::test]
async fn a_workspace_rule_does_not_follow_a_symlink_out_of_the_workspace() {
    let d = TestDaemon::start().await;
    std::os::unix::fs::symlink("/etc/passwd", d.dir.path().join("link")).unwrap();
    let mut c = d.raw().await;
    let rules = json!({ "allow": ["Read(./**)"] });
    let id = c.session(json!({ "cwd": d.dir.path(), "permissions": rules })).await;
    let r = c.tool(&id, "Read", json!({ "file_path": d.dir.path().join("link") })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!text(&r).contains("root:"), "{r}");
}

#[tokio::test]
async fn plan_mode_tools_switch_the_mode_and_leaving_needs_the_plan_approved() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "mode": "accept_edits" })).await;
    let mode = async |s: &mut Session| s.c.ok("session/get", json!({ "session_id": s.id })).await["mode"].clone();
    let turn = s.submit_ended(vec![tool_use("p", "EnterPlanMode", json!({}))]).await;
    assert_eq!(s.results(&turn).await[0]["is_error"], false);
    assert_eq!(mode(&mut s).await, "plan");
    let write = json!({ "file_path": d.dir.path().join("w.txt"), "content": "x" });
    let turn = s.submit_ended(vec![tool_use("w", "Write", write.clone())]).await;
    assert!(text(&s.results(&turn).await[0]).contains("plan mode"));
    let plan = json!({ "plan": "1. Write w.txt\n2. Check it" });
    let turn = s.submit_ended(vec![tool_use("x1", "ExitPlanMode", plan.clone())]).await;
    let request = s.permission_request().await;
    assert_eq!((request["tool"].clone(), request["input"].clone()), (json!("ExitPlanMode"), plan.clone()));
    assert_eq!(request["render"], "Plan: 1. Write w.txt");
    s.respond(&request, json!({ "decision": "deny", "message": "also add a test" })).await;
    assert!(text(&s.results(&turn).await[0]).contains("also add a test"));
    assert_eq!(mode(&mut s).await, "plan", "a refused plan stays in plan mode");
    let turn = s.submit_ended(vec![tool_use("x2", "ExitPlanMode", plan), tool_use("w2", "Write", write)]).await;
    let request = s.permission_request().await;
    s.respond(&request, json!({ "decision": "allow" })).await;
    let results = s.results(&turn).await;
    assert_eq!(results[0]["is_error"], false, "{results:?}");
    assert_eq!(results[1]["is_error"], false, "the call after the approved plan runs in accept_edits: {results:?}");
    assert_eq!(mode(&mut s).await, "accept_edits", "the mode from before plan mode is back");
    assert!(d.dir.path().join("w.txt").exists());
    let r = s.c.tool(&s.id, "ExitPlanMode", json!({ "plan": "p" })).await;
    assert!(text(&r).contains("not in plan mode"), "{r}");
}

/// Claude Code 2.1's plan mode: EnterPlanMode names the session's plan
/// file, the one file Write and Edit may change in plan mode (nothing
/// else, and no other session's); `ExitPlanMode {}` presents that file's
/// plan for approval and returns it; with no plan file it still leaves plan
/// mode, saying no plan was written.
#[tokio::test]
async fn plan_mode_of_claude_code_2_1_writes_the_plan_file_and_exit_plan_mode_presents_it() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let turn = s.submit_ended(vec![tool_use("p", "EnterPlanMode", json!({}))]).await;
    let entered = text(&s.results(&turn).await[0]);
    let file = entered.split("Write your plan to ").nth(1).unwrap().split(" (with Write").next().unwrap().to_owned();
    assert!(file.ends_with(&format!("{}.md", s.id)), "{entered}");
    // The plan file, and nothing else, is written in plan mode (no client
    // needs to approve it).
    let plan = "# Plan\n1. Add w.txt\n2. Check it\n";
    let r = s.c.tool(&s.id, "Write", json!({ "file_path": file, "content": plan })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let r = s.c.tool(&s.id, "Read", json!({ "file_path": file })).await;
    assert!(text(&r).contains("Add w.txt"), "{r}");
    let r =
        s.c.tool(&s.id, "Edit", json!({ "file_path": file, "old_string": "Check it", "new_string": "Test it" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let elsewhere = json!({ "file_path": d.dir.path().join("w.txt"), "content": "x" });
    let r = s.c.tool(&s.id, "Write", elsewhere).await;
    assert!(text(&r).contains("plan mode"), "{r}");
    let other = std::path::Path::new(&file).with_file_name("another-session.md");
    let r = s.c.tool(&s.id, "Write", json!({ "file_path": other, "content": "x" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!other.exists());
    // ExitPlanMode with no plan: the file's, shown to the user, returned.
    let turn = s
        .submit_ended(vec![tool_use(
            "x",
            "ExitPlanMode",
            json!({ "allowedPrompts": [{ "tool": "Bash", "prompt": "run tests" }] }),
        )])
        .await;
    let request = s.permission_request().await;
    assert!(
        request["reason"].as_str().unwrap_or_default().contains("Test it") || request.to_string().contains("Test it"),
        "{request}"
    );
    s.respond(&request, json!({ "decision": "allow" })).await;
    let result = text(&s.results(&turn).await[0]);
    assert!(
        result.contains("User has approved your plan") && result.contains("2. Test it") && result.contains(&file),
        "{result}"
    );
    // No plan file: leaving still works, and says so.
    let mut t = session(&d, json!({})).await;
    let turn = t.submit_ended(vec![tool_use("p", "EnterPlanMode", json!({}))]).await;
    t.results(&turn).await;
    let turn = t.submit_ended(vec![tool_use("x", "ExitPlanMode", json!({}))]).await;
    let request = t.permission_request().await;
    t.respond(&request, json!({ "decision": "allow" })).await;
    let result = text(&t.results(&turn).await[0]);
    assert!(result.contains("no plan was written"), "{result}");
    let mode = t.c.ok("session/get", json!({ "session_id": t.id })).await["mode"].clone();
    assert_eq!(mode, "default");
    // The plan file goes with its session.
    assert!(std::path::Path::new(&file).exists());
    s.c.ok("session/close", json!({ "session_id": s.id })).await;
    assert!(!std::path::Path::new(&file).exists(), "{file} is left after the session closed");
}

#[tokio::test]
async fn a_command_over_the_complexity_limit_is_denied_even_in_bypass_and_the_daemon_survives_it() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "mode": "bypass", "permissions": { "allow": ["Bash"] } })).await;
    let deep = format!("{}touch deep{}", "(".repeat(5000), ")".repeat(5000));
    let many = "true && ".repeat(600) + "touch many";
    let turn = s
        .submit_ended(vec![
            tool_use("a", "Bash", json!({ "command": deep })),
            tool_use("b", "Bash", json!({ "command": many })),
        ])
        .await;
    let events = within("the turn", s.events.until_turn_done(&turn)).await;
    assert!(events.iter().all(|e| e["type"] != "permission/request"), "denied, not asked: {events:?}");
    let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool/result").collect();
    assert!(text(results[0]).contains("levels deep"), "{:?}", results[0]);
    assert!(text(results[1]).contains("sub-commands"), "{:?}", results[1]);
    assert!(!d.dir.path().join("deep").exists() && !d.dir.path().join("many").exists());
    s.c.ok("daemon/info", json!({})).await;
}

#[tokio::test]
async fn bypass_mode_can_be_disabled_by_a_settings_file() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    c.ok("session/create", json!({ "cwd": d.dir.path(), "mode": "bypass" })).await;
    std::fs::create_dir_all(d.dir.path().join(".claude")).unwrap();
    let settings = r#"{"permissions": {"disableBypassPermissionsMode": "disable"}}"#;
    std::fs::write(d.dir.path().join(".claude/settings.json"), settings).unwrap();
    let r = c.request("session/create", json!({ "cwd": d.dir.path(), "mode": "bypass" })).await;
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(message.contains("bypass mode is disabled") && message.contains(".claude/settings.json"), "{r}");
    c.ok("session/create", json!({ "cwd": d.dir.path(), "mode": "accept_edits" })).await;
}

#[tokio::test]
async fn ask_user_question_goes_to_the_client_in_every_mode_and_returns_the_answers() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "mode": "bypass", "permissions": { "allow": ["AskUserQuestion"] } })).await;
    let q = "Which database should the service use?";
    let input = json!({ "questions": [{
        "question": q, "header": "Database", "multiSelect": false,
        "options": [{ "label": "Postgres", "description": "one server" }, { "label": "SQLite", "description": "a file" }],
    }] });
    let turn = s.submit_ended(vec![tool_use("q1", "AskUserQuestion", input.clone())]).await;
    let request = s.permission_request().await;
    assert_eq!((request["tool"].clone(), request["input"].clone()), (json!("AskUserQuestion"), input.clone()));
    assert_eq!(request["suggestions"], json!([]), "an answer cannot be granted for ever");
    let r = s.respond(&request, json!({ "decision": "allow", "answers": { q: "SQLite" } })).await;
    assert!(r.get("result").is_some(), "{r}");
    let result = &s.results(&turn).await[0];
    assert_eq!(result["is_error"], false, "{result}");
    assert!(text(result).contains(&format!("{q} → SQLite")), "{result}");
    // Allowed without answers: the model hears that nobody answered.
    let turn = s.submit_ended(vec![tool_use("q2", "AskUserQuestion", input)]).await;
    let request = s.permission_request().await;
    s.respond(&request, json!({ "decision": "allow" })).await;
    assert!(text(&s.results(&turn).await[0]).contains("did not answer"));
    let bad = json!({ "questions": [{ "question": "Only one option?", "options": [{ "label": "yes" }] }] });
    let r = s.c.tool(&s.id, "AskUserQuestion", bad).await;
    assert!(text(&r).contains("2 to 4 options"), "{r}");
}

#[tokio::test]
async fn a_read_outside_the_workspace_asks_and_once_allowed_reads_that_file() {
    let d = TestDaemon::start().await;
    let (_outside, dir) = outside(&[("notes.txt", "outside notes\n"), ("more.txt", "more notes\n")]);
    let mut s = session(&d, json!({})).await;
    let turn = s.submit_ended(vec![tool_use("r", "Read", json!({ "file_path": dir.join("notes.txt") }))]).await;
    let request = s.permission_request().await;
    assert!(request["reason"].as_str().unwrap().contains("outside the workspace"), "{request}");
    assert_eq!(request["suggestions"], json!([format!("Read(/{}/**)", dir.display())]), "{request}");
    s.respond(&request, json!({ "decision": "allow_always" })).await;
    let result = &s.results(&turn).await[0];
    assert!(text(result).contains("outside notes"), "{result}");
    // The granted rule covers the directory: the next read runs at once.
    let turn = s.submit_ended(vec![tool_use("m", "Read", json!({ "file_path": dir.join("more.txt") }))]).await;
    let events = within("the turn", s.events.until_turn_done(&turn)).await;
    assert!(events.iter().all(|e| e["type"] != "permission/request"), "{events:?}");
    assert!(events.iter().any(|e| e["type"] == "tool/result" && text(e).contains("more notes")), "{events:?}");
}

#[tokio::test]
async fn added_directories_are_part_of_the_workspace() {
    let d = TestDaemon::start().await;
    let (_extra, extra_dir) = outside(&[("lib.txt", "library\n")]);
    let mut s =
        session(&d, json!({ "mode": "accept_edits", "add_dirs": [extra_dir], "permission_timeout_ms": 50 })).await;
    let info = s.c.ok("session/get", json!({ "session_id": s.id })).await;
    assert_eq!(info["add_dirs"], json!([extra_dir]));
    let call = async |s: &mut Session, name: &str, input: Value| s.c.tool(&s.id, name, input).await;
    let r = call(&mut s, "Read", json!({ "file_path": extra_dir.join("lib.txt") })).await;
    assert!(text(&r).contains("library"), "reads in an added directory run without asking: {r}");
    let r = call(&mut s, "Write", json!({ "file_path": extra_dir.join("new.txt"), "content": "made\n" })).await;
    assert_eq!(r["is_error"], false, "accept_edits edits there too: {r}");
    assert_eq!(std::fs::read_to_string(extra_dir.join("new.txt")).unwrap(), "made\n");
    let r = call(&mut s, "Grep", json!({ "pattern": "library", "path": extra_dir })).await;
    assert!(text(&r).contains("lib.txt"), "search there too: {r}");
    let r = call(&mut s, "Bash", json!({ "command": format!("cat {}", extra_dir.join("lib.txt").display()) })).await;
    assert_eq!(text(&r), "library\n", "{r}");
    let elsewhere = tempfile::tempdir().unwrap();
    let r = call(&mut s, "Write", json!({ "file_path": elsewhere.path().join("x"), "content": "no" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    let bad =
        d.raw().await.request("session/create", json!({ "cwd": d.dir.path(), "add_dirs": ["/no/such/dir"] })).await;
    assert_eq!(bad["error"]["data"]["field"], "add_dirs", "{bad}");
}

#[tokio::test]
async fn an_edit_outside_the_workspace_asks_even_in_accept_edits_and_writes_once_allowed() {
    let d = TestDaemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    let file = std::fs::canonicalize(outside.path()).unwrap().join("out.txt");
    let mut s = session(&d, json!({ "mode": "accept_edits" })).await;
    let turn =
        s.submit_ended(vec![tool_use("w", "Write", json!({ "file_path": file, "content": "approved\n" }))]).await;
    let request = s.permission_request().await;
    assert!(request["reason"].as_str().unwrap().contains("outside the workspace"), "{request}");
    assert!(!file.exists());
    s.respond(&request, json!({ "decision": "allow" })).await;
    assert_eq!(s.results(&turn).await[0]["is_error"], false);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "approved\n");
    // Inside the workspace accept_edits still writes without asking.
    let turn = s.submit_ended(vec![tool_use("i", "Write", json!({ "file_path": "in.txt", "content": "x" }))]).await;
    let events = within("the turn", s.events.until_turn_done(&turn)).await;
    assert!(events.iter().all(|e| e["type"] != "permission/request"), "{events:?}");
}

#[tokio::test]
async fn a_search_outside_the_workspace_asks_and_once_allowed_searches_there() {
    let d = TestDaemon::start().await;
    let (_outside, dir) = outside(&[("a.txt", "needle here\n")]);
    let mut s = session(&d, json!({})).await;
    let turn = s
        .submit_ended(vec![
            tool_use("g", "Grep", json!({ "pattern": "needle", "path": dir })),
            tool_use("f", "Glob", json!({ "pattern": "*.txt", "path": dir })),
        ])
        .await;
    for _ in 0..2 {
        let request = s.permission_request().await;
        assert!(request["reason"].as_str().unwrap().contains("outside the workspace"), "{request}");
        s.respond(&request, json!({ "decision": "allow" })).await;
    }
    let results = s.results(&turn).await;
    assert!(results.iter().all(|r| text(r).contains("a.txt")), "{results:?}");
}

#[tokio::test]
async fn cancelling_a_call_that_waits_for_permission_refuses_it_even_if_it_blocks_on_interrupt() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let input = json!({ "command": "touch blocked.txt", "on_interrupt": "block" });
    let turn = s.submit_ended(vec![tool_use("b", "Bash", input)]).await;
    let request = s.permission_request().await;
    let r = s.c.ok("turn/cancel", json!({ "session_id": s.id, "turn_id": turn })).await;
    assert_eq!(r["cancelled"], json!(["b"]), "{r}");
    let result = &s.results(&turn).await[0];
    assert!(text(result).contains("cancelled while waiting for permission"), "{result}");
    let late = s.respond(&request, json!({ "decision": "allow" })).await;
    assert_eq!(late["error"]["code"], -32602, "{late}");
    assert!(!d.dir.path().join("blocked.txt").exists());
}

#[tokio::test]
async fn edit_deny_rules_apply_to_bash_redirections() {
    let d = TestDaemon::start().await;
    std::fs::write(d.dir.path().join(".env"), "SECRET=1\n").unwrap();
    let mut s = session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Edit(.env)"] } })).await;
    for command in
        ["echo SECRET=2 > .env", "echo SECRET=2 > \".env\"", "cd . && echo SECRET=2 > .env", "echo x > $HOME/../.env"]
    {
        let call = json!({ "session_id": s.id, "name": "Bash", "input": { "command": command } });
        let r = s.c.ok("tool/call", call).await;
        assert!(text(&r).contains("Edit(.env)") && r["is_error"] == true, "{command}: {r}");
    }
    assert_eq!(std::fs::read_to_string(d.dir.path().join(".env")).unwrap(), "SECRET=1\n");
    let call = json!({ "session_id": s.id, "name": "Bash", "input": { "command": "echo ok > other.txt" } });
    assert_eq!(s.c.ok("tool/call", call).await["is_error"], false);
}

#[tokio::test]
async fn dot_dot_through_a_missing_directory_does_not_leave_an_allowed_directory() {
    let d = TestDaemon::start().await;
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    std::fs::create_dir(base.join("allowed")).unwrap();
    std::fs::create_dir(base.join("other")).unwrap();
    let mut c = d.raw().await;
    // Lexically this is base/other/x: the rule for allowed/ must not cover it.
    let params = json!({ "cwd": d.dir.path(), "permission_timeout_ms": 50, "permissions": { "allow": [format!("Write(/{}/allowed/**)", base.display())] } });
    let strict = c.session(params).await;
    let sneaky = format!("{}/allowed/nope/../../other/x", base.display());
    let r = c.tool(&strict, "Write", json!({ "file_path": sneaky, "content": "x" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!base.join("other/x").exists() && !base.join("allowed/nope").exists());
    let fine = format!("{}/allowed/y", base.display());
    let r = c.tool(&strict, "Write", json!({ "file_path": fine, "content": "y" })).await;
    assert_eq!(r["is_error"], false, "the rule itself allows: {r}");
}

/// Claude Code 2.1.332's `Tool(param:value)` rules, through the socket: a
/// deny rule on a field of the input refuses that call and not another; a
/// number is matched as its text.
#[tokio::test]
async fn param_rules_decide_by_the_calls_input() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let cwd = d.dir.path().to_str().unwrap().to_owned();
    let deny = ["TestEcho(text:*forbidden*)", "TestEcho(repeat:3)"];
    let sid = c.ok("session/create", json!({ "cwd": cwd, "permissions": { "deny": deny } })).await["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = c.tool(&sid, "TestEcho", json!({ "text": "a forbidden topic" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(text(&r).contains("TestEcho(text:*forbidden*)"), "the rule is named: {r}");
    let r = c.tool(&sid, "TestEcho", json!({ "text": "hello", "repeat": 3 })).await;
    assert_eq!(r["is_error"], true, "{r}");
    let r = c.tool(&sid, "TestEcho", json!({ "text": "hello", "repeat": 2 })).await;
    assert_eq!(r["is_error"], false, "another input is not the rules': {r}");
    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    assert_eq!(info["rule_errors"], json!([]), "{info}");
}

/// Claude Code 2.1.332's `sandbox` settings: what agentd cannot honour is
/// reported in `rule_errors` (never silently ignored); `filesystem.denyWrite`
/// and `denyRead` are Edit and Read deny rules; a domain with a port is
/// left out rather than allowed on every port.
#[tokio::test]
async fn sandbox_settings_agentd_cannot_honour_are_reported_and_deny_paths_hold() {
    let d = TestDaemon::start().await;
    std::fs::create_dir_all(d.dir.path().join(".claude")).unwrap();
    std::fs::create_dir_all(d.dir.path().join("secrets")).unwrap();
    std::fs::write(d.dir.path().join("secrets/key.txt"), "k").unwrap();
    std::fs::write(d.dir.path().join("private.txt"), "p").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let guarded = elsewhere.path().canonicalize().unwrap().join("guarded");
    let settings = json!({ "sandbox": {
        "excludedCommands": ["docker"],
        "failIfUnavailable": true,
        "network": { "allowedDomains": ["ok.example", "ported.example:8443"], "deniedDomains": ["evil.example:443"] },
        "filesystem": { "denyWrite": ["secrets/", guarded], "denyRead": ["private.txt"], "allowWrite": ["/opt"] }
    }});
    std::fs::write(d.dir.path().join(".claude/settings.json"), settings.to_string()).unwrap();
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path(), "mode": "bypass" })).await;
    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    let errors = info["rule_errors"].to_string();
    for key in [
        "sandbox.excludedCommands",
        "sandbox.failIfUnavailable",
        "sandbox.network.allowedDomains",
        "sandbox.filesystem.allowWrite",
        "sandbox.filesystem.denyRead",
    ] {
        assert!(errors.contains(key), "{key} reported: {errors}");
    }
    assert!(errors.contains("ported.example:8443 left out"), "{errors}");
    assert!(!errors.contains("not a domain"), "reported once, as not honoured: {errors}");
    // denyWrite holds even in bypass mode (a deny rule), and denyRead.
    let r = c.tool(&sid, "Write", json!({ "file_path": "secrets/new.txt", "content": "x" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!d.dir.path().join("secrets/new.txt").exists());
    let r = c.tool(&sid, "Read", json!({ "file_path": "private.txt" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    let r = c.tool(&sid, "Read", json!({ "file_path": "secrets/key.txt" })).await;
    assert_eq!(r["is_error"], false, "only writes are denied there: {r}");
    // An absolute path is one from the root (review finding).
    let rules = info["rules_in_force"].to_string();
    assert!(rules.contains(&format!("Edit(/{}/**)", guarded.display())), "{rules}");
    let r = c.tool(&sid, "Write", json!({ "file_path": guarded.join("a.txt"), "content": "x" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!guarded.join("a.txt").exists());
    // A denied entry with a port denies its host on every port.
    let r = c.tool(&sid, "WebFetch", json!({ "url": "https://evil.example/", "prompt": "p" })).await;
    assert!(r["is_error"] == true && r.to_string().contains("WebFetch(domain:evil.example)"), "{r}");
}
