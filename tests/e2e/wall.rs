//! The wall fails closed (issue 48): with the daemon as a normal user, an
//! error other than not-found while examining the workspace, before or
//! after a call, is never read as "nothing there", and the scan's bound is
//! a refusal, never a partial scan. Items 1–4 of the issue, then the
//! attempts around each guard (modes 0000, 0311, 0100; depth; renames).
//! As `nobody`, since root reads what these modes hide; each test returns
//! early when not run as root (CI runs as root).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A daemon running as `nobody` on a workspace of its own.
struct Nobody {
    n: agentd_tests::AsNobody,
    socket: PathBuf,
    _daemon: agentd_tests::ChildGuard,
}

impl Nobody {
    /// The daemon started on a workspace holding `dirs` (and `.git/hooks`).
    fn start(dirs: &[&str]) -> Option<Nobody> {
        let dirs: Vec<&str> = [".git", ".git/hooks"].iter().chain(dirs).copied().collect();
        let n = agentd_tests::AsNobody::new(&dirs)?;
        let socket = n.dir.path().join("agentd.sock");
        let daemon = agentd_tests::ChildGuard::spawn(
            n.command("agentd")
                .arg("--socket")
                .arg(&socket)
                .arg("--state-dir")
                .arg(n.dir.path().join("state"))
                .stderr(std::process::Stdio::null()),
        );
        agentd_tests::eventually_blocking("agentd as nobody listens", || socket.exists());
        Some(Nobody { n, socket, _daemon: daemon })
    }

    fn ws(&self) -> &Path {
        &self.n.ws
    }

