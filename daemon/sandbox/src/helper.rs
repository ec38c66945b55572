//! The sandbox helper: the small executable (`agentd-sandbox`) the daemon
//! spawns with `posix_spawn` for every Bash command. It is single-threaded,
//! so it may `fork` freely, which the multi-threaded daemon must not.
//!
//! ```text
//! agentd (daemon) ──posix_spawn──▶ outer helper (pgid leader, PDEATHSIG)
//!                                   │ unshare(user, pid, mount)
//!                                   └─fork─▶ supervisor (pid 1 of the call's PID namespace)
//!                                             │ private /proc, read-only binds
//!                                             └─fork─▶ Landlock + seccomp ─exec─▶ bash -c
//! ```
//!
//! - The supervisor reaps everything of the call (it is PID 1, or a child
//!   subreaper where there are no namespaces), so no process of the call
//!   can leave it: `setsid`, double forks and `env -i` change nothing.
//! - A foreground command ends with its shell: after a short drain what is
//!   left is killed and counted. A background job lasts until its last
//!   process is gone.
//! - SIGTERM to the process group is forwarded to every process of the
//!   call; SIGKILL of the outer helper (or the daemon's death, through
//!   `PR_SET_PDEATHSIG`) ends the PID namespace, and the kernel kills
//!   everything in it.
//! - The report file (outside the sandbox) tells the daemon what happened:
//!   the processes left over, or why the sandbox could not be applied —
//!   then nothing ran.
#![allow(unsafe_code)] // fork, signal handlers: in a single-threaded process

use std::ffi::{CString, OsString};
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sched::CloneFlags;
use nix::sys::signal::{self, SigHandler, SigmaskHow, Signal};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{ForkResult, Pid, fork};

use super::mounts::{bind_cache, bind_read_only, bind_writable, hide_all_but, mount_layer, set_read_only};
use super::{Report, Spec};
use agentd_protocol::session::SandboxProfile;

/// Exit code of the helper when it could not set up the sandbox.
const SETUP_FAILED: i32 = 125;

static TERM: AtomicBool = AtomicBool::new(false);

extern "C" fn on_term(_: nix::libc::c_int) {
    TERM.store(true, Ordering::SeqCst);
}

/// The helper's `main`: `--probe`, `--pdf-text …` (Read's PDF text: see
/// [`super::pdf`]), `--warm` (started ahead of its call, which comes on
/// stdin: see [`warm`]), `--zygote DAEMON_PID` (forks such helpers: see
/// [`super::zygote`]), or `--spec JSON -- program args…`.
pub fn main() -> std::process::ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "--probe") {
        // A directory to try a call's set-up in (the daemon gives one of its
        // state directory: /tmp may be read-only in a container).
        let scratch = args.get(2).map(std::path::PathBuf::from).unwrap_or_else(std::env::temp_dir);
        let probe = super::probe_here(&scratch);
        println!("{}", serde_json::to_string(&probe).unwrap_or_default());
        return std::process::ExitCode::SUCCESS;
    }
    if args.get(1).is_some_and(|a| a == "--pdf-text") {
        return super::pdf::helper_main(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == "--warm") {
        std::process::exit(warm());
    }
    if args.get(1).is_some_and(|a| a == "--user-namespace") {
        let parent = args.get(2).and_then(|p| p.to_str()?.parse().ok()).unwrap_or(-1);
        std::process::exit(make_user_namespace(0, parent));
    }
    if args.get(1).is_some_and(|a| a == "--zygote") {
        std::process::exit(super::zygote::main(args.get(2).map(OsString::as_os_str)));
    }
    let (spec, command) = match parse_args(&args) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("agentd-sandbox: {e}");
            eprintln!("usage: agentd-sandbox --probe | --spec JSON -- PROGRAM [ARG...]");
            return std::process::ExitCode::from(2);
        }
    };
    let code = run(&spec, &command);
    std::process::exit(code)
}

