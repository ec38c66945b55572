//! Hooks at the session's moments beyond one call's checks: http hooks,
//! TaskCreated/TaskCompleted, CwdChanged, `defer`, PermissionDenied,
//! PostToolBatch, FileChanged and ConfigChange — through the real socket
//! with real hook scripts.

use serde_json::{Value, json};

use agentd_tests::{TestDaemon, tool_use, within};

use super::hooks::{hooks, results, script, scripts, session, text, turn_events};

/// A `type: "http"` hook: the moment's JSON is POSTed; the answer is read
/// as a command hook's stdout. A TaskCreated hook's block prevents the
/// task; a PreToolUse `defer` keeps the call from running.
#[tokio::test]
async fn http_hooks_task_hooks_cwd_changed_and_defer() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let seen_tx = seen_tx.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 8192];
                loop {
                    let Ok(n) = stream.read(&mut buf).await else { return };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&request).to_string();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            let _ = seen_tx.send(text.clone());
                            let answer = if body.contains("\"rm ") {
                                r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"the http hook says no"}}"#
                            } else {
                                ""
                            };
                            let reply = format!(
                                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                                answer.len()
                            );
                            let _ = stream.write_all(reply.as_bytes()).await;
                            return;
                        }
                    }
                }
            });
        }
    });
    let d = TestDaemon::start().await;
    let dir = scripts();
    let no_tasks = script(dir.path(), "no-tasks.sh", "cat >/dev/null; echo 'no new tasks on Fridays' >&2; exit 2");
    let cwd_log = dir.path().join("cwd.log");
    let cwd_hook = script(dir.path(), "cwd.sh", &format!("cat >> {}", cwd_log.display()));
    let defer = script(
        dir.path(),
        "defer.sh",
        r#"cat >/dev/null; echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"defer"}}'"#,
    );
    let entry = json!({
        "PreToolUse": [
            { "matcher": "Bash", "hooks": [{ "type": "http", "url": format!("http://127.0.0.1:{port}/hook"),
                "headers": { "X-Team": "$TEAM", "X-Other": "$HOME" }, "allowedEnvVars": ["TEAM"] }] },
            { "matcher": "Write", "hooks": [{ "type": "command", "command": defer }] }
        ],
        "TaskCreated": [{ "hooks": [{ "type": "command", "command": no_tasks }] }],
        "CwdChanged": [{ "hooks": [{ "type": "command", "command": cwd_hook }] }]
    });
    let mut s = session(&d, json!({ "hooks": entry, "mode": "bypass", "env": { "TEAM": "core" } })).await;
    std::fs::write(d.dir.path().join("keep.txt"), "k").unwrap();
    let turn = s.submit_ended(vec![tool_use("r", "Bash", json!({ "command": "rm keep.txt" }))]).await;
    let r = &results(&turn_events(&mut s, &turn).await)[0];
    assert!(r["is_error"] == true && text(r).contains("the http hook says no"), "{r}");
    assert!(d.dir.path().join("keep.txt").exists());
    let posted = within("the POST", seen.recv()).await.unwrap();
    assert!(posted.starts_with("POST /hook "), "{posted}");
    assert!(
        posted.contains("\"hook_event_name\":\"PreToolUse\"") && posted.contains("\"tool_name\":\"Bash\""),
        "{posted}"
    );
    let lower = posted.to_ascii_lowercase();
    assert!(lower.contains("x-team: core") && lower.contains("x-other: \r\n"), "only allowed variables: {posted}");
    // An empty 2xx answer lets the call go on; the cd carries and the
    // CwdChanged hook hears where.
    std::fs::create_dir_all(d.dir.path().join("sub")).unwrap();
    let turn = s.submit_ended(vec![tool_use("c", "Bash", json!({ "command": "cd sub" }))]).await;
    assert_eq!(results(&turn_events(&mut s, &turn).await)[0]["is_error"], false);
    let moved = std::fs::read_to_string(&cwd_log).unwrap();
    assert!(moved.contains("\"hook_event_name\":\"CwdChanged\"") && moved.contains("/sub\""), "{moved}");
    // TaskCreated's exit code 2 prevents the task.
    let turn = s.submit_ended(vec![tool_use("t", "TaskCreate", json!({ "subject": "s", "description": "d" }))]).await;
    let r = &results(&turn_events(&mut s, &turn).await)[0];
    assert!(r["is_error"] == true && text(r).contains("no new tasks on Fridays"), "{r}");
    let list = s.c.tool(&s.id, "TaskList", json!({})).await;
    assert!(!text(&list).contains("#1"), "{list}");
    // defer: not run.
    let turn = s
        .submit_ended(vec![tool_use("w", "Write", json!({ "file_path": d.dir.path().join("w.txt"), "content": "x" }))])
        .await;
    let events = turn_events(&mut s, &turn).await;
    let r = results(&events).into_iter().find(|r| r["tool_use_id"] == "w").unwrap();
    assert!(r["is_error"] == true && text(&r).contains("deferred"), "{r}");
    assert!(!d.dir.path().join("w.txt").exists());
}

