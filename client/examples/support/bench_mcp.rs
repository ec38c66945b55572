//! `bench mcp`: the official MCP Python SDK's client (and rmcp's) against
//! the reference filesystem server and `agentctl mcp`, reading a 1 KB
//! file, and against `bench mcp-floor`, a server that only reads it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use super::{bin_dir, flag, started_agentd};

/// The same MCP client loop against the reference filesystem server and
/// `agentctl mcp`.
pub(super) fn mcp(args: &[String]) {
    let calls = flag(args, "--calls", 1000);
    let python = std::env::var("AGENTD_TEST_MCP_PYTHON").expect("AGENTD_TEST_MCP_PYTHON: a Python with `mcp`");
    let fs = std::env::var("AGENTD_TEST_MCP_FS").expect("AGENTD_TEST_MCP_FS: the reference filesystem server");
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let file = ws.join("one-kb.txt");
    std::fs::write(&file, "x".repeat(1023) + "\n").unwrap();
    let bin = bin_dir();
    let (agentd, agentctl) = (bin.join("agentd"), bin.join("agentctl"));
    assert!(agentd.exists() && agentctl.exists(), "build first: cargo build --release");
    let (_daemon, socket) = started_agentd(dir.path(), true);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/bridge_client.py");
    let run = |clients: usize, through_fs: bool| -> (Vec<f64>, f64) {
        let start = Instant::now();
        let children: Vec<Child> = (0..clients)
            .map(|_| {
                let mut cmd = Command::new(&python);
                cmd.arg(&script).arg(&agentctl).arg(&socket).arg(&ws);
                if through_fs {
                    cmd.arg("bench-fs").arg(&fs);
                } else {
                    cmd.arg("bench");
                }
                cmd.arg(&file).arg(calls.to_string()).stdout(Stdio::piped()).stderr(Stdio::null());
                cmd.spawn().unwrap()
            })
            .collect();
        let mut all = Vec::new();
        let mut slowest = 0.0f64;
        for child in children {
            let out = child.wait_with_output().unwrap();
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the client's latencies");
            let lat: Vec<f64> = v["latencies"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() * 1e6).collect();
            slowest = slowest.max(lat.iter().sum::<f64>() / 1e6);
            all.extend(lat);
        }
        let _ = start;
        all.sort_by(f64::total_cmp);
        (all, (clients * calls) as f64 / slowest)
    };
    mcp_table(&format!("{calls} calls of a 1 KB read per client, the MCP Python SDK client"), |clients, through_fs| {
        run(clients, through_fs)
    });
    // The client's own cost: a server that only reads the file.
    let floor = {
        let out = Command::new(&python)
            .arg(&script)
            .arg(&agentctl)
            .arg(&socket)
            .arg(&ws)
            .arg("bench-floor")
            .arg(std::env::current_exe().unwrap())
            .arg(&file)
            .arg(calls.to_string())
            .stderr(Stdio::null())
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the client's latencies");
        let mut lat: Vec<f64> = v["latencies"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() * 1e6).collect();
        lat.sort_by(f64::total_cmp);
        (lat[lat.len() / 2], calls as f64 / (lat.iter().sum::<f64>() / 1e6))
    };
    println!(
        "{:<34} {:>9.0} {:>9} {:>10.0}   (a server that only reads the file: the client's own cost)",
        "floor", floor.0, "", floor.1
    );

    // The same loop from a Rust client (the SDK's client side): what the
    // servers cost without the Python client's own time per call.
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    mcp_table(&format!("{calls} calls, Rust MCP client (rmcp)"), |clients, through_fs| {
        let command = |_: usize| {
            let mut cmd = tokio::process::Command::new(if through_fs { Path::new(&fs) } else { agentctl.as_path() });
            if through_fs {
                cmd.arg(&ws);
            } else {
                cmd.arg("--socket").arg(&socket).args(["mcp", "--mode", "bypass", "--cwd"]).arg(&ws);
            }
            cmd
        };
        let (tool, input) = if through_fs {
            ("read_text_file", serde_json::json!({"path": file}))
        } else {
            ("Read", serde_json::json!({"file_path": file}))
        };
        rt.block_on(rust_clients(clients, calls, &command, tool, &input))
    });
}

