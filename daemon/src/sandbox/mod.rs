//! The kernel wall around every process the Bash tool starts (issue 11):
//! whatever the permission engine misjudges, a command can only do what
//! its sandbox profile lets the kernel allow.
//!
//! - [`helper`] is the small executable that applies it (Landlock,
//!   seccomp, user/PID/mount namespaces) and then execs `bash -c`.
//! - [`Facility`] is what the daemon found at start-up: the helper's path,
//!   the Landlock ABI, whether namespaces work. `daemon/info` reports it.
//! - `permission::policy::profile_for` is the pure choice of a profile for
//!   one call.
//! - [`Spec`] is what one call's helper is told: the profile, the
//!   workspace roots, the private temp directory, what to protect.

pub mod gate;
pub mod guard;
pub mod layer;
pub mod objects;
pub mod pdf;
pub mod placeholders;

pub use agentd_sandbox::{HELPER_NAME, Probe, Report, Spec, WARM_REQUEST_MAX, WarmRequest, helper};

use std::path::{Path, PathBuf};

pub use guard::{CallGuard, Finished, parents_to_pin, quarantine_live};

use agentd_protocol::methods::SandboxStatus;
use agentd_protocol::session::SandboxProfile;

/// What git obeys in a repository's own directory that the older wall
/// binds read-only (the layer judges `.git` whole: `layer::judge`).
const GIT_OBEYED: [&str; 2] = [".git/hooks", ".git/config"];

/// Files inside a workspace root that configure agentd or run code later,
/// for the older wall (background jobs, calls without the layer):
/// read-only even in `workspace_write`, so an approved command cannot plant
/// a hook or a rule for the next session, whether or not they exist (an
/// absent one gets a placeholder for the call, see [`placeholders`]). The
/// names are the one table's ([`crate::permission::SETTINGS_NAMES`]), with
/// what git obeys in `.git`.
pub fn protected() -> impl Iterator<Item = &'static str> + Clone {
    GIT_OBEYED.into_iter().chain(crate::permission::SETTINGS_NAMES.iter().copied())
}

/// How the daemon was told to treat the sandbox.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// The helper executable; beside the daemon's own when `None`.
    pub helper: Option<PathBuf>,
    /// Act as if the kernel had no Landlock (`--no-sandbox`): nothing is
    /// confined and commands that would run without asking ask.
    pub disabled: bool,
    /// Act as if the kernel could not apply these walls
    /// (`--sandbox-without`, to try a container's conditions).
    pub without: Vec<String>,
    /// Refuse to start unless every wall stands (`--require-sandbox`).
    pub require: bool,
    /// The most memory a call's processes may use together, in bytes
    /// (`--call-memory-limit`): held by a cgroup per call where the daemon
    /// can make one.
    pub memory_limit: Option<u64>,
}

/// The walls of the sandbox, by the names `daemon/info` gives them.
pub const WALLS: &[&str] = &["filesystem", "syscalls", "namespaces", "unix_sockets", "network", "layer"];

/// What gives a container (or a machine) a missing wall, for
/// `--require-sandbox`'s message.
fn what_provides(wall: &str) -> &'static str {
    match wall {
        "filesystem" => "a kernel with Landlock enabled (lsm=…,landlock; not gVisor)",
        "syscalls" => "a container seccomp profile that allows seccomp(2) and the landlock_* calls",
        "namespaces" => {
            "unprivileged user namespaces (user.max_user_namespaces > 0; a container seccomp profile that allows \
             unshare (without CLONE_NEWUSER too), setns of a user namespace, mount and mount_setattr, as \
             deploy/seccomp/agentd.json does), an unmasked /proc \
             (Kubernetes: procMount: Unmasked with hostUsers: false; podman: --security-opt unmask=/proc/*), \
             and no AppArmor profile that denies mount or user namespaces"
        }
        "unix_sockets" => "seccomp user notification and pidfd_getfd (Linux 5.9 or later) and an unmasked /proc",
        "network" => "network namespaces per call (as for namespaces, and /proc/sys/net writable in the call's)",
        "layer" => {
            "unprivileged overlayfs (Linux 5.11 or later) with agentd's state directory on a file system that can be an overlay's upper one (not an overlay itself)"
        }
        _ => "",
    }
}

