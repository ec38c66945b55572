//! The TLS face (`agentd --listen-tls`): the protocol over mutual TLS for a
//! harness on another machine. Certificates are made by the `openssl`
//! command for each test: a CA, the daemon's certificate (localhost,
//! 127.0.0.1), a client it signed, and a client of another CA.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use agentd_client::{Client, ClientError, Endpoint, TlsEndpoint};
use agentd_protocol::methods::TurnSubmit;
use agentd_protocol::session::{PermissionMode, SessionCreateParams};
use agentd_protocol::tools::ToolCallResult;
use agentd_protocol::turn::{ToolUse, TurnSubmitParams};
use agentd_tests::{StandaloneDaemon, agentd_command, bin_path, within};
use serde_json::json;

/// A CA and the certificates it (or a rogue CA) signed, in a temp dir.
struct Pki {
    dir: tempfile::TempDir,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("the openssl command (Debian package openssl) runs");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// `openssl req`: a new P-256 key `{name}.key` and, in `out`, a request
/// for `subject` (a self-signed certificate with `-x509` in `extra`).
fn new_key(dir: &Path, name: &str, out: &str, subject: &str, extra: &[&str]) {
    let key = format!("{name}.key");
    let mut args =
        vec!["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", &key, "-out", out];
    args.extend(["-subj", subject]);
    args.extend(extra);
    openssl(dir, &args);
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for ca in ["ca", "rogue"] {
            new_key(d, ca, &format!("{ca}.pem"), &format!("/CN=test {ca}"), &["-x509", "-days", "2"]);
        }
        let leaf = |name: &str, ca: &str, san: &str| {
            new_key(d, name, &format!("{name}.csr"), &format!("/CN={name}"), &[]);
            std::fs::write(d.join(format!("{name}.ext")), format!("subjectAltName={san}\n")).unwrap();
            openssl(
                d,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{name}.csr"),
                    "-CA",
                    &format!("{ca}.pem"),
                    "-CAkey",
                    &format!("{ca}.key"),
                    "-CAcreateserial",
                    "-out",
                    &format!("{name}.pem"),
                    "-days",
                    "2",
                    "-extfile",
                    &format!("{name}.ext"),
                ],
            );
        };
        leaf("server", "ca", "DNS:localhost,IP:127.0.0.1");
        leaf("client", "ca", "DNS:harness");
        leaf("stranger", "rogue", "DNS:harness");
        for entry in std::fs::read_dir(d).unwrap().flatten() {
            use std::os::unix::fs::PermissionsExt;
            if entry.path().extension().is_some_and(|e| e == "key") {
                std::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
            }
        }
        Pki { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn path_str(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }

    /// `agentd` flags for a TLS face on a free loopback port.
    fn daemon_args(&self) -> Vec<String> {
        self.face_args("server.pem", "server.key", Some("ca.pem"))
    }

    /// [`tls_flags`] with files of this PKI.
    fn face_args(&self, cert: &str, key: &str, client_ca: Option<&str>) -> Vec<String> {
        tls_flags(&self.path_str(cert), &self.path_str(key), client_ca.map(|ca| self.path_str(ca)).as_deref())
    }

    fn endpoint(&self, host: &str, port: u16, client: &str, ca: &str) -> Endpoint {
        Endpoint::Tls(TlsEndpoint {
            host: host.to_owned(),
            port,
            cert: self.path(&format!("{client}.pem")),
            key: self.path(&format!("{client}.key")),
            ca: self.path(&format!("{ca}.pem")),
        })
    }
}

/// `agentd` flags for a TLS face on a free loopback port with these files
/// (and, when given, the CA its clients must be signed by).
fn tls_flags(cert: &str, key: &str, client_ca: Option<&str>) -> Vec<String> {
    let mut args = vec!["--listen-tls", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key];
    args.extend(client_ca.map(|ca| ["--tls-client-ca", ca]).into_iter().flatten());
    args.into_iter().map(str::to_owned).collect()
}

fn start(pki: &Pki) -> StandaloneDaemon {
    start_with(&pki.daemon_args())
}

fn start_with(args: &[String]) -> StandaloneDaemon {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    StandaloneDaemon::start(&args, &[])
}

/// A new PKI and a daemon with its TLS face; also the face's port.
async fn face() -> (Pki, StandaloneDaemon, u16) {
    let pki = Pki::new();
    let d = start(&pki);
    let port = tls_port(&d).await;
    (pki, d, port)
}

/// A client of `pki`'s CA connected to the TLS face on `port`.
async fn connect(pki: &Pki, port: u16) -> Client {
    Client::connect_endpoint(&pki.endpoint("localhost", port, "client", "ca"), TIMEOUT).await.unwrap()
}

/// A bypass-mode session in `cwd`; returns its id.
async fn bypass_session(client: &Client, cwd: &Path) -> String {
    client
        .session_create(SessionCreateParams {
            mode: Some(PermissionMode::Bypass),
            ..SessionCreateParams::new(cwd.to_owned())
        })
        .await
        .unwrap()
        .session_id
}

/// A tool result's content as JSON text.
fn text(r: &ToolCallResult) -> String {
    serde_json::to_string(&r.content).unwrap()
}

/// Sends a `daemon/info` request through `openssl s_client` to the TLS
/// face on `port` (trusting `ca`, with `extra` flags), waits `pause`, and
/// returns what came back.
fn s_client(port: u16, ca: &str, extra: &[String], pause: Duration) -> String {
    let request = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\",\"params\":{}}\n";
    let mut child = Command::new("openssl")
        .args(["s_client", "-quiet", "-connect", &format!("127.0.0.1:{port}"), "-CAfile", ca])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(request.as_bytes());
        std::thread::sleep(pause);
    }
    String::from_utf8_lossy(&child.wait_with_output().unwrap().stdout).into_owned()
}

