//! `bench`: measures agentd's RPC path against the floor of a bare Unix
//! socket line echo, in the same run, with the same client code.
//!
//! ```text
//! cargo build --release && cargo run --release -p agentd-client --example bench -- rpc
//!     [--calls 10000] [--clients 8] [--per-client 5000]
//! cargo build --release && cargo run --release -p agentd-client --example bench -- bash [--calls 500]
//! ```
//!
//! `bash` compares a Bash tool call of `true` through the daemon (one
//! `tool/call` round trip; in the read-only sandbox, in workspace_write
//! with the network gate and with no network, and with the sandbox off)
//! with spawning `bash -c true` directly.
//!
//! `calls [--calls 2000]` measures the tool path on one connection: an
//! empty call (`daemon/info`) beside `tool/call` of Read (1 KB), Glob and
//! Grep on a 10-file tree and Bash `true` (p50/p99, calls/s with 1 and 8
//! clients), then the daemon's RSS per 1,000 idle sessions and its growth
//! over 10,000 calls in one session once the event log is full.
//!
//! `calls --ephemeral` runs the same against a daemon that keeps nothing
//! on disk, to compare with the durable store.
//!
//! `restart [--sessions 1000] [--calls 25]` fills a state directory through
//! a daemon (each call adds 4 events), stops it, and times a new daemon's
//! start until it answers `session/list` with every session.
//!
//! `mcp [--calls 1000]` runs the same MCP client (the official Python
//! SDK's, `tests/mcp/bridge_client.py`) against the reference filesystem
//! server and against `agentctl mcp`, reading one 1 KB file: p50/p99 and
//! calls/s from one client, then calls/s of 8 clients at once; then the
//! client against a server that only reads the file (`mcp-floor`): the
//! client's own cost, so the best ratio any server could reach. It needs
//! `AGENTD_TEST_MCP_PYTHON` (a Python with `mcp`) and `AGENTD_TEST_MCP_FS`
//! (the filesystem server), as `.ci/run` sets them.
//!
//! `gate [--mb 1] [--runs 20]` downloads a file from a loopback HTTP server
//! with curl, directly and from a Bash call through the network gate
//! (workspace_write, loopback allowed for the session): curl's own
//! `time_total` and `speed_download`, median of the runs, for a 1 MB and a
//! 64 MB body.
//!
//! `search --corpus DIR` compares Grep and Glob through the daemon with the
//! `rg` binary on the same tree (build the tree with
//! `scripts/make_corpus.sh`).
//!
//! Both servers are separate processes with a multi-threaded tokio runtime:
//! the real `agentd` binary beside this one, and this binary re-executed as
//! `bench echo-server SOCKET`. The client sends `daemon/info` requests, one
//! line each, and waits for each reply before the next.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};

const REQUEST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"daemon/info"}"#;

#[path = "support/bench_layer.rs"]
mod layer;
#[path = "support/bench_mcp.rs"]
mod mcp;
#[path = "support/bench_soak.rs"]
mod soak;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("echo-server") => echo_server(Path::new(&args[1])),
        Some("mcp-floor") => mcp::mcp_floor(),
        Some("soak") => soak::soak(&args[1..]),
        Some("rpc") => rpc(&args[1..]),
        Some("bash") => bash(&args[1..]),
        Some("search") => search(&args[1..]),
        Some("calls") => calls(&args[1..]),
        Some("restart") => restart(&args[1..]),
        Some("mcp") => mcp::mcp(&args[1..]),
        Some("gate") => gate(&args[1..]),
        _ => {
            eprintln!("usage: bench rpc [--calls N] [--clients N] [--per-client N] | bench bash [--calls N]");
            std::process::exit(2);
        }
    }
}

fn flag(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

/// A line echo on a multi-threaded runtime: the floor any NDJSON server pays.
fn echo_server(socket: &Path) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let listener = UnixListener::bind(socket).unwrap();
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let (r, mut w) = stream.into_split();
                let mut lines = BufReader::new(r);
                let mut line = String::new();
                while lines.read_line(&mut line).await.unwrap_or(0) > 0 {
                    if w.write_all(line.as_bytes()).await.is_err() {
                        break;
                    }
                    line.clear();
                }
            });
        }
    });
}

