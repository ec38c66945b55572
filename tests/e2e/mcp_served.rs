//! What `agentctl mcp` serves beside tools (the workspace's files as
//! resources, skills as prompts, events as logs, path completion), over
//! stdio and over streamable HTTP, driven by the official MCP Python SDK's
//! client (`tests/mcp/served_client.py`); the HTTP face's token, `Host` and
//! `Origin` checks with raw requests; and the official conformance suite's
//! server scenarios (`scripts/mcp-conformance-server.sh`).

use std::io::{BufRead as _, Read as _, Write as _};
use std::path::{Path, PathBuf};

use agentd_tests::{RawConn, StandaloneDaemon, agentctl};
use serde_json::{Value, json};

use super::mcp_support::{required, rt};

/// A workspace with text, bytes, files Read rules deny, a file outside it
/// and a skill.
fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let top = std::fs::canonicalize(dir.path()).unwrap();
    let ws = top.join("ws");
    for (path, content) in [
        ("hello.txt", &b"hello resource\n"[..]),
        ("bin.dat", &[0xff, 0x00, 0xfe][..]),
        ("secret.env", b"TOKEN=1\n"),
        ("private/key.txt", b"key\n"),
        ("sub/a.txt", b"a\n"),
        ("sub/b.txt", b"b\n"),
        (".claude/skills/greet/SKILL.md", b"---\nname: greet\ndescription: Greets someone\n---\nGreet them warmly.\n"),
    ] {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    std::fs::write(top.join("outside.txt"), "outside\n").unwrap();
    (dir, ws)
}

const DENY: [&str; 4] = ["--deny", "Read(./secret.env)", "--deny", "Read(./private/**)"];

fn served_client(python: &Path, socket: &Path, ws: &Path, transport: &str, bridge: &[&str]) -> Vec<Value> {
    let args: Vec<&str> = std::iter::once(transport).chain(bridge.iter().copied()).collect();
    super::mcp_support::sdk_client(python, "served_client.py", socket, ws, &args)
}