/// `bench mcp-floor`: the least an MCP server can do for `bench mcp`'s
/// client, on stdio: answers `initialize`, `tools/list` and every
/// `tools/call` (reading the file `path` names), one line each.
pub(super) fn mcp_floor() {
    use std::io::{BufRead, Write};
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let Ok(request) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let Some(id) = request.get("id").cloned() else { continue };
        let result = match request["method"].as_str().unwrap_or_default() {
            "initialize" => serde_json::json!({
                "protocolVersion": request["params"]["protocolVersion"], "capabilities": { "tools": {} },
                "serverInfo": { "name": "floor", "version": "0" } }),
            "tools/list" => serde_json::json!({ "tools": [{ "name": "read_text_file",
                "inputSchema": { "type": "object", "properties": { "path": { "type": "string" } } } }] }),
            "tools/call" => {
                let path = request["params"]["arguments"]["path"].as_str().unwrap_or_default();
                let text = std::fs::read_to_string(path).unwrap_or_default();
                serde_json::json!({ "content": [{ "type": "text", "text": text }] })
            }
            _ => serde_json::json!({}),
        };
        let reply = serde_json::json!({ "jsonrpc": "2.0", "id": id, "result": result });
        if writeln!(out, "{reply}").and_then(|_| out.flush()).is_err() {
            return;
        }
    }
}

/// One table of `bench mcp`: the filesystem server and agentctl mcp, with
/// 1 and 8 clients (`run(clients, through_fs)` gives the sorted latencies
/// in µs and the calls per second), and agentd's ratio.
fn mcp_table(title: &str, mut run: impl FnMut(usize, bool) -> (Vec<f64>, f64)) {
    println!("{title}");
    println!("{:<34} {:>9} {:>9} {:>10} {:>14}", "server", "p50 µs", "p99 µs", "calls/s", "8 clients/s");
    let mut rates = Vec::new();
    for (name, through_fs) in [("reference filesystem server", true), ("agentctl mcp (agentd)", false)] {
        let (one, rate) = run(1, through_fs);
        let (_, rate8) = run(8, through_fs);
        let p = |q: usize| one[(one.len() * q / 100).min(one.len() - 1)];
        println!("{name:<34} {:>9.0} {:>9.0} {:>10.0} {:>14.0}", p(50), p(99), rate, rate8);
        rates.push((rate, rate8));
    }
    println!(
        "agentd / filesystem server: {:.2}x calls/s with one client, {:.2}x with 8",
        rates[1].0 / rates[0].0,
        rates[1].1 / rates[0].1
    );
}

/// `clients` Rust MCP clients, each with its own server process from
/// `command`, each calling `tool` `calls` times; latencies (µs, sorted) and
/// total calls/s.
async fn rust_clients(
    clients: usize,
    calls: usize,
    command: &dyn Fn(usize) -> tokio::process::Command,
    tool: &str,
    input: &serde_json::Value,
) -> (Vec<f64>, f64) {
    use rmcp::ServiceExt;
    let mut services = Vec::new();
    let mut children = Vec::new();
    for i in 0..clients {
        let mut cmd = command(i);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).kill_on_drop(true);
        let mut child = cmd.spawn().unwrap();
        let io = (child.stdout.take().unwrap(), child.stdin.take().unwrap());
        services.push(().serve(io).await.unwrap());
        children.push(child);
    }
    let start = Instant::now();
    let tasks: Vec<_> = services
        .iter()
        .map(|service| {
            let peer = service.peer().clone();
            let tool = tool.to_owned();
            let args = input.as_object().cloned();
            tokio::spawn(async move {
                let mut lat = Vec::with_capacity(calls);
                for _ in 0..calls {
                    let mut params = rmcp::model::CallToolRequestParams::new(tool.clone());
                    params.arguments = args.clone();
                    let t = Instant::now();
                    let r = peer.call_tool(params).await.unwrap();
                    assert_ne!(r.is_error, Some(true), "{r:?}");
                    lat.push(t.elapsed().as_secs_f64() * 1e6);
                }
                lat
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let rate = (clients * calls) as f64 / start.elapsed().as_secs_f64();
    for s in services {
        let _ = s.cancel().await;
    }
    all.sort_by(f64::total_cmp);
    (all, rate)
}
