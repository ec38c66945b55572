//! Sub-agents through the socket: the Task tool makes a child session and
//! asks a client that runs agents (a `turn/stream` with capabilities
//! `["agents"]`) to run it; the client drives the child with ordinary calls
//! and answers with `agent/respond`. Children inherit the parent's rules
//! and close with it; cancelling the parent's turn ends the child's work.

use agentd_tests::{RawConn, TestDaemon, none_left, procs, tag, tool_use, within};
use serde_json::{Value, json};

/// A stream of `sid`'s events from a client that runs agents.
async fn runner(d: &TestDaemon, sid: &str) -> RawConn {
    let mut conn = d.raw().await;
    let reply = conn.request("turn/stream", json!({ "session_id": sid, "capabilities": ["agents"] })).await;
    assert!(reply["result"].is_string(), "{reply}");
    conn
}

/// A connection, a session on `d`'s directory, and a [`runner`] for it.
async fn parent(d: &TestDaemon) -> (RawConn, String, RawConn) {
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let events = runner(d, &sid).await;
    (c, sid, events)
}

/// The next event of a stream opened by [`runner`].
async fn next(conn: &mut RawConn) -> Value {
    let note = within("an event", conn.recv()).await.expect("the stream goes on");
    note["params"]["result"].clone()
}

async fn until(conn: &mut RawConn, mut stop: impl FnMut(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let e = next(conn).await;
        let done = stop(&e);
        seen.push(e);
        if done {
            return seen;
        }
    }
}

fn names(list: &Value) -> Vec<String> {
    list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn tasks_run_side_by_side_in_child_sessions_bound_by_the_parents_rules() {
    let d = TestDaemon::start().await;
    std::fs::write(d.dir.path().join("notes.txt"), "one note\n").unwrap();
    let mut c = d.raw().await;
    let params =
        json!({ "cwd": d.dir.path(), "permission_timeout_ms": 100, "permissions": { "deny": ["Bash(rm:*)"] } });
    let sid = c.session(params).await;
    let list = c.ok("tools/list", json!({ "session_id": sid })).await;
    assert!(!names(&list).contains(&"Task".to_owned()), "nobody runs agents yet");

    let mut events = runner(&d, &sid).await;
    let list = c.ok("tools/list", json!({ "session_id": sid })).await;
    assert!(names(&list).contains(&"Task".to_owned()), "{:?}", names(&list));
    let task = |id: &str, what: &str| {
        tool_use(
            id,
            "Task",
            json!({ "run_in_background": false, "description": what, "prompt": format!("Please {what}."), "subagent_type": "general-purpose" }),
        )
    };
    let bad = tool_use(
        "x",
        "Agent",
        json!({ "run_in_background": false, "description": "d", "prompt": "p", "subagent_type": "nope" }),
    );
    let uses = vec![task("a", "read the notes"), task("b", "fail on purpose"), bad];
    let turn = c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // Both requests come before either is answered: side by side.
    let mut requests = Vec::new();
    let seen = until(&mut events, |e| {
        if e["type"] == "agent/request" {
            requests.push(e.clone());
        }
        requests.len() == 2
    })
    .await;
    assert!(!seen.iter().any(|e| e["type"] == "tool/result"), "results keep request order");
    let req = |id: &str| requests.iter().find(|r| r["tool_use_id"] == id).unwrap().clone();
    let (a, b) = (req("a"), req("b"));
    assert_eq!(a["subagent_type"], "general-purpose");
    assert_eq!(a["prompt"], "Please read the notes.");
    let child = a["child_session_id"].as_str().unwrap().to_owned();
    assert!(!a["tools"].as_array().unwrap().iter().any(|t| t == "Task"), "no nested agents: {a}");

    // The child: the parent's workspace and rules, its own session.
    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    assert_eq!(info["children"].as_array().unwrap().len(), 2, "{info}");
    let child_info = c.ok("session/get", json!({ "session_id": child })).await;
    assert_eq!(child_info["parent_session_id"], json!(sid));
    let call = |name: &str, input: Value| json!({ "session_id": child, "name": name, "input": input });
    let r = c.ok("tool/call", call("Read", json!({ "file_path": "notes.txt" }))).await;
    assert!(r["content"][0]["text"].as_str().unwrap().contains("one note"), "{r}");
    let r = c.ok("tool/call", call("Bash", json!({ "command": "rm -f notes.txt" }))).await;
    assert_eq!(r["is_error"], true, "the parent's deny rule binds the child: {r}");
    assert!(d.dir.path().join("notes.txt").exists());
    let list = c.ok("tools/list", json!({ "session_id": child })).await;
    assert!(!names(&list).contains(&"Task".to_owned()));

    let respond = |rid: &Value, result: &str, is_error: bool| json!({ "session_id": sid, "request_id": rid, "result": result, "is_error": is_error });
    c.ok("agent/respond", respond(&a["request_id"], "Found one note.", false)).await;
    c.ok("agent/respond", respond(&b["request_id"], "Could not do it.", true)).await;
    let r = c.request("agent/respond", respond(&a["request_id"], "again", false)).await;
    assert_eq!(r["error"]["code"], -32602, "answered already: {r}");
    let rest = until(&mut events, |e| e["type"] == "turn/completed" && e["turn_id"] == json!(turn)).await;
    let result = |id: &str| rest.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == id).unwrap().clone();
    assert_eq!(result("a")["is_error"], false);
    assert_eq!(result("a")["content"][0]["text"], "Found one note.");
    assert_eq!(result("b")["is_error"], true);
    let unknown = result("x");
    assert!(
        unknown["is_error"] == true && unknown["content"][0]["text"].as_str().unwrap().contains("no agent type"),
        "{unknown}"
    );
    // The children close with their calls.
    let r = c.request("session/get", json!({ "session_id": child })).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    assert_eq!(info["children"], json!([]));
}

