//! Child processes that always end: every command runs in its own process
//! group with a marker in its environment, and ending it means
//! `killpg(SIGTERM)`, a short grace, then always `killpg(SIGKILL)` — plus a
//! sweep of `/proc` for processes carrying the marker, which finds those
//! that left the group (`setsid`, double forks). The daemon is a child
//! subreaper (`PR_SET_CHILD_SUBREAPER`), so such escapees are re-parented
//! to it rather than to init, and [`reap_adopted`] collects their exit
//! statuses so no zombie stays behind.
//!
//! Spawning uses `process_group(0)` and no `pre_exec`, so the standard
//! library can use `posix_spawn` (`fork` at a large RSS costs far more).
//!
//! Where the sandbox helper is present every command is started through it
//! (see `sandbox::helper`): the helper's supervisor reaps all of the call's
//! processes (PID 1 of the call's PID namespace, or a subreaper), so the
//! tree can be ended whatever its processes did to their environment,
//! session or group; the marker and the process group remain for a daemon
//! without the helper.

mod capture;
pub mod cgroup;
mod child;
pub mod jobs;
mod report;
mod warm;
mod zygote;
use report::{REPORT_MAX, read_until_report};

pub use capture::{Capture, CaptureSummary, SESSION_OUTPUT_BYTES, keep_within};
pub use child::Child;
pub use ledger::Ledger;
pub use warm::WarmPool;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use crate::sync::MutexExt;

/// What a process tree keeps alive while it lives (a call's network gate,
/// which serves its connections), opaque to this module.
pub type Kept = Box<dyn std::any::Any + Send + Sync>;

/// Name of the environment variable that marks a call's processes.
pub const MARKER_VAR: &str = "AGENTD_PROCESS";

/// Time between SIGTERM and SIGKILL.
pub const KILL_GRACE: Duration = Duration::from_millis(500);

/// Environment variables of the daemon's own that children must not see
/// (with every other `AGENTD_*` but the marker).
const PRIVATE_ENV: &[&str] = &["LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "NOTIFY_SOCKET"];

/// The environment a command in the read-only sandbox keeps: where
/// programs and toolchains are, locale and terminal; nothing else.
const PLAIN_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "TZ",
    "COLORTERM",
    "NO_COLOR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "PYENV_ROOT",
    "PYENV_VERSION",
    "NVM_DIR",
    "NVM_BIN",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "CONDA_PREFIX",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
];

/// `bash` as found on the daemon's `PATH` once (every call would otherwise
/// search it again, one failed `execve` per directory before it).
static BASH: LazyLock<PathBuf> = LazyLock::new(|| {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("bash"))
        .find(|p| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| PathBuf::from("bash"))
});

/// Pids of children tokio waits for; [`reap_adopted`] leaves them alone.
static OWNED: LazyLock<Mutex<HashSet<i32>>> = LazyLock::new(|| Mutex::new(HashSet::new()));

fn owned() -> std::sync::MutexGuard<'static, HashSet<i32>> {
    OWNED.locked()
}

/// Marks every descriptor above stderr close-on-exec, so nothing the
/// daemon inherited (from whatever started it) reaches a process it
/// starts directly (MCP servers; commands go through the sandbox helper,
/// which closes all). Called once the socket is claimed.
#[allow(unsafe_code)]
pub fn cloexec_inherited() {
    use std::os::fd::BorrowedFd;
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let fds: Vec<i32> =
        dir.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).filter(|fd| *fd > 2).collect();
    for fd in fds {
        // SAFETY: the descriptor is only borrowed for this one fcntl; one
        // closed meanwhile (the directory's own) makes it fail harmlessly.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let _ = nix::fcntl::fcntl(borrowed, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC));
    }
}

/// Makes this process a child subreaper. Called once at start-up.
pub fn become_subreaper() {
    match nix::sys::prctl::set_child_subreaper(true) {
        Ok(()) => SUBREAPER.store(true, std::sync::atomic::Ordering::Relaxed),
        Err(e) => {
            tracing::warn!("cannot become a child subreaper ({e}); escaped processes are still swept by marker")
        }
    }
}