struct Server {
    name: &'static str,
    socket: PathBuf,
    child: Child,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace directory `ws` in `dir`, canonical.
fn workspace(dir: &Path) -> PathBuf {
    let ws = std::fs::canonicalize(dir).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    ws
}

fn wait_for(socket: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(Instant::now() < deadline, "server at {} did not start", socket.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn rpc(args: &[String]) {
    let calls = flag(args, "--calls", 10_000);
    let clients = flag(args, "--clients", 8);
    let per_client = flag(args, "--per-client", 5_000);
    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let agentd = agentd_bin();

    let echo_sock = dir.path().join("echo.sock");
    let echo = Server {
        name: "line echo (floor)",
        child: Command::new(&me).arg("echo-server").arg(&echo_sock).stdin(Stdio::null()).spawn().unwrap(),
        socket: echo_sock,
    };
    let agentd_sock = dir.path().join("agentd.sock");
    let daemon = agentd_server("agentd daemon/info", &agentd, dir.path(), &agentd_sock, false);
    wait_for(&echo.socket);
    wait_for(&daemon.socket);

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    println!("{} sequential calls on one connection; {clients} clients x {per_client} calls concurrently", calls);
    println!("{:<22} {:>9} {:>9} {:>9} {:>12}", "server", "p50 µs", "p99 µs", "mean µs", "calls/s (8c)");
    let mut results = Vec::new();
    for server in [&echo, &daemon] {
        let (p50, p99, mean) = rt.block_on(sequential(&server.socket, calls));
        let throughput = rt.block_on(concurrent(&server.socket, clients, per_client));
        println!("{:<22} {:>9.1} {:>9.1} {:>9.1} {:>12.0}", server.name, p50, p99, mean, throughput);
        results.push((p50, p99, throughput));
    }
    let (floor, ours) = (results[0], results[1]);
    println!(
        "agentd / floor: p50 {:.2}x, p99 {:.2}x, throughput {:.2}x",
        ours.0 / floor.0,
        ours.1 / floor.1,
        ours.2 / floor.2
    );
}

async fn connect(socket: &Path) -> (BufReader<tokio::net::unix::OwnedReadHalf>, tokio::net::unix::OwnedWriteHalf) {
    let stream = UnixStream::connect(socket).await.unwrap();
    let (r, w) = stream.into_split();
    (BufReader::new(r), w)
}

async fn call(
    r: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    w: &mut tokio::net::unix::OwnedWriteHalf,
    line: &mut String,
) {
    w.write_all(REQUEST.as_bytes()).await.unwrap();
    w.write_all(b"\n").await.unwrap();
    line.clear();
    let n = r.read_line(line).await.unwrap();
    assert!(n > 0 && line.contains("\"id\":1"), "bad reply: {line}");
}

/// Latency percentiles (µs) of `calls` sequential calls after a warm-up.
async fn sequential(socket: &Path, calls: usize) -> (f64, f64, f64) {
    let (mut r, mut w) = connect(socket).await;
    let mut line = String::new();
    for _ in 0..1000 {
        call(&mut r, &mut w, &mut line).await;
    }
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        call(&mut r, &mut w, &mut line).await;
        samples.push(t.elapsed().as_secs_f64() * 1e6);
    }
    samples.sort_by(f64::total_cmp);
    let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    let mean = samples.iter().sum::<f64>() / samples.len() as f64;
    (pct(0.50), pct(0.99), mean)
}

/// Calls per second with `clients` connections each making `per_client`
/// sequential calls at the same time.
async fn concurrent(socket: &Path, clients: usize, per_client: usize) -> f64 {
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let socket = socket.to_owned();
            tokio::spawn(async move {
                let (mut r, mut w) = connect(&socket).await;
                let mut line = String::new();
                for _ in 0..per_client {
                    call(&mut r, &mut w, &mut line).await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    (clients * per_client) as f64 / start.elapsed().as_secs_f64()
}

/// Per-call cost of the Bash tool against spawning bash directly.
fn bash(args: &[String]) {
    let calls = flag(args, "--calls", 500);
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, socket) = started_agentd(dir.path(), false);
    // The workspace apart from the daemon's state directory (a workspace
    // holding it makes every unsandboxed command ask).
    let ws = workspace(dir.path());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (direct, rows) = rt.block_on(async {
        let mut direct = Vec::with_capacity(calls);
        for _ in 0..calls {
            let t = Instant::now();
            let status = tokio::process::Command::new("bash").arg("-c").arg("true").status().await.unwrap();
            assert!(status.success());
            direct.push(t.elapsed().as_secs_f64() * 1e6);
        }
        let mut rows = Vec::new();
        // `X=1 true` is not judged read-only (an assignment), so in bypass
        // it really runs in workspace_write; `true` alone runs read_only.
        for (label, params, command, profile) in [
            ("agentd, sandbox read_only", serde_json::json!({}), "true", "read_only"),
            ("agentd, workspace_write", serde_json::json!({"mode": "bypass"}), "X=1 true", "workspace_write"),
            (
                "  … network: false",
                serde_json::json!({"mode": "bypass", "sandbox": {"network": false}}),
                "X=1 true",
                "workspace_write",
            ),
            ("agentd, sandbox off", serde_json::json!({"sandbox": {"mode": "off"}}), "true", "off"),
        ] {
            rows.push((label, bash_calls(&socket, &ws, params, command, profile, calls).await));
        }
        (direct, rows)
    });
    let stats = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
    };
    let (d50, d99) = stats(direct);
    println!("{calls} calls of `true`");
    println!("{:<28} {:>9} {:>9} {:>14} {:>14}", "", "p50 µs", "p99 µs", "+p50 ms", "+p99 ms");
    println!("{:<28} {:>9.0} {:>9.0}", "bash -c true (direct)", d50, d99);
    for (label, v) in rows {
        let (a50, a99) = stats(v);
        println!("{label:<28} {a50:>9.0} {a99:>9.0} {:>14.2} {:>14.2}", (a50 - d50) / 1e3, (a99 - d99) / 1e3);
    }
    println!("goal: sandboxed overhead p50 <= 1.5 ms over the direct spawn");
    layer::layer_costs(&ws, &socket, calls.min(200));
}

/// `calls` sequential Bash calls of `true` in a session made with
/// `params` (cwd added); returns each round trip in µs.
async fn bash_calls(
    socket: &Path,
    cwd: &Path,
    mut params: serde_json::Value,
    command: &str,
    profile: &str,
    calls: usize,
) -> Vec<f64> {
    let (mut r, mut w) = connect(socket).await;
    let mut line = String::new();
    params["cwd"] = serde_json::json!(cwd);
    let create = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": params});
    w.write_all(format!("{create}\n").as_bytes()).await.unwrap();
    r.read_line(&mut line).await.unwrap();
    let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
    let sid = reply["result"]["session_id"].as_str().unwrap().to_owned();
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tool/call",
        "params": {"session_id": sid, "name": "Bash", "input": {"command": command}}});
    let request = format!("{request}\n");
    let mut out = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        w.write_all(request.as_bytes()).await.unwrap();
        line.clear();
        r.read_line(&mut line).await.unwrap();
        assert!(line.contains("\"is_error\":false"), "{line}");
        assert!(line.contains(&format!("\"sandbox\":\"{profile}\"")), "not run in {profile}: {line}");
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    out
}

/// One `tool/call` on a fresh line-level connection; returns (µs, reply).
async fn tool_call(socket: &Path, session: &str, name: &str, input: serde_json::Value) -> (f64, serde_json::Value) {
    let (mut r, mut w) = connect(socket).await;
    let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tool/call",
        "params": {"session_id": session, "name": name, "input": input}});
    let mut line = String::new();
    let t = Instant::now();
    w.write_all(format!("{request}\n").as_bytes()).await.unwrap();
    r.read_line(&mut line).await.unwrap();
    let took = t.elapsed().as_secs_f64() * 1e6;
    (took, serde_json::from_str(&line).unwrap())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Grep and Glob through the daemon against `rg` on the same tree.