#[tokio::test]
async fn cancelling_the_parents_turn_ends_the_childs_work() {
    let d = TestDaemon::start().await;
    let (mut c, sid, mut events) = parent(&d).await;
    let uses = vec![tool_use(
        "t",
        "Task",
        json!({ "run_in_background": false, "description": "wait", "prompt": "wait", "subagent_type": "general-purpose" }),
    )];
    let turn = c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let seen = until(&mut events, |e| e["type"] == "agent/request").await;
    let child = seen.last().unwrap()["child_session_id"].as_str().unwrap().to_owned();
    let tag = tag();
    let sleep = vec![tool_use("s", "Bash", json!({ "command": format!("sleep {tag}") }))];
    c.ok("turn/submit", json!({ "session_id": child, "tool_uses": sleep, "end": true })).await;
    agentd_tests::eventually("the child's command runs", || !procs(&format!("sleep {tag}")).is_empty()).await;
    c.ok("turn/cancel", json!({ "session_id": sid, "turn_id": turn })).await;
    none_left(&format!("sleep {tag}")).await;
    let rest = until(&mut events, |e| e["type"] == "turn/completed").await;
    let result = rest.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == "t").unwrap();
    assert_eq!(result["is_error"], true, "{result}");
}

#[tokio::test]
async fn a_child_made_by_a_client_inherits_and_cannot_widen() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let parent = json!({ "cwd": d.dir.path(), "mode": "plan", "permissions": { "allow": ["Bash(make:*)"] } });
    let sid = c.session(parent).await;
    for (extra, field) in [
        (json!({ "mode": "bypass" }), "mode"),
        (json!({ "permissions": { "allow": ["Bash"] } }), "permissions"),
        (json!({ "sandbox": { "mode": "off" } }), "sandbox"),
    ] {
        let mut p = json!({ "cwd": d.dir.path(), "parent_session_id": sid });
        p.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let r = c.request("session/create", p).await;
        assert_eq!(r["error"]["data"]["field"], field, "{r}");
    }
    let r = c.request("session/create", json!({ "cwd": "/", "parent_session_id": sid })).await;
    assert_eq!(r["error"]["data"]["field"], "cwd", "outside the parent's workspace: {r}");
    let p = json!({ "cwd": d.dir.path(), "parent_session_id": sid, "permissions": { "deny": ["Read"] } });
    let child = c.ok("session/create", p).await["session"].clone();
    assert_eq!(child["mode"], "plan", "{child}");
    assert!(child["permissions"]["allow"].as_array().unwrap().iter().any(|r| r == "Bash(make:*)"), "{child}");
    assert!(child["permissions"]["deny"].as_array().unwrap().iter().any(|r| r == "Read"), "{child}");
    let child_id = child["session_id"].as_str().unwrap().to_owned();
    // Cancelling everything the parent runs reaches its child's work.
    let tag = tag();
    let sleep = vec![tool_use("s", "Bash", json!({ "command": format!("sleep {tag}") }))];
    c.ok("turn/submit", json!({ "session_id": child_id, "tool_uses": sleep, "end": true })).await;
    agentd_tests::eventually("the child's command runs", || !procs(&format!("sleep {tag}")).is_empty()).await;
    c.ok("turn/cancel", json!({ "session_id": sid })).await;
    none_left(&format!("sleep {tag}")).await;
    c.ok("session/close", json!({ "session_id": sid })).await;
    let r = c.request("session/get", json!({ "session_id": child_id })).await;
    assert_eq!(r["error"]["code"], -32001, "closed with its parent: {r}");
}

