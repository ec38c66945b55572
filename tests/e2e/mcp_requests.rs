//! What a server asks of agentd during a call: elicitations go to the
//! client that answers them (declined without one); a sampling request
//! (`sampling/createMessage`) goes to the
//! harness: the `mcp/sampling` event to a client that declares it answers
//! them, the user's decision (allow always holds for the session), the
//! harness's completion back to the server; refused without such a
//! client, on a denial, a bad completion, or no answer in time. With the
//! Python SDK's test server (`tests/mcp/test_server.py`, tool `sample`).
//! And a tool's `structuredContent`, passed on as its own field. A server
//! of MCP 2026-07-28 asks the same in its results, answered the same way.

use std::path::{Path, PathBuf};

use agentd_tests::{RawConn, StandaloneDaemon, within};
use serde_json::{Value, json};

use super::mcp_support::{bridge_client, call, py_entry, py_entry_2026, python_client, required, rt, session, text};

/// A session on `work` with the Python test server as `t` (every tool
/// offered, bypass mode) and `extra` options: its id.
async fn with_t(c: &mut RawConn, work: &Path, python: &Path, extra: Value) -> String {
    let mut options = json!({ "mcp_servers": { "t": py_entry(python, &[], json!({})) }, "mode": "bypass",
        "tools": { "defer": { "mode": "never" } } });
    options.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    session(c, work, options).await["session_id"].as_str().unwrap().to_owned()
}

/// What [`on_t`] gives a test.
struct T {
    python: PathBuf,
    d: StandaloneDaemon,
    work: tempfile::TempDir,
    c: RawConn,
    sid: String,
}

/// Runs `test` with the Python test server's interpreter (skipped without
/// one, see [`required`]), a daemon of its own, an empty workspace, a
/// connection and a [`with_t`] session with `extra` options.
fn on_t(extra: Value, test: impl AsyncFnOnce(T)) {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = with_t(&mut c, work.path(), &python, extra).await;
        test(T { python, d, work, c, sid }).await;
    });
}

/// A connection streaming `sid`'s events of `kind` that declares its
/// client answers the servers' `capability` requests.
async fn subscribe(socket: &Path, sid: &str, kind: &str, capability: &str) -> RawConn {
    let mut stream = RawConn::connect(socket).await;
    let sub = stream
        .request("turn/stream", json!({ "session_id": sid, "kinds": [kind], "capabilities": [capability] }))
        .await;
    assert!(sub["result"].is_string(), "{sub}");
    stream
}

/// The next event of `kind` on `stream`.
async fn next_event(stream: &mut RawConn, kind: &str) -> Value {
    within(kind, async {
        loop {
            let note = stream.recv().await.expect("the stream goes on");
            let event = note["params"]["result"].clone();
            if event["type"] == kind {
                return event;
            }
        }
    })
    .await
}

async fn next_sampling(stream: &mut RawConn) -> Value {
    next_event(stream, "mcp/sampling").await
}

/// A call of `name` on a connection of its own, left running.
fn spawn_call(socket: &Path, sid: &str, name: &str, input: Value) -> tokio::task::JoinHandle<Value> {
    let (socket, sid, name) = (socket.to_owned(), sid.to_owned(), name.to_owned());
    tokio::spawn(async move {
        let mut c = RawConn::connect(&socket).await;
        call(&mut c, &sid, &name, input).await
    })
}

/// [`bridge_client`] with `scenario`, off the runtime's thread.
async fn bridge(python: &Path, socket: &Path, work: &Path, scenario: &[&str]) -> Vec<Value> {
    let (python, socket, work) = (python.to_owned(), socket.to_owned(), work.to_owned());
    let scenario: Vec<String> = scenario.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let scenario: Vec<&str> = scenario.iter().map(String::as_str).collect();
        bridge_client(&python, &socket, &work, &scenario)
    })
    .await
    .unwrap()
}