fn search(args: &[String]) {
    let corpus = args
        .iter()
        .position(|a| a == "--corpus")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("agentd-corpus"));
    let corpus = std::fs::canonicalize(&corpus).expect("the corpus exists (scripts/make_corpus.sh)");
    let runs = flag(args, "--runs", 5);
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, socket) = started_agentd(dir.path(), false);
    let files = Command::new("rg").arg("--files").current_dir(&corpus).output().expect("rg is installed");
    let file_count = files.stdout.iter().filter(|b| **b == b'\n').count();
    println!("corpus {} ({file_count} files rg would search), median of {runs} runs", corpus.display());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let session = rt.block_on(async {
        let (mut r, mut w) = connect(&socket).await;
        let create =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": {"cwd": corpus}});
        w.write_all(format!("{create}\n").as_bytes()).await.unwrap();
        let mut line = String::new();
        r.read_line(&mut line).await.unwrap();
        let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
        reply["result"]["session_id"].as_str().unwrap().to_owned()
    });
    type Case = (&'static str, Vec<&'static str>, &'static str, serde_json::Value);
    let cases: Vec<Case> = vec![
        ("literal -l", vec!["-l", "fn main"], "Grep", serde_json::json!({"pattern": "fn main", "timeout_ms": 600000})),
        (
            "-i alternation -c",
            vec!["-c", "-i", "error|warning"],
            "Grep",
            serde_json::json!({"pattern": "error|warning", "-i": true, "output_mode": "count", "head_limit": 1, "timeout_ms": 600000}),
        ),
        (
            "word boundary -l",
            vec!["-l", "\\bunsafe\\s+fn\\b"],
            "Grep",
            serde_json::json!({"pattern": "\\bunsafe\\s+fn\\b", "timeout_ms": 600000}),
        ),
        (
            "files -g **/*.rs",
            vec!["--files", "-g", "**/*.rs"],
            "Glob",
            serde_json::json!({"pattern": "**/*.rs", "limit": 100}),
        ),
    ];
    println!("{:<22} {:>10} {:>10} {:>7}", "query", "rg ms", "agentd ms", "ratio");
    for (name, rg_args, tool, input) in cases {
        let mut rg_times = Vec::new();
        let mut our_times = Vec::new();
        for _ in 0..runs {
            let t = Instant::now();
            let out = Command::new("rg").args(&rg_args).current_dir(&corpus).output().unwrap();
            assert!(out.status.code().unwrap_or(2) < 2, "rg failed: {}", String::from_utf8_lossy(&out.stderr));
            rg_times.push(t.elapsed().as_secs_f64() * 1e6);
            let (took, reply) = rt.block_on(tool_call(&socket, &session, tool, input.clone()));
            assert_eq!(reply["result"]["is_error"], false, "{reply}");
            our_times.push(took);
        }
        let (rg, ours) = (median(rg_times), median(our_times));
        println!("{:<22} {:>10.1} {:>10.1} {:>6.2}x", name, rg / 1e3, ours / 1e3, ours / rg);
    }
}

