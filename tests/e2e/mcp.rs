//! MCP servers through the real socket, with real servers: the reference
//! filesystem server (npm) and a server written with the official Python
//! SDK (`tests/mcp/test_server.py`) that can misbehave on purpose.
//!
//! `.ci/run` installs both and sets `AGENTD_TEST_MCP_PYTHON` (a Python with
//! the `mcp` package) and `AGENTD_TEST_MCP_FS` (the filesystem server's
//! executable). Without them these tests say so and pass, except under CI,
//! where a missing server is a failure.

use std::path::Path;

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, agentctl, eventually, none_left, tool_use, within};
use serde_json::{Value, json};

use super::mcp_support::{bridge_client, call, conformance, py_entry, required, rt, session, test_server, text};

async fn load(c: &mut RawConn, sid: &str, names: &[&str]) {
    let query = format!("select:{}", names.join(","));
    let r = call(c, sid, "ToolSearch", json!({ "query": query })).await;
    assert_eq!(r["is_error"], false, "{r}");
}

#[test]
fn the_filesystem_server_is_deferred_loaded_called_denied_and_left_nothing() {
    let Some(fs) = required("AGENTD_TEST_MCP_FS") else { return };
    let mut d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let work_path = std::fs::canonicalize(work.path()).unwrap();
    std::fs::write(work_path.join("notes.txt"), "the filesystem server read this\n").unwrap();
    let entry = json!({ "fs": { "command": fs, "args": [work_path] } });
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let created = session(&mut c, &work_path, json!({ "mcp_servers": entry, "permissions": { "allow": ["mcp__fs"] } }))
            .await;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        assert_eq!(created["session"]["mcp"][0]["state"], "running", "{created}");
        let list = c.ok("tools/list", json!({ "session_id": sid })).await;
        let deferred: Vec<&str> = list["deferred"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
        assert!(deferred.contains(&"mcp__fs__read_text_file"), "{deferred:?}");
        assert!(deferred.contains(&"ListMcpResources") && deferred.contains(&"ReadMcpResource"), "{deferred:?}");
        let listed: Vec<&str> = list["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
        assert!(!listed.iter().any(|n| n.starts_with("mcp__")), "MCP tools are only deferred names: {listed:?}");
        assert!(listed.contains(&"ToolSearch"));

        // What deferral saves with a real server.
        let full = session(&mut c, &work_path, json!({ "mcp_servers": entry, "tools": { "defer": { "mode": "never" } } }))
            .await;
        let full_sid = full["session_id"].as_str().unwrap();
        let all = c.ok("tools/list", json!({ "session_id": full_sid })).await;
        let (with, without) = (list["estimated_tokens"].as_u64().unwrap(), all["estimated_tokens"].as_u64().unwrap());
        assert!(with < without, "deferred {with} < full {without}");
        eprintln!(
            "filesystem server: {} tools; tools/list {without} tokens in full, {with} deferred ({} saved)",
            deferred.len() - 2,
            list["deferred_tokens_saved"]
        );

        // ToolSearch loads one; a turn calls it and gets the file.
        load(&mut c, &sid, &["mcp__fs__read_text_file"]).await;
        let mut events = EventStream::open(&d.socket, &sid, None).await.unwrap();
        let file = work_path.join("notes.txt");
        let turn = c
            .ok(
                "turn/submit",
                json!({ "session_id": sid, "tool_uses": [tool_use("r", "mcp__fs__read_text_file", json!({ "path": file }))], "end": true }),
            )
            .await;
        let done = events.until_turn_done(turn["turn_id"].as_str().unwrap()).await;
        let result = done.iter().find(|e| e["type"] == "tool/result").unwrap();
        assert_eq!(result["is_error"], false, "{result}");
        assert!(text(result).contains("the filesystem server read this"), "{result}");

        // A deny rule on the server removes every one of its tools.
        let denied = session(&mut c, &work_path, json!({ "mcp_servers": entry, "permissions": { "deny": ["mcp__fs"] } }))
            .await;
        let denied_list = c.ok("tools/list", json!({ "session_id": denied["session_id"] })).await;
        let everything = denied_list.to_string();
        assert!(!everything.contains("mcp__fs__"), "{everything}");

        let pool = c.ok("mcp/list", json!({})).await;
        assert_eq!(pool["servers"].as_array().unwrap().len(), 1, "one process for three sessions: {pool}");
        assert_eq!(pool["servers"][0]["sessions"], 3);
        assert_eq!(pool["servers"][0]["starts"], 1);
        for s in [&sid, &full_sid.to_owned(), &denied["session_id"].as_str().unwrap().to_owned()] {
            c.ok("session/close", json!({ "session_id": s })).await;
        }
        // The last session closed: the server stops.
        none_left(&fs.display().to_string()).await;
    });
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.wait_exit();
}

