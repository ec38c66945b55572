//! The end-to-end test harness: start agentd on a temp socket with a temp
//! state directory, talk to it, and drop it cleanly.
//!
//! [`TestDaemon`] runs the daemon in-process (fast, and its state can be
//! inspected); [`StandaloneDaemon`] runs the real `agentd` binary, for
//! signals, socket activation, descriptor counts and the command line.
//! Nothing here sleeps to wait: [`eventually`] polls a condition against a
//! deadline, and every await in the tests is wrapped in [`within`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd::server::DaemonState;
use agentd::{Config, Daemon, SocketConfig};
use agentd_client::Client;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

/// How long any single step of a test may take before it fails. Generous:
/// tests run on a loaded 2-core machine; a hang still fails, just not at once.
pub const STEP: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test with `what` if it takes longer than [`STEP`].
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    match tokio::time::timeout(STEP, fut).await {
        Ok(v) => v,
        Err(_) => panic!("timed out after {STEP:?}: {what}"),
    }
}

/// Polls `cond` until it holds, failing with `what` after [`STEP`].
pub async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached within {STEP:?}: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Like [`eventually`] for blocking code (no runtime needed).
pub fn eventually_blocking(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + STEP;
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached within {STEP:?}: {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Path of `agentd` or `agentctl` as this package builds them for the tests
/// (`e2e-agentd`, `e2e-agentctl`: the same `cli::main` as the real binaries,
/// built fresh by every `cargo test`), next to the test executable's `deps/`.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(Path::parent).unwrap();
    let path = dir.join(format!("e2e-{name}"));
    assert!(path.exists(), "{} is not built; run the tests with cargo test", path.display());
    path
}

/// A directory for running agentd's binaries as the user `nobody` (root
/// changes uid; CI runs as root): `dir` (mode 0755, nobody's) holds copies
/// of agentd, agentd-sandbox and agentctl (wherever the checkout lives,
/// nobody can run them; the helper is found beside the daemon) and the
/// workspace `dir/ws` with `ws_dirs` made in it (each listed, parents
/// first), all nobody's.
pub struct AsNobody {
    pub dir: tempfile::TempDir,
    pub ws: PathBuf,
}

/// The uid and gid of `nobody`.
pub const NOBODY: u32 = 65534;

impl AsNobody {
    /// The directory, or `None` (said on stderr) when not run as root.
    pub fn new(ws_dirs: &[&str]) -> Option<AsNobody> {
        use std::os::unix::fs::PermissionsExt;
        if !nix::unistd::geteuid().is_root() {
            eprintln!("not root: cannot run the daemon as another user");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let made = [dir.path().to_path_buf(), ws.clone()].into_iter().chain(ws_dirs.iter().map(|d| ws.join(d)));
        for path in made {
            std::fs::create_dir_all(&path).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            nix::unistd::chown(&path, Some(NOBODY.into()), Some(NOBODY.into())).unwrap();
        }
        for name in ["agentd", "agentd-sandbox", "agentctl"] {
            std::fs::copy(bin_path(name), dir.path().join(name)).unwrap();
            std::fs::set_permissions(dir.path().join(name), std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Some(AsNobody { dir, ws })
    }

    /// `program` (one of the copies) to run as nobody, its home `dir`.
    pub fn command(&self, program: &str) -> Command {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new(self.dir.path().join(program));
        cmd.uid(NOBODY).gid(NOBODY).env("HOME", self.dir.path()).env_remove("AGENTD_SOCKET");
        cmd
    }
}

/// `agentd --socket <socket> --state-dir <state_dir>` (the binary
/// [`bin_path`] names), to add to and start. It obeys the workspaces'
/// project files without asking (`AGENTD_TRUST_PROJECT_FILES=1`): most
/// tests are about what those files do; `trust.rs` starts daemons with
/// `AGENTD_TRUST_PROJECT_FILES=0`, as a user's daemon runs.
pub fn agentd_command(socket: &Path, state_dir: &Path) -> Command {
    let mut cmd = Command::new(bin_path("agentd"));
    cmd.arg("--socket").arg(socket).arg("--state-dir").arg(state_dir).env("AGENTD_TRUST_PROJECT_FILES", "1");
    cmd
}

/// An agentd running in this process on a temp socket.
pub struct TestDaemon {
    /// Holds the socket and state directory.
    pub dir: tempfile::TempDir,
    /// The socket path.
    pub socket: PathBuf,
    /// The daemon's state, for inspection.
    pub state: Arc<DaemonState>,
    shutdown: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), agentd::DaemonError>>>,
}

impl TestDaemon {
    /// Starts a daemon with default settings.
    pub async fn start() -> TestDaemon {
        Self::start_with(|_| {}).await
    }

    /// Starts a daemon after `adjust` has changed its configuration.
    pub async fn start_with(adjust: impl FnOnce(&mut Config)) -> TestDaemon {
        watch_daemon_panics();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/agentd.sock");
        let mut config = Config::new(SocketConfig::Path(socket.clone()), dir.path().join("state"));
        config.shutdown_grace = Duration::from_secs(5);
        config.sandbox.helper = Some(bin_path("agentd-sandbox"));
        // The tests start clients (agentctl, python) as children of this
        // process, which is also the daemon's: only the tools' processes
        // are refused here.
        config.refuse_descendants = false;
        // As `agentd_command`: the workspaces' files are obeyed unasked.
        config.trust_project_files = true;
        adjust(&mut config);
        let daemon = Daemon::bind(config).expect("daemon binds");
        let state = daemon.state();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(daemon.serve(shutdown.clone()));
        TestDaemon { dir, socket, state, shutdown, task: Some(task) }
    }

    /// A typed client connected to this daemon.
    pub async fn client(&self) -> Client {
        within("connect client", Client::connect(&self.socket)).await.unwrap()
    }

    /// A line-level connection, for sending anything at all.
    pub async fn raw(&self) -> RawConn {
        RawConn::connect(&self.socket).await
    }

    /// Shuts the daemon down and waits for it.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            within("daemon shutdown", task).await.unwrap().unwrap();
        }
    }
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        self.shutdown.cancel();
        let panics = std::mem::take(&mut *DAEMON_PANICS.lock().unwrap_or_else(|e| e.into_inner()));
        if !std::thread::panicking() && !panics.is_empty() {
            panic!("the daemon panicked: {panics:#?}");
        }
    }
}

