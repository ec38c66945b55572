//! A foreground command that may write runs behind a copy-on-write layer
//! (issue 48): what it changed is judged when it ends — as a file tool's
//! write is, at any depth and in any repository — and applied change by
//! change; results list the changes, turns that ran commands rewind, and
//! real programs (git, make, Python, npm, cargo) work inside it.

use std::path::{Path, PathBuf};

use agentd_tests::{StandaloneDaemon, StreamedSession, procs, tag, tool_use};
use serde_json::{Value, json};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// A daemon and a workspace beside its state directory (not in it), a git
/// repository with one commit.
fn daemon() -> (StandaloneDaemon, PathBuf) {
    let d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "init"]);
    (d, ws)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A session in `mode` on `ws` (plus `extra` session/create fields).
async fn session(d: &StandaloneDaemon, ws: &Path, mode: &str, extra: Value) -> StreamedSession {
    let mut params = json!({ "cwd": ws, "mode": mode, "permission_timeout_ms": 200 });
    params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    StreamedSession::open(&d.socket, params).await.0
}

/// Runs `command` as one ended turn: the turn and its result.
async fn run(s: &mut StreamedSession, command: &str) -> (String, Value) {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let id = format!("b{}", NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    let turn = s.submit_ended(vec![tool_use(&id, "Bash", json!({ "command": command }))]).await;
    // (The stream also carries results of earlier `tool/call`s.)
    let results = s.results(&turn).await;
    let result = results.into_iter().find(|r| r["turn_id"] == turn.as_str()).unwrap();
    (turn, result)
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn paths(r: &Value) -> Vec<(String, String)> {
    r["changes"]
        .as_array()
        .map(|a| {
            a.iter().map(|c| (c["path"].as_str().unwrap().to_owned(), c["kind"].as_str().unwrap().to_owned())).collect()
        })
        .unwrap_or_default()
}

fn daemon_info(d: &StandaloneDaemon) -> Value {
    rt().block_on(async { agentd_tests::RawConn::connect(&d.socket).await.ok("daemon/info", json!({})).await })
}

fn layer_wall(info: &Value) -> Value {
    let walls = info["sandbox"]["walls"].as_array().unwrap_or_else(|| panic!("{info}"));
    walls.iter().find(|w| w["name"] == "layer").unwrap_or_else(|| panic!("{info}")).clone()
}

#[test]
fn daemon_info_lists_the_layer_as_a_wall() {
    let d = StandaloneDaemon::start(&[], &[]);
    let info = daemon_info(&d);
    assert_eq!(layer_wall(&info)["applied"], true, "this kernel makes unprivileged overlays: {info}");
    // Turned off, it is a missing wall, and the level stays full: a call
    // then has the older wall around it.
    let off = StandaloneDaemon::start(&["--sandbox-without", "layer"], &[]);
    let info = daemon_info(&off);
    assert_eq!(layer_wall(&info)["applied"], false, "{info}");
    assert_eq!(info["sandbox"]["level"], "full", "{info}");
}

/// What a command plants is not applied, at depths 1 to 8, under nested
/// repositories, in every mode that lets a command write; what it writes
/// beside is; the result says what was not, and lists what was.
#[test]
fn planted_names_at_any_depth_are_not_applied_in_any_mode() {
    let (d, ws) = daemon();
    let planted = [
        ".claude/settings.json",
        ".mcp.json",
        ".vscode/tasks.json",
        ".idea/workspace.xml",
        ".gitmodules",
        ".agentd/settings.json",
        ".git/hooks/pre-commit",
        ".git/config",
    ];
    rt().block_on(async {
        for (mode, extra) in [
            ("bypass", json!({})),
            ("accept_edits", json!({ "permissions": { "allow": ["Bash"] } })),
            ("default", json!({ "sandbox": { "auto_allow": true } })),
        ] {
            let mut s = session(&d, &ws, mode, extra).await;
            for depth in 1..=8 {
                let dir: PathBuf = (0..depth).map(|i| format!("d{i}")).collect();
                let dir = dir.display().to_string();
                // A nested repository at each depth, and every name in it.
                let mut cmd = format!("git init -q {dir} && echo kept > {dir}/kept.txt");
                for p in &planted {
                    let p = format!("{dir}/{p}");
                    cmd.push_str(&format!(" && mkdir -p \"$(dirname {p})\" && printf x >> {p}"));
                }
                let (_, r) = run(&mut s, &cmd).await;
                assert_eq!(r["is_error"], false, "{mode} depth {depth}: {r}");
                assert_eq!(std::fs::read_to_string(ws.join(&dir).join("kept.txt")).unwrap(), "kept\n", "{r}");
                for p in &planted[..7] {
                    assert!(!ws.join(&dir).join(p).exists(), "{mode} depth {depth}: {p} applied: {r}");
                }
                assert!(text(&r).contains("[not applied:"), "{r}");
                let kept = ws.join(&dir).join("kept.txt").display().to_string();
                assert!(paths(&r).contains(&(kept, "created".into())), "{r}");
                std::fs::remove_dir_all(ws.join("d0")).unwrap();
            }
        }
        // The workspace's own repository: hooks and config are not applied,
        // its bookkeeping is (git add, commit).
        let mut s = session(&d, &ws, "bypass", json!({})).await;
        let (_, r) = run(
            &mut s,
            "printf '#!/bin/sh\\necho PWNED\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; \
             git config core.hooksPath /tmp; echo two >> a.txt && git add a.txt && \
             git -c user.name=t -c user.email=t@t commit -qm two",
        )
        .await;
        assert!(!ws.join(".git/hooks/pre-commit").exists(), "{r}");
        assert!(!std::fs::read_to_string(ws.join(".git/config")).unwrap().contains("hooksPath"), "{r}");
        assert_eq!(git(&ws, &["log", "--format=%s"]), "two\ninit\n", "{r}");
        assert_eq!(git(&ws, &["status", "--porcelain"]), "", "{r}");
    });
}

/// git inside the layer: status never causes a question or a refusal;
/// branches, stash, rebase and worktrees work, and what they did is in
/// the real repository afterwards.
#[test]
fn git_works_inside_the_layer() {
    let (d, ws) = daemon();
    rt().block_on(async {
        let mut s = session(&d, &ws, "bypass", json!({})).await;
        let (_, r) = run(&mut s, "git status --short && echo ok").await;
        assert_eq!(text(&r), "ok\n", "git status: nothing to say: {r}");
        let steps = [
            "git checkout -q -b feature && echo f > f.txt && git add f.txt && git commit -qm feature",
            "git checkout -q main && echo m > m.txt && git add m.txt && git commit -qm main-work",
            "echo wip >> a.txt && git stash -q && git stash list | wc -l",
            "git checkout -q feature && git rebase -q main && git log --format=%s | head -3",
            "git worktree add -q wt-inside -b side && echo made",
        ];
        for step in steps {
            let (_, r) = run(
                &mut s,
                &format!(
                    "export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@t GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@t; {step}"
                ),
            )
            .await;
            assert_eq!(r["is_error"], false, "{step}: {r}");
            assert!(!text(&r).contains("[not applied:"), "{step}: {r}");
        }
        assert_eq!(git(&ws, &["log", "--format=%s", "feature"]), "feature\nmain-work\ninit\n");
        assert_eq!(git(&ws, &["stash", "list"]).lines().count(), 1);
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
        // A worktree inside the workspace: git knows it.
        assert!(git(&ws, &["worktree", "list"]).contains("wt-inside"), "{}", git(&ws, &["worktree", "list"]));
        assert_eq!(git(&ws.join("wt-inside"), &["status", "--porcelain"]), "");
    });
}

/// Each kind of change, and the kinds of file the workspace does not
/// take: a clear result, nothing unchecked applied, nothing left behind.
#[test]
fn each_kind_of_change_and_bad_input_has_a_clear_result() {
    let (d, ws) = daemon();
    std::fs::create_dir_all(ws.join("dir/sub")).unwrap();
    std::fs::write(ws.join("dir/sub/x"), "x").unwrap();
    std::fs::write(ws.join("file"), "f").unwrap();
    std::fs::write(ws.join("gone"), "g").unwrap();
    std::fs::write(ws.join("mode.sh"), "m").unwrap();
    rt().block_on(async {
        let mut s = session(&d, &ws, "bypass", json!({})).await;
        let (_, r) = run(
            &mut s,
            "rm -rf dir && echo now-a-file > dir; rm file && mkdir -p file/inner && echo in > file/inner/y; \
             rm gone; chmod +x mode.sh; mkfifo fifo; python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); \
             s.bind(\"sock\")'; printf n > \"$(printf 'new\\nline')\"; printf b > \"$(printf 'bad\\377name')\"; \
             for i in $(seq 50); do echo $i > r$i; mv r$i s$i; done; ln -s a.txt link; ln a.txt hard; echo done",
        )
        .await;
        assert_eq!(r["is_error"], false, "{r}");
        let t = text(&r);
        assert!(t.contains("[not applied: created fifo — a FIFO"), "{t}");
        assert!(t.contains("[not applied: created sock — a socket"), "{t}");
        assert_eq!(std::fs::read_to_string(ws.join("dir")).unwrap(), "now-a-file\n");
        assert_eq!(std::fs::read_to_string(ws.join("file/inner/y")).unwrap(), "in\n");
        assert!(!ws.join("gone").exists());
        use std::os::unix::fs::PermissionsExt;
        assert_ne!(std::fs::metadata(ws.join("mode.sh")).unwrap().permissions().mode() & 0o111, 0);
        assert!(!ws.join("fifo").exists() && !ws.join("sock").exists());
        assert_eq!(std::fs::read_to_string(ws.join("new\nline")).unwrap(), "n");
        use std::os::unix::ffi::OsStrExt;
        assert_eq!(std::fs::read(ws.join(std::ffi::OsStr::from_bytes(b"bad\xffname"))).unwrap(), b"b");
        assert_eq!(std::fs::read_to_string(ws.join("s50")).unwrap(), "50\n");
        assert!(!ws.join("r50").exists());
        assert_eq!(std::fs::read_link(ws.join("link")).unwrap(), Path::new("a.txt"));
        assert_eq!(std::fs::read_to_string(ws.join("hard")).unwrap(), "one\n");
        let kinds = paths(&r);
        let kind = |p: &str| kinds.iter().find(|(q, _)| q == &ws.join(p).display().to_string()).map(|(_, k)| k.clone());
        assert_eq!(kind("mode.sh").as_deref(), Some("mode"), "{r}");
        assert_eq!(kind("gone").as_deref(), Some("deleted"), "{r}");
        assert_eq!(kind("s1").as_deref(), Some("created"), "{r}");
        // Nothing of the call's layer is left in the state directory.
        let layers = d.dir.path().join("state/layers");
        let left = || -> Vec<PathBuf> {
            std::fs::read_dir(&layers).map(|e| e.flatten().map(|e| e.path()).collect()).unwrap_or_default()
        };
        agentd_tests::eventually("the layer is removed", || left().is_empty()).await;
        // setuid is refused while the command runs (seccomp).
        let (_, r) = run(&mut s, "touch su && chmod u+s su; ls -l su").await;
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(ws.join("su")).unwrap().mode() & 0o6000, 0, "{r}");
    });
}

/// A file changed in the workspace while the command ran (here by the
/// test, as by the user's editor) is a conflict: reported, never
/// overwritten; the command's other changes apply.
#[test]
fn a_file_changed_meanwhile_is_a_conflict_left_alone() {
    let (d, ws) = daemon();
    let t = tag();
    rt().block_on(async {
        let mut s = session(&d, &ws, "bypass", json!({})).await;
        let command = format!(
            "echo from-command > a.txt; echo other > b.txt; trap 'exit 0' USR1; while :; do sleep 0.05; done # {t}"
        );
        let turn = s.submit_ended(vec![tool_use("b", "Bash", json!({ "command": command }))]).await;
        // Once the command has written (its upper directory holds a.txt),
        // the user's editor saves the file.
        let state = d.dir.path().join("state/layers");
        agentd_tests::eventually("the command wrote", || {
            std::fs::read_dir(&state).into_iter().flatten().flatten().any(|l| l.path().join("0/u/b.txt").exists())
        })
        .await;
        std::fs::write(ws.join("a.txt"), "from-editor\n").unwrap();
        for pid in procs(&t) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGUSR1);
        }
        let r = s.results(&turn).await.remove(0);
        assert!(text(&r).contains("a.txt") && text(&r).contains("conflict"), "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "from-editor\n");
        assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "other\n");
    });
}