/// This process is the subreaper of what it starts ([`become_subreaper`]).
static SUBREAPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A running command: its process group and marker. Dropping it ends
/// everything the command started (SIGKILL at once, then a sweep).
pub struct ProcessTree {
    /// The shell process (or the sandbox helper running it).
    pub child: Child,
    pgid: Pid,
    marker: String,
    ended: bool,
    /// The socket the sandbox helper got its call on and reports on
    /// (`None`: no helper).
    report: Option<tokio::net::UnixStream>,
    /// What it reported, once read.
    reported: std::sync::OnceLock<Option<agentd_sandbox::Report>>,
    /// The report's bytes read so far.
    report_bytes: Vec<u8>,
    /// The call ends with the helper's report rather than its exit: its
    /// PID namespace ended every process of the call before it reported.
    ends_with_report: bool,
    /// It did (the helper may still be tearing its namespaces down).
    ended_by_report: bool,
    /// The call's network gate: serves its connections while the tree
    /// lives.
    _gate: Option<Kept>,
    /// The call's own cgroups: removed once its processes are (after
    /// [`Drop`] has ended them).
    cgroup: Option<cgroup::CallCgroup>,
    /// Where it is recorded until it is over.
    ledger: std::sync::Arc<Ledger>,
}

/// How to start a command.
pub enum Launch<'a> {
    /// `bash` directly: the call runs unconfined (profile `off`, or no
    /// helper is installed); the daemon, the subreaper of its commands,
    /// ends what it leaves behind.
    Direct {
        /// Its private temp directory (`TMPDIR`).
        tmp: Option<PathBuf>,
        /// Nobody approved it: no secrets in its environment.
        scrub_env: bool,
        /// Where it is recorded.
        ledger: &'a std::sync::Arc<Ledger>,
    },
    /// Through the sandbox helper with this spec (its report file set).
    Helper {
        /// The helpers started ahead of their calls.
        pool: &'a std::sync::Arc<WarmPool>,
        /// What it is told.
        spec: Box<agentd_sandbox::Spec>,
        /// The call's network gate and the helper's end of its control
        /// socket (the helper's stdin), when the network is gated.
        gate: Option<(Kept, std::os::fd::OwnedFd)>,
    },
}

/// Spawns `bash -c script` in `cwd`, in a new process group, stdin closed,
/// stdout and stderr piped, marked with `marker`, with the session's `env`
/// on top of its environment (the plain one when nobody approved it: the
/// user set these, so they are kept then too).
pub fn spawn_bash(
    script: &str,
    cwd: &Path,
    marker: &str,
    env: &std::collections::BTreeMap<String, String>,
    launch: Launch<'_>,
) -> std::io::Result<ProcessTree> {
    let bash_path = BASH.to_string_lossy();
    let bash = [bash_path.as_ref(), "--noprofile", "--norc", "-c", script];
    let (tmp, scrub_env, ledger) = match launch {
        Launch::Helper { pool, spec, gate } => {
            let plain = spec.scrub_env || spec.profile == agentd_protocol::session::SandboxProfile::ReadOnly;
            let request = agentd_sandbox::WarmRequest {
                command: bash.iter().map(|a| (*a).to_owned()).collect(),
                cwd: cwd.to_owned(),
                env: command_env(plain, Some(&spec.tmp), env, marker),
                spec: *spec,
            };
            return pool.run(request, marker, gate);
        }
        Launch::Direct { tmp, scrub_env, ledger } => (tmp, scrub_env, ledger),
    };
    let mut cmd = tokio::process::Command::new(bash[0]);
    cmd.args(&bash[1..])
        .env_clear()
        .envs(command_env(scrub_env, tmp.as_deref(), env, marker).into_iter().map(|(k, v)| {
            use std::os::unix::ffi::OsStringExt;
            (std::ffi::OsString::from_vec(k), std::ffi::OsString::from_vec(v))
        }))
        .current_dir(cwd)
        .process_group(0)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let (child, pid) = spawn_recorded(&mut cmd, marker, ledger)?;
    Ok(ProcessTree::new(Child::spawned(child), pid, marker, ledger.clone()))
}

