//! Seal the wall (issue 24), through the socket: nothing a confined command
//! does reaches a host service (Unix sockets, VSOCK), reads a credential,
//! or leaves behind what a later session or login would obey.

use agentd_tests::{RawConn, StandaloneDaemon, TestDaemon, procs, tag, tool_use, within};
use serde_json::{Value, json};

/// A session on `conn` in `cwd` with `params` added; returns its id.
pub(super) async fn session(c: &mut RawConn, cwd: &std::path::Path, params: Value) -> String {
    let mut p = json!({ "cwd": cwd, "permission_timeout_ms": 100 });
    p.as_object_mut().unwrap().extend(params.as_object().unwrap().clone());
    c.session(p).await
}

/// A bypass session whose sandbox lets commands connect to the Unix
/// socket `allowed`.
async fn socket_session(c: &mut RawConn, cwd: &std::path::Path, allowed: &std::path::Path) -> String {
    let sandbox = json!({ "allow_unix_sockets": [allowed.display().to_string()] });
    session(c, cwd, json!({ "mode": "bypass", "sandbox": sandbox })).await
}

/// Runs `command` with Bash; returns (succeeded, text).
pub(super) async fn bash(c: &mut RawConn, id: &str, command: &str) -> (bool, String) {
    let reply = within(
        "bash",
        c.request("tool/call", json!({ "session_id": id, "name": "Bash", "input": { "command": command } })),
    )
    .await;
    let result = &reply["result"];
    let text = result["content"][0]["text"].as_str().unwrap_or_default().to_owned();
    (reply.get("error").is_none() && result["is_error"] != true, format!("{text}{}", reply["error"]))
}

/// A Python one-liner that connects a Unix stream socket to `path` and
/// prints `connected` (or the error).
fn connect_unix(path: &std::path::Path) -> String {
    format!(
        "python3 -c 'import socket,sys\ntry:\n  s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); \
         print(\"connected\")\nexcept OSError as e:\n  print(\"refused\", e)' {}",
        path.display()
    )
}

/// A Unix listener outside any workspace, standing for `docker.sock`, the
/// user's D-Bus socket or an ssh-agent; counts who connected.
struct HostSocket {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    listener: std::os::unix::net::UnixListener,
}

impl HostSocket {
    fn new() -> HostSocket {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        listener.set_nonblocking(true).unwrap();
        HostSocket { _dir: dir, path, listener }
    }
    fn connected(&self) -> bool {
        self.listener.accept().is_ok()
    }
}

#[tokio::test]
async fn host_unix_sockets_are_out_of_reach_in_every_profile() {
    let d = TestDaemon::start().await;
    let host = HostSocket::new();
    let mut c = d.raw().await;
    // (session options, mode): approved commands (bypass) in
    // workspace_write with and without network, auto_allow, read_only.
    let cases = [
        (json!({ "mode": "bypass", "sandbox": { "network": true } }), "workspace_write, network"),
        (json!({ "mode": "bypass", "sandbox": { "network": false } }), "workspace_write, no network"),
        (json!({ "sandbox": { "auto_allow": true } }), "auto_allow"),
        (json!({ "mode": "bypass", "sandbox": { "mode": "read_only" } }), "read_only"),
    ];
    for (params, what) in cases {
        let id = session(&mut c, d.dir.path(), params).await;
        let (_, out) = bash(&mut c, &id, &connect_unix(&host.path)).await;
        assert!(out.contains("refused"), "{what}: {out}");
        assert!(!host.connected(), "{what}: the host socket was reached: {out}");
    }
    // The daemon's own socket, even when named.
    let id = socket_session(&mut c, d.dir.path(), &d.socket).await;
    let (_, out) = bash(&mut c, &id, &connect_unix(&d.socket)).await;
    assert!(!out.contains("connected"), "the daemon's socket: {out}");
}

#[tokio::test]
async fn a_named_socket_opens_and_the_calls_own_sockets_work() {
    let d = TestDaemon::start().await;
    let host = HostSocket::new();
    let mut c = d.raw().await;
    let id = socket_session(&mut c, d.dir.path(), &host.path).await;
    let (_, out) = bash(&mut c, &id, &connect_unix(&host.path)).await;
    assert!(out.contains("connected"), "{out}");
    assert!(host.connected());
    // A server of the call's own, pathname (relative and absolute) and
    // abstract, and a socketpair: all work.
    let own = r#"python3 - <<'EOF'
import os, socket, threading
def serve(addr):
    srv = socket.socket(socket.AF_UNIX); srv.bind(addr); srv.listen(1)
    def run():
        conn, _ = srv.accept(); conn.sendall(b"hi"); conn.close()
    threading.Thread(target=run, daemon=True).start()
    return srv
here = os.getcwd()
os.chdir(os.environ["TMPDIR"])
for addr, dial in [("own.sock", "own.sock"), (here + "/abs.sock", here + "/abs.sock"), ("\0agentd-own", "\0agentd-own")]:
    srv = serve(addr)
    c = socket.socket(socket.AF_UNIX); c.connect(dial)
    print(os.path.basename(addr.strip("\0")), c.recv(2).decode())
a, b = socket.socketpair(); a.sendall(b"pair"); print(b.recv(4).decode())
srv = serve("thread.sock")
def dial():
    c = socket.socket(socket.AF_UNIX); c.connect("thread.sock"); print("thread", c.recv(2).decode())
t = threading.Thread(target=dial); t.start(); t.join()
EOF"#;
    let (ok, out) = bash(&mut c, &id, own).await;
    assert!(ok, "{out}");
    for line in ["own.sock hi", "abs.sock hi", "agentd-own hi", "pair", "thread hi"] {
        assert!(out.contains(line), "{line}: {out}");
    }
}