/// A turn that ran commands is diffed and rewound like one of file tools:
/// modified files get their content back, created ones go, deleted ones
/// come back; across a daemon restart.
#[test]
fn a_commands_turn_is_diffed_and_rewound_across_a_restart() {
    let (mut d, ws) = daemon();
    std::fs::write(ws.join("del.txt"), "keep me\n").unwrap();
    let (session_id, turn) = rt().block_on(async {
        let mut s = session(&d, &ws, "bypass", json!({})).await;
        let (turn, r) = run(&mut s, "echo two >> a.txt; echo new > new.txt; rm del.txt").await;
        assert_eq!(r["is_error"], false, "{r}");
        assert_eq!(paths(&r).len(), 3, "{r}");
        let diff = s.c.ok("turn/diff", json!({ "session_id": s.id, "turn_id": turn })).await;
        let text = diff["diff"].as_str().unwrap();
        for needle in ["+two", "+new", "-keep me"] {
            assert!(text.contains(needle), "{needle:?} in {text}");
        }
        (s.id.clone(), turn)
    });
    d.signal(nix::sys::signal::Signal::SIGTERM);
    d.wait_exit();
    d.restart();
    let (code, out, err) = agentd_tests::agentctl(&d.socket, &["rewind", &session_id, "--turn", &turn]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
    assert!(!ws.join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(ws.join("del.txt")).unwrap(), "keep me\n");
}

/// The attack review of the layer (each a way a refused change reached
/// the workspace and ran code at the user's next git command): a new
/// `commondir` in an existing repository; a new repository whose `hooks`
/// is a link; `HEAD` made a link to hide a git directory; a directory made
/// a repository over two calls; a new repository's configuration with a
/// key the old check missed, or past its read limit; a workspace that is
/// a bare repository; a rewind through a directory swapped for a link.
#[test]
fn the_layer_attack_reviews_findings_stay_closed() {
    let d = StandaloneDaemon::start(&[], &[]);
    let top = std::fs::canonicalize(d.dir.path()).unwrap();
    let pwned = top.join("pwned");
    std::fs::create_dir(&pwned).unwrap();
    let call = |ws: &Path, command: &str| -> String {
        let (_, out, err) = agentd_tests::agentctl(
            &d.socket,
            &[
                "call",
                "Bash",
                "--arg",
                &format!("command={command}"),
                "--mode",
                "bypass",
                "--cwd",
                ws.to_str().unwrap(),
            ],
        );
        format!("{out}{err}")
    };
    let user_git = |dir: &Path, args: &[&str]| {
        let _ = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(dir)
            .env("GIT_PAGER", "cat")
            .output();
    };
    let new_ws = |name: &str| {
        let ws = top.join(name);
        std::fs::create_dir_all(&ws).unwrap();
        ws
    };
    let mark = |n: &str| pwned.join(n).display().to_string();
    let hook = |n: &str| format!("printf '#!/bin/sh\\ntouch {}\\n'", mark(n));
    let mut said = Vec::new();
    // 1. commondir in an existing repository.
    let w1 = new_ws("w1");
    git(&w1, &["init", "-q"]);
    git(&w1, &["commit", "-q", "--allow-empty", "-m", "i"]);
    said.push(call(
        &w1,
        &format!(
            "mkdir evil && cp -r .git/objects .git/refs evil/ && printf '[core]\\n\\tfsmonitor = \"touch {}; false\"\\n' \
             > evil/config && echo ../evil > .git/commondir",
            mark("1")
        ),
    ));
    user_git(&w1, &["status"]);
    // 2. a new repository whose hooks directory is a link.
    let w2 = new_ws("w2");
    said.push(call(
        &w2,
        &format!(
            "git init -q sub && mkdir s && rm -rf sub/.git/hooks && ln -s ../../s sub/.git/hooks && {} > s/pre-commit \
             && chmod +x s/pre-commit",
            hook("2")
        ),
    ));
    user_git(&w2.join("sub"), &["commit", "-q", "--allow-empty", "-m", "x"]);
    // 3. HEAD made a link in an existing separate git directory.
    let w3 = new_ws("w3");
    git(&w3, &["init", "-q", "--separate-git-dir", w3.join("p.git").to_str().unwrap(), "p"]);
    said.push(call(
        &w3,
        &format!(
            "cd p.git && rm HEAD && ln -s refs/heads/main HEAD && {} > hooks/pre-commit && chmod +x hooks/pre-commit",
            hook("3")
        ),
    ));
    user_git(&w3.join("p"), &["commit", "-q", "--allow-empty", "-m", "x"]);
    // 4. a directory made a repository over two calls.
    let w4 = new_ws("w4");
    said.push(call(
        &w4,
        &format!("mkdir -p t/hooks && {} > t/hooks/pre-commit && chmod +x t/hooks/pre-commit", hook("4")),
    ));
    said.push(call(
        &w4,
        "mkdir -p t/objects t/refs/heads s && echo 'ref: refs/heads/main' > t/HEAD && echo 'gitdir: ../t' > s/.git",
    ));
    user_git(&w4.join("s"), &["commit", "-q", "--allow-empty", "-m", "x"]);
    // 5. a new repository's configuration: a key the old check missed; a
    //    configuration past its read limit.
    let w5 = new_ws("w5");
    said.push(call(
        &w5,
        &format!(
            "git init -q r && printf '[remote \"o\"]\\n\\turl = {}\\n\\tuploadpack = \"touch {}; git-upload-pack\"\\n' >> \
             r/.git/config",
            w5.join("r").display(),
            mark("5a")
        ),
    ));
    user_git(&w5.join("r"), &["fetch", "-q", "o"]);
    said.push(call(
        &w5,
        &format!(
            "git init -q big && head -c 4300000 /dev/zero | tr '\\0' '#' | fold -w 100 >> big/.git/config && printf \
             '[core]\\n\\tfsmonitor = \"touch {}; false\"\\n' >> big/.git/config",
            mark("5b")
        ),
    ));
    user_git(&w5.join("big"), &["status"]);
    // 6. the workspace is a bare repository.
    let w6 = top.join("w6.git");
    git(&top, &["init", "-q", "--bare", w6.to_str().unwrap()]);
    said.push(call(&w6, "printf '#!/bin/sh\\n' > hooks/pre-receive && chmod +x hooks/pre-receive && echo '[core] fsmonitor = x' >> config"));
    assert!(!w6.join("hooks/pre-receive").exists(), "{said:?}");
    assert!(!std::fs::read_to_string(w6.join("config")).unwrap().contains("fsmonitor"), "{said:?}");
    let ran: Vec<_> = std::fs::read_dir(&pwned).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(ran.is_empty(), "planted code ran: {ran:?}\n{}", said.join("\n"));
    // (The first of the two calls of 4 plants in a plain directory: no
    // repository yet, nothing to refuse.)
    for (i, out) in said.iter().enumerate().filter(|(i, _)| *i != 3) {
        assert!(out.contains("[not applied:"), "{i}: {out}");
    }
    // 8. A rewind through a directory swapped for a link since (a
    //    background job writes through): refused, not written into hooks.
    let w8 = new_ws("w8");
    git(&w8, &["init", "-q"]);
    rt().block_on(async {
        let mut s = session(&d, &w8, "bypass", json!({})).await;
        run(&mut s, &format!("mkdir d && {} > d/pre-commit && chmod +x d/pre-commit", hook("8"))).await;
        let (turn, _) = run(&mut s, "rm d/pre-commit").await;
        std::fs::remove_dir(w8.join("d")).unwrap();
        std::os::unix::fs::symlink(".git/hooks", w8.join("d")).unwrap();
        let r = s.c.ok("turn/rewind", json!({ "session_id": s.id, "turn_id": turn })).await;
        assert!(!w8.join(".git/hooks/pre-commit").exists(), "{r}");
        assert_eq!(r["restored"].as_array().map(Vec::len), Some(0), "{r}");
    });
}

/// Permission by effect (`sandbox.auto_allow: "effects"`): a command runs
/// confined and unasked, and what it changed waits for approval — the
/// question carries the changes and a diff, nothing reaches the workspace
/// before the answer; `allow` applies, `deny` discards. In `accept_edits`
/// what an Edit would apply unasked applies without a question.
#[test]
fn effects_mode_asks_about_what_a_command_changed() {
    let (d, ws) = daemon();
    rt().block_on(async {
        let effects = json!({ "sandbox": { "auto_allow": "effects" }, "permission_timeout_ms": 60_000 });
        let mut s = session(&d, &ws, "default", effects.clone()).await;
        let uses = vec![tool_use("e1", "Bash", json!({ "command": "echo two >> a.txt; echo new > n.txt" }))];
        let turn = s.submit_ended(uses).await;
        let request = s.permission_request().await;
        assert_eq!(request["kind"], "effects", "{request}");
        assert_eq!(request["changes"].as_array().map(Vec::len), Some(2), "{request}");
        let diff = request["diff"].as_str().unwrap_or_default();
        assert!(diff.contains("+two") && diff.contains("+new"), "{diff}");
        // Nothing applied while the question waits.
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\n");
        assert!(!ws.join("n.txt").exists());
        s.respond(&request, json!({ "decision": "allow" })).await;
        let r = s.results(&turn).await.remove(0);
        assert_eq!(r["is_error"], false, "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\ntwo\n");
        assert_eq!(paths(&r).len(), 2, "{r}");
        // Denied: discarded, and the result says so.
        let turn = s.submit_ended(vec![tool_use("e2", "Bash", json!({ "command": "echo three >> a.txt" }))]).await;
        let request = s.permission_request().await;
        assert_eq!(request["kind"], "effects", "{request}");
        s.respond(&request, json!({ "decision": "deny" })).await;
        let r = s.results(&turn).await.remove(0);
        assert!(text(&r).contains("not approved"), "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\ntwo\n");
        // In accept_edits: applied, no question.
        let mut s = session(&d, &ws, "accept_edits", effects).await;
        let (_, r) = run(&mut s, "echo four >> a.txt").await;
        assert_eq!(r["is_error"], false, "{r}");
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "one\ntwo\nfour\n");
    });
}