#[test]
fn progress_errors_crashes_hangs_and_garbage_end_as_results() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let starts = work.path().join("starts");
    let entry = json!({ "t": py_entry(&python, &[], json!({ "MCP_TEST_STARTS": starts })) });
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let created = session(
            &mut c,
            work.path(),
            json!({ "mcp_servers": entry, "mode": "bypass", "mcp_tool_timeout_ms": 1500, "tools": { "defer": { "mode": "never" } } }),
        )
        .await;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        assert_eq!(created["session"]["mcp"][0]["tools"], 22, "{created}");
        // The server's annotations as it gave them, MCP's defaults where none.
        let listed = c.ok("tools/list", json!({ "session_id": sid, "hints": true })).await;
        let hints = &listed["hints"];
        assert_eq!(
            hints["mcp__t__hinted"],
            json!({"read_only": false, "destructive": false, "idempotent": true, "open_world": false}),
            "{listed}"
        );
        assert_eq!(
            hints["mcp__t__add"],
            json!({"read_only": false, "destructive": true, "idempotent": false, "open_world": true}),
            "{listed}"
        );
        assert_eq!(hints["mcp__t__echo"]["read_only"], true);

        let r = call(&mut c, &sid, "mcp__t__add", json!({ "a": 2, "b": 40 })).await;
        assert_eq!((r["is_error"].clone(), text(&r)), (json!(false), "42".to_owned()), "{r}");

        // Progress arrives as tool/progress, ahead of the result.
        let mut events = EventStream::open(&d.socket, &sid, None).await.unwrap();
        let turn = c
            .ok(
                "turn/submit",
                json!({ "session_id": sid, "tool_uses": [tool_use("s", "mcp__t__slow", json!({ "steps": 3, "delay_ms": 50 }))], "end": true }),
            )
            .await;
        let done = events.until_turn_done(turn["turn_id"].as_str().unwrap()).await;
        let progress: Vec<&Value> = done.iter().filter(|e| e["type"] == "tool/progress").collect();
        assert_eq!(progress.len(), 3, "{done:?}");
        assert!(progress.iter().any(|p| p["render"] == "step 3 of 3"), "{progress:?}");
        let result = done.iter().find(|e| e["type"] == "tool/result").unwrap();
        assert_eq!(text(result), "done after 3 steps");
        // The last progress right before the result is delivered too, and
        // before it (rmcp handles notifications in tasks of their own).
        for round in 0..40 {
            let id = format!("q{round}");
            let uses = [tool_use(&id, "mcp__t__slow", json!({ "steps": 4, "delay_ms": 0 }))];
            let turn = c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await;
            let done = events.until_turn_done(turn["turn_id"].as_str().unwrap()).await;
            let at = |kind: &str| done.iter().position(|e| e["type"] == kind && e["tool_use_id"] == json!(id));
            let renders: Vec<&Value> =
                done.iter().filter(|e| e["type"] == "tool/progress").map(|e| &e["render"]).collect();
            assert_eq!(renders.len(), 4, "round {round}: {done:?}");
            assert_eq!(renders[3], "step 4 of 4", "round {round}: {renders:?}");
            let last_progress = done.iter().rposition(|e| e["type"] == "tool/progress").unwrap();
            assert!(at("tool/result").unwrap() > last_progress, "round {round}: progress after the result: {done:?}");
        }

        // A tool that raises: an error result with the server's message.
        let r = call(&mut c, &sid, "mcp__t__fails", json!({})).await;
        assert_eq!(r["is_error"], true);
        assert!(text(&r).contains("on purpose"), "{r}");

        // Garbage on stdout is skipped; the answer still arrives.
        let r = call(&mut c, &sid, "mcp__t__garbage", json!({})).await;
        assert_eq!(text(&r), "answered after the garbage", "{r}");

        // A hang ends at the session's timeout with an error result.
        let r = call(&mut c, &sid, "mcp__t__hang", json!({ "tag": "x" })).await;
        assert_eq!(r["is_error"], true);
        assert!(text(&r).contains("did not answer within 1.5 s") && text(&r).contains("MCP server t"), "{r}");

        // The server crashes mid-call: an error result naming the server
        // and how it ended; the next call starts it again and works.
        let r = call(&mut c, &sid, "mcp__t__crash", json!({ "delay_ms": 50 })).await;
        assert_eq!(r["is_error"], true);
        assert!(text(&r).contains("MCP server t stopped") && text(&r).contains("status 7"), "{r}");
        let info = c.ok("session/get", json!({ "session_id": sid })).await;
        assert_eq!(info["mcp"][0]["state"], "failed", "{info}");
        assert!(info["mcp"][0]["last_error"].as_str().unwrap().contains("status 7"), "{info}");
        let r = call(&mut c, &sid, "mcp__t__echo", json!({ "text": "back" })).await;
        assert_eq!(text(&r), "back", "{r}");
        let info = c.ok("session/get", json!({ "session_id": sid })).await;
        assert_eq!(info["mcp"][0]["state"], "running", "{info}");
        assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 2, "started twice");

        // Cancelling a turn ends a hanging call at once.
        let turn = c
            .ok(
                "turn/submit",
                json!({ "session_id": sid, "tool_uses": [tool_use("h", "mcp__t__hang", json!({ "tag": "y" }))], "end": true }),
            )
            .await;
        let turn_id = turn["turn_id"].as_str().unwrap().to_owned();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        c.ok("turn/cancel", json!({ "session_id": sid, "turn_id": turn_id })).await;
        let done = events.until_turn_done(&turn_id).await;
        let result = done.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == "h").unwrap();
        assert_eq!(result["is_error"], true, "{result}");
        let r = call(&mut c, &sid, "mcp__t__echo", json!({ "text": "still fine" })).await;
        assert_eq!(text(&r), "still fine");

        // Resources.
        let r = call(&mut c, &sid, "ListMcpResources", json!({})).await;
        assert!(text(&r).contains("note://hello") && text(&r).contains("\"server\":\"t\""), "{r}");
        let r = call(&mut c, &sid, "ReadMcpResource", json!({ "server": "t", "uri": "note://hello" })).await;
        assert!(text(&r).contains("hello from the test server"), "{r}");
        // Bytes are kept as a file of the call, as a tool result's are.
        let r = call(&mut c, &sid, "ReadMcpResource", json!({ "server": "t", "uri": "note://logo" })).await;
        let said = text(&r);
        let file = said.split(" saved to ").nth(1).and_then(|rest| rest.split(']').next()).unwrap_or_else(|| panic!("{r}"));
        assert_eq!(std::fs::read(file).unwrap(), b"\x89PNG-test-logo", "{r}");
        let r = call(&mut c, &sid, "ReadMcpResource", json!({ "server": "nope", "uri": "note://hello" })).await;
        assert_eq!(r["is_error"], true);
        assert!(text(&r).contains("no MCP server named \"nope\""), "{r}");
    });
}