#[test]
fn agentctl_run_shows_an_agent_request_and_respond_agent_answers_it() {
    use std::io::BufRead;
    let d = agentd_tests::StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let (code, out, err) =
        agentd_tests::agentctl(&d.socket, &["--json", "session", "create", "--cwd", work.path().to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let sid = serde_json::from_str::<Value>(&out).unwrap()["session_id"].as_str().unwrap().to_owned();
    let blocks = work.path().join("turn.jsonl");
    let task = json!({ "id": "t", "name": "Task", "input": { "run_in_background": false, "description": "look", "prompt": "Look around.", "subagent_type": "general-purpose" } });
    std::fs::write(&blocks, format!("{task}\n")).unwrap();
    let mut child = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .arg("--socket")
        .arg(&d.socket)
        .args(["run", blocks.to_str().unwrap(), "--session", &sid])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let request = loop {
        let line = lines.next().expect("agentctl run shows the request").unwrap();
        if let Some(rest) = line.split("respond-agent <session> ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    let (code, out, err) =
        agentd_tests::agentctl(&d.socket, &["respond-agent", &sid, &request, "--result", "All quiet here."]);
    assert_eq!(code, 0, "{out} {err}");
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(child.wait().unwrap().success());
    assert!(rest.iter().any(|l| l.contains("All quiet here.")), "{rest:?}");
    let (code, _, err) = agentd_tests::agentctl(&d.socket, &["respond-agent", &sid, &request, "--result", "x"]);
    assert_eq!(code, 1, "answered already: {err}");
}

#[tokio::test]
async fn agent_definitions_narrow_the_childs_tools_and_bad_ones_are_reported() {
    let d = TestDaemon::start().await;
    let ws = tempfile::tempdir().unwrap();
    let agents = ws.path().join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("reviewer.md"),
        "---\nname: reviewer\ndescription: Reviews code for bugs\ntools: Read, Grep\n---\nYou review code. Report bugs only.\n",
    )
    .unwrap();
    std::fs::write(agents.join("broken.md"), "---\ndescription: no name\n---\nbody\n").unwrap();
    let mut c = d.raw().await;
    let created = c.ok("session/create", json!({ "cwd": ws.path() })).await;
    let sid = created["session_id"].as_str().unwrap().to_owned();
    let errors = created["session"]["agent_errors"].as_array().unwrap();
    assert!(errors.len() == 1 && errors[0].as_str().unwrap().contains("broken.md"), "{errors:?}");
    let mut events = runner(&d, &sid).await;
    let list = c.ok("tools/list", json!({ "session_id": sid })).await;
    let task = list["tools"].as_array().unwrap().iter().find(|t| t["name"] == "Task").unwrap().clone();
    assert!(
        task["description"].as_str().unwrap().contains("- reviewer: Reviews code for bugs (Tools: Read, Grep)"),
        "{task}"
    );
    let uses = vec![tool_use(
        "r",
        "Task",
        json!({ "run_in_background": false, "description": "review", "prompt": "Review x.rs", "subagent_type": "reviewer" }),
    )];
    c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await;
    let seen = until(&mut events, |e| e["type"] == "agent/request").await;
    let request = seen.last().unwrap().clone();
    assert_eq!(request["instructions"], "You review code. Report bugs only.");
    assert_eq!(request["tools"], json!(["Grep", "Read"]), "{request}");
    let child = request["child_session_id"].as_str().unwrap();
    let r = c.tool(child, "Bash", json!({ "command": "true" })).await;
    assert_eq!(r["is_error"], true, "the reviewer has no Bash: {r}");
    let answer = json!({ "session_id": sid, "request_id": request["request_id"], "result": "No bugs." });
    c.ok("agent/respond", answer).await;
    let rest = until(&mut events, |e| e["type"] == "turn/completed").await;
    assert!(rest.iter().any(|e| e["type"] == "tool/result" && e["content"][0]["text"] == "No bugs."));
}

/// Found by an attack review: a child re-read the rules from its own
/// directory, so the parent's workspace settings (and relative session
/// rules) no longer bound it; a client-made child could nest Task; a Task
/// waited forever for a runner that had left.
#[tokio::test]
async fn a_child_is_bound_by_the_parents_own_rules_wherever_it_works() {
    let d = TestDaemon::start().await;
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".claude")).unwrap();
    std::fs::write(
        ws.path().join(".claude/settings.json"),
        r#"{"permissions":{"deny":["Bash(rm:*)","Read(secret.txt)"]}}"#,
    )
    .unwrap();
    std::fs::write(ws.path().join("secret.txt"), "TOPSECRET\n").unwrap();
    std::fs::create_dir_all(ws.path().join("sub/.claude")).unwrap();
    // A settings file the child's directory holds adds nothing.
    std::fs::write(ws.path().join("sub/.claude/settings.json"), r#"{"permissions":{"allow":["Bash"]}}"#).unwrap();
    std::fs::write(ws.path().join("sub/victim.txt"), "x").unwrap();
    let mut c = d.raw().await;
    let parent = json!({ "cwd": ws.path(), "mode": "bypass", "permissions": { "deny": ["Read(./private/**)"] } });
    let sid = c.session(parent).await;
    std::fs::create_dir_all(ws.path().join("private")).unwrap();
    std::fs::write(ws.path().join("private/key"), "KEY\n").unwrap();
    let child = json!({ "cwd": ws.path().join("sub"), "parent_session_id": sid });
    let child = c.session(child).await;
    let call = |name: &str, input: Value| json!({ "session_id": child, "name": name, "input": input });
    for (name, input) in [
        ("Read", json!({ "file_path": ws.path().join("secret.txt") })),
        ("Read", json!({ "file_path": ws.path().join("private/key") })),
        ("Bash", json!({ "command": "rm -f victim.txt" })),
    ] {
        let r = c.ok("tool/call", call(name, input.clone())).await;
        assert_eq!(r["is_error"], true, "{name} {input}: {r}");
        assert!(!r["content"][0]["text"].as_str().unwrap_or_default().contains("SECRET"), "{r}");
    }
    assert!(ws.path().join("sub/victim.txt").exists());

    // A child made by a client gets no Task either.
    let _runner = runner(&d, &child).await;
    let list = c.ok("tools/list", json!({ "session_id": child })).await;
    assert!(!names(&list).contains(&"Task".to_owned()), "{:?}", names(&list));
}

#[tokio::test]
async fn a_task_fails_once_no_client_runs_agents() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let mut watcher = agentd_tests::EventStream::open(&d.socket, &sid, None).await.unwrap();
    let mut agents = runner(&d, &sid).await;
    let uses = vec![tool_use(
        "t",
        "Task",
        json!({ "run_in_background": false, "description": "d", "prompt": "p", "subagent_type": "general-purpose" }),
    )];
    c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await;
    until(&mut agents, |e| e["type"] == "agent/request").await;
    drop(agents);
    let events = within("the Task's end", watcher.until(|e| e["type"] == "tool/result")).await;
    let result = events.last().unwrap();
    assert_eq!(result["is_error"], true);
    assert!(result["content"][0]["text"].as_str().unwrap().contains("went away"), "{result}");
    let info = c.ok("session/get", json!({ "session_id": sid })).await;
    assert_eq!(info["children"], json!([]), "the child is closed");
}

#[test]
fn children_do_not_survive_a_restart() {
    let mut d = agentd_tests::StandaloneDaemon::start(&[], &[]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let work = tempfile::tempdir().unwrap();
    let (parent, child) = rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let parent = c.session(json!({ "cwd": work.path() })).await;
        let child = json!({ "cwd": work.path(), "parent_session_id": parent });
        let child = c.session(child).await;
        // Until the records are on disk (saved every 200 ms).
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        (parent, child)
    });
    d.signal(nix::sys::signal::Signal::SIGKILL);
    d.wait_exit();
    d.restart();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let ids = c.session_ids().await;
        assert!(ids.contains(&parent) && !ids.contains(&child), "{ids:?}");
    });
}

