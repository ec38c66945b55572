//! Executor benchmarks, against the real daemon (the test build's
//! `e2e-agentd`, which carries the test tools):
//!
//! - makespan of one turn of 10 concurrency-safe 200 ms calls against one
//!   such call (goal: at most 1.2x);
//! - time from writing a `turn/submit` of one block to receiving its
//!   `tool/started` event on the stream, on an idle daemon (goal: p99 at
//!   most 1 ms).
//!
//! ```text
//! cargo bench -p agentd-tests --bench executor
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, tool_use};
use serde_json::{Value, json};

fn main() {
    let d = StandaloneDaemon::start(&[], &[("RUST_LOG", "warn")]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = c.ok("session/create", json!({ "cwd": d.dir.path() })).await["session_id"].as_str().unwrap().to_owned();
        let mut events = EventStream::open(&d.socket, &sid, None).await.unwrap();
        let mut next_id = 0u64;
        let mut ids = move || {
            next_id += 1;
            format!("b{next_id}")
        };

        // Makespan.
        let mut one = Vec::new();
        let mut ten = Vec::new();
        for _ in 0..5 {
            for (n, out) in [(1, &mut one), (10, &mut ten)] {
                let uses: Vec<Value> = (0..n).map(|_| tool_use(&ids(), "TestSleep", json!({"ms": 200}))).collect();
                let start = Instant::now();
                let turn = c.ok("turn/submit", json!({"session_id": sid, "tool_uses": uses, "end": true})).await;
                events.until_turn_done(turn["turn_id"].as_str().unwrap()).await;
                out.push(start.elapsed());
            }
        }
        let median = |v: &mut Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let (m1, m10) = (median(&mut one), median(&mut ten));
        println!(
            "makespan: 1 call {:.1} ms, 10 safe calls {:.1} ms, ratio {:.3}x (goal <= 1.2x)",
            m1.as_secs_f64() * 1e3,
            m10.as_secs_f64() * 1e3,
            m10.as_secs_f64() / m1.as_secs_f64()
        );

        // Submit to started.
        let mut lat = Vec::new();
        for i in 0..2200 {
            let id = ids();
            let start = Instant::now();
            let line = json!({"jsonrpc": "2.0", "id": 1_000_000 + i, "method": "turn/submit",
                "params": {"session_id": sid, "tool_uses": [tool_use(&id, "TestEcho", json!({"text": "x"}))], "end": true}});
            c.send_line(line.to_string()).await;
            events.until(|e| e["type"] == "tool/started" && e["tool_use_id"] == json!(id)).await;
            let took = start.elapsed();
            c.recv_some().await; // the submit's reply
            events.until(|e| e["type"] == "turn/completed").await;
            if i >= 200 {
                lat.push(took);
            }
        }
        lat.sort();
        let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)].as_secs_f64() * 1e6;
        println!(
            "submit -> tool/started over {} calls: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs (goal p99 <= 1000 µs)",
            lat.len(),
            pct(0.5),
            pct(0.99),
            lat.last().unwrap().as_secs_f64() * 1e6
        );
    });
}
