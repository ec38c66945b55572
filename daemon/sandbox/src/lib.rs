//! `agentd-sandbox`: the wall around every process agentd's Bash tool
//! starts, as its own crate (it does not depend on the daemon; the daemon
//! depends on it).
//!
//! - [`helper`] is the small single-threaded executable's code
//!   (`agentd-sandbox`, a thin binary of the `agentd` package): Landlock
//!   ([`confine`]), seccomp, user/PID/mount namespaces, the Unix-socket wall
//!   ([`unix_wall`]), the network namespace whose one way out is the
//!   daemon's gate ([`netns`]), then `exec` of the command; and Read's PDF
//!   parser in a process of its own ([`pdf`]); [`zygote`] forks the
//!   helpers that wait for their calls, so each costs a `fork`, not an
//!   `exec`.
//! - Its wire format with the daemon: [`Spec`] (what one call's helper is
//!   told), [`WarmRequest`] (the call sent to a helper started ahead of
//!   it), [`Report`] (what happened), [`Probe`] (what the kernel offers).
pub mod confine;
pub mod helper;
pub mod mounts;
pub mod netns;
pub mod pdf;
pub mod unix_wall;
pub mod zygote;

use std::path::PathBuf;

use agentd_protocol::session::SandboxProfile;
use serde::{Deserialize, Serialize};

/// Name of the helper executable, looked for beside the daemon's own.
pub const HELPER_NAME: &str = "agentd-sandbox";

/// What one call's helper is told.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Spec {
    /// The profile.
    pub profile: SandboxProfile,
    /// The workspace roots (cwd and added directories): writable in
    /// `workspace_write`, readable in `read_only`.
    pub roots: Vec<PathBuf>,
    /// More paths `read_only` may read (git's user configuration, the
    /// toolchains on `PATH`).
    pub read: Vec<PathBuf>,
    /// Existing paths bound read-only (files that configure agentd or run
    /// code later).
    pub protect: Vec<PathBuf>,
    /// The call's private temp directory (writable, `TMPDIR`).
    pub tmp: PathBuf,
    /// Network for `workspace_write` (`read_only` never has it).
    pub network: bool,
    /// Give the call its own user, PID and mount namespaces.
    pub namespaces: bool,
    /// The daemon's pid: the helper refuses to start for another parent.
    pub parent: i32,
    /// A foreground call ends with its shell; a background job with its
    /// last process.
    pub foreground: bool,
    /// How long processes left by a finished shell may take to finish.
    pub drain_ms: u64,
    /// Where the helper writes its [`Report`] (its directory, which holds
    /// the temp directory too, stays writable for the helper).
    pub report: Option<PathBuf>,
    /// Directories hidden under an empty read-only tmpfs (the daemon's
    /// socket directory).
    #[serde(default)]
    pub hide: Vec<PathBuf>,
    /// The call runs without anybody having approved it: its environment
    /// keeps no secrets (only paths, locale and toolchain variables).
    #[serde(default)]
    pub scrub_env: bool,
    /// Directories bound onto themselves (writable) so that they cannot be
    /// renamed or replaced (`.git`, whose hooks and config are protected).
    #[serde(default)]
    pub pin: Vec<PathBuf>,
    /// Files and directories `Read` deny rules name: covered (an empty
    /// file or directory in their place) so no command can read them.
    #[serde(default)]
    pub mask: Vec<PathBuf>,
    /// Every `connect` goes through the supervisor, which lets a command
    /// reach only the Unix sockets of its own call and [`Spec::allow_unix`]
    /// (see [`unix_wall`]).
    #[serde(default)]
    pub unix_wall: bool,
    /// Unix sockets outside the call the session allows.
    #[serde(default)]
    pub allow_unix: Vec<PathBuf>,
    /// The network is gated: the call gets a network namespace of its own
    /// and its one way out is the gate, whose control socket is the
    /// helper's stdin (see [`netns`]).
    #[serde(default)]
    pub gate: bool,
    /// Package managers' caches in `workspace_write`: `(source, target)`,
    /// the directory of agentd's state that holds the sandbox's own cache,
    /// bound writable over the place the tool uses (`~/.npm`,
    /// `~/.cargo/registry`, …) in the call's mount namespace. The user's
    /// own caches are never written: what a command plants there reaches
    /// only later confined commands, never the user's own `npm` or `cargo`.
    #[serde(default)]
    pub caches: Vec<(PathBuf, PathBuf)>,
    /// Roots seen through a copy-on-write layer (`workspace_write`, a
    /// foreground call): the root is the overlay's lower directory, and
    /// every write of the call lands in `upper`, which the daemon checks
    /// and applies when the call ends. A root with a layer is not bound
    /// writable.
    #[serde(default)]
    pub layers: Vec<Layer>,
    /// The most processes (and threads) the call may have at once: its
    /// `RLIMIT_NPROC`, which counts in the call's own user namespace, so
    /// one call cannot take the user's whole allowance (with namespaces
    /// only; the kernel does not hold root to it).
    #[serde(default)]
    pub max_processes: Option<u64>,
    /// The most inotify instances and watches the call may have at once:
    /// the limits of its own user namespace (`/proc/sys/user/max_inotify_*`),
    /// which the kernel checks beside the user's, so one call (a runaway
    /// file watcher) cannot take the user's whole allowance (with
    /// namespaces only; root is held to them too).
    #[serde(default)]
    pub max_inotify: Option<Inotify>,
}