/// PermissionDenied: a call refused without anyone asked (a deny rule)
/// is told to the hook, whose `retry` tells the model it may try again.
#[tokio::test]
async fn a_permission_denied_hook_hears_the_refusal_and_may_say_retry() {
    let d = TestDaemon::start().await;
    let dir = scripts();
    let log = dir.path().join("denied.log");
    let hook = script(
        dir.path(),
        "denied.sh",
        &format!(
            r#"cat >> {}; echo '{{"hookSpecificOutput":{{"hookEventName":"PermissionDenied","retry":true}}}}'"#,
            log.display()
        ),
    );
    let entry =
        json!({ "PermissionDenied": [{ "matcher": "Bash", "hooks": [{ "type": "command", "command": hook }] }] });
    let permissions = json!({ "deny": ["Bash(rm:*)"] });
    let mut s = session(&d, json!({ "hooks": entry, "permissions": permissions })).await;
    let turn = s.submit_ended(vec![tool_use("r", "Bash", json!({ "command": "rm -f x" }))]).await;
    let events = turn_events(&mut s, &turn).await;
    let r = &results(&events)[0];
    assert_eq!(r["is_error"], true, "{r}");
    assert!(text(r).contains("Bash(rm:*)") && text(r).contains("may make this call again"), "{r}");
    let heard = std::fs::read_to_string(&log).unwrap();
    assert!(heard.contains("\"hook_event_name\":\"PermissionDenied\"") && heard.contains("\"rm -f x\""), "{heard}");
    assert!(heard.contains("\"reason\":"), "{heard}");
    // An allowed call does not reach it.
    let turn = s.submit_ended(vec![tool_use("e", "Bash", json!({ "command": "echo fine" }))]).await;
    turn_events(&mut s, &turn).await;
    assert_eq!(std::fs::read_to_string(&log).unwrap().matches("PermissionDenied").count(), 1);
}

/// PostToolBatch: once every call of a streamed turn has its result, the
/// hook sees them all (inputs and responses); what it adds and its stop
/// ride on `turn/completed`, which comes after it. Its matcher is ignored
/// (as Claude Code ignores it); a `tool/call` is no batch of the model's.
#[tokio::test]
async fn a_post_tool_batch_hook_sees_the_whole_turn_before_it_completes() {
    let d = TestDaemon::start().await;
    let dir = scripts();
    let log = dir.path().join("batch.log");
    let stop = dir.path().join("stop");
    let hook = script(
        dir.path(),
        "batch.sh",
        &format!(
            "cat >> {log}; echo >> {log}\nif [ -e {stop} ]; then echo 'the tests fail' >&2; exit 2; fi\n\
             echo '{{\"hookSpecificOutput\":{{\"hookEventName\":\"PostToolBatch\",\"additionalContext\":\"lint: 2 warnings\"}}}}'",
            log = log.display(),
            stop = stop.display()
        ),
    );
    let mut s = session(&d, json!({ "hooks": hooks("PostToolBatch", "NoSuchTool", &[hook.to_str().unwrap()]) })).await;
    std::fs::write(d.dir.path().join("a.txt"), "alpha\n").unwrap();
    let turn = s
        .submit_ended(vec![
            tool_use("r", "Read", json!({ "file_path": d.dir.path().join("a.txt") })),
            tool_use("b", "Bash", json!({ "command": "echo from-bash" })),
        ])
        .await;
    let events = turn_events(&mut s, &turn).await;
    let done = events.iter().find(|e| e["type"] == "turn/completed").unwrap();
    assert_eq!(done["additional_context"], "lint: 2 warnings", "{done}");
    assert!(done.get("stop_reason").is_none(), "{done}");
    let seen: Value = serde_json::from_str(std::fs::read_to_string(&log).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(seen["hook_event_name"], "PostToolBatch");
    let calls = seen["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{seen}");
    assert_eq!((calls[0]["tool_name"].as_str(), calls[0]["tool_use_id"].as_str()), (Some("Read"), Some("r")));
    assert!(calls[0]["tool_response"].as_str().unwrap().contains("alpha"), "{seen}");
    assert_eq!(calls[1]["tool_input"]["command"], "echo from-bash");
    assert!(calls[1]["tool_response"].as_str().unwrap().contains("from-bash"), "{seen}");
    // Its hook/completed comes before the turn's end.
    let hook_at = events.iter().position(|e| e["type"] == "hook/completed" && e["event"] == "PostToolBatch");
    let done_at = events.iter().position(|e| e["type"] == "turn/completed");
    assert!(hook_at.unwrap() < done_at.unwrap(), "{events:?}");
    // Exit code 2 stops the harness's loop.
    std::fs::write(&stop, "").unwrap();
    let turn = s.submit_ended(vec![tool_use("e", "Bash", json!({ "command": "true" }))]).await;
    let events = turn_events(&mut s, &turn).await;
    let done = events.iter().find(|e| e["type"] == "turn/completed").unwrap();
    assert!(done["stop_reason"].as_str().unwrap().contains("the tests fail"), "{done}");
    // A tool/call is not a model's batch.
    let before = std::fs::read_to_string(&log).unwrap().lines().count();
    s.c.tool(&s.id, "Bash", json!({ "command": "true" })).await;
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), before);
}