impl Facility {
    /// Why the daemon must not start under `--require-sandbox`: one line
    /// naming each missing wall and what provides it; `None` at `full`.
    pub fn require_full(&self) -> Option<String> {
        match self.status.level {
            agentd_protocol::methods::SandboxLevel::Full => None,
            agentd_protocol::methods::SandboxLevel::None => Some(format!(
                "--require-sandbox: the sandbox level is none ({}), and it must be full",
                self.status.reason.as_deref().unwrap_or("nothing is confined")
            )),
            agentd_protocol::methods::SandboxLevel::Partial => {
                let missing: Vec<String> = self
                    .status
                    .walls
                    .iter()
                    .filter(|w| !w.applied)
                    .map(|w| {
                        format!(
                            "{} ({}; it needs {})",
                            w.name,
                            w.reason.as_deref().unwrap_or("missing"),
                            what_provides(&w.name)
                        )
                    })
                    .collect();
                Some(format!("--require-sandbox: the sandbox level is partial, missing {}", missing.join("; ")))
            }
        }
    }
}

/// What the daemon can confine with, found once at start-up.
#[derive(Debug, Clone)]
pub struct Facility {
    /// The helper, when found and working.
    pub helper: Option<PathBuf>,
    /// Commands can be confined.
    pub available: bool,
    /// Each call gets its own namespaces.
    pub namespaces: bool,
    /// Connects can be checked by the call's supervisor (the Unix-socket
    /// wall).
    pub unix_wall: bool,
    /// A call can have a network namespace of its own: the network gate.
    pub gate: bool,
    /// A foreground `workspace_write` call's roots can be seen through a
    /// copy-on-write layer (see [`layer`]).
    pub layer: bool,
    /// `daemon/info`'s view of it.
    pub status: SandboxStatus,
    /// Hidden from every confined call (the daemon's socket directory).
    pub hide: Vec<PathBuf>,
    /// The daemon's state directory: read-only to a call whose workspace
    /// holds it (but its own temp directory).
    pub state_dir: Option<PathBuf>,
    /// Where calls' temp directories (`TMPDIR`) are made: a short path
    /// (see [`short_tmp_base`]), hidden from every call but its own; none:
    /// in the call's output directory.
    pub call_tmp: Option<PathBuf>,
    /// Helpers started ahead of their calls (with [`Facility::helper`]).
    pub warm: Option<std::sync::Arc<crate::process::WarmPool>>,
    /// The daemon's process ledger: where every command, helper and
    /// server it starts is recorded until it is over.
    pub ledger: std::sync::Arc<crate::process::Ledger>,
    /// The daemon's record of the placeholders its calls make (none kept
    /// until the daemon sets it: see [`placeholders::Ledger::open`]).
    pub placeholders: std::sync::Arc<placeholders::Ledger>,
    /// Where calls get a cgroup of their own (memory and process limits).
    pub cgroups: std::sync::Arc<crate::process::cgroup::Cgroups>,
}