/// The second attack review of the layer: under `"effects"`, a command
/// that outlasts its timeout (moved to the background) applies nothing
/// that waited for approval; a nested repository's `core.hooksPath`
/// (husky) and the user's own relative `core.hooksPath` are protected; a
/// rebase's todo list with an `exec` line is not applied; a directory
/// made a repository over two calls has its earlier configuration judged
/// as a new one's.
#[test]
fn the_second_layer_reviews_findings_stay_closed() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join(".gitconfig"), "[core]\n\thooksPath = .githooks\n").unwrap();
    let d = StandaloneDaemon::start(&[], &[("HOME", home.path().to_str().unwrap())]);
    let top = std::fs::canonicalize(d.dir.path()).unwrap();
    let ws = top.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    git(&ws, &["init", "-q"]);
    std::fs::write(ws.join("a.txt"), "one\n").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "one"]);
    std::fs::write(ws.join("a.txt"), "two\n").unwrap();
    git(&ws, &["commit", "-qam", "two"]);
    let proj = ws.join("proj");
    std::fs::create_dir_all(proj.join(".husky")).unwrap();
    git(&proj, &["init", "-q"]);
    git(&proj, &["config", "core.hooksPath", ".husky"]);
    rt().block_on(async {
        // F1: effects, moved to the background at its timeout.
        let effects = json!({ "sandbox": { "auto_allow": "effects" } });
        let mut s = session(&d, &ws, "default", effects).await;
        let uses = vec![tool_use(
            "t1",
            "Bash",
            json!({ "command": "echo evil >> a.txt; echo new > n2.txt; sleep 2", "timeout": 500 }),
        )];
        let turn = s.submit_ended(uses).await;
        let r = s.results(&turn).await.remove(0);
        assert!(text(&r).contains("background"), "{r}");
        let layers = top.join("state/layers");
        agentd_tests::eventually("the job ends", || {
            std::fs::read_dir(&layers).map(|e| e.count() == 0).unwrap_or(true)
                && !procs("sleep 2").iter().any(|_| false)
        })
        .await;
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "two\n");
        assert!(!ws.join("n2.txt").exists());
        // F3, F4, F5 (bypass: the judge is the same in every mode).
        let mut b = session(&d, &ws, "bypass", json!({})).await;
        let hook = "printf '#!/bin/sh\\ntouch PWNED\\n'";
        for (command, planted) in [
            (format!("{hook} > proj/.husky/pre-commit"), "proj/.husky/pre-commit"),
            (format!("mkdir -p .githooks && {hook} > .githooks/pre-commit"), ".githooks/pre-commit"),
        ] {
            let (_, r) = run(&mut b, &command).await;
            assert!(!ws.join(planted).exists(), "{planted}: {r}");
            assert!(text(&r).contains("[not applied:"), "{r}");
        }
        let (_, r) = run(
            &mut b,
            "GIT_SEQUENCE_EDITOR='sed -i 1ibreak' git -c user.name=t -c user.email=t@t rebase -q -i HEAD~1; \
             sed -i '1iexec touch PWNED' .git/rebase-merge/git-rebase-todo",
        )
        .await;
        let todo = std::fs::read_to_string(ws.join(".git/rebase-merge/git-rebase-todo")).unwrap_or_default();
        assert!(!todo.contains("exec"), "{r}");
        let (_, r) =
            run(&mut b, "mkdir -p t && printf '[remote \"o\"]\\n\\turl = ext::sh -c touch%% PWNED\\n' > t/config")
                .await;
        assert!(ws.join("t/config").exists(), "a plain file in a plain directory: {r}");
        let (_, r) = run(
            &mut b,
            "mkdir -p t/objects t/refs/heads s && echo 'ref: refs/heads/main' > t/HEAD && echo 'gitdir: ../t' > s/.git",
        )
        .await;
        assert!(!ws.join("t/HEAD").exists() && !ws.join("s/.git").exists(), "{r}");
    });
}

