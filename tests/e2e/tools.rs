//! Tools through the socket: `tools/list` (API-ready definitions, the
//! filter pipeline, deferral and its token saving, byte-identical lists) and
//! `tool/call` (aliases, input errors, deferred tools and ToolSearch).

use agentd_tests::{RawConn, StandaloneDaemon, TestDaemon, agentctl, within};
use serde_json::{Value, json};

async fn session(c: &mut RawConn, extra: Value) -> String {
    let work = std::env::temp_dir();
    let mut params = json!({ "cwd": work });
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    c.session(params).await
}

/// Built-in tools of every build (ToolSearch is listed only when deferring).
/// The built-in tools deferred behind ToolSearch when deferral is on.
const DEFERRED_BUILTIN: &[&str] = &["CronCreate", "CronDelete", "CronList", "ListAgents", "Monitor", "SendMessage"];

const BUILTIN: &[&str] = &[
    "AskUserQuestion",
    "Bash",
    "BashOutput",
    "Brief",
    "Config",
    "CronCreate",
    "CronDelete",
    "CronList",
    "Edit",
    "EnterPlanMode",
    "EnterWorktree",
    "ExitPlanMode",
    "ExitWorktree",
    "Glob",
    "Grep",
    "ListAgents",
    "Monitor",
    "NotebookEdit",
    "Read",
    "SendMessage",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskStop",
    "TaskUpdate",
    "TodoWrite",
    "WebFetch",
    "Write",
];
/// Tools of test builds that are enabled.
const TEST_TOOLS: &[&str] = &["TestAlwaysLoad", "TestBlock", "TestDeferred", "TestEcho", "TestShell", "TestSleep"];

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

fn names(list: &Value) -> Vec<String> {
    list["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

/// Each definition has exactly the fields a model API's `tools` entry takes,
/// a valid name, and an object input schema without references.
fn assert_api_ready(list: &Value) {
    let name_ok = |n: &str| {
        !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    };
    for tool in list["tools"].as_array().unwrap() {
        let obj = tool.as_object().unwrap();
        let mut keys: Vec<_> = obj.keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["description", "input_schema", "name"], "{tool}");
        assert!(name_ok(tool["name"].as_str().unwrap()), "{tool}");
        assert!(!tool["description"].as_str().unwrap().is_empty());
        assert_eq!(tool["input_schema"]["type"], "object", "{tool}");
        assert!(tool["input_schema"]["properties"].is_object(), "{tool}");
        assert!(!tool["input_schema"].to_string().contains("$ref"), "{tool}");
    }
}

#[tokio::test]
async fn tools_list_is_api_ready_filtered_and_byte_identical() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = session(&mut c, json!({})).await;
    let list = c.ok("tools/list", json!({ "session_id": sid })).await;
    assert_api_ready(&list);
    // Test builds carry the test tools; TestDisabled is not enabled; nothing
    // is deferred below the threshold, so ToolSearch is not listed.
    assert_eq!(names(&list), sorted(&[BUILTIN, TEST_TOOLS].concat()));
    assert_eq!(list["deferred"], json!([]));
    assert_eq!(list["deferred_tokens_saved"], json!(0));

    // Byte-identical across calls: compare the raw reply lines.
    let line = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"session_id": sid}}).to_string();
    let mut raw = Vec::new();
    for _ in 0..3 {
        c.send_line(&line).await;
        raw.push(c.recv_some().await.to_string());
    }
    assert!(raw.windows(2).all(|w| w[0] == w[1]));

    // Another session with the same options gets the very same bytes: the
    // pipeline (order, schemas, descriptions) is deterministic.
    let other = session(&mut c, json!({})).await;
    let line = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"session_id": other}}).to_string();
    c.send_line(&line).await;
    assert_eq!(c.recv_some().await.to_string(), raw[0]);

    let r = c.request("tools/list", json!({ "session_id": "nope" })).await;
    assert_eq!(r["error"]["code"], json!(-32001));
}