#[test]
fn bad_servers_and_entries_are_reported_and_harm_no_one_else() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let servers = json!({
            "good": py_entry(&python, &[], json!({})),
            "broken": py_entry(&python, &["--fail-start"], json!({})),
            "odd": py_entry(&python, &["--bad-schema", "--bad-name"], json!({})),
            "bad name": { "command": "true" },
            "a__b": { "command": "true" },
            "nocmd": { "args": ["x"] },
            "unset": { "command": "${AGENTD_TEST_SURELY_UNSET}" },
            "missing": { "command": "/nonexistent/mcp-server" },
            "noisy": py_entry(&python, &[], json!({ "MCP_TEST_NOISY": "1" })),
        });
        let created = session(
            &mut c,
            work.path(),
            json!({ "mcp_servers": servers, "mode": "bypass", "tools": { "defer": { "mode": "never" } } }),
        )
        .await;
        let info = &created["session"];
        let errors = info["mcp_errors"].to_string();
        for needle in ["bad name", "a__b", "needs `command`", "AGENTD_TEST_SURELY_UNSET"] {
            assert!(errors.contains(needle), "{needle} in {errors}");
        }
        let by_name = |name: &str| info["mcp"].as_array().unwrap().iter().find(|s| s["name"] == name).cloned().unwrap();
        assert_eq!(by_name("good")["state"], "running");
        assert_eq!(by_name("broken")["state"], "failed");
        let why = by_name("broken")["last_error"].as_str().unwrap().to_owned();
        assert!(why.contains("status 3") && why.contains("refusing to start"), "{why}");
        assert!(by_name("missing")["last_error"].as_str().unwrap().contains("cannot start"), "{info}");

        let sid = created["session_id"].as_str().unwrap();
        let list = c.ok("tools/list", json!({ "session_id": sid })).await.to_string();
        assert!(list.contains("mcp__odd__echo") && !list.contains("mcp__odd__odd") && !list.contains("bad name!"));
        let r = call(&mut c, sid, "mcp__odd__odd", json!({ "x": 1 })).await;
        assert_eq!(r["is_error"], true);
        assert!(text(&r).contains("MCP server odd") && text(&r).contains("integral"), "{r}");
        let r = call(&mut c, sid, "mcp__good__echo", json!({ "text": "unaffected" })).await;
        assert_eq!(text(&r), "unaffected");
        // Bytes that are not UTF-8 and an endless line on stderr: the
        // server keeps working (its stderr is drained in bounded pieces).
        for _ in 0..2 {
            let r = call(&mut c, sid, "mcp__noisy__echo", json!({ "text": "still here" })).await;
            assert_eq!(text(&r), "still here", "{r}");
        }
        // The failed server is tried again by a call that needs it, and
        // fails the same way (an error result, not a hang).
        let r = call(&mut c, sid, "ListMcpResources", json!({ "server": "broken" })).await;
        assert_eq!(r["is_error"], true);
        assert!(text(&r).contains("refusing to start"), "{r}");
        // Bad input for session/create itself is refused, naming the field.
        let r = c.request("session/create", json!({ "cwd": work.path(), "mcp_tool_timeout_ms": 5 })).await;
        assert!(r["error"]["message"].as_str().unwrap().contains("mcp_tool_timeout_ms"), "{r}");
    });
    assert_eq!(d.stderr().matches("MCP server broken failed to start").count(), 2, "said once per attempt");
}

#[test]
fn project_servers_need_enabling_expand_variables_and_get_no_daemon_secrets() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let config = tempfile::tempdir().unwrap();
    let starts = config.path().join("starts");
    let d = StandaloneDaemon::start(
        &[],
        &[
            ("XDG_CONFIG_HOME", config.path().to_str().unwrap()),
            ("AGENTD_TEST_DAEMON_SECRET", "hunter2"),
            ("AGENTD_TEST_GREETING", "hello from the daemon's environment"),
        ],
    );
    let work = tempfile::tempdir().unwrap();
    let project = json!({ "mcpServers": { "proj": py_entry(&python, &[], json!({
        "GREETING": "${AGENTD_TEST_GREETING}",
        "FALLBACK": "${AGENTD_TEST_NOT_SET:-fell back}",
        "MCP_TEST_STARTS": starts,
    })) } });
    std::fs::write(work.path().join(".mcp.json"), project.to_string()).unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let off = session(&mut c, work.path(), json!({})).await;
        assert_eq!(off["session"]["mcp"], json!([]), "a repository's .mcp.json starts nothing by itself");
        assert!(!starts.exists());

        let on = session(&mut c, work.path(), json!({ "enable_project_mcp": true, "mode": "bypass" })).await;
        assert_eq!(on["session"]["mcp"][0]["source"], "project");
        let sid = on["session_id"].as_str().unwrap();
        load(&mut c, sid, &["mcp__proj__env"]).await;
        let env = |name: &str| json!({ "name": name });
        let r = call(&mut c, sid, "mcp__proj__env", env("GREETING")).await;
        assert_eq!(text(&r), "hello from the daemon's environment");
        let r = call(&mut c, sid, "mcp__proj__env", env("FALLBACK")).await;
        assert_eq!(text(&r), "fell back");
        let r = call(&mut c, sid, "mcp__proj__env", env("AGENTD_TEST_DAEMON_SECRET")).await;
        assert_eq!(text(&r), "<unset>", "the daemon's environment is not the server's");
        let r = call(&mut c, sid, "mcp__proj__env", env("PATH")).await;
        assert_ne!(text(&r), "<unset>");
        load(&mut c, sid, &["mcp__proj__whoami"]).await;
        let r = call(&mut c, sid, "mcp__proj__whoami", json!({})).await;
        let cwd = std::fs::canonicalize(work.path()).unwrap();
        assert!(text(&r).ends_with(&cwd.display().to_string()), "runs in the workspace: {r}");

        // The user's settings enable a project's server by name for that
        // workspace only: a name enabled everywhere would run any
        // repository's server of that name.
        std::fs::create_dir_all(config.path().join("agentd")).unwrap();
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join(".mcp.json"), project.to_string()).unwrap();
        let settings = |v: Value| std::fs::write(config.path().join("agentd/settings.json"), v.to_string()).unwrap();
        settings(json!({ "enabledMcpjsonServers": ["proj"] }));
        let global = session(&mut c, work.path(), json!({})).await;
        assert_eq!(
            global["session"]["mcp"],
            json!([]),
            "a name enabled for no workspace in particular enables nothing"
        );
        settings(json!({ "projects": { cwd.display().to_string(): { "enabledMcpjsonServers": ["proj"] } } }));
        let by_user = session(&mut c, work.path(), json!({})).await;
        assert_eq!(by_user["session"]["mcp"][0]["name"], "proj", "{by_user}");
        let elsewhere = session(&mut c, other.path(), json!({})).await;
        assert_eq!(elsewhere["session"]["mcp"], json!([]), "not another repository's server of that name");

        // A project's server never replaces the user's of the same name;
        // the user's runs in the home directory, not the workspace.
        settings(
            json!({ "enableAllProjectMcpServers": true, "mcpServers": { "proj": py_entry(&python, &[], json!({})) } }),
        );
        let mine = session(&mut c, work.path(), json!({ "mode": "bypass" })).await;
        assert_eq!(mine["session"]["mcp"][0]["source"], "user", "{mine}");
        assert!(mine["session"]["mcp_errors"].to_string().contains("is ignored"), "{mine}");
        let sid = mine["session_id"].as_str().unwrap();
        load(&mut c, sid, &["mcp__proj__whoami"]).await;
        let r = call(&mut c, sid, "mcp__proj__whoami", json!({})).await;
        let home = std::env::var("HOME").unwrap_or_else(|_| "/".into());
        assert!(text(&r).ends_with(&format!(" {home}")), "in the home directory, not the workspace: {r}");

        // … and the user's settings disable a project's server even when
        // the session asks.
        settings(json!({ "enableAllProjectMcpServers": true, "disabledMcpjsonServers": ["proj"] }));
        let disabled = session(&mut c, work.path(), json!({ "enable_project_mcp": true })).await;
        assert_eq!(disabled["session"]["mcp"], json!([]));
    });
}