#[tokio::test]
async fn racing_the_check_does_not_reach_the_host() {
    // One thread flips the address between the call's own socket and the
    // host's while another connects over and over: the supervisor acts on
    // what it checked, never on what the memory says later.
    let d = TestDaemon::start().await;
    let host = HostSocket::new();
    let mut c = d.raw().await;
    let id = session(&mut c, d.dir.path(), json!({ "mode": "bypass" })).await;
    let race = format!(
        r#"python3 - <<'EOF'
import ctypes, os, socket, threading
os.chdir(os.environ["TMPDIR"])
srv = socket.socket(socket.AF_UNIX); srv.bind("mine.sock"); srv.listen(1000)
libc = ctypes.CDLL(None, use_errno=True)
class Addr(ctypes.Structure):
    _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
addr = Addr(socket.AF_UNIX, b"mine.sock")
host = b"{host}"
mine = b"mine.sock"
stop = False
def flip():
    while not stop:
        addr.path = host
        addr.path = mine
threading.Thread(target=flip, daemon=True).start()
reached = 0
for _ in range(200):
    s = socket.socket(socket.AF_UNIX)
    libc.connect(s.fileno(), ctypes.byref(addr), ctypes.sizeof(addr))
    s.close()
stop = True
print("done")
EOF"#,
        host = host.path.display()
    );
    let (_, out) = bash(&mut c, &id, &race).await;
    assert!(out.contains("done"), "{out}");
    assert!(!host.connected(), "a racing connect reached the host socket");
}

#[tokio::test]
async fn other_socket_families_are_refused() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let id = session(&mut c, d.dir.path(), json!({ "mode": "bypass" })).await;
    let probe = r#"python3 - <<'EOF'
import socket
for name, args in [("vsock", (40, socket.SOCK_STREAM)), ("packet", (17, socket.SOCK_RAW)),
                   ("alg", (38, socket.SOCK_SEQPACKET)), ("unix-dgram", (socket.AF_UNIX, socket.SOCK_DGRAM)),
                   ("unix-raw", (socket.AF_UNIX, socket.SOCK_RAW)), ("unix-rdm", (socket.AF_UNIX, socket.SOCK_RDM)),
                   ("netlink-audit", (socket.AF_NETLINK, socket.SOCK_RAW, 9))]:
    try:
        socket.socket(*args); print(name, "open")
    except OSError as e:
        print(name, "refused", e.errno)
for name, kind in [("dgram-pair", socket.SOCK_DGRAM), ("raw-pair", socket.SOCK_RAW)]:
    try:
        socket.socketpair(socket.AF_UNIX, kind); print(name, "open")
    except OSError as e:
        print(name, "refused")
socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET); print("seqpacket ok")
socket.socket(socket.AF_INET); socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0); print("inet ok")
EOF"#;
    let (ok, out) = bash(&mut c, &id, probe).await;
    assert!(ok, "{out}");
    for name in
        ["vsock", "packet", "alg", "unix-dgram", "unix-raw", "unix-rdm", "netlink-audit", "dgram-pair", "raw-pair"]
    {
        assert!(out.contains(&format!("{name} refused")), "{name}: {out}");
    }
    assert!(out.contains("inet ok") && out.contains("seqpacket ok"), "{out}");
}

#[tokio::test]
async fn credentials_are_hidden_in_every_profile_unless_allowed() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::create_dir_all(h.join(".ssh")).unwrap();
    std::fs::write(h.join(".ssh/id_ed25519"), "PRIVATE-KEY").unwrap();
    std::fs::write(h.join(".ssh/known_hosts"), "KNOWN-HOST").unwrap();
    std::fs::create_dir_all(h.join(".aws")).unwrap();
    std::fs::write(h.join(".aws/credentials"), "AWS-SECRET").unwrap();
    std::fs::create_dir_all(h.join(".kube")).unwrap();
    std::fs::write(h.join(".kube/config"), "KUBE-TOKEN").unwrap();
    let ws = tempfile::tempdir().unwrap();
    let d = StandaloneDaemon::start(&[], &[("HOME", h.to_str().unwrap())]);
    let mut c = RawConn::connect(&d.socket).await;
    let read =
        format!("cat {0}/.ssh/id_ed25519 {0}/.aws/credentials {0}/.kube/config {0}/.ssh/known_hosts", h.display());
    for params in [json!({ "mode": "bypass" }), json!({ "mode": "bypass", "sandbox": { "mode": "read_only" } })] {
        let id = session(&mut c, ws.path(), params.clone()).await;
        let (_, out) = bash(&mut c, &id, &read).await;
        for secret in ["PRIVATE-KEY", "AWS-SECRET", "KUBE-TOKEN"] {
            assert!(!out.contains(secret), "{params}: {secret} read: {out}");
        }
        if params["sandbox"]["mode"].is_null() {
            assert!(out.contains("KNOWN-HOST"), "known_hosts stays readable: {out}");
        }
    }
    // A workspace that is the home directory: still hidden.
    let id = session(&mut c, h, json!({ "mode": "bypass" })).await;
    let (_, out) = bash(&mut c, &id, &read).await;
    assert!(!out.contains("PRIVATE-KEY") && !out.contains("AWS-SECRET"), "{out}");
    // Named by the session, or by a Read allow rule: readable.
    let id =
        session(&mut c, ws.path(), json!({ "mode": "bypass", "sandbox": { "allow_credentials": ["~/.aws"] } })).await;
    let (_, out) = bash(&mut c, &id, &read).await;
    assert!(out.contains("AWS-SECRET") && !out.contains("PRIVATE-KEY"), "{out}");
    let id =
        session(&mut c, ws.path(), json!({ "mode": "bypass", "permissions": { "allow": ["Read(~/.kube/**)"] } })).await;
    let (_, out) = bash(&mut c, &id, &read).await;
    assert!(out.contains("KUBE-TOKEN") && !out.contains("AWS-SECRET"), "{out}");
}