impl Facility {
    /// Finds the helper and asks it what the kernel offers. Logs a warning
    /// once when commands cannot be confined. What it starts is recorded in
    /// `ledger`.
    pub fn probe(
        config: &SandboxConfig,
        scratch: Option<&std::path::Path>,
        ledger: std::sync::Arc<crate::process::Ledger>,
    ) -> Facility {
        let helper = config.helper.clone().or_else(default_helper);
        // Calls run through the helper, which the daemon moves into their
        // cgroups.
        let cgroups = std::sync::Arc::new(match helper.as_ref().filter(|h| h.is_file()) {
            Some(_) => crate::process::cgroup::Cgroups::probe(config.memory_limit, process_limit()),
            None => crate::process::cgroup::Cgroups::without("no sandbox helper runs the calls", config.memory_limit),
        });
        let processes = |namespaces: bool| agentd_protocol::methods::ProcessLimit {
            per_call: process_limit(),
            enforced: (namespaces && !nix::unistd::getuid().is_root()) || cgroups.limits_pids(),
        };
        let memory = {
            let (per_call_bytes, enforced) = cgroups.memory();
            agentd_protocol::methods::MemoryLimit {
                per_call_bytes,
                enforced,
                reason: cgroups.reason().filter(|_| per_call_bytes.is_some() && !enforced).map(str::to_owned),
            }
        };
        // Held where the probe could set a call's namespace's limits.
        let inotify = |limited: bool| {
            let most = inotify_limit();
            agentd_protocol::methods::InotifyLimit {
                instances_per_call: most.map_or(0, |m| m.instances),
                watches_per_call: most.map_or(0, |m| m.watches),
                enforced: limited && most.is_some(),
            }
        };
        let unavailable = |helper: Option<PathBuf>, reason: String, probe: Probe| {
            tracing::warn!(
                "the Bash sandbox is unavailable ({reason}): commands run unconfined, and those that \
                 would run without asking in the read-only sandbox ask instead"
            );
            Facility {
                available: false,
                namespaces: probe.namespaces && helper.is_some(),
                unix_wall: false,
                gate: false,
                layer: false,
                status: SandboxStatus {
                    available: false,
                    walls: walls(&probe, Some(&reason)),
                    reason: Some(reason),
                    landlock_abi: probe.landlock_abi,
                    seccomp: probe.seccomp,
                    pid_namespaces: probe.namespaces && helper.is_some(),
                    helper: helper.as_ref().map(|h| h.display().to_string()),
                    network_allow_all: false,
                    level: agentd_protocol::methods::SandboxLevel::None,
                    warm_helpers: None,
                    processes: processes(false),
                    inotify: inotify(false),
                    memory: memory.clone(),
                },
                warm: helper
                    .clone()
                    .map(|h| std::sync::Arc::new(crate::process::WarmPool::new(h, ledger.clone(), cgroups.clone()))),
                helper,
                hide: Vec::new(),
                state_dir: None,
                call_tmp: None,
                ledger: ledger.clone(),
                placeholders: Default::default(),
                cgroups: cgroups.clone(),
            }
        };
        let Some(path) = helper.filter(|h| h.is_file()) else {
            let why = format!("the helper executable {HELPER_NAME} was not found beside agentd (--sandbox-helper)");
            return unavailable(None, why, Probe::default());
        };
        let probe = match std::process::Command::new(&path).arg("--probe").args(scratch).output() {
            Ok(out) if out.status.success() => serde_json::from_slice::<Probe>(&out.stdout).unwrap_or_else(|e| Probe {
                error: Some(format!("the helper's probe answered nonsense: {e}")),
                ..Probe::default()
            }),
            Ok(out) => Probe { error: Some(format!("the helper's probe failed: {}", out.status)), ..Probe::default() },
            Err(e) => {
                Probe { error: Some(format!("cannot run the helper {}: {e}", path.display())), ..Probe::default() }
            }
        };
        let mut probe = probe;
        for wall in &config.without {
            match wall.as_str() {
                "filesystem" => {
                    probe.landlock_abi = 0;
                    probe.error = Some("Landlock is off (--sandbox-without filesystem)".into());
                }
                "syscalls" => {
                    probe.seccomp = false;
                    probe.unix_wall = false;
                    probe.error = Some("seccomp is off (--sandbox-without syscalls)".into());
                }
                "namespaces" => {
                    probe.namespaces = false;
                    probe.network_namespace = false;
                }
                "unix_sockets" => probe.unix_wall = false,
                "network" => probe.network_namespace = false,
                "layer" => probe.overlay = false,
                _ => {}
            }
        }
        if config.disabled {
            return unavailable(Some(path), "disabled by --no-sandbox (AGENTD_NO_SANDBOX)".into(), probe);
        }
        if let Some(why) = probe.error.clone() {
            return unavailable(Some(path), why, probe);
        }
        if !probe.namespaces {
            tracing::warn!(
                "user and PID namespaces are unavailable: a call's processes are tracked by a subreaper instead"
            );
        }
        if !probe.unix_wall {
            tracing::warn!(
                "the Unix-socket wall is unavailable (no seccomp user notification or pidfd_getfd): confined \
                 commands that would run unasked with sockets ask instead"
            );
        }
        if !probe.network_namespace {
            tracing::warn!(
                "a network namespace per call cannot be made: the network gate is unavailable, so confined \
                 commands have no network (the user's sandbox.network.allowAll gives them all of it)"
            );
        }
        let walls = walls(&probe, None);
        // Without the layer a call has the older wall around it: the level
        // is about confinement.
        let level = if walls.iter().filter(|w| w.name != "layer").all(|w| w.applied) {
            agentd_protocol::methods::SandboxLevel::Full
        } else {
            agentd_protocol::methods::SandboxLevel::Partial
        };
        Facility {
            available: true,
            namespaces: probe.namespaces,
            unix_wall: probe.unix_wall,
            gate: probe.network_namespace,
            layer: probe.overlay,
            status: SandboxStatus {
                available: true,
                walls,
                reason: None,
                landlock_abi: probe.landlock_abi,
                seccomp: probe.seccomp,
                pid_namespaces: probe.namespaces,
                helper: Some(path.display().to_string()),
                network_allow_all: false,
                level,
                warm_helpers: None,
                processes: processes(probe.namespaces),
                inotify: inotify(probe.namespaces && probe.inotify_limits),
                memory,
            },
            warm: Some(std::sync::Arc::new(crate::process::WarmPool::new(
                path.clone(),
                ledger.clone(),
                cgroups.clone(),
            ))),
            helper: Some(path),
            hide: Vec::new(),
            state_dir: None,
            call_tmp: None,
            ledger,
            placeholders: Default::default(),
            cgroups,
        }
    }