#[test]
fn streamable_http_servers_work_with_headers() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = agentd_tests::ChildGuard::spawn(
        std::process::Command::new(&python).arg(test_server()).arg("--http").arg(port.to_string()),
    );
    agentd_tests::eventually_blocking("the HTTP server listens", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    let d = StandaloneDaemon::start(&[], &[("AGENTD_TEST_TOKEN", "t0ken")]);
    let work = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let entry = json!({ "web": { "type": "http", "url": url, "headers": { "Authorization": "Bearer ${AGENTD_TEST_TOKEN}" } } });
        let created = session(&mut c, work.path(), json!({ "mcp_servers": entry, "mode": "bypass" })).await;
        assert_eq!(created["session"]["mcp"][0]["transport"], "http");
        assert_eq!(created["session"]["mcp"][0]["state"], "running", "{created}");
        let sid = created["session_id"].as_str().unwrap();
        load(&mut c, sid, &["mcp__web__echo"]).await;
        let r = call(&mut c, sid, "mcp__web__echo", json!({ "text": "over http" })).await;
        assert_eq!(text(&r), "over http", "{r}");
        let (code, out, _) = agentctl(&d.socket, &["mcp", "list"]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("web") && out.contains("running") && out.contains("http"), "{out}");
    });
    let _ = server.0.kill();
}

#[test]
fn a_daemon_stop_ends_every_server_and_a_restart_knows_their_tools_without_starting_them() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let work = tempfile::tempdir().unwrap();
    let starts = work.path().join("starts");
    let marker = format!("agentd-test-{}", std::process::id());
    let entry = json!({ "t": py_entry(&python, &[&marker], json!({ "MCP_TEST_STARTS": starts })) });
    let mut d = StandaloneDaemon::start(&[], &[]);
    let sid = rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let created = session(&mut c, work.path(), json!({ "mcp_servers": entry, "mode": "bypass" })).await;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        eventually("the server runs", || !agentd_tests::procs(&marker).is_empty()).await;
        sid
    });
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.wait_exit();
    rt().block_on(none_left(&marker));
    assert_eq!(std::fs::read_to_string(&starts).unwrap().lines().count(), 1);

    d.restart();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let list = c.ok("tools/list", json!({ "session_id": sid })).await;
        assert!(list["deferred"].to_string().contains("mcp__t__echo"), "known from the last run: {list}");
        assert!(agentd_tests::procs(&marker).is_empty(), "nothing started to list them");
        load(&mut c, &sid, &["mcp__t__echo"]).await;
        let r = call(&mut c, &sid, "mcp__t__echo", json!({ "text": "after restart" })).await;
        assert_eq!(text(&r), "after restart", "{r}");
        c.ok("session/close", json!({ "session_id": sid })).await;
        none_left(&marker).await;
    });
}

#[test]
fn a_repository_cannot_approve_mcp_tools_and_server_rules_bind_the_resource_tools() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join(".claude")).unwrap();
    let repo_rules = json!({ "permissions": { "allow": ["mcp__t", "mcp__t__echo", "ReadMcpResource", "Read"] } });
    std::fs::write(work.path().join(".claude/settings.json"), repo_rules.to_string()).unwrap();
    // A protected name that links elsewhere protects where it links.
    std::fs::create_dir(work.path().join("cfg")).unwrap();
    std::fs::write(work.path().join("cfg/mcp.json"), "{\"mcpServers\": {}}").unwrap();
    std::os::unix::fs::symlink("cfg/mcp.json", work.path().join(".mcp.json")).unwrap();
    let entry = json!({ "t": py_entry(&python, &[], json!({})) });
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let quick =
            json!({ "mcp_servers": entry, "permission_timeout_ms": 10, "tools": { "defer": { "mode": "never" } } });
        let created = session(&mut c, work.path(), quick.clone()).await;
        let errors = created["session"]["rule_errors"].to_string();
        assert!(errors.contains("cannot allow MCP tools") && errors.contains("mcp__t__echo"), "{errors}");
        assert!(!errors.contains("\"Read\""), "other rules of the file still count: {errors}");
        let sid = created["session_id"].as_str().unwrap();
        let r = call(&mut c, sid, "mcp__t__echo", json!({ "text": "unasked" })).await;
        assert_eq!(r["is_error"], true, "asked, and nobody answered: {r}");
        let r = call(&mut c, sid, "ReadMcpResource", json!({ "server": "t", "uri": "note://hello" })).await;
        assert_eq!(r["is_error"], true, "asked, and nobody answered: {r}");

        // Writing the file `.mcp.json` links to is writing `.mcp.json`.
        let mut edits = quick.clone();
        edits["mode"] = json!("accept_edits");
        let sid = session(&mut c, work.path(), edits).await["session_id"].as_str().unwrap().to_owned();
        let target = work.path().join("cfg/mcp.json");
        call(&mut c, &sid, "Read", json!({ "file_path": target })).await;
        let r = call(
            &mut c,
            &sid,
            "Write",
            json!({ "file_path": target, "content": "{\"mcpServers\": {\"x\": {\"command\": \"sh\"}}}" }),
        )
        .await;
        assert_eq!(r["is_error"], true, "{r}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "{\"mcpServers\": {}}");

        // The user's (here the session's) rules for the server bind the
        // resource tools too.
        let mut denied = quick.clone();
        denied["permissions"] = json!({ "deny": ["mcp__t__*"] });
        let sid = session(&mut c, work.path(), denied).await["session_id"].as_str().unwrap().to_owned();
        let r = call(&mut c, &sid, "ListMcpResources", json!({})).await;
        assert!(!text(&r).contains("note://hello"), "{r}");
        let r = call(&mut c, &sid, "ReadMcpResource", json!({ "server": "t", "uri": "note://hello" })).await;
        assert!(r["is_error"] == true && text(&r).contains("denied"), "{r}");
        let mut allowed = quick.clone();
        allowed["permissions"] = json!({ "allow": ["mcp__t"] });
        let sid = session(&mut c, work.path(), allowed).await["session_id"].as_str().unwrap().to_owned();
        let r = call(&mut c, &sid, "ReadMcpResource", json!({ "server": "t", "uri": "note://hello" })).await;
        assert!(text(&r).contains("hello from the test server"), "{r}");
        let r = call(&mut c, &sid, "mcp__t__echo", json!({ "text": "allowed by the user" })).await;
        assert_eq!(text(&r), "allowed by the user", "{r}");
    });
}