#[test]
fn a_servers_sampling_request_is_answered_by_the_harness_after_the_user_allows_it() {
    on_t(json!({ "permission_timeout_ms": 1500 }), async |T { python, d, work, mut c, sid }| {
        // Nobody declared they answer sampling requests: refused at once.
        let r = call(&mut c, &sid, "mcp__t__sample", json!({ "prompt": "hi?" })).await;
        assert!(text(&r).contains("sampling failed") && text(&r).contains("no client"), "{r}");

        let mut stream = subscribe(&d.socket, &sid, "tool/result", "sampling").await;
        let start = |prompt: &str| spawn_call(&d.socket, &sid, "mcp__t__sample", json!({ "prompt": prompt }));
        let respond = |request_id: &Value, answer: Value| {
            let mut params = answer;
            params["session_id"] = json!(sid);
            params["request_id"] = request_id.clone();
            params
        };
        let good = json!({ "role": "assistant", "content": { "type": "text", "text": "hi there" }, "model": "harness-1", "stopReason": "endTurn" });

        // The first asks the user; a completion that is not one is
        // refused and the request still waits; allow always.
        let pending = start("say hi");
        let event = next_sampling(&mut stream).await;
        assert_eq!(event["server"], "t", "{event}");
        assert_eq!(event["needs_approval"], true, "{event}");
        assert_eq!(event["request"]["messages"][0]["content"]["text"], "say hi", "{event}");
        assert_eq!(event["request"]["systemPrompt"], "Be brief.", "{event}");
        assert_eq!(event["request"]["maxTokens"], 50, "{event}");
        let id = event["request_id"].clone();
        for bad in [
            json!({ "decision": "allow", "result": { "role": "user", "content": { "type": "text", "text": "x" }, "model": "m" } }),
            json!({ "decision": "allow", "result": { "role": "assistant", "content": { "type": "text", "text": "x" } } }),
            json!({ "decision": "allow", "result": { "role": "assistant", "content": { "type": "video" }, "model": "m" } }),
            json!({ "decision": "allow" }),
        ] {
            let r = c.request("mcp/sampling_respond", respond(&id, bad.clone())).await;
            assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
        }
        c.ok("mcp/sampling_respond", respond(&id, json!({ "decision": "allow_always", "result": good }))).await;
        let r = within("the call", pending).await.unwrap();
        assert_eq!(text(&r), "model harness-1 said: hi there", "{r}");
        let again = c.request("mcp/sampling_respond", respond(&id, json!({ "decision": "deny" }))).await;
        assert_eq!(again["error"]["code"], -32602, "answered once: {again}");

        // Allowed always: the next one needs no approval; a denial.
        let pending = start("again");
        let event = next_sampling(&mut stream).await;
        assert_eq!(event["needs_approval"], false, "{event}");
        c.ok("mcp/sampling_respond", respond(&event["request_id"], json!({ "decision": "deny" }))).await;
        let r = within("the call", pending).await.unwrap();
        assert!(text(&r).contains("declined"), "{r}");

        // The harness's model failed: the server is told why.
        let pending = start("fail");
        let event = next_sampling(&mut stream).await;
        c.ok(
            "mcp/sampling_respond",
            respond(&event["request_id"], json!({ "decision": "allow", "error": "rate limited" })),
        )
        .await;
        let r = within("the call", pending).await.unwrap();
        assert!(text(&r).contains("rate limited"), "{r}");

        // Over 1 MiB: refused before any event is made.
        let big = "x".repeat(1_100_000);
        let r = call(&mut c, &sid, "mcp__t__sample", json!({ "prompt": big })).await;
        assert!(text(&r).contains("larger than 1024 KiB"), "{}", &text(&r)[..200.min(text(&r).len())]);

        // While a call of another session on the same (pooled) server is in
        // flight, which session asked cannot be told: refused, shown to
        // neither session's client.
        let other = with_t(&mut c, work.path(), &python, json!({})).await;
        let busy = spawn_call(&d.socket, &other, "mcp__t__slow", json!({ "steps": 4, "delay_ms": 500 }));
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let r = call(&mut c, &sid, "mcp__t__sample", json!({ "prompt": "whose?", "delay_ms": 200 })).await;
        assert!(text(&r).contains("sampling failed") && text(&r).contains("no one agentd session"), "{r}");
        within("the other call", busy).await.unwrap();
        // A request handled within 2 s of another session's call ending may
        // have been sent during it: refused too. Past that, this session's
        // requests go to its client again.
        let r = call(&mut c, &sid, "mcp__t__sample", json!({ "prompt": "just after" })).await;
        assert!(text(&r).contains("no one agentd session"), "{r}");
        tokio::time::sleep(std::time::Duration::from_millis(2100)).await;

        // No answer within the permission timeout.
        let pending = start("silence");
        let _ = next_sampling(&mut stream).await;
        let r = within("the call", pending).await.unwrap();
        assert!(text(&r).contains("no completion within"), "{r}");
        drop(stream);

        // The Python client's handler answers them.
        let script = r#"
def handler(event):
    said = event["request"]["messages"][0]["content"]["text"]
    return ("allow", {"role": "assistant", "content": {"type": "text", "text": said.upper()}, "model": "py"})
print(served_call(d.serve_sampling, handler, "mcp__t__sample", prompt="from python")["content"][0]["text"])
"#;
        assert_eq!(python_client(script, &d.socket, &sid).await, "model py said: FROM PYTHON\n");

        // agentctl mcp passes them on to its own MCP client when it
        // declares sampling; otherwise it leaves them to the session's
        // other clients (none here: no answer in time).
        let seen = bridge(&python, &d.socket, work.path(), &["server-sample", &sid]).await;
        assert_eq!(seen[0]["text"], "model bridge-model said: from the bridge's client", "{seen:?}");
        assert_eq!(seen[0]["asked"], json!(["through the bridge?"]), "{seen:?}");
        assert!(seen[1]["text"].as_str().unwrap().contains("no completion within"), "{seen:?}");
        // A structured result reaches the bridge's client as structuredContent.
        assert_eq!(seen[2]["structured"], json!({ "city": "Bergen", "celsius": 21, "sunny": true }), "{seen:?}");
        // Annotations, a resource link and an embedded resource reach the
        // bridge's client as the server sent them; so do the tool's title
        // and its icons that a client may load (not a file: URI).
        assert_eq!(
            seen[3]["content"],
            json!([
                { "type": "text", "text": "for the user", "annotations": { "audience": ["user"], "priority": 0.9 } },
                { "type": "text", "text": "plain" },
                { "type": "resource_link", "uri": "file:///notes/all.md", "name": "all", "title": "All notes",
                  "mimeType": "text/markdown" },
                { "type": "resource", "annotations": { "priority": 0.2 },
                  "resource": { "uri": "file:///notes/today.md", "mimeType": "text/markdown", "text": "# Today" } },
            ]),
            "{seen:?}"
        );
        assert_eq!(seen[3]["title"], "Linked notes", "{seen:?}");
        assert_eq!(
            seen[3]["icons"],
            json!([{ "src": "data:image/png;base64,AAAA", "mimeType": "image/png", "sizes": ["16x16"] }]),
            "{seen:?}"
        );
    });
}

