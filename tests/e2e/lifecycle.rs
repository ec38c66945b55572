//! Start, signals, systemd socket activation and readiness, and leaks.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentd_tests::{ChildGuard, RawConn, StandaloneDaemon, bin_path, eventually_blocking, within};
use nix::sys::signal::Signal;
use serde_json::json;
use tokio::io::AsyncWriteExt;

#[test]
fn sigterm_stops_accepting_ends_connections_removes_the_socket_and_exits_0() {
    let mut d = StandaloneDaemon::start(&["--shutdown-grace", "120"], &[]);
    // An idle client: shutdown must end its connection, not wait for it
    // for the grace period.
    let mut idle = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    let started = Instant::now();
    d.signal(Signal::SIGTERM);
    let status = d.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", d.stderr());
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    assert!(!d.socket.exists(), "socket file removed");
    let mut buf = [0u8; 16];
    let n = std::io::Read::read(&mut idle, &mut buf).unwrap_or(0);
    assert_eq!(n, 0, "idle connection closed");
}

#[test]
fn sigterm_cancels_in_flight_tool_calls_instead_of_waiting_for_them() {
    // A long grace period: only cancellation can make the exit quick.
    let mut d = StandaloneDaemon::start(&["--shutdown-grace", "120"], &[]);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut c = rt.block_on(RawConn::connect(&d.socket));
    let sid = rt.block_on(c.ok("session/create", json!({ "cwd": d.dir.path() })))["session_id"].clone();
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tool/call",
        "params": {"session_id": sid, "name": "TestSleep", "input": {"ms": 600_000}}});
    rt.block_on(c.send_line(call.to_string()));
    let mut probe = rt.block_on(RawConn::connect(&d.socket));
    rt.block_on(async {
        let deadline = Instant::now() + agentd_tests::STEP;
        // The call is running once the daemon counts its task beside the
        // two connections, the zombie reaper and the store's flusher.
        while probe.ok("daemon/info", json!({})).await["tasks"].as_u64().unwrap() < 5 {
            assert!(Instant::now() < deadline, "the call never started");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    let started = Instant::now();
    d.signal(Signal::SIGTERM);
    assert_eq!(d.wait_exit().code(), Some(0), "{}", d.stderr());
    assert!(started.elapsed() < Duration::from_secs(60), "took {:?}", started.elapsed());
    // The call either answered as interrupted (the sessions stopped first)
    // or the connection closed before it could; then the stream ends.
    if let Some(reply) = rt.block_on(c.recv()) {
        let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned();
        assert!(text.contains("the daemon stopped"), "{reply}");
        assert_eq!(rt.block_on(c.recv()), None);
    }
}

#[test]
fn max_request_bytes_is_configurable_by_flag_and_environment() {
    for (args, env) in
        [(vec!["--max-request-bytes", "2000"], vec![]), (vec![], vec![("AGENTD_MAX_REQUEST_BYTES", "2000")])]
    {
        let d = StandaloneDaemon::start(&args, &env);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            c.send_line("x".repeat(2500)).await;
            let r = c.recv_some().await;
            assert_eq!(r["error"]["code"], json!(-32004), "{r}");
            assert!(r["error"]["message"].as_str().unwrap().contains("2000"), "{r}");
        });
    }
}

#[test]
fn sigint_also_shuts_down_cleanly() {
    let mut d = StandaloneDaemon::start(&[], &[]);
    let lock = d.socket.with_file_name("agentd.sock.lock");
    assert!(lock.exists(), "held while it runs");
    d.signal(Signal::SIGINT);
    assert_eq!(d.wait_exit().code(), Some(0));
    assert!(!d.socket.exists());
    // Issue 49 #13: a clean stop leaves no lock file behind either.
    assert!(!lock.exists(), "the lock file is removed");
    assert!(d.stderr().contains("shutdown requested"), "{}", d.stderr());
    // And the next daemon starts on the same socket.
    d.restart();
    assert!(lock.exists());
}

