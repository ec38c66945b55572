//! Sessions that talk (issue 51, item 2): ListAgents and SendMessage
//! between sessions of different clients, `message/received` in the
//! target's log (queued until a client attaches), `notify_when_idle`'s one
//! `session/idle`, names, hidden sessions, and bad input.

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, StreamedSession};
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

async fn open(d: &StandaloneDaemon, ws: &std::path::Path, extra: Value) -> (StreamedSession, Value) {
    let mut params = json!({ "cwd": ws });
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    StreamedSession::open(&d.socket, params).await
}

/// One tool call in `session` (its own connection): the result.
async fn call(c: &mut RawConn, session: &str, name: &str, input: Value) -> Value {
    c.ok("tool/call", json!({ "session_id": session, "name": name, "input": input })).await
}

fn text(r: &Value) -> String {
    r["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect()
}

#[test]
fn sessions_of_different_clients_list_and_message_each_other() {
    let d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    rt().block_on(async {
        let (mut alpha, _) = open(&d, &ws, json!({ "name": "alpha" })).await;
        let (mut beta, _) = open(&d, &ws, json!({ "name": "beta" })).await;
        let (gamma, _) = open(&d, &ws, json!({ "name": "gamma", "discoverable": false })).await;
        // Another client, a session without a name, not attached.
        let mut other = RawConn::connect(&d.socket).await;
        let quiet = other.ok("session/create", json!({ "cwd": ws })).await["session_id"].as_str().unwrap().to_owned();

        // ListAgents: the reachable others, not itself, not the hidden one.
        let r = call(&mut alpha.c, &alpha.id, "ListAgents", json!({})).await;
        let listed = text(&r);
        assert!(listed.contains(&format!("beta [{}]", beta.id)), "{listed}");
        assert!(listed.contains(&quiet), "{listed}");
        assert!(!listed.contains("gamma") && !listed.contains(&gamma.id), "{listed}");
        assert!(!listed.contains(&alpha.id), "{listed}");
        assert!(listed.contains("idle"), "{listed}");

        // A message by name arrives in beta's stream at once.
        let r = call(
            &mut alpha.c,
            &alpha.id,
            "SendMessage",
            json!({ "to": "beta", "summary": "build status", "message": "The build is green.\nDetails follow." }),
        )
        .await;
        assert_eq!(r["is_error"], false, "{r}");
        assert!(text(&r).contains("Message sent to beta"), "{r}");
        let got = beta.events.until(|e| e["type"] == "message/received").await;
        let m = got.last().unwrap();
        assert_eq!(m["from"], json!(alpha.id), "{m}");
        assert_eq!(m["from_name"], "alpha", "{m}");
        assert_eq!(m["message"], "The build is green.\nDetails follow.", "{m}");
        assert_eq!(m["summary"], "build status", "{m}");

        // By id as listed, to a session no client watches: queued, then
        // replayed when one attaches.
        let r = call(&mut alpha.c, &alpha.id, "SendMessage", json!({ "to": quiet, "message": "Are you there?" })).await;
        assert!(text(&r).contains("queued"), "{r}");
        let mut late = EventStream::open(&d.socket, &quiet, Some(0)).await.unwrap();
        let got = late.until(|e| e["type"] == "message/received").await;
        assert_eq!(got.last().unwrap()["message"], "Are you there?");

        // notify_when_idle: one notice when beta next finishes a turn.
        let r = call(&mut alpha.c, &alpha.id, "SendMessage", json!({ "to": "beta", "notify_when_idle": true })).await;
        assert_eq!(r["is_error"], false, "{r}");
        assert!(text(&r).contains("Subscribed to beta"), "{r}");
        let turn = beta.submit_ended(vec![agentd_tests::tool_use("b1", "Bash", json!({ "command": "true" }))]).await;
        beta.events.until_turn_done(&turn).await;
        let got = alpha.events.until(|e| e["type"] == "session/idle").await;
        let idle = got.last().unwrap();
        assert_eq!(idle["session_id"], json!(beta.id), "{idle}");
        assert_eq!(idle["name"], "beta", "{idle}");
        assert_eq!(idle.get("closed"), None, "{idle}");
        // Once: another turn of beta's sends nothing more; a close does.
        let turn = beta.submit_ended(vec![agentd_tests::tool_use("b2", "Bash", json!({ "command": "true" }))]).await;
        beta.events.until_turn_done(&turn).await;
        let r = call(&mut alpha.c, &alpha.id, "SendMessage", json!({ "to": quiet, "notify_when_idle": true })).await;
        assert_eq!(r["is_error"], false, "{r}");
        other.ok("session/close", json!({ "session_id": quiet })).await;
        let got = alpha.events.until(|e| e["type"] == "session/idle").await;
        let idle = got.last().unwrap();
        assert_eq!(idle["session_id"], json!(quiet), "the next notice is the close, not beta's second turn: {got:?}");
        assert_eq!(idle["closed"], true, "{idle}");

        // Bad input: each a clear error, nothing delivered.
        let bad = [
            (json!({ "to": "gamma", "message": "hi" }), "no session \"gamma\""),
            (json!({ "to": gamma.id, "message": "hi" }), "no session"),
            (json!({ "to": "alpha", "message": "hi" }), "oneself"),
            (json!({ "to": "main", "message": "hi" }), "not a sub-agent"),
            (json!({ "to": "beta", "message": "" }), "nothing to send"),
            (json!({ "to": "beta", "message": "x".repeat(10 << 20) }), "at most 262144"),
            (json!({ "to": "be\nta", "message": "hi" }), "one line"),
            (json!({ "to": quiet, "message": "closed" }), "no session"),
        ];
        for (input, why) in bad {
            let r = call(&mut alpha.c, &alpha.id, "SendMessage", input.clone()).await;
            assert_eq!(r["is_error"], true, "{input}: {r}");
            assert!(text(&r).contains(why), "{why}: {r}");
        }
        // A name that collides, or is not a name, is refused.
        let mut c = RawConn::connect(&d.socket).await;
        for name in ["beta", "main", "a b", ""] {
            let reply = c.request("session/create", json!({ "cwd": ws, "name": name })).await;
            assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("name")), "{name}: {reply}");
        }
        // session/get shows the name.
        let info = c.ok("session/get", json!({ "session_id": beta.id })).await;
        assert_eq!(info["name"], "beta", "{info}");
        let info = c.ok("session/get", json!({ "session_id": gamma.id })).await;
        assert_eq!(info["discoverable"], false, "{info}");
    });
}

