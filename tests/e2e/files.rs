//! Read, Write and Edit through the socket: paging, refusals that change
//! nothing, the file-state cache, paths that try to leave the workspace,
//! and atomic writes that survive a SIGKILL.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, TestDaemon, tool_use};
use nix::sys::signal::Signal;
use serde_json::{Value, json};

struct S {
    c: RawConn,
    id: String,
    ws: std::path::PathBuf,
}

async fn session(d: &TestDaemon) -> S {
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
    S { c, id, ws }
}

impl S {
    async fn call(&mut self, name: &str, input: Value) -> Value {
        self.c.tool(&self.id, name, input).await
    }
    async fn read(&mut self, path: &str) -> Value {
        self.call("Read", json!({ "file_path": path })).await
    }
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn error(r: &Value) -> String {
    assert_eq!(r["is_error"], true, "expected an error: {r}");
    text(r)
}

#[tokio::test]
async fn read_numbers_pages_and_cuts_long_lines() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let body: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    std::fs::write(s.ws.join("long.txt"), &body).unwrap();
    let r = s.read("long.txt").await;
    let t = text(&r);
    // Numbered as Claude Code 2.1.332 numbers them: `1\t`, unpadded.
    assert!(t.starts_with("1\tline 1\n2\tline 2\n"), "{}", &t[..60]);
    assert!(t.contains("\n2000\tline 2000\n") && !t.contains("line 2001"));
    assert!(t.contains("[lines 1-2000 of 2500; read on with offset=2001]"), "{}", &t[t.len() - 100..]);
    let r = s.call("Read", json!({ "file_path": s.ws.join("long.txt"), "offset": 2499, "limit": 5 })).await;
    assert_eq!(text(&r), "2499\tline 2499\n2500\tline 2500\n");
    std::fs::write(s.ws.join("wide.txt"), "x".repeat(5000)).unwrap();
    let t = text(&s.read("wide.txt").await);
    assert!(t.contains("… [3000 more characters]") && t.contains("long lines were cut"), "{t}");
    std::fs::write(s.ws.join("empty.txt"), "").unwrap();
    assert!(text(&s.read("empty.txt").await).contains("the file is empty"));

    // allow_large (Claude Code 2.1): past the 2000-line default, whole
    // lines up to 1 MiB of text, then where to read on.
    let t = text(&s.call("Read", json!({ "file_path": "long.txt", "allow_large": true })).await);
    assert!(t.contains("\n2500\tline 2500\n") && !t.contains("read on"), "{}", &t[t.len() - 100..]);
    let wide: String = (1..=20_000).map(|i| format!("{i:>8} {}\n", "y".repeat(90))).collect();
    std::fs::write(s.ws.join("big.txt"), &wide).unwrap();
    let t = text(&s.call("Read", json!({ "file_path": "big.txt", "allow_large": "true", "offset": 10 })).await);
    assert!(t.len() > 1024 * 1024 && t.len() < 1024 * 1024 + 4096, "{}", t.len());
    assert!(t.starts_with("10\t      10 y") && t.contains("of 20000; read on with offset="), "{}", &t[t.len() - 100..]);
}

#[tokio::test]
async fn read_refuses_what_is_not_a_text_file_and_returns_images() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    std::fs::create_dir(s.ws.join("dir")).unwrap();
    assert!(error(&s.read("dir").await).contains("Glob"));
    nix::unistd::mkfifo(&s.ws.join("fifo"), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    assert!(error(&s.read("fifo").await).contains("FIFO"));
    std::fs::write(s.ws.join("blob.bin"), b"\x7fELF\0\0\0binary").unwrap();
    assert!(error(&s.read("blob.bin").await).contains("binary"));
    // A 10 GB sparse file: refused at once, not read.
    let sparse = std::fs::File::create(s.ws.join("sparse")).unwrap();
    sparse.set_len(10 << 30).unwrap();
    let started = std::time::Instant::now();
    assert!(error(&s.read("sparse").await).contains("binary"));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // Text first, then 10 GB of sparse zeros: streamed, refused as binary
    // when the zeros come, never loaded.
    let mut head = std::fs::File::create(s.ws.join("tricky.txt")).unwrap();
    std::io::Write::write_all(&mut head, "some text\n".repeat(900).as_bytes()).unwrap();
    head.set_len(10 << 30).unwrap();
    let started = std::time::Instant::now();
    assert!(error(&s.read("tricky.txt").await).contains("binary"));
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    std::fs::write(s.ws.join("pic.png"), png).unwrap();
    let r = s.read("pic.png").await;
    assert_eq!(r["content"][0]["type"], "image", "{r}");
    assert_eq!(r["content"][0]["source"]["media_type"], "image/png");
}