fn parse_args(args: &[OsString]) -> Result<(Spec, Vec<CString>), String> {
    if args.get(1).is_none_or(|a| a != "--spec") || args.get(3).is_none_or(|a| a != "--") || args.len() < 5 {
        return Err("bad arguments".into());
    }
    let spec: Spec = serde_json::from_slice(args[2].as_bytes()).map_err(|e| format!("bad spec: {e}"))?;
    let command = args[4..]
        .iter()
        .map(|a| CString::new(a.as_bytes()).map_err(|_| "an argument holds a NUL byte".to_owned()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((spec, command))
}

/// Where the report goes instead of [`Spec::report`]'s file: the socket
/// a warm helper got its call on (-1: none).
static REPORT_FD: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(-1);

/// A helper started ahead of its call: waits for the call on stdin (a
/// Unix socket: see [`super::WarmRequest`]), takes its working directory,
/// environment and stdin (the gate's control socket, or `/dev/null`), then
/// runs it exactly as `--spec` does. Nothing of another call is in this
/// process: it serves one call and exits.
pub(crate) fn warm() -> i32 {
    // Not outliving the daemon while it waits (`run` sets the call's own);
    // out of reach of `ptrace`, /proc/PID/mem and `pidfd_getfd` of the
    // user's other processes (a command run with the sandbox off), which
    // could otherwise take the call it is about to get and run it
    // unconfined.
    if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() || nix::sys::prctl::set_dumpable(false).is_err() {
        return SETUP_FAILED;
    }
    prepare_user_namespace();
    let (request, gate) = match receive_request() {
        Ok(Some(r)) => r,
        // The daemon closed the socket unused: nothing to do.
        Ok(None) => return 0,
        Err(e) => {
            eprintln!("agentd-sandbox: {e}");
            return SETUP_FAILED;
        }
    };
    // Taken: from here on the call is this helper's (see `TAKEN`).
    if nix::unistd::write(std::io::stdin(), &[super::TAKEN]) != Ok(1) {
        return SETUP_FAILED;
    }
    let spec = request.spec;
    // The socket becomes the report's way back, out of the command's
    // reach (close-on-exec, above what a shell uses).
    match nix::fcntl::fcntl(std::io::stdin(), nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(64)) {
        Ok(fd) => REPORT_FD.store(fd, Ordering::SeqCst),
        Err(e) => return fail(&spec, &format!("keep the control socket: {e}")),
    }
    let stdin = match gate {
        Some(fd) => fd,
        None => match std::fs::File::open("/dev/null") {
            Ok(f) => OwnedFd::from(f),
            Err(e) => return fail(&spec, &format!("open /dev/null: {e}")),
        },
    };
    if let Err(e) = nix::unistd::dup2_stdin(&stdin) {
        return fail(&spec, &format!("stdin: {e}"));
    }
    drop(stdin);
    if let Err(e) = std::env::set_current_dir(&request.cwd) {
        return fail(&spec, &format!("cannot run in {}: {e}", request.cwd.display()));
    }
    // The call's environment, whole.
    let old: Vec<OsString> = std::env::vars_os().map(|(k, _)| k).collect();
    for name in old {
        // SAFETY: this process has one thread.
        unsafe { std::env::remove_var(name) };
    }
    for (name, value) in &request.env {
        if name.is_empty() || name.contains(&b'=') || name.contains(&0) || value.contains(&0) {
            continue;
        }
        // SAFETY: this process has one thread.
        unsafe {
            std::env::set_var(std::ffi::OsStr::from_bytes(name), std::ffi::OsStr::from_bytes(value));
        }
    }
    let command: Result<Vec<CString>, _> = request.command.iter().map(|a| CString::new(a.as_bytes())).collect();
    match command {
        Ok(command) if !command.is_empty() => run(&spec, &command),
        _ => fail(&spec, "bad command"),
    }
}

/// The call, from stdin: its length, then its JSON (the gate's control
/// socket alongside); `None` at once-closed.
fn receive_request() -> Result<Option<(super::WarmRequest, Option<OwnedFd>)>, String> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::io::Read;
    use std::os::fd::FromRawFd;
    let mut head = [0u8; 4];
    let mut space = nix::cmsg_space!([std::os::fd::RawFd; 1]);
    let (got, mut fds) = loop {
        let mut iov = [std::io::IoSliceMut::new(&mut head)];
        match recvmsg::<()>(0, &mut iov, Some(space.as_mut_slice()), MsgFlags::MSG_CMSG_CLOEXEC) {
            Ok(msg) => {
                let mut fds = Vec::new();
                for c in msg.cmsgs().map_err(|e| format!("control message: {e}"))? {
                    if let ControlMessageOwned::ScmRights(list) = c {
                        // SAFETY: the kernel just gave these descriptors.
                        fds.extend(list.into_iter().map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }));
                    }
                }
                break (msg.bytes, fds);
            }
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(format!("read the call: {e}")),
        }
    };
    if got == 0 {
        return Ok(None);
    }
    let mut stdin = std::io::stdin().lock();
    if got < head.len() {
        stdin.read_exact(&mut head[got..]).map_err(|e| format!("read the call: {e}"))?;
    }
    let len = u32::from_le_bytes(head) as usize;
    if len > super::WARM_REQUEST_MAX {
        return Err("the call is too large".into());
    }
    let mut body = vec![0u8; len];
    stdin.read_exact(&mut body).map_err(|e| format!("read the call: {e}"))?;
    let request: super::WarmRequest = serde_json::from_slice(&body).map_err(|e| format!("bad call: {e}"))?;
    if fds.len() > 1 {
        return Err("more than one descriptor came with the call".into());
    }
    Ok(Some((request, fds.pop())))
}

