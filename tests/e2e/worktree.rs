//! EnterWorktree and ExitWorktree through the socket, in real git
//! repositories: the session's directory and workspace follow the
//! worktree (Bash, Read, Write, a commit inside the sandbox), `remove`
//! never loses work, names that could be options or paths are refused,
//! a repository without commits works, no repository is a clear error.

use std::path::{Path, PathBuf};
use std::process::Command;

use agentd_tests::{RawConn, TestDaemon, within};
use serde_json::{Value, json};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().expect("git runs");
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// A repository in `dir/repo` with one commit (or none).
fn repo(dir: &Path, commit: bool) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "t@example.com"]);
    git(&repo, &["config", "user.name", "T"]);
    if commit {
        std::fs::write(repo.join("a.txt"), "from main\n").unwrap();
        git(&repo, &["add", "a.txt"]);
        git(&repo, &["commit", "-qm", "first"]);
    }
    std::fs::canonicalize(repo).unwrap()
}

struct S {
    c: RawConn,
    id: String,
}

impl S {
    async fn new(d: &TestDaemon, cwd: &Path, params: Value) -> S {
        let mut c = d.raw().await;
        let mut p = json!({ "cwd": cwd, "permission_timeout_ms": 100 });
        p.as_object_mut().unwrap().extend(params.as_object().unwrap().clone());
        let id = c.session(p).await;
        S { c, id }
    }

    /// (is_error, text) of a call.
    async fn call(&mut self, name: &str, input: Value) -> (bool, String) {
        let r = within(name, self.c.tool(&self.id, name, input)).await;
        (r["is_error"] == true, r["content"][0]["text"].as_str().unwrap_or_default().to_owned())
    }

    async fn worktree(&mut self) -> Value {
        self.c.ok("session/get", json!({ "session_id": self.id })).await["worktree"].clone()
    }
}