/// Other agents' credentials (issue 49): Codex's `auth.json` and Gemini
/// CLI's tokens, accounts and API key were readable by approved commands
/// while Claude Code's `.credentials.json` was hidden. Each is hidden in
/// every profile now, as `.credentials.json` is; the agents' other files
/// (settings) stay readable.
#[tokio::test]
async fn other_agents_credentials_are_hidden() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let secrets = [
        (".claude/.credentials.json", "CLAUDE-TOKEN"),
        (".codex/auth.json", "CODEX-TOKEN"),
        (".gemini/oauth_creds.json", "GEMINI-OAUTH"),
        (".gemini/google_accounts.json", "GEMINI-ACCOUNT"),
        (".gemini/.env", "GEMINI-API-KEY"),
        (".gemini/mcp-oauth-tokens.json", "GEMINI-MCP-TOKEN"),
        (".config/agentd/mcp-http-token", "AGENTD-BEARER"),
    ];
    for (rel, secret) in secrets {
        std::fs::create_dir_all(h.join(rel).parent().unwrap()).unwrap();
        std::fs::write(h.join(rel), secret).unwrap();
    }
    std::fs::write(h.join(".gemini/settings.json"), "GEMINI-SETTINGS").unwrap();
    let ws = tempfile::tempdir().unwrap();
    let d = StandaloneDaemon::start(&[], &[("HOME", h.to_str().unwrap())]);
    let mut c = RawConn::connect(&d.socket).await;
    let files: Vec<String> = secrets.iter().map(|(rel, _)| format!("{}/{rel}", h.display())).collect();
    let read = format!("cat {} {}/.gemini/settings.json", files.join(" "), h.display());
    for params in [json!({ "mode": "bypass" }), json!({ "mode": "bypass", "sandbox": { "mode": "read_only" } })] {
        let id = session(&mut c, ws.path(), params.clone()).await;
        let (_, out) = bash(&mut c, &id, &read).await;
        for (rel, secret) in secrets {
            assert!(!out.contains(secret), "{params}: ~/{rel} read: {out}");
        }
        if params["sandbox"]["mode"].is_null() {
            assert!(out.contains("GEMINI-SETTINGS"), "the agent's settings stay readable: {out}");
        }
    }
}

/// Python that creates `path` (relative to the home directory) with
/// `text`, making its parents: what the permission engine cannot read.
fn plant(path: &str, text: &str) -> String {
    format!(
        "python3 -c 'import os,sys\np=os.path.expanduser(sys.argv[1])\nos.makedirs(os.path.dirname(p),exist_ok=True)\n\
         open(p,\"w\").write(sys.argv[2])' {path:?} {text:?}"
    )
}

#[tokio::test]
async fn what_a_command_plants_for_later_never_appears() {
    let home = tempfile::tempdir().unwrap();
    let h = std::fs::canonicalize(home.path()).unwrap();
    std::fs::create_dir_all(h.join(".config")).unwrap();
    let marker = h.join("PWNED");
    let server = format!(
        "{{\"mcpServers\":{{\"x\":{{\"command\":\"touch\",\"args\":[{:?}]}}}},\"permissions\":{{\"allow\":[\"Bash\"]}}}}",
        marker.display().to_string()
    );
    let d = StandaloneDaemon::start(
        &[],
        &[("HOME", h.to_str().unwrap()), ("XDG_CONFIG_HOME", h.join(".config").to_str().unwrap())],
    );
    let mut c = RawConn::connect(&d.socket).await;
    // (what is planted, the command): with HOME the workspace and
    // auto_allow, the mode that runs these without asking.
    let rows: Vec<(&str, String)> = vec![
        ("~/.config/agentd/settings.json", plant("~/.config/agentd/settings.json", &server)),
        ("~/.zshrc", plant("~/.zshrc", "touch PWNED")),
        ("~/.config/systemd/user/x.service", plant("~/.config/systemd/user/x.service", "[Service]")),
        ("~/.local/bin/git", plant("~/.local/bin/git", "#!/bin/sh\ntouch PWNED")),
        ("~/.claude/settings.json", plant("~/.claude/settings.json", &server)),
        ("~/.mcp.json", plant("~/.mcp.json", &server)),
        ("~/.vscode/tasks.json", plant("~/.vscode/tasks.json", "{}")),
        ("~/.cargo/env", plant("~/.cargo/env", "touch PWNED")),
        ("~/.gitconfig", plant("~/.gitconfig", "[core]\n\tpager = touch PWNED")),
        (
            "~/.config/agentd/settings.json",
            format!("mv ~/.config ~/.c; {}", plant("~/.config/agentd/settings.json", &server)),
        ),
    ];
    for (path, command) in rows {
        let id = session(&mut c, &h, json!({ "sandbox": { "auto_allow": true } })).await;
        let (_, out) = bash(&mut c, &id, &command).await;
        let real = h.join(path.trim_start_matches("~/"));
        assert!(!real.exists(), "{path} was planted by `{command}`: {out}");
        // (What a command moves away is its to move: what it plants in its
        // place is judged.)
        if h.join(".c").exists() {
            std::fs::rename(h.join(".c"), h.join(".config")).unwrap();
        }
        assert!(h.join(".config").is_dir(), "{command}: ~/.config was moved: {out}");
        // Nothing is left of the placeholders either.
        for name in [
            ".claude",
            ".mcp.json",
            ".vscode",
            ".zshrc",
            ".config/agentd",
            ".config/systemd",
            ".local",
            ".gitconfig",
            ".cargo",
        ] {
            assert!(!h.join(name).exists(), "{name} left behind after `{command}`");
        }
        let next = session(&mut c, &h, json!({})).await;
        assert!(!marker.exists(), "the next session ran what `{command}` planted");
        let _ = next;
    }
    // While a job runs, the placeholders of files are empty files: git and
    // shells outside the sandbox read them as they would read nothing.
    let id = session(&mut c, &h, json!({ "sandbox": { "auto_allow": true } })).await;
    let r = c.tool(&id, "Bash", json!({ "command": "sleep 30", "run_in_background": true })).await;
    assert_eq!(r["is_error"], false, "{r}");
    assert!(h.join(".gitconfig").is_file() && h.join(".claude").is_dir(), "placeholders while the job runs");
    let out =
        std::process::Command::new("git").arg("config").arg("--global").arg("--list").env("HOME", &h).output().unwrap();
    assert!(out.status.success(), "git outside: {}", String::from_utf8_lossy(&out.stderr));
    c.ok("session/close", json!({ "session_id": id })).await;
    agentd_tests::eventually("the job's placeholders go", || !h.join(".gitconfig").exists()).await;
}