#[test]
fn logs_go_to_stderr_at_the_rust_log_level() {
    let mut quiet = StandaloneDaemon::start(&[], &[("RUST_LOG", "warn")]);
    quiet.signal(Signal::SIGTERM);
    quiet.wait_exit();
    assert!(!quiet.stderr().contains("listening"), "{}", quiet.stderr());
    let mut chatty = StandaloneDaemon::start(&[], &[("RUST_LOG", "debug")]);
    chatty.signal(Signal::SIGTERM);
    chatty.wait_exit();
    let log = chatty.stderr();
    assert!(log.contains("listening") && log.contains("DEBUG"), "{log}");
}

/// `systemd-socket-activate` hands a listening socket over the way systemd
/// does; the daemon serves it, reports it, and leaves the file to systemd.
#[test]
fn socket_activation_through_systemd_socket_activate() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("activated.sock");
    let mut child = ChildGuard::spawn(
        Command::new("systemd-socket-activate")
            .arg("-l")
            .arg(&socket)
            .arg(bin_path("agentd"))
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .env_remove("AGENTD_SOCKET")
            // Make sure the daemon could not have bound this path itself.
            .env("XDG_RUNTIME_DIR", dir.path().join("elsewhere"))
            .stderr(Stdio::null()),
    );
    // The file appears at bind(), a moment before listen(): wait until a
    // connect is taken (the first one starts the daemon, which accepts it
    // from the backlog and sees it close).
    eventually_blocking("the socket listens", || std::os::unix::net::UnixStream::connect(&socket).is_ok());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let info = rt.block_on(async {
        let mut c = RawConn::connect(&socket).await;
        c.ok("daemon/info", json!({})).await
    });
    assert_eq!(info["socket_activated"], json!(true), "{info}");
    assert_eq!(info["socket"], json!(socket), "{info}");
    assert_eq!(info["pid"], json!(child.0.id()), "LISTEN_PID matched the exec'd daemon");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.0.id() as i32), Signal::SIGTERM).unwrap();
    assert_eq!(child.wait_exit().code(), Some(0));
    assert!(socket.exists(), "the socket belongs to systemd and stays");
}

#[test]
fn sd_notify_ready_and_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let notify_path = dir.path().join("notify.sock");
    let notify = UnixDatagram::bind(&notify_path).unwrap();
    notify.set_read_timeout(Some(agentd_tests::STEP)).unwrap();
    let mut d = StandaloneDaemon::start(&[], &[("NOTIFY_SOCKET", notify_path.to_str().unwrap())]);
    let mut buf = [0u8; 256];
    let n = notify.recv(&mut buf).expect("READY=1 arrives");
    assert_eq!(&buf[..n], b"READY=1");
    d.signal(Signal::SIGTERM);
    let n = notify.recv(&mut buf).expect("STOPPING=1 arrives");
    assert_eq!(&buf[..n], b"STOPPING=1");
    assert_eq!(d.wait_exit().code(), Some(0));
}

