//! The streaming executor through the socket: every invariant of
//! `daemon/src/executor/mod.rs`, the two reference cases of partitioning
//! (`daemon/src/executor/partition.rs`), cancellation at each level,
//! discard, resume with `after_seq`, and many clients at once.

use std::time::{Duration, Instant};

use agentd_tests::{EventStream, RawConn, TestDaemon, brief, tool_use, within};
use serde_json::{Value, json};

type Session = agentd_tests::StreamedSession;

async fn session(d: &TestDaemon, extra: Value) -> Session {
    d.streamed_session(extra).await
}

fn sleep(id: &str, ms: u64, safe: bool) -> Value {
    tool_use(id, "TestSleep", json!({ "ms": ms, "safe": safe }))
}

/// The order of `started`/`result` events, as brief strings.
fn lifecycle(events: &[Value]) -> Vec<String> {
    events.iter().filter(|e| e["type"] == "tool/started" || e["type"] == "tool/result").map(brief).collect()
}

fn result<'a>(events: &'a [Value], id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["type"] == "tool/result" && e["tool_use_id"] == json!(id))
        .unwrap_or_else(|| panic!("no result for {id}: {events:?}"))
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn invariant_2_reference_case_read_read_bash_read() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![sleep("a", 150, true), sleep("b", 150, true), sleep("ls", 50, false), sleep("c", 50, true)];
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    // [a,b] together, then [ls] alone, then [c].
    assert_eq!(
        lifecycle(&events),
        ["started:a", "started:b", "result:a", "result:b", "started:ls", "result:ls", "started:c", "result:c"]
    );
}

#[tokio::test]
async fn invariant_2_reference_case_glob_grep_bash_read_edit_glob() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![
        sleep("glob", 100, true),
        sleep("grep", 100, true),
        sleep("bash", 30, false),
        sleep("read", 30, true),
        sleep("edit", 30, false),
        sleep("glob2", 30, true),
    ];
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(
        lifecycle(&events),
        [
            "started:glob",
            "started:grep",
            "result:glob",
            "result:grep",
            "started:bash",
            "result:bash",
            "started:read",
            "result:read",
            "started:edit",
            "result:edit",
            "started:glob2",
            "result:glob2"
        ]
    );
}

#[tokio::test]
async fn invariant_2_the_cap_limits_calls_running_at_once() {
    // With a cap of 1, safe calls run one after the other: each starts only
    // after the one before has finished (and, being first, was yielded).
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "max_concurrency": 1 })).await;
    let uses = (0..3).map(|i| sleep(&format!("s{i}"), 30, true)).collect();
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(lifecycle(&events), ["started:s0", "result:s0", "started:s1", "result:s1", "started:s2", "result:s2"]);
}

#[tokio::test]
async fn calls_start_as_they_are_submitted_before_the_turn_ends() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let turn = s.submit(None, vec![sleep("first", 20, true)], false).await;
    let events = s.events.until(|e| e["type"] == "tool/result").await;
    assert_eq!(lifecycle(&events), ["started:first", "result:first"]);
    s.submit(Some(&turn), vec![tool_use("second", "TestEcho", json!({"text": "x"}))], true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(lifecycle(&events), ["started:second", "result:second"]);
}

#[tokio::test]
async fn invariant_3_results_in_request_order_and_progress_bypasses_it() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![
        sleep("slow", 400, true),
        tool_use("ticker", "TestSleep", json!({ "ms": 150, "ticks": 3 })),
        tool_use("echo", "TestEcho", json!({ "text": "fast" })),
    ];
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    let results: Vec<String> = events.iter().filter(|e| e["type"] == "tool/result").map(brief).collect();
    assert_eq!(results, ["result:slow", "result:ticker", "result:echo"]);
    let seq_of = |pred: &dyn Fn(&Value) -> bool| events.iter().find(|e| pred(e)).unwrap()["seq"].as_u64().unwrap();
    let first_tick = seq_of(&|e| e["type"] == "tool/progress");
    let slow_result = seq_of(&|e| e["type"] == "tool/result");
    assert!(first_tick < slow_result, "progress is not held back behind an earlier call's result");
    let ticks: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool/progress").collect();
    assert_eq!(ticks.len(), 3);
    assert_eq!(ticks[0]["render"], "tick 1/3");
    assert_eq!(ticks[2]["data"], json!({"tick": 3, "of": 3}));
    // seq grows by one per event.
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
}

