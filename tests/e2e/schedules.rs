//! Schedules owned by the daemon (issue 51, item 1): CronCreate, CronList
//! and CronDelete; firings as `cron/fired` events; a durable schedule
//! survives a restart, and a firing missed while the daemon was down fires
//! once when it is back, and says so; bounds and bad input.

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, agentctl};
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

async fn call(c: &mut RawConn, session: &str, name: &str, input: Value) -> Value {
    c.ok("tool/call", json!({ "session_id": session, "name": name, "input": input })).await
}

fn text(r: &Value) -> String {
    r["content"].as_array().into_iter().flatten().filter_map(|b| b["text"].as_str()).collect()
}

fn scheduled_id(r: &Value) -> String {
    let t = text(r);
    t.strip_prefix("Scheduled ").and_then(|t| t.split(' ').next()).unwrap_or_else(|| panic!("{r}")).to_owned()
}

#[test]
fn schedules_fire_into_the_session_and_outlive_a_restart() {
    let mut d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    let jobs_file = d.dir.path().join("state/schedules/jobs.json");
    let (session, every, missed) = rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let s = c.ok("session/create", json!({ "cwd": ws })).await["session_id"].as_str().unwrap().to_owned();
        let r =
            call(&mut c, &s, "CronCreate", json!({ "cron": "* * * * *", "prompt": "every minute", "durable": true }))
                .await;
        assert_eq!(r["is_error"], false, "{r}");
        assert!(text(&r).contains("(every minute; recurring, ends after 30 days; durable)"), "{r}");
        let every = scheduled_id(&r);
        let r = call(
            &mut c,
            &s,
            "CronCreate",
            json!({ "cron": "0 3 * * *", "prompt": "missed one", "recurring": false, "durable": true }),
        )
        .await;
        assert!(text(&r).contains("one-shot; durable"), "{r}");
        let missed = scheduled_id(&r);

        // Bad input: a clear error, nothing made.
        for (input, why) in [
            (json!({ "cron": "0 0 31 2 *", "prompt": "p" }), "never fires"),
            (json!({ "cron": "61 * * * *", "prompt": "p" }), "minute: 61"),
            (json!({ "cron": "* * * *", "prompt": "p" }), "5"),
            (json!({ "cron": "* * * * *", "prompt": " " }), "empty"),
            (json!({ "cron": "* * * * *", "prompt": "x".repeat(70_000) }), "longer than"),
        ] {
            let r = call(&mut c, &s, "CronCreate", input.clone()).await;
            assert_eq!(r["is_error"], true, "{input}: {r}");
            assert!(text(&r).contains(why), "{why}: {r}");
        }
        // At most 50 a session.
        let mut extra = Vec::new();
        loop {
            let r = call(&mut c, &s, "CronCreate", json!({ "cron": "0 4 * * *", "prompt": "fill" })).await;
            if r["is_error"] == true {
                assert!(text(&r).contains("50 schedules"), "{r}");
                break;
            }
            extra.push(scheduled_id(&r));
            assert!(extra.len() < 60, "no bound");
        }
        assert_eq!(extra.len(), 48);
        for id in &extra {
            let r = call(&mut c, &s, "CronDelete", json!({ "id": id })).await;
            assert!(text(&r).starts_with("Cancelled"), "{r}");
        }
        let r = call(&mut c, &s, "CronDelete", json!({ "id": "nope" })).await;
        assert_eq!(r["is_error"], true, "{r}");

        let r = call(&mut c, &s, "CronList", json!({})).await;
        let listed = text(&r);
        assert!(listed.find(&every).unwrap() < listed.find(&missed).unwrap(), "soonest first: {listed}");
        (s, every, missed)
    });
    let (code, out, err) = agentctl(&d.socket, &["cron", "list", &session]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&every) && out.contains("durable"), "{out}");

    // The daemon is down when the one-shot is due: it fires once when the
    // daemon is back, saying so.
    // (Killed, not stopped: nothing durable is lost across kill -9.)
    d.signal(nix::sys::signal::Signal::SIGKILL);
    d.wait_exit();
    let mut jobs: Vec<Value> = serde_json::from_slice(&std::fs::read(&jobs_file).unwrap()).unwrap();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
    for j in &mut jobs {
        if j["id"] == json!(missed) {
            j["next_at_ms"] = json!(now - 600_000);
        }
    }
    std::fs::write(&jobs_file, serde_json::to_vec(&jobs).unwrap()).unwrap();
    d.restart();
    rt().block_on(async {
        let mut events = EventStream::open(&d.socket, &session, Some(0)).await.unwrap();
        let fired = events.until(|e| e["type"] == "cron/fired" && e["cron_id"] == json!(missed)).await;
        let f = fired.last().unwrap();
        assert_eq!(f["prompt"], "missed one", "{f}");
        assert_eq!(f["missed"], true, "{f}");
        let mut c = RawConn::connect(&d.socket).await;
        let list = c.ok("cron/list", json!({ "session_id": session })).await;
        let ids: Vec<&str> = list["jobs"].as_array().unwrap().iter().map(|j| j["cron_id"].as_str().unwrap()).collect();
        assert_eq!(ids, [every.as_str()], "the one-shot is gone, the recurring one stays");
        // The recurring one fires at the next minute, on time (read once the
        // minute is near: one read waits 30 s at most).
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
        let left = 60 - now % 60;
        if left > 20 {
            tokio::time::sleep(std::time::Duration::from_secs(left - 15)).await;
        }
        let fired = events.until(|e| e["type"] == "cron/fired" && e["cron_id"] == json!(every)).await;
        let f = fired.last().unwrap();
        assert_eq!(f["prompt"], "every minute", "{f}");
        assert_eq!(f.get("missed"), None, "{f}");
        // A session's schedules end with it.
        c.ok("session/close", json!({ "session_id": session })).await;
        let kept: Vec<Value> = serde_json::from_slice(&std::fs::read(&jobs_file).unwrap()).unwrap();
        assert!(kept.is_empty(), "{kept:?}");
    });
}