/// One table of protected names for file tools and commands: in
/// `accept_edits` a Write of `.vscode/tasks.json` (a task VS Code may run
/// when the folder opens) asks, as a command's change to it is not
/// applied.
#[test]
fn file_tools_and_commands_protect_the_same_names() {
    let (d, ws) = daemon();
    rt().block_on(async {
        let mut s = session(&d, &ws, "accept_edits", json!({ "permissions": { "allow": ["Bash"] } })).await;
        for name in [".vscode/tasks.json", ".idea/workspace.xml", ".gitmodules", "pkg/.mcp.json"] {
            let r = s.c.tool(&s.id, "Write", json!({ "file_path": name, "content": "{}" })).await;
            assert_eq!(r["is_error"], true, "{name}: {r}");
            assert!(text(&r).contains("permission"), "asked, nobody answered: {name}: {r}");
            let (_, r) = run(&mut s, &format!("mkdir -p \"$(dirname {name})\" && echo '{{}}' > {name}")).await;
            assert!(text(&r).contains("[not applied:"), "{name}: {r}");
            assert!(!ws.join(name).exists(), "{name}");
        }
        // An ordinary file: written unasked.
        let r = s.c.tool(&s.id, "Write", json!({ "file_path": "notes.json", "content": "{}" })).await;
        assert_eq!(r["is_error"], false, "{r}");
    });
}