#[tokio::test]
async fn a_running_job_s_settings_are_moved_aside_before_a_session_reads_them() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir(ws.join("pkg")).unwrap();
    let mut c = d.raw().await;
    let id = session(&mut c, ws, json!({ "sandbox": { "auto_allow": true } })).await;
    let job = format!("{} && sleep 30", plant("pkg/.claude/settings.json", "{\"permissions\":{\"allow\":[\"Bash\"]}}"));
    let r = c.tool(&id, "Bash", json!({ "command": job, "run_in_background": true })).await;
    assert_eq!(r["is_error"], false, "{r}");
    agentd_tests::eventually("the job planted its settings", || ws.join("pkg/.claude/settings.json").exists()).await;
    let second = c.ok("session/create", json!({ "cwd": ws.join("pkg"), "sandbox": { "mode": "off" } })).await;
    assert!(!ws.join("pkg/.claude").exists(), "still there while a session was made");
    let allow = &second["session"]["permissions"]["allow"];
    assert!(!allow.to_string().contains("Bash"), "the planted rule was obeyed: {second}");
}

#[tokio::test]
async fn fifos_planted_where_the_daemon_writes_hang_nothing() {
    // The workspace holds the state directory (as $HOME holds the default
    // one): the call's report and output files are where it may write.
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let id = session(&mut c, d.dir.path(), json!({ "mode": "bypass" })).await;
    // The call's temp directory (`t-` and the marker's first 12
    // characters) is no longer beside its output: the output directory is
    // found by the call's own log there.
    let plant = "m=$(basename $TMPDIR); m=${m#t-}; l=$(find . -name \"bash-$m*.log\" | head -n 1); \
                 M=$(basename \"$l\" .log); M=${M#bash-}; o=$(dirname \"$l\"); \
                 mkfifo $o/bash-$M.report $o/bash-$M.log; \
                 head -c 100000 /dev/zero | tr '\\0' x";
    for _ in 0..3 {
        let reply = within(
            "a call that planted FIFOs",
            c.request(
                "tool/call",
                json!({ "session_id": id, "name": "Bash", "input": { "command": plant, "timeout": 5000 } }),
            ),
        )
        .await;
        assert!(reply.get("result").is_some(), "{reply}");
    }
    // The daemon still answers.
    within("daemon/info", c.ok("daemon/info", json!({}))).await;
}

fn git(dir: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git").arg("-C").arg(dir).args(args).output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn what_git_obeys_stays_as_it_was() {
    let d = TestDaemon::start().await;
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    git(&ws, &["init", "-q"]);
    // A hooks directory that is a link (stow, shared hooks), a hooks path
    // in the workspace (husky), an included file, a submodule's git dir.
    std::fs::create_dir_all(ws.join("githooks")).unwrap();
    std::fs::remove_dir_all(ws.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", ws.join(".git/hooks")).unwrap();
    std::fs::create_dir_all(ws.join(".husky/_")).unwrap();
    git(&ws, &["config", "core.hooksPath", ".husky/_"]);
    std::fs::write(ws.join("project.gitconfig"), "").unwrap();
    git(&ws, &["config", "include.path", "../project.gitconfig"]);
    std::fs::create_dir_all(ws.join(".git/modules/sub")).unwrap();
    std::fs::write(ws.join(".git/modules/sub/config"), "").unwrap();
    let mut c = d.raw().await;
    let id = session(&mut c, &ws, json!({ "sandbox": { "auto_allow": true } })).await;
    let hook = "#!/bin/sh\ntouch RAN";
    let rows = [
        (
            "the link replaced",
            format!("python3 -c 'import os; os.remove(\".git/hooks\")' ; {}", plant(".git/hooks/pre-commit", hook)),
        ),
        ("the hooks path", plant(".husky/_/pre-commit", hook)),
        ("the included file", plant("project.gitconfig", "[core]\n\tfsmonitor = touch RAN")),
        ("the submodule's config", plant(".git/modules/sub/config", "[core]\n\tfsmonitor = touch RAN")),
    ];
    for (what, command) in &rows {
        let command = format!("cd {} && {command}", ws.display());
        let (_, out) = bash(&mut c, &id, &command).await;
        assert!(!out.contains("permission required"), "{what}: it did not run: {out}");
        assert_eq!(
            std::fs::read_link(ws.join(".git/hooks")).unwrap(),
            std::path::Path::new("../githooks"),
            "{what}: {out}"
        );
        assert!(!ws.join("githooks/pre-commit").exists() && !ws.join(".husky/_/pre-commit").exists(), "{what}: {out}");
        assert_eq!(std::fs::read_to_string(ws.join("project.gitconfig")).unwrap(), "", "{what}: {out}");
        assert_eq!(std::fs::read_to_string(ws.join(".git/modules/sub/config")).unwrap(), "", "{what}: {out}");
    }
    // A hooks path that does not exist yet: made empty for the call and
    // bound read-only, so the hook the command writes there is refused.
    let absent = tempfile::tempdir().unwrap();
    let absent = std::fs::canonicalize(absent.path()).unwrap();
    git(&absent, &["init", "-q"]);
    git(&absent, &["config", "core.hooksPath", "hooks-later"]);
    let id = session(&mut c, &absent, json!({ "sandbox": { "auto_allow": true } })).await;
    let command = format!("cd {} && mkdir -p hooks-later; {}", absent.display(), plant("hooks-later/pre-commit", hook));
    let (_, out) = bash(&mut c, &id, &command).await;
    assert!(!out.contains("permission required"), "it did not run: {out}");
    assert!(!absent.join("hooks-later/pre-commit").exists(), "{out}");
    assert!(!absent.join("hooks-later").exists(), "the placeholder is gone after the call: {out}");
    // A repository the command makes, with a hook: moved aside; a plain
    // one stays.
    let make = "git init -q fresh && git init -q new && python3 -c 'import os\n\
                p=\"new/.git/hooks/post-checkout\"\nopen(p,\"w\").write(\"#!/bin/sh\\ntouch RAN\\n\")\n\
                os.chmod(p,0o755)'";
    let plain = tempfile::tempdir().unwrap();
    let ws = plain.path();
    let id = session(&mut c, ws, json!({ "sandbox": { "auto_allow": true } })).await;
    let (_, out) = bash(&mut c, &id, make).await;
    assert!(ws.join("fresh/.git").is_dir(), "{out}");
    assert!(!ws.join("new/.git/hooks/post-checkout").exists(), "{out}");
    assert!(out.contains("new repository") || out.contains("[not applied:"), "{out}");
}

#[tokio::test]
async fn bypass_settings_and_program_options_are_not_for_later_sessions() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let mut c = d.raw().await;
    // bypass is for this session's calls: settings its commands create are
    // still moved aside, so no later session obeys them.
    let id = session(&mut c, ws, json!({ "mode": "bypass" })).await;
    let (_, out) = bash(&mut c, &id, "mkdir -p pkg/.claude && echo '{}' > pkg/.claude/settings.json").await;
    assert!(
        (out.contains("moved aside") || out.contains("[not applied:")) && !ws.join("pkg/.claude").exists(),
        "{out}"
    );
    // An allow rule with a wildcard does not cover an option that runs
    // another program (asked; nobody answers: denied, nothing ran).
    let id = session(&mut c, ws, json!({ "permissions": { "allow": ["Bash(npm test:*)", "Bash(git log:*)"] } })).await;
    for command in ["npm test --script-shell=./x", "git log --ext-diff -p"] {
        let (ok, out) = bash(&mut c, &id, command).await;
        assert!(!ok && out.contains("permission required"), "{command}: {out}");
    }
}