#[tokio::test]
async fn invariant_4_a_failing_bash_call_cancels_its_siblings_only() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let other = s.submit(None, vec![sleep("other", 300, true)], true).await;
    let started = Instant::now();
    let uses = vec![
        sleep("long", 20_000, true),
        tool_use("bash", "TestShell", json!({ "ms": 50, "exit": 2, "safe": true })),
        sleep("queued", 10, false),
    ];
    let turn = s.submit(None, uses, false).await;
    let mut waiting = vec!["queued", "other"];
    let events = s
        .events
        .until(|e| {
            waiting.retain(|id| !(e["tool_use_id"] == *id && e["type"] == "tool/result"));
            waiting.is_empty()
        })
        .await;
    assert!(started.elapsed() < Duration::from_secs(15), "the 20 s sibling was cancelled");
    assert_eq!(result(&events, "other")["is_error"], false, "another turn is not touched");
    assert_eq!(text(result(&events, "bash")), "exit 2");
    for id in ["long", "queued"] {
        let r = result(&events, id);
        assert_eq!(r["is_error"], true);
        let msg = text(r);
        assert!(msg.contains("TestShell") && msg.contains("bash") && msg.contains("failed"), "{msg}");
    }
    // A call submitted to that turn later is cancelled at once, for the same reason.
    s.submit(Some(&turn), vec![tool_use("late", "TestEcho", json!({"text": "x"}))], true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert!(text(result(&events, "late")).contains("bash"), "{events:?}");
    let _ = other;
}

#[tokio::test]
async fn invariant_4_other_failures_and_sibling_cancel_never_do_not_propagate() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![sleep("ok", 200, true), tool_use("bad", "TestSleep", json!({"ms": 10, "fail": "boom"}))];
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(result(&events, "ok")["is_error"], false, "a non-Bash failure cancels nothing");
    assert_eq!(text(result(&events, "bad")), "boom");

    let mut s = session(&d, json!({ "sibling_cancel": "never" })).await;
    let uses = vec![sleep("ok", 200, true), tool_use("bash", "TestShell", json!({"ms": 10, "exit": 1, "safe": true}))];
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(result(&events, "ok")["is_error"], false, "sibling_cancel: never");
}

#[tokio::test]
async fn invariant_5_discard_drops_queued_and_running_calls_and_yields_nothing_more() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![
        tool_use("blocker", "TestBlock", json!({ "ms": 20_000 })),
        sleep("running", 20_000, true),
        sleep("queued", 10, false),
    ];
    let turn = s.submit(None, uses, false).await;
    s.events.until(|e| e["tool_use_id"] == "running" && e["type"] == "tool/started").await;
    let r = s.c.ok("turn/discard", json!({ "session_id": s.id, "turn_id": turn })).await;
    let mut discarded: Vec<String> = serde_json::from_value(r["discarded"].clone()).unwrap();
    discarded.sort();
    assert_eq!(discarded, ["blocker", "queued", "running"]);
    let started = Instant::now();
    // A later turn runs at once (the discarded block tool was stopped) and
    // nothing of the discarded turn appears.
    let next = s.submit(None, vec![sleep("after", 10, false)], true).await;
    let events = s.events.until_turn_done(&next).await;
    assert!(started.elapsed() < Duration::from_secs(15));
    assert!(events.iter().any(|e| e["type"] == "turn/discarded" && e["turn_id"] == json!(turn)));
    assert!(!events.iter().any(|e| e["type"] == "tool/result" && e["turn_id"] == json!(turn)), "{events:?}");
    let r = s.c.request("turn/submit", json!({ "session_id": s.id, "turn_id": turn, "tool_uses": [] })).await;
    assert_eq!(r["error"]["code"], json!(-32602), "a discarded turn takes no more blocks: {r}");
}