#[tokio::test]
async fn session_options_drive_the_filter_pipeline() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let denied = session(&mut c, json!({ "permissions": { "deny": ["TestSleep", "TestEcho(x)"] } })).await;
    let list = c.ok("tools/list", json!({ "session_id": denied })).await;
    let kept: Vec<&str> = TEST_TOOLS.iter().copied().filter(|t| *t != "TestSleep").collect();
    assert_eq!(names(&list), sorted(&[BUILTIN, &kept].concat()), "blanket deny only");

    let by_alias = session(&mut c, json!({ "tools": { "disabled": ["Echo"] } })).await;
    let list = c.ok("tools/list", json!({ "session_id": by_alias })).await;
    assert!(!names(&list).contains(&"TestEcho".to_owned()), "disabled by its old name");

    let simple = session(&mut c, json!({ "tools": { "simple": true } })).await;
    let list = c.ok("tools/list", json!({ "session_id": simple })).await;
    assert_eq!(names(&list), ["Bash", "Edit", "Read"], "simple mode keeps Bash, Read, Edit");

    let always = session(&mut c, json!({ "tools": { "defer": { "mode": "always" } } })).await;
    let list = c.ok("tools/list", json!({ "session_id": always })).await;
    let listed: Vec<&str> = TEST_TOOLS.iter().copied().filter(|t| *t != "TestDeferred").collect();
    let core: Vec<&str> = BUILTIN.iter().copied().filter(|t| !DEFERRED_BUILTIN.contains(t)).collect();
    assert_eq!(names(&list), sorted(&[&core[..], &listed[..], &["ToolSearch"]].concat()));
    assert_eq!(
        list["deferred"],
        json!(["CronCreate", "CronDelete", "CronList", "ListAgents", "Monitor", "SendMessage", "TestDeferred"])
    );
}

#[test]
fn sixty_external_tools_are_deferred_and_the_saving_is_reported() {
    let d = StandaloneDaemon::start(&[], &[("AGENTD_TEST_EXTERNAL_TOOLS", "60")]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let deferred = session(&mut c, json!({})).await;
        let list = c.ok("tools/list", json!({ "session_id": deferred })).await;
        assert_api_ready(&list);
        let deferred_names = list["deferred"].as_array().unwrap();
        assert_eq!(deferred_names.len(), 67, "60 external tools, TestDeferred and 6 built-ins");
        assert!(names(&list).contains(&"ToolSearch".to_owned()));
        assert!(!names(&list).iter().any(|n| n.starts_with("mcp__")));

        let full = session(&mut c, json!({ "tools": { "defer": { "mode": "never" } } })).await;
        let all = c.ok("tools/list", json!({ "session_id": full })).await;
        assert_eq!(all["tools"].as_array().unwrap().len(), 60 + BUILTIN.len() + TEST_TOOLS.len(), "no ToolSearch");
        let saved = list["deferred_tokens_saved"].as_u64().unwrap();
        let with = list["estimated_tokens"].as_u64().unwrap();
        let without = all["estimated_tokens"].as_u64().unwrap();
        // The deferred list is the built-ins' (about 5.5k tokens, with the
        // inputs of every Claude Code version) and ToolSearch's.
        assert!(with * 3 < without, "deferred list {with} tokens, full list {without}");
        assert!(saved > 15_000, "saved {saved}");
        // Deferral trades the deferred definitions for ToolSearch's own.
        let search_tokens = with + saved - without;
        assert!(search_tokens < 300, "ToolSearch costs {search_tokens} tokens");
        eprintln!("60 external tools: {without} tokens in full, {with} deferred ({saved} saved)");
    });
}