/// The daemon's resident set size, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One connection that sends requests and reads their replies in order.
struct Conn {
    r: BufReader<tokio::net::unix::OwnedReadHalf>,
    w: tokio::net::unix::OwnedWriteHalf,
    line: String,
}

impl Conn {
    async fn open(socket: &Path) -> Conn {
        let (r, w) = connect(socket).await;
        Conn { r, w, line: String::new() }
    }

    async fn send(&mut self, request: &str) -> &str {
        self.w.write_all(request.as_bytes()).await.unwrap();
        self.line.clear();
        self.r.read_line(&mut self.line).await.unwrap();
        &self.line
    }

    async fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let reply = self.send(&format!("{request}\n")).await;
        let reply: serde_json::Value = serde_json::from_str(reply).unwrap();
        assert!(reply.get("error").is_none(), "{method}: {reply}");
        reply["result"].clone()
    }
}

/// The tool path against an empty call, and memory per session and per call.
fn calls(args: &[String]) {
    let calls = flag(args, "--calls", 2000);
    let ephemeral = args.iter().any(|a| a == "--ephemeral");
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for i in 0..10 {
        let body: String = (0..16).map(|l| format!("line {l} of file {i}: some text for a needle{l}\n")).collect();
        std::fs::write(ws.join(format!("f{i}.txt")), &body[..body.len().min(1024)]).unwrap();
    }
    let (daemon, socket) = started_agentd(dir.path(), ephemeral);
    let pid = daemon.child.id();
    println!(
        "{}",
        if ephemeral { "daemon keeps nothing on disk (--ephemeral)" } else { "daemon with the durable store" }
    );
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = Conn::open(&socket).await;
        let sid = c.call("session/create", serde_json::json!({"cwd": ws})).await["session_id"].as_str().unwrap().to_owned();
        let tool = |name: &str, input: serde_json::Value| {
            let r = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tool/call",
                "params": {"session_id": sid, "name": name, "input": input}});
            format!("{r}\n")
        };
        let cases: Vec<(&str, String, usize)> = vec![
            ("empty call (daemon/info)", format!("{REQUEST}\n"), calls),
            ("Read 1 KB", tool("Read", serde_json::json!({"file_path": "f3.txt"})), calls),
            ("Glob *.txt (10 files)", tool("Glob", serde_json::json!({"pattern": "*.txt"})), calls),
            ("Grep needle7 (10 files)", tool("Grep", serde_json::json!({"pattern": "needle7"})), calls),
            ("Grep content (10 files)", tool("Grep", serde_json::json!({"pattern": "needle7", "output_mode": "content"})), calls),
            ("Bash true", tool("Bash", serde_json::json!({"command": "true"})), calls / 10),
        ];
        println!("{:<26} {:>9} {:>9} {:>10} {:>8} {:>12}", "one client, one connection", "p50 µs", "p99 µs", "calls/s", "x empty", "8 clients/s");
        let mut empty = 0.0;
        let mut read_p50 = 0.0;
        for (name, request, n) in cases {
            for _ in 0..n.min(200) {
                let reply = c.send(&request).await;
                assert!(!reply.contains("\"is_error\":true") && !reply.contains("\"error\""), "{name}: {reply}");
            }
            let mut times = Vec::with_capacity(n);
            let start = Instant::now();
            for _ in 0..n {
                let t = Instant::now();
                c.send(&request).await;
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            let rate = n as f64 / start.elapsed().as_secs_f64();
            times.sort_by(f64::total_cmp);
            let (p50, p99) = (times[times.len() / 2], times[(times.len() * 99 / 100).min(times.len() - 1)]);
            if empty == 0.0 {
                empty = p50;
            }
            let parallel = {
                let tasks: Vec<_> = (0..8)
                    .map(|_| {
                        let socket = socket.clone();
                        let request = request.clone();
                        tokio::spawn(async move {
                            let mut c = Conn::open(&socket).await;
                            for _ in 0..n / 4 {
                                c.send(&request).await;
                            }
                        })
                    })
                    .collect();
                let start = Instant::now();
                for t in tasks {
                    t.await.unwrap();
                }
                (8 * (n / 4)) as f64 / start.elapsed().as_secs_f64()
            };
            println!("{name:<26} {p50:>9.0} {p99:>9.0} {rate:>10.0} {:>7.2}x {parallel:>12.0}", p50 / empty);
            if name.starts_with("Read") {
                read_p50 = p50;
            }
        }

        // Hooks: the same Read with one no-op command hook, and with one
        // socket hook a client answers with `{}`.
        {
            let hook = serde_json::json!({"PreToolUse": [{"matcher": "Read", "hooks": [{"type": "command", "command": "true"}]}]});
            let hooked = c.call("session/create", serde_json::json!({"cwd": ws, "hooks": hook})).await;
            let hooked = hooked["session_id"].as_str().unwrap().to_owned();
            let socket_sid = c.call("session/create", serde_json::json!({"cwd": ws})).await;
            let socket_sid = socket_sid["session_id"].as_str().unwrap().to_owned();
            let mut holder = Conn::open(&socket).await;
            // A harness that only answers hooks asks for their requests only.
            holder.call("turn/stream", serde_json::json!({"session_id": socket_sid, "kinds": ["hook/request"]})).await;
            holder.call("hooks/register", serde_json::json!({"session_id": socket_sid, "event": "PreToolUse", "matcher": "Read"})).await;
            let answering = socket_sid.clone();
            let answerer = tokio::spawn(async move {
                loop {
                    holder.line.clear();
                    if holder.r.read_line(&mut holder.line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let Ok(note) = serde_json::from_str::<serde_json::Value>(&holder.line) else { continue };
                    let event = &note["params"]["result"];
                    if event["type"] == "hook/request" {
                        // A notification: the answer needs no reply.
                        let answer = serde_json::json!({"jsonrpc": "2.0", "method": "hook/respond",
                            "params": {"session_id": answering, "request_id": event["request_id"], "output": {}}});
                        holder.w.write_all(format!("{answer}\n").as_bytes()).await.unwrap();
                    }
                }
            });
            let read_in = |sid: &str| {
                let r = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tool/call",
                    "params": {"session_id": sid, "name": "Read", "input": {"file_path": "f3.txt"}}});
                format!("{r}\n")
            };
            for (name, request, n) in [
                ("Read + command hook", read_in(&hooked), (calls / 10).max(50)),
                ("Read + socket hook", read_in(&socket_sid), calls),
            ] {
                let mut times = Vec::with_capacity(n);
                for _ in 0..n {
                    let t = Instant::now();
                    let reply = c.send(&request).await;
                    assert!(!reply.contains("\"is_error\":true"), "{name}: {reply}");
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                times.sort_by(f64::total_cmp);
                let (p50, p99) = (times[times.len() / 2], times[(times.len() * 99 / 100).min(times.len() - 1)]);
                println!(
                    "{name:<26} {p50:>9.0} {p99:>9.0} {:>10} {:>7.2}x   the hook adds {:.2}x an empty call",
                    "",
                    p50 / empty,
                    (p50 - read_p50) / empty
                );
            }
            answerer.abort();
        }

        // A turn of 10 Reads: submit, then the stream until it completes.
        {
            let mut stream = Conn::open(&socket).await;
            let sub = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "turn/stream", "params": {"session_id": sid}});
            stream.send(&format!("{sub}\n")).await;
            let mut times = Vec::new();
            for n in 0..(calls / 10).max(20) {
                let uses: Vec<serde_json::Value> = (0..10)
                    .map(|i| serde_json::json!({"id": format!("r{n}_{i}"), "name": "Read", "input": {"file_path": format!("f{i}.txt")}}))
                    .collect();
                let submit = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "turn/submit",
                    "params": {"session_id": sid, "tool_uses": uses, "end": true}});
                let t = Instant::now();
                c.send(&format!("{submit}\n")).await;
                loop {
                    stream.line.clear();
                    stream.r.read_line(&mut stream.line).await.unwrap();
                    if stream.line.contains("turn/completed") {
                        break;
                    }
                }
                times.push(t.elapsed().as_secs_f64() * 1e6);
            }
            times.sort_by(f64::total_cmp);
            println!("{:<26} {:>9.0} {:>9.0}", "turn of 10 Reads", times[times.len() / 2], times[times.len() * 99 / 100]);
        }

        // Memory: 1,000 idle sessions, then closed.
        let before = rss_kib(pid);
        let mut ids = Vec::new();
        for _ in 0..1000 {
            ids.push(c.call("session/create", serde_json::json!({"cwd": ws})).await["session_id"].as_str().unwrap().to_owned());
        }
        let with = rss_kib(pid);
        for id in &ids {
            c.call("session/close", serde_json::json!({"session_id": id})).await;
        }
        let after = rss_kib(pid);
        println!(
            "RSS: {before} KiB; with 1,000 more sessions {with} KiB ({:.1} KiB per session); after closing them {after} KiB",
            (with.saturating_sub(before)) as f64 / 1000.0
        );

        // Memory: calls in one session, past the point where its event log
        // is full and its journal compacted (4 MiB each, about 15,000
        // Reads): RSS after 10,000, 20,000, 40,000 and 80,000 calls, and
        // the growth per 10,000 calls from 20,000 on.
        let read = tool("Read", serde_json::json!({"file_path": "f3.txt"}));
        let mut at = Vec::new();
        let mut done = 0;
        for mark in [10_000, 20_000, 40_000, 80_000] {
            while done < mark {
                c.send(&read).await;
                done += 1;
            }
            at.push(rss_kib(pid));
        }
        println!(
            "RSS after 10,000 / 20,000 / 40,000 / 80,000 Read calls in one session: {} / {} / {} / {} KiB \
             ({:+.1} KiB per 10,000 calls from 20,000 on)",
            at[0],
            at[1],
            at[2],
            at[3],
            (at[3] as f64 - at[1] as f64) / 6.0
        );
    });
    drop(daemon);
}

