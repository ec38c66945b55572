//! Sandbox helpers started ahead of their calls: forked by the zygote
//! (see [`super::zygote`]), or, where it cannot run, spawned one by one
//! (`agentd-sandbox --warm`).

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::child::Child;
use super::zygote::{ForkError, Zygote};
use super::{Kept, Ledger, ProcessTree};

use crate::sync::MutexExt;

/// Sandbox helpers started ahead of their calls: one waits, already past
/// its `exec`, its loader and its runtime's start, for the next call, and
/// a new one is made as soon as it is taken — forked by the zygote, or
/// spawned (`agentd-sandbox --warm`) where none runs. A helper serves one
/// call and exits, so no call sees another's state; it starts with the
/// plain environment (the call's own comes with the call), in its own
/// process group, recorded in the ledger.
pub struct WarmPool {
    helper: PathBuf,
    /// Where its helpers (and the zygote) are recorded.
    ledger: std::sync::Arc<Ledger>,
    idle: Mutex<Option<Warm>>,
    /// Helpers started, and calls that found none waiting.
    started: AtomicU64,
    cold: AtomicU64,
    /// Asks the thread that starts waiting helpers for one.
    spawner: std::sync::OnceLock<Mutex<std::sync::mpsc::Sender<()>>>,
    zygote: Mutex<Zygotes>,
    /// Where its helpers get their calls' cgroups (memory and process
    /// limits): a waiting helper is moved into one ahead of its call.
    cgroups: std::sync::Arc<super::cgroup::Cgroups>,
}

/// The zygote, and how it has fared.
#[derive(Default)]
struct Zygotes {
    /// The zygote, while no fork is asked of it.
    running: Option<Zygote>,
    /// A fork is asked of it (outside the lock): its pid. Meanwhile other
    /// calls spawn their helper, and no other zygote is started.
    busy: Option<i32>,
    /// Zygotes given up (dead channel, no answer in time) that may still
    /// have helpers running calls: they exit once those have; the oldest
    /// is killed beyond [`RETIRED_AT_MOST`].
    retired: Vec<Zygote>,
    /// Zygotes started, helpers forked.
    starts: u64,
    forks: u64,
    /// Failures since the last fork: at [`ZYGOTE_GIVE_UP`], helpers are
    /// spawned instead (said once in the log).
    failures: u32,
}

/// Failures in a row after which no zygote is started any more.
const ZYGOTE_GIVE_UP: u32 = 3;

/// Zygotes given up and still running, at most.
const RETIRED_AT_MOST: usize = 4;

impl Zygotes {
    /// Gives `zygote` up: no more forks are asked of it; it exits once its
    /// helpers have. Beyond [`RETIRED_AT_MOST`] still running, the oldest
    /// is killed (a zygote stopped for good never sees its channel close).
    fn retire(&mut self, zygote: Zygote) {
        zygote.give_up();
        self.retired.retain_mut(Zygote::alive);
        if self.retired.len() >= RETIRED_AT_MOST {
            self.retired.remove(0).kill();
        }
        self.retired.push(zygote);
    }
}

impl std::fmt::Debug for WarmPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WarmPool").field("helper", &self.helper).finish_non_exhaustive()
    }
}

/// One helper waiting for its call.
struct Warm {
    /// `None` once handed to its call's tree.
    child: Option<Child>,
    /// The daemon's end of the helper's stdin.
    control: std::os::unix::net::UnixStream,
    pid: i32,
    /// The marker the helper itself carries.
    marker: String,
    /// Its parent (the daemon, or the zygote): what its call's spec says,
    /// and the helper checks before it runs anything.
    parent: i32,
    /// Where it is recorded.
    ledger: std::sync::Arc<Ledger>,
    /// The cgroup it was moved into while it waited (its call's).
    cgroup: Option<super::cgroup::CallCgroup>,
}