    /// The walls this kernel cannot apply, by name (none when the whole
    /// sandbox is off: then nothing is confined and that is said instead).
    pub fn missing_walls(&self) -> Vec<&str> {
        if !self.available {
            return Vec::new();
        }
        self.status.walls.iter().filter(|w| !w.applied).map(|w| w.name.as_str()).collect()
    }

    /// No helper at all (unit tests): commands run as before, unconfined.
    pub fn none() -> Facility {
        Facility {
            helper: None,
            available: false,
            namespaces: false,
            unix_wall: false,
            gate: false,
            layer: false,
            status: SandboxStatus::default(),
            hide: Vec::new(),
            state_dir: None,
            call_tmp: None,
            warm: None,
            ledger: crate::process::Ledger::in_memory(),
            placeholders: Default::default(),
            cgroups: Default::default(),
        }
    }
}

/// The walls of the sandbox as `daemon/info` lists them; `off` is why the
/// whole sandbox is off, when it is.
fn walls(probe: &Probe, off: Option<&str>) -> Vec<agentd_protocol::methods::SandboxWall> {
    let wall = |name: &str, applied: bool, why: &str| agentd_protocol::methods::SandboxWall {
        name: name.to_owned(),
        applied: applied && off.is_none(),
        reason: match off {
            Some(off) => Some(off.to_owned()),
            None => (!applied).then(|| why.to_owned()),
        },
    };
    vec![
        wall("filesystem", probe.landlock_abi > 0, "the kernel has no Landlock"),
        wall("syscalls", probe.seccomp, "seccomp filters cannot be installed"),
        wall(
            "namespaces",
            probe.namespaces,
            probe.namespaces_error.as_deref().unwrap_or("user, PID and mount namespaces cannot be made"),
        ),
        wall(
            "unix_sockets",
            probe.unix_wall,
            "seccomp user notification, pidfd_getfd or the call's own /proc is missing",
        ),
        wall(
            "network",
            probe.network_namespace,
            "a network namespace per call cannot be made: confined commands have no network",
        ),
        wall(
            "layer",
            probe.overlay,
            "an overlay cannot be mounted in a call's namespace: a command's writes reach the workspace as it makes them, \
             behind the older wall (protected paths bound read-only, a scan after the call)",
        ),
    ]
}

/// The helper beside the running executable: `<name>-sandbox` (so a
/// renamed daemon finds its own), else `agentd-sandbox`.
fn default_helper() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    let own = exe.file_name()?.to_string_lossy().into_owned() + "-sandbox";
    [dir.join(own), dir.join(HELPER_NAME)].into_iter().find(|p| p.is_file())
}

/// The directory for calls' temp directories: `/tmp/agentd-tmp-UID`,
/// made 0700 or, when it is there, taken only if it is a real directory
/// (not a link) of this user's that nobody else may enter (another user
/// could make it first, as for tmux's and ssh-agent's directories in
/// `/tmp`); `None` otherwise. Short on purpose (issue 49): a Unix socket's
/// path holds at most 107 bytes, and a test suite binds one in `$TMPDIR`;
/// a call's directory inside the state directory was ~130 bytes long.
pub fn short_tmp_base() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let uid = nix::unistd::geteuid().as_raw();
    let base = PathBuf::from(format!("/tmp/agentd-tmp-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&base) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(_) => return None,
    }
    let meta = std::fs::symlink_metadata(&base).ok()?;
    (meta.is_dir() && meta.uid() == uid && meta.mode() & 0o077 == 0).then_some(base)
}

/// Where keys and tokens live in a home directory: hidden from every
/// confined command (an empty directory or file in their place), in every
/// profile. `~/.ssh` keeps `known_hosts` and `config` readable.
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube/config",
    ".docker/config.json",
    ".config/containers/auth.json",
    ".local/share/keyrings",
    ".password-store",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/gh/hosts.yml",
    ".config/hub",
    ".config/git/credentials",
    ".git-credentials",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
    ".oci",
    ".config/doctl",
    ".config/rclone/rclone.conf",
    ".boto",
    ".s3cfg",
    ".claude/.credentials.json",
    // Other coding agents' logins (issue 49): Codex CLI's tokens or API
    // key, Gemini CLI's OAuth tokens, its accounts, the API key in its
    // `.env`, its MCP servers' OAuth tokens.
    ".codex/auth.json",
    ".gemini/oauth_creds.json",
    ".gemini/google_accounts.json",
    ".gemini/.env",
    ".gemini/mcp-oauth-tokens.json",
    // agentctl mcp --http's bearer token (a client holding it drives
    // agentd's tools).
    ".config/agentd/mcp-http-token",
    ".pgpass",
    ".my.cnf",
    ".config/github-copilot",
    ".cache/huggingface/token",
    ".config/op",
    ".bash_history",
    ".zsh_history",
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".node_repl_history",
    ".local/share/fish/fish_history",
];

