//! Glob and Grep through the socket.

use std::time::{Duration, SystemTime};

use agentd_tests::{RawConn, TestDaemon};
use serde_json::{Value, json};

struct S {
    c: RawConn,
    id: String,
    ws: std::path::PathBuf,
}

async fn session(d: &TestDaemon) -> S {
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    for (path, body) in [
        ("src/main.rs", "fn main() {\n    println!(\"Hello\");\n}\n"),
        ("src/lib.rs", "pub fn hello() -> &'static str {\n    \"hello\"\n}\n"),
        ("src/deep/mod.rs", "// nothing to see\n"),
        ("README.md", "Hello world\nsecond line\n"),
        ("build.log", "hello from an ignored file\n"),
        (".hidden/secret.rs", "fn hidden() {}\n"),
    ] {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    std::fs::create_dir(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".gitignore"), "*.log\n").unwrap();
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    S { c, id, ws }
}

impl S {
    async fn call(&mut self, name: &str, input: Value) -> (bool, String) {
        let r = self.c.tool(&self.id, name, input).await;
        let text = r["content"][0]["text"].as_str().unwrap_or_default().replace(&format!("{}/", self.ws.display()), "");
        (r["is_error"].as_bool().unwrap(), text)
    }
}

fn set_mtime(path: &std::path::Path, secs_ago: u64) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(secs_ago)).unwrap();
}

#[tokio::test]
async fn glob_matches_like_fast_glob_newest_first_within_limits() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    set_mtime(&s.ws.join("src/main.rs"), 300);
    set_mtime(&s.ws.join("src/lib.rs"), 100);
    set_mtime(&s.ws.join("src/deep/mod.rs"), 200);
    let (err, out) = s.call("Glob", json!({ "pattern": "**/*.rs" })).await;
    assert!(!err);
    assert_eq!(out, "src/lib.rs\nsrc/deep/mod.rs\nsrc/main.rs\n", "newest first, hidden skipped");
    // Without a `/` a pattern names files at any depth, as `rg --glob`
    // takes it (Claude Code runs that); with one it is a path from `path`.
    let (_, out) = s.call("Glob", json!({ "pattern": "*.rs", "path": "src" })).await;
    assert_eq!(out, "src/lib.rs\nsrc/deep/mod.rs\nsrc/main.rs\n");
    let (_, out) = s.call("Glob", json!({ "pattern": "*.rs" })).await;
    assert_eq!(out, "src/lib.rs\nsrc/deep/mod.rs\nsrc/main.rs\n");
    let (_, out) = s.call("Glob", json!({ "pattern": "src/*.rs" })).await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs\n", "`*` does not cross directories");
    let (_, out) = s.call("Glob", json!({ "pattern": "./src/*.rs" })).await;
    assert_eq!(out, "src/lib.rs\nsrc/main.rs\n");
    // An absolute pattern inside the workspace searches from its base.
    let absolute = format!("{}/src/**/*.rs", s.ws.display());
    let (_, out) = s.call("Glob", json!({ "pattern": absolute })).await;
    assert_eq!(out, "src/lib.rs\nsrc/deep/mod.rs\nsrc/main.rs\n");
    let absolute = format!("{}/src/deep/*.rs", s.ws.display());
    let (_, out) = s.call("Glob", json!({ "pattern": absolute, "path": "elsewhere" })).await;
    assert_eq!(out, "src/deep/mod.rs\n", "the pattern's base, not path");
    let (err, out) = s.call("Glob", json!({ "pattern": "/etc/*.conf" })).await;
    assert!(err && out.contains("outside the workspace"), "{out}");
    let (_, out) = s.call("Glob", json!({ "pattern": "**/*.rs", "limit": 1 })).await;
    assert_eq!(
        out,
        "src/lib.rs\n(Showing 1 of 3 matching files; 2 more are not listed. Narrow the pattern or path to see the rest.)\n"
    );
    let (_, out) = s.call("Glob", json!({ "pattern": "*.log" })).await;
    assert_eq!(out, "No files found\n", ".gitignore is honoured");
    let (_, out) = s.call("Glob", json!({ "pattern": "*.log", "include_ignored": true })).await;
    assert_eq!(out, "build.log\n");
    let (_, out) = s.call("Glob", json!({ "pattern": "**/secret.rs", "include_hidden": true })).await;
    assert_eq!(out, ".hidden/secret.rs\n");
    let (err, out) = s.call("Glob", json!({ "pattern": "*", "path": "/etc" })).await;
    assert!(err && out.contains("outside the workspace"), "{out}");
    let (err, out) = s.call("Glob", json!({ "pattern": "[" })).await;
    assert!(err && out.contains("invalid glob"), "{out}");
}