#[tokio::test]
async fn a_runner_gets_agent_requests_whatever_kinds_it_asked_for() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let mut agents = d.raw().await;
    let params = json!({ "session_id": sid, "capabilities": ["agents"], "kinds": ["tool/result"] });
    assert!(agents.request("turn/stream", params).await["result"].is_string());
    let uses = vec![tool_use(
        "t",
        "Task",
        json!({ "run_in_background": false, "description": "d", "prompt": "p", "subagent_type": "general-purpose" }),
    )];
    c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await;
    let request = next(&mut agents).await;
    assert_eq!(request["type"], "agent/request", "{request}");
    c.ok("agent/respond", json!({ "session_id": sid, "request_id": request["request_id"], "result": "ok" })).await;
    let result = next(&mut agents).await;
    assert_eq!(result["type"], "tool/result", "only what it asked for besides: {result}");
}

/// Claude Code 2.1's agent types: Explore and Plan cannot write, the
/// others have its tool sets; `subagent_type` defaults to general-purpose;
/// `model` and `effort` reach the client that runs the agent (a
/// definition's model when the call names none); `Task(Explore)` and
/// `Agent(Plan)` rules name the type.
#[tokio::test]
async fn built_in_agent_types_models_and_rules_on_types() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let params =
        json!({ "cwd": d.dir.path(), "permission_timeout_ms": 100, "permissions": { "deny": ["Agent(Plan)"] } });
    let sid = c.session(params).await;
    let mut events = runner(&d, &sid).await;
    let list = c.ok("tools/list", json!({ "session_id": sid })).await;
    let task = list["tools"].as_array().unwrap().iter().find(|t| t["name"] == "Task").unwrap().clone();
    // Claude Code 2.1's Agent inputs, from the fixture its binary gave:
    // each listed with its enum (but isolation, which agentd refuses).
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/claude-code-2.1-tools.json");
    let fixture: Value = serde_json::from_str(&std::fs::read_to_string(fixture).unwrap()).unwrap();
    let schema = &task["input_schema"]["properties"];
    for (name, theirs) in fixture["tools"]["Agent"]["input_schema"]["properties"].as_object().unwrap() {
        if name == "isolation" {
            assert_eq!(schema[name]["enum"], json!(["worktree"]), "only a worktree ({schema})");
            continue;
        }
        assert!(schema.get(name).is_some(), "Task lists {name}: {schema}");
        for value in theirs["enum"].as_array().into_iter().flatten() {
            assert!(schema[name]["enum"].as_array().unwrap().contains(value), "{name} takes {value}");
        }
    }
    assert!(schema.get("run_in_background").is_some(), "{schema}");
    let description = task["description"].as_str().unwrap();
    for kind in ["general-purpose", "Explore", "Plan", "statusline-setup", "claude-code-guide"] {
        assert!(description.contains(&format!("- {kind}:")), "{kind} listed: {description}");
    }
    let uses = vec![
        tool_use(
            "e",
            "Agent",
            json!({ "run_in_background": false, "description": "look", "prompt": "Find main.", "subagent_type": "Explore", "model": "haiku", "effort": "low" }),
        ),
        tool_use("g", "Task", json!({ "run_in_background": false, "description": "do", "prompt": "Do it." })),
        tool_use(
            "s",
            "Task",
            json!({ "run_in_background": false, "description": "line", "prompt": "Set it.", "subagent_type": "statusline-setup" }),
        ),
        tool_use(
            "p",
            "Task",
            json!({ "run_in_background": false, "description": "plan", "prompt": "Plan it.", "subagent_type": "Plan" }),
        ),
        tool_use(
            "m",
            "Task",
            json!({ "run_in_background": false, "description": "bad", "prompt": "x", "model": "gpt-5" }),
        ),
        tool_use(
            "i",
            "Agent",
            json!({ "run_in_background": false, "description": "iso", "prompt": "x", "isolation": "remote" }),
        ),
    ];
    let turn = c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut requests = Vec::new();
    until(&mut events, |e| {
        if e["type"] == "agent/request" {
            requests.push(e.clone());
        }
        requests.len() == 3
    })
    .await;
    let req = |id: &str| {
        requests.iter().find(|r| r["tool_use_id"] == id).unwrap_or_else(|| panic!("{id}: {requests:?}")).clone()
    };
    let tools = |r: &Value| -> Vec<String> {
        r["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap().to_owned()).collect()
    };
    let explore = req("e");
    assert_eq!(
        (explore["subagent_type"].clone(), explore["model"].clone(), explore["effort"].clone()),
        (json!("Explore"), json!("haiku"), json!("low"))
    );
    for denied in ["Edit", "Write", "NotebookEdit", "ExitPlanMode", "Task"] {
        assert!(!tools(&explore).contains(&denied.to_owned()), "Explore has no {denied}: {explore}");
    }
    assert!(tools(&explore).contains(&"Read".to_owned()) && tools(&explore).contains(&"Grep".to_owned()), "{explore}");
    // The child cannot write, whatever it is asked.
    let child = explore["child_session_id"].as_str().unwrap();
    let r = c.tool(child, "Write", json!({ "file_path": "x.txt", "content": "x" })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!d.dir.path().join("x.txt").exists());
    let general = req("g");
    assert_eq!(general["subagent_type"], "general-purpose");
    assert!(general.get("model").is_none(), "{general}");
    let statusline = req("s");
    let mut own = tools(&statusline);
    own.sort();
    assert_eq!(own, ["Edit", "Read"]);
    assert_eq!(statusline["model"], "sonnet", "the definition's model");
    for r in [&explore, &general, &statusline] {
        c.ok("agent/respond", json!({ "session_id": sid, "request_id": r["request_id"], "result": "done" })).await;
    }
    let rest = until(&mut events, |e| e["type"] == "turn/completed" && e["turn_id"] == json!(turn)).await;
    let result = |id: &str| rest.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == id).unwrap().clone();
    let plan = result("p");
    assert_eq!(plan["is_error"], true, "Agent(Plan) denies Task calls of Plan: {plan}");
    assert!(plan["content"][0]["text"].as_str().unwrap().contains("Agent(Plan)"), "{plan}");
    let model = result("m");
    assert!(model["content"][0]["text"].as_str().unwrap().contains("gpt-5"), "{model}");
    let isolation = result("i");
    assert!(isolation["content"][0]["text"].as_str().unwrap().contains("isolation \"remote\" is not supported"));
    assert_eq!(result("e")["content"][0]["text"], "done");
}

