//! Bad input gets a clear JSON-RPC error and changes nothing; the daemon
//! keeps serving the same connection and others.

use agentd_tests::{RawConn, TestDaemon, eventually, within};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

fn code(reply: &Value) -> i64 {
    reply["error"]["code"].as_i64().unwrap_or_else(|| panic!("not an error: {reply}"))
}

#[tokio::test]
async fn malformed_lines_get_errors_and_the_connection_goes_on() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;

    c.send_line(r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info""#).await;
    let r = c.recv_some().await;
    assert_eq!(code(&r), -32700, "{r}");
    assert_eq!(r["id"], Value::Null);

    c.send_line(b"\xff\xfe{}").await;
    let r = c.recv_some().await;
    assert_eq!(code(&r), -32700, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("UTF-8"), "{r}");

    for non_object in ["42", "\"daemon/info\"", "null", "true"] {
        c.send_line(non_object).await;
        let r = c.recv_some().await;
        assert_eq!(code(&r), -32600, "{non_object}: {r}");
        assert!(r["error"]["message"].as_str().unwrap().contains("JSON object"), "{r}");
    }

    c.send_line(r#"{"jsonrpc":"1.0","id":5,"method":"daemon/info"}"#).await;
    let r = c.recv_some().await;
    assert_eq!((code(&r), r["id"].clone()), (-32600, json!(5)), "{r}");

    c.send_line(r#"{"jsonrpc":"2.0","id":6,"method":7}"#).await;
    let r = c.recv_some().await;
    assert_eq!((code(&r), r["id"].clone()), (-32600, json!(6)), "{r}");

    c.send_line(r#"{"jsonrpc":"2.0","id":[1],"method":"daemon/info"}"#).await;
    let r = c.recv_some().await;
    assert_eq!((code(&r), r["id"].clone()), (-32600, Value::Null), "{r}");

    // None of that changed anything.
    assert_eq!(c.ok("session/list", json!({})).await["sessions"], json!([]));

    // Blank lines and CRLF endings are tolerated.
    c.send_line("").await;
    c.send_line("{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"daemon/info\"}\r").await;
    let r = c.recv_some().await;
    assert_eq!(r["id"], json!("crlf"));
    assert!(r["result"]["version"].is_string(), "{r}");
}

/// JSON-RPC ids are any string, any number or null, and come back as the
/// client wrote them, byte for byte: in replies, errors, batches and a
/// subscription's answer.
#[tokio::test]
async fn any_id_comes_back_as_it_was_sent() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let ids = [
        "-3",
        "-0",
        "1.5",
        "1e3",
        "1E+3",
        "0.000",
        "12345678901234567890123456789",
        "18446744073709551615",
        "7",
        "\"x\"",
        "\"\\u0001agentd-id:5\"",
        "\"\\u0001agentd-id:35\"",
        "null",
    ];
    for id in ids {
        c.send_line(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/info"}}"#)).await;
        let text = c.recv_text().await;
        assert!(text.contains(&format!(r#""id":{id}"#)), "{id}: {text}");
        assert!(serde_json::from_str::<Value>(&text).unwrap()["result"]["version"].is_string(), "{text}");
        // An error reply keeps it too.
        c.send_line(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"no/such"}}"#)).await;
        let text = c.recv_text().await;
        assert!(text.contains(&format!(r#""id":{id}"#)) && text.contains("-32601"), "{id}: {text}");
        c.send_line(format!(r#"{{"jsonrpc":"1.0","id":{id},"method":"daemon/info"}}"#)).await;
        let text = c.recv_text().await;
        assert!(text.contains(&format!(r#""id":{id}"#)) && text.contains("-32600"), "{id}: {text}");
    }
    // In a batch, and for a subscription.
    c.send_line(
        r#"[{"jsonrpc":"2.0","id":-1.25,"method":"session/list"},{"jsonrpc":"2.0","id":2e0,"method":"daemon/info"}]"#,
    )
    .await;
    let text = c.recv_text().await;
    assert!(text.contains(r#""id":-1.25"#) && text.contains(r#""id":2e0"#), "{text}");
    let ws = d.dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let sid = c.session(json!({ "cwd": ws })).await;
    c.send_line(format!(r#"{{"jsonrpc":"2.0","id":-9.5,"method":"turn/stream","params":{{"session_id":"{sid}"}}}}"#))
        .await;
    let text = c.recv_text().await;
    assert!(text.contains(r#""id":-9.5"#) && text.contains("result"), "{text}");
    // Other kinds of id are refused, with a null id.
    for id in ["[1]", "{}", "true"] {
        c.send_line(format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"daemon/info"}}"#)).await;
        let r = c.recv_some().await;
        assert_eq!((code(&r), r["id"].clone()), (-32600, Value::Null), "{r}");
    }
}

#[tokio::test]
async fn unknown_method_and_wrong_params() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let r = c.request("session/destroy", json!({})).await;
    assert_eq!(code(&r), -32601);
    assert!(r["error"]["message"].as_str().unwrap().contains("session/destroy"), "{r}");

    let r = c.request("session/get", json!({})).await;
    assert_eq!(code(&r), -32602);
    assert!(r["error"]["message"].as_str().unwrap().contains("session_id"), "{r}");

    let r = c.request("session/get", json!({ "session_id": 3 })).await;
    assert_eq!((code(&r), r["error"]["data"]["field"].clone()), (-32602, json!("session_id")), "{r}");

    let r = c.request("session/get", json!(["positional"])).await;
    assert_eq!(code(&r), -32602);
    assert!(r["error"]["message"].as_str().unwrap().contains("object"), "{r}");

    let r = c.request("daemon/info", json!({ "verbose": true })).await;
    assert_eq!(code(&r), -32602, "unknown fields are refused, not ignored: {r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("verbose"), "{r}");

    let r = c.request("session/get", json!({ "session_id": "nope" })).await;
    assert_eq!(code(&r), -32001, "{r}");
}

#[tokio::test]
async fn batches_are_answered_per_spec() {
    let d = TestDaemon::start().await;
    let work = tempfile::tempdir().unwrap();
    let mut c = d.raw().await;

    c.send_line("[]").await;
    let r = c.recv_some().await;
    assert_eq!(code(&r), -32600, "empty batch is one error, not an array: {r}");

    c.send_line("[1, 2]").await;
    let r = c.recv_some().await;
    let items = r.as_array().expect("an array of errors");
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(|i| i["error"]["code"] == json!(-32600)));

    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "daemon/info"},
        {"jsonrpc": "2.0", "method": "session/create", "params": {"cwd": work.path()}},
        {"jsonrpc": "2.0", "id": 2, "method": "no/such"},
        {"jsonrpc": "2.0", "id": 3, "method": "session/list"},
    ]);
    c.send_line(batch.to_string()).await;
    let r = c.recv_some().await;
    let items = r.as_array().expect("a batch reply is an array");
    assert_eq!(items.len(), 3, "no reply for the notification: {r}");
    let by_id = |id: i64| items.iter().find(|i| i["id"] == json!(id)).unwrap().clone();
    assert!(by_id(1)["result"]["version"].is_string());
    assert_eq!(code(&by_id(2)), -32601);
    assert_eq!(by_id(3)["result"]["sessions"].as_array().unwrap().len(), 1, "the notification ran first");

    // A batch of notifications only gets no reply at all: the next line's
    // reply is the first thing that arrives.
    let notes = json!([{"jsonrpc": "2.0", "method": "session/list"}, {"jsonrpc": "2.0", "method": "daemon/info"}]);
    c.send_line(notes.to_string()).await;
    let r = c.request("daemon/info", json!({})).await;
    assert!(r["result"].is_object());

    c.send_line("[{\"jsonrpc\":\"2.0\",\"id\":1,").await;
    assert_eq!(code(&c.recv_some().await), -32700);
}

#[tokio::test]
async fn a_notification_runs_and_gets_no_reply() {
    let d = TestDaemon::start().await;
    let work = tempfile::tempdir().unwrap();
    let mut c = d.raw().await;
    let created = c.ok("session/create", json!({ "cwd": work.path() })).await;
    let note = json!({"jsonrpc": "2.0", "method": "session/close", "params": {"session_id": created["session_id"]}});
    c.send_line(note.to_string()).await;
    let list = c.ok("session/list", json!({})).await;
    assert_eq!(list["sessions"], json!([]));
}

#[tokio::test]
async fn a_line_over_the_limit_gets_an_error_then_the_connection_closes() {
    let d = TestDaemon::start_with(|c| c.max_request_bytes = 4096).await;
    let mut c = d.raw().await;
    // Under the limit: served.
    let pad = "x".repeat(3000);
    let r = c.request("daemon/info", json!({ "pad": pad })).await;
    assert_eq!(code(&r), -32602, "parsed (and refused for the unknown field): {r}");
    // Over it, with no newline in sight: refused as soon as it is too long.
    let big = vec![b'a'; 10_000];
    within("write", c.writer.write_all(&big)).await.unwrap();
    let r = c.recv_some().await;
    assert_eq!(code(&r), -32004, "{r}");
    assert!(r["error"]["message"].as_str().unwrap().contains("4096"), "{r}");
    assert!(c.recv().await.is_none(), "connection closed after the error");
    // The daemon itself is fine.
    let mut other = d.raw().await;
    assert!(other.ok("daemon/info", json!({})).await["version"].is_string());
}

#[tokio::test]
async fn default_limit_is_16_mib() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let line =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"daemon/info","params":{{"pad":"{}"}}}}"#, "y".repeat(15 << 20));
    c.send_line(&line).await;
    assert_eq!(code(&c.recv_some().await), -32602, "a 15 MiB line is read and parsed");
    let too_big = vec![b'z'; (16 << 20) + 1];
    // The daemon may close while we are still writing; that is the point.
    let _ = within("write", c.writer.write_all(&too_big)).await;
    assert_eq!(code(&c.recv_some().await), -32004);
}

#[tokio::test]
async fn a_client_that_vanishes_mid_request_harms_nothing() {
    let d = TestDaemon::start().await;
    {
        let mut c = d.raw().await;
        within("write", c.writer.write_all(br#"{"jsonrpc":"2.0","id":1,"method":"sess"#)).await.unwrap();
    }
    {
        // Sends a whole request and leaves without reading the reply.
        let mut c = d.raw().await;
        c.send_line(r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#).await;
    }
    let state = d.state.clone();
    eventually("both connections are gone", || state.connections.load(std::sync::atomic::Ordering::Relaxed) == 0).await;
    let mut c = RawConn::connect(&d.socket).await;
    let info = c.ok("daemon/info", json!({})).await;
    assert_eq!(info["connections"], json!(1));
    assert_eq!(info["connections_total"], json!(3));
}

#[tokio::test]
async fn a_half_closed_client_still_gets_its_answers() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    // No trailing newline: the last line counts at end of stream.
    let two = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"session/list\"}";
    within("write", c.writer.write_all(two.as_bytes())).await.unwrap();
    within("shutdown", c.writer.shutdown()).await.unwrap();
    assert_eq!(c.recv_some().await["id"], json!(1));
    assert_eq!(c.recv_some().await["id"], json!(2));
    assert!(c.recv().await.is_none());
}

#[tokio::test]
async fn too_many_requests_in_flight_are_refused_not_queued() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = c.session(json!({ "cwd": d.dir.path() })).await;
    let total = 1030;
    let mut lines = String::new();
    for id in 0..total {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tool/call",
            "params": {"session_id": sid, "name": "TestSleep", "input": {"ms": 600_000}}});
        lines.push_str(&call.to_string());
        lines.push('\n');
    }
    within("write", c.writer.write_all(lines.as_bytes())).await.unwrap();
    // The first 1024 run (and sleep); the rest are refused at once, by id.
    let mut refused = Vec::new();
    while refused.len() < total - 1024 {
        let r = c.recv_some().await;
        assert_eq!(code(&r), -32007, "{r}");
        refused.push(r["id"].as_u64().unwrap());
    }
    assert!(refused.iter().all(|id| *id >= 1024), "{refused:?}");
    // The connection still reads: a later request is answered at once (and
    // refused too while the limit holds), not stuck behind the sleepers.
    let r = c.request("daemon/info", json!({})).await;
    assert_eq!(code(&r), -32007);
}