#[test]
fn agentctl_mcp_serves_a_session_to_the_python_sdk_client() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(work.path()).unwrap();
    std::fs::write(ws.join("hello.txt"), "hello through MCP\n").unwrap();
    std::fs::write(ws.join("hay.txt"), "hay\na needle\n").unwrap();

    let seen = bridge_client(&python, &d.socket, &ws, &["basic"]);
    let tools: Vec<&str> = seen[0]["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for t in ["Bash", "Edit", "Glob", "Grep", "Read", "Write"] {
        assert!(tools.contains(&t), "{tools:?}");
    }
    assert_eq!(
        (seen[0]["read_only"]["Read"].clone(), seen[0]["read_only"]["Bash"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(seen[1]["is_error"], false);
    assert!(seen[1]["text"].as_str().unwrap().contains("hello through MCP"), "{:?}", seen[1]);
    assert!(seen[2]["text"].as_str().unwrap().contains("a needle"), "{:?}", seen[2]);
    assert_eq!(seen[3]["text"], "step1\nstep2\nstep3\n");
    assert_eq!(seen[3]["progress"], json!(["step1", "step2", "step3"]), "progress as MCP progress notifications");
    // A tool the session does not have is the request's error, as MCP
    // wants it: -32602, "Unknown tool".
    assert_eq!(seen[4]["error"], -32602, "{:?}", seen[4]);
    assert!(seen[4]["text"].as_str().unwrap().contains("Unknown tool: NoSuchTool"), "{:?}", seen[4]);

    // Cancelling the MCP request cancels the call: its process ends.
    let tag = agentd_tests::tag();
    let seen = bridge_client(&python, &d.socket, &ws, &["cancel", &tag]);
    assert!(seen[0]["cancelled_after"].as_f64().unwrap() < 10.0);
    assert_eq!(seen[1]["after"], "alive\n");
    rt().block_on(none_left(&format!("sleep {tag}")));

    // A call that needs approval is an elicitation; its answer decides.
    let yes = ws.join("yes.txt");
    let seen = bridge_client(&python, &d.socket, &ws, &["elicit", "accept", yes.to_str().unwrap()]);
    assert_eq!(seen[0]["is_error"], false, "{:?}", seen[0]);
    assert!(seen[0]["asked"][0].as_str().unwrap().contains("Write"), "{:?}", seen[0]);
    assert_eq!(std::fs::read_to_string(&yes).unwrap(), "written through MCP\n");
    let no = ws.join("no.txt");
    let seen = bridge_client(&python, &d.socket, &ws, &["elicit", "decline", no.to_str().unwrap()]);
    assert_eq!(seen[0]["is_error"], true);
    assert!(!no.exists());
    // A client that cannot ask: refused, saying how to allow it.
    let seen = bridge_client(&python, &d.socket, &ws, &["no-elicit", no.to_str().unwrap()]);
    assert_eq!(seen[0]["is_error"], true);
    assert!(seen[0]["text"].as_str().unwrap().contains("--allow"), "{:?}", seen[0]);
    assert!(!no.exists());

    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        // Every session a bridge opened was closed when its client went.
        eventually_sessions(&mut c, 0).await;
        // A bridge attached to an existing session leaves it open.
        let sid = session(&mut c, &ws, json!({})).await["session_id"].as_str().unwrap().to_owned();
        let seen = bridge_client(&python, &d.socket, &ws, &["attach", &sid]);
        assert!(seen[0]["text"].as_str().unwrap().contains("hello through MCP"));
        eventually_sessions(&mut c, 1).await;
    });

    // README's mcpServers entry, as written there.
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let line = readme.lines().find(|l| l.contains("\"mcpServers\": { \"agentd\"")).expect("README's mcpServers line");
    let entry: Value = serde_json::from_str(line).unwrap();
    assert_eq!(entry["mcpServers"]["agentd"]["command"], "agentctl");
    let args = entry["mcpServers"]["agentd"]["args"].to_string().replace("/path/to/project", ws.to_str().unwrap());
    let seen = bridge_client(&python, &d.socket, &ws, &["readme", &args]);
    assert!(seen[0]["text"].as_str().unwrap().contains("hello through MCP"), "{:?}", seen[0]);
    assert!(readme.contains("claude mcp add agentd -- agentctl mcp --cwd ."));
}

