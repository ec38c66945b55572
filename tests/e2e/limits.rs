//! Limits per call (issue 54), through the socket: what one call may take
//! of the user's processes, inotify instances and memory, so that other
//! sessions and the user's own programs keep theirs — and the attempts to
//! get around them.

use agentd_tests::{RawConn, StandaloneDaemon, TestDaemon, procs, tag, within};
use serde_json::{Value, json};

use super::seams::{bash, session};

/// Issue 54: one confined call cannot take the user's whole process
/// allowance. A daemon of a user allowed 600 processes gives each call
/// 300 (its `RLIMIT_NPROC`, counted in the call's own user namespace): a
/// call that starts 600 `sleep`s gets about 300, and another session's
/// command still forks. As `nobody` (the kernel does not hold root to
/// the limit); CI runs as root.
#[test]
fn a_fork_bomb_in_one_call_leaves_another_session_room_to_fork() {
    use std::os::unix::process::CommandExt;
    let Some(n) = agentd_tests::AsNobody::new(&[]) else { return };
    let (dir, ws) = (&n.dir, &n.ws);
    let socket = dir.path().join("agentd.sock");
    // The user's allowance, as `ulimit -u 600` in its shell sets it.
    let mut daemon = std::process::Command::new("bash");
    daemon.args(["-c", "ulimit -u 600 && exec \"$0\" \"$@\""]).arg(dir.path().join("agentd"));
    daemon.arg("--socket").arg(&socket).arg("--state-dir").arg(dir.path().join("state"));
    daemon.uid(agentd_tests::NOBODY).gid(agentd_tests::NOBODY).env("HOME", dir.path()).env_remove("AGENTD_SOCKET");
    let _daemon = agentd_tests::ChildGuard::spawn(&mut daemon);
    agentd_tests::eventually_blocking("agentd as nobody listens", || socket.exists());
    let call = |command: &str| {
        let mut cmd = n.command("agentctl");
        cmd.arg("--socket").arg(&socket).args(["call", "Bash", "--arg", &format!("command={command}")]);
        cmd.args(["--mode", "bypass", "--cwd"]).arg(ws).stdin(std::process::Stdio::null());
        cmd
    };
    let out = n.command("agentctl").arg("--socket").arg(&socket).args(["--json", "status"]).output().unwrap();
    let info: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(info["sandbox"]["processes"], json!({ "per_call": 300, "enforced": true }), "{info}");
    let marker = format!("9{}", tag().chars().filter(char::is_ascii_digit).take(6).collect::<String>());
    let bomb = format!(
        "sh -c 'i=0; while [ $i -lt 600 ]; do sleep {marker} & i=$((i+1)); done 2>/dev/null; echo spawned; sleep {marker}'"
    );
    let mut bomber =
        call(&bomb).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()).spawn().unwrap();
    agentd_tests::eventually_blocking("the bomb reaches its limit", || procs(&format!("sleep {marker}")).len() >= 250);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let held = procs(&format!("sleep {marker}")).len();
    assert!(held <= 300, "one call holds {held} processes");
    let out = call("sh -c 'sleep 0.1 & sleep 0.1 & wait' && echo still-forks").output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(said.contains("still-forks"), "another session could not fork: {said}");
    let _ = bomber.kill();
    let _ = bomber.wait();
}

/// Python that opens inotify instances until the kernel refuses one (at
/// most `most`), prints how many it holds, and keeps them for `hold`
/// seconds (its last argument, which also marks the process).
const GRAB_INOTIFY: &str = "import ctypes,sys,time\nlibc=ctypes.CDLL(None)\nn=0\nwhile n<int(sys.argv[1]) and libc.inotify_init()>=0: n+=1\nprint('held',n,flush=True)\ntime.sleep(float(sys.argv[2]))";