#[test]
fn a_tools_structured_content_is_its_own_field() {
    let extra_dir = tempfile::tempdir().unwrap();
    let extra = extra_dir.path().canonicalize().unwrap();
    on_t(json!({ "add_dirs": [extra] }), async |T { work, mut c, sid, .. }| {
        // Roots: the workspace, and the session's added directories.
        let r = call(&mut c, &sid, "mcp__t__roots", json!({})).await;
        let want = format!("file://{}/\nfile://{}/", work.path().canonicalize().unwrap().display(), extra.display());
        assert_eq!(text(&r), want, "{r}");
        let r = call(&mut c, &sid, "mcp__t__weather", json!({ "city": "Oslo" })).await;
        assert_eq!(r["is_error"], false, "{r}");
        assert_eq!(r["structured_content"], json!({ "city": "Oslo", "celsius": 21, "sunny": true }), "{r}");
        // The SDK wraps a plain return value as {"result": …}, with a
        // schema saying so: it goes through the check as well.
        let r = call(&mut c, &sid, "mcp__t__echo", json!({ "text": "x" })).await;
        assert_eq!(r["structured_content"], json!({ "result": "x" }), "{r}");
        // Binary content (audio, a PDF) is kept as files of the call, which
        // Read reads.
        let r = call(&mut c, &sid, "mcp__t__record", json!({})).await;
        assert_eq!(r["is_error"], false, "{r}");
        let said: Vec<String> = r["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["text"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert!(said[0].starts_with("[audio (audio/wav, 14 bytes) saved to "), "{said:?}");
        assert!(said[1].starts_with("[resource file:///report.pdf (application/pdf, 13 bytes) saved to "), "{said:?}");
        let sound = said[0].trim_end_matches(']').rsplit(" saved to ").next().unwrap().to_owned();
        assert_eq!(std::fs::read(&sound).unwrap(), b"RIFF-test-WAVE");
        let pdf = said[1].trim_end_matches(']').rsplit(" saved to ").next().unwrap().to_owned();
        assert_eq!(std::fs::read(&pdf).unwrap(), b"%PDF-1.4 test");
        let read = call(&mut c, &sid, "Read", json!({ "file_path": sound })).await;
        assert_eq!(read["is_error"], false, "Read reads it: {read}");
        // Saved blocks say nothing more than their text does.
        assert!(r.get("content_meta").is_none(), "{r}");
        // What the server said beyond the text is content_meta, by block.
        let r = call(&mut c, &sid, "mcp__t__linked", json!({})).await;
        let texts: Vec<&str> = r["content"].as_array().unwrap().iter().filter_map(|b| b["text"].as_str()).collect();
        assert_eq!(texts, ["for the user", "plain", "[resource all: file:///notes/all.md]", "# Today"], "{r}");
        assert_eq!(
            r["content_meta"],
            json!([
                { "index": 0, "block": { "type": "text", "annotations": { "audience": ["user"], "priority": 0.9 } } },
                { "index": 2, "block": { "type": "resource_link", "uri": "file:///notes/all.md", "name": "all",
                  "title": "All notes", "mimeType": "text/markdown" } },
                { "index": 3, "block": { "type": "resource", "annotations": { "priority": 0.2 },
                  "resource": { "uri": "file:///notes/today.md", "mimeType": "text/markdown" } } },
            ]),
            "{r}"
        );
        // The tool's title and loadable icons, asked for with the hints.
        let list = c.ok("tools/list", json!({ "session_id": sid, "hints": true })).await;
        assert_eq!(
            list["labels"]["mcp__t__linked"],
            json!({ "title": "Linked notes",
                    "icons": [{ "src": "data:image/png;base64,AAAA", "mimeType": "image/png", "sizes": ["16x16"] }] }),
            "{list}"
        );
        let plain = c.ok("tools/list", json!({ "session_id": sid })).await;
        assert!(plain.get("labels").is_none(), "{plain}");
        // Other tools (agentd's own) have none.
        let r = call(&mut c, &sid, "Glob", json!({ "pattern": "*" })).await;
        assert!(r.get("structured_content").is_none(), "{r}");
    });
}

#[test]
fn a_servers_elicitation_reaches_the_client_that_answers_them_and_is_declined_without_one() {
    on_t(json!({ "permission_timeout_ms": 1500 }), async |T { python, d, work, mut c, sid }| {
        // Nobody declared they answer elicitations: declined at once.
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "who?" })).await;
        assert_eq!(text(&r), "answer: decline", "{r}");

        // A client that answers them.
        let mut stream = subscribe(&d.socket, &sid, "mcp/elicitation", "elicitation").await;
        for (answer, expect) in [
            (json!({ "action": "accept", "content": { "name": "Ada", "count": 3 } }), "accepted: Ada x3"),
            (json!({ "action": "decline" }), "answer: decline"),
            (json!({ "action": "cancel" }), "answer: cancel"),
        ] {
            let pending = spawn_call(&d.socket, &sid, "mcp__t__ask", json!({ "question": "who are you?" }));
            let event = next_event(&mut stream, "mcp/elicitation").await;
            assert_eq!(event["server"], "t", "{event}");
            assert_eq!(event["message"], "who are you?", "{event}");
            assert_eq!(event["requested_schema"]["properties"]["count"]["type"], "integer", "{event}");
            let request_id = event["request_id"].as_str().unwrap().to_owned();
            if answer["action"] == "accept" {
                // Values that do not fit the schema are refused, and the
                // request still waits.
                let bad = c
                    .request(
                        "mcp/elicitation_respond",
                        json!({ "session_id": sid, "request_id": request_id, "action": "accept", "content": { "name": "Ada", "count": "three" } }),
                    )
                    .await;
                assert_eq!(bad["error"]["code"], -32602, "{bad}");
            }
            let mut params = answer.clone();
            params["session_id"] = json!(sid);
            params["request_id"] = json!(request_id);
            let ok = c.ok("mcp/elicitation_respond", params).await;
            assert_eq!(ok["request_id"], json!(request_id), "{ok}");
            let r = within("the call", pending).await.unwrap();
            assert_eq!(text(&r), expect, "{r}");
            let again = c
                .request(
                    "mcp/elicitation_respond",
                    json!({ "session_id": sid, "request_id": request_id, "action": "decline" }),
                )
                .await;
            assert_eq!(again["error"]["code"], -32602, "answered once: {again}");
        }
        // URL mode: the page is shown to the harness, which says whether
        // the user goes; an address that is not https (or loopback http)
        // is refused to the server before anyone is asked.
        let pending = spawn_call(&d.socket, &sid, "mcp__t__visit", json!({ "url": "https://login.example.com/x" }));
        let event = next_event(&mut stream, "mcp/elicitation").await;
        assert_eq!(
            (event["url"].clone(), event["elicitation_id"].clone()),
            (json!("https://login.example.com/x"), json!("visit-1")),
            "{event}"
        );
        assert_eq!(event["requested_schema"], Value::Null, "{event}");
        let answer = json!({ "session_id": sid, "request_id": event["request_id"], "action": "accept" });
        c.ok("mcp/elicitation_respond", answer).await;
        assert_eq!(text(&within("visit", pending).await.unwrap()), "answer: accept");
        for bad in
            ["file:///etc/passwd", "https://:accounts.example.com@evil.example.com/login", "http://evil.example.com/"]
        {
            let r = call(&mut c, &sid, "mcp__t__visit", json!({ "url": bad })).await;
            assert!(text(&r).contains("visit failed") && text(&r).contains("https://"), "{bad}: {r}");
        }
        drop(stream);
        // The Python client's handler answers them too.
        let script = r#"
def handler(event):
    assert "name" in event["requested_schema"]["properties"], event
    return ("accept", {"name": "Py", "count": 2})
print(served_call(d.serve_elicitations, handler, "mcp__t__ask", question="from python?")["content"][0]["text"])
"#;
        assert_eq!(python_client(script, &d.socket, &sid).await, "accepted: Py x2\n");
        // agentctl mcp passes them on to its own MCP client.
        let seen = bridge(&python, &d.socket, work.path(), &["server-elicit", &sid]).await;
        assert_eq!(seen[0]["text"], "accepted: Bridge x5", "{seen:?}");
        assert_eq!(seen[0]["asked"], json!(["t: through the bridge?"]), "{seen:?}");
        // Unanswered by a client that says it answers: declined after the
        // session's permission timeout.
        let _silent = subscribe(&d.socket, &sid, "mcp/elicitation", "elicitation").await;
        let started = std::time::Instant::now();
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "still there?" })).await;
        assert_eq!(text(&r), "answer: decline", "{r}");
        assert!(started.elapsed() >= std::time::Duration::from_millis(1400), "{:?}", started.elapsed());
    });
}