impl Drop for Warm {
    fn drop(&mut self) {
        // Unused: it ends (EOF on its stdin), and is killed besides.
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
            self.ledger.forget(self.pid);
        }
        // Its cgroup is given up, not swept: nothing of a call is in it.
        if let Some(cgroup) = self.cgroup.take() {
            cgroup.disown();
        }
    }
}

impl WarmPool {
    /// A pool of `helper` whose processes are recorded in `ledger`;
    /// nothing is started until the first call.
    pub fn new(
        helper: PathBuf,
        ledger: std::sync::Arc<Ledger>,
        cgroups: std::sync::Arc<super::cgroup::Cgroups>,
    ) -> WarmPool {
        WarmPool {
            helper,
            ledger,
            cgroups,
            idle: Mutex::new(None),
            started: AtomicU64::new(0),
            cold: AtomicU64::new(0),
            spawner: std::sync::OnceLock::new(),
            zygote: Mutex::new(Zygotes::default()),
        }
    }

    /// What `daemon/info` says of the pool.
    pub fn status(&self) -> agentd_protocol::methods::WarmHelpers {
        let waiting = self.idle.locked().as_ref().map(|w| w.pid);
        let zygote = {
            let z = self.zygotes();
            z.running.as_ref().map(Zygote::pid).or(z.busy).map(|pid| agentd_protocol::methods::ZygoteStatus {
                pid: pid as u32,
                rss_kib: super::rss_kib(pid).unwrap_or(0),
                starts: z.starts,
                forks: z.forks,
            })
        };
        agentd_protocol::methods::WarmHelpers {
            waiting: u32::from(waiting.is_some()),
            waiting_rss_kib: waiting.and_then(super::rss_kib).unwrap_or(0),
            started: self.started.load(Relaxed),
            cold_starts: self.cold.load(Relaxed),
            zygote,
        }
    }