/// What the client saw, whichever the transport.
fn check_served(seen: &[Value], ws: &Path) {
    let find = |key: &str| seen.iter().filter(|v| v.get(key).is_some()).cloned().collect::<Vec<_>>();
    assert_eq!(
        find("capabilities")[0]["capabilities"],
        json!({ "resources": true, "prompts": true, "logging": true, "completions": true })
    );
    let resources = find("resources");
    let listed: Vec<&str> = resources[0]["resources"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    // Hidden (.claude) and Read-denied files are not listed.
    assert_eq!(listed, ["bin.dat", "hello.txt", "sub/a.txt", "sub/b.txt"], "{seen:?}");
    let reads = find("read");
    assert_eq!(reads[0]["text"], "hello resource\n");
    assert_eq!(reads[0]["mime"], "text/plain");
    assert_eq!(reads[1]["blob"], "/wD+", "bytes that are not UTF-8 come as base64");
    let refused = find("refused");
    assert_eq!(refused.len(), 5);
    for r in &refused {
        assert_eq!(r["ok"], true, "must be refused: {r}");
    }
    assert!(refused[0]["error"].as_str().unwrap().contains("secret.env"), "{:?}", refused[0]);
    let completion = &find("completions")[0];
    assert_eq!(completion["template"], "file://{+path}");
    let want: Vec<String> = ["sub/a.txt", "sub/b.txt"].iter().map(|f| ws.join(f).display().to_string()).collect();
    assert_eq!(completion["completions"], json!(want));
    assert_eq!(find("prompts")[0]["prompts"], json!([["greet", "Greets someone", ["args"]]]));
    let prompt = find("prompt")[0]["prompt"][0].as_str().unwrap().to_owned();
    assert!(prompt.contains("Greet them warmly."), "{prompt}");
    assert_eq!(find("bad_prompt")[0]["bad_prompt"], true);
    let logs = find("logs")[0]["logs"].as_array().unwrap().clone();
    assert!(
        logs.iter().any(|l| l["level"] == "info" && l["data"]["event"] == "tool/result" && l["data"]["tool"] == "Read"),
        "{logs:?}"
    );
    assert!(logs.iter().all(|l| l["level"] != "debug"), "below the level set: {logs:?}");
    let hello = url_of(&ws.join("hello.txt"));
    assert_eq!(find("updated")[0]["updated"], json!([hello]), "a subscription says the file changed");
}

fn url_of(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// `agentctl mcp --http ADDR ARGS`, started; its port once it serves.
fn http_bridge(socket: &Path, args: &[&str]) -> (std::process::Child, u16) {
    let mut child = std::process::Command::new(agentd_tests::bin_path("agentctl"))
        .arg("--socket")
        .arg(socket)
        .arg("mcp")
        .args(args)
        .env_remove("AGENTD_SOCKET")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let mut said = String::new();
    while stderr.read_line(&mut line).unwrap_or(0) > 0 {
        let served = line.split("serving MCP at http://127.0.0.1:").nth(1);
        if let Some(rest) = served.or_else(|| line.split("serving MCP at https://127.0.0.1:").nth(1)) {
            let port = rest.split('/').next().unwrap().parse().unwrap();
            // Keep reading its stderr so it never blocks on a full pipe.
            std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
            return (child, port);
        }
        said.push_str(&line);
        line.clear();
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("agentctl mcp --http ended before serving: {said}");
}

/// One raw HTTP/1.1 request; the status code.
fn status(port: u16, request: &str) -> u16 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(agentd_tests::STEP)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).unwrap();
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// One raw HTTP/1.1 request; the response's head.
fn response_head(port: u16, request: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(agentd_tests::STEP)).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && s.read(&mut byte).unwrap() == 1 {
        head.push(byte[0]);
    }
    String::from_utf8_lossy(&head).into_owned()
}

fn initialize(host: &str, extra: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn sessions(c: &mut RawConn) -> usize {
    c.ok("session/list", json!({})).await["sessions"].as_array().unwrap().len()
}

#[test]
fn agentctl_mcp_serves_files_skills_logs_and_completion_over_stdio_and_http() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let (_dir, ws) = workspace();
    let cwd = ws.to_str().unwrap();

    let mut stdio = vec!["--cwd", cwd];
    stdio.extend(DENY);
    let seen = served_client(&python, &d.socket, &ws, "stdio", &stdio);
    check_served(&seen, &ws);
    std::fs::write(ws.join("hello.txt"), "hello resource\n").unwrap();

    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    let mut args = vec!["--http", "127.0.0.1:0", "--cwd", cwd, "--token-file", token_file.to_str().unwrap()];
    args.extend(DENY);
    let (mut bridge, port) = http_bridge(&d.socket, &args);
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777, 0o600);
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    assert_eq!(token.len(), 64);

    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        // Without the token, with a wrong one, or with a rebinding Host or
        // a foreign Origin: refused, and no session is opened.
        let host = format!("127.0.0.1:{port}");
        let bearer = format!("Authorization: Bearer {token}\r\n");
        assert_eq!(status(port, &initialize(&host, "")), 401);
        assert_eq!(status(port, &initialize(&host, &format!("Authorization: Bearer {}\r\n", "0".repeat(64)))), 401);
        assert_eq!(status(port, &initialize(&host, &format!("Authorization: Basic {token}\r\n"))), 401);
        assert_eq!(status(port, &initialize("evil.example.com", &bearer)), 403);
        assert_eq!(status(port, &initialize(&format!("evil.example.com:{port}"), &bearer)), 403);
        assert_eq!(status(port, &initialize(&host, &format!("{bearer}Origin: http://evil.example.com\r\n"))), 403);
        assert_eq!(status(port, &initialize(&host, &bearer).replace("POST /mcp ", "POST /other ")), 404);
        assert_eq!(sessions(&mut c).await, 0, "a refused request opens nothing");
        // The 401 says where to read how to authorize (RFC 9728), which
        // says: a bearer token in the header, from no authorization server.
        let head = response_head(port, &initialize(&host, "")).to_ascii_lowercase();
        let metadata = format!("http://{host}/.well-known/oauth-protected-resource/mcp");
        assert!(head.contains(&format!("www-authenticate: bearer resource_metadata=\"{metadata}\"")), "{head}");
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["resource"], format!("http://{host}/mcp"), "{answer}");
        assert_eq!((body["authorization_servers"].clone(), body["bearer_methods_supported"].clone()),
            (json!([]), json!(["header"])), "{answer}");
        // The right token, Host and Origin: served.
        assert_eq!(status(port, &initialize(&host, &format!("{bearer}Origin: http://localhost:{port}\r\n"))), 200);

        let transport = format!("http:http://127.0.0.1:{port}/mcp:{}", token_file.display());
        let seen = served_client(&python, &d.socket, &ws, &transport, &[]);
        check_served(&seen, &ws);
        // The client's MCP session ended (DELETE): its daemon session is
        // closed (an initialize alone opened none: a bridge attaches on
        // first use).
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        while sessions(&mut c).await > 0 {
            assert!(std::time::Instant::now() < deadline, "the ended MCP session's daemon session stays open");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // One left open (initialize, initialized, a request), then the
        // bridge killed: its daemon session goes too.
        let head = response_head(port, &initialize(&host, &bearer));
        let id = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id:").map(|v| v.trim().to_owned()))
            .unwrap_or_else(|| panic!("no session id: {head}"));
        let post = |body: &str| {
            format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{bearer}Mcp-Session-Id: {id}\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        };
        assert_eq!(status(port, &post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)), 202);
        assert_eq!(status(port, &post(r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#)), 200);
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        while sessions(&mut c).await != 1 {
            assert!(std::time::Instant::now() < deadline, "the open MCP session has no daemon session");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        bridge.kill().unwrap();
        bridge.wait().unwrap();
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        while sessions(&mut c).await > 0 {
            assert!(std::time::Instant::now() < deadline, "a killed bridge's sessions stay open");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });

    // A second start reuses the token and does not print it.
    let (mut again, _) = http_bridge(&d.socket, &args);
    again.kill().unwrap();
    again.wait().unwrap();
    assert_eq!(std::fs::read_to_string(&token_file).unwrap().trim(), token);
}

/// Issue 49 #13: DELETE with a session id ends the MCP session (and its
/// daemon session) and answers 200, as MCP's streamable HTTP says (rmcp
/// answered 202, and the Python SDK logged a failed termination on every
/// close); the session is then gone (404).
#[test]
fn delete_ends_an_http_mcp_session_with_200() {
    let d = StandaloneDaemon::start(&[], &[]);
    let (_dir, ws) = workspace();
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    let args = ["--http", "127.0.0.1:0", "--cwd", ws.to_str().unwrap(), "--token-file", token_file.to_str().unwrap()];
    let (mut bridge, port) = http_bridge(&d.socket, &args);
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    let host = format!("127.0.0.1:{port}");
    let bearer = format!("Authorization: Bearer {token}\r\n");
    let head = response_head(port, &initialize(&host, &bearer));
    let id = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id:").map(|v| v.trim().to_owned()))
        .unwrap_or_else(|| panic!("no session id: {head}"));
    let request = |method: &str, body: &str| {
        format!(
            "{method} /mcp HTTP/1.1\r\nHost: {host}\r\n{bearer}Mcp-Session-Id: {id}\r\nMcp-Protocol-Version: 2025-06-18\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    assert_eq!(status(port, &request("POST", r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)), 202);
    assert_eq!(status(port, &request("POST", r#"{"jsonrpc":"2.0","id":2,"method":"resources/list"}"#)), 200);
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        while sessions(&mut c).await != 1 {
            assert!(std::time::Instant::now() < deadline, "the MCP session has no daemon session");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        assert_eq!(status(port, &request("DELETE", "")), 200, "DELETE ends the session with 200");
        let deadline = std::time::Instant::now() + agentd_tests::STEP;
        while sessions(&mut c).await > 0 {
            assert!(std::time::Instant::now() < deadline, "the ended MCP session's daemon session stays open");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    });
    assert_eq!(status(port, &request("POST", r#"{"jsonrpc":"2.0","id":3,"method":"resources/list"}"#)), 404);
    bridge.kill().unwrap();
    bridge.wait().unwrap();
}

#[test]
fn agentctl_mcp_http_refuses_other_machines_without_tls_and_a_readable_token() {
    let d = StandaloneDaemon::start(&[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    let t = token.to_str().unwrap();
    let (code, _, err) = agentctl(&d.socket, &["mcp", "--http", "0.0.0.0:0", "--cwd", "/", "--token-file", t]);
    assert_ne!(code, 0);
    assert!(err.contains("not a loopback address") && err.contains("--listen-public"), "{err}");
    let (code, _, err) =
        agentctl(&d.socket, &["mcp", "--http", "0.0.0.0:0", "--listen-public", "--cwd", "/", "--token-file", t]);
    assert_ne!(code, 0);
    assert!(err.contains("needs TLS"), "{err}");
    assert!(!token.exists(), "nothing is made when it cannot serve");
    std::fs::write(&token, format!("{}\n", "a".repeat(64))).unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (code, _, err) = agentctl(&d.socket, &["mcp", "--http", "127.0.0.1:0", "--cwd", "/", "--token-file", t]);
    assert_ne!(code, 0);
    assert!(err.contains("others may read it"), "{err}");
}

#[test]
fn the_conformance_suites_server_scenarios_that_agentctl_mcp_serves_pass() {
    let Some(tools) = required("AGENTD_TEST_CONFORMANCE") else { return };
    let bins = ["agentd", "agentd-sandbox", "agentctl"];
    let text = super::mcp_support::conformance("mcp-conformance-server.sh", &tools, &bins, &["--only-served"]);
    assert!(text.contains("served: 11 passed, 0 failed"), "{text}");
    for scenario in
        ["server-initialize", "resources-list", "prompts-list", "logging-set-level", "dns-rebinding-protection"]
    {
        assert!(text.lines().any(|l| l.contains(scenario) && l.contains("pass")), "{scenario}: {text}");
    }
}

/// The pinned pre-release's server scenarios of MCP 2026-07-28 against
/// `agentctl mcp --http`: `resultType` and the caching hints on every
/// result, `subscriptions/listen`, per-request `_meta` and its errors, the
/// revision's headers; each scenario of what agentctl serves passes (those
/// that call the suite's own fixture tools are listed apart, and why).
#[test]
fn the_2026_07_28_suites_server_scenarios_that_agentctl_mcp_serves_pass() {
    let Some(tools) = required("AGENTD_TEST_CONFORMANCE") else { return };
    let bins = ["agentd", "agentd-sandbox", "agentctl"];
    let flags = ["--suite", "2026-07-28", "--only-served"];
    let text = super::mcp_support::conformance("mcp-conformance-server.sh", &tools, &bins, &flags);
    assert!(text.contains("served: 11 passed, 0 failed"), "{text}");
    for scenario in ["server-stateless", "caching", "completion-complete", "input-required-result-unsupported-methods"]
    {
        assert!(text.lines().any(|l| l.contains(scenario) && l.contains("pass")), "{scenario}: {text}");
    }
}

/// The daemon's side of resources, straight on its socket: a PreToolUse
/// hook on Read decides as for a Read call, text that is mostly control
/// characters comes as base64 (it would grow sixfold as JSON), a session
/// without Read lists nothing, cursors page through everything.
#[test]
fn workspace_read_obeys_read_hooks_and_files_follow_the_tool_set() {
    let d = StandaloneDaemon::start(&[], &[]);
    let (dir, ws) = workspace();
    std::fs::write(ws.join("server.pem"), "-----BEGIN KEY-----\n").unwrap();
    std::fs::write(ws.join("ctrl.txt"), vec![1u8; 4096]).unwrap();
    let hook = dir.path().join("no-pem.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\nif grep -q '\\.pem\"'; then echo 'no keys through tools' >&2; exit 2; fi\nexit 0\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let hooks = json!({ "PreToolUse": [{ "matcher": "Read", "hooks": [{ "type": "command", "command": hook }] }] });
        let sid = c.session(json!({ "cwd": ws, "hooks": hooks })).await;
        // The Read tool is refused by the hook; so is the resource.
        let call = c.tool(&sid, "Read", json!({ "file_path": "server.pem" })).await;
        assert_eq!(call["is_error"], true, "{call}");
        let read = c.request("workspace/read", json!({ "session_id": sid, "path": "server.pem" })).await;
        let message = read["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("denied by a PreToolUse hook") && message.contains("no keys"), "{read}");
        let ok = c.ok("workspace/read", json!({ "session_id": sid, "path": "hello.txt" })).await;
        assert_eq!(ok["text"], "hello resource\n");
        let ctrl = c.ok("workspace/read", json!({ "session_id": sid, "path": "ctrl.txt" })).await;
        assert!(ctrl.get("text").is_none() && ctrl["blob"].as_str().unwrap().len() < 6000, "{}", ctrl["mime_type"]);
        assert_eq!(ctrl["mime_type"], "application/octet-stream");
        // Stat only: no content.
        let stat = c.ok("workspace/read", json!({ "session_id": sid, "path": "hello.txt", "content": false })).await;
        assert!(
            stat.get("text").is_none() && stat["size"] == 15 && stat["modified_ms"].as_u64().unwrap() > 0,
            "{stat}"
        );

        // Pages of one file each cover everything once, then end.
        let mut seen = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let mut params = json!({ "session_id": sid, "limit": 1 });
            if !cursor.is_null() {
                params["cursor"] = cursor.clone();
            }
            let page = c.ok("workspace/files", params).await;
            seen.extend(page["files"].as_array().unwrap().iter().map(|f| f["relative"].as_str().unwrap().to_owned()));
            cursor = page["next_cursor"].clone();
            if cursor.is_null() {
                break;
            }
        }
        assert_eq!(
            seen,
            [
                "bin.dat",
                "ctrl.txt",
                "hello.txt",
                "private/key.txt",
                "secret.env",
                "server.pem",
                "sub/a.txt",
                "sub/b.txt"
            ]
        );
        for bad in
            [json!({ "cursor": "../x" }), json!({ "cursor": "/etc" }), json!({ "limit": 0 }), json!({ "limit": 5000 })]
        {
            let mut params = bad.clone();
            params["session_id"] = json!(sid);
            let r = c.request("workspace/files", params).await;
            assert_eq!(r["error"]["code"], -32602, "{bad}: {r}");
        }

        // Without Read, nothing is listed or read.
        let no_read = c.session(json!({ "cwd": ws, "tools": { "disabled": ["Read"] } })).await;
        let r = c.request("workspace/files", json!({ "session_id": no_read })).await;
        assert!(r["error"]["message"].as_str().unwrap().contains("Read"), "{r}");
        let r = c.request("workspace/read", json!({ "session_id": no_read, "path": "hello.txt" })).await;
        assert!(r.get("error").is_some(), "{r}");
        // A skill list; none in a session without skills.
        let skills = c.ok("skills/list", json!({ "session_id": sid })).await;
        assert_eq!(skills["skills"][0]["name"], "greet");
    });
}

/// Idle connections that never send a request cannot lock clients out of
/// `agentctl mcp --http`: a new connection ends the oldest that has not
/// made an authorized request.
#[test]
fn idle_connections_do_not_lock_clients_out_of_the_http_bridge() {
    let d = StandaloneDaemon::start(&[], &[]);
    let (_dir, ws) = workspace();
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    let args = ["--http", "127.0.0.1:0", "--cwd", ws.to_str().unwrap(), "--token-file", token_file.to_str().unwrap()];
    let (mut bridge, port) = http_bridge(&d.socket, &args);
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    let idle: Vec<std::net::TcpStream> =
        (0..200).map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
    let host = format!("127.0.0.1:{port}");
    let answered = status(port, &initialize(&host, &format!("Authorization: Bearer {token}\r\n")));
    assert_eq!(answered, 200);
    drop(idle);
    bridge.kill().unwrap();
    bridge.wait().unwrap();
}

/// `--listen-public` serves only over TLS: a client that trusts the
/// certificate gets MCP (with the token), plain HTTP gets nothing.
#[test]
fn listen_public_serves_mcp_over_tls_only() {
    let d = StandaloneDaemon::start(&[], &[]);
    let (dir, ws) = workspace();
    let pki = dir.path();
    let out = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"])
        .args(["-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=agentctl"])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        .current_dir(pki)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("the openssl command (Debian package openssl) runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token_file = pki.join("token");
    let (cert, key) = (pki.join("cert.pem"), pki.join("key.pem"));
    let args = [
        "--http",
        "127.0.0.1:0",
        "--listen-public",
        "--http-tls-cert",
        cert.to_str().unwrap(),
        "--http-tls-key",
        key.to_str().unwrap(),
        "--cwd",
        ws.to_str().unwrap(),
        "--token-file",
        token_file.to_str().unwrap(),
    ];
    let (mut bridge, port) = http_bridge(&d.socket, &args);
    let token = std::fs::read_to_string(&token_file).unwrap().trim().to_owned();
    // Python's standard library as the TLS client, trusting the certificate.
    let client = r#"
import http.client, json, ssl, sys
port, cafile, token = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
for auth in ([], [("Authorization", "Bearer " + token)]):
    c = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(cafile=cafile), timeout=10)
    c.request("POST", "/mcp", body, dict([("Content-Type", "application/json"), ("Accept", "application/json, text/event-stream")] + auth))
    r = c.getresponse()
    print(r.status, r.read().decode()[:200].replace("\n", " "))
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", client, &port.to_string(), cert.to_str().unwrap(), &token])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{said}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = said.lines().collect();
    assert!(lines[0].starts_with("401"), "{said}");
    assert!(lines[1].starts_with("200") && lines[1].contains("protocolVersion"), "{said}");
    // Plain HTTP to the TLS port: no HTTP answer.
    let mut plain = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.set_read_timeout(Some(agentd_tests::STEP)).unwrap();
    plain
        .write_all(initialize(&format!("127.0.0.1:{port}"), &format!("Authorization: Bearer {token}\r\n")).as_bytes())
        .unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    bridge.kill().unwrap();
    bridge.wait().unwrap();
}

/// A client of MCP 2026-07-28 (the official Python SDK's `Client` in that
/// mode), over stdio and over HTTP: every result complete (`resultType`),
/// a call that needs the user's approval asked through `input_required`
/// rounds (approved: it runs; declined: refused, nothing written), the
/// call's events as log messages at the request's own level, and
/// `subscriptions/listen` telling it that a watched file and the tools
/// changed. Over HTTP, whose 2026-07-28 requests each make a new bridge,
/// the requests share one daemon session (a tool ToolSearch loaded is
/// still listed by the next request).
#[test]
fn a_2026_07_28_client_uses_agentctl_mcp_over_stdio_and_http() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let check = |seen: &[Value], ws: &Path| {
        let find = |key: &str| {
            seen.iter().find(|v| v.get(key).is_some()).unwrap_or_else(|| panic!("no {key}: {seen:?}"))[key].clone()
        };
        assert_eq!(find("protocol"), "2026-07-28");
        let tools: Vec<String> = serde_json::from_value(find("tools")).unwrap();
        assert!(tools.iter().any(|t| t == "Read") && tools.iter().any(|t| t == "Write"), "{tools:?}");
        assert_eq!(find("read_error"), false);
        assert!(find("read").as_str().unwrap().contains("hello resource"), "{seen:?}");
        assert_eq!((find("write_allowed"), find("exists")), (json!(true), json!(true)), "{seen:?}");
        assert!(find("asked_text").as_str().unwrap().contains("allow Write"), "{seen:?}");
        assert_eq!(std::fs::read_to_string(ws.join("allowed.txt")).unwrap(), "yes\n");
        assert_eq!((find("write_refused"), find("refused_exists")), (json!(true), json!(false)), "{seen:?}");
        assert!(find("refused_text").as_str().unwrap().contains("declined"), "{seen:?}");
        let logs = find("logs");
        assert!(logs.as_array().unwrap().iter().any(|l| l == "debug"), "the request asked for debug: {logs}");
        let resources: Vec<String> = serde_json::from_value(find("resources")).unwrap();
        assert!(resources.contains(&"hello.txt".to_owned()), "{resources:?}");
        assert_eq!(find("prompts"), json!(["greet"]));
        assert_eq!(find("resource_text"), "hello resource\n");
        assert_eq!(find("honored_tools"), true);
        assert_eq!(find("honored_uris"), json!([url_of(&ws.join("hello.txt"))]));
        assert_eq!(find("tool_search_error"), false);
        assert_eq!(find("seen"), json!(["tools", "updated"]), "{seen:?}");
        let after: Vec<String> = serde_json::from_value(find("after")).unwrap();
        assert!(after.contains(&"NotebookEdit".to_owned()), "{after:?}");
    };
    let (_dir, ws) = workspace();
    let cwd = ws.to_str().unwrap();
    let seen = super::mcp_support::sdk_client(&python, "modern_client.py", &d.socket, &ws, &["stdio", "--cwd", cwd]);
    check(&seen, &ws);

    let (_dir, ws) = workspace();
    let token_dir = tempfile::tempdir().unwrap();
    let token_file = token_dir.path().join("token");
    let cwd = ws.to_str().unwrap();
    let args = ["--http", "127.0.0.1:0", "--cwd", cwd, "--token-file", token_file.to_str().unwrap()];
    let (mut bridge, port) = http_bridge(&d.socket, &args);
    let transport = format!("http:http://127.0.0.1:{port}/mcp:{}", token_file.display());
    let seen = super::mcp_support::sdk_client(&python, "modern_client.py", &d.socket, &ws, &[&transport]);
    check(&seen, &ws);
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        assert_eq!(sessions(&mut c).await, 1, "the 2026-07-28 requests shared one session");
    });
    bridge.kill().unwrap();
    bridge.wait().unwrap();
}