#[test]
fn agentctl_mcp_tells_its_client_when_a_server_of_the_session_adds_a_tool() {
    on_t(json!({}), async |T { python, d, work, sid, .. }| {
        let seen = bridge(&python, &d.socket, work.path(), &["server-grow", &sid]).await;
        assert_eq!(seen[0], json!({ "text": "added bridged", "before": false, "after": true }), "{seen:?}");
    });
}

#[test]
fn the_reference_everything_server_gets_its_roots_elicitation_and_sampling_through_a_session() {
    let Some(everything) = required("AGENTD_TEST_MCP_EVERYTHING") else { return };
    let Some(conformance) = required("AGENTD_TEST_CONFORMANCE") else { return };
    // It needs Node 22: the one the conformance suite brings.
    let node = conformance.join("node_modules/node/bin/node");
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let entry = json!({ "everything": { "command": node, "args": [everything, "stdio"] } });
        let options = json!({ "mcp_servers": entry, "mode": "bypass", "tools": { "defer": { "mode": "never" } } });
        let sid = session(&mut c, work.path(), options).await["session_id"].as_str().unwrap().to_owned();
        // Its tools for roots, elicitation and sampling are added once it
        // knows the client declares them.
        let list = c.ok("tools/list", json!({ "session_id": sid })).await;
        for tool in ["get-roots-list", "trigger-elicitation-request", "trigger-sampling-request"] {
            assert!(list.to_string().contains(&format!("mcp__everything__{tool}")), "{tool}: {list}");
        }
        let r = call(&mut c, &sid, "mcp__everything__get-roots-list", json!({})).await;
        let root = format!("file://{}/", work.path().canonicalize().unwrap().display());
        assert!(text(&r).contains(&root), "{r}");
        // Its form has every kind MCP 2025-11-25 allows (formats, titled
        // single and multiple choices); the harness accepts the defaults.
        let script = r#"
def form(event):
    s = event["requested_schema"]["properties"]
    content = {k: v["default"] for k, v in s.items() if "default" in v}
    content["name"] = "Ada"
    return ("accept", content)
r = served_call(d.serve_elicitations, form, "mcp__everything__trigger-elicitation-request")
print(json.dumps([c["text"] for c in r["content"]]))
answer = lambda e: ("allow", {"role": "assistant", "content": {"type": "text", "text": "from the harness"}, "model": "h"})
r = served_call(d.serve_sampling, answer, "mcp__everything__trigger-sampling-request", prompt="hello")
print(json.dumps([c["text"] for c in r["content"]]))
"#;
        let out = python_client(script, &d.socket, &sid).await;
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].contains("User provided the requested information") && lines[0].contains("Name: Ada"), "{out}");
        assert!(lines[0].contains(r#"\"titledMultipleSelectEnum\": [\n      \"fish-1\"\n    ]"#), "{out}");
        assert!(lines[1].contains("from the harness"), "{out}");
    });
}