    fn zygotes(&self) -> std::sync::MutexGuard<'_, Zygotes> {
        self.zygote.locked()
    }

    /// Makes a helper that waits for its call: forked by the zygote (which
    /// is started first where none runs, if `may_start_zygote`), else
    /// spawned.
    fn start(&self, may_start_zygote: bool) -> std::io::Result<Warm> {
        let warm = match self.fork(may_start_zygote) {
            Some(warm) => warm,
            None => self.spawn()?,
        };
        self.started.fetch_add(1, Relaxed);
        // A call that waits on a helper that died is told so, not hung.
        warm.control.set_write_timeout(Some(Duration::from_secs(5)))?;
        Ok(warm)
    }

    /// A helper forked by the zygote; `None` where there is none to fork
    /// from (then the caller spawns one). A zygote whose channel fails is
    /// given up (not killed: its helpers run calls) and replaced once;
    /// after [`ZYGOTE_GIVE_UP`] failures in a row, none is started any
    /// more. One that says it could not fork (a process limit) is kept.
    /// The fork is asked outside the lock: a wedged zygote holds up one
    /// call for its answer limit, not every call and `daemon/info`.
    fn fork(&self, may_start_zygote: bool) -> Option<Warm> {
        for _ in 0..2 {
            let mut running = self.take_zygote(may_start_zygote)?;
            let forked = running.fork();
            let mut z = self.zygotes();
            z.busy = None;
            match forked {
                Ok(f) => {
                    self.ledger.record(f.pid, running.marker());
                    let warm = Child::forked(f.pidfd, f.stdout, f.stderr).map(|child| Warm {
                        child: Some(child),
                        control: f.control,
                        pid: f.pid,
                        marker: running.marker().to_owned(),
                        parent: running.pid(),
                        ledger: self.ledger.clone(),
                        cgroup: None,
                    });
                    z.running = Some(running);
                    z.forks += 1;
                    z.failures = 0;
                    // Not watched: its control socket closes with the error,
                    // so it exits, and it is no group of ours any more.
                    return warm
                        .inspect_err(|e| {
                            self.ledger.forget(f.pid);
                            tracing::warn!("a forked helper cannot be watched: {e}");
                        })
                        .ok();
                }
                Err(ForkError::NotMade) => {
                    z.running = Some(running);
                    tracing::warn!("the sandbox zygote could not fork a helper now; one is spawned");
                    return None;
                }
                Err(ForkError::NotAsked(e)) => {
                    z.running = Some(running);
                    tracing::warn!("cannot ask the sandbox zygote for a helper ({e}); one is spawned");
                    return None;
                }
                Err(ForkError::Broken(e)) => {
                    z.failures += 1;
                    if z.failures >= ZYGOTE_GIVE_UP {
                        tracing::warn!("the sandbox zygote failed ({e}); helpers are spawned one by one from now on");
                    } else {
                        tracing::warn!("the sandbox zygote failed ({e}); another is started");
                    }
                    z.retire(running);
                }
            }
        }
        None
    }

    /// The zygote to fork from, marked busy: the running one, or one
    /// started now (if `may_start_zygote`); `None` while another call
    /// forks, or where there is none to be had.
    fn take_zygote(&self, may_start_zygote: bool) -> Option<Zygote> {
        let mut z = self.zygotes();
        if z.busy.is_some() {
            return None;
        }
        // Those given up that have exited are reaped.
        z.retired.retain_mut(Zygote::alive);
        if z.running.as_mut().is_some_and(|running| !running.alive()) {
            tracing::warn!("the sandbox zygote died; another is started");
            z.running = None;
            z.failures += 1;
        }
        if z.running.is_none() {
            if !may_start_zygote || z.failures >= ZYGOTE_GIVE_UP {
                return None;
            }
            match Zygote::start(&self.helper, self.ledger.clone()) {
                Ok(started) => {
                    z.running = Some(started);
                    z.starts += 1;
                }
                Err(e) => {
                    z.failures += 1;
                    tracing::warn!("cannot start the sandbox zygote ({e}); helpers are spawned one by one");
                    return None;
                }
            }
        }
        let running = z.running.take()?;
        z.busy = Some(running.pid());
        Some(running)
    }

    /// Spawns a helper (`agentd-sandbox --warm`).
    fn spawn(&self) -> std::io::Result<Warm> {
        let (control, theirs) = std::os::unix::net::UnixStream::pair()?;
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let mut cmd = tokio::process::Command::new(&self.helper);
        cmd.arg("--warm")
            .env_clear()
            .envs(super::command_env(true, None, &Default::default(), &marker).into_iter().map(|(k, v)| {
                use std::os::unix::ffi::OsStringExt;
                (std::ffi::OsString::from_vec(k), std::ffi::OsString::from_vec(v))
            }))
            .current_dir("/")
            .process_group(0)
            .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(theirs)))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let (child, pid) = super::spawn_recorded(&mut cmd, &marker, &self.ledger)?;
        let parent = std::process::id() as i32;
        Ok(Warm {
            child: Some(Child::spawned(child)),
            control,
            pid,
            marker,
            parent,
            ledger: self.ledger.clone(),
            cgroup: None,
        })
    }

    /// A waiting helper, or a new one; a new one is started for the next
    /// call meanwhile.
    fn take(&self) -> std::io::Result<Warm> {
        let waiting = self.idle.locked().take();
        // Still waiting: not exited (`try_wait` also reaps one that died).
        let alive = waiting.and_then(|mut w| match w.child.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => Some(w),
            _ => None,
        });
        match alive {
            Some(w) => Ok(w),
            None => {
                self.cold.fetch_add(1, Relaxed);
                self.start(false)
            }
        }
    }

    /// Starts the next waiting helper, where none waits (off the caller's
    /// path). Always on one thread that lives as long as the pool, which
    /// alone starts the zygote: a helper's (and the zygote's)
    /// `PR_SET_PDEATHSIG` fires when the thread that started it ends (a
    /// blocking-pool thread ends after 10 s idle, and would take the
    /// helper — and the call it runs — with it).
    fn refill(self: &std::sync::Arc<Self>) {
        let spawner = self.spawner.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let pool = std::sync::Arc::downgrade(self);
            let runtime = tokio::runtime::Handle::try_current().ok();
            let started = std::thread::Builder::new().name("agentd-warm".into()).spawn(move || {
                let Some(runtime) = runtime else { return };
                let _entered = runtime.enter();
                while rx.recv().is_ok() {
                    let Some(pool) = pool.upgrade() else { return };
                    pool.fill();
                }
            });
            if let Err(e) = started {
                tracing::warn!("cannot start the thread that starts sandbox helpers ahead of their calls: {e}");
            }
            std::sync::Mutex::new(tx)
        });
        let _ = spawner.locked().send(());
    }

    /// Starts a waiting helper if none waits.
    fn fill(&self) {
        if self.idle.locked().is_some() {
            return;
        }
        match self.start(true) {
            Ok(w) => {
                let mut idle = self.idle.locked();
                if idle.is_none() {
                    *idle = Some(w);
                }
            }
            Err(e) => tracing::warn!("cannot start a sandbox helper ahead of its call: {e}"),
        }
    }

    /// Runs `request` in a helper: a waiting one, or a new one.
    pub(super) fn run(
        self: &std::sync::Arc<Self>,
        mut request: agentd_sandbox::WarmRequest,
        marker: &str,
        gate: Option<(Kept, std::os::fd::OwnedFd)>,
    ) -> std::io::Result<ProcessTree> {
        // Confined in namespaces (seccomp keeps the command from the
        // helper's memory): its report, sent once the call's PID namespace
        // is empty, ends the call.
        let ends_with_report =
            request.spec.namespaces && request.spec.profile != agentd_protocol::session::SandboxProfile::Off;
        // What the helper is sent names its parent, which it checks.
        let mut body = |parent: i32| {
            request.spec.parent = parent;
            let body = serde_json::to_vec(&request).map_err(std::io::Error::other)?;
            if body.len() > agentd_sandbox::WARM_REQUEST_MAX {
                return Err(std::io::Error::other("the sandbox spec is too large"));
            }
            Ok::<_, std::io::Error>(body)
        };
        let (gate, control_fd) = match gate {
            Some((g, fd)) => (Some(g), Some(fd)),
            None => (None, None),
        };
        let mut warm = self.take()?;
        self.refill();
        // The call's cgroup: the one it waited in (still in it: a helper
        // may wait for long, and be moved meanwhile), or one made now. A
        // failure here drops the helper unused, its cgroup given up.
        let cgroup = match warm.cgroup.take() {
            Some(cgroup) if cgroup.holds(warm.pid) => Some(cgroup),
            Some(cgroup) => match self.adopt(&cgroup, &mut warm) {
                Ok(()) => Some(cgroup),
                Err(e) => {
                    cgroup.disown();
                    return Err(e);
                }
            },
            None => self.cgroup_for(marker, &mut warm)?,
        };
        // Dead before it took its call (killed while it waited, or as the
        // call was handed over): replaced once. Wedged, or dead twice: the
        // call fails. Either way it is dropped (killed), never left
        // half-told, and it never ran anything of the call.
        let not_taken =
            |e: std::io::Error| std::io::Error::other(format!("the sandbox helper did not take the call: {e}"));
        match hand_over(&warm.control, &body(warm.parent)?, control_fd.as_ref()) {
            Ok(()) => {}
            Err(HandOver::NotTaken(_)) => {
                warm = self.start(false)?;
                let adopted = match &cgroup {
                    Some(c) => self.adopt(c, &mut warm),
                    None => Ok(()),
                };
                if let Err(e) = adopted {
                    if let Some(c) = cgroup {
                        c.disown();
                    }
                    return Err(e);
                }
                hand_over(&warm.control, &body(warm.parent)?, control_fd.as_ref()).map_err(|e| not_taken(e.into()))?;
            }
            // It may have the call: never given to a second helper.
            Err(HandOver::Unknown(e)) => return Err(not_taken(e)),
        }
        drop(control_fd);
        // Its command's processes carry the call's marker.
        self.ledger.record_as(warm.pid, &warm.marker, marker);
        let Some(child) = warm.child.take() else { return Err(std::io::Error::other("the helper is gone")) };
        let control = warm.control.try_clone()?;
        control.set_nonblocking(true)?;
        let control = tokio::net::UnixStream::from_std(control)?;
        let mut tree = ProcessTree::new(child, warm.pid, marker, self.ledger.clone());
        tree.report = Some(control);
        tree.ends_with_report = ends_with_report;
        tree._gate = gate;
        tree.cgroup = cgroup;
        Ok(tree)
    }

    /// A cgroup for the call marked `marker`, its helper moved into it;
    /// `None` where there is none (or, when no memory limit was asked
    /// for, where it cannot be set up: the call keeps its RLIMIT_NPROC).
    fn cgroup_for(&self, marker: &str, warm: &mut Warm) -> std::io::Result<Option<super::cgroup::CallCgroup>> {
        let Some(cgroup) = self.cgroups.for_call(marker).map_err(limits_failed)? else { return Ok(None) };
        match self.adopt(&cgroup, warm) {
            Ok(()) => Ok(Some(cgroup)),
            Err(e) => {
                cgroup.disown();
                Err(e)
            }
        }
    }

    /// Moves helper `warm` into `cgroup`, before it has its call. One that
    /// died meanwhile fails the call (its pid may be another process's
    /// now: the cgroup is then given up without killing anything).
    fn adopt(&self, cgroup: &super::cgroup::CallCgroup, warm: &mut Warm) -> std::io::Result<()> {
        match cgroup.adopt(warm.pid) {
            Ok(()) if alive(warm) => Ok(()),
            Ok(()) => Err(std::io::Error::other("the sandbox helper died before it took the call")),
            Err(e) if !self.cgroups.required() => {
                tracing::warn!("a call runs without its cgroup (its process limit is RLIMIT_NPROC's): {e}");
                Ok(())
            }
            Err(e) => Err(limits_failed(e)),
        }
    }
}