/// A raw NDJSON connection.
pub struct RawConn {
    reader: BufReader<OwnedReadHalf>,
    /// The write half, for tests that half-close or write odd bytes.
    pub writer: OwnedWriteHalf,
    next_id: u64,
}

impl RawConn {
    /// Connects to `socket`.
    pub async fn connect(socket: &Path) -> RawConn {
        let stream = within("connect", agentd_client::connect_socket(socket)).await.unwrap();
        let (r, w) = stream.into_split();
        RawConn { reader: BufReader::new(r), writer: w, next_id: 1 }
    }

    /// Sends `bytes` followed by a newline.
    pub async fn send_line(&mut self, bytes: impl AsRef<[u8]>) {
        let mut line = bytes.as_ref().to_vec();
        line.push(b'\n');
        within("send", self.writer.write_all(&line)).await.unwrap();
    }

    /// Reads one line and parses it; `None` at end of stream.
    pub async fn recv(&mut self) -> Option<Value> {
        let mut line = String::new();
        let n = within("receive a line", self.reader.read_line(&mut line)).await.unwrap();
        if n == 0 {
            return None;
        }
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("reply is not JSON ({e}): {line:?}")))
    }

    /// Reads one line as it came, without its newline.
    pub async fn recv_text(&mut self) -> String {
        let mut line = String::new();
        let n = within("receive a line", self.reader.read_line(&mut line)).await.unwrap();
        assert!(n > 0, "a reply, not end of stream");
        line.trim_end_matches('\n').to_owned()
    }

    /// Reads one line, failing at end of stream.
    pub async fn recv_some(&mut self) -> Value {
        self.recv().await.expect("a reply, not end of stream")
    }

    /// Sends a request and returns the whole reply object.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(line.to_string()).await;
        let reply = self.recv_some().await;
        assert_eq!(reply["id"], json!(id), "reply to another request: {reply}");
        reply
    }

    /// Sends a request that must succeed; returns its `result`.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let reply = self.request(method, params).await;
        assert!(reply.get("error").is_none(), "{method} failed: {reply}");
        reply["result"].clone()
    }

    /// `session/create` with `params`, which must succeed; returns the new
    /// session's id.
    pub async fn session(&mut self, params: Value) -> String {
        self.ok("session/create", params).await["session_id"].as_str().unwrap().to_owned()
    }

    /// `session/list`: the ids of the sessions listed.
    pub async fn session_ids(&mut self) -> Vec<String> {
        let list = self.ok("session/list", json!({})).await;
        list["sessions"].as_array().unwrap().iter().map(|s| s["session_id"].as_str().unwrap().to_owned()).collect()
    }

    /// `tool/call` of the tool `name` with `input` in `session_id`, which
    /// must succeed; returns its `result`.
    pub async fn tool(&mut self, session_id: &str, name: &str, input: Value) -> Value {
        self.ok("tool/call", json!({ "session_id": session_id, "name": name, "input": input })).await
    }
}