/// The credential files and directories of [`CREDENTIALS`] to hide from a
/// call: those that exist, but where a workspace root lies inside one (the
/// user opened the session there) or `allowed` says the session may read
/// it (`sandbox.allow_credentials`, a `Read` allow rule).
pub fn credential_masks(home: &Path, roots: &[PathBuf], allowed: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for rel in CREDENTIALS {
        let path = home.join(rel);
        if std::fs::symlink_metadata(&path).is_err() || roots.iter().any(|r| r.starts_with(&path)) || allowed(&path) {
            continue;
        }
        if *rel == ".ssh" && path.is_dir() {
            // Keys hidden one by one; what ssh needs to check a host stays.
            let keep = ["known_hosts", "known_hosts.old", "known_hosts2", "config"];
            for entry in std::fs::read_dir(&path).into_iter().flatten().flatten() {
                let name = entry.file_name();
                if !keep.iter().any(|k| name == *k) && !allowed(&entry.path()) {
                    out.push(entry.path());
                }
            }
            continue;
        }
        out.push(path);
    }
    out
}

/// The `.git` directories of `roots`, to pin in place.
pub fn git_dirs(roots: &[PathBuf]) -> Vec<PathBuf> {
    roots.iter().map(|r| r.join(".git")).filter(|g| std::fs::symlink_metadata(g).is_ok_and(|m| m.is_dir())).collect()
}

/// Whether `path`, to be bound read-only, is there: an error other than
/// absence inside a root refuses the call (issue 48: fail closed; outside
/// the roots a command can change nothing, so no error there is its).
pub fn present(path: &Path, roots: &[PathBuf]) -> Result<bool, String> {
    match std::fs::symlink_metadata(path) {
        Ok(_) => Ok(true),
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => Ok(false),
        Err(e) if roots.iter().any(|r| path.starts_with(r)) => Err(placeholders::unexaminable(path, &e)),
        Err(_) => Ok(false),
    }
}

/// The protected paths that exist under `roots` (bind mounts need them);
/// `settings` is what [`guard::scan`] found there. Refused when one
/// inside a root cannot be examined (outside the roots a command can
/// change nothing, so no error there is of its making).
pub fn protected_paths(roots: &[PathBuf], settings: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    let user = crate::permission::user_protected_paths();
    // Where a protected path is: nothing there (not found, or a file on
    // the way), or its real path; any other error refuses the call (issue
    // 48: a job flipping `.git` between modes 000 and 755 got calls run
    // with `.git/hooks` left out, its `canonicalize` having failed).
    let real = |path: &Path| -> Result<Option<PathBuf>, String> {
        let inside = roots.iter().any(|r| path.starts_with(r));
        let refuse = |e: &std::io::Error| if inside { Err(placeholders::unexaminable(path, e)) } else { Ok(None) };
        let absent =
            |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory);
        match std::fs::symlink_metadata(path) {
            Ok(_) => {}
            Err(e) if absent(&e) => return Ok(None),
            Err(e) => return refuse(&e),
        }
        match std::fs::canonicalize(path) {
            Ok(real) => Ok(Some(real)),
            // A symbolic link to nothing: its target is given a
            // placeholder by the call's guard when inside a root.
            Err(e) if absent(&e) && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) => Ok(None),
            Err(e) => refuse(&e),
        }
    };
    for root in roots {
        // A `.git` file points at the real git directory: its hooks and
        // config are as protected.
        if std::fs::symlink_metadata(root.join(".git")).is_ok_and(|m| m.is_file())
            && let Some(dir) = crate::permission::git_dir(root)
        {
            // A linked worktree's git directory names the repository's
            // common directory, whose hooks and config git obeys too.
            let common = std::fs::read_to_string(dir.join("commondir")).ok().map(|c| dir.join(c.trim()));
            let names = ["hooks", "config", "config.worktree", "commondir", "info"];
            let in_common =
                common.iter().flat_map(|c| ["hooks", "config", "config.worktree", "info"].map(|n| c.join(n)));
            for path in names.iter().map(|n| dir.join(n)).chain(in_common) {
                if let Some(real) = real(&path)?
                    && roots.iter().any(|r| real.starts_with(r))
                {
                    out.push(real);
                }
            }
        }
        let deeper = settings.iter().filter(|p| p.starts_with(root) && !protected().any(|rel| root.join(rel) == **p));
        for path in protected().map(|rel| root.join(rel)).chain(deeper.cloned()).chain(user.iter().cloned()) {
            // A symlink is bound where it points; outside the roots that
            // is not writable anyway.
            if let Some(real) = real(&path)?
                && roots.iter().any(|r| real.starts_with(r))
            {
                out.push(real);
            }
        }
    }
    Ok(out)
}