#[tokio::test]
async fn invariant_6_cancel_one_call_then_a_turn_then_everything() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let t1 = s.submit(None, vec![sleep("a", 20_000, true), sleep("b", 20_000, true)], true).await;
    let t2 = s.submit(None, vec![sleep("c", 20_000, true)], true).await;
    s.events.until(|e| e["tool_use_id"] == "c" && e["type"] == "tool/started").await;

    let r = s.c.ok("turn/cancel", json!({ "session_id": s.id, "tool_use_id": "a" })).await;
    assert_eq!(r["cancelled"], json!(["a"]));
    let events = s.events.until(|e| e["type"] == "tool/result").await;
    assert_eq!(brief(events.last().unwrap()), "result:a");
    assert!(text(events.last().unwrap()).contains("cancelled"));

    let r = s.c.ok("turn/cancel", json!({ "session_id": s.id, "turn_id": t2 })).await;
    assert_eq!(r["cancelled"], json!(["c"]), "only turn 2's call");
    let r = s.c.ok("turn/cancel", json!({ "session_id": s.id })).await;
    assert_eq!(r["cancelled"], json!(["b"]), "everything left: b");
    // Each turn's result comes as it is ready: neither waits for the other.
    let mut open = vec![t1.clone(), t2.clone()];
    let events = s
        .events
        .until(|e| {
            open.retain(|t| !(e["type"] == "turn/completed" && e["turn_id"] == json!(t)));
            open.is_empty()
        })
        .await;
    let mut results = lifecycle(&events);
    results.sort();
    assert_eq!(results, ["result:b", "result:c"]);

    let r = s.c.request("turn/cancel", json!({ "session_id": s.id, "tool_use_id": "nope" })).await;
    assert_eq!(r["error"]["code"], json!(-32602));
}

#[tokio::test]
async fn invariant_6_completed_results_survive_a_cancel() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![sleep("slow", 20_000, true), tool_use("done", "TestEcho", json!({"text": "kept"}))];
    let turn = s.submit(None, uses, true).await;
    s.events.until(|e| e["tool_use_id"] == "done" && e["type"] == "tool/started").await;
    // Cancel the running call only; the echo (done or about to be) keeps
    // its own result either way. The machine's unit test covers a turn-wide
    // cancel of a completed-but-unyielded call exactly.
    s.c.ok("turn/cancel", json!({ "session_id": s.id, "tool_use_id": "slow" })).await;
    let events = s.events.until_turn_done(&turn).await;
    assert!(text(result(&events, "slow")).contains("cancelled"));
    assert_eq!(text(result(&events, "done")), "kept", "a completed result is yielded as it was");
}

#[tokio::test]
async fn invariant_6_closing_the_session_cancels_everything_and_ends_the_stream() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    s.submit(
        None,
        vec![tool_use("blocker", "TestBlock", json!({"ms": 20_000})), sleep("sleeper", 20_000, true)],
        false,
    )
    .await;
    s.events.until(|e| e["tool_use_id"] == "sleeper" && e["type"] == "tool/started").await;
    let started = Instant::now();
    s.c.ok("session/close", json!({ "session_id": s.id })).await;
    let events = s.events.until(|e| e["type"] == "session/closed").await;
    assert!(started.elapsed() < Duration::from_secs(15), "even the block tool stopped");
    assert!(text(result(&events, "blocker")).contains("session closed"));
    assert!(text(result(&events, "sleeper")).contains("session closed"));
    // The subscription ends after session/closed: unsubscribing finds it gone.
    let deadline = Instant::now() + agentd_tests::STEP;
    while s.events.unsubscribe().await {
        assert!(Instant::now() < deadline, "the subscription outlived its session");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn invariant_7_block_tools_finish_when_their_turn_is_cancelled() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![tool_use("suite", "TestBlock", json!({"ms": 300})), sleep("install", 20_000, true)];
    let turn = s.submit(None, uses, true).await;
    s.events.until(|e| e["tool_use_id"] == "install" && e["type"] == "tool/started").await;
    s.c.ok("turn/cancel", json!({ "session_id": s.id, "turn_id": turn })).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(text(result(&events, "suite")), "finished", "the block tool ran to its end");
    assert!(text(result(&events, "install")).contains("cancelled"));
}