/// Spawns `cmd`, known as the daemon's own child (held in the owned set
/// while spawning: it could otherwise exit and be taken for an adopted
/// one) and recorded in the ledger with `marker`; its pid.
fn spawn_recorded(
    cmd: &mut tokio::process::Command,
    marker: &str,
    ledger: &Ledger,
) -> std::io::Result<(tokio::process::Child, i32)> {
    let mut owned = owned();
    let child = cmd.spawn()?;
    let pid = child.id().map(|p| p as i32).unwrap_or(0);
    owned.insert(pid);
    drop(owned);
    ledger.record(pid, marker);
    Ok((child, pid))
}

/// A command's whole environment: the daemon's (only the plain part when
/// `plain`: what runs unasked gets no secrets, which `printenv` or
/// /proc/self/environ would hand the model), its `TMPDIR`, the session's
/// `env` on top, its marker; never the daemon's own variables.
fn command_env(
    plain: bool,
    tmp: Option<&Path>,
    env: &std::collections::BTreeMap<String, String>,
    marker: &str,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    use std::os::unix::ffi::OsStrExt;
    let mut vars: std::collections::BTreeMap<Vec<u8>, Vec<u8>> = std::env::vars_os()
        .filter(|(name, _)| {
            let name = name.to_string_lossy();
            !plain || PLAIN_ENV.contains(&name.as_ref()) || name.starts_with("LC_")
        })
        .map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    if let Some(tmp) = tmp {
        vars.insert(b"TMPDIR".to_vec(), tmp.as_os_str().as_bytes().to_vec());
    }
    for (k, v) in env {
        vars.insert(k.as_bytes().to_vec(), v.as_bytes().to_vec());
    }
    vars.insert(MARKER_VAR.as_bytes().to_vec(), marker.as_bytes().to_vec());
    vars.retain(|name, _| {
        let name = String::from_utf8_lossy(name);
        !PRIVATE_ENV.contains(&name.as_ref()) && (!name.starts_with("AGENTD_") || name == MARKER_VAR)
    });
    vars.into_iter().collect()
}

/// Spawns a long-lived server program (an MCP server) in `cwd`, in a new
/// process group, marked with `marker`, stdin, stdout and stderr piped.
/// Its environment is the plain one (where programs and toolchains are,
/// locale; none of the daemon's secrets) plus `env`. Recorded in the
/// process ledger like a command, so a daemon that dies leaves it to the
/// next one to end.
pub fn spawn_server(
    program: &str,
    args: &[String],
    cwd: &Path,
    env: &std::collections::BTreeMap<String, String>,
    marker: &str,
    ledger: &std::sync::Arc<Ledger>,
) -> std::io::Result<ProcessTree> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(cwd)
        .process_group(0)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .env_clear();
    for (var, value) in std::env::vars_os() {
        let name = var.to_string_lossy();
        if PLAIN_ENV.contains(&name.as_ref()) || name.starts_with("LC_") {
            cmd.env(&var, value);
        }
    }
    cmd.envs(env).env(MARKER_VAR, marker);
    let (child, pid) = spawn_recorded(&mut cmd, marker, ledger)?;
    Ok(ProcessTree::new(Child::spawned(child), pid, marker, ledger.clone()))
}

/// Runs a short command of the daemon's own (git for the worktree tools)
/// to completion and returns its output; its pid is known as the daemon's
/// while it runs, so [`reap_adopted`] never takes its exit status. Killed
/// if the future is dropped.
pub async fn output_owned(mut cmd: tokio::process::Command) -> std::io::Result<std::process::Output> {
    cmd.kill_on_drop(true).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let (child, pid) = {
        let mut owned_set = owned();
        let child = cmd.spawn()?;
        let pid = child.id().map(|p| p as i32).unwrap_or(0);
        owned_set.insert(pid);
        (child, pid)
    };
    struct Forget(i32);
    impl Drop for Forget {
        fn drop(&mut self) {
            owned().remove(&self.0);
        }
    }
    let _forget = Forget(pid);
    child.wait_with_output().await
}