/// Claude Code 2.1.332's Elicitation hooks answer for the user (an answer
/// that does not fit the schema is not taken); ElicitationResult hooks may
/// change what the user (or a hook) answered; exit code 2 declines.
#[test]
fn elicitation_hooks_answer_for_the_user_and_result_hooks_change_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, body: &str| {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\ncat >/dev/null\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let answer = write(
        "answer.sh",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"accept","content":{"name":"Hook","count":2}}}'"#,
    );
    let hooks = json!({ "Elicitation": [{ "matcher": "t", "hooks": [{ "type": "command", "command": answer }] }] });
    on_t(json!({ "hooks": hooks }), async |T { mut c, sid, .. }| {
        // Nobody follows the session to answer: the hook does.
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "who?" })).await;
        assert_eq!(text(&r), "accepted: Hook x2", "{r}");
    });
    let bad = write(
        "bad.sh",
        r#"echo '{"hookSpecificOutput":{"hookEventName":"Elicitation","action":"accept","content":{"name":"Hook","count":"two"}}}'"#,
    );
    let refuse = write("refuse.sh", "echo 'not to this server' >&2; exit 2");
    let change =
        write("change.sh", r#"echo '{"hookSpecificOutput":{"hookEventName":"ElicitationResult","action":"cancel"}}'"#);
    let hooks = json!({
        "Elicitation": [{ "hooks": [{ "type": "command", "command": bad }] }],
        "ElicitationResult": [{ "hooks": [{ "type": "command", "command": change }] }]
    });
    on_t(json!({ "hooks": hooks }), async |T { mut c, sid, .. }| {
        // The hook's content does not fit: not taken; nobody else answers
        // (declined), and the result hook turns that into a cancel.
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "who?" })).await;
        assert_eq!(text(&r), "answer: cancel", "{r}");
    });
    let hooks = json!({ "Elicitation": [{ "hooks": [{ "type": "command", "command": refuse }] }] });
    on_t(json!({ "hooks": hooks }), async |T { mut c, sid, .. }| {
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "who?" })).await;
        assert_eq!(text(&r), "answer: decline", "{r}");
    });
}