/// Whether the helper still lives (not exited, not reaped: it has held its
/// pid since it started).
fn alive(warm: &mut Warm) -> bool {
    matches!(warm.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
}

/// A call whose limits could not be set up does not run.
fn limits_failed(e: super::cgroup::CgroupError) -> std::io::Error {
    std::io::Error::other(format!("the call's limits could not be set up, so the command did not run: {e}"))
}
/// Why a helper has not taken its call.
enum HandOver {
    /// It has not: the call never reached it whole, or it ended before it
    /// said it took it. Another helper may run the call.
    NotTaken(std::io::Error),
    /// Not known (wedged, or an answer that is not [`agentd_sandbox::TAKEN`]):
    /// it may have the call, so no other helper may run it.
    Unknown(std::io::Error),
}

impl From<HandOver> for std::io::Error {
    fn from(h: HandOver) -> Self {
        match h {
            HandOver::NotTaken(e) | HandOver::Unknown(e) => e,
        }
    }
}

/// Sends a helper its call and waits for it to say it took it
/// ([`agentd_sandbox::TAKEN`], written before it does anything of the
/// call): a helper that died first gives an end of file or a reset.
fn hand_over(
    control: &std::os::unix::net::UnixStream,
    body: &[u8],
    fd: Option<&std::os::fd::OwnedFd>,
) -> Result<(), HandOver> {
    use std::io::{ErrorKind, Read};
    send_request(control, body, fd).map_err(HandOver::NotTaken)?;
    let unknown = HandOver::Unknown;
    control.set_read_timeout(Some(Duration::from_secs(5))).map_err(unknown)?;
    let mut taken = [0u8; 1];
    let got = loop {
        match (&*control).read(&mut taken) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => break other,
        }
    };
    control.set_read_timeout(None).map_err(unknown)?;
    match got {
        Ok(1) if taken[0] == agentd_sandbox::TAKEN => Ok(()),
        Ok(0) => Err(HandOver::NotTaken(std::io::Error::new(ErrorKind::UnexpectedEof, "it ended first"))),
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::BrokenPipe) => Err(HandOver::NotTaken(e)),
        Err(e) => Err(HandOver::Unknown(e)),
        Ok(_) => Err(HandOver::Unknown(std::io::Error::new(ErrorKind::InvalidData, "it answered nonsense"))),
    }
}