/// A call's inotify allowance.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct Inotify {
    /// Instances (`inotify_init`).
    pub instances: u64,
    /// Watches over all of them.
    pub watches: u64,
}

/// One root's copy-on-write layer: an overlay mounted over `root` in the
/// call's mount namespace (`userxattr`: an unprivileged overlay), its
/// upper and work directories made by the daemon on the root's own file
/// system where it can, so a change is applied by a rename.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Layer {
    /// The workspace root, the overlay's lower directory and mount point.
    pub root: PathBuf,
    /// Where the call's changes land (whiteouts for deletions).
    pub upper: PathBuf,
    /// The overlay's work directory (same file system as `upper`).
    pub work: PathBuf,
}

/// What a helper started ahead of its call (`agentd-sandbox --warm`) is
/// sent once the call is known, on its stdin (a Unix socket): a 4-byte
/// little-endian length, then this as JSON, with the gate's control socket
/// passed alongside (`SCM_RIGHTS`) when the network is gated. The helper
/// answers [`TAKEN`] once it holds it all, then writes its [`Report`] back
/// on the same socket instead of a file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WarmRequest {
    /// What the call's helper is told.
    pub spec: Spec,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The command's whole environment, names and values as bytes.
    pub env: Vec<(Vec<u8>, Vec<u8>)>,
}

/// What a helper started ahead of its call writes back first, once it
/// holds the whole [`WarmRequest`] and before it does anything of it: a
/// helper that dies before this byte never ran anything of the call, so
/// the daemon may hand the call to another.
pub const TAKEN: u8 = b'+';

/// The largest [`WarmRequest`] a helper accepts.
pub const WARM_REQUEST_MAX: usize = 64 * 1024 * 1024;

/// What the helper tells the daemon after the call.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Report {
    /// Processes the shell left running, killed at its end.
    pub leftovers: usize,
    /// The sandbox could not be applied: nothing ran.
    pub error: Option<String>,
    /// How the shell ended (its exit code, or 128 + the signal): what the
    /// helper's own exit code says too (a helper forked by the zygote is
    /// not the daemon's child, whose exit code the daemon cannot read).
    #[serde(default)]
    pub status: Option<i32>,
    /// No process of the call runs any more: the report, sent before the
    /// helper exits, ends the call, so the daemon need not wait for its
    /// namespaces to be torn down.
    #[serde(default)]
    pub ended: bool,
}

/// What the kernel offers, as the helper found it (`agentd-sandbox --probe`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Probe {
    /// Landlock ABI version, 0 when none.
    pub landlock_abi: u32,
    /// Whether a seccomp filter could be installed.
    pub seccomp: bool,
    /// Whether user + PID + mount namespaces could be made.
    pub namespaces: bool,
    /// Whether connects can be handed to a supervisor that acts for the
    /// command (seccomp user notification and `pidfd_getfd`): the
    /// Unix-socket wall.
    #[serde(default)]
    pub unix_wall: bool,
    /// Whether a call can have a network namespace of its own with
    /// loopback up (the network gate).
    #[serde(default)]
    pub network_namespace: bool,
    /// Whether a call's roots can be seen through a copy-on-write layer
    /// (an unprivileged overlay in the call's mount namespace).
    #[serde(default)]
    pub overlay: bool,
    /// Why the namespaces wall is missing when the namespaces themselves
    /// can be made (their `/proc` cannot).
    #[serde(default)]
    pub namespaces_error: Option<String>,
    /// Whether a call's user namespace can be given inotify limits of its
    /// own (`/proc/sys/user` writable there).
    #[serde(default)]
    pub inotify_limits: bool,
    /// The first thing that failed.
    pub error: Option<String>,
}

