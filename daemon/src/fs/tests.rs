//! The workspace-bound file access under attack: paths, links, the state
//! directory, secret files and guarded writes.

use super::*;

const NO_RECORDS: &pending::Records = &pending::Records::NONE;

fn ws() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap().join("ws");
    std::fs::create_dir(&root).unwrap();
    (dir, root)
}

/// A secret file is known by what it is wherever a path leads (a walk's
/// read beneath its directory, Write's replacement), and a read beneath
/// a directory cannot be led out of it by a link.
#[test]
fn secret_files_are_refused_by_identity_and_reads_stay_beneath_their_root() {
    let (_dir, root) = ws();
    std::fs::create_dir(root.join("certs")).unwrap();
    std::fs::write(root.join("certs/secret.pem"), "KEY").unwrap();
    let _secrets = guard_secret_files(&[root.join("certs/secret.pem")]);
    let ws_path = |rel: &str| WsPath { root: root.clone(), rel: PathBuf::from(rel) };
    // Reached through a directory link made after the start.
    std::os::unix::fs::symlink("certs", root.join("l")).unwrap();
    let write = write_atomic_guarded(
        &ws_path("certs/secret.pem"),
        b"ATTACKER",
        Some(&crate::permission::names_protected),
        NO_RECORDS,
    );
    assert!(write.is_err(), "{write:?}");
    assert_eq!(std::fs::read_to_string(root.join("certs/secret.pem")).unwrap(), "KEY");
    let held = nix::fcntl::open(&root, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty()).unwrap();
    let read = open_read_beneath(&held, Path::new("l/secret.pem"));
    assert_eq!(read.unwrap_err().kind(), std::io::ErrorKind::PermissionDenied);
    // A link out of the root is not followed; a FIFO is no file (no hang).
    let outside = root.parent().unwrap().join("outside.txt");
    std::fs::write(&outside, "elsewhere").unwrap();
    std::os::unix::fs::symlink(&outside, root.join("out")).unwrap();
    assert!(open_read_beneath(&held, Path::new("out")).is_err());
    nix::unistd::mkfifo(&root.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
    assert!(open_read_beneath(&held, Path::new("fifo")).is_err());
    std::fs::write(root.join("plain.txt"), "ok").unwrap();
    let mut text = String::new();
    let (mut plain, size) = open_read_beneath(&held, Path::new("plain.txt")).unwrap();
    std::io::Read::read_to_string(&mut plain, &mut text).unwrap();
    assert_eq!(size, text.len() as u64);
    assert_eq!(text, "ok");
}

/// What is opened is checked, not only what was judged before: a path
/// that leads into the state directory at open time (a symlink swapped
/// in after the permission check) is refused; the sessions' command
/// output stays readable.
#[test]
fn opens_never_land_in_the_state_directory() {
    let (_dir, ws) = crate::fs::real_temp_dir();
    for d in ["state/store/s1", "state/procs", "state/sessions/s1/output"] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    std::fs::write(ws.join("state/store/s1/session.json"), "{}").unwrap();
    std::fs::write(ws.join("state/sessions/s1/output/bash-1.log"), "out").unwrap();
    let _state = guard_state_dir(&ws.join("state"));
    std::os::unix::fs::symlink("state/store/s1", ws.join("link")).unwrap();
    std::os::unix::fs::symlink("state/procs", ws.join("procs")).unwrap();
    std::os::unix::fs::symlink("state/sessions/s1/output", ws.join("out")).unwrap();
    let at = |p: &str| resolve(&ws, &ws, p).unwrap();
    let e = open_file(&at("link/session.json")).unwrap_err();
    assert!(e.to_string().contains("agentd's state directory"), "{e}");
    let e = write_atomic(&at("procs/123"), b"1 x").unwrap_err();
    assert!(e.to_string().contains("agentd's state directory"), "{e}");
    assert!(!ws.join("state/procs/123").exists());
    assert!(write_atomic(&at("out/new.txt"), b"x").is_err(), "no writing into the output either");
    assert!(open_file(&at("out/bash-1.log")).is_ok());
    assert!(open_file(&at("state/sessions/s1/output/bash-1.log")).is_ok());
}

/// Two daemons in one process: each one's state directory and secret
/// files are kept from every tool while it (or a session of it)
/// lives, not only the first one's.
#[test]
fn every_live_daemons_state_is_off_limits_and_only_while_it_lives() {
    let (_dir, root) = crate::fs::real_temp_dir();
    for d in ["a/state", "b/state"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    std::fs::write(root.join("b/key.pem"), "KEY").unwrap();
    let a = std::sync::Arc::new(OffLimits::guard(&root.join("a/state"), &[]));
    let b = OffLimits::guard(&root.join("b/state"), &[root.join("b/key.pem")]);
    assert!(in_state_dir(&root.join("a/state/store/x")) && in_state_dir(&root.join("b/state/procs")));
    assert!(is_secret(&root.join("b/key.pem")));
    assert_eq!(a.plan_file("s1"), root.join("a/state/plans/s1.md"));
    let filter = state_dir_filter();
    assert!(filter(&root.join("a/state/x")) && filter(&root.join("b/state/x")) && !filter(&root.join("a/x")));
    // A session still holds a's: it stays off limits.
    let session = a.clone();
    drop(a);
    assert!(in_state_dir(&root.join("a/state/store/x")));
    drop(session);
    assert!(!in_state_dir(&root.join("a/state/store/x")), "a's registration ends with its last holder");
    assert!(in_state_dir(&root.join("b/state/procs")));
    drop(b);
    assert!(!in_state_dir(&root.join("b/state/procs")) && !is_secret(&root.join("b/key.pem")));
}

/// Review: the plans exception is for a plan file named as itself, not
/// one a symlink (swapped in after the permission check) leads to:
/// another session's plan.
#[test]
fn review_a_link_into_plans_is_refused_when_opened() {
    let (_dir, ws) = crate::fs::real_temp_dir();
    std::fs::create_dir_all(ws.join("state/plans")).unwrap();
    std::fs::write(ws.join("state/plans/other.md"), "theirs").unwrap();
    let _state = guard_state_dir(&ws.join("state"));
    std::os::unix::fs::symlink("state/plans/other.md", ws.join("mine.md")).unwrap();
    std::os::unix::fs::symlink("state/plans", ws.join("plans")).unwrap();
    let at = |p: &str| resolve(&ws, &ws, p).unwrap();
    assert!(write_atomic(&at("mine.md"), b"overwritten").is_err());
    assert!(write_atomic(&at("plans/other.md"), b"overwritten").is_err());
    assert!(open_file(&at("mine.md")).is_err());
    assert_eq!(std::fs::read_to_string(ws.join("state/plans/other.md")).unwrap(), "theirs");
    // Named as itself, the plan file is still written and read.
    assert!(write_atomic(&at("state/plans/own.md"), b"plan").is_ok());
    assert!(open_file(&at("state/plans/own.md")).is_ok());
}

#[test]
fn resolve_keeps_paths_inside_by_components() {
    let (_d, root) = ws();
    assert_eq!(resolve(&root, &root, "a/./b/../c").unwrap().rel, PathBuf::from("a/c"));
    assert_eq!(resolve(&root, &root.join("a"), "x").unwrap().rel, PathBuf::from("a/x"));
    let evil = format!("{}_evil/x", root.display());
    assert!(matches!(resolve(&root, &root, &evil), Err(FsError::Outside { .. })));
    assert!(matches!(resolve(&root, &root, "../x"), Err(FsError::Outside { .. })));
    assert!(matches!(resolve(&root, &root, "/etc/passwd"), Err(FsError::Outside { .. })));
    assert_eq!(resolve(&root, &root, "a\0b"), Err(FsError::Nul));
}

#[test]
fn symlinks_out_are_refused_when_opened() {
    let (d, root) = ws();
    std::fs::write(d.path().join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(d.path().join("secret"), root.join("link")).unwrap();
    std::os::unix::fs::symlink(d.path(), root.join("dirlink")).unwrap();
    let p = resolve(&root, &root, "link").unwrap();
    assert!(matches!(open_file(&p), Err(FsError::Outside { .. })));
    let p = resolve(&root, &root, "dirlink/secret").unwrap();
    assert!(matches!(open_file(&p), Err(FsError::Outside { .. })));
    assert!(matches!(write_atomic(&p, b"x"), Err(FsError::Outside { .. })));
    assert_eq!(std::fs::read_to_string(d.path().join("secret")).unwrap(), "s");
    // A link that stays inside is fine.
    std::fs::write(root.join("real"), "r").unwrap();
    std::os::unix::fs::symlink("real", root.join("inside")).unwrap();
    assert!(open_file(&resolve(&root, &root, "inside").unwrap()).is_ok());
}

#[test]
fn a_guarded_write_never_lands_in_a_protected_directory_through_a_link() {
    let (_d, root) = ws();
    std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
    std::fs::write(root.join(".git/config"), "[core]\n").unwrap();
    // `notes` swapped for a link to .git between the check and the write.
    std::os::unix::fs::symlink(".git", root.join("notes")).unwrap();
    let p = resolve(&root, &root, "notes/config").unwrap();
    assert!(matches!(
        write_atomic_guarded(&p, b"[core]\n\tfsmonitor = x\n", Some(&crate::permission::names_protected), NO_RECORDS),
        Err(FsError::NotAFile { .. })
    ));
    let p = resolve(&root, &root, "notes/hooks/pre-commit").unwrap();
    assert!(write_atomic_guarded(&p, b"x", Some(&crate::permission::names_protected), NO_RECORDS).is_err());
    assert_eq!(std::fs::read_to_string(root.join(".git/config")).unwrap(), "[core]\n");
    assert!(!root.join(".git/hooks/pre-commit").exists());
    // Approved by name, it is written.
    let p = resolve(&root, &root, ".git/config").unwrap();
    assert!(write_atomic_guarded(&p, b"[core]\n\tbare = false\n", None, NO_RECORDS).is_ok());
    // An ordinary file is written either way.
    assert!(
        write_atomic_guarded(
            &resolve(&root, &root, "ok.txt").unwrap(),
            b"x",
            Some(&crate::permission::names_protected),
            NO_RECORDS
        )
        .is_ok()
    );
}

#[test]
fn real_paths_resolve_links_before_dot_dot() {
    let (d, root) = ws();
    let outside = d.path().join("outside");
    std::fs::create_dir_all(outside.join("deep")).unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    std::os::unix::fs::symlink(outside.join("deep"), root.join("docs")).unwrap();
    // `docs/..` is `outside`, not the workspace.
    assert_eq!(
        real_path(&root.join("docs/../secret")).unwrap(),
        std::fs::canonicalize(outside.join("secret")).unwrap()
    );
    // A dangling link is where it points.
    std::os::unix::fs::symlink(outside.join("new"), root.join("dangling")).unwrap();
    assert!(!real_path(&root.join("dangling")).unwrap().starts_with(&root));
}

#[test]
fn atomic_write_keeps_mode_refuses_hard_links_and_creates_parents() {
    let (_d, root) = ws();
    let f = root.join("script.sh");
    std::fs::write(&f, "old").unwrap();
    std::fs::set_permissions(&f, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let w = write_atomic(&resolve(&root, &root, "script.sh").unwrap(), b"new").unwrap();
    assert!(w.replaced);
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "new");
    assert_eq!(std::fs::metadata(&f).unwrap().mode() & 0o777, 0o755);
    std::fs::hard_link(&f, root.join("twin")).unwrap();
    let e = write_atomic(&resolve(&root, &root, "script.sh").unwrap(), b"x").unwrap_err();
    assert!(e.to_string().contains("hard links"), "{e}");
    assert_eq!(std::fs::read_to_string(root.join("twin")).unwrap(), "new");
    write_atomic(&resolve(&root, &root, "deep/er/file.txt").unwrap(), b"hi").unwrap();
    assert_eq!(std::fs::read_to_string(root.join("deep/er/file.txt")).unwrap(), "hi");
    let leftovers: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn fifos_and_directories_are_refused_without_blocking() {
    let (_d, root) = ws();
    nix::unistd::mkfifo(&root.join("pipe"), Mode::from_bits_truncate(0o600)).unwrap();
    let e = open_file(&resolve(&root, &root, "pipe").unwrap()).unwrap_err();
    assert!(e.to_string().contains("FIFO"), "{e}");
    std::fs::create_dir(root.join("d")).unwrap();
    let e = open_file(&resolve(&root, &root, "d").unwrap()).unwrap_err();
    assert!(e.to_string().contains("Glob"), "{e}");
}

#[test]
fn canonical_agrees_with_realpath_on_links_missing_files_fifos_and_loops() {
    let (_dir, root) = ws();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/b/f"), "x").unwrap();
    std::os::unix::fs::symlink("a/b", root.join("l")).unwrap();
    std::os::unix::fs::symlink(root.join("l/f"), root.join("abs")).unwrap();
    std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
    std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
    nix::unistd::mkfifo(&root.join("fifo"), Mode::from_bits_truncate(0o600)).unwrap();
    std::fs::set_permissions(root.join("a/b/f"), std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    for rel in ["a/b/f", "l/f", "abs", "l/../b/f", "a/./b/", "fifo", "missing", "loop", "dangling", "a/b/f/", ""] {
        let path = root.join(rel);
        let want = std::fs::canonicalize(&path).map_err(|e| e.kind());
        assert_eq!(canonical(&path).map_err(|e| e.kind()), want, "{rel}");
    }
    // A name the kernel gives that is not a path: realpath answers.
    let (r, _w) = nix::unistd::pipe().unwrap();
    let fd_path = PathBuf::from(format!("/proc/self/fd/{}", r.as_raw_fd()));
    assert_eq!(canonical(&fd_path).map_err(|e| e.kind()), std::fs::canonicalize(&fd_path).map_err(|e| e.kind()));
}

#[test]
fn canonical_remembers_only_inside_its_scope() {
    let (_dir, root) = ws();
    std::fs::write(root.join("f"), "x").unwrap();
    std::os::unix::fs::symlink("f", root.join("l")).unwrap();
    {
        let _scope = remember_canonical();
        assert_eq!(canonical(&root.join("l")).unwrap(), root.join("f"));
        // Within the scope (one admission) the first answer stands.
        std::fs::remove_file(root.join("l")).unwrap();
        std::fs::create_dir(root.join("g")).unwrap();
        std::os::unix::fs::symlink("g", root.join("l")).unwrap();
        assert_eq!(canonical(&root.join("l")).unwrap(), root.join("f"));
        {
            let _inner = remember_canonical();
            assert_eq!(canonical(&root.join("l")).unwrap(), root.join("f"), "a nested scope shares the outer one");
        }
        assert_eq!(canonical(&root.join("l")).unwrap(), root.join("f"), "the nested scope did not end the outer");
    }
    // Outside it, every call looks again.
    assert_eq!(canonical(&root.join("l")).unwrap(), root.join("g"));
}

/// The protected names reached every other way a model's `file_path` or a
/// link in the workspace can lead there: `..`, a directory link, a chain
/// of links, a link as the file itself (to a protected file that exists
/// and to one that does not), a nested repository's hooks, another case
/// inside `.git`, a nested settings directory, and what a protected name
/// at the top links to. None is written; an ordinary file still is.
#[test]
fn a_guarded_write_refuses_protected_files_by_every_way_there() {
    let (d, root) = ws();
    let elsewhere = std::fs::canonicalize(d.path()).unwrap().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    for dir in [".git/hooks", ".claude", "sub", "vendor/lib/.git/hooks", "pkg"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    std::fs::write(root.join(".mcp.json"), "{}").unwrap();
    let link = |target: &str, at: &str| std::os::unix::fs::symlink(target, root.join(at)).unwrap();
    link(".claude", "cfg");
    link("cfg", "chain");
    link(".mcp.json", "servers.json");
    link(".agentd/settings.json", "later.json");
    std::os::unix::fs::symlink(&elsewhere, root.join(".agentd")).unwrap();
    let guarded = |rel: &str| {
        let p = resolve(&root, &root, rel).unwrap();
        write_atomic_guarded(
            &p,
            b"{\"permissions\":{\"allow\":[\"Bash\"]}}",
            Some(&crate::permission::names_protected),
            NO_RECORDS,
        )
    };
    for rel in [
        "sub/../.claude/settings.json",
        "cfg/settings.json",
        "chain/settings.json",
        "servers.json",
        "later.json",
        "vendor/lib/.git/hooks/post-checkout",
        ".git/HOOKS/pre-commit",
        "pkg/.claude/settings.json",
        ".agentd/settings.json",
    ] {
        assert!(guarded(rel).is_err(), "{rel} was written");
    }
    assert_eq!(std::fs::read_dir(root.join(".claude")).unwrap().count(), 0);
    assert_eq!(std::fs::read_to_string(root.join(".mcp.json")).unwrap(), "{}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
    assert!(!root.join(".git/HOOKS").exists() || std::fs::read_dir(root.join(".git/HOOKS")).unwrap().count() == 0);
    assert_eq!(std::fs::read_dir(root.join("vendor/lib/.git/hooks")).unwrap().count(), 0);
    assert!(!root.join("pkg/.claude/settings.json").exists());
    assert!(guarded("sub/ok.json").is_ok());
}

/// A write refused after it made the missing directories on its way
/// (`pkg/new/.claude/` for `pkg/new/.claude/settings.json`) leaves none of
/// them behind; what existed stays, and a write that lands keeps what it
/// made.
#[test]
fn a_refused_write_leaves_no_directory_it_made() {
    let (_d, root) = ws();
    std::fs::create_dir(root.join("pkg")).unwrap();
    let guarded = |rel: &str| {
        write_atomic_guarded(
            &resolve(&root, &root, rel).unwrap(),
            b"{}",
            Some(&crate::permission::names_protected),
            NO_RECORDS,
        )
    };
    assert!(matches!(guarded("pkg/new/.claude/settings.json"), Err(FsError::NotAFile { .. })));
    assert!(root.join("pkg").is_dir(), "what existed stays");
    assert!(!root.join("pkg/new").exists(), "a directory the refused write made is left");
    assert!(matches!(guarded("m/n/.git/config"), Err(FsError::NotAFile { .. })));
    assert!(!root.join("m").exists());
    assert!(guarded("x/new/c.txt").is_ok());
    assert!(root.join("x/new/c.txt").is_file(), "a write that lands keeps what it made");
}