#[tokio::test]
async fn paths_cannot_leave_the_workspace() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let outside = d.dir.path().join("outside.txt");
    std::fs::write(&outside, "secret").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", s.ws.join("passwd")).unwrap();
    std::os::unix::fs::symlink(d.dir.path(), s.ws.join("updir")).unwrap();
    let evil = format!("{}_evil/x", s.ws.display());
    // Reads and writes outside ask (nobody answers here: refused).
    let params = json!({ "cwd": s.ws, "permission_timeout_ms": 50 });
    let asking = s.c.session(params).await;
    for path in ["/etc/passwd", "../outside.txt", "passwd", "updir/outside.txt", evil.as_str()] {
        let input = json!({ "file_path": path });
        let r = s.c.tool(&asking, "Read", input).await;
        let e = error(&r);
        assert!(e.contains("outside the workspace") && e.contains("permission required"), "{path}: {r}");
        assert!(!e.contains("root:") && !e.contains("secret"), "{path}: {r}");
        let input = json!({ "file_path": path, "content": "pwned" });
        let r = s.c.tool(&asking, "Write", input).await;
        assert!(error(&r).contains("permission required"), "{path}: {r}");
    }
    // Bypass allows everything but deny rules: the read is explicitly allowed.
    assert!(text(&s.read("../outside.txt").await).contains("secret"));
    let r = s.read("a\u{0}b").await;
    assert!(error(&r).contains("NUL"), "{r}");
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
    assert!(std::fs::read_to_string("/etc/passwd").unwrap().contains("root"));
}

