//! Monitor through the socket: a command's lines and a WebSocket's frames
//! become `monitor/event`s at once, replayed like every event; the watch
//! ends at exit, at its deadline or by TaskStop and says which; its rate
//! and line length are bounded; Bash's rules judge its command and the
//! network's rules its socket.

use std::time::Duration;

use agentd_tests::{EventStream, RawConn, TestDaemon, none_left, tag, within};
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};

async fn session(d: &TestDaemon, extra: Value) -> (RawConn, String) {
    let mut c = d.raw().await;
    let mut params = json!({ "cwd": d.dir.path(), "mode": "bypass", "permission_timeout_ms": 100 });
    if let (Value::Object(p), Value::Object(e)) = (&mut params, extra) {
        p.extend(e);
    }
    let id = c.session(params).await;
    // Deferred once a session has many tools (as in Claude Code 2.1.332):
    // loaded first where it is.
    let list = c.ok("tools/list", json!({ "session_id": id })).await;
    if list["deferred"].to_string().contains("\"Monitor\"") {
        let r = c.tool(&id, "ToolSearch", json!({ "query": "select:Monitor" })).await;
        assert_eq!(r["is_error"], false, "{r}");
    }
    (c, id)
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// Starts a watch, which must start; its task id.
async fn watch(c: &mut RawConn, sid: &str, input: Value) -> String {
    let r = within("Monitor", c.tool(sid, "Monitor", input)).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).starts_with("Monitor started (task "), "{r}");
    r["structured_content"]["taskId"].as_str().unwrap().to_owned()
}

/// The task's events, up to its last.
async fn events_of(stream: &mut EventStream, task: &str) -> Vec<Value> {
    let all = within(
        "the watch's end",
        stream.until(|e| e["type"] == "monitor/event" && e["task_id"] == task && e.get("ended").is_some()),
    )
    .await;
    all.into_iter().filter(|e| e["type"] == "monitor/event" && e["task_id"] == task).collect()
}

#[tokio::test]
async fn a_commands_lines_are_events_and_its_end_says_how() {
    let d = TestDaemon::start().await;
    let (mut c, sid) = session(&d, json!({})).await;
    let command = "echo one; echo two >&2; echo '<three>'; sleep 1; printf four";
    let task = watch(&mut c, &sid, json!({ "description": "three lines", "command": command })).await;
    let mut stream = EventStream::open(&d.socket, &sid, Some(0)).await.unwrap();
    let events = events_of(&mut stream, &task).await;
    let texts: Vec<&str> = events.iter().map(|e| e["text"].as_str().unwrap()).collect();
    // Lines within 200 ms are one event, as 2.1.332 gives it to the model;
    // standard error is not delivered; a last line without a newline is.
    let want = format!(
        "<task-notification>\n<task-id>{task}</task-id>\n<summary>Monitor event: \"three lines\"</summary>\n\
         <event>one\n&lt;three&gt;</event>\n</task-notification>"
    );
    assert_eq!(texts[0], want, "{events:?}");
    assert!(texts[1].contains("<event>four</event>"), "{events:?}");
    let end = events.last().unwrap();
    assert_eq!(end["ended"], "exited", "{end}");
    assert!(
        texts[2].contains("<status>completed</status>\n<summary>Monitor \"three lines\" stream ended</summary>"),
        "{end}"
    );
    assert!(texts[2].contains("<output-file>"), "{end}");
    assert_eq!(end["description"], "three lines");

    // Replayed like every event: a stream opened later sees them all.
    let mut again = EventStream::open(&d.socket, &sid, Some(0)).await.unwrap();
    assert_eq!(events_of(&mut again, &task).await.len(), 3);
}

