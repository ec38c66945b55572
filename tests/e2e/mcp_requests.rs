//! What a server asks of agentd during a call: elicitations go to the
//! client that answers them (declined without one); a sampling request
//! (`sampling/createMessage`) goes to the
//! harness: the `mcp/sampling` event to a client that declares it answers
//! them, the user's decision (allow always holds for the session), the
//! harness's completion back to the server; refused without such a
//! client, on a denial, a bad completion, or no answer in time. With the
//! Python SDK's test server (`tests/mcp/test_server.py`, tool `sample`).
//! And a tool's `structuredContent`, passed on as its own field.

use agentd_tests::{RawConn, StandaloneDaemon, within};
use serde_json::{Value, json};

use super::mcp_support::{bridge_client, call, py_entry, python_client, required, rt, session, text};

/// A session on `work` with the Python test server as `t` (every tool
/// offered, bypass mode) and `extra` options: its id.
async fn with_t(c: &mut RawConn, work: &std::path::Path, python: &std::path::Path, extra: Value) -> String {
    let mut options = json!({ "mcp_servers": { "t": py_entry(python, &[], json!({})) }, "mode": "bypass",
        "tools": { "defer": { "mode": "never" } } });
    options.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    session(c, work, options).await["session_id"].as_str().unwrap().to_owned()
}

async fn next_sampling(stream: &mut RawConn) -> Value {
    within("the sampling request", async {
        loop {
            let note = stream.recv().await.expect("the stream goes on");
            let event = note["params"]["result"].clone();
            if event["type"] == "mcp/sampling" {
                return event;
            }
        }
    })
    .await
}

#[test]
fn a_servers_sampling_request_is_answered_by_the_harness_after_the_user_allows_it() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = with_t(&mut c, work.path(), &python, json!({ "permission_timeout_ms": 1500 })).await;
        // Nobody declared they answer sampling requests: refused at once.
        let r = call(&mut c, &sid, "mcp__t__sample", json!({ "prompt": "hi?" })).await;
        assert!(text(&r).contains("sampling failed") && text(&r).contains("no client"), "{r}");

        let mut stream = RawConn::connect(&d.socket).await;
        let sub = stream
            .request("turn/stream", json!({ "session_id": sid, "kinds": ["tool/result"], "capabilities": ["sampling"] }))
            .await;
        assert!(sub["result"].is_string(), "{sub}");
        let start = |prompt: &str| {
            let (socket, sid, prompt) = (d.socket.clone(), sid.clone(), prompt.to_owned());
            tokio::spawn(async move {
                let mut c = RawConn::connect(&socket).await;
                call(&mut c, &sid, "mcp__t__sample", json!({ "prompt": prompt })).await
            })
        };
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
        c.ok("mcp/sampling_respond", respond(&event["request_id"], json!({ "decision": "allow", "error": "rate limited" })))
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
        let busy = {
            let (socket, other) = (d.socket.clone(), other.clone());
            tokio::spawn(async move {
                let mut c = RawConn::connect(&socket).await;
                call(&mut c, &other, "mcp__t__slow", json!({ "steps": 4, "delay_ms": 500 })).await
            })
        };
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
import os, sys
sys.path.insert(0, os.environ["CLIENT_DIR"])
from agentd_client import Agentd
with Agentd(os.environ["SOCK"]) as d:
    sid = os.environ["SID"]
    def handler(event):
        said = event["request"]["messages"][0]["content"]["text"]
        return ("allow", {"role": "assistant", "content": {"type": "text", "text": said.upper()}, "model": "py"})
    server = d.serve_sampling(sid, handler)
    r = d.tool(sid, "mcp__t__sample", prompt="from python")
    print(r["content"][0]["text"])
    server.close()
"#;
        assert_eq!(python_client(script, &d.socket, &sid).await, "model py said: FROM PYTHON\n");

        // agentctl mcp passes them on to its own MCP client when it
        // declares sampling; otherwise it leaves them to the session's
        // other clients (none here: no answer in time).
        let seen = tokio::task::spawn_blocking({
            let (python, socket, work, sid) = (python.clone(), d.socket.clone(), work.path().to_owned(), sid.clone());
            move || bridge_client(&python, &socket, &work, &["server-sample", &sid])
        })
        .await
        .unwrap();
        assert_eq!(seen[0]["text"], "model bridge-model said: from the bridge's client", "{seen:?}");
        assert_eq!(seen[0]["asked"], json!(["through the bridge?"]), "{seen:?}");
        assert!(seen[1]["text"].as_str().unwrap().contains("no completion within"), "{seen:?}");
        // A structured result reaches the bridge's client as structuredContent.
        assert_eq!(seen[2]["structured"], json!({ "city": "Bergen", "celsius": 21, "sunny": true }), "{seen:?}");
    });
}

#[test]
fn a_tools_structured_content_is_its_own_field() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let extra_dir = tempfile::tempdir().unwrap();
        let extra = extra_dir.path().canonicalize().unwrap();
        let sid = with_t(&mut c, work.path(), &python, json!({ "add_dirs": [extra] })).await;
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
        // Other tools (agentd's own) have none.
        let r = call(&mut c, &sid, "Glob", json!({ "pattern": "*" })).await;
        assert!(r.get("structured_content").is_none(), "{r}");
    });
}