/// Opening and dropping 10,000 connections (some mid-request, some without
/// reading their reply) leaves the daemon with the descriptors and tasks it
/// had before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_connections_leak_no_descriptors_or_tasks() {
    let d = StandaloneDaemon::start(&[], &[("RUST_LOG", "warn")]);
    let mut probe = RawConn::connect(&d.socket).await;
    // The baseline: only the probe is connected (start-up's readiness check
    // may still be closing); the tasks are its connection, the reaper,
    // the store's flusher and the schedules' timer.
    let deadline = Instant::now() + agentd_tests::STEP;
    let before = loop {
        let info = probe.ok("daemon/info", json!({})).await;
        if (info["connections"] == json!(1) && info["tasks"] == json!(4)) || Instant::now() > deadline {
            break info;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!((before["connections"].clone(), before["tasks"].clone()), (json!(1), json!(4)), "{before}");
    let fds_before = d.fd_count();
    let socket = d.socket.clone();
    let workers: Vec<_> = (0..8)
        .map(|w| {
            let socket = socket.clone();
            tokio::spawn(async move {
                for i in 0..1250 {
                    let mut c = agentd_client::connect_socket(&socket).await.unwrap();
                    match (w + i) % 4 {
                        0 => {}
                        1 => {
                            let _ = c.write_all(br#"{"jsonrpc":"2.0","id":1,"meth"#).await;
                        }
                        2 => {
                            let _ = c.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\"}\n").await;
                        }
                        _ => {
                            let _ = c.write_all(b"not json\n").await;
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        within("connection storm", w).await.unwrap();
    }
    // Poll until the daemon has finished closing what the clients dropped.
    let deadline = Instant::now() + agentd_tests::STEP;
    let (after, fds_after) = loop {
        let info = probe.ok("daemon/info", json!({})).await;
        let fds = d.fd_count();
        let settled = info["connections"] == json!(1) && info["tasks"] == before["tasks"] && fds == fds_before;
        if settled || Instant::now() > deadline {
            break (info, fds);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(fds_after, fds_before, "descriptors before/after; last info {after}");
    assert_eq!(after["connections"], json!(1), "only the probe is left");
    assert_eq!(after["tasks"], before["tasks"]);
    assert_eq!(after["connections_total"].as_u64().unwrap(), before["connections_total"].as_u64().unwrap() + 10_000);
}

/// `--metrics`: the signals a fleet scales on, in OpenMetrics text at
/// `/metrics` on a loopback address: open sessions, calls ended by tool
/// and outcome with their durations, a Bash command's sandbox set-up by
/// profile, memory and descriptors; anything
/// else is 404; an address that is not loopback is refused at start.
#[test]
fn metrics_are_served_in_openmetrics_text_on_loopback() {
    use std::io::{Read, Write};
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr = format!("127.0.0.1:{port}");
    let d = agentd_tests::StandaloneDaemon::start(&["--metrics", &addr], &[]);
    let scrape = |path: &str| {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    };
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("a.txt"), "a").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut c = agentd_tests::RawConn::connect(&d.socket).await;
        let sid = c.session(serde_json::json!({ "cwd": work.path(), "mode": "bypass" })).await;
        c.tool(&sid, "Read", serde_json::json!({ "file_path": work.path().join("a.txt") })).await;
        c.tool(&sid, "Read", serde_json::json!({ "file_path": work.path().join("missing.txt") })).await;
        let bash = c.tool(&sid, "Bash", serde_json::json!({ "command": "true" })).await;
        let profile = bash["sandbox"].as_str().unwrap_or("off").to_owned();
        // Errors by kind: what the model sent (bad input), a rule's refusal.
        c.tool(&sid, "Read", serde_json::json!({ "file": "no such field" })).await;
        let rules = serde_json::json!({ "deny": ["Read(./a.txt)"] });
        let denied = c.session(serde_json::json!({ "cwd": work.path(), "permissions": rules })).await;
        c.tool(&denied, "Read", serde_json::json!({ "file_path": work.path().join("a.txt") })).await;
        let page = scrape("/metrics");
        assert!(page.starts_with("HTTP/1.1 200") && page.contains("application/openmetrics-text"), "{page}");
        for line in [
            "agentd_sessions 2\n",
            "agentd_calls_total{tool=\"Read\",outcome=\"ok\"} 1\n",
            "agentd_calls_total{tool=\"Read\",outcome=\"error\"} 3\n",
            "agentd_call_duration_seconds_count{tool=\"Read\"} 4\n",
            "agentd_call_duration_seconds_bucket{tool=\"Read\",le=\"+Inf\"} 4\n",
            // The missing file is the tool's failure; the others are not.
            "agentd_call_errors_total{kind=\"tool\"} 1\n",
            "agentd_call_errors_total{kind=\"input\"} 1\n",
            "agentd_call_errors_total{kind=\"refused\"} 1\n",
            "agentd_call_errors_total{kind=\"cancelled\"} 0\n",
            // The Bash command's set-up, in the profile it ran in.
            &format!("agentd_sandbox_setup_seconds_count{{profile=\"{profile}\"}} 1\n"),
            &format!("agentd_sandbox_setup_seconds_bucket{{profile=\"{profile}\",le=\"+Inf\"}} 1\n"),
        ] {
            assert!(page.contains(line), "{line}: {page}");
        }
        assert!(page.contains("agentd_resident_memory_bytes ") && page.trim_end().ends_with("# EOF"), "{page}");
    });
    assert!(scrape("/other").starts_with("HTTP/1.1 404"));
    let refused = std::process::Command::new(agentd_tests::bin_path("agentd"))
        .args(["--metrics", "0.0.0.0:9", "--socket"])
        .arg(work.path().join("s.sock"))
        .arg("--state-dir")
        .arg(work.path().join("state"))
        .output()
        .unwrap();
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("loopback"), "{refused:?}");
}
