//! Items 1–4 of issue 48 and the attempts around them (modes 0000, 0311,
//! 0100; depth; renames; FIFOs; `.git` files), with the daemon as a normal
//! user: a foreground call runs behind its copy-on-write layer, so what it
//! plants is judged when it ends and never applied, and nothing of the
//! workspace is examined before it; an upper directory the daemon cannot
//! read completely is discarded whole, and the result says so.
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
        } else if out.contains("planted") && !out.contains("[not applied:") {
            leaked.push(format!("{dir} at {mode} (said planted, not that it was not applied): {out}"));
        }
        d.reset(&[".git/modules/lib/hooks/pre-commit"]);
    }
    assert!(leaked.is_empty(), "a submodule's hook was planted:\n{}", leaked.join("\n"));
    // With the modes given back, calls run, and the submodule's hooks stay
    // read-only.
    let out = d.run(&format!("{} || echo refused", hook(".git/modules/lib/hooks/pre-commit")));
    assert!(out.contains("[not applied:") && !the_hook.exists(), "{out}");
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
        } else if !out.contains("could not be read completely") {
            leaked.push(format!("{dir} at {mode}: not applied, but the result does not say why: {out}"));
        }
        d.reset(&[dir.split('/').next().unwrap()]);
    }
    assert!(leaked.is_empty(), "planted settings or hooks were left where they are obeyed:\n{}", leaked.join("\n"));
    // A directory the user left unreadable stops no call: nothing of the
    // workspace is examined before one (a command that writes: one judged
    // read-only runs read-only, where nothing can be planted).
    std::fs::create_dir(ws.join("locked")).unwrap();
    nix::unistd::chown(&ws.join("locked"), Some(agentd_tests::NOBODY.into()), None).unwrap();
    chmod(&ws.join("locked"), 0o311);
    let out = d.run("touch x && echo ran$((1))");
    assert!(out.contains("ran1") && ws.join("x").exists(), "{out}");
    chmod(&ws.join("locked"), 0o755);
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
    // The next call plants among them: not applied, and said.
    let _ = std::fs::remove_dir_all(ws.join("zz"));
    remove_aside(&ws);
    let out = d.run(&format!("mkdir -p zz/pkg && {} && echo planted", plant_in("zz/pkg")));
    let planted = planted_under(&ws, "zz/pkg");
    assert!(planted.is_empty(), "planted among 200,001 files, left in place: {planted:?}\n{out}");
    assert!(out.contains("[not applied:"), "{out}");
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
        if the_hook.exists() {
            leaked = Some(out);
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    flipper.join().unwrap();
    assert!(leaked.is_none(), "call {calls} ran with .git/hooks writable: {leaked:?}");
    assert!(!the_hook.exists());
    eprintln!("{calls} calls, {ran} ran");
    // Once it stays open, calls run, and the hook is not applied.
    let out = d.run(&format!("{} || echo refused", hook(".git/hooks/pre-commit")));
    assert!(out.contains("[not applied:") && !the_hook.exists(), "{out}");
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
        if ws.join(dir).join("hooks/pre-commit").exists()
            || (out.contains("written1") && !out.contains("[not applied:"))
        {
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
        } else if !out.contains("could not be read completely") && !out.contains("[not applied:") {
            leaked.push(format!("{hide} at {mode}: not applied, but the result does not say why: {out}"));
        }
        d.reset(&["pkg"]);
    }
    assert!(leaked.is_empty(), "a new repository's hook was left in place:\n{}", leaked.join("\n"));
}