#[tokio::test]
async fn a_worktree_round_trip_never_loses_work() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), true);
    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;

    // Names that could be paths or options change nothing.
    for bad in ["../x", "-rf", "a/b", "x.lock", ".hidden"] {
        let (err, text) = s.call("EnterWorktree", json!({ "name": bad })).await;
        assert!(err && text.contains("name"), "{bad}: {text}");
    }
    assert!(!repo.join(".claude").exists());
    let (err, text) = s.call("ExitWorktree", json!({ "action": "keep" })).await;
    assert!(err && text.contains("not in a worktree"), "{text}");

    let (err, text) = s.call("EnterWorktree", json!({ "name": "feat" })).await;
    assert!(!err, "{text}");
    let wt = repo.join(".claude/worktrees/feat");
    assert!(text.contains(&wt.display().to_string()) && text.contains("worktree/feat"), "{text}");
    let info = s.worktree().await;
    assert_eq!(info["path"], json!(wt), "{info}");
    assert_eq!(info["branch"], "worktree/feat");
    assert_eq!(info["original_cwd"], json!(repo));
    assert_eq!(git(&wt, &["branch", "--show-current"]), "worktree/feat");
    let (err, text) = s.call("EnterWorktree", json!({ "name": "other" })).await;
    assert!(err && text.contains("already in the worktree"), "{text}");

    // The session works there: Bash, Read, Write follow, the checkout is
    // left alone, and a commit works inside the sandbox.
    let (err, text) = s.call("Bash", json!({ "command": "pwd" })).await;
    assert!(!err && text.trim() == wt.display().to_string(), "{text}");
    let (err, text) = s.call("Write", json!({ "file_path": "b.txt", "content": "in the worktree\n" })).await;
    assert!(!err, "{text}");
    assert!(wt.join("b.txt").exists() && !repo.join("b.txt").exists());
    let (err, text) = s.call("Read", json!({ "file_path": "a.txt" })).await;
    assert!(!err && text.contains("from main"), "{text}");
    let (err, text) =
        s.call("Bash", json!({ "command": "git add b.txt && git commit -qm b && git log --oneline | wc -l" })).await;
    // (git's automatic ref packing after a commit cannot lock the main
    // packed-refs in the sandbox; it says so and the commit stands.)
    assert!(!err && text.trim().lines().last() == Some("2"), "the commit, sandboxed: {text}");

    // The sandbox lets a commit through but nothing else of the
    // repository's git directory: not its hooks, config, main index, HEAD
    // or other branches, nor the worktree's .git file.
    let common = repo.join(".git");
    for (what, command) in [
        ("hook", format!("echo x > {}/hooks/post-commit", common.display())),
        ("config", format!("echo '[core]' >> {}/config", common.display())),
        ("main index", format!("cp {0}/index {0}/index.bak", common.display())),
        ("main branch", "git update-ref refs/heads/main HEAD".to_owned()),
        ("commondir", format!("echo /tmp > {}/commondir", common.display())),
        (".git file", "echo 'gitdir: /tmp' > .git".to_owned()),
        ("other worktrees", format!("mkdir {}/worktrees/other", common.display())),
    ] {
        let (err, text) = s.call("Bash", json!({ "command": command })).await;
        assert!(err, "{what} was writable: {text}");
    }
    assert_eq!(git(&repo, &["rev-parse", "main"]), git(&repo, &["rev-parse", "worktree/feat~1"]));
    assert!(!common.join("hooks/post-commit").exists() && !common.join("commondir").exists());

    // Ignored files would be deleted: kept.
    std::fs::write(wt.join(".gitignore"), "*.env\n").unwrap();
    std::fs::write(wt.join("secret.env"), "KEY=1\n").unwrap();
    git(&wt, &["add", ".gitignore"]);
    git(&wt, &["commit", "-qm", "ignore"]);
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(err && text.contains("ignored") && text.contains("secret.env"), "{text}");
    std::fs::remove_file(wt.join("secret.env")).unwrap();
    // A commit only the reflog remembers: kept.
    git(&wt, &["reset", "-q", "--hard", "HEAD~1"]);
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(err && text.contains("2 commit(s) on no other branch"), "{text}");
    git(&wt, &["reset", "-q", "--hard", "HEAD@{1}"]);

    // Uncommitted changes: kept, and the session stays in the worktree.
    std::fs::write(wt.join("c.txt"), "not committed\n").unwrap();
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(err && text.contains("uncommitted") && text.contains("c.txt"), "{text}");
    assert!(wt.join("c.txt").exists() && s.worktree().await.is_object());
    // A commit on no other branch: kept.
    std::fs::remove_file(wt.join("c.txt")).unwrap();
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(err && text.contains("2 commit(s) on no other branch"), "{text}");
    assert!(wt.join("b.txt").exists());
    // A .git file that names another git directory: git is not run on it.
    let dot = std::fs::read_to_string(wt.join(".git")).unwrap();
    std::fs::write(wt.join(".git"), "gitdir: /tmp\n").unwrap();
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(err && text.contains("no longer names"), "{text}");
    std::fs::write(wt.join(".git"), dot).unwrap();
    // Once another branch holds it, remove removes the worktree and its branch.
    git(&repo, &["branch", "saved", "worktree/feat"]);
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(!err && text.contains("Removed the worktree") && text.contains("its branch worktree/feat"), "{text}");
    assert!(!wt.exists());
    assert_eq!(git(&repo, &["branch", "--format=%(refname:short)", "--list", "worktree/feat"]), "");
    assert!(s.worktree().await.is_null());
    let (err, text) = s.call("Bash", json!({ "command": "pwd" })).await;
    assert!(!err && text.trim() == repo.display().to_string(), "back home: {text}");

    // keep: the worktree and its branch stay.
    let (err, text) = s.call("EnterWorktree", json!({ "name": "kept" })).await;
    assert!(!err, "{text}");
    let (err, text) = s.call("ExitWorktree", json!({ "action": "keep" })).await;
    assert!(!err && text.contains("kept"), "{text}");
    assert!(repo.join(".claude/worktrees/kept/a.txt").exists());
    assert_eq!(git(&repo, &["branch", "--format=%(refname:short)", "--list", "worktree/kept"]), "worktree/kept");
    let (err, text) = s.call("EnterWorktree", json!({ "name": "kept" })).await;
    assert!(err && text.contains("already exists"), "{text}");

    // discard_changes: thrown away, as asked (bypass approves the ask).
    let (err, text) = s.call("EnterWorktree", json!({})).await;
    assert!(!err, "a generated name: {text}");
    let gone = PathBuf::from(s.worktree().await["path"].as_str().unwrap());
    std::fs::write(gone.join("scratch.txt"), "x").unwrap();
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove", "discard_changes": true })).await;
    assert!(!err && text.contains("Removed"), "{text}");
    assert!(!gone.exists());
    assert_eq!(git(&repo, &["worktree", "list"]).lines().count(), 2, "main and kept");
}

