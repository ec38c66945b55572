//! The session manager's unit tests.
use super::*;
use crate::store::MemoryStore;

fn manager() -> (SessionManager, CancellationToken) {
    let root = CancellationToken::new();
    (
        SessionManager::new(
            root.clone(),
            Arc::new(MemoryStore::default()),
            10,
            Arc::new(crate::tools::builtin_registry(Default::default())),
            Vec::new(),
            tokio_util::task::TaskTracker::new(),
            std::env::temp_dir(),
            Arc::new(crate::sandbox::Facility::none()),
        ),
        root,
    )
}

fn params(cwd: &Path) -> SessionCreateParams {
    SessionCreateParams::new(cwd)
}

#[test]
fn cwd_is_stored_canonical() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("real"), dir.path().join("link")).unwrap();
    let (m, _) = manager();
    let info = m.create(params(&dir.path().join("link/../link"))).unwrap();
    assert_eq!(info.cwd, std::fs::canonicalize(dir.path().join("real")).unwrap());
    assert_eq!(info.max_concurrency, 10);
}

#[test]
fn bad_cwd_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f");
    std::fs::write(&file, "x").unwrap();
    let (m, _) = manager();
    for (cwd, needle) in [
        (PathBuf::from("relative/dir"), "absolute"),
        (dir.path().join("missing"), "does not exist"),
        (file, "not a directory"),
    ] {
        let err = m.create(params(&cwd)).unwrap_err();
        assert!(matches!(err, SessionError::Invalid { field: "cwd", .. }), "{err}");
        assert!(err.to_string().contains(needle), "{err}");
    }
    assert!(m.is_empty());
}

#[test]
fn the_last_events_bring_a_restored_context_up_to_date() {
    use agentd_protocol::turn::{Event, EventKind};
    let wt = agentd_protocol::session::WorktreeInfo {
        path: "/r/.claude/worktrees/a".into(),
        branch: "worktree/a".into(),
        cwd: "/r/.claude/worktrees/a".into(),
        original_cwd: "/r".into(),
        repository: "/r".into(),
        common_dir: "/r/.git".into(),
        git_dir: "/r/.git/worktrees/a".into(),
        base: None,
        entered: false,
        by_hook: false,
    };
    let event = |seq, kind| Event { seq, kind };
    let moved = |w: Option<agentd_protocol::session::WorktreeInfo>| EventKind::WorktreeChanged {
        turn_id: "t".into(),
        tool_use_id: "u".into(),
        worktree: w,
    };
    let mut context = SessionContext { shell_cwd: Some("/r/src".into()), ..Default::default() };
    restore::recover_from_events(&mut context, &[event(1, moved(None)), event(2, moved(Some(wt.clone())))]);
    assert_eq!(context.worktree.as_ref(), Some(&wt));
    assert_eq!(context.shell_cwd, None, "the shell starts over in the worktree");
    restore::recover_from_events(&mut context, &[event(3, moved(None))]);
    assert_eq!(context.worktree, None);
    let saved = context.clone();
    restore::recover_from_events(&mut context, &[]);
    assert_eq!(context, saved, "no events, nothing changes");
}

#[test]
fn close_cancels_the_session_token_only() {
    let dir = tempfile::tempdir().unwrap();
    let (m, root) = manager();
    let a = m.create(params(dir.path())).unwrap();
    let b = m.create(params(dir.path())).unwrap();
    let token_a = m.lock().get(&a.session_id).unwrap().cancel.clone();
    let token_b = m.lock().get(&b.session_id).unwrap().cancel.clone();
    m.close(&a.session_id).unwrap();
    assert!(token_a.is_cancelled());
    assert!(!token_b.is_cancelled() && !root.is_cancelled());
    assert!(matches!(m.close(&a.session_id), Err(SessionError::Unknown { .. })));
    assert_eq!(m.list().len(), 1);
    root.cancel();
    assert!(token_b.is_cancelled());
}

#[test]
fn concurrency_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let (m, _) = manager();
    for bad in [0, MAX_TOOL_CONCURRENCY_LIMIT + 1] {
        let mut p = params(dir.path());
        p.max_concurrency = Some(bad);
        assert!(matches!(m.create(p), Err(SessionError::Invalid { field: "max_concurrency", .. })));
    }
    let mut p = params(dir.path());
    p.max_concurrency = Some(3);
    assert_eq!(m.create(p).unwrap().max_concurrency, 3);
}