/// FileChanged: the files a hook's matcher names (from the workspace, or
/// absolute) are watched while the session lives; one that appears,
/// changes or goes runs the hooks that name it (and not those naming
/// another file). ConfigChange: the session's settings files, by source.
#[tokio::test]
async fn file_changed_and_config_change_hooks_hear_their_files_appear_change_and_go() {
    let d = TestDaemon::start().await;
    let dir = scripts();
    let log = dir.path().join("files.log");
    let other_log = dir.path().join("other.log");
    let hook = script(dir.path(), "files.sh", &format!("cat >> {}; echo >> {}", log.display(), log.display()));
    let other = script(dir.path(), "other.sh", &format!("cat >> {}", other_log.display()));
    let config_log = dir.path().join("config.log");
    let config = script(dir.path(), "config.sh", &format!("cat >> {}", config_log.display()));
    let entry = json!({ "FileChanged": [
        { "matcher": ".envrc|notes.txt", "hooks": [{ "type": "command", "command": hook }] },
        { "matcher": "elsewhere.txt", "hooks": [{ "type": "command", "command": other }] }
    ], "ConfigChange": [{ "matcher": "project_settings", "hooks": [{ "type": "command", "command": config }] }] });
    let _s = session(&d, json!({ "hooks": entry })).await;
    let notes = d.dir.path().join("notes.txt");
    let seen = |want: usize| {
        let log = log.clone();
        async move {
            loop {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
                if lines.len() >= want {
                    return lines;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    std::fs::write(&notes, "one").unwrap();
    let lines = within("add", seen(1)).await;
    assert_eq!((lines[0]["event"].as_str(), lines[0]["hook_event_name"].as_str()), (Some("add"), Some("FileChanged")));
    assert_eq!(lines[0]["file_path"], notes.display().to_string());
    std::fs::write(&notes, "two, longer").unwrap();
    let lines = within("change", seen(2)).await;
    assert_eq!(lines[1]["event"], "change", "{lines:?}");
    std::fs::remove_file(&notes).unwrap();
    let lines = within("unlink", seen(3)).await;
    assert_eq!(lines[2]["event"], "unlink", "{lines:?}");
    assert!(!other_log.exists(), "a hook naming another file did not run");
    // ConfigChange: the workspace's settings file appears.
    std::fs::create_dir_all(d.dir.path().join(".claude")).unwrap();
    std::fs::write(d.dir.path().join(".claude/settings.json"), "{}").unwrap();
    let said = within("ConfigChange", async {
        loop {
            let text = std::fs::read_to_string(&config_log).unwrap_or_default();
            if let Ok(v) = serde_json::from_str::<Value>(text.trim()) {
                return v;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    })
    .await;
    assert_eq!(
        (said["hook_event_name"].as_str(), said["source"].as_str()),
        (Some("ConfigChange"), Some("project_settings"))
    );
    assert!(said["file_path"].as_str().unwrap().ends_with(".claude/settings.json"), "{said}");
}