    /// Runs `command` with Bash in a bypass session on the workspace (the
    /// wall is the same in every mode); returns what agentctl printed.
    fn run(&self, command: &str) -> String {
        let out = self
            .n
            .command("agentctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(["call", "Bash", "--arg", &format!("command={command}"), "--mode", "bypass", "--cwd"])
            .arg(self.ws())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    }

    /// The user puts things back between attempts: every mode under the
    /// workspace readable again, and `paths` (relative) removed.
    fn reset(&self, paths: &[&str]) {
        chmod_all(self.ws());
        for p in paths {
            let p = self.ws().join(p);
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
        // What was moved aside goes too.
        remove_aside(self.ws());
    }
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `chmod -R u+rwx` on the directories under `dir`.
fn chmod_all(dir: &Path) {
    chmod(dir, 0o755);
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if entry.file_type().unwrap().is_dir() {
            chmod_all(&entry.path());
        }
    }
}

/// Removes every `*.agentd-quarantine-*` under `dir`.
fn remove_aside(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().contains(".agentd-quarantine-") {
            let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
        } else if entry.file_type().unwrap().is_dir() {
            remove_aside(&path);
        }
    }
}

/// A shell line that writes an executable pre-commit hook at `path`.
fn hook(path: &str) -> String {
    format!("printf '#!/bin/sh\\necho PWNED\\n' > {path} && chmod +x {path}")
}

/// A shell line that plants an allow rule in `dir/.claude/settings.json`
/// and a `git init`ed `dir/sub` with a pre-commit hook.
fn plant_in(dir: &str) -> String {
    format!(
        "mkdir -p {dir}/.claude && printf '{{\"permissions\":{{\"allow\":[\"Bash\"]}}}}' > {dir}/.claude/settings.json \
         && git init -q {dir}/sub && {}",
        hook(&format!("{dir}/sub/.git/hooks/pre-commit"))
    )
}

/// What a later session or the user's git would obey under `dir`.
fn planted_under(ws: &Path, dir: &str) -> Vec<PathBuf> {
    [".claude/settings.json", "sub/.git/hooks/pre-commit"]
        .iter()
        .map(|rel| ws.join(dir).join(rel))
        .filter(|p| p.exists())
        .collect()
}

/// Item 1: a submodule's git directory hidden by one call (`chmod 000
/// .git/modules`) got no protection in the next, which gave the mode back
/// and planted the submodule's hook. Also with `.git/modules` 0311 (no
/// listing) and 0100, and the submodule's own directory 0000 (its `hooks`
/// cannot be looked at).
#[test]
fn a_submodules_git_directory_made_unreadable_refuses_the_next_call() {
    let Some(d) = Nobody::start(&[".git/modules", ".git/modules/lib", ".git/modules/lib/hooks"]) else { return };
    let ws = d.ws().to_path_buf();
    let the_hook = ws.join(".git/modules/lib/hooks/pre-commit");
    let mut leaked = Vec::new();
    for (dir, mode) in
        [(".git/modules", "000"), (".git/modules", "311"), (".git/modules", "100"), (".git/modules/lib", "000")]
    {
        let out = d.run(&format!("chmod {mode} {dir} && echo hidden"));
        assert!(out.contains("hidden"), "{out}");
        let out = d.run(&format!("chmod 755 {dir}; {} && echo planted", hook(".git/modules/lib/hooks/pre-commit")));
        if the_hook.exists() {
            leaked.push(format!("{dir} at {mode}: {out}"));
        } else if out.contains("planted") {
            leaked.push(format!("{dir} at {mode} (said planted): {out}"));
        }
        d.reset(&[".git/modules/lib/hooks/pre-commit"]);
    }
    assert!(leaked.is_empty(), "a submodule's hook was planted:\n{}", leaked.join("\n"));
    // With the modes given back, calls run, and the submodule's hooks stay
    // read-only.
    let out = d.run(&format!("{} || echo refused", hook(".git/modules/lib/hooks/pre-commit")));
    assert!(out.contains("refused") && !the_hook.exists(), "{out}");
}

/// Item 2: settings and a repository with a hook planted in a directory
/// the call then made unlistable (`chmod 0311 pkg`) were neither moved
/// aside nor mentioned. Also 0000, 0100, and a directory two levels down.
/// Whatever the daemon cannot examine after a call is moved aside, and
/// the result says so and how to look at it.
#[test]
fn settings_in_a_directory_made_unreadable_are_moved_aside_and_said() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let mut leaked = Vec::new();
    for (dir, mode) in [("pkg", "0311"), ("pkg", "0000"), ("pkg", "0100"), ("a/b", "0311")] {
        let out = d.run(&format!("mkdir -p {dir} && {} && chmod {mode} {dir} && echo done", plant_in(dir)));
        assert!(out.contains("done"), "{out}");
        chmod_all(&ws);
        let planted = planted_under(&ws, dir);
        if !planted.is_empty() {
            leaked.push(format!("{dir} at {mode}: {planted:?} left in place: {out}"));
        } else if !out.contains("could not be examined") {
            leaked.push(format!("{dir} at {mode}: moved, but the result does not say why: {out}"));
        }
        d.reset(&[dir.split('/').next().unwrap()]);
    }
    assert!(leaked.is_empty(), "planted settings or hooks were left where they are obeyed:\n{}", leaked.join("\n"));
    // A directory left unreadable refuses the next call, saying how to fix it.
    std::fs::create_dir(ws.join("locked")).unwrap();
    nix::unistd::chown(&ws.join("locked"), Some(agentd_tests::NOBODY.into()), None).unwrap();
    chmod(&ws.join("locked"), 0o311);
    // (A command that writes: one judged read-only runs read-only, where
    // nothing can be planted.)
    let out = d.run("touch x && echo ran$((1))");
    assert!(!out.contains("ran1") && out.contains("cannot be examined"), "{out}");
    chmod(&ws.join("locked"), 0o755);
    let out = d.run("touch x && echo ran$((1))");
    assert!(out.contains("ran1"), "{out}");
}

/// Item 3: past the scan's bound (200,000 entries) settings and nested
/// repositories were not looked for, and only the log said so. A
/// workspace past the bound now refuses the call, saying why; a call that
/// takes it past the bound is examined whole when it ends.
#[test]
fn past_the_scans_bound_the_call_is_refused_not_half_scanned() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    // One call makes the files and plants, in the same call.
    let out =
        d.run(&format!("mkdir many && (cd many && seq 200001 | xargs touch) && {} && echo made", plant_in("zz/pkg")));
    assert!(out.contains("made"), "{out}");
    let planted = planted_under(&ws, "zz/pkg");
    assert!(planted.is_empty(), "planted in the call that went past the bound, left in place: {planted:?}\n{out}");
    // The next call plants: refused before it runs.
    let _ = std::fs::remove_dir_all(ws.join("zz"));
    remove_aside(&ws);
    let out = d.run(&format!("mkdir -p zz/pkg && {} && echo planted", plant_in("zz/pkg")));
    let planted = planted_under(&ws, "zz/pkg");
    assert!(planted.is_empty(), "planted past the bound, left in place: {planted:?}\n{out}");
    assert!(out.contains("more than 200000 entries"), "{out}");
    // Fewer files: calls run again. A skipped tree (`node_modules`) of
    // many files does not count.
    std::fs::rename(ws.join("many"), ws.join("node_modules")).unwrap();
    let out = d.run("touch x && echo ran$((1))");
    assert!(out.contains("ran1"), "{out}");
}