impl ProcessTree {
    /// The tree of a command started as `pid`, its group's leader, whose
    /// processes carry `marker`, recorded in `ledger`.
    fn new(child: Child, pid: i32, marker: &str, ledger: std::sync::Arc<Ledger>) -> ProcessTree {
        ProcessTree {
            child,
            pgid: Pid::from_raw(pid),
            marker: marker.to_owned(),
            ended: false,
            report: None,
            reported: Default::default(),
            report_bytes: Vec::new(),
            ends_with_report: false,
            ended_by_report: false,
            _gate: None,
            cgroup: None,
            ledger,
        }
    }

    /// The call's memory limit, when the kernel killed one of its
    /// processes for reaching it.
    pub fn memory_limit_hit(&self) -> Option<u64> {
        self.cgroup.as_ref().and_then(cgroup::CallCgroup::memory_limit_hit)
    }

    /// The process group id.
    pub fn pgid(&self) -> i32 {
        self.pgid.as_raw()
    }

    /// Whether any process of the group is still alive. Once the helper's
    /// report ended the call, none of the command's is: only the helper
    /// itself, tearing its namespaces down (reaped here once it exited).
    pub fn group_alive(&mut self) -> bool {
        if self.ended_by_report {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                owned().remove(&self.pgid.as_raw());
            }
            return false;
        }
        killpg(self.pgid, None).is_ok()
    }

    /// Waits for the shell itself to exit; returns its exit code (or
    /// 128+signal when a signal ended it).
    pub async fn wait_shell(&mut self) -> std::io::Result<i32> {
        if let Some(status) = self.reported_status() {
            return Ok(status);
        }
        let status = match (&self.report, self.ends_with_report) {
            (Some(socket), true) => tokio::select! {
                status = self.child.wait() => status?,
                () = read_until_report(socket, &mut self.report_bytes) => {
                    let report: Option<agentd_sandbox::Report> = serde_json::from_slice(&self.report_bytes).ok();
                    let _ = self.reported.set(report);
                    match self.reported_status() {
                        Some(status) => return Ok(status),
                        // A sandbox that could not be applied: the helper's
                        // exit says the rest.
                        None => self.child.wait().await?,
                    }
                }
            },
            _ => self.child.wait().await?,
        };
        owned().remove(&self.pgid.as_raw());
        // A helper the zygote forked: its report says how the shell ended
        // (its exit code is the zygote's to read).
        if !self.child.is_spawned()
            && let Some(status) = self.report().and_then(|r| r.status)
        {
            return Ok(status);
        }
        use std::os::unix::process::ExitStatusExt;
        Ok(status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(-1))
    }

    /// Ends every process of the command: SIGTERM to the group and the
    /// marked processes, up to [`KILL_GRACE`] for them to go, then SIGKILL
    /// regardless (a `trap '' TERM` is inherited by children).
    pub async fn terminate(&mut self) {
        signal_tree(self.pgid, &self.marker, Signal::SIGTERM);
        let deadline = tokio::time::Instant::now() + KILL_GRACE;
        loop {
            // Reap what has exited, or zombies would count as alive.
            if let Ok(Some(_)) = self.child.try_wait() {
                owned().remove(&self.pgid.as_raw());
            }
            reap_adopted();
            let alive = self.group_alive() || !marked(&self.marker).is_empty();
            if !alive || tokio::time::Instant::now() >= deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.kill_now();
        let _ = self.wait_shell().await;
    }

    /// What the sandbox helper reported once it exited (`None` without a
    /// helper, or when it left no report).
    pub fn report(&self) -> Option<agentd_sandbox::Report> {
        self.reported.get_or_init(|| self.read_report()).clone()
    }

    fn read_report(&self) -> Option<agentd_sandbox::Report> {
        let socket = self.report.as_ref()?;
        // Whatever it wrote before it exited is there; never wait for more
        // (nothing of the command holds the socket, but a wedged helper
        // must not hold the call).
        let mut bytes = self.report_bytes.clone();
        let mut chunk = [0u8; 4096];
        while bytes.len() < REPORT_MAX {
            match socket.try_read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => bytes.extend_from_slice(&chunk[..n]),
            }
        }
        serde_json::from_slice(&bytes).ok()
    }

    /// The shell's status from a report that ends the call (see
    /// [`ProcessTree::ends_with_report`]), once it came.
    fn reported_status(&mut self) -> Option<i32> {
        if !self.ends_with_report {
            return None;
        }
        let report = self.reported.get()?.as_ref()?;
        let status = report.status.filter(|_| report.ended)?;
        self.ended_by_report = true;
        Some(status)
    }

    /// After the shell exited by itself: ends whatever the command left
    /// running (one `/proc` sweep; nothing more when nothing is left).
    /// Returns how many processes that was.
    pub fn end_leftovers(&mut self) -> usize {
        // The sandbox helper ended them before it exited; a sweep of every
        // process's environment would only cost time.
        // Without a report (no helper, or one killed before it could end
        // them: with the sandbox off a command may kill its own helper).
        if self.ended_by_report {
            // Nothing of the call is left (its PID namespace is gone); the
            // helper itself ends as it tears its namespaces down.
            self.ended = true;
            return 0;
        }
        let left = if self.report().is_some() { Vec::new() } else { marked(&self.marker) };
        let group = self.group_alive();
        self.ended = true;
        if left.is_empty() && !group {
            return 0;
        }
        if group && self.pgid.as_raw() > 1 {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
        for pid in &left {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        reap_adopted();
        left.len()
    }

    /// SIGKILL to the group and every marked process, at once.
    pub fn kill_now(&mut self) {
        signal_tree(self.pgid, &self.marker, Signal::SIGKILL);
        self.ended = true;
        reap_adopted();
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        if !self.ended {
            signal_tree(self.pgid, &self.marker, Signal::SIGKILL);
            reap_adopted();
        }
        self.ledger.forget(self.pgid.as_raw());
        // tokio reaps the shell itself once it is gone; its pid stays in
        // the owned set so `reap_adopted` never races tokio for it. A
        // helper the call ended without waiting for is every call's: its
        // pid leaves the set (were `reap_adopted` to reap it first, tokio
        // drops it from its orphans).
        if self.ended_by_report {
            owned().remove(&self.pgid.as_raw());
        }
    }
}

fn signal_tree(pgid: Pid, marker: &str, signal: Signal) {
    // Only while the group exists: once gone, its id may be reused.
    if pgid.as_raw() > 1 && killpg(pgid, None).is_ok() {
        // Descendants first: once the helper (a subreaper where there are
        // no namespaces) is gone, its orphans would come to the daemon.
        for pid in descendants(pgid.as_raw()) {
            let _ = kill(Pid::from_raw(pid), signal);
        }
        let _ = killpg(pgid, signal);
    }
    for pid in marked(marker) {
        let _ = kill(Pid::from_raw(pid), signal);
    }
}

pub use agentd_sandbox::descendants;

/// The resident memory of process `pid`, in KiB.
pub fn rss_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Whether the process `pid` is a tool's: its parent chain passes through
/// a process the daemon started for a command (a shell, or the sandbox
/// helper, which every process of a sandboxed call descends from) — or,
/// with `strict`, reaches the daemon at all (a daemon that starts nothing
/// but tool processes; escapees are adopted by it as the subreaper). A
/// process whose chain cannot be read counts as a tool's (fail closed).
pub fn is_tool_process(pid: i32, strict: bool) -> bool {
    let me = std::process::id() as i32;
    if pid == me || pid <= 0 {
        return false;
    }
    let owned: Vec<i32> = owned().iter().copied().collect();
    let mut current = pid;
    for _ in 0..4096 {
        if owned.contains(&current) {
            return true;
        }
        if current == me {
            return strict;
        }
        if current <= 1 {
            return false;
        }
        match agentd_sandbox::parent_of(current) {
            Some(ppid) => current = ppid,
            // Gone before it could be judged (a child that connected and
            // exited, leaving the socket to its parent): refused.
            None => return true,
        }
    }
    true
}

/// The peer's pidfd (`SO_PEERPIDFD`, Linux 6.5): it names the process that
/// connected even after its pid is reused. `None` where the kernel has none.
#[allow(unsafe_code)]
pub fn peer_pidfd(sock: std::os::fd::BorrowedFd<'_>) -> Option<std::os::fd::OwnedFd> {
    use std::os::fd::{AsRawFd, FromRawFd};
    const SO_PEERPIDFD: nix::libc::c_int = 77;
    let mut fd: nix::libc::c_int = -1;
    let mut len = std::mem::size_of::<nix::libc::c_int>() as nix::libc::socklen_t;
    // SAFETY: an int-sized option into an int.
    let rc = unsafe {
        nix::libc::getsockopt(
            sock.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            SO_PEERPIDFD,
            (&mut fd as *mut nix::libc::c_int).cast(),
            &mut len,
        )
    };
    // SAFETY: the kernel handed us this descriptor; it is ours to close.
    (rc == 0 && fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
}

/// Whether the process a pidfd names is still running: a pidfd becomes
/// readable once its process exits, zombie or not.
pub fn pidfd_alive(pidfd: &std::os::fd::OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd;
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(0) => true,
        Ok(_) => !fds[0].revents().is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP)),
        Err(_) => true,
    }
}