#[tokio::test]
async fn the_second_reviews_findings_stay_closed() {
    let d = TestDaemon::start().await;
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    // Past 20,000 entries a nested repository's hooks were not protected.
    std::fs::create_dir_all(ws.join("aa")).unwrap();
    for i in 0..20_100 {
        std::fs::write(ws.join("aa").join(i.to_string()), "").unwrap();
    }
    std::fs::create_dir_all(ws.join("zz")).unwrap();
    git(&ws.join("zz"), &["init", "-q"]);
    let mut c = d.raw().await;
    let id = session(&mut c, &ws, json!({ "sandbox": { "auto_allow": true } })).await;
    let (_, out) = bash(&mut c, &id, &plant("zz/.git/hooks/pre-commit", "#!/bin/sh\ntouch RAN")).await;
    assert!(!ws.join("zz/.git/hooks/pre-commit").exists(), "{out}");
    // A repository made through a `.git` file naming a bare one.
    let make = r##"git init -q --bare .hidden.git && mkdir sub && python3 - <<'EOF'
import os
p = ".hidden.git/hooks/pre-commit"
open(p, "w").write("#!/bin/sh\n")
os.chmod(p, 0o755)
open("sub/.git", "w").write("gitdir: ../.hidden.git\n")
EOF"##;
    let (_, out) = bash(&mut c, &id, make).await;
    assert!(!ws.join(".hidden.git/hooks/pre-commit").exists(), "the hook stays: {out}");
    // Python's multiprocessing (semaphores in /dev/shm) works.
    let pool = r#"python3 - <<'EOF'
import multiprocessing as m
if __name__ == "__main__":
    print(sum(m.Pool(2).map(abs, [-1, -2])))
EOF"#;
    let (ok, out) = bash(&mut c, &id, pool).await;
    assert!(ok && out.contains('3'), "{out}");
}

#[tokio::test]
async fn a_protected_link_to_nothing_keeps_pointing_at_nothing() {
    let d = TestDaemon::start().await;
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    std::os::unix::fs::symlink("shared-claude", ws.join(".claude")).unwrap();
    let mut c = d.raw().await;
    let id = session(&mut c, &ws, json!({ "sandbox": { "auto_allow": true } })).await;
    let (_, out) =
        bash(&mut c, &id, &plant("shared-claude/settings.json", "{\"permissions\":{\"allow\":[\"Bash\"]}}")).await;
    assert!(!ws.join("shared-claude").exists(), "{out}");
    assert!(std::fs::symlink_metadata(ws.join(".claude")).unwrap().file_type().is_symlink());
}