/// What `read_only` may read beyond the system directories: git's user
/// configuration, and the toolchain directories on `PATH` that live in the
/// home directory (`~/.cargo`, `~/.pyenv`, …), but never the places that
/// hold keys.
pub fn extra_reads(home: Option<&Path>, path_var: Option<&std::ffi::OsStr>) -> Vec<PathBuf> {
    const SECRET: &[&str] = &[".ssh", ".gnupg", ".aws", ".config", ".local", ".docker", ".kube", ".netrc"];
    let mut out = Vec::new();
    let Some(home) = home else { return out };
    out.push(home.join(".gitconfig"));
    out.push(home.join(".config/git"));
    for dir in path_var.map(std::env::split_paths).into_iter().flatten() {
        let Ok(rest) = dir.strip_prefix(home) else { continue };
        let Some(first) = rest.components().next() else { continue };
        let name = first.as_os_str().to_string_lossy();
        if !name.starts_with('.') || SECRET.contains(&name.as_ref()) {
            // `~/bin`, `~/go/bin`, `~/.local/bin`: that directory alone
            // (and pip's `--user` packages beside ~/.local/bin).
            if !dir.starts_with(home.join(".ssh")) && !out.contains(&dir) {
                if dir == home.join(".local/bin") {
                    out.push(home.join(".local/lib"));
                }
                out.push(dir);
            }
            continue;
        }
        let top = home.join(first);
        if !out.contains(&top) {
            out.push(top);
        }
        // rustup's proxies in ~/.cargo/bin need its toolchains.
        if name == ".cargo" && !out.contains(&home.join(".rustup")) {
            out.push(home.join(".rustup"));
        }
    }
    out
}

/// What in a command's output says a call was refused.
const REFUSALS: &[&str] = &[
    "Read-only file system",
    "Permission denied",
    "Operation not permitted",
    "Network is unreachable",
    "EROFS",
    "EACCES",
    "EPERM",
];

/// The note for the model when a confined command failed in a way the
/// sandbox may have caused. `writable` is where the call may write (its
/// roots in `workspace_write`, its temp directory, the package caches):
/// a path the output names outside them, beside a refusal, is the one the
/// wall stopped, and the note names it (issue 49: a failure the wall
/// caused said nothing of the wall).
pub fn blocked_note(
    profile: SandboxProfile,
    output: &str,
    writable: &[PathBuf],
    inotify_limited: bool,
) -> Option<String> {
    if profile != SandboxProfile::Off && output.contains("fork") && output.contains("Resource temporarily unavailable")
    {
        return Some(format!(
            "[forks failed: the call may have reached its limit of {} processes and threads at once (daemon/info \
             sandbox.processes); run fewer at once]",
            process_limit()
        ));
    }
    // A line naming inotify and the error (a full disk says the second
    // too, but not beside inotify).
    let inotify_refused = |line: &str| {
        line.contains("inotify") && (line.contains("Too many open files") || line.contains("No space left on device"))
    };
    if inotify_limited
        && profile != SandboxProfile::Off
        && output.lines().any(inotify_refused)
        && let Some(most) = inotify_limit()
    {
        return Some(format!(
            "[inotify failed: the call may have reached its limit of {} inotify instances or {} watches (daemon/info \
             sandbox.inotify); watch fewer files]",
            most.instances, most.watches
        ));
    }
    if profile == SandboxProfile::Off || !REFUSALS.iter().any(|s| output.contains(s)) {
        return None;
    }
    let named = refused_path(output, writable).map(|p| format!("the sandbox's filesystem wall refused {p}: "));
    let named = named.unwrap_or_else(|| "this may have been blocked by ".to_owned());
    Some(match profile {
        SandboxProfile::ReadOnly => format!(
            "[{named}the read-only sandbox (no writes outside a private temp directory, no network, no sockets, \
             reads limited to the workspace and system directories); ask to run it with write access by running \
             it again with dangerouslyDisableSandbox: true, which asks the user]"
        ),
        _ => format!(
            "[{named}the workspace sandbox (writes only inside the workspace, $TMPDIR and package managers' \
             caches, not to .git/hooks, .git/config, .agentd, .claude, .mcp.json, .vscode, .idea or .gitmodules, \
             whether or not they exist, nor to tools' configuration in the home directory; no Unix socket \
             outside this command; credentials hidden; network as the session allows); if it needs more, run \
             it again with dangerouslyDisableSandbox: true, which asks the user]"
        ),
    })
}

