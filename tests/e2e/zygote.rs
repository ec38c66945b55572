//! The sandbox helpers' own lives: the zygote that forks them, the helper
//! that waits for its call, what becomes of them when one dies, is stopped
//! or the daemon is killed.

use agentd_tests::{RawConn, StandaloneDaemon, procs};
use serde_json::{Value, json};

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The pid of `pid`'s parent.
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1)?.parse::<i32>().ok())
}

/// The daemon's sandbox zygotes (its children running `--zygote`).
fn zygotes(daemon: i32) -> Vec<i32> {
    procs("agentd-sandbox --zygote").into_iter().filter(|pid| parent_of(*pid) == Some(daemon)).collect()
}

/// The sandbox helpers waiting for a call: the zygote's children (or,
/// without one, the daemon's children started as `--warm`).
fn waiting_helpers(daemon: i32) -> Vec<i32> {
    let zygotes = zygotes(daemon);
    let forked = procs("agentd-sandbox --zygote").into_iter().filter(|pid| {
        let parent = parent_of(*pid);
        zygotes.iter().any(|z| Some(*z) == parent)
    });
    let spawned = procs("agentd-sandbox --warm").into_iter().filter(|pid| parent_of(*pid) == Some(daemon));
    forked.chain(spawned).collect()
}

#[test]
fn a_helper_started_ahead_of_its_call_survives_idle_time_dies_with_the_daemon_and_a_dead_one_is_passed_over() {
    let mut d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let id = c.session(json!({ "cwd": ws, "mode": "bypass" })).await;
        let call = |command: &str| json!({ "session_id": id, "name": "Bash", "input": { "command": command } });
        // The first call starts the zygote, which forks the next one's helper.
        let r = c.ok("tool/call", call("echo $AGENTD_PROCESS; echo one")).await;
        assert!(text(&r).contains("one"), "{r}");
        agentd_tests::eventually("a helper waits", || waiting_helpers(d.pid()).len() == 1).await;
        assert_eq!(zygotes(d.pid()).len(), 1, "one zygote");
        // daemon/info says so, with its memory.
        let info = c.ok("daemon/info", json!({})).await;
        let warm = &info["sandbox"]["warm_helpers"];
        assert_eq!(warm["waiting"], 1, "{info}");
        assert!(warm["started"].as_u64().unwrap() >= 2 && warm["cold_starts"] == 1, "{info}");
        let rss = warm["waiting_rss_kib"].as_u64().unwrap();
        assert!(rss > 100 && rss < 64 * 1024, "{info}");
        let zygote = &warm["zygote"];
        assert_eq!(zygote["pid"].as_i64(), Some(i64::from(zygotes(d.pid())[0])), "{info}");
        assert_eq!((zygote["starts"].as_u64(), zygote["forks"].as_u64()), (Some(1), Some(1)), "{info}");
        let zygote_rss = zygote["rss_kib"].as_u64().unwrap();
        assert!(zygote_rss > 100 && zygote_rss < 64 * 1024, "{info}");
        // The thread that started them is not one that ends when idle (the
        // blocking pool's end after 10 s): the zygote, its helper, and the
        // call it then runs, are not killed by a death signal.
        tokio::time::sleep(std::time::Duration::from_secs(12)).await;
        let waiting = waiting_helpers(d.pid());
        assert_eq!(waiting.len(), 1, "the waiting helper survived");
        let r = c.ok("tool/call", call("sleep 0.2; echo two; echo $AGENTD_PROCESS")).await;
        assert_eq!(r["is_error"], false, "{r}");
        assert!(text(&r).starts_with("two\n"), "{r}");
        // Each call has its own marker, not the helper's.
        let marker = text(&r).lines().nth(1).unwrap_or_default().to_owned();
        let helper_env = std::fs::read(format!("/proc/{}/environ", waiting[0])).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&helper_env).contains(&marker), "{marker}");
        // The zygote keeps nothing per call: its memory does not grow.
        for _ in 0..20 {
            c.ok("tool/call", call("true")).await;
        }
        let info = c.ok("daemon/info", json!({})).await;
        let zygote = &info["sandbox"]["warm_helpers"]["zygote"];
        assert!(zygote["forks"].as_u64().unwrap() >= 20, "{info}");
        assert!(zygote["rss_kib"].as_u64().unwrap() <= zygote_rss + 256, "grew from {zygote_rss}: {info}");
        // A waiting helper that died is passed over, and one killed while
        // the call is handed to it (still dying: its end is seen only once
        // the call was sent) is replaced: it never said it took the call.
        for round in 0..5 {
            agentd_tests::eventually("a helper waits", || waiting_helpers(d.pid()).len() == 1).await;
            let killed = waiting_helpers(d.pid());
            for pid in &killed {
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL).unwrap();
            }
            if round % 2 == 1 {
                // Dead (a zombie, or gone), not still dying.
                agentd_tests::eventually("the killed helper is dead", || {
                    killed.iter().all(|pid| {
                        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                        stat.rsplit_once(')').is_none_or(|(_, rest)| rest.trim_start().starts_with('Z'))
                    })
                })
                .await;
            }
            let r = c.ok("tool/call", call("echo three")).await;
            assert_eq!(text(&r), "three\n", "round {round}: {r}");
        }
        // A zygote that does not answer (stopped) is given up and replaced
        // after its answer limit, calls meanwhile getting their helpers
        // spawned; the calls its helpers run are not cut short (killing it
        // would kill them), and it exits once they have.
        let job = c
            .tool(
                &id,
                "Bash",
                json!({
                "command": "sleep 7; echo survived", "run_in_background": true }),
            )
            .await;
        let job =
            text(&job).split("running in background with ID: ").nth(1).unwrap().split('.').next().unwrap().to_owned();
        agentd_tests::eventually("a helper waits", || waiting_helpers(d.pid()).len() == 1).await;
        let stopped = zygotes(d.pid());
        let signal = |pids: &[i32], sig| {
            for pid in pids {
                // One that ended since it was listed is no longer there to stop.
                match nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), sig) {
                    Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                    Err(e) => panic!("kill {pid}: {e}"),
                }
            }
        };
        signal(&stopped, nix::sys::signal::Signal::SIGSTOP);
        for n in 0..3 {
            let r = c.ok("tool/call", call(&format!("echo while-stopped {n}"))).await;
            assert_eq!(text(&r), format!("while-stopped {n}\n"), "{r}");
        }
        agentd_tests::eventually("another zygote runs", || zygotes(d.pid()).iter().any(|z| !stopped.contains(z))).await;
        signal(&stopped, nix::sys::signal::Signal::SIGCONT);
        let ended = loop {
            let input = json!({ "task_id": job, "timeout": 2000 });
            let r = c.tool(&id, "TaskOutput", input).await;
            if !text(&r).contains("is running]") {
                break r;
            }
        };
        assert!(text(&ended).contains("survived\n") && text(&ended).contains("exited with code 0]"), "{ended}");
        agentd_tests::eventually("the stopped zygote exited after its helpers", || {
            let live = procs("agentd-sandbox --zygote");
            stopped.iter().all(|pid| !live.contains(pid))
        })
        .await;
        let info = c.ok("daemon/info", json!({})).await;
        let starts = info["sandbox"]["warm_helpers"]["zygote"]["starts"].as_u64().unwrap();
        assert_eq!(starts, 2, "{info}");
        // A zygote that died is replaced; a call meanwhile still runs.
        agentd_tests::eventually("a helper waits", || waiting_helpers(d.pid()).len() == 1).await;
        let first = zygotes(d.pid());
        for pid in &first {
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL).unwrap();
        }
        agentd_tests::eventually("its helper died with it", || waiting_helpers(d.pid()).is_empty()).await;
        let r = c.ok("tool/call", call("echo four")).await;
        assert_eq!(text(&r), "four\n", "{r}");
        agentd_tests::eventually("another zygote runs", || {
            let now = zygotes(d.pid());
            now.len() == 1 && !first.contains(&now[0])
        })
        .await;
        let r = c.ok("tool/call", call("echo five")).await;
        assert_eq!(text(&r), "five\n", "{r}");
        let info = c.ok("daemon/info", json!({})).await;
        assert_eq!(info["sandbox"]["warm_helpers"]["zygote"]["starts"], starts + 1, "{info}");
        agentd_tests::eventually("a helper waits", || waiting_helpers(d.pid()).len() == 1).await;
    });
    // The daemon killed: its zygote and waiting helper go with it.
    let mut ours = waiting_helpers(d.pid());
    ours.extend(zygotes(d.pid()));
    d.signal(nix::sys::signal::Signal::SIGKILL);
    let _ = d.child.wait();
    rt.block_on(agentd_tests::eventually("the zygote and the waiting helper are gone", || {
        let live = procs("agentd-sandbox");
        ours.iter().all(|pid| !live.contains(pid))
    }));
}