/// A call writing past its layer's bound is stopped while it runs (not
/// when it would have ended), and nothing of it applies.
#[test]
fn a_call_over_the_layers_bound_is_stopped_while_it_runs() {
    let d = StandaloneDaemon::start(&[], &[("AGENTD_TEST_LAYER_MAX_BYTES", "1000000")]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    rt().block_on(async {
        let mut s = session(&d, &ws, "bypass", json!({})).await;
        let started = std::time::Instant::now();
        let (_, r) =
            run(&mut s, "head -c 600000 /dev/zero > a; head -c 600000 /dev/zero > b; sleep 120; echo late > c").await;
        let t = text(&r);
        assert!(t.contains("[killed: what it wrote passed the layer's bounds]"), "{r}");
        assert!(t.contains("wrote more than 1000000 bytes, so none of its changes were applied"), "{r}");
        assert!(started.elapsed() < std::time::Duration::from_secs(100), "stopped while it ran");
        for f in ["a", "b", "c"] {
            assert!(!ws.join(f).exists(), "{f} applied: {r}");
        }
        // Under the bound, the next call applies as usual.
        let (_, r) = run(&mut s, "head -c 1000 /dev/zero > small").await;
        assert_eq!(r["is_error"], false, "{r}");
        assert!(ws.join("small").exists());
    });
}
