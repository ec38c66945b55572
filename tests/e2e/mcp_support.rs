//! What the MCP tests share: the Python test server's entry, a session,
//! a call, and runners for the scripts that drive agentd from outside (the
//! MCP SDK's clients, agentd's Python client, the conformance suite).

use std::path::{Path, PathBuf};

use agentd_tests::{RawConn, within};
use serde_json::{Value, json};

/// The path in `var`, when it names something that exists; a failure
/// under CI (which sets them), a skip elsewhere.
pub(crate) fn required(var: &str) -> Option<PathBuf> {
    match std::env::var_os(var).map(PathBuf::from).filter(|p| p.exists()) {
        Some(p) => Some(p),
        None if std::env::var_os("CI").is_some() => panic!("{var} is not set under CI (.ci/run sets it)"),
        None => {
            eprintln!("skipped: {var} is not set (see .ci/run)");
            None
        }
    }
}

pub(crate) fn test_server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/test_server.py")
}

/// A stdio entry for the Python test server with `args`, speaking MCP
/// 2025-11-25 only (`--legacy`): what the tests written for that revision
/// exercise (its requests to the client, `logging/setLevel`, list changes
/// on the session). [`py_entry_2026`] is a server of both revisions, which
/// agentd meets as one of 2026-07-28.
pub(crate) fn py_entry(python: &Path, args: &[&str], env: Value) -> Value {
    let mut all = vec![test_server().display().to_string(), "--legacy".to_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    json!({ "command": python, "args": all, "env": env })
}

/// A stdio entry for the Python test server with `args`, speaking MCP
/// 2026-07-28 (and 2025-11-25 to a client that asks).
pub(crate) fn py_entry_2026(python: &Path, args: &[&str], env: Value) -> Value {
    let mut all = vec![test_server().display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    json!({ "command": python, "args": all, "env": env })
}

pub(crate) async fn session(c: &mut RawConn, cwd: &Path, extra: Value) -> Value {
    let mut params = json!({ "cwd": cwd });
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    c.ok("session/create", params).await
}

pub(crate) async fn call(c: &mut RawConn, sid: &str, name: &str, input: Value) -> Value {
    within(name, c.tool(sid, name, input)).await
}

pub(crate) fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// What [`python_client`] runs before a script: `d`, agentd's Python
/// client on `SOCK`; `sid`, the session `SID`; and `served_call`.
const PYTHON_CLIENT_PRELUDE: &str = r#"
import json, os, sys
sys.path.insert(0, os.environ["CLIENT_DIR"])
from agentd_client import Agentd
d = Agentd(os.environ["SOCK"])
sid = os.environ["SID"]
def served_call(serve, handler, tool, **input):
    """Calls `tool` while `handler` answers the server's requests (`serve` is
    d.serve_sampling or d.serve_elicitations)."""
    served = serve(sid, handler)
    try:
        return d.tool(sid, tool, **input)
    finally:
        served.close()
"#;

/// Runs `script` (Python, after [`PYTHON_CLIENT_PRELUDE`]) with `SOCK` and
/// `SID` set; what it printed (it must succeed).
pub(crate) async fn python_client(script: &str, socket: &Path, sid: &str) -> String {
    let out = tokio::process::Command::new("python3")
        .args(["-c", &format!("{PYTHON_CLIENT_PRELUDE}{script}")])
        .env("CLIENT_DIR", concat!(env!("CARGO_MANIFEST_DIR"), "/../client/python"))
        .env("SOCK", socket)
        .env("SID", sid)
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `scripts/<script>` (one of the conformance suite's runners) with
/// the suite in `tools` and the binaries `bins`, plus `flags`; its output
/// (it must succeed).
pub(crate) fn conformance(script: &str, tools: &Path, bins: &[&str], flags: &[&str]) -> String {
    let bin = tempfile::tempdir().unwrap();
    for name in bins {
        std::os::unix::fs::symlink(agentd_tests::bin_path(name), bin.path().join(name)).unwrap();
    }
    let out_dir = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts").join(script);
    let out = std::process::Command::new("bash")
        .arg(script)
        .arg("--tools")
        .arg(tools)
        .arg("--bin")
        .arg(bin.path())
        .arg("--out")
        .arg(out_dir.path())
        .args(flags)
        .env_remove("AGENTD_SOCKET")
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    text
}

/// Runs the Python SDK client `tests/mcp/bridge_client.py` against
/// `agentctl mcp`; returns the JSON lines it printed.
pub(crate) fn bridge_client(python: &Path, socket: &Path, workspace: &Path, scenario: &[&str]) -> Vec<Value> {
    sdk_client(python, "bridge_client.py", socket, workspace, scenario)
}

/// Runs `tests/mcp/<script>` (an MCP SDK client driving agentctl: its
/// arguments are agentctl, the socket, the workspace, then `args`);
/// returns the JSON lines it printed (it must succeed).
pub(crate) fn sdk_client(python: &Path, script: &str, socket: &Path, workspace: &Path, args: &[&str]) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp").join(script);
    let out = std::process::Command::new(python)
        .arg(path)
        .arg(agentd_tests::bin_path("agentctl"))
        .arg(socket)
        .arg(workspace)
        .args(args)
        .env_remove("AGENTD_SOCKET")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} {args:?}: {stdout}\n{stderr}");
    // Issue 49 #13: the SDK ends its session cleanly (a DELETE answered
    // 202 made it log this on every close).
    assert!(!stderr.contains("Session termination failed"), "{script} {args:?}: {stderr}");
    stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}