fn run(spec: &Spec, command: &[CString]) -> i32 {
    // Die with the daemon; if it is already gone, do not start.
    let death = if spec.namespaces { Signal::SIGKILL } else { Signal::SIGTERM };
    if nix::sys::prctl::set_pdeathsig(death).is_err() || nix::unistd::getppid().as_raw() != spec.parent {
        return fail(spec, "the daemon is gone");
    }
    catch_term();
    if spec.namespaces {
        if let Err(e) = enter_namespaces(spec) {
            return fail(spec, &e);
        }
        // SAFETY: this process has one thread.
        match unsafe { fork() } {
            Err(e) => fail(spec, &format!("fork: {e}")),
            Ok(ForkResult::Child) => {
                // PID 1 of the call: dies with the outer helper, which the
                // daemon kills, and then the kernel ends the namespace.
                if nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_err() {
                    std::process::exit(SETUP_FAILED);
                }
                // The call's own /proc (only its processes). The probe saw
                // it could be mounted; if it cannot now, nothing runs (the
                // container's /proc would show every process, and the
                // Unix-socket wall reads the call's processes there).
                if let Err(e) = mount_own_proc() {
                    std::process::exit(fail(spec, &format!("mount the call's own /proc: {e}")));
                }
                std::process::exit(supervise(spec, command))
            }
            Ok(ForkResult::Parent { child }) => {
                let_go_of_output();
                wait_forwarding(child)
            }
        }
    } else {
        // Without namespaces: this process is the subreaper of the call.
        if nix::sys::prctl::set_child_subreaper(true).is_err() {
            return fail(spec, "cannot become a child subreaper");
        }
        supervise(spec, command)
    }
}

/// Points this process's own stdout and stderr at `/dev/null` once the
/// command holds the call's output pipes: they then end when the
/// command's processes are gone, not when the helper is (whose report
/// carries anything it has to say).
fn let_go_of_output() {
    if let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") {
        let _ = nix::unistd::dup2_stdout(&null);
        let _ = nix::unistd::dup2_stderr(&null);
    }
}

/// Mounts a procfs of the PID namespace this process is in over `/proc`.
/// The kernel refuses where the /proc it would cover has parts masked
/// (a container runtime's default, Kubernetes' `procMount: Default`).
pub(crate) fn mount_own_proc() -> nix::Result<()> {
    use nix::mount::MsFlags;
    nix::mount::mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
}

/// Writes why the sandbox could not be set up and returns the exit code.
fn fail(spec: &Spec, why: &str) -> i32 {
    write_report(spec, &Report { leftovers: 0, error: Some(why.to_owned()), status: None, ended: false });
    eprintln!("agentd-sandbox: {why}");
    SETUP_FAILED
}

fn write_report(spec: &Spec, report: &Report) {
    use std::os::unix::fs::OpenOptionsExt;
    let fd = REPORT_FD.load(Ordering::SeqCst);
    if fd >= 0 {
        // SAFETY: the socket this process keeps open until it exits.
        let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let body = serde_json::to_vec(report).unwrap_or_default();
        let mut written = 0;
        while written < body.len() {
            match nix::unistd::write(socket, &body[written..]) {
                Ok(n) => written += n,
                Err(Errno::EINTR) => {}
                Err(_) => break,
            }
        }
        return;
    }
    if let Some(path) = &spec.report {
        // Not through a link or into a FIFO a command put there.
        let _ = std::fs::remove_file(path);
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .mode(0o600)
            .open(path)
        {
            let _ = file.write_all(&serde_json::to_vec(report).unwrap_or_default());
        }
    }
}

fn catch_term() {
    let action =
        signal::SigAction::new(SigHandler::Handler(on_term), signal::SaFlags::empty(), signal::SigSet::empty());
    for sig in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { signal::sigaction(sig, &action) };
    }
}

/// New user, PID, mount, IPC and UTS namespaces, this user mapped to
/// itself, and the filesystem laid out for the profile: everything
/// read-only (so not even metadata such as modes or setuid bits can be
/// changed outside), the workspace roots (workspace_write) and the call's
/// own directory writable, the protected files and the daemon's state
/// read-only again, and the daemon's socket directory hidden.
/// A user namespace made ahead of its call by [`prepare_user_namespace`]
/// (the helper is single-threaded: a lock nobody waits on).
static PREPARED: std::sync::Mutex<Option<OwnedFd>> = std::sync::Mutex::new(None);

/// Makes the call's user namespace now, while the helper waits for its
/// call (off the call's path); [`enter_namespaces`] joins it. Nothing is
/// lost if it cannot be made: the call makes it then.
pub(crate) fn prepare_user_namespace() {
    if let Ok(made) = user_namespace(false) {
        *PREPARED.lock().unwrap_or_else(|e| e.into_inner()) = Some(made);
    }
}