#[tokio::test]
async fn a_task_in_the_background_returns_at_once_and_its_result_comes_by_task_output() {
    let d = TestDaemon::start().await;
    let (mut c, sid, mut events) = parent(&d).await;
    let call = |name: &str, input: Value| json!({ "session_id": sid, "name": name, "input": input });
    let text = |r: &Value| r["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let background = json!({ "description": "survey", "prompt": "Survey it.", "run_in_background": true });
    let r = within("Task", c.ok("tool/call", call("Task", background.clone()))).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains("Async agent launched successfully") && text(&r).contains("agentId: job_1"), "{r}");
    let request = until(&mut events, |e| e["type"] == "agent/request").await.pop().unwrap();
    let child = request["child_session_id"].as_str().unwrap().to_owned();
    let jobs = c.ok("session/get", json!({ "session_id": sid })).await["jobs"].clone();
    assert_eq!(jobs[0]["status"], "running", "{jobs}");
    assert!(jobs[0]["command"].as_str().unwrap().contains("general-purpose: survey"), "{jobs}");
    let r = c.ok("tool/call", call("TaskOutput", json!({ "task_id": "job_1", "block": false }))).await;
    assert!(text(&r).contains("is running"), "{r}");
    c.ok(
        "agent/respond",
        json!({ "session_id": sid, "request_id": request["request_id"], "result": "Surveyed: 3 crates." }),
    )
    .await;
    let r = within("TaskOutput", c.ok("tool/call", call("TaskOutput", json!({ "task_id": "job_1" })))).await;
    assert!(text(&r).contains("Surveyed: 3 crates.") && text(&r).contains("exited with code 0"), "{r}");
    let r = c.request("session/get", json!({ "session_id": child })).await;
    assert_eq!(r["error"]["code"], -32001, "the child closed with its work: {r}");

    // TaskStop ends one, and its child session with it.
    let r = within("Task", c.ok("tool/call", call("Agent", background))).await;
    assert!(text(&r).contains("agentId: job_2"), "{r}");
    let request = until(&mut events, |e| e["type"] == "agent/request").await.pop().unwrap();
    let child = request["child_session_id"].as_str().unwrap().to_owned();
    let r = within("TaskStop", c.ok("tool/call", call("TaskStop", json!({ "task_id": "job_2" })))).await;
    assert!(text(&r).contains("Successfully stopped task: job_2"), "{r}");
    let r = c.request("session/get", json!({ "session_id": child })).await;
    assert_eq!(r["error"]["code"], -32001, "{r}");
    let r = c
        .request("agent/respond", json!({ "session_id": sid, "request_id": request["request_id"], "result": "late" }))
        .await;
    assert_eq!(r["error"]["code"], -32602, "the stopped agent's request is closed: {r}");

    // Without a client that runs agents, nothing starts.
    drop(events);
    let plain = c.session(json!({ "cwd": d.dir.path() })).await;
    let r = c.tool(&plain, "Task", json!({ "description": "d", "prompt": "p", "run_in_background": true })).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(c.ok("session/get", json!({ "session_id": plain })).await["jobs"].as_array().is_none_or(|j| j.is_empty()));
}