#[tokio::test]
async fn without_commits_or_without_a_repository() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), false);
    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "first" })).await;
    assert!(!err && text.contains("orphan"), "{text}");
    let wt = repo.join(".claude/worktrees/first");
    assert_eq!(git(&wt, &["branch", "--show-current"]), "worktree/first");
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(!err && text.contains("Removed"), "{text}");
    assert!(!wt.exists());

    let plain = d.dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let mut s = S::new(&d, &plain, json!({ "mode": "bypass" })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "x" })).await;
    assert!(err && text.contains("not in a git repository"), "{text}");
    assert!(!plain.join(".claude").exists());
}

#[tokio::test]
async fn entering_asks_and_a_symlinked_claude_dir_is_refused() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), true);
    // Default mode, nobody answers: denied, nothing made.
    let mut s = S::new(&d, &repo, json!({})).await;
    let (err, _) = s.call("EnterWorktree", json!({ "name": "asked" })).await;
    assert!(err);
    assert!(!repo.join(".claude").exists() && s.worktree().await.is_null());

    // The repository's hooks do not run for the daemon's git.
    let marker = d.dir.path().join("hook-ran");
    let hook = repo.join(".git/hooks/post-checkout");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    Command::new("chmod").arg("755").arg(&hook).status().unwrap();
    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "hooked" })).await;
    assert!(!err, "{text}");
    assert!(!marker.exists(), "post-checkout ran");
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(!err, "{text}");
    std::fs::remove_dir_all(repo.join(".claude")).unwrap();

    // .claude pointing elsewhere would carry the worktree there.
    let elsewhere = d.dir.path().join("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, repo.join(".claude")).unwrap();
    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "out" })).await;
    assert!(err && text.contains("symbolic link"), "{text}");
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[tokio::test]
async fn the_repository_s_programs_never_run_as_the_daemon() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), true);
    std::fs::write(repo.join(".gitattributes"), "*.txt filter=evil diff=evil\n*.md filter=a=b\n*.rs filter=onbranch\n")
        .unwrap();
    std::fs::write(repo.join("x.md"), "md\n").unwrap();
    std::fs::write(repo.join("x.rs"), "rs\n").unwrap();
    git(&repo, &["add", ".gitattributes", "x.md", "x.rs"]);
    git(&repo, &["commit", "-qm", "attributes"]);
    let mark = |what: &str| d.dir.path().join(format!("RAN-{what}"));
    let touch = |what: &str| format!("touch {}; cat", mark(what).display());
    git(&repo, &["config", "filter.evil.smudge", &touch("smudge")]);
    git(&repo, &["config", "filter.evil.clean", &touch("clean")]);
    git(&repo, &["config", "filter.evil.required", "true"]);
    git(&repo, &["config", "core.sshCommand", &touch("ssh")]);
    git(&repo, &["config", "include.path", "more.config"]);
    // A subsection with `=` in it; a driver only a worktree's branch includes.
    git(&repo, &["config", "filter.a=b.smudge", &touch("equals")]);
    git(&repo, &["config", "includeIf.onbranch:worktree/**.path", "onbranch.config"]);
    std::fs::write(
        repo.join(".git/onbranch.config"),
        format!("[filter \"onbranch\"]\n\tsmudge = {}\n", touch("onbranch")),
    )
    .unwrap();
    std::fs::write(
        repo.join(".git/more.config"),
        format!(
            "[filter \"evil\"]\n\tprocess = {}\n[diff \"evil\"]\n\ttextconv = {}\n",
            touch("process"),
            touch("textconv")
        ),
    )
    .unwrap();
    let ran = || {
        ["smudge", "clean", "process", "ssh", "textconv", "equals", "onbranch"]
            .into_iter()
            .filter(|w| mark(w).exists())
            .collect::<Vec<_>>()
    };
    // Asked, saying why, in a mode that asks (nobody answers: denied).
    let mut asking = S::new(&d, &repo, json!({})).await;
    let (err, text) = asking.call("EnterWorktree", json!({ "name": "a" })).await;
    assert!(err && text.contains("names a program"), "{text}");
    // Approved: it goes on with every program still off.
    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "b" })).await;
    assert!(!err, "{text}");
    assert!(repo.join(".claude/worktrees/b/a.txt").exists());
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(!err, "{text}");
    assert!(!repo.join(".claude/worktrees/b").exists(), "{text}");
    assert_eq!(ran(), Vec::<&str>::new(), "the repository's programs ran as the daemon");
}