/// A new user namespace mapping only this process's uid and gid, made by a
/// child that is then killed. Its maps must be written by a process in it,
/// and only a dumpable process may write its own (a non-dumpable one's
/// /proc files are root's); the helper itself must never be dumpable (a
/// process of the user's opening its memory while it is, even for an
/// instant, keeps that access after: the call's request and environment,
/// its descriptors), so a child with nothing of the helper's — every
/// descriptor closed, no call received yet or none in its memory that
/// matters — makes the namespace, and the helper joins it (its owner's uid
/// gives it that right). What the helper joins is checked: a direct child
/// of its own user namespace, with exactly these maps.
/// `fresh`: the helper holds a call already, so the child execs a fresh
/// image of the helper first (a dumpable copy of this memory would give the
/// call away).
fn user_namespace(fresh: bool) -> Result<OwnedFd, String> {
    use std::io::Read;
    let (mut ready, done) = std::io::pipe().map_err(|e| format!("a pipe: {e}"))?;
    let parent = nix::unistd::getpid().as_raw();
    // SAFETY: this process has one thread.
    match unsafe { fork() }.map_err(|e| format!("fork: {e}"))? {
        ForkResult::Child => {
            let done = done.as_raw_fd() as u32;
            // SAFETY: closes every descriptor but the pipe's write end; a
            // child that could not is never made dumpable.
            let closed = unsafe {
                (done == 0 || nix::libc::syscall(nix::libc::SYS_close_range, 0u32, done - 1, 0u32) == 0)
                    && nix::libc::syscall(nix::libc::SYS_close_range, done + 1, u32::MAX, 0u32) == 0
            };
            if !closed {
                std::process::exit(SETUP_FAILED);
            }
            if fresh {
                // A call's request is in this memory: a fresh image of the
                // helper makes the namespace instead (`--user-namespace
                // PARENT`, told on its stdin), with no environment and `/`
                // as its directory (nothing of the call's).
                let parent = std::ffi::CString::new(parent.to_string()).unwrap_or_default();
                // SAFETY: dup2 onto stdin, chdir, then exec.
                unsafe {
                    if nix::libc::dup2(done as i32, 0) == 0 && nix::libc::chdir(c"/".as_ptr()) == 0 {
                        let args = [
                            c"agentd-sandbox".as_ptr(),
                            c"--user-namespace".as_ptr(),
                            parent.as_ptr(),
                            std::ptr::null(),
                        ];
                        let env = [std::ptr::null()];
                        nix::libc::execve(c"/proc/self/exe".as_ptr(), args.as_ptr(), env.as_ptr());
                    }
                }
                std::process::exit(SETUP_FAILED);
            }
            std::process::exit(make_user_namespace(done as i32, parent));
        }
        ForkResult::Parent { child } => {
            drop(done);
            let mut byte = [0u8; 1];
            let said = ready.read(&mut byte);
            let ns = match said {
                Ok(1) => std::fs::File::open(format!("/proc/{child}/ns/user"))
                    .map(OwnedFd::from)
                    .map_err(|e| format!("the user namespace: {e}")),
                _ => Err("a user namespace could not be made".to_owned()),
            };
            let _ = nix::sys::signal::kill(child, Signal::SIGKILL);
            // Reaped, within bounds: a traced child's end is its tracer's
            // to see first; then it is left (the daemon, its subreaper, or
            // this helper's exit takes it).
            use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
            for _ in 0..50 {
                match waitpid(child, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::StillAlive) => std::thread::sleep(std::time::Duration::from_millis(2)),
                    _ => break,
                }
            }
            let ns = ns?;
            // A child of ours, not a namespace nested further in.
            const NS_GET_PARENT: nix::libc::c_ulong = 0xb702;
            // SAFETY: an ioctl on a namespace descriptor; it returns a new one.
            let parent = unsafe { nix::libc::ioctl(ns.as_raw_fd(), NS_GET_PARENT as _) };
            if parent < 0 {
                return Err(format!("the user namespace's parent: {}", std::io::Error::last_os_error()));
            }
            // SAFETY: the kernel just gave this descriptor.
            let parent = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(parent) };
            let ours = std::fs::metadata("/proc/self/ns/user").map_err(|e| format!("our user namespace: {e}"))?;
            let theirs = nix::sys::stat::fstat(&parent).map_err(|e| format!("the user namespace's parent: {e}"))?;
            {
                use std::os::unix::fs::MetadataExt;
                if ours.ino() != theirs.st_ino || ours.dev() != theirs.st_dev {
                    return Err("the user namespace made is not a child of the helper's".into());
                }
            }
            Ok(ns)
        }
    }
}

/// In the child that makes a user namespace (or `agentd-sandbox
/// --user-namespace`, with `done` its stdin): makes it, maps this uid and
/// gid, says so on `done`, and waits to be killed. Returns only on failure.
pub(crate) fn make_user_namespace(done: i32, parent: i32) -> i32 {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    // Dying with the helper, which must still be there (it may have died
    // before the death signal was set).
    let made = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).is_ok()
        && nix::unistd::getppid().as_raw() == parent
        && nix::sched::unshare(CloneFlags::CLONE_NEWUSER).is_ok()
        && nix::sys::prctl::set_dumpable(true).is_ok()
        && std::fs::write("/proc/self/setgroups", "deny").is_ok()
        && std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1")).is_ok()
        && std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1")).is_ok();
    if made {
        // SAFETY: a write of one byte to a descriptor this process holds.
        unsafe { nix::libc::write(done, b"1".as_ptr().cast(), 1) };
        loop {
            nix::unistd::pause();
        }
    }
    SETUP_FAILED
}