#[tokio::test]
async fn an_event_comes_while_the_command_runs_and_task_stop_ends_the_watch() {
    let d = TestDaemon::start().await;
    let (mut c, sid) = session(&d, json!({})).await;
    let t = tag();
    let mut stream = EventStream::open(&d.socket, &sid, None).await.unwrap();
    let task = watch(&mut c, &sid, json!({ "description": "d", "command": format!("echo first; sleep {t}") })).await;
    let first = within("the first line", stream.until(|e| e["type"] == "monitor/event")).await;
    assert!(first.last().unwrap()["text"].as_str().unwrap().contains("<event>first</event>"), "{first:?}");
    assert!(first.last().unwrap().get("ended").is_none(), "the command still runs");
    let r = c.tool(&sid, "TaskStop", json!({ "task_id": task })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let rest = events_of(&mut stream, &task).await;
    assert_eq!(rest.last().unwrap()["ended"], "stopped", "{rest:?}");
    assert!(
        rest.last().unwrap()["text"]
            .as_str()
            .unwrap()
            .contains("<status>killed</status>\n<summary>Monitor \"d\" stopped"),
        "{rest:?}"
    );
    none_left(&format!("sleep {t}")).await;
}

#[tokio::test]
async fn a_watch_ends_at_its_timeout_and_says_so() {
    let d = TestDaemon::start().await;
    let (mut c, sid) = session(&d, json!({})).await;
    let t = tag();
    let mut stream = EventStream::open(&d.socket, &sid, None).await.unwrap();
    let task =
        watch(&mut c, &sid, json!({ "description": "quiet", "command": format!("sleep {t}"), "timeout_ms": 1500 }))
            .await;
    let events = events_of(&mut stream, &task).await;
    let end = events.last().unwrap();
    assert_eq!(end["ended"], "timed_out", "{end}");
    let said = end["text"].as_str().unwrap();
    assert!(said.contains("<event>[Monitor expired after 2s with no events delivered."), "{said}");
    none_left(&format!("sleep {t}")).await;
    // Its bounds.
    for (input, want) in [
        (json!({ "description": "d", "command": "true", "timeout_ms": 3_600_001 }), "≤ 3600000"),
        (json!({ "description": "d", "command": "true", "timeout_ms": 999 }), "at least 1000"),
        (json!({ "description": "d" }), "exactly one of command and ws"),
        (json!({ "description": "d", "command": "true", "ws": { "url": "ws://x" } }), "exactly one of command and ws"),
        (json!({ "description": "d", "ws": { "url": "http://example.com" } }), "ws:// or wss://"),
    ] {
        let r = c.tool(&sid, "Monitor", input).await;
        assert!(r["is_error"] == true && text(&r).contains(want), "{want}: {r}");
    }
}

#[tokio::test]
async fn a_flood_is_bounded_and_kept_whole_in_the_output_file() {
    let d = TestDaemon::start().await;
    let (mut c, sid) = session(&d, json!({})).await;
    let mut stream = EventStream::open(&d.socket, &sid, None).await.unwrap();
    let long = "x".repeat(5000);
    let r = within(
        "Monitor",
        c.tool(&sid, "Monitor", json!({ "description": "flood", "command": format!("echo {long}; seq 1 2000") })),
    )
    .await;
    let task = r["structured_content"]["taskId"].as_str().unwrap().to_owned();
    let file = r["structured_content"]["outputFile"].as_str().unwrap().to_owned();
    let events = events_of(&mut stream, &task).await;
    // Batches of 200 ms, each at most 3,000 characters and its lines 500.
    assert!(events.len() <= 12, "{} events for 2001 lines", events.len());
    let first = events[0]["text"].as_str().unwrap();
    assert!(first.contains(&format!("<event>{}…(truncated)\n1\n2\n", "x".repeat(500))), "{first}");
    assert!(first.contains("\n...(truncated)</event>"), "{first}");
    // Everything is in the file the result named, for Read.
    let r = c.tool(&sid, "Read", json!({ "file_path": file, "offset": 2001, "limit": 1 })).await;
    assert!(text(&r).contains("2000"), "{r}");
}

#[tokio::test]
async fn bash_rules_judge_the_command() {
    let d = TestDaemon::start().await;
    let permissions = json!({ "deny": ["Bash(rm:*)"], "allow": ["Bash(echo:*)"] });
    let (mut c, sid) = session(&d, json!({ "mode": "default", "permissions": permissions })).await;
    std::fs::write(d.dir.path().join("keep.txt"), "k").unwrap();
    for command in ["rm keep.txt", "env rm keep.txt", "echo hi; rm keep.txt", "timeout 5 rm keep.txt"] {
        let r = c.tool(&sid, "Monitor", json!({ "description": "d", "command": command })).await;
        assert!(r["is_error"] == true, "{command}: {r}");
    }
    assert!(d.dir.path().join("keep.txt").exists());
    // Allowed by Bash(echo:*): no question.
    let r = c.tool(&sid, "Monitor", json!({ "description": "d", "command": "echo allowed" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    // Neither: it asks, and nobody answers here.
    let r = c.tool(&sid, "Monitor", json!({ "description": "d", "command": "touch new.txt" })).await;
    assert!(r["is_error"] == true && !d.dir.path().join("new.txt").exists(), "{r}");
    // A rule on Monitor itself holds too: denied whole, it is not offered.
    let mut c2 = d.raw().await;
    let params = json!({ "cwd": d.dir.path(), "mode": "bypass", "permissions": { "deny": ["Monitor"] } });
    let sid2 = c2.session(params).await;
    let r = c2.tool(&sid2, "Monitor", json!({ "description": "d", "command": "echo x" })).await;
    assert!(r["is_error"] == true && text(&r).contains("no tool named \"Monitor\""), "{r}");
    // A session without Bash runs no command through Monitor.
    let (mut c4, sid4) = session(&d, json!({ "tools": { "disabled": ["Bash"] } })).await;
    let r = c4.tool(&sid4, "Monitor", json!({ "description": "d", "command": "touch made.txt" })).await;
    assert!(r["is_error"] == true && text(&r).contains("no Bash tool"), "{r}");
    assert!(!d.dir.path().join("made.txt").exists());
    // And a param rule on it.
    let (mut c3, sid3) = session(&d, json!({ "permissions": { "deny": ["Monitor(description:secret*)"] } })).await;
    let r = c3.tool(&sid3, "Monitor", json!({ "description": "secret watch", "command": "echo x" })).await;
    assert!(r["is_error"] == true, "{r}");
}

/// A WebSocket server on loopback: sends `frames`, then closes.
async fn ws_server(frames: Vec<&'static str>) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let frames = frames.clone();
            tokio::spawn(async move {
                let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else { return };
                for f in frames {
                    let _ = ws.send(tokio_tungstenite::tungstenite::Message::text(f)).await;
                }
                let _ = ws.send(tokio_tungstenite::tungstenite::Message::binary(vec![0u8, 1])).await;
                let _ = ws.close(None).await;
                while ws.next().await.is_some() {}
            });
        }
    });
    port
}

#[tokio::test]
async fn a_websockets_text_frames_are_events() {
    let d = TestDaemon::start().await;
    let port = ws_server(vec!["hello", "world"]).await;
    let open = json!({ "web": { "allow_private_network": true }, "permissions": { "allow": ["WebFetch(domain:127.0.0.1)"] }, "mode": "default" });
    let (mut c, sid) = session(&d, open).await;
    let mut stream = EventStream::open(&d.socket, &sid, None).await.unwrap();
    let task =
        watch(&mut c, &sid, json!({ "description": "socket", "ws": { "url": format!("ws://127.0.0.1:{port}/feed") } }))
            .await;
    let events = events_of(&mut stream, &task).await;
    let all: String = events.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert!(all.contains("hello") && all.contains("world"), "{events:?}");
    assert!(all.contains("[binary frame, 2 bytes]") && all.contains("[WebSocket closed"), "{events:?}");
    assert_eq!(events.last().unwrap()["ended"], "exited", "{events:?}");

    // Refused before any connection: a private address without the
    // session's leave, a host no rule allows under strictAllowlist, a
    // denied domain.
    let (mut c2, sid2) = session(&d, json!({})).await;
    let r = c2
        .tool(&sid2, "Monitor", json!({ "description": "d", "ws": { "url": format!("ws://127.0.0.1:{port}/") } }))
        .await;
    assert!(r["is_error"] == true && text(&r).contains("private or local address"), "{r}");
    let strict = json!({ "web": { "allow_private_network": true }, "sandbox": { "strict_allowlist": true } });
    let (mut c3, sid3) = session(&d, strict).await;
    let r = c3
        .tool(&sid3, "Monitor", json!({ "description": "d", "ws": { "url": format!("ws://127.0.0.1:{port}/") } }))
        .await;
    assert!(r["is_error"] == true && text(&r).contains("strictAllowlist"), "{r}");
    let deny =
        json!({ "permissions": { "deny": ["WebFetch(domain:127.0.0.1)"] }, "web": { "allow_private_network": true } });
    let (mut c4, sid4) = session(&d, deny).await;
    let r = c4
        .tool(&sid4, "Monitor", json!({ "description": "d", "ws": { "url": format!("ws://127.0.0.1:{port}/") } }))
        .await;
    assert!(r["is_error"] == true, "{r}");
    tokio::time::sleep(Duration::from_millis(10)).await;
}