/// The path the wall refused, as the output spells it. On a line that
/// says a refusal: for a read-only file system (only the wall makes one
/// here), the path nearest before it, relative or not
/// (`bash: line 1: .git/hooks/x: Read-only file system`); for the others
/// (which a file's own mode may cause too), the nearest absolute path
/// outside `writable` before it, else the first after it (Python's
/// `Permission denied: '/usr/lib/…'`). A line's first word is the
/// program's name (`/usr/bin/bash: …`), never the path. Where a tool says
/// the refusal apart from its path (npm's `code EROFS`, then
/// `path /home/u/.npm`), the first absolute path of the output outside
/// `writable`.
fn refused_path(output: &str, writable: &[PathBuf]) -> Option<String> {
    // ASCII quotes and GNU's typographic ones (`mkdir: cannot create
    // directory ‘/x’`).
    let separators = |c: char| c.is_whitespace() || "'\"`,:;()[]{}<>‘’“”".contains(c);
    let words = |text: &str| -> Vec<String> {
        text.split(separators)
            .map(|w| w.trim_end_matches(['.', '!', '?']))
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let special = |w: &str| ["/dev", "/proc", "/sys"].iter().any(|d| Path::new(w).starts_with(d));
    let outside = |w: &str| {
        w.starts_with('/') && w.len() > 1 && !special(w) && !writable.iter().any(|p| Path::new(w).starts_with(p))
    };
    let path_like = |w: &str| (w.starts_with('/') && w.len() > 1 && !special(w)) || w.contains('/');
    let mut after_first = Vec::new();
    for line in output.lines() {
        let first = line.split(separators).find(|w| !w.is_empty()).unwrap_or_default();
        let Some((at, sign)) = REFUSALS.iter().filter_map(|s| line.find(s).map(|at| (at, *s))).min() else {
            after_first.extend(words(line).into_iter().skip(1));
            continue;
        };
        let (before, after) = line.split_at(at);
        let mut before = words(before);
        if before.first().is_some_and(|w| w == first) {
            before.remove(0);
        }
        let read_only = sign == "Read-only file system" || sign == "EROFS";
        let found = if read_only {
            before.iter().rev().find(|w| path_like(w)).cloned()
        } else {
            before.iter().rev().find(|w| outside(w)).cloned()
        };
        if let Some(path) = found.or_else(|| words(after).into_iter().find(|w| outside(w))) {
            return Some(path);
        }
        after_first.extend(before);
    }
    after_first.into_iter().find(|w| outside(w))
}

/// The most processes (threads included) one confined call may have at
/// once: half the user's own allowance (`RLIMIT_NPROC` of the daemon), at
/// most 4,096 — so one call (a fork bomb, a runaway `make -j`) leaves the
/// user's other sessions and programs room to fork.
pub fn process_limit() -> u64 {
    static LIMIT: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let soft =
            nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NPROC).map_or(u64::MAX, |(s, _)| s);
        (soft / 2).clamp(16, 4_096)
    })
}