/// Whether this process's user namespace maps exactly `uid` and `gid` to
/// themselves, and no group may be set.
fn maps_are_only(uid: u32, gid: u32) -> bool {
    let read = |f: &str| std::fs::read_to_string(f).unwrap_or_default();
    let one = |text: String, id: u32| {
        let lines: Vec<Vec<String>> = text.lines().map(|l| l.split_whitespace().map(str::to_owned).collect()).collect();
        lines == vec![vec![id.to_string(), id.to_string(), "1".to_owned()]]
    };
    one(read("/proc/self/uid_map"), uid)
        && one(read("/proc/self/gid_map"), gid)
        && read("/proc/self/setgroups").trim() == "deny"
}

/// Whether this process set its user namespace's inotify limits (read by
/// the probe).
pub(crate) static INOTIFY_LIMITED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Sets the call's own user namespace's inotify limits (this process holds
/// every capability there, having just joined it). Where they cannot be
/// set (no per-namespace counts before Linux 4.9; a read-only /proc/sys, as
/// containers mount it) the call runs without, as the probe found and
/// `daemon/info` says.
fn limit_inotify(most: crate::Inotify) {
    let set = [("max_inotify_instances", most.instances), ("max_inotify_watches", most.watches)]
        .iter()
        .all(|(name, value)| std::fs::write(format!("/proc/sys/user/{name}"), value.to_string()).is_ok());
    INOTIFY_LIMITED.store(set, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn enter_namespaces(spec: &Spec) -> Result<(), String> {
    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    // A network namespace of its own only where the network is gated (see
    // `netns`): where the call has none, seccomp (socket families) with
    // Landlock (TCP) already cut it, more cheaply.
    let mut flags =
        CloneFlags::CLONE_NEWPID | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC | CloneFlags::CLONE_NEWUTS;
    if spec.gate {
        flags |= CloneFlags::CLONE_NEWNET;
    }
    // The user namespace: made ahead, or now; joined, never made here (see
    // `user_namespace`).
    let prepared = PREPARED.lock().unwrap_or_else(|e| e.into_inner()).take();
    let userns = match prepared {
        Some(ns) => ns,
        // Not made ahead: the call is in this memory now.
        None => user_namespace(true)?,
    };
    nix::sched::setns(&userns, CloneFlags::CLONE_NEWUSER).map_err(|e| format!("join the user namespace: {e}"))?;
    drop(userns);
    if !maps_are_only(uid, gid) {
        return Err("the user namespace maps more than the user".into());
    }
    if let Some(most) = spec.max_inotify {
        limit_inotify(most);
    }
    nix::sched::unshare(flags).map_err(|e| format!("unshare namespaces: {e}"))?;
    if spec.gate {
        super::netns::loopback_up()?;
    }
    use nix::mount::{MsFlags, mount};
    mount(None::<&str>, "/", None::<&str>, MsFlags::MS_REC | MsFlags::MS_PRIVATE, None::<&str>)
        .map_err(|e| format!("make mounts private: {e}"))?;
    if spec.profile == SandboxProfile::Off {
        return Ok(());
    }
    let shm = {
        use std::os::unix::fs::DirBuilderExt;
        let dir = spec.tmp.join(".shm");
        std::fs::DirBuilder::new().mode(0o700).create(&dir).ok().map(|()| dir)
    };
    // Layers first, while their upper directories' mount is writable: the
    // overlay keeps a private copy of that mount, so making `/` read-only
    // next leaves the command's writes landing in the upper directory while
    // the directory itself, under `/`, stays read-only to the command.
    if spec.profile == SandboxProfile::WorkspaceWrite {
        for layer in &spec.layers {
            mount_layer(layer).map_err(|e| format!("see {} through a layer: {e}", layer.root.display()))?;
        }
    }
    set_read_only(Path::new("/"), true).map_err(|e| format!("make / read-only: {e}"))?;
    // A /dev/shm of the call's own (POSIX semaphores and shared memory:
    // Python's multiprocessing needs one), nothing of the host's in it: a
    // directory in the call's temp directory (made before `/` is read-only),
    // bound there — cheaper than a tmpfs of its own.
    if let Some(shm) = shm.filter(|_| Path::new("/dev/shm").is_dir()) {
        mount(Some(shm.as_path()), "/dev/shm", None::<&str>, MsFlags::MS_BIND, None::<&str>)
            .map_err(|e| format!("a private /dev/shm: {e}"))?;
        set_read_only(Path::new("/dev/shm"), false).map_err(|e| format!("a private /dev/shm: {e}"))?;
    }
    if spec.profile == SandboxProfile::WorkspaceWrite {
        for layer in &spec.layers {
            set_read_only(&layer.root, false).map_err(|e| format!("make {} writable: {e}", layer.root.display()))?;
        }
        for root in spec.roots.iter().filter(|r| !spec.layers.iter().any(|l| &l.root == *r)).chain(&spec.pin) {
            bind_writable(root).map_err(|e| format!("make {} writable: {e}", root.display()))?;
        }
    }
    if spec.profile == SandboxProfile::WorkspaceWrite {
        // The sandbox's own package caches over the tools' places; protected
        // paths (bound next) stay read-only even beneath one.
        for (source, target) in &spec.caches {
            bind_cache(source, target).map_err(|e| format!("bind a package cache at {}: {e}", target.display()))?;
        }
    }
    for path in &spec.protect {
        bind_read_only(path).map_err(|e| format!("protect {} read-only: {e}", path.display()))?;
    }
    // The call's own directory (temp dir, report): writable again even
    // where a protected state directory covers it.
    if let Some(own) = spec.report.as_deref().and_then(Path::parent) {
        bind_writable(own).map_err(|e| format!("make {} writable: {e}", own.display()))?;
    }
    // The temp directory may lie elsewhere (a short path under /tmp, for
    // sockets): writable again there too.
    if !spec.report.as_deref().and_then(Path::parent).is_some_and(|own| spec.tmp.starts_with(own)) {
        bind_writable(&spec.tmp).map_err(|e| format!("make {} writable: {e}", spec.tmp.display()))?;
    }
    for path in &spec.mask {
        let target = if path.is_dir() { None } else { Some("/dev/null") };
        let result = match target {
            Some(null) => mount(Some(null), path, None::<&str>, MsFlags::MS_BIND, None::<&str>),
            None => mount(
                Some("tmpfs"),
                path,
                Some("tmpfs"),
                MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
                Some("size=4k"),
            ),
        };
        result.map_err(|e| format!("mask {}: {e}", path.display()))?;
    }
    let own = spec.report.as_deref().and_then(Path::parent);
    let hidden = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    for dir in &spec.hide {
        // What stays of a hidden directory: the call's own output
        // directory, or its own temp directory (in the calls' temp base).
        let kept =
            own.filter(|own| own.starts_with(dir)).or_else(|| Some(spec.tmp.as_path()).filter(|t| t.starts_with(dir)));
        match kept {
            None => mount(Some("tmpfs"), dir, Some("tmpfs"), hidden | MsFlags::MS_RDONLY, Some("size=4k"))
                .map_err(|e| format!("hide {}: {e}", dir.display()))?,
            // The call's own directory lies inside: hidden with the rest,
            // then put back in the empty tmpfs, which is then made read-only.
            Some(own) => hide_all_but(dir, own, hidden)?,
        }
    }
    Ok(())
}

/// The outer helper: waits for the supervisor and exits as it did; a
/// SIGTERM is passed on.
fn wait_forwarding(child: Pid) -> i32 {
    loop {
        match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, code)) => return code,
            Ok(WaitStatus::Signaled(_, sig, _)) => return 128 + sig as i32,
            Ok(_) => {}
            Err(Errno::EINTR) => {
                if TERM.swap(false, Ordering::SeqCst) {
                    let _ = signal::kill(child, Signal::SIGTERM);
                }
            }
            Err(_) => return SETUP_FAILED,
        }
    }
}