#[tokio::test]
async fn invariant_8_context_modifiers_apply_when_results_are_yielded() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "tools": { "defer": { "mode": "always" } } })).await;
    let uses =
        vec![sleep("first", 300, true), tool_use("search", "ToolSearch", json!({"query": "select:TestDeferred"}))];
    let turn = s.submit(None, uses, true).await;
    s.events.until(|e| e["tool_use_id"] == "search" && e["type"] == "tool/started").await;
    // ToolSearch has finished, but its result waits behind `first`: its
    // modifier is not applied yet.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let list = s.c.ok("tools/list", json!({ "session_id": s.id })).await;
    assert_eq!(
        list["deferred"],
        json!(["CronCreate", "CronDelete", "CronList", "ListAgents", "Monitor", "SendMessage", "TestDeferred"])
    );
    s.events.until_turn_done(&turn).await;
    let list = s.c.ok("tools/list", json!({ "session_id": s.id })).await;
    assert_eq!(
        list["deferred"],
        json!(["CronCreate", "CronDelete", "CronList", "ListAgents", "Monitor", "SendMessage"])
    );
    // And a later turn can call the loaded tool.
    let next = s.submit(None, vec![tool_use("use", "TestDeferred", json!({}))], true).await;
    let events = s.events.until_turn_done(&next).await;
    assert_eq!(text(result(&events, "use")), "TestDeferred ran");
}

#[tokio::test]
async fn invariant_8_a_later_call_of_the_same_turn_sees_an_earlier_modifier() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({ "tools": { "defer": { "mode": "always" } } })).await;
    // The unsafe call in between makes TestDeferred start only after
    // ToolSearch's result (and modifier) is out.
    let uses = vec![
        tool_use("search", "ToolSearch", json!({"query": "select:TestDeferred"})),
        tool_use("between", "TestShell", json!({"ms": 10})),
        tool_use("use", "TestDeferred", json!({})),
    ];
    let turn = s.submit(None, uses, true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(text(result(&events, "use")), "TestDeferred ran", "{events:?}");
}

#[tokio::test]
async fn invariant_9_a_turn_completes_once_after_it_ends() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let turn = s.submit(None, vec![tool_use("e1", "TestEcho", json!({"text": "1"}))], false).await;
    s.events.until(|e| e["type"] == "tool/result").await;
    s.submit(Some(&turn), vec![tool_use("e2", "TestEcho", json!({"text": "2"}))], false).await;
    s.events.until(|e| e["type"] == "tool/result").await;
    s.submit(Some(&turn), vec![], true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(events.len(), 1, "only turn/completed: {events:?}");
    // Probe: the next event is the probe's, not a second completion.
    let probe = s.submit(None, vec![], true).await;
    let events = s.events.until_turn_done(&probe).await;
    assert_eq!(events.len(), 1);
}