#[tokio::test]
async fn a_worktree_adds_objects_and_never_changes_one() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), true);
    let blob = git(&repo, &["rev-parse", "HEAD:a.txt"]);
    let object = repo.join(".git/objects").join(&blob[..2]).join(&blob[2..]);
    let before = std::fs::read(&object).unwrap();
    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "o" })).await;
    assert!(!err, "{text}");
    let o = object.display();
    for attack in [
        format!("chmod u+w {o}; printf poison > {o}"),
        format!("rm -f {o}"),
        format!("mv {o} {o}.x"),
        format!("rm -rf {}", repo.join(".git/objects/pack").display()),
    ] {
        let _ = s.call("Bash", json!({ "command": attack })).await;
        assert_eq!(std::fs::read(&object).ok().as_deref(), Some(&before[..]), "{attack}");
    }
    // A commit still works, and its objects are the repository's after the
    // call, for git outside the sandbox too.
    let (err, text) = s
        .call(
            "Bash",
            json!({ "command": "echo new > n.txt && git add n.txt && git commit -qm n && git rev-parse HEAD" }),
        )
        .await;
    assert!(!err, "{text}");
    let head = text.lines().find(|l| l.len() == 40).unwrap().to_owned();
    assert_eq!(git(&repo, &["cat-file", "-t", &head]), "commit");
    assert_eq!(git(&repo, &["show", &format!("{head}:n.txt")]), "new");
    // An object planted under another's name stays out.
    let future = git(&repo, &["hash-object", "--stdin"]); // the empty blob's id
    let staging = repo.join(".git/worktrees/o/agentd-objects");
    let forged = format!(
        "mkdir -p {0}/{1} && python3 -c 'import zlib,sys; sys.stdout.buffer.write(zlib.compress(b\"blob 6\\0poison\"))' > {0}/{1}/{2}",
        staging.display(),
        &future[..2],
        &future[2..]
    );
    let (_, text) = s.call("Bash", json!({ "command": forged })).await;
    assert!(text.contains("not taken into the repository"), "{text}");
    assert!(!repo.join(".git/objects").join(&future[..2]).join(&future[2..]).exists());
}

#[tokio::test]
async fn an_existing_worktree_is_entered_by_path_and_kept() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), true);
    // A worktree the user made, outside the repository, and a locked one.
    let theirs = d.dir.path().join("their-wt");
    git(&repo, &["worktree", "add", "-q", "-b", "theirs", theirs.to_str().unwrap()]);
    let theirs = std::fs::canonicalize(theirs).unwrap();
    let locked = d.dir.path().join("locked-wt");
    git(&repo, &["worktree", "add", "-q", "-b", "locked", locked.to_str().unwrap()]);
    git(&repo, &["worktree", "lock", "--reason", "in use elsewhere", locked.to_str().unwrap()]);
    let plain = d.dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();

    // Asked first (nobody answers here: refused, nothing moves).
    let mut asking = S::new(&d, &repo, json!({})).await;
    let (err, text) = asking.call("EnterWorktree", json!({ "path": theirs })).await;
    assert!(err && text.contains("permission"), "{text}");
    assert!(asking.worktree().await.is_null());

    let mut s = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    for (input, needle) in [
        (json!({ "path": theirs, "name": "x" }), "at most one of `name` or `path`"),
        (json!({ "path": plain }), "is not a registered worktree"),
        (json!({ "path": repo }), "current working directory"),
        (json!({ "path": locked }), "in use elsewhere"),
        (json!({ "path": d.dir.path().join("nowhere") }), "Cannot enter worktree"),
    ] {
        let (err, text) = s.call("EnterWorktree", input.clone()).await;
        assert!(err && text.contains(needle), "{input}: {text}");
    }
    // The main working tree, named from a linked one, is not a linked one.
    let mut inside = S::new(&d, &theirs, json!({ "mode": "bypass" })).await;
    let (err, text) = inside.call("EnterWorktree", json!({ "path": repo })).await;
    assert!(err && text.contains("is the main working tree"), "{text}");

    // A relative path, from the repository.
    let rel = format!("../{}", theirs.file_name().unwrap().to_str().unwrap());
    let (err, text) = s.call("EnterWorktree", json!({ "path": rel })).await;
    assert!(!err && text.contains("Entered worktree at") && text.contains("branch theirs"), "{text}");
    let info = s.worktree().await;
    assert_eq!((info["path"].clone(), info["entered"].clone()), (json!(theirs), json!(true)), "{info}");
    let (err, text) =
        s.call("Bash", json!({ "command": "pwd && git branch --show-current && git log --oneline" })).await;
    assert!(!err && text.contains(&theirs.display().to_string()) && text.contains("theirs"), "{text}");
    let (err, _) = s.call("Write", json!({ "file_path": "new.txt", "content": "x\n" })).await;
    assert!(!err && theirs.join("new.txt").exists());
    // The session did not make it: it is kept, whatever is asked.
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove", "discard_changes": true })).await;
    assert!(err && text.contains("which was there before"), "{text}");
    let (err, text) = s.call("ExitWorktree", json!({ "action": "keep" })).await;
    assert!(!err, "{text}");
    assert!(theirs.join("new.txt").exists() && git(&repo, &["branch", "--list", "theirs"]).contains("theirs"));
    assert!(s.worktree().await.is_null());
    let (_, text) = s.call("Bash", json!({ "command": "pwd" })).await;
    assert_eq!(text.trim(), repo.display().to_string());
}