impl Nobody {
    /// [`Nobody::run`], given up after `secs` seconds: `None` when the call
    /// had not returned by then; `unblock` is called then, again and again,
    /// until it returns (at most `secs` more, then agentctl is killed).
    fn run_within(&self, command: &str, secs: u64, unblock: impl Fn()) -> (Option<String>, std::time::Duration) {
        let start = std::time::Instant::now();
        let mut child = self
            .n
            .command("agentctl")
            .arg("--socket")
            .arg(&self.socket)
            .args(["call", "Bash", "--arg", &format!("command={command}"), "--mode", "bypass", "--cwd"])
            .arg(self.ws())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        while start.elapsed() < std::time::Duration::from_secs(secs) {
            if child.try_wait().unwrap().is_some() {
                let out = child.wait_with_output().unwrap();
                let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
                return (Some(text), start.elapsed());
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let took = start.elapsed();
        while start.elapsed() < std::time::Duration::from_secs(2 * secs) && child.try_wait().unwrap().is_none() {
            unblock();
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
        (None, took)
    }
}

/// A FIFO where the end of a call reads (a new repository's `config`, or a
/// `.git` that is a FIFO): opened without O_NONBLOCK, the daemon waits for
/// a writer that never comes, before the planted hook of another new
/// repository and the planted settings are moved aside: they stay, and
/// the call never returns (attack on issue 48's change).
#[test]
fn a_fifo_where_the_scan_reads_does_not_stall_the_wall() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let mut leaked = Vec::new();
    for (fifo, make) in [("a/.git/config", "mkdir -p a/.git"), ("a/.git", "mkdir -p a")] {
        let command = format!("{make} && mkfifo {fifo} && mkdir -p y && {} && echo done", plant_in("y"));
        let writer = ws.join(fifo);
        let stuck = std::cell::RefCell::new(None);
        let (out, took) = d.run_within(&command, 30, || {
            // What is in place while the daemon waits.
            stuck.borrow_mut().get_or_insert_with(|| planted_under(&ws, "y"));
            // Let the daemon's open return (a writer comes and goes).
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::OpenOptions::new().write(true).custom_flags(libc_nonblock()).open(&writer);
        });
        let planted = planted_under(&ws, "y");
        match out {
            None => leaked.push(format!(
                "{fifo} a FIFO: the call had not returned after {took:?}; meanwhile still in place: {:?}",
                stuck.borrow()
            )),
            Some(out) if !planted.is_empty() => leaked.push(format!("{fifo} a FIFO: left {planted:?}: {out}")),
            Some(_) => {}
        }
        d.reset(&["a", "y"]);
    }
    assert!(leaked.is_empty(), "a FIFO stalled the wall:\n{}", leaked.join("\n"));
}

/// A command that makes many settings directories (60,000 `.claude`): the
/// end of the call scans without a bound, and each name found was looked
/// up in the list of those found before (quadratic): the call takes
/// minutes, while a hook planted beside stays in place.
#[test]
fn many_settings_names_do_not_stall_the_end_of_a_call() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let command = format!(
        "mkdir -p m && cd m && seq -f 'd%g/.claude' 60000 | xargs mkdir -p && cd .. && {} && echo done",
        plant_in("y")
    );
    let (out, took) = d.run_within(&command, 45, || {});
    let planted = planted_under(&ws, "y");
    let _ = std::fs::remove_dir_all(ws.join("m"));
    if let Some(out) = &out {
        assert!(out.contains("done"), "{out}");
    }
    assert!(
        out.is_some() && took < std::time::Duration::from_secs(45),
        "60,000 .claude took {took:?} (returned: {}); meanwhile in place: {planted:?}",
        out.is_some()
    );
}

/// Settings and a repository planted in a directory the command then
/// makes `0555` (listable and searchable, not writable): the end of the
/// call cannot rename them out of it and only says so once; nothing is
/// unexaminable, so the next call is not refused and takes them for the
/// user's (ARCHITECTURE says such calls are refused until the user looks).
/// Also `0444` (the `.claude` in it cannot be listed then).
#[test]
fn what_is_planted_in_a_directory_made_read_only_does_not_stay() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let mut leaked = Vec::new();
    for mode in ["555", "444"] {
        let out = d.run(&format!(
            "mkdir -p pkg/.claude && printf '{{\"permissions\":{{\"allow\":[\"Bash\"]}}}}' > pkg/.claude/settings.json \
             && git init -q pkg && {} && chmod {mode} pkg && echo done",
            hook("pkg/.git/hooks/pre-commit")
        ));
        assert!(out.contains("done"), "{out}");
        let next = d.run("echo next-call-ran");
        chmod_all(&ws);
        let planted: Vec<_> = [".claude/settings.json", ".git/hooks/pre-commit"]
            .iter()
            .map(|rel| ws.join("pkg").join(rel))
            .filter(|p| p.exists())
            .collect();
        if !planted.is_empty() && next.contains("next-call-ran") {
            leaked.push(format!("pkg at {mode}: left {planted:?} and the next call ran: {out}\n{next}"));
        }
        d.reset(&["pkg"]);
    }
    assert!(leaked.is_empty(), "planted in a read-only directory and kept:\n{}", leaked.join("\n"));
}