/// Sends a helper its call: the length, then the JSON, the gate's
/// control socket alongside the first bytes.
fn send_request(
    control: &std::os::unix::net::UnixStream,
    body: &[u8],
    fd: Option<&std::os::fd::OwnedFd>,
) -> std::io::Result<()> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let head = u32::try_from(body.len()).map_err(std::io::Error::other)?.to_le_bytes();
    let fds: Vec<std::os::fd::RawFd> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let cmsgs: Vec<ControlMessage<'_>> =
        if fds.is_empty() { Vec::new() } else { vec![ControlMessage::ScmRights(&fds)] };
    let iov = [std::io::IoSlice::new(&head)];
    let sent = loop {
        match sendmsg::<()>(control.as_raw_fd(), &iov, &cmsgs, MsgFlags::MSG_NOSIGNAL, None) {
            Err(nix::errno::Errno::EINTR) => continue,
            other => break other.map_err(std::io::Error::from)?,
        }
    };
    let mut rest = control;
    if sent < head.len() {
        rest.write_all(&head[sent..])?;
    }
    rest.write_all(body)
}

#[cfg(test)]
mod hand_over_tests {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    use super::{HandOver, hand_over};

    /// A helper's side: reads the call whole, then does `then` with the
    /// socket.
    fn helper(then: impl FnOnce(UnixStream) + Send + 'static) -> (UnixStream, std::thread::JoinHandle<()>) {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let thread = std::thread::spawn(move || {
            let mut head = [0u8; 4];
            theirs.read_exact(&mut head).unwrap();
            let mut body = vec![0u8; u32::from_le_bytes(head) as usize];
            theirs.read_exact(&mut body).unwrap();
            then(theirs);
        });
        (ours, thread)
    }

    /// Only a helper that said it took the call has it; one that ended
    /// first (killed as it was handed the call) has not, and the call may
    /// go to another; one that answered anything else may have it.
    #[test]
    fn a_call_is_taken_only_when_the_helper_says_so() {
        let (ours, t) = helper(|mut s| s.write_all(&[agentd_sandbox::TAKEN, b'{']).unwrap());
        assert!(hand_over(&ours, b"{}", None).is_ok());
        t.join().unwrap();
        // The report still follows on the same socket.
        let mut rest = Vec::new();
        (&ours).read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"{");

        let (ours, t) = helper(drop);
        assert!(matches!(hand_over(&ours, b"{}", None), Err(HandOver::NotTaken(_))));
        t.join().unwrap();

        let (ours, t) = helper(|mut s| s.write_all(b"{\"leftovers\":0}").unwrap());
        assert!(matches!(hand_over(&ours, b"{}", None), Err(HandOver::Unknown(_))));
        t.join().unwrap();

        // Never read: the call does not reach it whole.
        let (ours, theirs) = UnixStream::pair().unwrap();
        drop(theirs);
        assert!(matches!(hand_over(&ours, b"{}", None), Err(HandOver::NotTaken(_))));
    }
}