/// The real `agentd` binary in a child process.
pub struct StandaloneDaemon {
    /// The process.
    pub child: Child,
    /// Holds the socket and state directory.
    pub dir: tempfile::TempDir,
    /// The socket path.
    pub socket: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl StandaloneDaemon {
    /// Starts `agentd --socket <tmp> --state-dir <tmp>` plus `args`, with
    /// `env` added, and waits until its socket answers.
    pub fn start(args: &[&str], env: &[(&str, &str)]) -> StandaloneDaemon {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("run/agentd.sock");
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let child = Self::spawn(dir.path(), &socket, &args, &env);
        let mut daemon = StandaloneDaemon { child, dir, socket, args, env };
        daemon.wait_ready();
        daemon
    }

    fn spawn(dir: &Path, socket: &Path, args: &[String], env: &[(String, String)]) -> Child {
        let mut cmd = agentd_command(socket, &dir.join("state"));
        cmd.args(args).envs(env.iter().map(|(k, v)| (k, v))).env_remove("AGENTD_SOCKET");
        let log = std::fs::OpenOptions::new().create(true).append(true).open(dir.join("agentd.log")).unwrap();
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
        cmd.spawn().unwrap()
    }

    /// Starts the daemon again on the same socket and state directory
    /// (after the last one exited or was killed) and waits until it serves.
    pub fn restart(&mut self) {
        assert!(self.child.try_wait().unwrap().is_some(), "the previous daemon still runs");
        self.child = Self::spawn(self.dir.path(), &self.socket, &self.args, &self.env);
        self.wait_ready();
    }

    /// Waits until the socket accepts connections; fails at once, with the
    /// daemon's log, if it exits instead.
    pub fn wait_ready(&mut self) {
        let deadline = Instant::now() + STEP;
        while std::os::unix::net::UnixStream::connect(&self.socket).is_err() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("agentd exited ({status}) before it listened:\n{}", self.stderr());
            }
            assert!(Instant::now() < deadline, "agentd did not listen within {STEP:?}:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// The daemon's pid.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// Sends `signal` to the daemon.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid()), signal).unwrap();
    }

    /// Waits for the process to exit, failing after [`STEP`].
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut status = None;
        eventually_blocking("agentd exits", || {
            status = self.child.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }

    /// Everything the daemon wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("agentd.log")).unwrap_or_default()
    }

    /// Open file descriptors of the daemon, from `/proc/<pid>/fd`.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid())).unwrap().count()
    }
}

impl Drop for StandaloneDaemon {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // The daemon never panics (a task's panic is caught by tokio and
        // would pass unseen): its log says so, and the test fails.
        let log = self.stderr();
        if !std::thread::panicking()
            && let Some(at) = log.find("panicked at")
            && !log[at..].starts_with("panicked at daemon/src/tools/testing/")
        {
            panic!("the daemon panicked:\n{}", &log[log[..at].rfind('\n').map_or(0, |i| i + 1)..]);
        }
    }
}