#[tokio::test]
async fn grep_modes_and_filters_like_ripgrep() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let (_, out) = s.call("Grep", json!({ "pattern": "hello" })).await;
    assert_eq!(out, "src/lib.rs\n", "sorted paths; case-sensitive; ignored and hidden files skipped");
    let (_, out) = s.call("Grep", json!({ "pattern": "hello", "-i": true })).await;
    assert_eq!(out, "README.md\nsrc/lib.rs\nsrc/main.rs\n");
    let (_, out) = s.call("Grep", json!({ "pattern": "Hello", "output_mode": "content" })).await;
    assert_eq!(out, "README.md:1:Hello world\nsrc/main.rs:2:    println!(\"Hello\");\n");
    let (_, out) =
        s.call("Grep", json!({ "pattern": "Hello w", "output_mode": "content", "-A": 1, "-n": false })).await;
    assert_eq!(out, "README.md:Hello world\nREADME.md-second line\n");
    let (_, out) = s.call("Grep", json!({ "pattern": "\\bfn\\b", "output_mode": "count", "type": "rust" })).await;
    assert_eq!(out, "src/lib.rs:1\nsrc/main.rs:1\n");
    let (_, out) = s.call("Grep", json!({ "pattern": "fn", "glob": "**/main.rs" })).await;
    assert_eq!(out, "src/main.rs\n");
    let (_, out) =
        s.call("Grep", json!({ "pattern": "[a-z]", "output_mode": "content", "head_limit": 2, "offset": 1 })).await;
    assert!(out.starts_with("README.md:2:second line\nsrc/deep/mod.rs:1:"), "{out}");
    assert!(out.contains("[Showing results with pagination = limit: 2, offset: 1;"), "{out}");
    let (_, out) = s.call("Grep", json!({ "pattern": "main\\(\\) \\{\\n\\s+println", "multiline": true })).await;
    assert_eq!(out, "src/main.rs\n");
    let (_, out) = s.call("Grep", json!({ "pattern": "zebra" })).await;
    assert_eq!(out, "No files found\n");
    let (err, out) = s.call("Grep", json!({ "pattern": "(" })).await;
    assert!(err && out.contains("regex parse error"), "{out}");
}

#[tokio::test]
async fn a_grep_cut_by_its_deadline_says_so_instead_of_no_matches() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let (err, out) = s.call("Grep", json!({ "pattern": "Hello", "timeout_ms": 0 })).await;
    assert!(!err);
    assert!(out.contains("stopped early") && out.contains("partial"), "{out}");
    assert!(!out.contains("No matches"), "{out}");
}

fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().split_whitespace().next().unwrap().parse().unwrap()
}

/// A line longer than Grep's per-line budget is not read into memory
/// whole: the file is skipped and the result says so. (The daemon runs in
/// this process, so its peak RSS is this process's.)
#[tokio::test]
async fn a_line_over_the_budget_is_skipped_not_buffered() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let line = agentd::GREP_MAX_LINE_BYTES + 1024 * 1024;
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(s.ws.join("huge.txt")).unwrap());
        let chunk = vec![b'a'; 1024 * 1024];
        for _ in 0..line / chunk.len() {
            f.write_all(&chunk).unwrap();
        }
        f.write_all(b"needle\n").unwrap();
    }
    let before = peak_rss_kib();
    let (err, out) = s.call("Grep", json!({ "pattern": "needle", "output_mode": "content" })).await;
    assert!(!err, "{out}");
    assert!(out.contains("1 files were not searched") && out.contains("64 MiB"), "{out}");
    let grew = peak_rss_kib().saturating_sub(before);
    assert!(grew < 100 * 1024, "peak RSS grew {grew} KiB");
}

/// Review: an absolute pattern's base is judged as the kernel resolves it
/// (`..`, `//`, a symlink out, the state directory): never searched
/// without the outside-the-workspace question.
#[tokio::test]
async fn review_glob_absolute_patterns_do_not_leave_the_workspace() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let root = std::fs::canonicalize(d.dir.path()).unwrap();
    std::fs::create_dir_all(root.join("outside/sub")).unwrap();
    std::fs::write(root.join("outside/sub/leak.txt"), "x").unwrap();
    std::os::unix::fs::symlink(root.join("outside"), s.ws.join("link")).unwrap();
    std::os::unix::fs::symlink(root.join("state"), s.ws.join("statelink")).unwrap();
    let ws = s.ws.display().to_string();
    let r = root.display().to_string();
    for pattern in [
        format!("{ws}/../outside/**/*"),
        format!("{ws}/link/**/*"),
        format!("/{r}/outside/**/*"),
        format!("{ws}/src/../../outside/**/*"),
        format!("{ws}/link/sub/*.txt"),
        format!("{ws}/statelink/**/*"),
        format!("{r}/state/**/*"),
        format!("{r}/state/plans/*"),
    ] {
        let (err, out) = s.call("Glob", json!({ "pattern": pattern, "include_hidden": true })).await;
        assert!(err, "{pattern}: {out}");
        assert!(!out.contains("leak.txt") && out.lines().count() <= 1, "{pattern}: {out}");
    }
    // Walked from the workspace, a link out is not followed.
    let (_, out) = s.call("Glob", json!({ "pattern": format!("{ws}/**/leak.txt"), "include_hidden": true })).await;
    assert_eq!(out, "No files found\n");
}
