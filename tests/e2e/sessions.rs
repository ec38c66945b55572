//! Sessions through the typed client and on the wire.

use agentd_client::protocol::ErrorCode;
use agentd_client::protocol::session::{PermissionMode, PermissionRules, SessionCreateParams, ToolOptions};
use agentd_tests::{TestDaemon, within};
use serde_json::json;

fn params(cwd: &std::path::Path) -> SessionCreateParams {
    SessionCreateParams::new(cwd)
}

#[tokio::test]
async fn create_list_get_close_round_trip() {
    let d = TestDaemon::start().await;
    let c = d.client().await;
    let work = tempfile::tempdir().unwrap();
    let mut p = params(work.path());
    p.mode = Some(PermissionMode::AcceptEdits);
    p.permissions = Some(PermissionRules { allow: vec!["Bash(ls:*)".into()], deny: vec![], ask: vec![] });
    p.tools = Some(ToolOptions { defer: None, simple: true, disabled: vec!["Write".into()], only: None });
    p.max_concurrency = Some(4);
    let a = within("create a", c.session_create(p)).await.unwrap();
    let b = within("create b", c.session_create(params(work.path()))).await.unwrap();
    assert_ne!(a.session_id, b.session_id);
    assert_eq!(a.session.mode, PermissionMode::AcceptEdits);
    assert_eq!(a.session.permissions.allow, vec!["Bash(ls:*)".to_owned()]);
    assert!(a.session.tools.simple);
    assert_eq!(a.session.max_concurrency, 4);
    assert_eq!(b.session.max_concurrency, 10, "daemon default");

    let listed = within("list", c.session_list()).await.unwrap();
    let ids: Vec<_> = listed.iter().map(|s| s.session_id.clone()).collect();
    assert_eq!(ids, vec![a.session_id.clone(), b.session_id.clone()], "oldest first");
    assert_eq!(within("get", c.session_get(&a.session_id)).await.unwrap(), a.session);

    within("close", c.session_close(&a.session_id)).await.unwrap();
    let err = within("get closed", c.session_get(&a.session_id)).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UnknownSession), "{err}");
    let err = within("close twice", c.session_close(&a.session_id)).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::UnknownSession));
    assert_eq!(within("list", c.session_list()).await.unwrap().len(), 1);
    assert_eq!(within("info", c.daemon_info()).await.unwrap().sessions, 1);
    d.stop().await;
}

#[tokio::test]
async fn cwd_is_stored_canonical_and_absolute() {
    let d = TestDaemon::start().await;
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("real")).unwrap();
    std::os::unix::fs::symlink(work.path().join("real"), work.path().join("link")).unwrap();
    let c = d.client().await;
    let s = within("create", c.session_create(params(&work.path().join("link/./../link")))).await.unwrap();
    assert_eq!(s.session.cwd, std::fs::canonicalize(work.path().join("real")).unwrap());
    assert!(s.session.cwd.is_absolute());
}

#[tokio::test]
async fn bad_cwd_is_refused_naming_the_field_and_creates_nothing() {
    let d = TestDaemon::start().await;
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("file"), "x").unwrap();
    let mut raw = d.raw().await;
    for (cwd, needle) in [
        (json!("relative/path"), "absolute"),
        (json!(work.path().join("missing")), "does not exist"),
        (json!(work.path().join("file")), "not a directory"),
        (json!(42), "invalid type"),
    ] {
        let reply = raw.request("session/create", json!({ "cwd": cwd })).await;
        assert_eq!(reply["error"]["code"], json!(-32602), "{reply}");
        assert_eq!(reply["error"]["data"]["field"], json!("cwd"), "{reply}");
        let msg = reply["error"]["message"].as_str().unwrap();
        assert!(msg.contains(needle), "{msg}");
    }
    let reply = raw.request("session/create", json!({ "cwd": work.path(), "max_concurrency": 0 })).await;
    assert_eq!(reply["error"]["data"]["field"], json!("max_concurrency"), "{reply}");
    let reply = raw.request("session/create", json!({ "cwd": work.path(), "mode": "yolo" })).await;
    assert_eq!(reply["error"]["data"]["field"], json!("mode"), "{reply}");
    let list = raw.ok("session/list", json!({})).await;
    assert_eq!(list["sessions"], json!([]));
}

#[tokio::test]
async fn sessions_are_shared_between_connections() {
    let d = TestDaemon::start().await;
    let work = tempfile::tempdir().unwrap();
    let mut one = d.raw().await;
    let created = one.ok("session/create", json!({ "cwd": work.path() })).await;
    let id = created["session_id"].clone();
    drop(one);
    let mut two = d.raw().await;
    let got = two.ok("session/get", json!({ "session_id": id })).await;
    assert_eq!(got["session_id"], id);
}