/// Issue 54: a confined call may hold half of the user's inotify instances
/// (the count of its own user namespace, which the kernel checks beside
/// the user's): a call that opens all it can holds no more than that, and
/// the user's other programs (an editor, another session) still get some
/// while it does. Root is held to it too, so CI checks it as it runs.
#[tokio::test]
async fn a_call_that_takes_every_inotify_instance_leaves_the_user_some() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let info = c.ok("daemon/info", json!({})).await;
    let limit = &info["sandbox"]["inotify"];
    if info["sandbox"]["pid_namespaces"] != true {
        assert_eq!(limit["enforced"], false, "{info}");
        return;
    }
    assert_eq!(limit["enforced"], true, "{info}");
    let per_call = limit["instances_per_call"].as_u64().unwrap();
    let machine: u64 =
        std::fs::read_to_string("/proc/sys/fs/inotify/max_user_instances").unwrap().trim().parse().unwrap();
    assert!(per_call >= 1 && per_call <= machine / 2, "{per_call} of {machine}");
    // About a minute, and a mark of this run's own.
    let hold = format!("59.{}", tag().chars().filter(char::is_ascii_digit).take(6).collect::<String>());
    let grab = format!("python3 -c \"{}\" 100000 {hold}", GRAB_INOTIFY.replace('"', "\\\""));
    let id = session(&mut c, d.dir.path(), json!({ "mode": "bypass" })).await;
    let grabber = tokio::spawn({
        let mut c = d.raw().await;
        let id = id.clone();
        async move { bash(&mut c, &id, &grab).await }
    });
    // Its instances, counted from outside once they stop growing.
    let held = |pid: i32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|fds| {
                fds.flatten()
                    .filter(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.to_string_lossy().contains("inotify")))
                    .count()
            })
            .unwrap_or(0)
    };
    let mut last = (0, 0);
    agentd_tests::eventually("the call holds all it can", || {
        let now = procs(&hold).into_iter().map(held).max().unwrap_or(0);
        let steady = now > 0 && now == last.0;
        last = (now, if steady { last.1 + 1 } else { 0 });
        std::thread::sleep(std::time::Duration::from_millis(100));
        last.1 >= 3
    })
    .await;
    assert!(last.0 as u64 <= per_call, "one call holds {} inotify instances; its limit is {per_call}", last.0);
    // The user's own program, outside any sandbox, still opens some.
    let out = std::process::Command::new("python3").args(["-c", GRAB_INOTIFY, "4", "0"]).output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("held 4"), "the user's editor got {said:?} while the call held {}", last.0);
    c.ok("session/close", json!({ "session_id": id })).await;
    let _ = within("the grabbing call ends", grabber).await;
    agentd_tests::eventually("the first call's instances are given back", || procs(&hold).is_empty()).await;
    // Attack review (with the first call's instances given back): a call
    // cannot raise its own limit (no
    // CAP_SYS_RESOURCE left in its namespace), and a namespace of its own
    // inside (refused, or counted against the call's anyway) gets no more.
    let id2 = session(&mut c, d.dir.path(), json!({ "mode": "bypass" })).await;
    let (_, out) = bash(&mut c, &id2, "echo 100000 > /proc/sys/user/max_inotify_instances && echo raised").await;
    assert!(!out.contains("raised"), "a call raised its own inotify limit: {out}");
    let nested = format!("unshare -Ur python3 -c \"{}\" 100000 0", GRAB_INOTIFY.replace('"', "\\\""));
    let (_, out) = bash(&mut c, &id2, &nested).await;
    let got = out.split("held ").nth(1).and_then(|n| n.split_whitespace().next()).and_then(|n| n.parse::<u64>().ok());
    assert!(got.is_none_or(|n| n <= per_call), "a nested namespace got {got:?} of {per_call}: {out}");
}

/// How many calls' cgroups the daemon `pid` has in the memory or pids hierarchy (`None`: no directory of its own found)
/// (`agentd-PIDNS-PID-START/call-*`).
fn call_cgroups(pid: u32) -> Option<usize> {
    let mut left = Vec::new();
    let mut found = false;
    for hierarchy in ["memory", "pids"] {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let Some(path) = own.lines().find_map(|l| l.split_once(&format!(":{hierarchy}:")).map(|(_, p)| p.to_owned()))
        else {
            continue;
        };
        let base = std::path::Path::new("/sys/fs/cgroup").join(hierarchy).join(path.trim_start_matches('/'));
        let mine = |name: &str| name.starts_with("agentd-") && name.split('-').nth(2) == Some(&pid.to_string());
        let dirs = std::fs::read_dir(&base).into_iter().flatten().flatten();
        for dir in dirs.filter(|d| mine(&d.file_name().to_string_lossy())) {
            found = true;
            for entry in std::fs::read_dir(dir.path()).into_iter().flatten().flatten() {
                if entry.file_name().to_string_lossy().starts_with("call-") {
                    left.push(entry.path());
                }
            }
        }
    }
    found.then_some(left.len())
}