#[test]
fn a_servers_elicitation_reaches_the_client_that_answers_them_and_is_declined_without_one() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = with_t(&mut c, work.path(), &python, json!({ "permission_timeout_ms": 1500 })).await;
        // Nobody declared they answer elicitations: declined at once.
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "who?" })).await;
        assert_eq!(text(&r), "answer: decline", "{r}");

        // A client that answers them.
        let mut stream = RawConn::connect(&d.socket).await;
        let sub = stream
            .request("turn/stream", json!({ "session_id": sid, "kinds": ["mcp/elicitation"], "capabilities": ["elicitation"] }))
            .await;
        assert!(sub["result"].is_string(), "{sub}");
        for (answer, expect) in [
            (json!({ "action": "accept", "content": { "name": "Ada", "count": 3 } }), "accepted: Ada x3"),
            (json!({ "action": "decline" }), "answer: decline"),
            (json!({ "action": "cancel" }), "answer: cancel"),
        ] {
            let socket = d.socket.clone();
            let sid2 = sid.clone();
            let pending = tokio::spawn(async move {
                let mut c = RawConn::connect(&socket).await;
                call(&mut c, &sid2, "mcp__t__ask", json!({ "question": "who are you?" })).await
            });
            let event = within("the elicitation", async {
                loop {
                    let note = stream.recv().await.expect("the stream goes on");
                    let event = note["params"]["result"].clone();
                    if event["type"] == "mcp/elicitation" {
                        return event;
                    }
                }
            })
            .await;
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
                .request("mcp/elicitation_respond", json!({ "session_id": sid, "request_id": request_id, "action": "decline" }))
                .await;
            assert_eq!(again["error"]["code"], -32602, "answered once: {again}");
        }
        drop(stream);
        // The Python client's handler answers them too.
        let script = r#"
import os, sys, time
sys.path.insert(0, os.environ["CLIENT_DIR"])
from agentd_client import Agentd
with Agentd(os.environ["SOCK"]) as d:
    sid = os.environ["SID"]
    def handler(event):
        assert "name" in event["requested_schema"]["properties"], event
        return ("accept", {"name": "Py", "count": 2})
    server = d.serve_elicitations(sid, handler)
    r = d.tool(sid, "mcp__t__ask", question="from python?")
    print(r["content"][0]["text"])
    server.close()
"#;
        assert_eq!(python_client(script, &d.socket, &sid).await, "accepted: Py x2\n");
        // agentctl mcp passes them on to its own MCP client.
        let seen = tokio::task::spawn_blocking({
            let (python, socket, work, sid) = (python.clone(), d.socket.clone(), work.path().to_owned(), sid.clone());
            move || bridge_client(&python, &socket, &work, &["server-elicit", &sid])
        })
        .await
        .unwrap();
        assert_eq!(seen[0]["text"], "accepted: Bridge x5", "{seen:?}");
        assert_eq!(seen[0]["asked"], json!(["t: through the bridge?"]), "{seen:?}");
        // Unanswered by a client that says it answers: declined after the
        // session's permission timeout.
        let mut silent = RawConn::connect(&d.socket).await;
        let sub = silent
            .request("turn/stream", json!({ "session_id": sid, "kinds": ["mcp/elicitation"], "capabilities": ["elicitation"] }))
            .await;
        assert!(sub["result"].is_string(), "{sub}");
        let started = std::time::Instant::now();
        let r = call(&mut c, &sid, "mcp__t__ask", json!({ "question": "still there?" })).await;
        assert_eq!(text(&r), "answer: decline", "{r}");
        assert!(started.elapsed() >= std::time::Duration::from_millis(1400), "{:?}", started.elapsed());
    });
}

#[test]
fn agentctl_mcp_tells_its_client_when_a_server_of_the_session_adds_a_tool() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = with_t(&mut c, work.path(), &python, json!({})).await;
        let seen = tokio::task::spawn_blocking({
            let (python, socket, work, sid) = (python.clone(), d.socket.clone(), work.path().to_owned(), sid.clone());
            move || bridge_client(&python, &socket, &work, &["server-grow", &sid])
        })
        .await
        .unwrap();
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
import json, os, sys
sys.path.insert(0, os.environ["CLIENT_DIR"])
from agentd_client import Agentd
d = Agentd(os.environ["SOCK"]); sid = os.environ["SID"]
def form(event):
    s = event["requested_schema"]["properties"]
    content = {k: v["default"] for k, v in s.items() if "default" in v}
    content["name"] = "Ada"
    return ("accept", content)
served = d.serve_elicitations(sid, form)
r = d.tool(sid, "mcp__everything__trigger-elicitation-request")
served.close()
print(json.dumps([c["text"] for c in r["content"]]))
served = d.serve_sampling(sid, lambda e: ("allow", {"role": "assistant", "content": {"type": "text", "text": "from the harness"}, "model": "h"}))
r = d.tool(sid, "mcp__everything__trigger-sampling-request", prompt="hello")
served.close()
print(json.dumps([c["text"] for c in r["content"]]))
"#;
        let out = python_client(script, &d.socket, &sid).await;
        let lines: Vec<&str> = out.lines().collect();
        assert!(lines[0].contains("User provided the requested information") && lines[0].contains("Name: Ada"), "{out}");
        assert!(lines[0].contains(r#"\"titledMultipleSelectEnum\": [\n      \"fish-1\"\n    ]"#), "{out}");
        assert!(lines[1].contains("from the harness"), "{out}");
    });
}
