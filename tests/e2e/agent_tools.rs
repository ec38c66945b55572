//! The agent's session tools through the socket: the task list (TaskCreate,
//! TaskGet, TaskList, TaskUpdate) with its `tasks/changed` events and
//! `session/get` view, Brief, Skill and Config; and a session that closes
//! with its connection.

use agentd_tests::{EventStream, TestDaemon, tool_use};
use serde_json::{Value, json};

fn texts(events: &[Value]) -> Vec<(String, String, bool)> {
    events
        .iter()
        .filter(|e| e["type"] == "tool/result")
        .map(|e| {
            (
                e["tool_use_id"].as_str().unwrap().to_owned(),
                e["content"][0]["text"].as_str().unwrap_or_default().to_owned(),
                e["is_error"] == true,
            )
        })
        .collect()
}

#[tokio::test]
async fn the_task_list_round_trips_in_request_order() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let mut events = EventStream::open(&d.socket, &sid, None).await.unwrap();
    // One turn: each call sees what the earlier ones did.
    let uses = vec![
        tool_use("a", "TaskCreate", json!({ "subject": "Write the parser", "description": "All of it" })),
        tool_use(
            "b",
            "TaskCreate",
            json!({ "subject": "Test the parser", "description": "Fuzz too", "activeForm": "Testing" }),
        ),
        tool_use("c", "TaskUpdate", json!({ "taskId": "2", "addBlockedBy": ["1"], "owner": "me" })),
        tool_use("d", "TaskUpdate", json!({ "taskId": "1", "status": "in_progress", "metadata": { "pr": 7 } })),
        tool_use("e", "TaskGet", json!({ "taskId": "2" })),
        tool_use("f", "TaskList", json!({})),
        tool_use("g", "TaskUpdate", json!({ "taskId": "9", "status": "completed" })),
        tool_use("h", "TaskUpdate", json!({ "taskId": "1", "addBlocks": ["1"] })),
        tool_use("i", "TaskCreate", json!({ "subject": " ", "description": "x" })),
    ];
    let turn = c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let all = events.until_turn_done(&turn).await;
    let results = texts(&all);
    let text = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    assert!(text("a").1.contains("Task #1 created") && !text("a").2, "{:?}", text("a"));
    assert!(text("b").1.contains("Task #2 created"), "{:?}", text("b"));
    let got = text("e").1;
    assert!(
        got.contains("Task #2: Test the parser\nStatus: pending")
            && got.contains("Owner: me")
            && got.contains("Blocked by: #1"),
        "{got}"
    );
    let list = text("f").1;
    assert!(list.contains("#1 [in_progress] Write the parser") && list.contains("#2 [pending]"), "{list}");
    assert!(text("g").2 && text("g").1.contains("no task"), "{:?}", text("g"));
    assert!(text("h").2 && text("h").1.contains("itself"), "{:?}", text("h"));
    assert!(text("i").2 && text("i").1.contains("subject"), "{:?}", text("i"));

    // Each change is announced after its result, with the whole list.
    let changed: Vec<&Value> = all.iter().filter(|e| e["type"] == "tasks/changed").collect();
    assert_eq!(changed.len(), 4, "a, b, c and d changed the list");
    let after_c = changed.iter().find(|e| e["tool_use_id"] == "c").unwrap();
    assert_eq!(after_c["tasks"][0]["blocks"], json!(["2"]), "{after_c}");
    assert_eq!(after_c["tasks"][1]["blockedBy"], json!(["1"]), "{after_c}");
    let pos = |t: &str, id: &str| all.iter().position(|e| e["type"] == t && e["tool_use_id"] == id).unwrap();
    assert!(pos("tool/result", "a") < pos("tasks/changed", "a"));

    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    assert_eq!(info["tasks"].as_array().unwrap().len(), 2, "{info}");
    assert_eq!(info["tasks"][0]["status"], "in_progress");
    assert_eq!(info["tasks"][0]["metadata"], json!({ "pr": 7 }));

    // Deleting leaves no dangling dependency, and ids are never reused.
    let r = c.tool(&sid, "TaskUpdate", json!({ "taskId": "1", "status": "deleted" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let r = c.tool(&sid, "TaskCreate", json!({ "subject": "Ship", "description": "" })).await;
    assert!(r["content"][0]["text"].as_str().unwrap().contains("Task #3"), "{r}");
    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    let tasks = info["tasks"].as_array().unwrap();
    assert_eq!(tasks.iter().map(|t| t["id"].as_str().unwrap()).collect::<Vec<_>>(), ["2", "3"]);
    assert_eq!(tasks[0]["blockedBy"], json!([]));
}

#[tokio::test]
async fn a_session_made_to_close_with_its_connection_does() {
    let d = TestDaemon::start().await;
    let mut owner = d.raw().await;
    let mut other = d.raw().await;
    let params = json!({ "cwd": d.dir.path(), "mode": "bypass", "close_with_connection": true });
    let sid = owner.session(params).await;
    let kept = other.session(json!({ "cwd": d.dir.path() })).await;
    let info = other.ok("session/get", json!({ "session_id": sid })).await;
    assert_eq!(info["close_with_connection"], true, "{info}");
    let tag = agentd_tests::tag();
    let uses = vec![tool_use("s", "Bash", json!({ "command": format!("sleep {tag}") }))];
    owner.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await;
    agentd_tests::eventually("the command runs", || !agentd_tests::procs(&format!("sleep {tag}")).is_empty()).await;
    drop(owner);
    agentd_tests::none_left(&format!("sleep {tag}")).await;
    let mut left = other.session_ids().await;
    for _ in 0..200 {
        if !left.contains(&sid) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        left = other.session_ids().await;
    }
    assert!(!left.contains(&sid) && left.contains(&kept), "{left:?}");
}

#[test]
fn brief_sends_a_message_that_agentctl_run_shows() {
    let d = agentd_tests::StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    let lines = [
        json!({ "id": "m", "name": "Brief", "input": { "message": "Found the bug:\nthe parser drops CRs." } }),
        json!({ "id": "e", "name": "Brief", "input": { "message": "  " } }),
        json!({ "id": "t", "name": "TaskCreate", "input": { "subject": "Fix the parser", "description": "CRs" } }),
    ];
    std::fs::write(&blocks, lines.iter().map(|l| l.to_string() + "\n").collect::<String>()).unwrap();
    let (cwd, file) = (work.path().to_str().unwrap(), blocks.to_str().unwrap());
    let (code, out, err) = agentd_tests::agentctl(&d.socket, &["run", file, "--cwd", cwd, "--mode", "bypass"]);
    assert_eq!(code, 4, "the empty message fails: {out} {err}");
    assert!(out.contains("message   Found the bug:") && out.contains("the parser drops CRs."), "{out}");
    assert!(out.contains("#1 Fix the parser"), "the task list change is shown: {out}");
    let (_, out, _) = agentd_tests::agentctl(&d.socket, &["--json", "run", file, "--cwd", cwd, "--mode", "bypass"]);
    let events: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let messages: Vec<&Value> = events.iter().filter(|e| e["type"] == "user/message").collect();
    assert_eq!(messages.len(), 1, "{out}");
    assert_eq!(messages[0]["message"], "Found the bug:\nthe parser drops CRs.");
    assert_eq!(messages[0]["tool_use_id"], "m");
}

#[tokio::test]
async fn skills_are_listed_loaded_and_bad_ones_reported() {
    let d = TestDaemon::start().await;
    let ws = tempfile::tempdir().unwrap();
    let skills = ws.path().join(".claude/skills");
    std::fs::create_dir_all(skills.join("pdf")).unwrap();
    std::fs::write(
        skills.join("pdf/SKILL.md"),
        "---\nname: pdf\ndescription: \"Fill PDF forms: use for any .pdf\"\n---\n# Filling forms\nRun fill.py beside this file.\n",
    )
    .unwrap();
    std::fs::create_dir_all(skills.join("broken")).unwrap();
    std::fs::write(skills.join("broken/SKILL.md"), "no front matter here\n").unwrap();
    std::fs::create_dir_all(skills.join("sneaky")).unwrap();
    std::fs::write(skills.join("sneaky/SKILL.md"), "---\nname: ../../etc\ndescription: x\n---\nbody\n").unwrap();
    let mut c = d.raw().await;
    let created = c.ok("session/create", json!({ "cwd": ws.path() })).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let errors = created["session"]["skill_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().any(|e| e.as_str().unwrap().contains("broken/SKILL.md")), "{errors:?}");
    let list = c.ok("tools/list", json!({ "session_id": sid })).await;
    let skill = list["tools"].as_array().unwrap().iter().find(|t| t["name"] == "Skill").expect("Skill is offered");
    let description = skill["description"].as_str().unwrap();
    assert!(
        description.contains("- pdf: Fill PDF forms: use for any .pdf") && !description.contains("etc"),
        "{description}"
    );

    let call = |input: Value| json!({ "session_id": sid, "name": "Skill", "input": input });
    let r = c.ok("tool/call", call(json!({ "skill": "pdf", "args": "form.pdf" }))).await;
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(r["is_error"] == false && text.contains("# Filling forms") && !text.contains("description:"), "{text}");
    assert!(text.contains(&skills.join("pdf").display().to_string()) && text.contains("ARGUMENTS: form.pdf"), "{text}");
    for (bad, needle) in [("nope", "no skill"), ("../pdf", "not a skill name"), ("pdf/../x", "not a skill name")] {
        let r = c.ok("tool/call", call(json!({ "skill": bad }))).await;
        assert!(r["is_error"] == true && r["content"][0]["text"].as_str().unwrap().contains(needle), "{bad}: {r}");
    }

    // No skills, no Skill tool.
    let plain = tempfile::tempdir().unwrap();
    let other = c.session(json!({ "cwd": plain.path() })).await;
    let list = c.ok("tools/list", json!({ "session_id": other })).await;
    assert!(!list["tools"].as_array().unwrap().iter().any(|t| t["name"] == "Skill"));
}

#[tokio::test]
async fn config_reads_settings_and_changes_only_the_models_own() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let mut config = async |input: Value| {
        let r = c.tool(&sid, "Config", input).await;
        (r["is_error"] == true, r["content"][0]["text"].as_str().unwrap_or_default().to_owned())
    };
    let (err, text) = config(json!({ "setting": "mode" })).await;
    assert!(!err && text.contains("mode = \"default\""), "{text}");
    for (setting, value) in [("mode", json!("bypass")), ("sandbox.mode", json!("off")), ("permissions", json!({}))] {
        let (err, text) = config(json!({ "setting": setting, "value": value })).await;
        assert!(err && text.contains("the user's"), "{setting}: {text}");
    }
    let (err, text) = config(json!({ "setting": "bash.default_timeout_ms", "value": 999_999_999 })).await;
    assert!(err && text.contains("between"), "{text}");
    let (err, text) = config(json!({ "setting": "nope" })).await;
    assert!(err && text.contains("no setting"), "{text}");
    let (err, text) = config(json!({ "setting": "bash.default_timeout_ms", "value": "1500" })).await;
    assert!(!err && text.contains("now 1500"), "{text}");
    let (_, text) = config(json!({ "setting": "bash.default_timeout_ms" })).await;
    assert!(text.contains("= 1500"), "{text}");
    // A command that names no timeout now gets the new one.
    let r = c.tool(&sid, "Bash", json!({ "command": "sleep 5", "dangerouslyDisableSandbox": false })).await;
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(r["is_error"] == false && text.contains("within its 1.5s timeout and was moved to the background"), "{r}");
}

#[tokio::test]
async fn skills_that_lead_outside_or_are_denied_are_left_out() {
    let d = TestDaemon::start().await;
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("SKILL.md"), "---\nname: leak\ndescription: api_key=sk-live\n---\nPRIVATE\n")
        .unwrap();
    let skills = ws.path().join(".claude/skills");
    std::fs::create_dir_all(skills.join("linked-file")).unwrap();
    std::os::unix::fs::symlink(outside.path(), skills.join("leak")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("SKILL.md"), skills.join("linked-file/SKILL.md")).unwrap();
    std::fs::create_dir_all(skills.join("denied")).unwrap();
    std::fs::write(skills.join("denied/SKILL.md"), "---\nname: denied\ndescription: d\n---\nNO\n").unwrap();
    let mut c = d.raw().await;
    let deny = format!("Read(/{}/.claude/skills/denied/**)", ws.path().display());
    let created = c.ok("session/create", json!({ "cwd": ws.path(), "permissions": { "deny": [deny] } })).await;
    let errors = created["session"]["skill_errors"].as_array().unwrap();
    assert_eq!(errors.len(), 3, "{errors:?}");
    let list = c.ok("tools/list", json!({ "session_id": created["session_id"] })).await;
    assert!(!list.to_string().contains("sk-live"), "a file outside leaked into the description");
    assert!(!list["tools"].as_array().unwrap().iter().any(|t| t["name"] == "Skill"), "no usable skill, no tool");
}

#[tokio::test]
async fn the_task_list_is_bounded() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let call = |name: &str, input: Value| json!({ "session_id": sid, "name": name, "input": input });
    let r = c
        .ok(
            "tool/call",
            call("TaskCreate", json!({ "subject": "s", "description": "d", "activeForm": "x".repeat(600) })),
        )
        .await;
    assert!(r["is_error"] == true && r["content"][0]["text"].as_str().unwrap().contains("activeForm"), "{r}");
    let big = "y".repeat(19_000);
    let mut refused = None;
    for i in 0..80 {
        let r = c.ok("tool/call", call("TaskCreate", json!({ "subject": format!("t{i}"), "description": big }))).await;
        if r["is_error"] == true {
            refused = Some((i, r["content"][0]["text"].as_str().unwrap().to_owned()));
            break;
        }
    }
    let (at, why) = refused.expect("the list stops growing");
    assert!(at > 40 && why.contains("task list would take"), "{at}: {why}");
}