#[tokio::test]
async fn tool_call_runs_by_name_or_alias_and_reports_input_errors_as_results() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = session(&mut c, json!({})).await;
    let r = c.tool(&sid, "Echo", json!({ "text": "hi", "repeat": 2 })).await;
    assert_eq!(r["name"], "TestEcho");
    assert_eq!(r["is_error"], false);
    assert_eq!(r["content"], json!([{ "type": "text", "text": "hihi" }]));
    assert_eq!(r["render_use"], "Echoing \"hi\"");
    assert_eq!(r["render"], "Echoed 4 characters");

    let r = c.tool(&sid, "TestEcho", json!({ "text": 3 })).await;
    assert_eq!(r["is_error"], true, "a bad input is a result the model reads, not an RPC error");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("field `text`") && text.contains("expected a string"), "{text}");

    let r = c.tool(&sid, "TestEcho", json!({ "text": "x", "repeat": 0 })).await;
    assert_eq!(r["is_error"], true);
    assert!(r["content"][0]["text"].as_str().unwrap().contains("repeat must be"), "{r}");

    let r = c.tool(&sid, "TestDisabled", json!({})).await;
    assert_eq!(r["is_error"], true);
    assert!(r["content"][0]["text"].as_str().unwrap().contains("no tool named"), "{r}");

    let r = c.tool(&sid, "TestSleep", json!({ "ms": 1, "panic": true })).await;
    assert_eq!(r["is_error"], true, "a panicking tool is an error result: {r}");
    assert!(c.ok("daemon/info", json!({})).await["pid"].is_number(), "and the daemon lives");
}

#[tokio::test]
async fn a_deferred_tool_must_be_loaded_with_tool_search_first() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let sid = session(&mut c, json!({ "tools": { "defer": { "mode": "always" } } })).await;
    let call = json!({ "session_id": sid, "name": "TestDeferred", "input": {} });
    let r = c.ok("tool/call", call.clone()).await;
    assert_eq!(r["is_error"], true);
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("ToolSearch") && text.contains("select:TestDeferred"), "{text}");

    let before = c.ok("tools/list", json!({ "session_id": sid })).await;
    let found = c.tool(&sid, "ToolSearch", json!({ "query": "select:TestDeferred" })).await;
    assert_eq!(found["is_error"], false, "{found}");
    assert!(found["content"][0]["text"].as_str().unwrap().contains("\"name\":\"TestDeferred\""), "{found}");
    assert_eq!(found["render"], "Loaded 1 tool: TestDeferred");

    let r = within("call", c.ok("tool/call", call)).await;
    assert_eq!((r["is_error"].clone(), r["content"][0]["text"].clone()), (json!(false), json!("TestDeferred ran")));
    let after = c.ok("tools/list", json!({ "session_id": sid })).await;
    assert_eq!(
        after["deferred"],
        json!(["CronCreate", "CronDelete", "CronList", "ListAgents", "Monitor", "SendMessage"])
    );
    let (b, a) = (names(&before), names(&after));
    assert_eq!(a[..b.len()], b[..], "loaded tools are appended, the prefix stays");
    assert_eq!(a.last().unwrap(), "TestDeferred");
}

#[test]
fn agentctl_tools_shows_definitions_deferred_names_and_tokens() {
    let d = StandaloneDaemon::start(&[], &[("AGENTD_TEST_EXTERNAL_TOOLS", "60")]);
    let (code, out, err) = agentctl(&d.socket, &["tools"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("TestEcho") && out.contains("ToolSearch"), "{out}");
    assert!(out.contains("deferred (67, ~") && out.contains("mcp__synthetic__create_issue"), "{out}");
    assert!(out.contains("tokens saved"), "{out}");
    let (code, out, _) = agentctl(&d.socket, &["--json", "tools"]);
    assert_eq!(code, 0);
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["deferred"].as_array().unwrap().len(), 67);
    // The temporary session agentctl opened is closed again.
    let (_, out, _) = agentctl(&d.socket, &["--json", "session", "list"]);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["sessions"], json!([]));
}