/// Restart time with a full store.
fn restart(args: &[String]) {
    let sessions = flag(args, "--sessions", 1000);
    let per = flag(args, "--calls", 25);
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("f.txt"), "hello\n").unwrap();
    let agentd = agentd_bin();
    let socket = dir.path().join("agentd.sock");
    let start = || agentd_server("agentd", &agentd, dir.path(), &socket, false);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut daemon = start();
    wait_for(&socket);
    rt.block_on(async {
        let mut c = Conn::open(&socket).await;
        for _ in 0..sessions {
            let sid = c.call("session/create", serde_json::json!({"cwd": ws})).await["session_id"]
                .as_str()
                .unwrap()
                .to_owned();
            let read = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tool/call",
                "params": {"session_id": sid, "name": "Read", "input": {"file_path": "f.txt"}}});
            let read = format!("{read}\n");
            for _ in 0..per {
                c.send(&read).await;
            }
        }
    });
    let _ = Command::new("kill").arg("-TERM").arg(daemon.child.id().to_string()).status();
    let _ = daemon.child.wait();
    let store = dir.path().join("state/store");
    let bytes: u64 = walk_size(&store);
    let t = Instant::now();
    let _daemon = start();
    wait_for(&socket);
    let listed = rt.block_on(async {
        let mut c = Conn::open(&socket).await;
        c.call("session/list", serde_json::json!({})).await["sessions"].as_array().unwrap().len()
    });
    println!(
        "restart with {listed} sessions, {} events ({:.1} MB in the store): {:.0} ms until session/list answers",
        sessions * per * 4,
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64() * 1e3
    );
}