async fn eventually_sessions(c: &mut RawConn, n: usize) {
    let deadline = std::time::Instant::now() + agentd_tests::STEP;
    loop {
        let list = c.ok("session/list", json!({})).await;
        if list["sessions"].as_array().unwrap().len() == n {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{n} sessions expected: {list}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[test]
fn agentctl_mcp_without_a_daemon_says_so_and_bad_messages_get_mcp_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, err) = agentctl(&dir.path().join("none.sock"), &["mcp", "--cwd", "/"]);
    assert_eq!(code, 3, "README's exit code for an unreachable daemon");
    assert!(out.is_empty(), "nothing on stdout, where the MCP client reads: {out}");
    assert!(err.contains("not running"), "{err}");

    let d = StandaloneDaemon::start(&[], &[]);
    let (mut child, mut stdin) = bridge(&d.socket, &["--cwd", dir.path().to_str().unwrap()]);
    use std::io::{BufRead, Write};
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 2, "method": "no/such/method"})).unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"arguments": 5}}))
        .unwrap();
    writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})).unwrap();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let mut replies = std::collections::HashMap::new();
    while replies.len() < 4 {
        let line = lines.next().expect("a reply").unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(id) = v["id"].as_i64() {
            replies.insert(id, v);
        }
    }
    assert!(replies[&1]["result"]["serverInfo"]["name"] == "agentd", "{:?}", replies[&1]);
    assert!(replies[&2]["error"]["code"].is_i64(), "{:?}", replies[&2]);
    assert!(replies[&3]["error"]["code"].is_i64(), "{:?}", replies[&3]);
    assert!(replies[&4]["result"]["tools"].as_array().unwrap().len() > 5, "still serving: {:?}", replies[&4]);
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn agentctl_mcp_killed_leaves_no_session_and_no_command() {
    let dir = tempfile::tempdir().unwrap();
    let d = StandaloneDaemon::start(&[], &[]);
    let tag = agentd_tests::tag();
    for signal in [nix::sys::signal::Signal::SIGTERM, nix::sys::signal::Signal::SIGKILL] {
        let (mut child, mut stdin) = bridge(&d.socket, &["--mode", "bypass", "--cwd", dir.path().to_str().unwrap()]);
        use std::io::{BufRead, Write};
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let _ = lines.next().expect("initialize answered");
        writeln!(stdin, "{}", json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).unwrap();
        // Arguments beyond what the daemon takes: an MCP error, still serving.
        let big = "x".repeat(9 << 20);
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "Bash", "arguments": {"command": big}}});
        writeln!(stdin, "{call}").unwrap();
        let reply: Value = serde_json::from_str(&lines.next().expect("a reply").unwrap()).unwrap();
        assert!(reply["error"]["message"].as_str().unwrap_or_default().contains("larger than"), "{reply}");
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "Bash", "arguments": {"command": format!("sleep {tag}")}}});
        writeln!(stdin, "{call}").unwrap();
        agentd_tests::eventually_blocking("the command runs", || {
            !agentd_tests::procs(&format!("sleep {tag}")).is_empty()
        });
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
        let _ = child.wait();
        agentd_tests::eventually_blocking("the command ends", || {
            agentd_tests::procs(&format!("sleep {tag}")).is_empty()
        });
        let (code, out, _) = agentd_tests::agentctl(&d.socket, &["--json", "session", "list"]);
        assert_eq!(code, 0);
        let list: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(list["sessions"], json!([]), "{signal}: {list}");
    }
}

/// `agentctl mcp` with `args` on `socket`, the MCP `initialize` request
/// already sent; its stdout is left to the caller.
fn bridge(socket: &Path, args: &[&str]) -> (std::process::Child, std::process::ChildStdin) {
    use std::io::Write;
    let mut child = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .arg("--socket")
        .arg(socket)
        .arg("mcp")
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    writeln!(stdin, "{init}").unwrap();
    (child, stdin)
}

#[test]
fn servers_get_the_workspace_as_root_their_logs_reach_sessions_and_their_prompts_are_offered() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let levels = work.path().join("levels");
    let entry = json!({ "t": py_entry(&python, &[], json!({ "MCP_TEST_LEVELS": levels })) });
    let options = |level: Option<&str>| {
        let mut o = json!({ "mcp_servers": entry, "mode": "bypass", "tools": { "defer": { "mode": "never" } } });
        if let Some(level) = level {
            o["mcp_log_level"] = json!(level);
        }
        o
    };
    let chatty = rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let chatty =
            session(&mut c, work.path(), options(Some("info"))).await["session_id"].as_str().unwrap().to_owned();
        let quiet = session(&mut c, work.path(), options(None)).await["session_id"].as_str().unwrap().to_owned();

        // Roots: the workspace the pooled server serves.
        let r = call(&mut c, &chatty, "mcp__t__roots", json!({})).await;
        let root = format!("file://{}/", work.path().canonicalize().unwrap().display());
        assert_eq!((r["is_error"].clone(), text(&r)), (json!(false), root), "{r}");

        // Logs: each session gets its levels; the server was asked for the
        // least severe any of them wants.
        let mut chatty_events = EventStream::open(&d.socket, &chatty, None).await.unwrap();
        let mut quiet_events = EventStream::open(&d.socket, &quiet, None).await.unwrap();
        let r = call(&mut c, &chatty, "mcp__t__log", json!({ "message": "m1" })).await;
        assert_eq!(text(&r), "logged", "{r}");
        let logs =
            |events: Vec<Value>| -> Vec<Value> { events.into_iter().filter(|e| e["type"] == "mcp/log").collect() };
        // rmcp hands each notification to a task of its own: messages sent
        // back to back may arrive in any order. Each is waited for.
        let count_logs = |n: usize| {
            let mut seen = 0;
            move |e: &Value| {
                seen += usize::from(e["type"] == "mcp/log");
                seen == n
            }
        };
        let mut got = logs(within("chatty logs", chatty_events.until(count_logs(3))).await);
        got.sort_by_key(|e| ["info", "warning", "error"].iter().position(|l| e["level"] == *l));
        let levels_seen: Vec<&str> = got.iter().map(|e| e["level"].as_str().unwrap()).collect();
        assert_eq!(levels_seen, ["info", "warning", "error"], "{got:?}");
        assert_eq!(got[0]["server"], "t");
        assert_eq!(got[0]["logger"], "test");
        assert_eq!(got[0]["data"], "info: m1");
        assert_eq!(got[2]["data"], json!({"error": "m1", "detail": [1, 2]}));
        let mut got = logs(within("quiet logs", quiet_events.until(count_logs(2))).await);
        got.sort_by_key(|e| ["info", "warning", "error"].iter().position(|l| e["level"] == *l));
        let levels_seen: Vec<&str> = got.iter().map(|e| e["level"].as_str().unwrap()).collect();
        assert_eq!(levels_seen, ["warning", "error"], "{got:?}");
        let asked = std::fs::read_to_string(&levels).unwrap();
        assert_eq!(asked.lines().last(), Some("info"), "{asked}");

        // A flood is cut to the rate, and the next message says how many went.
        let r = call(&mut c, &quiet, "mcp__t__flood", json!({ "count": 3000 })).await;
        assert_eq!(text(&r), "flooded 3000", "{r}");
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        call(&mut c, &quiet, "mcp__t__log", json!({ "message": "after" })).await;
        let got = logs(
            within("after the flood", quiet_events.until(|e| e["type"] == "mcp/log" && e["data"] == "warning: after"))
                .await,
        );
        assert!(got.len() < 200, "{} passed of 3000", got.len());
        let counted: u64 = got.iter().map(|e| e["dropped"].as_u64().unwrap_or(0)).sum();
        assert!(counted > 2500, "dropped counted: {counted}");

        // Prompts: listed as slash commands, filled in, errors said.
        let listed = c.ok("mcp/prompts", json!({ "session_id": chatty })).await;
        let review = listed["prompts"].as_array().unwrap().iter().find(|p| p["name"] == "review").cloned().unwrap();
        assert_eq!(review["command"], "/mcp__t__review", "{listed}");
        assert_eq!(review["title"], "Review a file");
        assert_eq!(review["arguments"][0], json!({"name": "file", "required": true}), "{review}");
        assert_eq!(review["arguments"][1]["required"], false, "{review}");
        let got = c
            .ok(
                "mcp/get_prompt",
                json!({ "session_id": chatty, "server": "t", "name": "review", "arguments": { "file": "a.rs" } }),
            )
            .await;
        assert_eq!(got["messages"][0]["role"], "user", "{got}");
        assert_eq!(got["messages"][0]["content"]["text"], "Review a.rs in a short style.", "{got}");
        let got = c.ok("mcp/get_prompt", json!({ "session_id": chatty, "server": "t", "name": "greet" })).await;
        let roles: Vec<&str> =
            got["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant"], "{got}");
        let missing =
            c.request("mcp/get_prompt", json!({ "session_id": chatty, "server": "t", "name": "review" })).await;
        assert_eq!(missing["error"]["code"], -32008, "{missing}");
        let unknown =
            c.request("mcp/get_prompt", json!({ "session_id": chatty, "server": "nope", "name": "review" })).await;
        assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
        let no_session = c.request("mcp/prompts", json!({ "session_id": "nope" })).await;
        assert_eq!(no_session["error"]["code"], -32001, "{no_session}");
        chatty
    });
    // agentctl lists them and fills one in.
    let (code, out, err) = agentctl(&d.socket, &["mcp", "prompts", "--session", &chatty]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("/mcp__t__review <file> [style]  Review a file"), "{out}");
    let (code, out, err) = agentctl(
        &d.socket,
        &["mcp", "prompt", "--session", &chatty, "t", "review", "--arg", "file=b.rs", "--arg", "style=long"],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out, "user: Review b.rs in a long style.\n", "{out}");
    let (code, _, err) = agentctl(&d.socket, &["mcp", "prompt", "--session", &chatty, "t", "review"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("file"), "{err}");
}