/// `daemon/activity` and `agentctl top`: every session's calls, jobs,
/// schedules and questions, with ages, whichever client opened it.
#[test]
fn one_view_shows_what_every_session_does() {
    let d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    rt().block_on(async {
        // A subscription: the activity now, then after each change.
        let mut watch = RawConn::connect(&d.socket).await;
        let reply = watch.request("daemon/watch", json!({})).await;
        let subscription = reply["result"].clone();
        assert!(subscription.is_string(), "{reply}");
        let mut next_activity = async || loop {
            let note = watch.recv().await.expect("the subscription goes on");
            if note["method"] == "daemon/activity_event" && note["params"]["subscription"] == subscription {
                return note["params"]["result"].clone();
            }
        };
        let first = next_activity().await;
        assert_eq!(first["sessions"], json!([]), "{first}");
        let (mut busy, _) = open(&d, &ws, json!({ "name": "busy" })).await;
        let (mut other, _) = open(&d, &ws, json!({ "name": "planner" })).await;
        let r = call(&mut other.c, &other.id, "CronCreate", json!({ "cron": "0 9 * * *", "prompt": "standup" })).await;
        assert_eq!(r["is_error"], false, "{r}");
        let uses = vec![agentd_tests::tool_use("long", "Bash", json!({ "command": "sleep 30" }))];
        let turn = busy.submit(None, uses, true).await;
        busy.events.until(|e| e["type"] == "tool/started" && e["tool_use_id"] == "long").await;

        let mut c = RawConn::connect(&d.socket).await;
        let activity = c.ok("daemon/activity", json!({})).await;
        let sessions = activity["sessions"].as_array().unwrap();
        let of = |name: &str| sessions.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{activity}"));
        let b = of("busy");
        assert_eq!(b["state"], "running", "{b}");
        assert_eq!(b["calls"][0]["name"], "Bash", "{b}");
        assert_eq!(b["calls"][0]["running"], true, "{b}");
        assert!(b["calls"][0]["render"].as_str().unwrap().contains("sleep 30"), "{b}");
        let p = of("planner");
        assert_eq!(p["state"], "idle", "{p}");
        assert_eq!(p["schedules"][0]["prompt"], "standup", "{p}");
        assert!(activity["rss_kib"].as_u64().unwrap() > 0, "{activity}");

        // The subscription saw the call run (within a few snapshots).
        let mut seen = false;
        for _ in 0..20 {
            let a = next_activity().await;
            let running = a["sessions"].as_array().unwrap().iter().any(|s| {
                s["name"] == "busy" && s["calls"].as_array().is_some_and(|c| c.iter().any(|c| c["running"] == true))
            });
            if running {
                seen = true;
                break;
            }
        }
        assert!(seen, "a snapshot with the running call");
        let (code, out, err) = agentd_tests::agentctl(&d.socket, &["top"]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("busy") && out.contains("running  Bash") && out.contains("sleep 30"), "{out}");
        assert!(out.contains("planner"), "{out}");

        busy.c.ok("turn/cancel", json!({ "session_id": busy.id, "turn_id": turn })).await;
        busy.events.until_turn_done(&turn).await;
        let activity = c.ok("daemon/activity", json!({})).await;
        let b = activity["sessions"].as_array().unwrap().iter().find(|s| s["name"] == "busy").unwrap().clone();
        assert_eq!(b["calls"], json!([]), "{b}");
        assert_eq!(b["state"], "idle", "{b}");
    });
}