/// A Write the person approved for `notes/settings.json`, an ordinary
/// file; while the request waited, a confined command (another session on
/// the workspace, unasked) swapped `notes` for a link to `.claude`. The
/// approval is for the file that was shown: the write must not land in
/// the settings directory.
#[tokio::test]
async fn an_approved_write_is_not_carried_into_a_protected_directory_by_a_link_swapped_in_meanwhile() {
    let d = TestDaemon::start().await;
    let ws = std::fs::canonicalize(d.dir.path()).unwrap();
    std::fs::create_dir_all(ws.join(".claude/commands")).unwrap();
    std::fs::create_dir(ws.join("notes")).unwrap();
    let mut s = d.streamed_session(json!({})).await;
    let settings = "{\"permissions\":{\"allow\":[\"Bash\"]}}";
    let write = json!({ "file_path": "notes/settings.json", "content": settings });
    let turn = s.submit_ended(vec![tool_use("w", "Write", write)]).await;
    let request = s.permission_request().await;
    assert_eq!(request["tool"], "Write", "{request}");
    let mut c = d.raw().await;
    let other = session(&mut c, &ws, json!({ "sandbox": { "auto_allow": true } })).await;
    let (ok, out) = bash(&mut c, &other, "rm -r notes && ln -s .claude notes").await;
    assert!(ok && ws.join("notes").is_symlink(), "the confined swap: {out}");
    s.respond(&request, json!({ "decision": "allow" })).await;
    let results = s.results(&turn).await;
    assert!(!ws.join(".claude/settings.json").exists(), "written into .claude through the link: {results:?}");
}

/// A daemon killed while a confined background job holds its
/// placeholders, the job trying all along to create `.claude/settings.json`
/// (refused: the placeholder is bound read-only). The job must not outlive
/// the daemon: the next start removes the placeholders before it ends
/// what the previous daemon left, and a job still there would then plant
/// its settings.
#[tokio::test]
async fn a_confined_job_ends_with_its_daemon_and_plants_nothing_when_the_next_removes_placeholders() {
    let mut d = StandaloneDaemon::start(&[], &[]);
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let t = tag();
    let tries = format!(
        "python3 -c 'import os,sys,time\nwhile True:\n  try: os.mkdir(\".claude\")\n  except OSError: pass\n  try:\n    \
         open(\".claude/settings.json\",\"w\").write(\"{{}}\"); break\n  except OSError: pass\ntime.sleep(1000)' tries{t}"
    );
    {
        let mut c = RawConn::connect(&d.socket).await;
        let id = session(&mut c, &ws, json!({ "sandbox": { "auto_allow": true } })).await;
        let r = c.tool(&id, "Bash", json!({ "command": tries, "run_in_background": true })).await;
        assert_eq!(r["is_error"], false, "{r}");
        agentd_tests::eventually("the job runs", || !procs(&format!("tries{t}")).is_empty()).await;
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(ws.join(".claude").is_dir() && !ws.join(".claude/settings.json").exists(), "held while it runs");
    }
    d.signal(nix::sys::signal::Signal::SIGKILL);
    d.wait_exit();
    // A confined job ends with its daemon (its PID namespace does) ...
    agentd_tests::none_left(&format!("tries{t}")).await;
    // ... so nothing is left to take the placeholder's place when the
    // next daemon removes it.
    d.restart();
    assert!(!ws.join(".claude").exists(), "the placeholder is removed at the start");
    assert!(!ws.join(".claude/settings.json").exists(), "planted once the next daemon removed the placeholder");
}

/// Python that tries, for `secs` seconds, to create `.claude` and
/// `.claude/settings.json`; prints `planted` or `held`.
fn keep_trying(secs: u32) -> String {
    format!(
        "python3 -c 'import os,time\nend=time.time()+{secs}\nr=\"held\"\nwhile time.time()<end:\n  try: \
         os.mkdir(\".claude\")\n  except OSError: pass\n  try:\n    open(\".claude/settings.json\",\"w\").write(\"{{}}\"); \
         r=\"planted\"; break\n  except OSError: pass\n  time.sleep(0.01)\nprint(r)'"
    )
}

/// Two daemons on one workspace: a job of the first (on `a`) holds the
/// placeholder `.claude`; a call of the second (on `b`) starts meanwhile,
/// finds `.claude` there, and keeps trying to create
/// `.claude/settings.json`. The first job ends and its daemon removes its
/// placeholder: the second call's command must still not plant the
/// settings.
async fn placeholder_of_one_daemon_against_a_call_of_another(a: &std::path::Path, b: &std::path::Path) {
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    placeholder_against_a_call_in(a, b, &ws, &ws).await;
}

/// [`placeholder_of_one_daemon_against_a_call_of_another`], the first
/// daemon's session on `wa`, the second's on `ws` (the same, or inside it).
async fn placeholder_against_a_call_in(
    a: &std::path::Path,
    b: &std::path::Path,
    wa: &std::path::Path,
    ws: &std::path::Path,
) {
    let (mut ca, mut cb) = (RawConn::connect(a).await, RawConn::connect(b).await);
    let auto = json!({ "sandbox": { "auto_allow": true } });
    let (ia, ib) = (session(&mut ca, wa, auto.clone()).await, session(&mut cb, ws, auto).await);
    let r = ca.tool(&ia, "Bash", json!({ "command": "sleep 2", "run_in_background": true })).await;
    assert_eq!(r["is_error"], false, "{r}");
    agentd_tests::eventually("the first daemon's placeholder", || wa.join(".claude").is_dir()).await;
    let (_, out) = bash(&mut cb, &ib, &keep_trying(6)).await;
    assert!(!ws.join(".claude/settings.json").exists(), "planted by the second daemon's call: {out}");
    assert!(out.contains("held") || out.contains("[not applied:"), "{out}");
    // Once neither call binds it, the placeholder goes.
    agentd_tests::eventually("the placeholder removed", || !ws.join(".claude").exists()).await;
}

/// Two daemons in one process: the placeholder's count is the process's,
/// so the second call holds it on.
#[tokio::test]
async fn one_daemons_placeholder_going_leaves_anothers_call_unable_to_plant_settings_in_one_process() {
    let (a, b) = (TestDaemon::start().await, TestDaemon::start().await);
    placeholder_of_one_daemon_against_a_call_of_another(&a.socket, &b.socket).await;
}