#[tokio::test]
async fn the_attack_reviews_worktree_findings_stay_closed() {
    let d = TestDaemon::start().await;
    let repo = repo(d.dir.path(), true);
    let outside = d.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();

    // A read-only command in a worktree reads what git needs of the common
    // directory, nothing else of it.
    std::fs::write(repo.join(".git/secret.txt"), "SECRET-IN-GIT-DIR\n").unwrap();
    let mut s = S::new(&d, &repo, json!({ "permissions": { "allow": ["EnterWorktree"] } })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "ro" })).await;
    assert!(!err, "{text}");
    let (err, text) = s.call("Bash", json!({ "command": "git log --oneline | wc -l" })).await;
    assert!(!err && text.trim() == "1", "git log reads the objects: {text}");
    let command = format!("F={}/.git/secret.txt; cat $F", repo.display());
    let (_, text) = s.call("Bash", json!({ "command": command })).await;
    assert!(!text.contains("SECRET-IN-GIT-DIR"), "{text}");

    // A config.worktree planted as a symlink is refused, and nothing is
    // made where it points.
    let mut b = S::new(&d, &repo, json!({ "mode": "bypass" })).await;
    let third = d.dir.path().join("third-wt");
    git(&repo, &["worktree", "add", "-q", "-b", "third", third.to_str().unwrap()]);
    let planted = outside.join("made-by-the-daemon");
    std::os::unix::fs::symlink(&planted, repo.join(".git/worktrees/third-wt/config.worktree")).unwrap();
    let (err, text) = b.call("EnterWorktree", json!({ "path": third })).await;
    assert!(err && text.contains("not a regular file"), "{text}");
    assert!(!planted.exists() && b.worktree().await.is_null());

    // A registered path that became a symlink to another (locked) worktree.
    let locked = d.dir.path().join("locked-wt");
    git(&repo, &["worktree", "add", "-q", "-b", "locked", locked.to_str().unwrap()]);
    git(&repo, &["worktree", "lock", "--reason", "in use", locked.to_str().unwrap()]);
    let swapped = d.dir.path().join("swapped-wt");
    git(&repo, &["worktree", "add", "-q", "-b", "swapped", swapped.to_str().unwrap()]);
    std::fs::rename(&swapped, d.dir.path().join("swapped-wt.real")).unwrap();
    std::os::unix::fs::symlink(&locked, &swapped).unwrap();
    let (err, text) = b.call("EnterWorktree", json!({ "path": swapped })).await;
    assert!(err && text.contains("through a symbolic link"), "{text}");
    assert!(b.worktree().await.is_null());

    // A worktree deleted by hand: removing it drops its registration only,
    // not every stale one of the repository.
    let (err, text) = b.call("EnterWorktree", json!({ "name": "gone" })).await;
    assert!(!err, "{text}");
    let stale = d.dir.path().join("stale-wt");
    git(&repo, &["worktree", "add", "-q", "-b", "stale", stale.to_str().unwrap()]);
    std::fs::remove_dir_all(&stale).unwrap();
    std::fs::remove_dir_all(repo.join(".claude/worktrees/gone")).unwrap();
    let (err, text) = b.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(!err, "{text}");
    let list = git(&repo, &["worktree", "list", "--porcelain"]);
    assert!(!list.contains(".claude/worktrees/gone") && list.contains("stale-wt"), "{list}");
}