fn walk_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(
                    |e| {
                        if e.path().is_dir() {
                            walk_size(&e.path())
                        } else {
                            e.metadata().map(|m| m.len()).unwrap_or(0)
                        }
                    },
                )
                .sum()
        })
        .unwrap_or(0)
}

/// Where the binaries are: examples live in target/<profile>/examples/,
/// agentd and agentctl one level up.
fn bin_dir() -> PathBuf {
    let me = std::env::current_exe().unwrap();
    me.parent().and_then(Path::parent).unwrap().to_owned()
}

/// The built `agentd` (it must be).
fn agentd_bin() -> PathBuf {
    let agentd = bin_dir().join("agentd");
    assert!(agentd.exists(), "{} is not built: cargo build --release", agentd.display());
    agentd
}

/// The real `agentd` on `dir/agentd.sock` (see `agentd_server`), started:
/// the server and its socket.
fn started_agentd(dir: &Path, ephemeral: bool) -> (Server, PathBuf) {
    let socket = dir.join("agentd.sock");
    let daemon = agentd_server("agentd", &agentd_bin(), dir, &socket, ephemeral);
    wait_for(&socket);
    (daemon, socket)
}

/// The real `agentd` on `socket`, its state in `dir/state`, quiet; kept
/// in memory only with `ephemeral`.
fn agentd_server(name: &'static str, agentd: &Path, dir: &Path, socket: &Path, ephemeral: bool) -> Server {
    let child = Command::new(agentd)
        .arg("--socket")
        .arg(socket)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .env("RUST_LOG", "warn")
        .env("AGENTD_EPHEMERAL", if ephemeral { "1" } else { "0" })
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    Server { name, socket: socket.to_owned(), child }
}