/// The inotify instances and watches one confined call may have at once:
/// half of what the daemon's user namespace allows the user
/// (`/proc/sys/user/max_inotify_*`, the limits `fs.inotify.max_user_*`
/// set), so a runaway watcher leaves the user's editor and other sessions
/// their share. `None` on a kernel without per-namespace counts.
pub fn inotify_limit() -> Option<agentd_sandbox::Inotify> {
    static LIMIT: std::sync::OnceLock<Option<agentd_sandbox::Inotify>> = std::sync::OnceLock::new();
    *LIMIT.get_or_init(|| {
        let read = |path: &str| -> Option<u64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
        // This namespace's own limit (a new one's is unlimited) and the
        // machine's (the initial namespace's), whichever is lower.
        let most = |own: &str, machine: &str| {
            let own = read(&format!("/proc/sys/user/{own}"))?;
            Some((own.min(read(&format!("/proc/sys/fs/inotify/{machine}")).unwrap_or(own)) / 2).max(1))
        };
        Some(agentd_sandbox::Inotify {
            instances: most("max_inotify_instances", "max_user_instances")?,
            watches: most("max_inotify_watches", "max_user_watches")?,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watcher refused at the call's inotify limit is told why, in any
    /// confined profile; unconfined, there was no such limit to name.
    #[test]
    fn an_inotify_refusal_names_the_calls_limit() {
        let Some(most) = inotify_limit() else { return };
        let said = "Error: inotify_init: Too many open files";
        let note = blocked_note(SandboxProfile::ReadOnly, said, &[], true).unwrap();
        assert!(note.contains(&format!("{} inotify instances", most.instances)), "{note}");
        let watches = "inotify_add_watch failed: No space left on device";
        assert!(blocked_note(SandboxProfile::WorkspaceWrite, watches, &[], true).unwrap().contains("watches"));
        assert_eq!(blocked_note(SandboxProfile::Off, said, &[], true), None);
        // Where the limit could not be set, it is not blamed.
        assert_eq!(blocked_note(SandboxProfile::ReadOnly, said, &[], false), None);
        // A full disk beside a watcher's name on another line is no refusal.
        let disk = "watching with inotify\nwrite: No space left on device";
        assert_eq!(blocked_note(SandboxProfile::ReadOnly, disk, &[], true), None);
    }

    /// A path to bind that cannot be looked at (here a name too long; as
    /// `nobody`, mode 000 on the way, e2e) refuses inside a root, and is
    /// nothing outside one (a command cannot change what is outside).
    #[test]
    fn a_path_to_bind_that_cannot_be_examined_refuses_inside_a_root() {
        let (_root, r) = crate::fs::real_temp_dir();
        let roots = vec![r.clone()];
        assert!(present(&r, &roots).unwrap());
        assert!(!present(&r.join("absent"), &roots).unwrap());
        let long = "x".repeat(300);
        assert!(present(&r.join(&long), &roots).unwrap_err().contains("cannot be examined"));
        assert!(!present(&Path::new("/nonexistent-agentd").join(&long), &roots).unwrap());
    }

    #[test]
    fn extra_reads_skip_key_stores() {
        let home = Path::new("/home/u");
        let path =
            std::ffi::OsString::from("/home/u/.cargo/bin:/home/u/.ssh/bin:/usr/bin:/home/u/.local/bin:/home/u/bin");
        let got = extra_reads(Some(home), Some(&path));
        assert!(got.contains(&home.join(".cargo")));
        assert!(got.contains(&home.join(".rustup")));
        assert!(!got.iter().any(|p| p.starts_with(home.join(".ssh"))));
        assert!(!got.contains(&home.join(".local")), "not all of ~/.local: {got:?}");
        assert!(got.contains(&home.join(".local/bin")) && got.contains(&home.join(".local/lib")));
        assert!(got.contains(&home.join("bin")), "a PATH directory itself: {got:?}");
    }

    #[test]
    fn blocked_note_only_when_confined() {
        assert!(blocked_note(SandboxProfile::Off, "Permission denied", &[], true).is_none());
        assert!(blocked_note(SandboxProfile::ReadOnly, "all good", &[], true).is_none());
        assert!(blocked_note(SandboxProfile::ReadOnly, "touch: x: Permission denied", &[], true).is_some());
    }

    #[test]
    fn blocked_note_names_the_path_outside_the_writable_places() {
        let writable = [PathBuf::from("/ws"), PathBuf::from("/tmp/agentd-tmp-1/t-1")];
        let note = |out: &str| blocked_note(SandboxProfile::WorkspaceWrite, out, &writable, true).unwrap_or_default();
        let cases = [
            ("bash: /home/u/.cargo/config.toml: Read-only file system", Some("/home/u/.cargo/config.toml")),
            ("/usr/bin/bash: line 2: /home/u/.x: Read-only file system", Some("/home/u/.x")),
            ("PermissionError: [Errno 13] Permission denied: '/usr/lib/python3/x'", Some("/usr/lib/python3/x")),
            ("npm error code EROFS\nnpm error syscall open\nnpm error path /home/u/.npmrc", Some("/home/u/.npmrc")),
            ("touch: cannot touch '/ws/.git/hooks/x': Read-only file system", Some("/ws/.git/hooks/x")),
            ("/usr/bin/bash: line 2: .git/hooks/pre-commit: Read-only file system", Some(".git/hooks/pre-commit")),
            ("/usr/bin/bash: line 2: /ws/ok: Permission denied", None),
            ("cp /ws/a /dev/null: Permission denied", None),
            ("mkdir: cannot create directory ‘/var/tmp/x’: Read-only file system", Some("/var/tmp/x")),
        ];
        for (out, path) in cases {
            let n = note(out);
            match path {
                Some(p) => assert!(n.contains(&format!("filesystem wall refused {p}:")), "{out} -> {n}"),
                None => assert!(n.starts_with("[this may have been blocked"), "{out} -> {n}"),
            }
        }
    }
}