#[tokio::test]
async fn bad_blocks_are_error_results_and_bad_submits_change_nothing() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let uses = vec![
        tool_use("unknown", "NoSuchTool", json!({})),
        tool_use("invalid", "TestEcho", json!({"text": 1})),
        tool_use("ok", "TestEcho", json!({"text": "fine"})),
    ];
    let turn = s.submit(None, uses, false).await;
    let events = s.events.until(|e| e["tool_use_id"] == "ok" && e["type"] == "tool/result").await;
    assert!(text(result(&events, "unknown")).contains("no tool named"));
    assert!(text(result(&events, "invalid")).contains("field `text`"));
    assert_eq!(text(result(&events, "ok")), "fine");

    for (uses, needle) in [
        (vec![tool_use("ok", "TestEcho", json!({"text": "again"}))], "already submitted"),
        (
            vec![tool_use("x", "TestEcho", json!({"text": "1"})), tool_use("x", "TestEcho", json!({"text": "2"}))],
            "already submitted",
        ),
        (vec![tool_use("", "TestEcho", json!({"text": "1"}))], "must not be empty"),
    ] {
        let r = s.c.request("turn/submit", json!({ "session_id": s.id, "turn_id": turn, "tool_uses": uses })).await;
        assert_eq!(r["error"]["code"], json!(-32602), "{r}");
        assert!(r["error"]["message"].as_str().unwrap().contains(needle), "{r}");
    }
    // The turn is still usable, and nothing of the refused submits ran.
    s.submit(Some(&turn), vec![tool_use("last", "TestEcho", json!({"text": "end"}))], true).await;
    let events = s.events.until_turn_done(&turn).await;
    assert_eq!(lifecycle(&events), ["started:last", "result:last"]);
    let r = s.c.request("turn/submit", json!({ "session_id": s.id, "turn_id": turn, "tool_uses": [] })).await;
    assert!(r["error"]["message"].as_str().unwrap().contains("has ended"), "{r}");
}