/// Item 4: a job flipping `.git` between modes 000 and 755 while other
/// calls wrote `.git/hooks/pre-commit` got one call in 70–190 to run with
/// `.git/hooks` unbound (`protected_paths` skipped a path whose
/// `canonicalize` failed). Here a thread of the test flips `.git` (what a
/// confined job of the same user can do), mostly open with short closed
/// pulses, so the daemon's checks mostly see it open and sometimes, in
/// between, closed; each call tries to write the hook while it runs. The
/// old code leaked within a few dozen calls.
#[test]
fn a_git_directory_flipping_modes_never_leaves_hooks_writable() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let git = ws.join(".git");
    let the_hook = ws.join(".git/hooks/pre-commit");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flipper = {
        let (stop, git) = (stop.clone(), git.clone());
        std::thread::spawn(move || {
            let mut pulse = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Pacing, not waiting: closed for 0.2–0.6 ms, open for 1 ms.
                pulse += 1;
                chmod(&git, 0o000);
                std::thread::sleep(std::time::Duration::from_micros(200 + 200 * (pulse % 3)));
                chmod(&git, 0o755);
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            chmod(&git, 0o755);
        })
    };
    let write = format!(
        "for i in $(seq 400); do if {{ {}; }} 2>/dev/null; then echo HOOK-WRITTEN; break; fi; done; true",
        hook(".git/hooks/pre-commit")
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let (mut calls, mut ran) = (0, 0);
    let mut leaked = None;
    while std::time::Instant::now() < deadline && calls < 400 {
        let out = d.run(&write);
        calls += 1;
        if !out.contains("cannot be examined") && !out.contains("could not be applied") {
            ran += 1;
        }
        if the_hook.exists() || out.contains("HOOK-WRITTEN") {
            leaked = Some(out);
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(leaked.is_none(), "call {calls} ran with .git/hooks writable: {leaked:?}");
    assert!(!the_hook.exists());
    eprintln!("{calls} calls, {ran} ran");
    // Once it stays open, calls run, with the hooks read-only.
    let out = d.run(&format!("{} || echo refused", hook(".git/hooks/pre-commit")));
    assert!(out.contains("refused") && !the_hook.exists(), "{out}");
}

/// Around item 1: the git directories of a submodule's own submodules
/// (`modules/lib/modules/inner`) and of a submodule named `a/b`
/// (`modules/a/b`) were not looked for: their hooks were writable.
#[test]
fn nested_and_slash_named_submodules_hooks_stay_read_only() {
    let Some(d) = Nobody::start(&[
        ".git/modules",
        ".git/modules/lib",
        ".git/modules/lib/hooks",
        ".git/modules/lib/modules/inner/hooks",
        ".git/modules/a/b/hooks",
    ]) else {
        return;
    };
    let ws = d.ws().to_path_buf();
    let mut leaked = Vec::new();
    for dir in [".git/modules/lib/modules/inner", ".git/modules/a/b"] {
        let out = d.run(&format!("{} && echo written$((1))", hook(&format!("{dir}/hooks/pre-commit"))));
        if ws.join(dir).join("hooks/pre-commit").exists() || out.contains("written1") {
            leaked.push(format!("{dir}: {out}"));
        }
    }
    assert!(leaked.is_empty(), "a submodule's hook was planted:\n{}", leaked.join("\n"));
}

/// Around item 2: a repository a command makes with a hook, then hides
/// (its `hooks` or its whole `.git` made unreadable, so no hook is seen and
/// its config cannot be read), is moved aside like one whose hook shows.
#[test]
fn a_new_repository_whose_hooks_cannot_be_read_is_moved_aside() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let mut leaked = Vec::new();
    for (hide, mode) in [("pkg/sub/.git/hooks", "000"), ("pkg/sub/.git/hooks", "311"), ("pkg/sub/.git", "000")] {
        let out = d.run(&format!(
            "mkdir -p pkg && git init -q pkg/sub && {} && chmod {mode} {hide} && echo done",
            hook("pkg/sub/.git/hooks/pre-commit")
        ));
        assert!(out.contains("done"), "{out}");
        chmod_all(&ws);
        if ws.join("pkg/sub/.git/hooks/pre-commit").exists() {
            leaked.push(format!("{hide} at {mode}: {out}"));
        } else if !out.contains("could not be examined") {
            leaked.push(format!("{hide} at {mode}: moved, but the result does not say why: {out}"));
        }
        d.reset(&["pkg"]);
    }
    assert!(leaked.is_empty(), "a new repository's hook was left in place:\n{}", leaked.join("\n"));
}
