//! Every change a turn's file tools make is listed in its results, shown
//! by `turn/diff` and undone by `turn/rewind` (conflicts, `force`,
//! `dry_run`, a restart between the turn and the rewind, the per-file
//! bound), through the real binary on a real socket, and by `agentctl diff`
//! and `agentctl rewind`.

use std::path::PathBuf;

use agentd_tests::{StandaloneDaemon, StreamedSession, agentctl, tool_use};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A daemon (with `env`) and a workspace in its directory.
fn daemon(env: &[(&str, &str)]) -> (StandaloneDaemon, PathBuf) {
    let d = StandaloneDaemon::start(&[], env);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    (d, ws)
}

/// Runs one ended turn of `uses` in a bypass session on `ws` (a new one
/// when `session` is `None`): the session, the turn and its results.
async fn turn(d: &StandaloneDaemon, ws: &PathBuf, uses: Vec<Value>) -> (StreamedSession, String, Vec<Value>) {
    let (mut s, _) = StreamedSession::open(&d.socket, json!({ "cwd": ws, "mode": "bypass" })).await;
    let turn = s.submit_ended(uses).await;
    let results = s.results(&turn).await;
    for r in &results {
        assert_eq!(r["is_error"], false, "{r}");
    }
    (s, turn, results)
}

fn read(path: &str) -> Value {
    json!({ "file_path": path })
}

#[test]
fn a_turns_writes_and_edits_are_listed_diffed_and_rewound() {
    let (d, ws) = daemon(&[]);
    std::fs::write(ws.join("old.txt"), "one\ntwo\n").unwrap();
    rt().block_on(async {
        let uses = vec![
            tool_use("r", "Read", read("old.txt")),
            tool_use("w", "Write", json!({ "file_path": "new.txt", "content": "hello\n" })),
            tool_use("e", "Edit", json!({ "file_path": "old.txt", "old_string": "two", "new_string": "TWO" })),
        ];
        let (mut s, turn, results) = turn(&d, &ws, uses).await;
        let changes = |id: &str| results.iter().find(|r| r["tool_use_id"] == id).unwrap()["changes"].clone();
        assert!(changes("r").is_null(), "a Read changes nothing: {results:?}");
        let new = ws.join("new.txt").display().to_string();
        let old = ws.join("old.txt").display().to_string();
        assert_eq!(changes("w"), json!([{ "path": new, "kind": "created", "bytes_after": 6 }]));
        assert_eq!(changes("e"), json!([{ "path": old, "kind": "modified", "bytes_before": 8, "bytes_after": 8 }]));

        let diff = s.c.ok("turn/diff", json!({ "session_id": s.id, "turn_id": turn })).await;
        assert_eq!(diff["changes"].as_array().unwrap().len(), 2, "{diff}");
        let text = diff["diff"].as_str().unwrap();
        for needle in ["--- /dev/null", "+++ b/new.txt", "+hello", "--- a/old.txt", "-two", "+TWO"] {
            assert!(text.contains(needle), "{needle:?} in {text}");
        }
        // agentctl: the session's latest turn by default.
        let (code, out, err) = agentctl(&d.socket, &["diff", &s.id]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("2 changes") && out.contains("+TWO"), "{out}");

        // A dry run changes nothing.
        let dry = s.c.ok("turn/rewind", json!({ "session_id": s.id, "turn_id": turn, "dry_run": true })).await;
        assert_eq!(dry["restored"].as_array().unwrap().len(), 2, "{dry}");
        assert_eq!(std::fs::read_to_string(ws.join("old.txt")).unwrap(), "one\nTWO\n");
        assert!(ws.join("new.txt").exists());

        let (code, out, err) = agentctl(&d.socket, &["rewind", &s.id, "--turn", &turn]);
        assert_eq!(code, 0, "{err}");
        assert!(out.contains("restored: 2 changes"), "{out}");
        assert_eq!(std::fs::read_to_string(ws.join("old.txt")).unwrap(), "one\ntwo\n");
        assert!(!ws.join("new.txt").exists(), "a created file is removed");
        // Rewound changes leave the history.
        let again = s.c.request("turn/diff", json!({ "session_id": s.id, "turn_id": turn })).await;
        assert!(again["error"]["message"].as_str().unwrap().contains("not in this session's history"), "{again}");
        // The history is in the session's state directory, and goes with it.
        let history = d.dir.path().join("state/sessions").join(&s.id).join("history");
        assert!(history.join("index.json").exists());
        s.c.ok("session/close", json!({ "session_id": s.id })).await;
        assert!(!history.exists(), "the history goes with the session");
    });
}

#[test]
fn a_file_changed_since_is_a_conflict_across_a_restart_until_forced() {
    let (mut d, ws) = daemon(&[]);
    std::fs::write(ws.join("a.txt"), "first\n").unwrap();
    let rt = rt();
    let (id, turn) = rt.block_on(async {
        let uses = vec![
            tool_use("r", "Read", read("a.txt")),
            tool_use("e", "Edit", json!({ "file_path": "a.txt", "old_string": "first", "new_string": "second" })),
        ];
        let (s, turn, _) = turn(&d, &ws, uses).await;
        (s.id, turn)
    });
    std::fs::write(ws.join("a.txt"), "by the user\n").unwrap();
    d.signal(Signal::SIGKILL);
    d.wait_exit();
    d.restart();
    rt.block_on(async {
        let mut c = agentd_tests::RawConn::connect(&d.socket).await;
        let r = c.ok("turn/rewind", json!({ "session_id": id, "turn_id": turn })).await;
        assert_eq!((r["restored"].as_array().unwrap().len(), r["conflicts"].as_array().unwrap().len()), (0, 1), "{r}");
        assert!(r["conflicts"][0]["reason"].as_str().unwrap().contains("changed since"), "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "by the user\n", "left alone");
        let r = c.ok("turn/rewind", json!({ "session_id": id, "tool_use_id": "e", "force": true })).await;
        assert_eq!(r["restored"].as_array().unwrap().len(), 1, "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "first\n");
    });
}

#[test]
fn a_file_over_the_per_file_bound_is_not_rewindable_and_said_so() {
    let (d, ws) = daemon(&[("AGENTD_TEST_HISTORY_FILE_BYTES", "100")]);
    std::fs::write(ws.join("big.txt"), "x".repeat(200)).unwrap();
    rt().block_on(async {
        let uses = vec![
            tool_use("r", "Read", read("big.txt")),
            tool_use("w", "Write", json!({ "file_path": "big.txt", "content": "small\n" })),
        ];
        let (mut s, turn, results) = turn(&d, &ws, uses).await;
        let w = results.iter().find(|r| r["tool_use_id"] == "w").unwrap();
        assert_eq!(w["changes"][0]["bytes_before"], 200, "{w}");
        let r = s.c.ok("turn/rewind", json!({ "session_id": s.id, "turn_id": turn })).await;
        assert_eq!(r["not_rewindable"].as_array().unwrap().len(), 1, "{r}");
        assert!(r["not_rewindable"][0]["reason"].as_str().unwrap().contains("over the 100 bytes"), "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("big.txt")).unwrap(), "small\n");
    });
}