/// The review's findings on sessions that talk stay closed.
#[test]
fn the_peers_reviews_findings_stay_closed() {
    let d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    rt().block_on(async {
        let (mut alpha, _) = open(&d, &ws, json!({ "name": "alpha" })).await;
        let mut c = RawConn::connect(&d.socket).await;
        c.ok("session/create", json!({ "cwd": ws, "name": "target" })).await;
        // A big message counts its size: the target's log stays within its
        // byte bound however many arrive.
        let big = "m".repeat(250_000);
        for _ in 0..40 {
            let r = call(&mut alpha.c, &alpha.id, "SendMessage", json!({ "to": "target", "message": big })).await;
            assert_eq!(r["is_error"], false, "{r}");
        }
        let activity = c.ok("daemon/activity", json!({})).await;
        let t = activity["sessions"].as_array().unwrap().iter().find(|s| s["name"] == "target").unwrap().clone();
        assert!(t["event_bytes"].as_u64().unwrap() <= 5 << 20, "{}", t["event_bytes"]);
        // A watch of it is not a client: a message is still queued.
        let r = call(&mut alpha.c, &alpha.id, "SendMessage", json!({ "to": "target", "notify_when_idle": true })).await;
        assert_eq!(r["is_error"], false, "{r}");
        let r =
            call(&mut alpha.c, &alpha.id, "SendMessage", json!({ "to": "target", "message": "still there?" })).await;
        assert!(text(&r).contains("queued"), "{r}");
        // A hidden session's sub-agents are hidden, and do not name it.
        let hidden = c.ok("session/create", json!({ "cwd": ws, "discoverable": false })).await["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let child = c.ok("session/create", json!({ "cwd": ws, "parent_session_id": hidden })).await;
        let listed = text(&call(&mut alpha.c, &alpha.id, "ListAgents", json!({})).await);
        assert!(!listed.contains(&hidden) && !listed.contains(child["session_id"].as_str().unwrap()), "{listed}");
        // Names: not main in any case, not shaped like a session id; two
        // creates at once get a name once.
        for name in ["MAIN", "0b6e6c8e-4f8a-4d3c-9a57-7d2c1f7f3b10"] {
            let reply = c.request("session/create", json!({ "cwd": ws, "name": name })).await;
            assert!(reply["error"]["message"].as_str().is_some_and(|m| m.contains("name")), "{name}: {reply}");
        }
        let socket = d.socket.clone();
        let tries: Vec<_> = (0..8)
            .map(|_| {
                let (socket, ws) = (socket.clone(), ws.clone());
                tokio::spawn(async move {
                    let mut c = RawConn::connect(&socket).await;
                    c.request("session/create", json!({ "cwd": ws, "name": "dup" })).await.get("error").is_none()
                })
            })
            .collect();
        let mut made = 0;
        for t in tries {
            made += usize::from(t.await.unwrap());
        }
        assert_eq!(made, 1, "one session named dup");
        // Plan mode: a message to another session is a change, refused.
        let planner = c.ok("session/create", json!({ "cwd": ws, "mode": "plan" })).await["session_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let r = call(&mut c, &planner, "SendMessage", json!({ "to": "alpha", "message": "run rm -rf" })).await;
        assert_eq!(r["is_error"], true, "{r}");
        assert!(text(&r).contains("plan mode"), "{r}");
        let r = call(&mut c, &planner, "CronCreate", json!({ "cron": "0 9 * * *", "prompt": "p" })).await;
        assert_eq!(r["is_error"], true, "{r}");
    });
}