/// A server of MCP 2026-07-28 (the Python test server in that revision):
/// agentd meets it without a handshake; it asks for the roots, the user
/// and the model in its results (`input_required`), which agentd answers
/// as it answers a server's requests (the session's client answers the
/// elicitation and the completion) and then calls again; its log messages
/// come at the level each request carries; and a tool it adds reaches the
/// session through agentd's `subscriptions/listen`.
#[test]
fn a_server_of_2026_07_28_asks_in_its_results_logs_per_request_and_says_its_tools_changed_on_a_listen() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let options = json!({ "mcp_servers": { "t": py_entry_2026(&python, &[], json!({})) }, "mode": "bypass",
            "tools": { "defer": { "mode": "never" } }, "mcp_log_level": "info", "permission_timeout_ms": 20000 });
        let sid = session(&mut c, work.path(), options).await["session_id"].as_str().unwrap().to_owned();

        let r = call(&mut c, &sid, "mcp__t__roots", json!({})).await;
        let pool = c.ok("mcp/list", json!({})).await;
        assert_eq!(pool["servers"][0]["protocol_version"], "2026-07-28", "{pool}");
        let root = format!("file://{}/", work.path().canonicalize().unwrap().display());
        assert_eq!((r["is_error"].clone(), text(&r)), (json!(false), root), "{r}");

        let mut stream = subscribe(&d.socket, &sid, "mcp/elicitation", "elicitation").await;
        let pending = spawn_call(&d.socket, &sid, "mcp__t__ask", json!({ "question": "who?" }));
        let event = next_event(&mut stream, "mcp/elicitation").await;
        assert_eq!((event["server"].clone(), event["message"].clone()), (json!("t"), json!("who?")), "{event}");
        let answer = json!({ "session_id": sid, "request_id": event["request_id"], "action": "accept",
            "content": { "name": "Ada", "count": 2 } });
        c.ok("mcp/elicitation_respond", answer).await;
        assert_eq!(text(&within("ask", pending).await.unwrap()), "accepted: Ada x2");

        let mut samples = subscribe(&d.socket, &sid, "mcp/sampling", "sampling").await;
        let pending = spawn_call(&d.socket, &sid, "mcp__t__sample", json!({ "prompt": "say hi" }));
        let event = next_sampling(&mut samples).await;
        assert_eq!(event["request"]["messages"][0]["content"]["text"], "say hi", "{event}");
        let good = json!({ "role": "assistant", "content": { "type": "text", "text": "hi" }, "model": "m1",
            "stopReason": "endTurn" });
        let answer =
            json!({ "session_id": sid, "request_id": event["request_id"], "decision": "allow", "result": good });
        c.ok("mcp/sampling_respond", answer).await;
        assert_eq!(text(&within("sample", pending).await.unwrap()), "model m1 said: hi");

        let mut events = agentd_tests::EventStream::open(&d.socket, &sid, None).await.unwrap();
        let r = call(&mut c, &sid, "mcp__t__log", json!({ "message": "m1" })).await;
        assert_eq!(text(&r), "logged", "{r}");
        let logs = within("a log message", events.until(|e: &Value| e["type"] == "mcp/log")).await;
        let log = logs.iter().find(|e| e["type"] == "mcp/log").unwrap();
        assert_eq!((log["server"].clone(), log["data"].clone()), (json!("t"), json!("info: m1")), "{log}");

        let r = call(&mut c, &sid, "mcp__t__grow", json!({ "name": "late" })).await;
        assert_eq!(text(&r), "added late", "{r}");
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        loop {
            let tools = c.ok("tools/list", json!({ "session_id": sid })).await;
            if tools.to_string().contains("mcp__t__late") {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the added tool never reached the session: {tools}");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
}

/// `type: "mcp_tool"` hooks call a tool of one of the session's MCP
/// servers with the moment's JSON filled into their input (`${path}`);
/// the tool's text is read as a command hook's output (here a deny that
/// names the command), and a tool that fails is a hook error the call
/// goes on after.
#[test]
fn an_mcp_tool_hook_calls_a_servers_tool_and_its_text_decides() {
    let deny = r#"{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "the server says no to ${tool_input.command} (${tool_name})"}}"#;
    let hooks = json!({
        "PreToolUse": [
            { "matcher": "Bash", "hooks": [{ "type": "mcp_tool", "server": "t", "tool": "echo", "input": { "text": deny } }] },
            { "matcher": "Write", "hooks": [{ "type": "mcp_tool", "server": "t", "tool": "fails" }] }
        ]
    });
    on_t(json!({ "hooks": hooks }), async |T { work, mut c, sid, .. }| {
        let r = call(&mut c, &sid, "Bash", json!({ "command": "echo hi" })).await;
        assert_eq!(r["is_error"], true, "{r}");
        assert!(text(&r).contains("the server says no to echo hi (Bash)"), "{r}");
        let file = work.path().join("w.txt");
        let r = call(&mut c, &sid, "Write", json!({ "file_path": file, "content": "x" })).await;
        assert_eq!(r["is_error"], false, "a failing hook blocks nothing: {r}");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
        let info = c.ok("session/get", json!({ "session_id": sid })).await;
        assert!(info.to_string().contains("mcp_tool t echo"), "{info}");
    });
}

/// A PostToolUse hook that replaces an MCP tool's output replaces all of
/// it: the server's descriptions of its blocks (a resource link) and its
/// structured content go too, so nothing the hook hid reaches a client.
#[test]
fn a_hook_that_replaces_an_mcp_result_hides_its_links_and_structured_content() {
    let said = r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedMCPToolOutput":"[redacted]"}}"#;
    let hook = json!({ "type": "command", "command": format!("echo '{said}'") });
    let hooks = json!({ "PostToolUse": [{ "matcher": "mcp__t__linked|mcp__t__weather", "hooks": [hook] }] });
    on_t(json!({ "hooks": hooks }), async |T { mut c, sid, .. }| {
        let r = call(&mut c, &sid, "mcp__t__linked", json!({})).await;
        assert_eq!(r["content"], json!([{ "type": "text", "text": "[redacted]" }]), "{r}");
        assert!(r.get("content_meta").is_none(), "{r}");
        let r = call(&mut c, &sid, "mcp__t__weather", json!({ "city": "Oslo" })).await;
        assert_eq!(text(&r), "[redacted]", "{r}");
        assert!(r.get("structured_content").is_none(), "{r}");
    });
}
