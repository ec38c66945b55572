//! `bench soak [--minutes 5] [--rate 200] [--clients 4]`: a daemon under a
//! steady mixed load (Read, Glob, Grep, Write, Edit, Bash in the sandbox;
//! each client's session closed and a new one opened every 497 calls),
//! its RSS every 30 s, and the slope over the second half: a daemon that
//! keeps what it should not grows there, one that does not is level.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Conn, flag, rss_kib, started_agentd};

/// Calls of one session before it is closed and another opened (a whole
/// number of rounds, so each session reads its file before writing it).
const SESSION_CALLS: usize = 497;

pub(super) fn soak(args: &[String]) {
    let minutes = flag(args, "--minutes", 5);
    let rate = flag(args, "--rate", 200).max(1);
    let clients = flag(args, "--clients", 4).max(1);
    let dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for i in 0..10 {
        std::fs::write(ws.join(format!("f{i}.txt")), format!("line one of {i}\nneedle {i}\n")).unwrap();
    }
    let (daemon, socket) = started_agentd(dir.path(), false);
    let pid = daemon.child.id();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let until = Instant::now() + Duration::from_secs(60 * minutes as u64);
    // Each client paces itself to its share of the rate.
    let every = Duration::from_secs_f64(clients as f64 / rate as f64);
    println!("soak: {minutes} min, {rate} calls/s over {clients} clients; RSS of the daemon every 30 s");
    let samples = rt.block_on(async {
        let workers: Vec<_> =
            (0..clients).map(|n| tokio::spawn(client(socket.clone(), ws.clone(), n, every, until))).collect();
        let start = Instant::now();
        let mut samples = vec![(0.0, rss_kib(pid))];
        while Instant::now() < until {
            tokio::time::sleep(Duration::from_secs(30).min(until.saturating_duration_since(Instant::now()))).await;
            let at = start.elapsed().as_secs_f64() / 60.0;
            samples.push((at, rss_kib(pid)));
            println!("  {at:5.1} min  {:>7} KiB", samples.last().unwrap().1);
        }
        let mut calls = 0;
        for w in workers {
            calls += w.await.unwrap();
        }
        println!("  {calls} calls ({:.0}/s)", calls as f64 / start.elapsed().as_secs_f64());
        samples
    });
    // Least squares over the second half.
    let half: Vec<(f64, f64)> =
        samples.iter().filter(|(t, _)| *t >= minutes as f64 / 2.0).map(|&(t, k)| (t, k as f64)).collect();
    if half.len() >= 2 {
        let n = half.len() as f64;
        let (mt, mk) = (half.iter().map(|s| s.0).sum::<f64>() / n, half.iter().map(|s| s.1).sum::<f64>() / n);
        let cov: f64 = half.iter().map(|(t, k)| (t - mt) * (k - mk)).sum();
        let var: f64 = half.iter().map(|(t, _)| (t - mt) * (t - mt)).sum();
        println!(
            "RSS {} KiB at the start, {} KiB at the end; second half: {:+.1} KiB/min",
            samples[0].1,
            samples.last().unwrap().1,
            cov / var
        );
    }
    drop(daemon);
}

/// One client's loop until `until`: a call every `every`; its number of calls.
async fn client(
    socket: std::path::PathBuf,
    ws: std::path::PathBuf,
    n: usize,
    every: Duration,
    until: Instant,
) -> usize {
    let own = ws.join(format!("client{n}.txt"));
    std::fs::write(&own, "state a\n").unwrap();
    let mut c = Conn::open(&socket).await;
    let mut calls = 0;
    let mut failed = 0;
    let mut sid = String::new();
    let mut next = Instant::now();
    while Instant::now() < until {
        if calls % SESSION_CALLS == 0 {
            if !sid.is_empty() {
                c.call("session/close", json!({ "session_id": sid })).await;
            }
            let created = c.call("session/create", json!({ "cwd": ws, "mode": "bypass" })).await;
            sid = created["session_id"].as_str().unwrap().to_owned();
        }
        // A session reads its file before it writes and edits it.
        let (name, input) = match calls % 7 {
            0 => ("Read", json!({ "file_path": ws.join(format!("f{}.txt", calls % 10)) })),
            1 => ("Glob", json!({ "pattern": "*.txt" })),
            2 => ("Grep", json!({ "pattern": "needle", "output_mode": "content" })),
            3 => ("Read", json!({ "file_path": own })),
            4 => ("Write", json!({ "file_path": own, "content": "state a\n" })),
            5 => ("Edit", json!({ "file_path": own, "old_string": "state a", "new_string": "state b" })),
            _ => ("Bash", json!({ "command": format!("echo {calls}") })),
        };
        let call = json!({ "jsonrpc": "2.0", "id": 1, "method": "tool/call",
            "params": { "session_id": sid, "name": name, "input": input } });
        let reply = c.send(&format!("{call}\n")).await;
        if reply.contains("\"is_error\":true") {
            failed += 1;
        }
        calls += 1;
        next += every;
        tokio::time::sleep_until(next.into()).await;
    }
    if failed > 0 {
        eprintln!("soak: client {n}: {failed} of {calls} calls failed");
    }
    calls
}