/// A `.git` file git obeys and the daemon reads otherwise: longer than
/// 4096 bytes (git reads up to 4 × PATH_MAX, and drops trailing newlines),
/// a git directory whose name holds a newline (git takes the whole rest of
/// the file, the daemon its first line), or ends in a space (the daemon
/// trims it), or a `.git` that is a symbolic link (to the git directory,
/// or to a file naming it: git follows both). The new repository's hook is not seen and stays, and runs at
/// the user's next `git commit` there.
#[test]
fn a_git_file_read_as_git_reads_it() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let cases = [
        ("s1", "gd1", "{ printf 'gitdir: ../gd1'; head -c 5000 /dev/zero | tr '\\0' '\\n'; } > s1/.git"),
        ("s2", "gd2\nx", "mv gd2 \"$(printf 'gd2\\nx')\" && printf 'gitdir: ../gd2\\nx\\n' > s2/.git"),
        ("s3", "gd3 ", "mv gd3 'gd3 ' && printf 'gitdir: ../gd3 \\n' > s3/.git"),
        ("s4", "gd4", "rm s4/.git && ln -s ../gd4 s4/.git"),
        ("s5", "gd5", "rm s5/.git && printf 'gitdir: ../gd5\\n' > gf5 && ln -s ../gf5 s5/.git"),
    ];
    let mut leaked = Vec::new();
    for (sub, gd, rewrite) in cases {
        let plain = &gd[..3];
        let out = d.run(&format!(
            "git init -q --separate-git-dir={plain} {sub} && {} && {rewrite} && echo done",
            hook(&format!("{plain}/hooks/pre-commit"))
        ));
        assert!(out.contains("done"), "{out}");
        if !ws.join(sub).exists() {
            // Its `.git` was not applied, and nothing else was in it.
            d.reset(&[sub, gd, "gf5"]);
            continue;
        }
        let git = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "rev-parse", "--absolute-git-dir"])
            .current_dir(ws.join(sub))
            .output()
            .unwrap();
        let git_dir = String::from_utf8_lossy(&git.stdout).trim_end_matches('\n').to_owned();
        if ws.join(gd).join("hooks/pre-commit").exists() && git.status.success() && git_dir.ends_with(gd) {
            leaked.push(format!("{sub}/.git naming {gd:?}: git uses it, hook in place: {out}"));
        }
        d.reset(&[sub, gd, "gf5"]);
    }
    assert!(leaked.is_empty(), "a planted hook behind a .git file stayed:\n{}", leaked.join("\n"));
}

/// O_NONBLOCK (opening a FIFO to write fails at once when no one reads).
fn libc_nonblock() -> i32 {
    0o4000
}

/// A `.git` file naming a git directory that is not there yet: nothing to
/// examine, so it stays and is taken for the user's by the next call,
/// which makes the git directory it names, with a hook (no `.git` is new
/// then, and the hook is not under one): git obeys it at the user's next
/// `git commit` there.
#[test]
fn a_git_file_naming_nothing_yet_is_not_filled_in_later() {
    let Some(d) = Nobody::start(&[]) else { return };
    let ws = d.ws().to_path_buf();
    let out = d.run("mkdir -p s && printf 'gitdir: ../gd\\n' > s/.git && echo done");
    assert!(out.contains("done"), "{out}");
    let out = d.run(&format!(
        "git init -q --bare gd && git --git-dir=gd config core.bare false && {} && echo done",
        hook("gd/hooks/pre-commit")
    ));
    let uses = ws.join("s").exists() && {
        let git = std::process::Command::new("git")
            .args(["-c", "safe.directory=*", "rev-parse", "--absolute-git-dir"])
            .current_dir(ws.join("s"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&git.stdout).trim().ends_with("/gd")
    };
    assert!(
        !(uses && ws.join("gd/hooks/pre-commit").exists()),
        "s/.git names gd, whose hook a later call planted: {out}"
    );
}
