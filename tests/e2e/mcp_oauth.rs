//! OAuth 2.1 for an HTTP MCP server, end to end: a server behind its own
//! authorization server (`tests/mcp/oauth_server.py`: discovery from the
//! 401 challenge, dynamic registration, PKCE, refresh), agentd's client,
//! and `agentctl mcp login` with a "browser" that follows the redirects
//! back to its listener.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use agentd_tests::{EventStream, RawConn, StandaloneDaemon, bin_path, within};
use serde_json::{Value, json};

use super::mcp_support::{call, required, rt, session, text};

/// The OAuth test server, tokens living `expires_in` seconds, with `env`
/// (killed when dropped); its port.
fn oauth_server(python: &Path, dir: &Path, expires_in: u32, env: &[(&str, &str)]) -> (Killed, u16) {
    let port_file = dir.join("port");
    let child = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/mcp/oauth_server.py"))
        .arg(&port_file)
        .arg(expires_in.to_string())
        .env("OAUTH_LOG", dir.join("grants"))
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let server = Killed(child);
    for _ in 0..200 {
        if let Ok(port) = std::fs::read_to_string(&port_file) {
            return (server, port.trim().parse().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("the OAuth test server did not start");
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `agentctl mcp login` with `$BROWSER` a script that opens the address
/// as a browser would (following redirects back to agentctl's listener).
fn login(socket: &Path, dir: &Path, sid: &str) -> (i32, String, String) {
    let browser = dir.join("browser");
    std::fs::write(
        &browser,
        "#!/bin/sh\nexec python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=10).read()' \"$1\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&browser, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new(bin_path("agentctl"))
        .args(["--socket"])
        .arg(socket)
        .args(["mcp", "login", "t", "--session", sid])
        .env("BROWSER", &browser)
        .env_remove("AGENTD_SOCKET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_server_behind_oauth_is_logged_in_to_with_agentctl_its_tokens_kept_private_refreshed_and_forgotten() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = oauth_server(&python, dir.path(), 2, &[]);
    let mut d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let state = d.dir.path().join("state");
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let options = json!({ "mcp_servers": { "t": { "type": "http", "url": url } }, "mode": "bypass",
            "tools": { "defer": { "mode": "never" } } });
        let created = session(&mut c, work.path(), options.clone()).await;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        let status = &created["session"]["mcp"][0];
        assert_eq!((&status["state"], &status["auth"]), (&json!("failed"), &json!("required")), "{created}");
        assert!(status["last_error"].as_str().unwrap().contains("agentctl mcp login t"), "{created}");
        // Said in the session's events from the start (replayed).
        let mut events = EventStream::open(&d.socket, &sid, Some(0)).await.unwrap();
        let seen = within("mcp/auth_required", events.until(|e| e["type"] == "mcp/auth_required")).await;
        assert_eq!(seen.last().unwrap()["server"], "t");

        // A redirect address off the loopback interface is refused at once.
        let bad = c
            .request(
                "mcp/login",
                json!({ "session_id": sid, "server": "t", "redirect_uri": "http://evil.example:80/cb" }),
            )
            .await;
        assert!(bad["error"]["message"].as_str().unwrap_or_default().contains("loopback"), "{bad}");

        let (code, out, err) = tokio::task::spawn_blocking({
            let (socket, dir, sid) = (d.socket.clone(), dir.path().to_owned(), sid.clone());
            move || login(&socket, &dir, &sid)
        })
        .await
        .unwrap();
        assert_eq!(code, 0, "{out}{err}");
        assert!(out.contains("logged in to t") && out.contains("running"), "{out}{err}");
        // The session follows: its tools are there, and work.
        let seen = within("tools/changed", events.until(|e| e["type"] == "tools/changed")).await;
        assert_eq!(seen.last().unwrap()["added"], json!(["mcp__t__secret"]));
        let r = call(&mut c, &sid, "mcp__t__secret", json!({})).await;
        assert_eq!(text(&r), "the secret is 42", "{r}");
        let got = c.ok("session/get", json!({ "session_id": sid })).await;
        assert_eq!(got["mcp"][0]["auth"], "authorized", "{got}");

        // Kept 0600 in a 0700 directory; in no answer, event or log.
        let files: Vec<_> = std::fs::read_dir(state.join("mcp-auth")).unwrap().map(|e| e.unwrap().path()).collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let kept = std::fs::read_to_string(&files[0]).unwrap();
        let access = kept.split("\"at-").nth(1).map(|s| format!("at-{}", &s[..16])).expect("an access token is kept");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(state.join("mcp-auth")).unwrap().permissions().mode() & 0o777, 0o700);
        let log = std::fs::read_to_string(d.dir.path().join("agentd.log")).unwrap();
        for (what, text) in [("session/get", got.to_string()), ("the log", log), ("the events", format!("{seen:?}"))] {
            assert!(!text.contains(&access) && !text.contains("rt-"), "a token in {what}: {text}");
        }
        // A confined command cannot read them.
        let (dir_arg, file_arg) = (state.join("mcp-auth").display().to_string(), files[0].display().to_string());
        let r = call(&mut c, &sid, "Bash", json!({ "command": format!("cat {file_arg}; ls -A {dir_arg}") })).await;
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(!text(&r).contains("at-") && text(&r).matches(&name).count() == 1, "only cat's error names it: {r}");

        // The access token lives 2 s: a call after that refreshes it.
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let r = call(&mut c, &sid, "mcp__t__secret", json!({})).await;
        assert_eq!(text(&r), "the secret is 42", "{r}");
        let grants = std::fs::read_to_string(dir.path().join("grants")).unwrap();
        assert_eq!(grants.lines().collect::<Vec<_>>(), ["authorization_code", "refresh_token"], "{grants}");
    });

    // A restarted daemon starts the server with the kept tokens.
    d.signal(nix::sys::signal::Signal::SIGTERM);
    let _ = d.child.wait();
    d.restart();
    rt().block_on(async {
        let mut c = RawConn::connect(&d.socket).await;
        let options = json!({ "mcp_servers": { "t": { "type": "http", "url": url } }, "mode": "bypass",
            "tools": { "defer": { "mode": "never" } } });
        let created = session(&mut c, work.path(), options).await;
        let sid = created["session_id"].as_str().unwrap().to_owned();
        // Its tools are known (cached); the first call starts it.
        assert_eq!(created["session"]["mcp"][0]["tools"], 1, "{created}");
        let r = call(&mut c, &sid, "mcp__t__secret", json!({})).await;
        assert_eq!(text(&r), "the secret is 42", "{r}");
        // Logged out: the tokens are gone, the server asks again.
        let out = c.ok("mcp/logout", json!({ "session_id": sid, "server": "t" })).await;
        assert_eq!(out["forgotten"], true, "{out}");
        assert_eq!(std::fs::read_dir(state.join("mcp-auth")).unwrap().count(), 0);
        let r = call(&mut c, &sid, "mcp__t__secret", json!({})).await;
        assert_eq!(r["is_error"], true, "{r}");
        assert!(text(&r).contains("needs an OAuth login"), "{r}");
        let got: Value = c.ok("session/get", json!({ "session_id": sid })).await;
        assert_eq!(got["mcp"][0]["auth"], "required", "{got}");
    });
}

/// An authorization server whose metadata sends the client to a cloud
/// metadata address or a link-local one is not followed there (SSRF).
#[test]
fn metadata_pointing_at_link_local_or_cloud_metadata_addresses_is_refused() {
    let Some(python) = required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    for (var, target) in [
        ("OAUTH_REGISTRATION_ENDPOINT", "http://169.254.169.254/latest/meta-data/register"),
        ("OAUTH_REGISTRATION_ENDPOINT", "http://[::ffff:169.254.169.254]/register"),
        ("OAUTH_TOKEN_ENDPOINT", "http://metadata.google.internal/token"),
        ("OAUTH_TOKEN_ENDPOINT", "http://169.254.170.2/token"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (_server, port) = oauth_server(&python, dir.path(), 3600, &[(var, target)]);
        rt().block_on(async {
            let mut c = RawConn::connect(&d.socket).await;
            let url = format!("http://127.0.0.1:{port}/mcp");
            let options = json!({ "mcp_servers": { "t": { "type": "http", "url": url } }, "mode": "bypass" });
            let sid = session(&mut c, work.path(), options).await["session_id"].as_str().unwrap().to_owned();
            let login = json!({ "session_id": sid, "server": "t", "redirect_uri": "http://127.0.0.1:9/callback" });
            let r = c.request("mcp/login", login).await;
            if var == "OAUTH_TOKEN_ENDPOINT" {
                // The token endpoint is reached when the code comes back.
                let started = &r["result"];
                let back = approve(started["authorization_url"].as_str().unwrap());
                let done = json!({ "login_id": started["login_id"], "callback_url": back });
                let r = c.request("mcp/login_complete", done).await;
                // (Refused at once; rmcp says only "Request failed".)
                assert!(r.get("error").is_some(), "{var}={target}: {r}");
            } else {
                let message = r["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains("address not allowed"), "{var}={target}: {r}");
            }
            c.ok("session/close", json!({ "session_id": sid })).await;
        });
        // Nothing reached a registration or token endpoint of its own.
        assert!(!dir.path().join("grants").exists(), "{var}={target}");
    }
}

/// What a browser is sent back to from the test server's authorization
/// address (it approves at once): the `Location` of its answer.
fn approve(address: &str) -> String {
    use std::io::{Read, Write};
    let rest = address.strip_prefix("http://").unwrap();
    let (host, target) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(stream, "GET {target} HTTP/1.0\r\nHost: {host}\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let location = answer.lines().find_map(|l| l.strip_prefix("Location: ")).unwrap_or_else(|| panic!("{answer}"));
    location.trim().to_owned()
}