/// Probes this process's kernel (run inside the helper), trying a call's
/// set-up with `scratch` as its workspace and temp directory.
pub fn probe_here(scratch: &std::path::Path) -> Probe {
    let mut probe = Probe { landlock_abi: confine::landlock_abi(), ..Probe::default() };
    // Each feature is tried for real, in a child that then exits.
    let spec = Spec {
        profile: SandboxProfile::ReadOnly,
        roots: Vec::new(),
        read: Vec::new(),
        protect: Vec::new(),
        tmp: scratch.to_owned(),
        network: false,
        namespaces: false,
        parent: 0,
        foreground: true,
        drain_ms: 0,
        report: None,
        hide: Vec::new(),
        pin: Vec::new(),
        mask: Vec::new(),
        scrub_env: false,
        unix_wall: false,
        allow_unix: Vec::new(),
        gate: false,
        caches: Vec::new(),
        layers: Vec::new(),
        max_processes: None,
        max_inotify: None,
    };
    // The whole namespace set-up, as a workspace_write call does it, and
    // the call's own /proc, mounted by the first process of the new PID
    // namespace (a masked /proc, a container's default, refuses it: the
    // call would see every process of the container).
    let ns_spec = Spec { profile: SandboxProfile::WorkspaceWrite, roots: vec![scratch.to_owned()], ..spec.clone() };
    let mut ns_error = None;
    probe.namespaces = in_child(|| match helper::enter_namespaces(&ns_spec) {
        Ok(()) => in_child(|| helper::mount_own_proc().is_ok()),
        Err(_) => false,
    });
    if !probe.namespaces && in_child(|| helper::enter_namespaces(&ns_spec).is_ok()) {
        ns_error = Some(
            "a PID namespace's own /proc cannot be mounted (is /proc masked? a container needs an unmasked /proc)"
                .to_owned(),
        );
    }
    probe.namespaces_error = ns_error;
    probe.network_namespace =
        probe.namespaces && in_child(|| helper::enter_namespaces(&Spec { gate: true, ..ns_spec.clone() }).is_ok());
    probe.overlay = probe.namespaces && probe_overlay(scratch, &ns_spec);
    let limited = Spec {
        profile: SandboxProfile::Off,
        max_inotify: Some(Inotify { instances: 64, watches: 8192 }),
        ..ns_spec.clone()
    };
    probe.inotify_limits = probe.namespaces
        && in_child(|| {
            helper::enter_namespaces(&limited).is_ok()
                && helper::INOTIFY_LIMITED.load(std::sync::atomic::Ordering::Relaxed)
        });
    let landlock_ok = probe.landlock_abi > 0 && in_child(|| confine::landlock(&spec).is_ok());
    probe.seccomp = in_child(|| confine::seccomp(&spec).is_ok());
    probe.unix_wall = probe.seccomp
        && in_child(|| confine::seccomp(&spec).is_ok() && unix_wall::install_notifier().is_ok())
        && unix_wall::can_take_fds();
    if probe.landlock_abi == 0 {
        probe.error = Some("the kernel has no Landlock (or it is disabled)".into());
    } else if !landlock_ok {
        probe.error = Some("a Landlock ruleset could not be enforced".into());
    } else if !probe.seccomp {
        probe.error = Some("a seccomp filter could not be installed".into());
    }
    probe
}

/// Whether an overlay can be mounted over a root in a call's mount
/// namespace, with its upper directory beside the root (as the daemon
/// makes it), and a file written through it lands in the upper one.
fn probe_overlay(scratch: &std::path::Path, ns_spec: &Spec) -> bool {
    let base = scratch.join(".layer-probe");
    let (root, upper, work) = (base.join("root"), base.join("upper"), base.join("work"));
    if [&root, &upper, &work].iter().any(|d| std::fs::create_dir_all(d).is_err()) {
        return false;
    }
    let layer = Layer { root: root.clone(), upper: upper.clone(), work };
    let spec = Spec { roots: vec![root.clone()], layers: vec![layer], ..ns_spec.clone() };
    let ok = in_child(|| helper::enter_namespaces(&spec).is_ok() && std::fs::write(root.join("probe"), b"1").is_ok())
        && upper.join("probe").is_file()
        && !root.join("probe").exists();
    mounts::remove_layer_dir(&base);
    ok
}

/// Runs `f` in a forked child and tells whether it returned true.
#[allow(unsafe_code)]
fn in_child(f: impl FnOnce() -> bool) -> bool {
    use nix::sys::wait::{WaitStatus, waitpid};
    // SAFETY: called only from the single-threaded helper.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Child) => std::process::exit(if f() { 0 } else { 1 }),
        Ok(nix::unistd::ForkResult::Parent { child }) => matches!(waitpid(child, None), Ok(WaitStatus::Exited(_, 0))),
        Err(_) => false,
    }
}

/// Pids of every live descendant of `root` (children, their children, …),
/// from one scan of `/proc`.
pub fn descendants(root: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    let parents: Vec<(i32, i32)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, parent_of(pid)?)))
        .collect();
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(p) = frontier.pop() {
        for (pid, _) in parents.iter().filter(|(_, ppid)| *ppid == p) {
            if !out.contains(pid) && *pid != root {
                out.push(*pid);
                frontier.push(*pid);
            }
        }
    }
    out
}

/// The parent of `pid`, from `/proc/PID/stat`.
pub fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = stat.rsplit_once(')').map(|(_, r)| r)?;
    rest.split_whitespace().nth(1)?.parse::<i32>().ok()
}