/// The TLS face's port, from `daemon/info` over the socket.
async fn tls_port(d: &StandaloneDaemon) -> u16 {
    let client = within("connect", Client::connect(&d.socket)).await.unwrap();
    let info = client.daemon_info().await.unwrap();
    let addr = info.listen_tls.expect("daemon/info names the TLS face");
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

const TIMEOUT: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_the_ca_signed_gets_the_protocol_and_no_one_else_gets_anything() {
    let (pki, d, port) = face().await;
    let ws = tempfile::tempdir().unwrap();

    // The client the CA signed: the whole protocol, tools included.
    let client = within("TLS connect", connect(&pki, port)).await;
    let info = client.daemon_info().await.unwrap();
    assert_eq!(info.listen_tls.as_deref(), Some(format!("127.0.0.1:{port}").as_str()));
    let sid = bypass_session(&client, ws.path()).await;
    let result = client.tool_call(&sid, "Bash", json!({"command": "echo over tls"})).await.unwrap();
    assert!(!result.is_error, "{result:?}");
    assert!(text(&result).contains("over tls\\n"), "{result:?}");
    // By address too (the certificate names 127.0.0.1).
    within(
        "TLS connect by address",
        Client::connect_endpoint(&pki.endpoint("127.0.0.1", port, "client", "ca"), TIMEOUT),
    )
    .await
    .unwrap();

    // A client of another CA: refused, as a connect error.
    let refused = Client::connect_endpoint(&pki.endpoint("localhost", port, "stranger", "ca"), TIMEOUT).await;
    assert!(
        matches!(&refused, Err(ClientError::Connect { source, .. }) if source.to_string().contains("refused this client")),
        "{:?}",
        refused.err()
    );
    // A daemon certificate this client's CA did not sign: the client refuses it.
    let wrong_ca = Client::connect_endpoint(&pki.endpoint("localhost", port, "client", "rogue"), TIMEOUT).await;
    assert!(matches!(&wrong_ca, Err(ClientError::Connect { .. })), "{:?}", wrong_ca.err());
    // A name the daemon's certificate does not carry.
    let wrong_name = Client::connect_endpoint(&pki.endpoint("127.0.0.2", port, "client", "ca"), TIMEOUT).await;
    assert!(matches!(&wrong_name, Err(ClientError::Connect { .. })), "{:?}", wrong_name.err());

    // No client certificate at all (openssl's client): no reply to a request.
    let stdout = s_client(port, &pki.path_str("ca.pem"), &["-verify_return_error".into()], Duration::from_millis(500));
    assert!(!stdout.contains("jsonrpc"), "a client without a certificate got: {stdout}");
    // Plain text on the TLS port: nothing either.
    let request = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"daemon/info\",\"params\":{}}\n";
    {
        use std::io::{Read, Write};
        let mut tcp = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        tcp.write_all(request.as_bytes()).unwrap();
        let mut got = Vec::new();
        let _ = tcp.read_to_end(&mut got);
        assert!(!String::from_utf8_lossy(&got).contains("jsonrpc"), "plain text got: {got:?}");
    }
    // The daemon says who was refused, and still serves.
    assert!(d.stderr().contains("TLS handshake refused"), "{}", d.stderr());
    client.daemon_info().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tls_files_are_hidden_from_every_tool() {
    let (pki, _daemon, port) = face().await;
    let client = connect(&pki, port).await;
    // The workspace is the directory that holds the key.
    let sid = bypass_session(&client, pki.dir.path()).await;
    let key = pki.path_str("server.key");
    let read = client.tool_call(&sid, "Read", json!({"file_path": key})).await.unwrap();
    assert!(read.is_error && text(&read).contains("secret"), "{read:?}");
    let grep = client
        .tool_call(&sid, "Grep", json!({"pattern": "PRIVATE KEY", "output_mode": "files_with_matches"}))
        .await
        .unwrap();
    assert!(!text(&grep).contains("server.key"), "{grep:?}");
    assert!(text(&grep).contains("client.key"), "the other keys are found: {grep:?}");
    let glob = client.tool_call(&sid, "Glob", json!({"pattern": "*.key"})).await.unwrap();
    assert!(!text(&glob).contains("server.key") && text(&glob).contains("client.key"), "{glob:?}");
    let edit = client.tool_call(&sid, "Write", json!({"file_path": key, "content": "x"})).await.unwrap();
    assert!(edit.is_error, "{edit:?}");
    // A command sees an empty file, through a symlink too.
    let bash = client
        .tool_call(
            &sid,
            "Bash",
            json!({"command": "ln -s server.key alias; wc -c < server.key; cat alias | wc -c; grep -c BEGIN client.key"}),
        )
        .await
        .unwrap();
    assert_eq!(text(&bash).matches("\\n").count(), 3, "{bash:?}");
    assert!(text(&bash).starts_with("[{\"type\":\"text\",\"text\":\"0\\n0\\n1\\n"), "{bash:?}");
    let sym = client.tool_call(&sid, "Read", json!({"file_path": pki.path_str("alias")})).await.unwrap();
    assert!(sym.is_error, "{sym:?}");
    assert!(std::fs::read_to_string(pki.path("server.key")).unwrap().contains("PRIVATE KEY"), "the key is intact");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_link_is_resumed_with_after_seq() {
    let (pki, _daemon, port) = face().await;
    let ws = tempfile::tempdir().unwrap();
    let endpoint = pki.endpoint("localhost", port, "client", "ca");
    let first = Client::connect_endpoint(&endpoint, TIMEOUT).await.unwrap();
    let sid = bypass_session(&first, ws.path()).await;
    let mut events = first.stream(&sid, Some(0)).await.unwrap();
    let uses = vec![
        ToolUse { id: "quick".into(), name: "Bash".into(), input: json!({"command": "echo quick"}) },
        ToolUse { id: "slow".into(), name: "Bash".into(), input: json!({"command": "sleep 2; echo slow"}) },
    ];
    let turn = first
        .call::<TurnSubmit>(TurnSubmitParams { session_id: sid.clone(), turn_id: None, tool_uses: uses, end: true })
        .await
        .unwrap()
        .turn_id;
    // Read until the quick result, then cut the link.
    let mut seen = 0;
    within("the quick result", async {
        while let Some(Ok(event)) = events.next().await {
            seen = event.seq;
            let v = serde_json::to_value(&event).unwrap();
            if v["type"] == "tool/result" && v["tool_use_id"] == "quick" {
                break;
            }
        }
    })
    .await;
    drop(events);
    drop(first);
    // A new connection picks up after the last event seen.
    let second = Client::connect_endpoint(&endpoint, TIMEOUT).await.unwrap();
    let mut events = second.stream(&sid, Some(seen)).await.unwrap();
    let rest: Vec<serde_json::Value> = within("the rest of the turn", async {
        let mut rest = Vec::new();
        while let Some(Ok(event)) = events.next().await {
            let v = serde_json::to_value(&event).unwrap();
            let done = v["type"] == "turn/completed" && v["turn_id"] == turn.as_str();
            rest.push(v);
            if done {
                break;
            }
        }
        rest
    })
    .await;
    assert!(rest.iter().all(|e| e["seq"].as_u64().unwrap() > seen), "{rest:#?}");
    assert!(!rest.iter().any(|e| e["tool_use_id"] == "quick" && e["type"] == "tool/result"), "{rest:#?}");
    let slow = rest.iter().find(|e| e["type"] == "tool/result" && e["tool_use_id"] == "slow").expect("the slow result");
    assert!(slow["content"].to_string().contains("slow\\n"), "{slow}");
}

#[test]
fn the_tls_face_refuses_to_start_half_set_up() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let run = |args: Vec<String>| {
        let out = agentd_command(&dir.path().join("run/s.sock"), &dir.path().join("state"))
            .args(args)
            .env_remove("AGENTD_SOCKET")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    // Mutual TLS only: no client CA, no face.
    let (code, err) = run(pki.face_args("server.pem", "server.key", None));
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tls-client-ca"), "{err}");
    // A key others can read.
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(pki.path("client.key"), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let (code, err) = run(pki.face_args("server.pem", "client.key", Some("ca.pem")));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("other users can read it"), "{err}");
    // A certificate file that holds none, and a key that is not the certificate's.
    let (code, err) = run(pki.face_args("server.ext", "server.key", Some("ca.pem")));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--tls-cert") && err.contains("server.ext"), "{err}");
    let (code, err) = run(pki.face_args("server.pem", "stranger.key", Some("ca.pem")));
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("--tls-cert/--tls-key"), "{err}");
    // Nothing was left behind to serve: the socket file is gone with the daemon.
    assert!(!dir.path().join("run/s.sock").exists());
}

const PYTHON: &str = r#"
import os, sys, ssl
sys.path.insert(0, os.environ["CLIENT_DIR"])
from agentd_client import Agentd, AgentdUnavailable
url, pki, ws = os.environ["URL"], os.environ["PKI"], os.environ["WS"]
f = lambda n: os.path.join(pki, n)
with Agentd(url, cert=f("client.pem"), key=f("client.key"), ca=f("ca.pem")) as d:
    assert d.info()["listen_tls"], d.info()
    sid = d.create_session(ws, mode="bypass")
    r = d.tool(sid, "Bash", command="echo python over tls")
    assert r["content"][0]["text"] == "python over tls\n", r
    turn = d.submit(sid, [{"id": "a", "name": "Bash", "input": {"command": "echo streamed"}}], end=True)
    texts = [e["content"][0]["text"] for e in d.events(sid, after_seq=0, until_turn=turn) if e["type"] == "tool/result" and e["turn_id"] == turn]
    assert texts == ["streamed\n"], texts
# The environment names the files as well.
os.environ.update(AGENTD_CLIENT_CERT=f("client.pem"), AGENTD_CLIENT_KEY=f("client.key"), AGENTD_CA=f("ca.pem"))
with Agentd(url) as d:
    d.info()
try:
    with Agentd(url, cert=f("stranger.pem"), key=f("stranger.key")) as d:
        d.info()
    raise SystemExit("a stranger was let in")
except AgentdUnavailable as e:
    print("refused:", e)
print("ok")
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_speaks_tls() {
    let (pki, _daemon, port) = face().await;
    let ws = tempfile::tempdir().unwrap();
    let out = tokio::task::spawn_blocking({
        let (pki, ws) = (pki.dir.path().to_owned(), ws.path().to_owned());
        move || {
            Command::new("python3")
                .args(["-c", PYTHON])
                .env("CLIENT_DIR", concat!(env!("CARGO_MANIFEST_DIR"), "/../client/python"))
                .env("URL", format!("tls://localhost:{port}"))
                .env("PKI", pki)
                .env("WS", ws)
                .env_remove("AGENTD_SOCKET")
                .env_remove("AGENTD_CONNECT")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.ends_with("ok\n"), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("refused:"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentctl_connects_to_the_tls_face() {
    let (pki, _daemon, port) = face().await;
    let ws = tempfile::tempdir().unwrap();
    let url = format!("tls://localhost:{port}");
    let ws_path = ws.path().display().to_string();
    let run = move |client: &str, args: Vec<String>| {
        let out = Command::new(bin_path("agentctl"))
            .args(["--connect", &url])
            .args(["--cert", &pki.path_str(&format!("{client}.pem")), "--key", &pki.path_str(&format!("{client}.key"))])
            .args(["--ca", &pki.path_str("ca.pem")])
            .args(args)
            .env_remove("AGENTD_SOCKET")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let ((code, out, err), call, no_cwd, stranger) = tokio::task::spawn_blocking(move || {
        (
            run("client", args(&["status"])),
            run(
                "client",
                args(&["call", "Bash", "--arg", "command=echo from agentctl", "--mode", "bypass", "--cwd", &ws_path]),
            ),
            run("client", args(&["call", "Bash", "--arg", "command=true"])),
            run("stranger", args(&["status"])),
        )
    })
    .await
    .unwrap();
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains(&format!("tls:         127.0.0.1:{port} (mutual TLS)")), "{out}");
    assert_eq!(call.0, Some(0), "{call:?}");
    assert_eq!(call.1, "from agentctl\n", "{call:?}");
    // A local directory means nothing on the daemon's machine: a bad
    // command line (exit 2, issue 49 #13).
    assert_eq!(no_cwd.0, Some(2), "{no_cwd:?}");
    assert!(no_cwd.2.contains("give --cwd as an absolute path"), "{no_cwd:?}");
    assert_eq!(stranger.0, Some(3), "{stranger:?}");
    assert!(stranger.2.contains("refused this client"), "{stranger:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_given_through_a_symlink_stays_hidden_after_a_rotation() {
    // As a Kubernetes Secret volume has it: tls.key -> ..data/tls.key,
    // ..data -> a directory per version, swapped on update.
    let pki = Pki::new();
    let vol = tempfile::tempdir().unwrap();
    let v = vol.path();
    std::fs::create_dir(v.join("v1")).unwrap();
    std::fs::copy(pki.path("server.key"), v.join("v1/tls.key")).unwrap();
    std::os::unix::fs::symlink("v1", v.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/tls.key", v.join("tls.key")).unwrap();
    let key = v.join("tls.key").display().to_string();
    let d = start_with(&tls_flags(&pki.path_str("server.pem"), &key, Some(&pki.path_str("ca.pem"))));
    let port = tls_port(&d).await;
    let client = connect(&pki, port).await;
    let sid = bypass_session(&client, v).await;
    // The rotation: a new version, the link swapped.
    std::fs::create_dir(v.join("v2")).unwrap();
    std::fs::copy(pki.path("server.key"), v.join("v2/tls.key")).unwrap();
    std::os::unix::fs::symlink("v2", v.join("..data.new")).unwrap();
    std::fs::rename(v.join("..data.new"), v.join("..data")).unwrap();
    for path in [key.clone(), v.join("v2/tls.key").display().to_string(), v.join("v1/tls.key").display().to_string()] {
        let read = client.tool_call(&sid, "Read", json!({"file_path": path})).await.unwrap();
        assert!(read.is_error, "{path}: {read:?}");
    }
    let bash =
        client.tool_call(&sid, "Bash", json!({"command": "cat tls.key v2/tls.key v1/tls.key | wc -c"})).await.unwrap();
    assert_eq!(serde_json::to_value(&bash.content).unwrap()[0]["text"], "0\n", "{bash:?}");
    // The old version removed, as the kubelet does: commands still run,
    // and the new key is still hidden.
    std::fs::remove_dir_all(v.join("v1")).unwrap();
    let bash = client.tool_call(&sid, "Bash", json!({"command": "echo ran; cat tls.key | wc -c"})).await.unwrap();
    assert_eq!(serde_json::to_value(&bash.content).unwrap()[0]["text"], "ran\n0\n", "{bash:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_is_known_by_what_it_is_not_by_its_path() {
    let pki = Pki::new();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path().canonicalize().unwrap();
    std::fs::create_dir(w.join("certs")).unwrap();
    std::fs::copy(pki.path("server.key"), w.join("certs/server.key")).unwrap();
    let key = w.join("certs/server.key").display().to_string();
    let d = start_with(&tls_flags(&pki.path_str("server.pem"), &key, Some(&pki.path_str("ca.pem"))));
    let port = tls_port(&d).await;
    let client = connect(&pki, port).await;
    let open = |mode: PermissionMode, off: bool| {
        let client = &client;
        let w = w.clone();
        async move {
            let mut params = SessionCreateParams { mode: Some(mode), ..SessionCreateParams::new(w) };
            params.permission_timeout_ms = Some(100);
            if off {
                params.sandbox = Some(serde_json::from_value(json!({"mode": "off"})).unwrap());
            }
            client.session_create(params).await.unwrap().session_id
        }
    };
    let bypass = open(PermissionMode::Bypass, false).await;
    // A confined command cannot rename the key's directory away from its mask.
    let r = client.tool_call(&bypass, "Bash", json!({"command": "mv certs certs2; ls"})).await.unwrap();
    assert!(w.join("certs/server.key").is_file() && !w.join("certs2/server.key").exists(), "{r:?}");
    let _ = std::fs::remove_dir_all(w.join("certs2"));
    // A hard link made outside, and the directory renamed outside: still the key.
    std::fs::hard_link(w.join("certs/server.key"), w.join("linked.key")).unwrap();
    std::fs::rename(w.join("certs"), w.join("moved")).unwrap();
    for path in ["linked.key", "moved/server.key"] {
        let read = client.tool_call(&bypass, "Read", json!({"file_path": w.join(path)})).await.unwrap();
        assert!(read.is_error && text(&read).contains("secret"), "{path}: {read:?}");
    }
    let grep =
        client.tool_call(&bypass, "Grep", json!({"pattern": "PRIVATE", "output_mode": "content"})).await.unwrap();
    assert!(!text(&grep).contains("BEGIN"), "{grep:?}");
    let glob = client.tool_call(&bypass, "Glob", json!({"pattern": "**/*.key"})).await.unwrap();
    assert!(!text(&glob).contains("linked.key") && !text(&glob).contains("server.key"), "{glob:?}");
    // Without the sandbox (the session's mode off) a command in a workspace
    // that holds the key asks, even one judged read-only.
    let unconfined = open(PermissionMode::Default, true).await;
    let r = client.tool_call(&unconfined, "Bash", json!({"command": "cat moved/server.key"})).await.unwrap();
    assert!(r.is_error && !text(&r).contains("BEGIN"), "{r:?}");
    assert!(text(&r).contains("TLS key"), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_from_one_address_do_not_lock_others_out_and_sessions_do_not_resume() {
    let (pki, _daemon, port) = face().await;
    // 80 connections from 127.0.0.2 that never speak.
    let mut idle = Vec::new();
    for _ in 0..80 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
        if let Ok(s) = socket.connect(([127, 0, 0, 1], port).into()).await {
            idle.push(s);
        }
    }
    assert!(idle.len() >= 64, "{} connected", idle.len());
    let endpoint = pki.endpoint("localhost", port, "client", "ca");
    let client = within("a client beside the idle ones", Client::connect_endpoint(&endpoint, TIMEOUT)).await.unwrap();
    client.daemon_info().await.unwrap();
    drop(idle);
    // A session saved by a client with a certificate does not let one
    // without in.
    let sess = pki.path("sess.pem").display().to_string();
    let (ca, cert, key) = (pki.path_str("ca.pem"), pki.path_str("client.pem"), pki.path_str("client.key"));
    let s_client = move |extra: Vec<String>| {
        let extra: Vec<String> = std::iter::once("-no_ign_eof".to_owned()).chain(extra).collect();
        s_client(port, &ca, &extra, Duration::from_millis(700))
    };
    let (first, again) = tokio::task::spawn_blocking(move || {
        let first = s_client(vec!["-cert".into(), cert, "-key".into(), key, "-sess_out".into(), sess.clone()]);
        let again = std::path::Path::new(&sess).exists().then(|| s_client(vec!["-sess_in".into(), sess]));
        (first, again)
    })
    .await
    .unwrap();
    assert!(first.contains("jsonrpc"), "the client with a certificate is answered: {first}");
    if let Some(again) = again {
        assert!(!again.contains("jsonrpc"), "a resumed session without a certificate got: {again}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_sandbox_cannot_mask_files_every_command_asks() {
    // A partial sandbox (no mount namespace) cannot bind /dev/null over the
    // key, and its Landlock profile reads all of `/`: a command an allow
    // rule lets through must still ask (found by the second review).
    let pki = Pki::new();
    let mut args = pki.daemon_args();
    args.extend(["--sandbox-without".to_owned(), "namespaces".to_owned()]);
    let d = start_with(&args);
    let port = tls_port(&d).await;
    let client = connect(&pki, port).await;
    let ws = tempfile::tempdir().unwrap();
    let mut params = SessionCreateParams::new(ws.path().to_owned());
    params.permission_timeout_ms = Some(100);
    params.permissions =
        Some(agentd_protocol::session::PermissionRules { allow: vec!["Bash(cat:*)".into()], ..Default::default() });
    let sid = client.session_create(params).await.unwrap().session_id;
    let r = client
        .tool_call(&sid, "Bash", json!({"command": format!("cat {}", pki.path_str("server.key"))}))
        .await
        .unwrap();
    assert!(r.is_error && !text(&r).contains("BEGIN"), "{r:?}");
    assert!(text(&r).contains("cannot hide agentd's TLS key"), "{r:?}");
    assert!(d.stderr().contains("the sandbox cannot hide it from commands"), "{}", d.stderr());
}