/// Issue 54: `--call-memory-limit` holds a call's processes together to
/// it, through a cgroup of the call's own where the daemon can make one: a
/// command that allocates past it is killed and its result says why, the
/// next call runs, and no cgroup is left behind. Where none can be made,
/// `daemon/info` says the limit does not hold, and why.
#[tokio::test]
async fn a_call_past_its_memory_limit_is_killed_and_told_why() {
    let d = StandaloneDaemon::start(&["--call-memory-limit", "64M"], &[]);
    let mut c = RawConn::connect(&d.socket).await;
    let info = c.ok("daemon/info", json!({})).await;
    let memory = &info["sandbox"]["memory"];
    assert_eq!(memory["per_call_bytes"], 64 << 20, "{info}");
    if memory["enforced"] != true {
        assert!(memory["reason"].as_str().is_some_and(|r| r.contains("cgroup")), "{info}");
        return;
    }
    let id = session(&mut c, d.dir.path(), json!({ "mode": "bypass" })).await;
    // It prints how much it holds (268435456) only if it was let.
    let hog = "python3 -c \"b = bytearray(256 << 20); b[::4096] = b'x' * len(b[::4096]); print(len(b))\"";
    let (_, out) = bash(&mut c, &id, hog).await;
    assert!(!out.contains("268435456"), "256 MiB under a 64 MiB limit: {out}");
    assert!(out.contains("memory limit of 64 MiB"), "{out}");
    let (ok, out) = bash(&mut c, &id, "python3 -c \"b = bytearray(8 << 20); print('fits')\"").await;
    assert!(ok && out.contains("fits"), "{out}");
    // In every profile that runs through the helper: off too.
    let off = session(&mut c, d.dir.path(), json!({ "mode": "bypass", "sandbox": { "mode": "off" } })).await;
    let (_, out) = bash(&mut c, &off, hog).await;
    assert!(out.contains("memory limit of 64 MiB"), "profile off: {out}");
    // Each call's is removed once its processes are gone.
    agentd_tests::eventually("the calls' cgroups are removed", || call_cgroups(d.child.id()) == Some(0)).await;
}

/// Issue 54: where calls get cgroups, `pids.max` holds their processes
/// even for root, whom the kernel does not hold to `RLIMIT_NPROC`: as
/// root with `ulimit -u 600`, a call starting 600 `sleep`s keeps no more
/// than 300.
#[test]
fn root_s_fork_bomb_is_held_by_the_calls_cgroup() {
    if !nix::unistd::getuid().is_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("agentd.sock");
    let mut daemon = std::process::Command::new("bash");
    daemon.args(["-c", "ulimit -u 600 && exec \"$0\" \"$@\""]).arg(agentd_tests::bin_path("agentd"));
    daemon.arg("--socket").arg(&socket).arg("--state-dir").arg(dir.path().join("state")).env_remove("AGENTD_SOCKET");
    daemon.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null());
    let _daemon = agentd_tests::ChildGuard::spawn(&mut daemon);
    agentd_tests::eventually_blocking("agentd listens", || socket.exists());
    let agentctl = |args: &[&str]| {
        let mut cmd = std::process::Command::new(agentd_tests::bin_path("agentctl"));
        cmd.arg("--socket").arg(&socket).args(args).stdin(std::process::Stdio::null());
        cmd
    };
    let out = agentctl(&["--json", "status"]).output().unwrap();
    let info: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    if info["sandbox"]["processes"]["enforced"] != true {
        return;
    }
    assert_eq!(info["sandbox"]["processes"]["per_call"], 300, "{info}");
    let marker = format!("8{}", tag().chars().filter(char::is_ascii_digit).take(6).collect::<String>());
    let bomb = format!(
        "command=sh -c 'i=0; while [ $i -lt 600 ]; do sleep {marker} & i=$((i+1)); done 2>/dev/null; sleep {marker}'"
    );
    let ws = dir.path().display().to_string();
    let mut bomber = agentctl(&["call", "Bash", "--arg", &bomb, "--mode", "bypass", "--cwd", &ws])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    agentd_tests::eventually_blocking("the bomb reaches its limit", || procs(&format!("sleep {marker}")).len() >= 250);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let held = procs(&format!("sleep {marker}")).len();
    let _ = bomber.kill();
    let _ = bomber.wait();
    assert!(held <= 300, "one call of root's holds {held} processes");
}

/// Attack review of issue 54's cgroups: a call whose writable roots hold
/// the cgroup hierarchies (here `add_dirs` naming /sys) finds them
/// read-only: it cannot move itself out of its cgroup (as root, into the
/// hierarchy's root) or raise its limits.
#[tokio::test]
async fn a_call_cannot_leave_its_cgroup_through_a_writable_root() {
    let root_procs = std::path::Path::new("/sys/fs/cgroup/pids/cgroup.procs");
    if !nix::unistd::getuid().is_root() || !root_procs.exists() {
        return;
    }
    // Without the layer a writable root is bound writable as it is (with
    // it, /sys cannot be a layer's lower directory and the call fails).
    let d = StandaloneDaemon::start(&["--sandbox-without", "layer"], &[]);
    let mut c = RawConn::connect(&d.socket).await;
    let info = c.ok("daemon/info", json!({})).await;
    if info["sandbox"]["processes"]["enforced"] != true || info["sandbox"]["pid_namespaces"] != true {
        return;
    }
    let id = session(&mut c, d.dir.path(), json!({ "mode": "bypass", "add_dirs": ["/sys"] })).await;
    let (_, out) = bash(&mut c, &id, "grep pids /proc/self/cgroup; echo $$ > /sys/fs/cgroup/pids/cgroup.procs && echo left; grep pids /proc/self/cgroup").await;
    assert!(!out.contains("left"), "the call left its cgroup: {out}");
    assert!(out.contains("call-"), "the call is in its own cgroup: {out}");
}