#[test]
fn the_conformance_suites_client_scenarios_that_agentd_declares_pass() {
    // scripts/mcp-conformance.sh runs the official suite (pinned in
    // scripts/lib-conformance.sh and .ci/run) with
    // tests/mcp/conformance_client.py driving a session of a daemon of its
    // own; the scenarios of what agentd does not have
    // (OAuth client id metadata documents and extensions) are left out here
    // and listed in the README. The OAuth ones log in as a user would
    // (mcp/login, the authorization address, mcp/login_complete; a forged
    // state refused first) and log in again when a call needs more scope.
    let Some(tools) = required("AGENTD_TEST_CONFORMANCE") else { return };
    let text = conformance("mcp-conformance.sh", &tools, &["agentd", "agentd-sandbox"], &["--only-declared"]);
    assert!(text.contains("declared: 22 passed, 0 failed"), "{text}");
    for scenario in [
        "initialize",
        "tools_call",
        "elicitation-sep1034-client-defaults",
        "sse-retry",
        "auth/metadata-default",
        "auth/scope-step-up",
        "auth/token-endpoint-auth-basic",
        "auth/pre-registration",
        "auth/2025-03-26-oauth-endpoint-fallback",
        "auth/offline-access-scope",
    ] {
        assert!(text.lines().any(|l| l.contains(scenario) && l.contains("pass")), "{scenario}: {text}");
    }
}

/// The pinned pre-release of the suite, with its scenarios of MCP
/// 2026-07-28 (test servers that speak only that revision: no handshake,
/// per-request `_meta`, `input_required` rounds, its headers): every
/// scenario of what agentd declares passes (the OAuth ones too: scopes
/// that accumulate on a step-up, a new registration when the server's
/// authorization server changes).
#[test]
fn the_2026_07_28_suites_client_scenarios_that_agentd_declares_pass() {
    let Some(tools) = required("AGENTD_TEST_CONFORMANCE") else { return };
    let flags = ["--suite", "2026-07-28", "--only-declared"];
    let text = conformance("mcp-conformance.sh", &tools, &["agentd", "agentd-sandbox"], &flags);
    assert!(text.contains("declared: 33 passed, 0 failed"), "{text}");
    for scenario in [
        "tools_call",
        "request-metadata",
        "sep-2322-client-request-state",
        "http-standard-headers",
        "http-custom-headers",
        "auth/scope-step-up",
        "auth/authorization-server-migration",
        "json-schema-2020-12-preservation",
    ] {
        assert!(text.lines().any(|l| l.contains(scenario) && l.contains("pass")), "{scenario}: {text}");
    }
}