/// Starts the command confined, reaps every process of the call, answers
/// its connects (the Unix-socket wall), and returns the command's exit
/// code.
fn supervise(spec: &Spec, command: &[CString]) -> i32 {
    // The child reports a failure before exec, or passes the listener of
    // its connect filter, through this socket; on exec it closes
    // (close-on-exec).
    let (reader, writer) = match nix::sys::socket::socketpair(
        nix::sys::socket::AddressFamily::Unix,
        nix::sys::socket::SockType::SeqPacket,
        None,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
    ) {
        Ok(p) => p,
        Err(e) => return fail(spec, &format!("socketpair: {e}")),
    };
    // The gate's endpoint, before the command exists: it names the port.
    let endpoint = match spec.gate {
        false => None,
        true if !spec.namespaces => return fail(spec, "the network gate needs a network namespace"),
        true => match super::netns::Endpoint::open() {
            Ok(e) => Some(e),
            Err(e) => return fail(spec, &e),
        },
    };
    // SAFETY: this process has one thread.
    let shell = match unsafe { fork() } {
        Err(e) => return fail(spec, &format!("fork: {e}")),
        Ok(ForkResult::Child) => {
            drop(reader);
            exec_confined(spec, command, writer, endpoint.as_ref().map(|e| e.port))
        }
        Ok(ForkResult::Parent { child }) => child,
    };
    let_go_of_output();
    drop(writer);
    let (listener, why) = super::unix_wall::receive_setup(reader.as_raw_fd());
    drop(reader);
    if !why.is_empty() {
        reap_for(Duration::from_secs(2));
        return fail(spec, &why);
    }
    if spec.unix_wall && listener.is_none() {
        let _ = signal::kill(shell, Signal::SIGKILL);
        reap_for(Duration::from_secs(2));
        return fail(spec, "the connect filter was not set up");
    }
    // From here on this process forks no more: the wall may use threads.
    let notifier = listener.map(|l| super::unix_wall::Notifier::new(l, &spec.allow_unix));
    let mut status: Option<i32> = None;
    // Reap until the shell exits (foreground) or nothing is left (jobs).
    loop {
        let next = match (&notifier, &endpoint) {
            (None, None) => waitpid(None::<Pid>, None),
            (n, e) => wait_or_answer(n.as_ref(), e.as_ref()),
        };
        match next {
            Ok(WaitStatus::Exited(pid, code)) if pid == shell => status = Some(code),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == shell => status = Some(128 + sig as i32),
            Ok(_) => {}
            Err(Errno::EINTR) => {
                if TERM.swap(false, Ordering::SeqCst) {
                    if nix::unistd::getppid().as_raw() != spec.parent && !spec.namespaces {
                        // The daemon died (PR_SET_PDEATHSIG): nobody will
                        // follow up with SIGKILL, so do it now.
                        signal_all(spec, Signal::SIGKILL);
                        reap_for(Duration::from_secs(2));
                        return 128 + Signal::SIGKILL as i32;
                    }
                    signal_all(spec, Signal::SIGTERM);
                }
            }
            Err(_) => break,
        }
        if status.is_some() && spec.foreground {
            break;
        }
    }
    let leftovers = if spec.foreground { end_leftovers(spec) } else { 0 };
    // The report's status tells the daemon the call is over: only when no
    // process of it is left (one stuck in the kernel may outlast the kill's
    // wait; then the daemon waits for this process's exit instead).
    let all_gone = matches!(waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)), Err(Errno::ECHILD));
    write_report(spec, &Report { leftovers, error: None, status, ended: all_gone });
    status.unwrap_or(SETUP_FAILED)
}