/// Panics of daemon code in this process (an in-process [`TestDaemon`]'s
/// tasks), but the test tools' deliberate ones.
static DAEMON_PANICS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Records every panic whose location is the daemon's code.
fn watch_daemon_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let file = info.location().map(|l| l.file().to_owned()).unwrap_or_default();
            if file.contains("daemon/src/") && !file.contains("daemon/src/tools/testing/") {
                DAEMON_PANICS.lock().unwrap_or_else(|e| e.into_inner()).push(info.to_string());
            }
            previous(info);
        }));
    });
}

/// A child process killed (and reaped) when dropped, so a failing test
/// leaves no daemon behind.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    /// Spawns `cmd` with stdin and stdout closed.
    pub fn spawn(cmd: &mut Command) -> ChildGuard {
        ChildGuard(cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn().unwrap())
    }

    /// Waits for the process to exit, failing after [`STEP`].
    pub fn wait_exit(&mut self) -> ExitStatus {
        let mut status = None;
        eventually_blocking("child exits", || {
            status = self.0.try_wait().unwrap();
            status.is_some()
        });
        status.unwrap()
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Runs `agentctl` with `args` against `socket`; returns (exit code, stdout, stderr).
pub fn agentctl(socket: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin_path("agentctl"))
        .arg("--socket")
        .arg(socket)
        .args(args)
        .env_remove("AGENTD_SOCKET")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `turn/stream` subscription on a connection of its own.
pub struct EventStream {
    conn: RawConn,
    /// The subscription id the daemon gave.
    pub subscription: String,
}

impl EventStream {
    /// Subscribes to `session_id`'s events (after `after_seq` when given).
    /// `Err` holds the daemon's error reply.
    pub async fn open(socket: &Path, session_id: &str, after_seq: Option<u64>) -> Result<EventStream, Value> {
        let mut conn = RawConn::connect(socket).await;
        let mut params = json!({ "session_id": session_id });
        if let Some(seq) = after_seq {
            params["after_seq"] = json!(seq);
        }
        let reply = conn.request("turn/stream", params).await;
        if reply.get("error").is_some() {
            return Err(reply);
        }
        let subscription = reply["result"].as_str().expect("a string subscription id").to_owned();
        Ok(EventStream { conn, subscription })
    }

    /// The next event, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        let note = self.conn.recv().await?;
        assert_eq!(note["method"], "turn/event", "{note}");
        assert_eq!(note["params"]["subscription"], json!(self.subscription), "{note}");
        Some(note["params"]["result"].clone())
    }

    /// `turn/unstream`: true when the subscription was still active.
    pub async fn unsubscribe(&mut self) -> bool {
        let reply = self.conn.request("turn/unstream", json!([self.subscription])).await;
        reply["result"].as_bool().unwrap_or_else(|| panic!("unsubscribe failed: {reply}"))
    }

    /// Events up to and including the first that `stop` accepts.
    pub async fn until(&mut self, mut stop: impl FnMut(&Value) -> bool) -> Vec<Value> {
        let mut events = Vec::new();
        loop {
            let event = self.next().await.expect("the stream ended early");
            let done = stop(&event);
            events.push(event);
            if done {
                return events;
            }
        }
    }

    /// Events up to and including `turn/completed` (or `turn/discarded`) of `turn_id`.
    pub async fn until_turn_done(&mut self, turn_id: &str) -> Vec<Value> {
        self.until(|e| {
            (e["type"] == "turn/completed" || e["type"] == "turn/discarded") && e["turn_id"] == json!(turn_id)
        })
        .await
    }
}

/// `{"id", "name", "input"}`, a `tool_use` block.
pub fn tool_use(id: &str, name: &str, input: Value) -> Value {
    json!({ "id": id, "name": name, "input": input })
}

/// Short form of an event for order assertions: `started:a`, `result:a`, …
pub fn brief(event: &Value) -> String {
    let kind = event["type"].as_str().unwrap_or("?");
    let kind = kind.split('/').nth(1).unwrap_or(kind);
    match event.get("tool_use_id").and_then(Value::as_str) {
        Some(id) => format!("{kind}:{id}"),
        None => kind.to_owned(),
    }
}