/// WorktreeCreate hooks make the worktree in place of git (any version
/// control, anywhere: here a plain directory outside any repository); the
/// session works there, and WorktreeRemove hooks remove it. Without one,
/// agentd keeps what a hook made rather than guess how to remove it.
#[tokio::test]
async fn worktree_hooks_make_and_remove_the_worktree_in_place_of_git() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start().await;
    let plain = d.dir.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let scripts = tempfile::tempdir().unwrap();
    let trees = std::fs::canonicalize(scripts.path()).unwrap().join("trees");
    let script = |name: &str, body: String| {
        let path = scripts.path().join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    };
    let create = script(
        "create.sh",
        format!(
            "name=$(sed 's/.*\"name\":\"\\([^\"]*\\)\".*/\\1/'); mkdir -p {t}/$name; echo making $name; echo {t}/$name",
            t = trees.display()
        ),
    );
    let remove = script("remove.sh", "p=$(sed 's/.*\"worktree_path\":\"\\([^\"]*\\)\".*/\\1/'); rm -rf \"$p\"".into());
    let hooks = |with_remove: bool| {
        let mut h = json!({ "WorktreeCreate": [{ "hooks": [{ "type": "command", "command": create }] }] });
        if with_remove {
            h["WorktreeRemove"] =
                json!([{ "matcher": "ignored", "hooks": [{ "type": "command", "command": remove }] }]);
        }
        h
    };
    let mut s = S::new(&d, &plain, json!({ "mode": "bypass", "hooks": hooks(true) })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "feature" })).await;
    let made = trees.join("feature");
    assert!(!err && text.contains(&made.display().to_string()) && text.contains("WorktreeCreate hook"), "{text}");
    assert_eq!(s.worktree().await["by_hook"], true);
    let (err, text) = s.call("Bash", json!({ "command": "pwd; echo work > w.txt" })).await;
    assert!(!err && text.contains(&made.display().to_string()), "{text}");
    assert_eq!(std::fs::read_to_string(made.join("w.txt")).unwrap(), "work\n");
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(!err && text.contains("WorktreeRemove hook"), "{text}");
    assert!(!made.exists());
    assert_eq!(s.worktree().await, Value::Null);

    // No WorktreeRemove hook: kept, and the session stays in it.
    let mut s = S::new(&d, &plain, json!({ "mode": "bypass", "hooks": hooks(false) })).await;
    let (err, _) = s.call("EnterWorktree", json!({ "name": "second" })).await;
    assert!(!err);
    let (err, text) = s.call("ExitWorktree", json!({ "action": "remove" })).await;
    assert!(err && text.contains("no WorktreeRemove hook"), "{text}");
    assert!(trees.join("second").is_dir());
    // The attack review's: a link the model planted where the hook makes
    // worktrees would send the session (and the removal) anywhere; a
    // directory holding the workspace neither.
    let victim = tempfile::tempdir().unwrap();
    std::fs::write(victim.path().join("precious.txt"), "keep").unwrap();
    let planted = script(
        "planted.sh",
        format!("mkdir -p {p}/.wt; echo {p}/.wt/$(sed 's/.*\"name\":\"\\([^\"]*\\)\".*/\\1/')", p = plain.display()),
    );
    std::fs::create_dir_all(plain.join(".wt")).unwrap();
    std::os::unix::fs::symlink(victim.path(), plain.join(".wt/evil")).unwrap();
    let h = json!({ "WorktreeCreate": [{ "hooks": [{ "type": "command", "command": planted }] }] });
    let mut s = S::new(&d, &plain, json!({ "mode": "bypass", "hooks": h })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "evil" })).await;
    assert!(err && text.contains("symbolic link"), "{text}");
    assert_eq!(s.worktree().await, Value::Null);
    let up = script("up.sh", format!("echo {}", plain.parent().unwrap().display()));
    let h = json!({ "WorktreeCreate": [{ "hooks": [{ "type": "command", "command": up }] }] });
    let mut s = S::new(&d, &plain, json!({ "mode": "bypass", "hooks": h })).await;
    let (err, text) = s.call("EnterWorktree", json!({ "name": "up" })).await;
    assert!(err && text.contains("holding"), "{text}");
    assert_eq!(std::fs::read_to_string(victim.path().join("precious.txt")).unwrap(), "keep");
    // A hook that names no directory fails the call, changing nothing.
    let liar = script("liar.sh", "echo /nonexistent/place".into());
    let h = json!({ "WorktreeCreate": [{ "hooks": [{ "type": "command", "command": liar }] }] });
    let mut s = S::new(&d, &plain, json!({ "mode": "bypass", "hooks": h })).await;
    let (err, text) = s.call("EnterWorktree", json!({})).await;
    assert!(err && text.contains("WorktreeCreate hook failed") && text.contains("not a directory"), "{text}");
    assert_eq!(s.worktree().await, Value::Null);
}
