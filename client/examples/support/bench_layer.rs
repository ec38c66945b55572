//! `bench bash`'s second part: what the copy-on-write layer costs, against
//! a daemon without it, in the same run.

use std::path::Path;
use std::process::{Command, Stdio};

use super::{Server, agentd_bin, bash_calls, median, wait_for};

/// What the copy-on-write layer costs (issue 48): `workspace_write` calls
/// of `true` with and without the layer (a daemon started with
/// `--sandbox-without layer`), a call that writes 1,000 files of 1 KB
/// (applying them), and `git status` on a 50,000-file repository inside
/// the layer and outside it.
pub(super) fn layer_costs(ws: &Path, socket: &Path, calls: usize) {
    let dir = tempfile::tempdir().unwrap();
    let off_socket = dir.path().join("agentd.sock");
    let _off = {
        let child = Command::new(agentd_bin())
            .arg("--socket")
            .arg(&off_socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(["--sandbox-without", "layer"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Server { name: "agentd (no layer)", socket: off_socket.clone(), child }
    };
    wait_for(&off_socket);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let bypass = serde_json::json!({"mode": "bypass", "sandbox": {"network": false}});
    let stats = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[v.len() / 2], v[(v.len() * 99 / 100).min(v.len() - 1)])
    };
    rt.block_on(async {
        let with = bash_calls(socket, ws, bypass.clone(), "X=1 true", "workspace_write", calls).await;
        let without = bash_calls(&off_socket, ws, bypass.clone(), "X=1 true", "workspace_write", calls).await;
        let read_only = bash_calls(socket, ws, serde_json::json!({}), "true", "read_only", calls).await;
        let ((w50, w99), (o50, o99), (r50, r99)) = (stats(with), stats(without), stats(read_only));
        println!();
        println!("the layer: {calls} calls of `true` (no network)");
        println!("{:<34} {:>9} {:>9}", "", "p50 µs", "p99 µs");
        println!("{:<34} {:>9.0} {:>9.0}", "read_only", r50, r99);
        println!(
            "{:<34} {:>9.0} {:>9.0}  ({:+.2} ms over read_only)",
            "workspace_write, layer",
            w50,
            w99,
            (w50 - r50) / 1e3
        );
        println!(
            "{:<34} {:>9.0} {:>9.0}  ({:+.2} ms over read_only)",
            "workspace_write, older wall",
            o50,
            o99,
            (o50 - r50) / 1e3
        );
        // 1,000 files of 1 KB, five times each way (each in a fresh directory).
        let write =
            |n: usize| format!("X=1; mkdir w{n} && for i in $(seq 1000); do head -c 1024 /dev/zero > w{n}/f$i; done");
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for n in 0..5 {
            with.push(one_call(socket, ws, bypass.clone(), &write(n)).await);
            without.push(one_call(&off_socket, ws, bypass.clone(), &write(n + 100)).await);
        }
        let (w, o) = (median(with), median(without));
        println!(
            "a call writing 1,000 files of 1 KB: layer {:.1} ms, older wall {:.1} ms: applying costs {:+.1} ms",
            w / 1e3,
            o / 1e3,
            (w - o) / 1e3
        );
        // git status on 50,000 files.
        let repo = ws.join("big");
        std::fs::create_dir_all(&repo).unwrap();
        for d in 0..50 {
            let sub = repo.join(format!("d{d}"));
            std::fs::create_dir_all(&sub).unwrap();
            for f in 0..1000 {
                std::fs::write(sub.join(format!("f{f}")), b"x").unwrap();
            }
        }
        let git = |args: &[&str]| {
            Command::new("git")
                .args(["-c", "user.name=b", "-c", "user.email=b@b"])
                .args(args)
                .current_dir(&repo)
                .output()
                .unwrap()
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-qm", "big"]);
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for _ in 0..5 {
            with.push(one_call(socket, &repo, bypass.clone(), "X=1 git status --short").await);
            without.push(one_call(&off_socket, &repo, bypass.clone(), "X=1 git status --short").await);
        }
        let (w, o) = (median(with), median(without));
        println!(
            "git status, 50,000 files: inside the layer {:.1} ms, outside {:.1} ms ({:.2}x)",
            w / 1e3,
            o / 1e3,
            w / o
        );
    });
}

/// One Bash call of `command` in a new session (`params`, cwd added);
/// its round trip in µs.
async fn one_call(socket: &Path, cwd: &Path, params: serde_json::Value, command: &str) -> f64 {
    let out = bash_calls(socket, cwd, params, command, "workspace_write", 1).await;
    out[0]
}