/// curl through the network gate against curl directly, on one loopback
/// server in this process.
fn gate(args: &[String]) {
    use std::io::{Read, Write};
    let runs = flag(args, "--runs", 20);
    let small = flag(args, "--mb", 1);
    let dir = tempfile::tempdir().unwrap();
    let (_daemon, socket) = started_agentd(dir.path(), false);
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in server.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut head = Vec::new();
                let mut b = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut b) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&b[..n]),
                    }
                }
                let mb: usize = String::from_utf8_lossy(&head)
                    .split_whitespace()
                    .nth(1)
                    .and_then(|p| p.trim_start_matches('/').parse().ok())
                    .unwrap_or(1);
                let body = vec![b'x'; mb << 20];
                let _ =
                    write!(stream, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
                let _ = stream.write_all(&body);
            });
        }
    });
    let curl = |mb: usize| {
        format!(
            "curl -s --noproxy '' -o /dev/null -w '%{{time_total}} %{{speed_download}}\\n' http://127.0.0.1:{port}/{mb}"
        )
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let median = |mut v: Vec<(f64, f64)>| {
        v.sort_by(|a, b| a.0.total_cmp(&b.0));
        v[v.len() / 2]
    };
    let parse = |out: &str| -> (f64, f64) {
        let mut it = out.split_whitespace();
        let t: f64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        let s: f64 = it.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
        (t * 1e3, s / 1e6)
    };
    println!("curl of a file from a loopback server, median of {runs} runs");
    println!("{:<34} {:>10} {:>10} {:>8}", "", "ms", "MB/s", "ratio");
    for mb in [small, 64] {
        let direct: Vec<(f64, f64)> = (0..runs)
            .map(|_| {
                let out = std::process::Command::new("bash").arg("-c").arg(curl(mb)).output().unwrap();
                parse(&String::from_utf8_lossy(&out.stdout))
            })
            .collect();
        let gated = rt.block_on(async {
            let (mut r, mut w) = connect(&socket).await;
            let mut line = String::new();
            let create = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "session/create", "params": {
                "cwd": dir.path(), "mode": "bypass", "sandbox": {"network": {"allow_private_network": true}}}});
            w.write_all(format!("{create}\n").as_bytes()).await.unwrap();
            r.read_line(&mut line).await.unwrap();
            let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
            let sid = reply["result"]["session_id"].as_str().unwrap().to_owned();
            let mut out = Vec::new();
            for _ in 0..runs {
                let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tool/call", "params": {
                    "session_id": sid, "name": "Bash",
                    "input": {"command": curl(mb)}}});
                w.write_all(format!("{call}\n").as_bytes()).await.unwrap();
                line.clear();
                r.read_line(&mut line).await.unwrap();
                let reply: serde_json::Value = serde_json::from_str(&line).unwrap();
                out.push(parse(reply["result"]["content"][0]["text"].as_str().unwrap_or_default()));
            }
            out
        });
        let (d, g) = (median(direct), median(gated));
        println!("{:<34} {:>10.1} {:>10.0}", format!("{mb} MB direct"), d.0, d.1);
        println!("{:<34} {:>10.1} {:>10.0} {:>7.0}%", format!("{mb} MB through the gate"), g.0, g.1, 100.0 * g.1 / d.1);
    }
    println!("goal: through the gate >= 80% of the direct throughput");
}