#[tokio::test]
async fn edit_needs_a_read_and_refuses_a_file_changed_since_by_content() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let f = s.ws.join("code.rs");
    std::fs::write(&f, "fn main() {\n    println!(\"hi\");\n}\n").unwrap();
    let edit = json!({ "file_path": "code.rs", "old_string": "\"hi\"", "new_string": "\"hello\"" });
    assert!(error(&s.call("Edit", edit.clone()).await).contains("Read it first"));
    s.read("code.rs").await;
    let r = s.call("Edit", edit.clone()).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains("-    println!(\"hi\");\n+    println!(\"hello\");"), "{r}");
    assert!(std::fs::read_to_string(&f).unwrap().contains("hello"));
    // Edit's own write is known: a second edit needs no new Read.
    let r = s.call("Edit", json!({ "file_path": "code.rs", "old_string": "main", "new_string": "start" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    // Only touched (same bytes, new mtime): not a change.
    let content = std::fs::read(&f).unwrap();
    std::fs::write(&f, &content).unwrap();
    let r = s.call("Edit", json!({ "file_path": "code.rs", "old_string": "start", "new_string": "begin" })).await;
    assert_eq!(r["is_error"], false, "a rewrite of the same bytes is no alarm: {r}");
    // Really changed by someone else: refused, file untouched.
    std::fs::write(&f, "fn begin() { changed }\n").unwrap();
    let r = s.call("Edit", json!({ "file_path": "code.rs", "old_string": "begin", "new_string": "x" })).await;
    assert!(error(&r).contains("changed since"), "{r}");
    assert_eq!(std::fs::read_to_string(&f).unwrap(), "fn begin() { changed }\n");
}

#[tokio::test]
async fn edit_keeps_crlf_bom_and_mode_and_reports_precise_mismatches() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let f = s.ws.join("win.txt");
    std::fs::write(&f, "\u{feff}one\r\ntwo\r\ntwo\r\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o640)).unwrap();
    s.read("win.txt").await;
    let r = s.call("Edit", json!({ "file_path": "win.txt", "old_string": "two", "new_string": "2" })).await;
    assert!(error(&r).contains("occurs 2 times"), "{r}");
    let r = s.call("Edit", json!({ "file_path": "win.txt", "old_string": "nope", "new_string": "x" })).await;
    assert!(error(&r).contains("not found"));
    let r = s.call("Edit", json!({ "file_path": "win.txt", "old_string": "one\ntwo", "new_string": "uno\ndos" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(std::fs::read(&f).unwrap(), "\u{feff}uno\r\ndos\r\ntwo\r\n".as_bytes());
    assert_eq!(std::fs::metadata(&f).unwrap().permissions().mode() & 0o777, 0o640);
}

#[tokio::test]
async fn write_creates_needs_a_read_to_replace_and_keeps_links_whole() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let r = s.call("Write", json!({ "file_path": "new/dir/f.txt", "content": "a\nb\n" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).starts_with("File created successfully at: "), "{r}");
    assert_eq!(std::fs::read_to_string(s.ws.join("new/dir/f.txt")).unwrap(), "a\nb\n");
    std::fs::write(s.ws.join("old.txt"), "old").unwrap();
    assert!(error(&s.call("Write", json!({ "file_path": "old.txt", "content": "x" })).await).contains("Read it first"));
    assert_eq!(std::fs::read_to_string(s.ws.join("old.txt")).unwrap(), "old");
    s.read("old.txt").await;
    let r = s.call("Write", json!({ "file_path": "old.txt", "content": "new" })).await;
    assert!(text(&r).contains("has been updated successfully"), "{r}");
    std::fs::hard_link(s.ws.join("old.txt"), s.ws.join("twin.txt")).unwrap();
    s.read("old.txt").await;
    let r = s.call("Write", json!({ "file_path": "old.txt", "content": "newer" })).await;
    assert!(error(&r).contains("hard links"), "{r}");
    assert_eq!(std::fs::read_to_string(s.ws.join("twin.txt")).unwrap(), "new");
}

#[tokio::test]
async fn a_file_swapped_for_a_symlink_after_read_is_not_followed_out() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    // accept_edits: edits inside the workspace run without asking; the
    // swapped file is outside, so it asks (nobody answers: refused).
    let params = json!({ "cwd": s.ws, "mode": "accept_edits", "permission_timeout_ms": 50 });
    s.id = s.c.session(params).await;
    let target = d.dir.path().join("victim");
    std::fs::write(&target, "victim data").unwrap();
    std::fs::write(s.ws.join("f.txt"), "innocent").unwrap();
    s.read("f.txt").await;
    std::fs::remove_file(s.ws.join("f.txt")).unwrap();
    std::os::unix::fs::symlink(&target, s.ws.join("f.txt")).unwrap();
    let r = s.call("Edit", json!({ "file_path": "f.txt", "old_string": "victim", "new_string": "pwned" })).await;
    assert!(error(&r).contains("permission required"), "{r}");
    let r = s.call("Write", json!({ "file_path": "f.txt", "content": "pwned" })).await;
    assert!(error(&r).contains("permission required"), "{r}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "victim data");
}

/// SIGKILL in the middle of many Writes: every file is whole, old or new.
#[test]
fn sigkill_during_writes_leaves_no_torn_file() {
    let mut d = StandaloneDaemon::start(&[], &[("RUST_LOG", "warn")]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let old = "A".repeat(256 * 1024);
    let new = "B".repeat(256 * 1024);
    let names: Vec<String> = (0..40).map(|i| format!("f{i:02}.txt")).collect();
    for n in &names {
        std::fs::write(ws.join(n), &old).unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let sid = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let mut events = EventStream::open(&d.socket, &sid, None).await.unwrap();
        let reads: Vec<Value> =
            names.iter().map(|n| tool_use(&format!("r{n}"), "Read", json!({"file_path": n, "limit": 1}))).collect();
        let turn = c.ok("turn/submit", json!({"session_id": sid, "tool_uses": reads, "end": true})).await;
        events.until_turn_done(turn["turn_id"].as_str().unwrap()).await;
        let writes: Vec<Value> = names
            .iter()
            .map(|n| tool_use(&format!("w{n}"), "Write", json!({"file_path": n, "content": new})))
            .collect();
        c.ok("turn/submit", json!({"session_id": sid, "tool_uses": writes, "end": true})).await;
        // Kill it once a few writes are through.
        events.until(|e| e["type"] == "tool/result" && e["tool_use_id"] == "wf05.txt").await;
    });
    d.signal(Signal::SIGKILL);
    d.wait_exit();
    let mut counts = (0, 0);
    for n in &names {
        let content = std::fs::read_to_string(ws.join(n)).unwrap();
        if content == old {
            counts.0 += 1;
        } else if content == new {
            counts.1 += 1;
        } else {
            panic!("{n} is torn: {} bytes", content.len());
        }
    }
    assert!(counts.1 >= 6, "{counts:?}");
    let _ = Path::new("");
}

#[tokio::test]
async fn notebooks_read_as_cells_and_edit_one_cell_leaving_the_rest() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let nb = json!({
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Title\n"]},
            {"cell_type": "code", "id": "calc", "metadata": {"tags": ["keep"]}, "execution_count": 1,
             "source": ["x = 1\n", "x + 1"],
             "outputs": [{"output_type": "execute_result", "execution_count": 1, "metadata": {}, "data": {"text/plain": ["2"]}}]},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5
    });
    std::fs::write(s.ws.join("nb.ipynb"), serde_json::to_string_pretty(&nb).unwrap()).unwrap();
    let t = text(&s.read("nb.ipynb").await);
    assert!(t.contains("cell 1 [code] id=calc") && t.contains("x + 1") && t.contains("[output]\n2"), "{t}");
    let r = s
        .call("NotebookEdit", json!({ "notebook_path": "nb.ipynb", "cell_id": "calc", "new_source": "x = 2\nx * 3" }))
        .await;
    assert_eq!(r["is_error"], false, "{r}");
    let r = s.call("NotebookEdit", json!({ "notebook_path": "nb.ipynb", "cell_id": "intro", "edit_mode": "insert", "cell_type": "code", "new_source": "print('hi')" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let after: Value = serde_json::from_str(&std::fs::read_to_string(s.ws.join("nb.ipynb")).unwrap()).unwrap();
    let cells = after["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 3);
    assert_eq!(cells[1]["source"], json!(["print('hi')"]));
    assert_eq!(cells[2]["source"], json!(["x = 2\n", "x * 3"]));
    assert_eq!(cells[2]["outputs"], json!([]), "stale outputs are cleared");
    assert_eq!(cells[2]["metadata"], json!({"tags": ["keep"]}), "the rest of the cell is kept");
    assert_eq!(after["metadata"], nb["metadata"], "notebook metadata is kept");
    let r =
        s.call("NotebookEdit", json!({ "notebook_path": "nb.ipynb", "cell_index": 0, "edit_mode": "delete" })).await;
    assert_eq!(r["is_error"], false, "{r}");
    let r = s.call("NotebookEdit", json!({ "notebook_path": "nb.ipynb", "cell_id": "nope", "new_source": "x" })).await;
    assert!(error(&r).contains("no cell has id"), "{r}");
}

#[tokio::test]
async fn todo_write_keeps_the_list_clients_read_in_session_get() {
    let d = TestDaemon::start().await;
    let mut s = session(&d).await;
    let todos = json!([
        {"content": "Write the parser", "status": "completed"},
        {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
        {"content": "Ship it", "status": "pending"}
    ]);
    let r = s.call("TodoWrite", json!({ "todos": todos })).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains("[x] Write the parser\n[~] Run the tests\n[ ] Ship it"), "{r}");
    let info = s.c.ok("session/get", json!({ "session_id": s.id })).await;
    assert_eq!(info["todos"], todos);
    // Two in progress: kept, with a word for the model. Earlier Claude
    // Code versions' `id` and `priority` are taken and not kept.
    let two = json!([
        {"id": "1", "content": "a", "status": "in_progress", "priority": "high"},
        {"id": "2", "content": "b", "status": "in_progress", "activeForm": "Doing b"}
    ]);
    let r = s.call("TodoWrite", json!({ "todos": two })).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(text(&r).contains("2 items are in_progress"), "{r}");
    let kept = json!([
        {"content": "a", "status": "in_progress"},
        {"content": "b", "status": "in_progress", "activeForm": "Doing b"}
    ]);
    assert_eq!(s.c.ok("session/get", json!({ "session_id": s.id })).await["todos"], kept);
    // A field no version had is still refused, naming it.
    let bad = json!([{"content": "a", "status": "pending", "owner": "me"}]);
    assert!(error(&s.call("TodoWrite", json!({ "todos": bad })).await).contains("owner"));
    assert_eq!(s.c.ok("session/get", json!({ "session_id": s.id })).await["todos"], kept, "unchanged");
}