/// The daemon, its zygote and the helper waiting for the next call are
/// never dumpable: another process of the user cannot open their memory,
/// environment or descriptors (an attack review took over another
/// session's call through a dumpable helper). A non-dumpable process's
/// `/proc` files belong to root whatever its uid, so root sees it: here
/// they run as `nobody`, and a plain process of `nobody`'s is the
/// contrast. Needs root to change uid; CI runs as root.
#[test]
fn the_daemon_and_its_helpers_are_never_dumpable() {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::process::CommandExt;
    let Some(n) = agentd_tests::AsNobody::new(&[]) else { return };
    let (dir, ws, nobody, as_nobody) = (&n.dir, &n.ws, agentd_tests::NOBODY, |program: &str| n.command(program));
    let socket = dir.path().join("agentd.sock");
    let daemon = agentd_tests::ChildGuard::spawn(
        as_nobody("agentd")
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap()),
    );
    let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    agentd_tests::eventually_blocking("agentd as nobody listens", || socket.exists());
    // A confined call starts the zygote, which forks the next call's helper.
    let out = as_nobody("agentctl")
        .arg("--socket")
        .arg(&socket)
        .args(["call", "Bash", "--arg", "command=echo confined", "--mode", "bypass", "--cwd"])
        .arg(ws)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("confined"), "{out:?}\n{}", log());
    let pid = daemon.0.id() as i32;
    agentd_tests::eventually_blocking("a zygote and a waiting helper", || {
        zygotes(pid).len() == 1 && waiting_helpers(pid).len() == 1
    });
    let real_uid = |pid: i32| {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("Uid:")).unwrap().to_owned();
        line.split_whitespace().nth(1).unwrap().parse::<u32>().unwrap()
    };
    let environ_owner = |pid: i32| std::fs::metadata(format!("/proc/{pid}/environ")).unwrap().uid();
    let watched =
        [("the daemon", pid), ("the zygote", zygotes(pid)[0]), ("the waiting helper", waiting_helpers(pid)[0])];
    for (what, pid) in watched {
        assert_eq!(real_uid(pid), nobody, "{what} runs as nobody");
        assert_eq!(environ_owner(pid), 0, "{what} (pid {pid}) is dumpable: its /proc files are nobody's");
    }
    let mut sleeper = std::process::Command::new("sleep");
    sleeper.arg("30").uid(nobody).gid(nobody);
    let sleeper = agentd_tests::ChildGuard::spawn(&mut sleeper);
    assert_eq!(environ_owner(sleeper.0.id() as i32), nobody, "a plain process of nobody's is dumpable");
}