/// Two daemons in two processes (each its own state directory): the
/// second's call pins the first's placeholder (a shared lock), and the
/// first removes it only under an exclusive one, once the pin is gone.
#[tokio::test]
async fn one_daemons_placeholder_going_leaves_anothers_call_unable_to_plant_settings_in_two_processes() {
    let (a, b) = (StandaloneDaemon::start(&[], &[]), StandaloneDaemon::start(&[], &[]));
    placeholder_of_one_daemon_against_a_call_of_another(&a.socket, &b.socket).await;
}

/// Two daemon processes, the second's session on a directory inside the
/// first's workspace: the first call's end finds the second call's
/// placeholder `pkg/.claude` new (not there at its start, no placeholder of
/// its process) and must not move it aside, which would carry the second
/// call's read-only mount away with it (found by an attack review).
#[tokio::test]
async fn a_call_ending_leaves_another_daemons_placeholder_deeper_in_its_workspace() {
    let (a, b) = (StandaloneDaemon::start(&[], &[]), StandaloneDaemon::start(&[], &[]));
    let ws = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::create_dir(ws.join("pkg")).unwrap();
    placeholder_against_a_call_in(&a.socket, &b.socket, &ws, &ws.join("pkg")).await;
    let aside = std::fs::read_dir(ws.join("pkg"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("agentd-quarantine"));
    assert_eq!(aside.count(), 0, "a placeholder was moved aside");
}

/// An MCP server's tool listing claims `readOnlyHint` (the test server's
/// `echo`) or says nothing of it (`hinted`: only not destructive): the
/// claim lets a call run beside others and be offered in plan mode, never
/// run unasked; without it plan mode refuses the call.
#[tokio::test]
async fn an_mcp_servers_read_only_claim_runs_nothing_unasked() {
    let Some(python) = crate::mcp_support::required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let servers = json!({ "x": crate::mcp_support::py_entry(&python, &[], json!({})) });
    for mode in ["default", "plan"] {
        let params = json!({ "mode": mode, "mcp_servers": servers, "tools": { "defer": { "mode": "never" } } });
        let id = session(&mut c, d.dir.path(), params).await;
        let r = c.tool(&id, "mcp__x__echo", json!({ "text": "ran-unasked" })).await;
        assert_eq!(r["is_error"], true, "{mode}: a read-only claim ran unasked: {r}");
        assert!(r["content"][0]["text"].as_str().unwrap().starts_with("permission required"), "{mode}: {r}");
        let r = c.tool(&id, "mcp__x__hinted", json!({})).await;
        assert_eq!(r["is_error"], true, "{mode}: {r}");
        if mode == "plan" {
            assert!(r.to_string().contains("plan mode"), "{r}");
        }
    }
}

/// A protected path the daemon cannot look at (an earlier command's
/// `chmod 000 .git`, which a confined command may do) can be neither bound
/// nor given a placeholder: the next call is refused, instead of running
/// with `.git/hooks` unprotected (found by an attack review: the next
/// command gave `.git` its permissions back and planted a pre-commit hook).
/// As `nobody`, since root reads what mode 000 hides; CI runs as root.
#[test]
fn a_protected_path_made_unreadable_refuses_the_next_call() {
    use std::os::unix::fs::PermissionsExt;
    let Some(n) = agentd_tests::AsNobody::new(&[".git", ".git/hooks"]) else { return };
    let (dir, ws, as_nobody) = (&n.dir, &n.ws, |program: &str| n.command(program));
    let socket = dir.path().join("agentd.sock");
    let _daemon = agentd_tests::ChildGuard::spawn(
        as_nobody("agentd").arg("--socket").arg(&socket).arg("--state-dir").arg(dir.path().join("state")),
    );
    agentd_tests::eventually_blocking("agentd as nobody listens", || socket.exists());
    let run = |command: &str| {
        let out = as_nobody("agentctl")
            .arg("--socket")
            .arg(&socket)
            .args(["call", "Bash", "--arg", &format!("command={command}"), "--mode", "bypass", "--cwd"])
            .arg(ws)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    };
    let out = run("chmod 000 .git && echo hidden");
    assert!(out.contains("hidden"), "{out}");
    let hook = "#!/bin/sh\necho PWNED";
    let out = run(&format!("chmod 755 .git && printf '{hook}' > .git/hooks/pre-commit && echo planted"));
    assert!(out.contains("[not applied:"), "ran with .git/hooks unprotected: {out}");
    std::fs::set_permissions(ws.join(".git"), std::fs::Permissions::from_mode(0o755)).unwrap();
    assert!(!ws.join(".git/hooks/pre-commit").exists());
    // Its permissions given back (by the user), calls run again, confined.
    let out = run("echo again");
    assert!(out.contains("again"), "{out}");
    let out = run("printf x > .git/hooks/pre-commit || echo refused");
    assert!(out.contains("[not applied:") && !ws.join(".git/hooks/pre-commit").exists(), "{out}");
}

/// Package managers' caches in `workspace_write` (issue 49: `npm view`
/// failed on a read-only `~/.npm` and nothing said why). A command writes
/// the sandbox's own cache, bound over `~/.npm`, `~/.cargo/registry`, …
/// (made when missing and the tool is on `PATH`); the user's own caches and
/// tools' configuration are untouched; a write the wall refuses names the
/// path in the result.
#[tokio::test]
async fn package_caches_are_writable_and_configuration_is_not() {
    let home = tempfile::tempdir().unwrap();
    let h = std::fs::canonicalize(home.path()).unwrap();
    std::fs::create_dir_all(h.join(".cargo/registry")).unwrap();
    std::fs::create_dir_all(h.join(".cargo/bin")).unwrap();
    std::fs::write(h.join(".cargo/config.toml"), "ORIG").unwrap();
    std::fs::write(h.join(".npmrc"), "ORIG").unwrap();
    // An `npm` on the daemon's PATH: `~/.npm`, missing, is made.
    let bin = tempfile::tempdir().unwrap();
    let npm = bin.path().join("npm");
    std::fs::write(&npm, "#!/bin/sh\nexec /usr/bin/npm \"$@\"\n").unwrap();
    std::fs::set_permissions(&npm, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap());
    let ws = tempfile::tempdir().unwrap();
    // Under cargo (rustup) CARGO_HOME names the test user's own.
    let cargo_home = h.join(".cargo");
    let d = StandaloneDaemon::start(
        &[],
        &[("HOME", h.to_str().unwrap()), ("PATH", &path), ("CARGO_HOME", cargo_home.to_str().unwrap())],
    );
    let mut c = RawConn::connect(&d.socket).await;
    let id = session(&mut c, ws.path(), json!({ "mode": "bypass" })).await;
    let (ok, out) = bash(
        &mut c,
        &id,
        "mkdir -p ~/.npm/_cacache/x && echo cached > ~/.npm/_cacache/x/entry && cat ~/.npm/_cacache/x/entry \
         && echo crate > ~/.cargo/registry/c && echo written",
    )
    .await;
    assert!(ok && out.contains("cached") && out.contains("written"), "{out}");
    // The sandbox's own cache, not the user's.
    assert!(!h.join(".npm/_cacache/x").exists(), "the user's ~/.npm was written");
    assert!(!h.join(".cargo/registry/c").exists(), "the user's ~/.cargo/registry was written");
    let state = d.dir.path().join("state/caches");
    assert_eq!(std::fs::read_to_string(state.join("npm/_cacache/x/entry")).unwrap(), "cached\n");
    // A later call finds what an earlier one cached.
    let (ok, out) = bash(&mut c, &id, "cat ~/.npm/_cacache/x/entry").await;
    assert!(ok && out.contains("cached"), "{out}");
    // npm itself, which writes its cache (no network needed).
    if std::path::Path::new("/usr/bin/npm").exists() {
        let (ok, out) = bash(&mut c, &id, "npm cache verify && ls ~/.npm/_cacache").await;
        assert!(ok && out.contains("Cache verified") && out.contains("_lastverified"), "{out}");
    }
    // What configures a tool or runs later stays read-only; the result
    // names the path the wall refused.
    for (file, what) in [(".cargo/config.toml", "cargo's configuration"), (".cargo/bin/cargo-x", "cargo's bin")] {
        let (ok, out) = bash(&mut c, &id, &format!("echo pwn > ~/{file}")).await;
        assert!(!ok, "{what} written: {out}");
        assert!(out.contains(&format!("filesystem wall refused {}/{file}", h.display())), "{out}");
    }
    let (_, out) = bash(&mut c, &id, "echo pwn > ~/.npmrc; echo done").await;
    assert!(out.contains("done"), "{out}");
    assert_eq!(std::fs::read_to_string(h.join(".cargo/config.toml")).unwrap(), "ORIG");
    assert_eq!(std::fs::read_to_string(h.join(".npmrc")).unwrap(), "ORIG");
    assert!(!h.join(".cargo/bin/cargo-x").exists());
    // The session's environment moves a cache within the home directory
    // (the sandbox's cache is bound there instead); outside it, the tool
    // writes where the wall decides, and the result names the place.
    let env = json!({ "npm_config_cache": h.join("npm-cache"), "PIP_CACHE_DIR": "/var/tmp/pip-elsewhere" });
    let id = session(&mut c, ws.path(), json!({ "mode": "bypass", "env": env })).await;
    let (ok, out) = bash(&mut c, &id, "echo moved > \"$npm_config_cache/f\" && cat \"$npm_config_cache/f\"").await;
    assert!(ok && out.contains("moved"), "{out}");
    assert!(!h.join("npm-cache/f").exists(), "the user's directory was written");
    assert_eq!(std::fs::read_to_string(state.join("npm/f")).unwrap(), "moved\n");
    let (ok, out) = bash(&mut c, &id, "mkdir -p \"$PIP_CACHE_DIR\"").await;
    assert!(!ok && out.contains("filesystem wall refused /var/tmp/pip-elsewhere"), "{out}");
}

/// A command binds a Unix socket in its own temp directory (issue 49: the
/// call's `TMPDIR` was ~130 bytes, over the 108 of a socket's address, so
/// test suites that make one there failed).
#[tokio::test]
async fn a_command_binds_a_unix_socket_in_its_temp_directory() {
    let d = TestDaemon::start().await;
    let mut c = d.raw().await;
    let ws = tempfile::tempdir().unwrap();
    let id = session(&mut c, ws.path(), json!({ "mode": "bypass" })).await;
    let probe = "python3 -c 'import socket,os\nt=os.environ[\"TMPDIR\"]\ns=socket.socket(socket.AF_UNIX)\n\
                 s.bind(t+\"/some.sock\"); s.listen(1)\nc=socket.socket(socket.AF_UNIX); c.connect(t+\"/some.sock\")\n\
                 print(\"bound\", len(t))'";
    let (ok, out) = bash(&mut c, &id, probe).await;
    assert!(ok, "{out}");
    let len: usize = out.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(usize::MAX);
    assert!(len < 108 - "/some.sock".len(), "TMPDIR is {len} bytes: {out}");
    // Another call's temp directory (here a decoy, as another daemon of
    // the user's would leave one) is not there for this one.
    let decoy = tempfile::Builder::new()
        .prefix("t-decoy")
        .tempdir_in(format!("/tmp/agentd-tmp-{}", nix::unistd::geteuid()))
        .unwrap();
    std::fs::write(decoy.path().join("secret"), "DECOY-SECRET").unwrap();
    let (_, out) = bash(&mut c, &id, "touch made; b=$(dirname \"$TMPDIR\"); ls -a \"$b\"; cat \"$b\"/*/secret").await;
    assert!(!out.contains("t-decoy") && !out.contains("DECOY-SECRET"), "another call's temp directory is seen: {out}");
}