/// Agent as Claude Code 2.1.332 takes it: in the background unless asked
/// otherwise, its end a `task/notification` with its result; a `name`
/// that SendMessage reaches while it runs and TaskStop stops it by; 20 at
/// once; `mode` accepted and ignored.
#[tokio::test]
async fn an_agent_runs_in_the_background_by_default_is_named_notifies_and_is_capped() {
    let d = TestDaemon::start().await;
    let (mut c, sid, mut events) = parent(&d).await;
    let text = |r: &Value| r["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    let input = json!({ "description": "survey", "prompt": "Survey it.", "name": "surveyor", "mode": "plan" });
    let r = within("Agent", c.tool(&sid, "Agent", input)).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).starts_with("Async agent launched successfully.") && text(&r).contains("to: 'surveyor'"), "{r}");
    let request = until(&mut events, |e| e["type"] == "agent/request").await.pop().unwrap();
    let child = request["child_session_id"].as_str().unwrap().to_owned();
    // Addressable by its name while it runs.
    let r = c.tool(&sid, "SendMessage", json!({ "to": "surveyor", "message": "also look at tests/" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let mut child_events = agentd_tests::EventStream::open(&d.socket, &child, Some(0)).await.unwrap();
    let got = within("the message", child_events.until(|e| e["type"] == "message/received")).await;
    assert_eq!(got.last().unwrap()["message"], "also look at tests/");
    c.ok("agent/respond", json!({ "session_id": sid, "request_id": request["request_id"], "result": "3 crates <ok>" }))
        .await;
    let done = until(&mut events, |e| e["type"] == "task/notification").await.pop().unwrap();
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["task_type"], "local_agent");
    let said = done["text"].as_str().unwrap();
    assert!(said.contains("<summary>Agent \"survey\" finished</summary>"), "{said}");
    assert!(said.contains("<result>3 crates &lt;ok&gt;"), "{said}");

    // TaskStop by name.
    let input = json!({ "description": "second", "prompt": "p", "name": "second" });
    within("Agent", c.tool(&sid, "Agent", input)).await;
    until(&mut events, |e| e["type"] == "agent/request").await;
    let r = c.tool(&sid, "TaskStop", json!({ "task_id": "second" })).await;
    assert!(r["is_error"] == false && text(&r).contains("Successfully stopped task"), "{r}");
    let stopped = until(&mut events, |e| e["type"] == "task/notification").await.pop().unwrap();
    assert_eq!(stopped["status"], "killed", "{stopped}");

    // Bad names are refused before anything starts.
    for bad in ["main", "-x", "job_1", "a b", &"x".repeat(65)] {
        let r = c.tool(&sid, "Agent", json!({ "description": "d", "prompt": "p", "name": bad })).await;
        assert!(r["is_error"] == true && text(&r).contains("name"), "{bad}: {r}");
    }
    // 20 at once; the 21st is refused in 2.1.332's words.
    for i in 0..20 {
        let r = c.tool(&sid, "Agent", json!({ "description": format!("w{i}"), "prompt": "wait" })).await;
        assert_eq!(r["is_error"], false, "{i}: {r}");
    }
    let r = c.tool(&sid, "Agent", json!({ "description": "one more", "prompt": "wait" })).await;
    let all = r.to_string();
    assert!(all.contains("Concurrent subagent limit reached. You can run 20 subagents at once."), "{r}");
}

/// `isolation: "worktree"`: the sub-agent's child session works in a new
/// worktree of the repository; what it writes stays there, and the result
/// says where.
#[tokio::test]
async fn an_isolated_agent_works_in_a_worktree_of_its_own() {
    let d = TestDaemon::start().await;
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
            .args(args)
            .current_dir(d.dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q"]);
    std::fs::write(d.dir.path().join("a.txt"), "a\n").unwrap();
    git(&["add", "a.txt"]);
    git(&["commit", "-qm", "one"]);
    let mut c = d.raw().await;
    // A new worktree asks, as EnterWorktree does: allowed by a rule here.
    let params = json!({ "cwd": d.dir.path(), "mode": "accept_edits", "permissions": { "allow": ["Agent"] } });
    let sid = c.session(params).await;
    let mut events = runner(&d, &sid).await;
    let input =
        json!({ "description": "iso", "prompt": "Write b.", "isolation": "worktree", "run_in_background": false });
    let turn = c
        .ok("turn/submit", json!({ "session_id": sid, "tool_uses": [tool_use("w", "Agent", input)], "end": true }))
        .await["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let request = until(&mut events, |e| e["type"] == "agent/request").await.pop().unwrap();
    let child = request["child_session_id"].as_str().unwrap().to_owned();
    let info = c.ok("session/get", json!({ "session_id": child })).await;
    let cwd = info["cwd"].as_str().unwrap().to_owned();
    assert!(cwd.contains(".claude/worktrees/agent-"), "{info}");
    let r = c.tool(&child, "Write", json!({ "file_path": "b.txt", "content": "b\n" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    c.ok("agent/respond", json!({ "session_id": sid, "request_id": request["request_id"], "result": "wrote b" })).await;
    let done = until(&mut events, |e| e["type"] == "tool/result" && e["turn_id"] == turn.as_str()).await.pop().unwrap();
    let text = done["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("wrote b\nworktreePath: ") && text.contains("worktreeBranch: worktree/agent-"), "{done}");
    assert!(std::path::Path::new(&cwd).join("b.txt").exists(), "written in the worktree");
    assert!(!d.dir.path().join("b.txt").exists(), "the checkout is left alone");

    // One that changes nothing: its worktree and branch go, as in 2.1.332.
    let input =
        json!({ "description": "look", "prompt": "Look.", "isolation": "worktree", "run_in_background": false });
    let turn = c
        .ok("turn/submit", json!({ "session_id": sid, "tool_uses": [tool_use("l", "Agent", input)], "end": true }))
        .await["turn_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let request = until(&mut events, |e| e["type"] == "agent/request").await.pop().unwrap();
    let child = request["child_session_id"].as_str().unwrap().to_owned();
    let looked = c.ok("session/get", json!({ "session_id": child })).await["cwd"].as_str().unwrap().to_owned();
    c.ok("agent/respond", json!({ "session_id": sid, "request_id": request["request_id"], "result": "looked" })).await;
    let done = until(&mut events, |e| e["type"] == "tool/result" && e["turn_id"] == turn.as_str()).await.pop().unwrap();
    let text = done["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("it changed nothing in its worktree: Removed the worktree"), "{done}");
    assert!(!std::path::Path::new(&looked).exists(), "{looked}");
}