#[tokio::test]
async fn a_client_that_disconnects_resumes_with_after_seq() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    let turn = s.submit(None, vec![tool_use("one", "TestEcho", json!({"text": "1"}))], false).await;
    let seen = s.events.until(|e| e["type"] == "tool/result").await;
    let last_seen = seen.last().unwrap()["seq"].as_u64().unwrap();
    let Session { mut c, id, events } = s;
    drop(events); // the client vanishes
    let two = vec![tool_use("two", "TestEcho", json!({"text": "2"}))];
    c.ok("turn/submit", json!({ "session_id": id, "turn_id": turn, "tool_uses": two, "end": true })).await;
    let mut resumed = EventStream::open(&d.socket, &id, Some(last_seen)).await.unwrap();
    let events = resumed.until_turn_done(&turn).await;
    assert_eq!(events[0]["seq"].as_u64().unwrap(), last_seen + 1, "no gap, no repeat");
    let kinds: Vec<String> = events.iter().map(brief).collect();
    assert_eq!(kinds, ["queued:two", "started:two", "result:two", "completed"]);

    let err = EventStream::open(&d.socket, &id, Some(1_000_000)).await.err().unwrap();
    assert!(err["error"]["message"].as_str().unwrap().contains("ahead"), "{err}");
    let err = EventStream::open(&d.socket, "no-such-session", None).await.err().unwrap();
    assert_eq!(err["error"]["code"], json!(-32001));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_from_a_point_no_longer_kept_is_a_clear_error() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    // 3 events per call: past the 10,000 kept.
    let mut turn = None;
    for chunk in 0..7 {
        let uses = (0..500).map(|i| tool_use(&format!("e{chunk}_{i}"), "TestEcho", json!({"text": "x"}))).collect();
        turn = Some(s.submit(turn.as_deref(), uses, chunk == 6).await);
    }
    let turn = turn.unwrap();
    within("turn", s.events.until_turn_done(&turn)).await;
    let err = EventStream::open(&d.socket, &s.id, Some(1)).await.err().unwrap();
    assert!(err["error"]["message"].as_str().unwrap().contains("no longer kept"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_clients_times_two_hundred_calls_lose_and_repeat_nothing() {
    let d = TestDaemon::start().await;
    let socket = d.socket.clone();
    let cwd = d.dir.path().to_owned();
    let clients: Vec<_> = (0..64)
        .map(|client| {
            let socket = socket.clone();
            let cwd = cwd.clone();
            tokio::spawn(async move {
                let mut c = RawConn::connect(&socket).await;
                let sid = c.session(json!({ "cwd": cwd })).await;
                let mut events = EventStream::open(&socket, &sid, None).await.unwrap();
                let mut turn: Option<String> = None;
                for chunk in 0..10 {
                    let uses: Vec<Value> = (0..20)
                        .map(|i| {
                            let id = format!("c{client}_{}", chunk * 20 + i);
                            tool_use(&id, "TestEcho", json!({ "text": id }))
                        })
                        .collect();
                    let mut params = json!({ "session_id": sid, "tool_uses": uses, "end": chunk == 9 });
                    if let Some(t) = &turn {
                        params["turn_id"] = json!(t);
                    }
                    turn = Some(c.ok("turn/submit", params).await["turn_id"].as_str().unwrap().to_owned());
                }
                let events = events.until_turn_done(turn.as_deref().unwrap()).await;
                let results: Vec<&Value> = events.iter().filter(|e| e["type"] == "tool/result").collect();
                let expected: Vec<String> = (0..200).map(|i| format!("c{client}_{i}")).collect();
                let got: Vec<String> = results.iter().map(|r| r["tool_use_id"].as_str().unwrap().to_owned()).collect();
                assert_eq!(got, expected, "client {client}: every result once, in order");
                assert!(results.iter().all(|r| r["content"][0]["text"] == r["tool_use_id"]));
            })
        })
        .collect();
    for c in clients {
        within("a client's 200 calls", c).await.unwrap();
    }
}

/// A long session keeps what replay and cancel need, not every call it
/// ever made: after thousands of calls (one-call turns, and a turn left
/// open), the executor holds a handful of records and the event log stays
/// within its bounds; ids of forgotten calls and turns are still known.
#[tokio::test]
async fn a_long_session_keeps_bounded_records() {
    let d = TestDaemon::start().await;
    let mut s = session(&d, json!({})).await;
    for i in 0..3000 {
        let r = s.c.tool(&s.id, "TestEcho", json!({ "text": format!("{i}") })).await;
        assert_eq!(r["is_error"], false);
    }
    // The session's first stream fell far behind (nobody read it); a new one.
    s.events = EventStream::open(&d.socket, &s.id, None).await.unwrap();
    let open = s.submit(None, vec![tool_use("first", "TestEcho", json!({"text": "1"}))], false).await;
    for i in 0..500 {
        s.submit(Some(&open), vec![tool_use(&format!("u{i}"), "TestEcho", json!({"text": "x"}))], false).await;
    }
    s.events.until(|e| e["tool_use_id"] == "u499" && e["type"] == "tool/result").await;
    let session = d.state.sessions.handle(&s.id).unwrap();
    let (calls, turns, events, bytes) = session.executor.kept();
    assert!(calls <= 2 && turns <= 2, "{calls} calls and {turns} turns kept");
    assert!(events <= 10_000 && bytes <= 4 * 1024 * 1024, "{events} events, {bytes} bytes");
    // Forgotten, not unknown: an old id is still a duplicate, an old turn
    // still ended, and cancelling either is a no-op.
    let r = s.c.request("turn/submit", json!({ "session_id": s.id, "turn_id": open, "tool_uses": [tool_use("first", "TestEcho", json!({"text": "again"}))] })).await;
    assert!(r["error"]["message"].as_str().unwrap_or_default().contains("already submitted"), "{r}");
    let r = s.c.ok("turn/cancel", json!({ "session_id": s.id, "tool_use_id": "first" })).await;
    assert_eq!(r["cancelled"], json!([]));
}