static CHILD: AtomicBool = AtomicBool::new(false);

extern "C" fn on_child(_: nix::libc::c_int) {
    CHILD.store(true, Ordering::SeqCst);
}

/// One step of the supervisor's loop when it answers connects or hands
/// connections to the gate: a child's status if one is ready, else waits
/// for a notification (answered here, then `StillAlive`), a connection to
/// the gate's endpoint (handed over, then `StillAlive`) or a signal
/// (`EINTR`, as a blocking `waitpid` gives).
fn wait_or_answer(
    notifier: Option<&super::unix_wall::Notifier>,
    endpoint: Option<&super::netns::Endpoint>,
) -> nix::Result<WaitStatus> {
    use nix::sys::signal::{SigSet, SigmaskHow};
    static ONCE: std::sync::Once = std::sync::Once::new();
    let watched = {
        let mut set = SigSet::empty();
        for sig in [Signal::SIGCHLD, Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
            set.add(sig);
        }
        set
    };
    ONCE.call_once(|| {
        // Signals arrive only inside ppoll, so none is lost between the
        // check for children and the wait.
        let _ = signal::sigprocmask(SigmaskHow::SIG_BLOCK, Some(&watched), None);
        let action =
            signal::SigAction::new(SigHandler::Handler(on_child), signal::SaFlags::empty(), signal::SigSet::empty());
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { signal::sigaction(Signal::SIGCHLD, &action) };
    });
    match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
        Ok(WaitStatus::StillAlive) => {}
        other => return other,
    }
    if TERM.load(Ordering::SeqCst) {
        return Err(Errno::EINTR);
    }
    // A negative fd is ignored by ppoll.
    let mut fds = [
        nix::libc::pollfd { fd: notifier.map_or(-1, |n| n.fd()), events: nix::libc::POLLIN, revents: 0 },
        nix::libc::pollfd { fd: endpoint.map_or(-1, |e| e.listener_fd()), events: nix::libc::POLLIN, revents: 0 },
    ];
    let open = SigSet::empty();
    // SAFETY: two pollfds and a signal set, all valid for the call.
    let rc = unsafe { nix::libc::ppoll(fds.as_mut_ptr(), 2, std::ptr::null(), open.as_ref()) };
    if rc < 0 {
        let e = Errno::last();
        if e == Errno::EINTR && CHILD.swap(false, Ordering::SeqCst) && !TERM.load(Ordering::SeqCst) {
            return Ok(WaitStatus::StillAlive);
        }
        return Err(e);
    }
    if fds[1].revents & nix::libc::POLLIN != 0
        && let Some(e) = endpoint
    {
        e.hand_over();
    }
    if let Some(n) = notifier {
        if fds[0].revents & nix::libc::POLLIN != 0 {
            n.answer_one();
        } else if fds[0].revents & (nix::libc::POLLHUP | nix::libc::POLLERR) != 0 {
            // No process holds the filter any more (none is left to connect
            // through the gate either): reap what is left.
            return waitpid(None::<Pid>, None);
        }
    }
    Ok(WaitStatus::StillAlive)
}