/// Live processes (not zombies) whose command line contains `needle`.
pub fn procs(needle: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'));
        if cmdline.contains(needle) && !zombie && pid != std::process::id() as i32 {
            found.push(pid);
        }
    }
    found
}

pub async fn none_left(needle: &str) {
    let deadline = Instant::now() + STEP;
    loop {
        let left = procs(needle);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "processes left behind for {needle:?}: {left:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Writes `settings` as JSON to `path`, making its directory first.
pub fn write_settings(path: &Path, settings: &Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, settings.to_string()).unwrap();
}

/// Runs `cmd` (a client program) in `cwd` with `AGENTD_SOCKET` set to
/// `socket` and stdin closed; what it printed, once it succeeded.
pub fn client_stdout(cmd: &mut Command, cwd: &Path, socket: &Path) -> String {
    let out = cmd.current_dir(cwd).env("AGENTD_SOCKET", socket).stdin(Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

/// A unique duration (for `sleep`) so each test finds its own `sleep` processes.
pub fn tag() -> String {
    format!("{}.{}", 900 + std::process::id() % 90, rand_digits())
}

fn rand_digits() -> u32 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos() % 1_000_000
}

/// A session on a test daemon's directory, with its event stream open
/// from the start (the e2e tests' usual pair).
pub struct StreamedSession {
    /// A connection for requests.
    pub c: RawConn,
    /// The session's id.
    pub id: String,
    /// Its events.
    pub events: EventStream,
}

impl TestDaemon {
    /// Opens a session on the daemon's directory (`extra` adds
    /// `session/create` params) and subscribes to its events.
    pub async fn streamed_session(&self, extra: Value) -> StreamedSession {
        let mut c = self.raw().await;
        let mut params = json!({ "cwd": self.dir.path() });
        params.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let id = c.ok("session/create", params).await["session_id"].as_str().unwrap().to_owned();
        let events = EventStream::open(&self.socket, &id, None).await.unwrap();
        StreamedSession { c, id, events }
    }
}

impl StreamedSession {
    /// Opens a session with `params` on the daemon at `socket` and
    /// subscribes to its events; also returns `session/create`'s result.
    pub async fn open(socket: &Path, params: Value) -> (StreamedSession, Value) {
        let mut c = RawConn::connect(socket).await;
        let created = c.ok("session/create", params).await;
        let id = created["session_id"].as_str().unwrap().to_owned();
        let events = EventStream::open(socket, &id, None).await.unwrap();
        (StreamedSession { c, id, events }, created)
    }

    /// `turn/submit`: `uses` added to `turn` (a new turn when `None`).
    pub async fn submit(&mut self, turn: Option<&str>, uses: Vec<Value>, end: bool) -> String {
        let mut params = json!({ "session_id": self.id, "tool_uses": uses, "end": end });
        if let Some(t) = turn {
            params["turn_id"] = json!(t);
        }
        self.c.ok("turn/submit", params).await["turn_id"].as_str().unwrap().to_owned()
    }

    /// Submits one ended turn.
    pub async fn submit_ended(&mut self, uses: Vec<Value>) -> String {
        self.submit(None, uses, true).await
    }

    /// Waits for the next `permission/request`.
    pub async fn permission_request(&mut self) -> Value {
        let events = within("a permission request", self.events.until(|e| e["type"] == "permission/request")).await;
        events.last().unwrap().clone()
    }

    /// `permission/respond` to `request` with `answer`'s fields.
    pub async fn respond(&mut self, request: &Value, answer: Value) -> Value {
        let mut params = json!({ "session_id": self.id, "request_id": request["request_id"] });
        params.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
        self.c.request("permission/respond", params).await
    }

    /// The `tool/result` events of `turn`, up to its end.
    pub async fn results(&mut self, turn: &str) -> Vec<Value> {
        let events = within("the turn", self.events.until_turn_done(turn)).await;
        events.into_iter().filter(|e| e["type"] == "tool/result").collect()
    }
}
