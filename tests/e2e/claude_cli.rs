//! Claude Code's own CLI (2.1.332, pinned from npm by `.ci/run`), driven by
//! a scripted Messages API on loopback (`tests/claude_cli/fake_api.py`,
//! through `ANTHROPIC_BASE_URL`), uses agentd's tools through `agentctl
//! mcp`: Read, Edit, Bash and Monitor. What the CLI hands back to the
//! model for each is checked, as the model would read it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentd_tests::{StandaloneDaemon, bin_path};
use serde_json::{Value, json};

use super::mcp_support::required;

/// Every `tool_result` the CLI sent: (tool name, its text), in order, from
/// the last request of the scripted conversation (which holds all of it).
fn tool_results(requests: &str) -> Vec<(String, String)> {
    let last: Value = requests
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["scripted"] == true)
        .expect("a request of the scripted conversation");
    let messages = last["body"]["messages"].as_array().cloned().unwrap_or_default();
    let blocks = |m: &Value| m["content"].as_array().cloned().unwrap_or_default();
    let mut names = std::collections::HashMap::new();
    let mut out = Vec::new();
    for m in &messages {
        for b in blocks(m) {
            if b["type"] == "tool_use" {
                names.insert(
                    b["id"].as_str().unwrap_or_default().to_owned(),
                    b["name"].as_str().unwrap_or_default().to_owned(),
                );
            }
            if b["type"] == "tool_result" {
                let name = names.get(b["tool_use_id"].as_str().unwrap_or_default()).cloned().unwrap_or_default();
                let text = match &b["content"] {
                    Value::String(s) => s.clone(),
                    Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
                    _ => String::new(),
                };
                out.push((name, text));
            }
        }
    }
    out
}

#[test]
fn claude_codes_own_cli_uses_agentds_tools_through_agentctl_mcp() {
    let Some(claude) = required("AGENTD_TEST_CLAUDE") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let ws = work.path().canonicalize().unwrap();
    std::fs::write(ws.join("hello.txt"), "hello\nworld\n").unwrap();
    let logs = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let port_file = logs.path().join("port");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/claude_cli/fake_api.py");
    let api = Command::new("python3")
        .arg(script)
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .arg("--log-dir")
        .arg(logs.path())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _api = Kill(api);
    let deadline = Instant::now() + Duration::from_secs(30);
    let port = loop {
        if let Ok(p) = std::fs::read_to_string(&port_file) {
            break p.trim().to_owned();
        }
        assert!(Instant::now() < deadline, "the scripted API did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let config = json!({ "mcpServers": { "agentd": {
        "command": bin_path("agentctl"),
        "args": ["--socket", d.socket, "mcp", "--cwd", ws, "--mode", "accept-edits", "--allow", "Monitor"]
    }}});
    let config_file = logs.path().join("mcp.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let out = Command::new(&claude)
        .args(["-p", "Read hello.txt, change world to there, run echo from-bash, then watch ticks."])
        .arg("--mcp-config")
        .arg(&config_file)
        .args(["--strict-mcp-config", "--output-format", "json", "--allowedTools", "mcp__agentd__*"])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", &url)
        .env("ANTHROPIC_API_KEY", "test")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        // Whatever else it reaches for is refused by the scripted API.
        .env("HTTPS_PROXY", &url)
        .env("HTTP_PROXY", &url)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .current_dir(&ws)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "claude: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let said: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(said["result"], "done", "{said}");
    let requests = std::fs::read_to_string(logs.path().join("requests.jsonl")).unwrap();
    let results = tool_results(&requests);
    let of = |tool: &str| -> String {
        results
            .iter()
            .find(|(name, _)| name == &format!("mcp__agentd__{tool}"))
            .map(|(_, text)| text.clone())
            .unwrap_or_else(|| panic!("no {tool} result: {results:?}"))
    };
    assert!(of("Read").contains("1\thello\n2\tworld"), "{results:?}");
    assert!(of("Edit").contains("has been updated successfully"), "{results:?}");
    assert_eq!(std::fs::read_to_string(ws.join("hello.txt")).unwrap(), "hello\nthere\n");
    assert!(of("Bash").contains("from-bash"), "{results:?}");
    assert!(of("Monitor").starts_with("Monitor started (task "), "the model reads the text, not ids: {results:?}");
}