/// Every catchable signal back to its default disposition, none blocked.
pub(crate) fn default_signals() {
    // The kernel's own call: the C library refuses the two signals it
    // keeps for itself (32 and 33), which `posix_spawn` left ignored. An
    // all-zero `struct sigaction` is the default disposition, no flags, an
    // empty mask, whatever the architecture's layout.
    let default = [0u64; 4];
    for sig in 1..=nix::libc::SIGRTMAX() {
        if sig == nix::libc::SIGKILL || sig == nix::libc::SIGSTOP {
            continue;
        }
        // SAFETY: installs no handler; the kernel reads `default` only.
        unsafe {
            nix::libc::syscall(nix::libc::SYS_rt_sigaction, sig, default.as_ptr(), std::ptr::null_mut::<u64>(), 8usize)
        };
    }
    let _ = signal::sigprocmask(SigmaskHow::SIG_SETMASK, Some(&signal::SigSet::empty()), None);
}

/// In the shell's child: confine, then exec the command. Never returns.
fn exec_confined(spec: &Spec, command: &[CString], report: OwnedFd, gate_port: Option<u16>) -> ! {
    let result = (|| -> Result<(), String> {
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(|e| format!("pdeathsig: {e}"))?;
        // Every signal as a program expects it: the default disposition
        // (the supervisor's handlers, and what is ignored from above —
        // SIGPIPE by Rust's runtime, SIGXFSZ by the daemon — would be
        // inherited, and `yes | head -1` would fail with EPIPE instead of
        // ending quietly) and nothing blocked.
        default_signals();
        // The working directory was resolved before the mounts: resolve it
        // again, or it stays on the read-only mount under the binds.
        if let Ok(cwd) = std::env::current_dir() {
            std::env::set_current_dir(&cwd).map_err(|e| format!("chdir {}: {e}", cwd.display()))?;
        }
        // Descriptors the daemon itself inherited stay out of the command.
        // SAFETY: marks descriptors close-on-exec; takes no pointers.
        let _ =
            unsafe { nix::libc::syscall(nix::libc::SYS_close_range, 3u32, u32::MAX, nix::libc::CLOSE_RANGE_CLOEXEC) };
        if let Some(port) = gate_port {
            super::netns::prepare_command(port)?;
        }
        // Counted in the call's own user namespace: the call's processes
        // only (without one it would count every process of the user's).
        if spec.namespaces
            && let Some(most) = spec.max_processes
        {
            use nix::sys::resource::{Resource, setrlimit};
            setrlimit(Resource::RLIMIT_NPROC, most, most).map_err(|e| format!("limit the processes: {e}"))?;
        }
        if spec.profile != SandboxProfile::Off {
            super::confine::drop_capabilities()?;
            super::confine::landlock(spec)?;
            super::confine::seccomp(spec)?;
            if spec.unix_wall {
                let listener = super::unix_wall::install_notifier()?;
                super::unix_wall::send_fd(report.as_raw_fd(), listener.as_raw_fd())?;
            }
        }
        Ok(())
    })();
    let error = match result {
        Ok(()) => match nix::unistd::execvp(&command[0], command) {
            Err(e) => format!("cannot run {}: {e}", command[0].to_string_lossy()),
            Ok(never) => match never {},
        },
        Err(e) => e,
    };
    let mut file = std::fs::File::from(report);
    let _ = file.write_all(error.as_bytes());
    std::process::exit(SETUP_FAILED)
}

/// Sends `sig` to every process of the call but this one.
fn signal_all(spec: &Spec, sig: Signal) {
    if spec.namespaces {
        // PID 1 of the namespace: -1 is every other process in it.
        let _ = signal::kill(Pid::from_raw(-1), sig);
    } else {
        for pid in crate::descendants(std::process::id() as i32) {
            let _ = signal::kill(Pid::from_raw(pid), sig);
        }
    }
}

/// After the shell exited: lets what it left finish for a moment (its
/// output still reaches the daemon), then kills the rest. Returns how many
/// processes had to be killed.
fn end_leftovers(spec: &Spec) -> usize {
    let deadline = Instant::now() + Duration::from_millis(spec.drain_ms);
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() >= deadline {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return 0,
        }
    }
    let mut killed = 0;
    if spec.namespaces {
        let _ = signal::kill(Pid::from_raw(-1), Signal::SIGKILL);
        killed = reap_for(Duration::from_secs(5));
    } else {
        // Kill until none is left: one that forked between the scan and
        // the kill is found on the next round.
        for _ in 0..100 {
            let left = crate::descendants(std::process::id() as i32);
            if left.is_empty() {
                break;
            }
            killed = killed.max(left.len());
            for pid in left {
                let _ = signal::kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            reap_for(Duration::from_millis(200));
        }
    }
    killed
}

/// Reaps children until there are none, or for at most `limit`; returns
/// how many were reaped.
fn reap_for(limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut n = 0;
    loop {
        match waitpid(None::<Pid>, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => {
                if Instant::now() >= deadline {
                    return n;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(_) => n += 1,
            Err(Errno::EINTR) => {}
            Err(_) => return n,
        }
    }
}