/// Every live process (of the machine, not only this daemon's: what a
/// dead daemon left) whose environment carries a marker, with it.
pub fn carrying_markers() -> Vec<(i32, String)> {
    let prefix = format!("{MARKER_VAR}=");
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let value = env.split(|b| *b == 0).find_map(|entry| entry.strip_prefix(prefix.as_bytes()))?;
            Some((pid, String::from_utf8_lossy(value).into_owned()))
        })
        .collect()
}

/// Pids of live processes whose environment carries `MARKER_VAR=marker`.
pub fn marked(marker: &str) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let me = std::process::id() as i32;
    // The daemon is the subreaper of everything its commands start, so a
    // process that inherited the marker descends from it: only those are
    // looked at (a few, not every process of the machine) where the kernel
    // keeps `children` lists.
    let subreaper = SUBREAPER.load(std::sync::atomic::Ordering::Relaxed);
    let candidates = match own_descendants(me).filter(|_| subreaper) {
        Some(pids) => pids,
        None => {
            let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
            dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()).collect()
        }
    };
    candidates
        .into_iter()
        .filter(|pid| *pid != me)
        .filter(|pid| {
            // Zombies have an empty environment: nothing to signal.
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|b| *b == 0).any(|entry| entry == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Every descendant of `root` (this process), from the `children` list of
/// each of its threads and theirs; `None` where the kernel keeps no such
/// lists (`CONFIG_PROC_CHILDREN`).
fn own_descendants(root: i32) -> Option<Vec<i32>> {
    let mut out: Vec<i32> = Vec::new();
    let mut frontier = vec![root];
    while let Some(pid) = frontier.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { continue };
        for task in tasks.flatten() {
            match std::fs::read_to_string(task.path().join("children")) {
                Ok(list) => {
                    for child in list.split_whitespace().filter_map(|c| c.parse::<i32>().ok()) {
                        if !out.contains(&child) {
                            out.push(child);
                            frontier.push(child);
                        }
                    }
                }
                Err(e) if pid == root && e.kind() == std::io::ErrorKind::NotFound => return None,
                Err(_) => {}
            }
        }
    }
    Some(out)
}

/// Reaps adopted zombies now and then, until `cancel` (processes killed a
/// moment ago become zombies only after the kill returned).
pub async fn reaper(cancel: tokio_util::sync::CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => reap_adopted(),
        }
    }
}

/// Collects the exit status of adopted children (escapees re-parented to
/// the daemon) that have exited, leaving tokio's own children alone.
pub fn reap_adopted() {
    let me = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return };
    // Held throughout: no shell can be spawned (and exit, and be taken for
    // an adopted zombie) between the check and the waitpid.
    let owned = owned();
    for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
        if owned.contains(&pid) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else { continue };
        let mut fields = rest.split_whitespace();
        let (state, ppid) = (fields.next(), fields.next().and_then(|p| p.parse::<i32>().ok()));
        if state == Some("Z") && ppid == Some(me) {
            let _ = nix::sys::wait::waitpid(Pid::from_raw(pid), Some(nix::sys::wait::WaitPidFlag::WNOHANG));
        }
    }
}

pub mod ledger;