#[test]
fn a_tool_a_server_adds_or_removes_at_run_time_reaches_every_session_using_it_once_per_burst() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let entry = json!({ "t": py_entry(&python, &[], json!({})) });
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        // Two sessions on the same workspace share the pooled server; the
        // MCP tools are deferred (the default).
        let options = json!({ "mcp_servers": entry, "mode": "bypass" });
        let a = session(&mut c, work.path(), options.clone()).await["session_id"].as_str().unwrap().to_owned();
        let b = session(&mut c, work.path(), options).await["session_id"].as_str().unwrap().to_owned();
        let mut events_a = EventStream::open(&d.socket, &a, None).await.unwrap();
        let mut events_b = EventStream::open(&d.socket, &b, None).await.unwrap();
        let deferred = |list: &Value| -> Vec<String> {
            list["deferred"].as_array().unwrap().iter().filter_map(|v| v.as_str().map(str::to_owned)).collect()
        };
        let before = c.ok("tools/list", json!({ "session_id": b })).await;
        assert!(!deferred(&before).contains(&"mcp__t__late".to_owned()), "{before}");
        load(&mut c, &a, &["mcp__t__grow", "mcp__t__shrink", "mcp__t__lists_changed"]).await;

        // 50 notifications in a burst: the tools are read again, and each
        // session is told once.
        let r = call(&mut c, &a, "mcp__t__grow", json!({ "name": "late", "times": 50 })).await;
        assert_eq!(text(&r), "added late", "{r}");
        for events in [&mut events_a, &mut events_b] {
            let seen = within("tools/changed", events.until(|e| e["type"] == "tools/changed")).await;
            let changed = seen.last().unwrap();
            assert_eq!(changed["server"], "t", "{changed}");
            assert_eq!(changed["added"], json!(["mcp__t__late"]), "{changed}");
            assert_eq!(changed["removed"], json!([]), "{changed}");
        }
        for sid in [&a, &b] {
            let list = c.ok("tools/list", json!({ "session_id": sid })).await;
            assert!(deferred(&list).contains(&"mcp__t__late".to_owned()), "{list}");
        }
        // The pool's cache of the server's tools has it too.
        let cache = std::fs::read_dir(d.dir.path().join("state/mcp-tools")).unwrap();
        let cached: String = cache.map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
        assert!(cached.contains("\"late\""), "{cached}");
        // The new tool is found, loaded and called like any other.
        load(&mut c, &b, &["mcp__t__late"]).await;
        let r = call(&mut c, &b, "mcp__t__late", json!({ "text": "hi" })).await;
        assert_eq!(text(&r), "late: hi", "{r}");

        // Removed: gone from the list and from calls, in both sessions.
        let r = call(&mut c, &a, "mcp__t__shrink", json!({ "name": "late" })).await;
        assert_eq!(text(&r), "removed late", "{r}");
        for events in [&mut events_a, &mut events_b] {
            let seen = within("tools/changed", events.until(|e| e["type"] == "tools/changed")).await;
            let changed = seen.last().unwrap();
            assert_eq!(changed["added"], json!([]), "{changed}");
            assert_eq!(changed["removed"], json!(["mcp__t__late"]), "{changed}");
            // Nothing between the two changes said the tools changed again
            // (the burst of 50 was one).
            assert_eq!(seen.iter().filter(|e| e["type"] == "tools/changed").count(), 1, "{seen:?}");
        }
        let list = c.ok("tools/list", json!({ "session_id": b })).await;
        assert!(!list.to_string().contains("mcp__t__late"), "{list}");
        let r = call(&mut c, &b, "mcp__t__late", json!({ "text": "hi" })).await;
        assert_eq!(r["is_error"], true, "{r}");
        assert!(text(&r).contains("no tool named"), "{r}");

        // Resources and prompts: the sessions' clients are told.
        let r = call(&mut c, &a, "mcp__t__lists_changed", json!({})).await;
        assert_eq!(text(&r), "told", "{r}");
        let mut lists = Vec::new();
        while lists.len() < 2 {
            let seen = within("mcp/list_changed", events_b.until(|e| e["type"] == "mcp/list_changed")).await;
            let e = seen.last().unwrap();
            assert_eq!(e["server"], "t", "{e}");
            lists.push(e["list"].as_str().unwrap().to_owned());
        }
        lists.sort();
        assert_eq!(lists, ["prompts", "resources"]);
    });
}

/// Found by an attack review: a sub-agent limited to some tools gained a
/// tool its MCP server added at run time (its limit was a list of what
/// was offered when it opened, not kept).
#[test]
fn a_sub_agent_limited_to_some_tools_gets_no_tool_its_server_adds_later() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    // The server is the user's (children read the settings files; a
    // session's own mcp_servers are its own).
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join("config");
    std::fs::create_dir_all(config.join("agentd")).unwrap();
    let user = json!({ "mcpServers": { "t": py_entry(&python, &[], json!({})) } });
    std::fs::write(config.join("agentd/settings.json"), user.to_string()).unwrap();
    let (home_s, config_s) = (home.path().display().to_string(), config.display().to_string());
    let d = StandaloneDaemon::start(&[], &[("HOME", home_s.as_str()), ("XDG_CONFIG_HOME", config_s.as_str())]);
    let work = tempfile::tempdir().unwrap();
    let agents = work.path().join(".claude/agents");
    std::fs::create_dir_all(&agents).unwrap();
    std::fs::write(
        agents.join("echoer.md"),
        "---\nname: echoer\ndescription: Echoes\ntools: Read, mcp__t__echo\n---\nEcho.\n",
    )
    .unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let options = json!({ "mode": "bypass", "tools": { "defer": { "mode": "never" } } });
        let sid = session(&mut c, work.path(), options.clone()).await["session_id"].as_str().unwrap().to_owned();
        // Another session on the pooled server adds the tools (the parent
        // waits on its Task).
        let other = session(&mut c, work.path(), options).await["session_id"].as_str().unwrap().to_owned();
        let mut runner = RawConn::connect(&d.socket).await;
        let reply = runner.request("turn/stream", json!({ "session_id": sid, "capabilities": ["agents"] })).await;
        assert!(reply["result"].is_string(), "{reply}");
        let uses = vec![tool_use(
            "a",
            "Task",
            json!({ "run_in_background": false, "description": "e", "prompt": "echo", "subagent_type": "echoer" }),
        )];
        c.ok("turn/submit", json!({ "session_id": sid, "tool_uses": uses, "end": true })).await;
        let request = within("agent/request", async {
            loop {
                let e = runner.recv().await.expect("the stream goes on")["params"]["result"].clone();
                if e["type"] == "agent/request" {
                    return e;
                }
            }
        })
        .await;
        let child = request["child_session_id"].as_str().unwrap().to_owned();
        let names = |list: &Value| -> Vec<String> {
            list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
        };
        assert_eq!(names(&c.ok("tools/list", json!({ "session_id": child })).await), ["Read", "mcp__t__echo"]);
        let mut parent_events = EventStream::open(&d.socket, &sid, None).await.unwrap();
        let mut child_events = EventStream::open(&d.socket, &child, None).await.unwrap();
        let r = call(&mut c, &other, "mcp__t__grow", json!({ "name": "sneaky" })).await;
        assert_eq!(text(&r), "added sneaky", "{r}");
        within("the parent's tools/changed", parent_events.until(|e| e["type"] == "tools/changed")).await;
        assert!(names(&c.ok("tools/list", json!({ "session_id": sid })).await).contains(&"mcp__t__sneaky".to_owned()));
        // The child remade its set too (same server), without the new tool.
        let r = call(&mut c, &other, "mcp__t__grow", json!({ "name": "marker" })).await;
        assert_eq!(text(&r), "added marker", "{r}");
        within("the parent's second tools/changed", parent_events.until(|e| e["type"] == "tools/changed")).await;
        assert_eq!(names(&c.ok("tools/list", json!({ "session_id": child })).await), ["Read", "mcp__t__echo"]);
        let r = call(&mut c, &child, "mcp__t__sneaky", json!({ "text": "hi" })).await;
        assert_eq!(r["is_error"], true, "{r}");
        // It was told nothing: none of its tools changed.
        c.ok("session/close", json!({ "session_id": child })).await;
        let seen = within("the child's close", child_events.until(|e| e["type"] == "session/closed")).await;
        assert!(!seen.iter().any(|e| e["type"] == "tools/changed"), "{seen:?}");
    });
}
