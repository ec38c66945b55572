//! The kernel wall around every process the Bash tool starts (issue 11):
//! whatever the permission engine misjudges, a command can only do what
//! its sandbox profile lets the kernel allow.
//!
//! - [`helper`] is the small executable that applies it (Landlock,
//!   seccomp, user/PID/mount namespaces) and then execs `bash -c`.
//! - [`Facility`] is what the daemon found at start-up: the helper's path,
//!   the Landlock ABI, whether namespaces work. `daemon/info` reports it.
//! - [`profile_for`] is the pure choice of a profile for one call.
//! - [`Spec`] is what one call's helper is told: the profile, the
//!   workspace roots, the private temp directory, what to protect.

pub mod confine;
pub mod helper;
pub mod objects;
pub mod placeholders;
pub mod unix_wall;

use std::path::{Path, PathBuf};

use agentd_protocol::methods::SandboxStatus;
use agentd_protocol::session::{SandboxMode, SandboxOptions, SandboxProfile};
use serde::{Deserialize, Serialize};

/// Name of the helper executable, looked for beside the daemon's own.
pub const HELPER_NAME: &str = "agentd-sandbox";

/// Files inside a workspace root that configure agentd or run code later:
/// read-only even in `workspace_write`, so an approved command cannot plant
/// a hook or a rule for the next session.
/// Whether or not they exist: an absent one gets a placeholder for the
/// call (see [`placeholders`]). `.vscode` and `.idea` hold tasks and launch
/// configurations an editor runs; `.gitmodules` names what git clones.
pub const PROTECTED: &[&str] =
    &[".git/hooks", ".git/config", ".agentd", ".claude", ".mcp.json", ".vscode", ".idea", ".gitmodules"];

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
    /// Existing paths bound read-only (see [`PROTECTED`]).
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
}

/// What the helper tells the daemon after the call.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Report {
    /// Processes the shell left running, killed at its end.
    pub leftovers: usize,
    /// The sandbox could not be applied: nothing ran.
    pub error: Option<String>,
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
    /// The first thing that failed.
    pub error: Option<String>,
}

/// Probes this process's kernel (run inside the helper).
pub(crate) fn probe_here() -> Probe {
    let mut probe = Probe { landlock_abi: confine::landlock_abi(), ..Probe::default() };
    // Each feature is tried for real, in a child that then exits.
    let spec = Spec {
        profile: SandboxProfile::ReadOnly,
        roots: Vec::new(),
        read: Vec::new(),
        protect: Vec::new(),
        tmp: std::env::temp_dir(),
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
    };
    // The whole namespace set-up, as a workspace_write call does it.
    let ns_spec = Spec { profile: SandboxProfile::WorkspaceWrite, roots: vec![std::env::temp_dir()], ..spec.clone() };
    probe.namespaces = in_child(|| helper::enter_namespaces(&ns_spec).is_ok());
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

/// How the daemon was told to treat the sandbox.
#[derive(Debug, Clone, Default)]
pub struct SandboxConfig {
    /// The helper executable; beside the daemon's own when `None`.
    pub helper: Option<PathBuf>,
    /// Act as if the kernel had no Landlock (`--no-sandbox`): nothing is
    /// confined and commands that would run without asking ask.
    pub disabled: bool,
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
    /// `daemon/info`'s view of it.
    pub status: SandboxStatus,
    /// Hidden from every confined call (the daemon's socket directory).
    pub hide: Vec<PathBuf>,
    /// The daemon's state directory: read-only to a call whose workspace
    /// holds it (but its own temp directory).
    pub state_dir: Option<PathBuf>,
}

impl Facility {
    /// Finds the helper and asks it what the kernel offers. Logs a warning
    /// once when commands cannot be confined.
    pub fn probe(config: &SandboxConfig) -> Facility {
        let helper = config.helper.clone().or_else(default_helper);
        let unavailable = |helper: Option<PathBuf>, reason: String, probe: Probe| {
            tracing::warn!(
                "the Bash sandbox is unavailable ({reason}): commands run unconfined, and those that \
                 would run without asking in the read-only sandbox ask instead"
            );
            Facility {
                available: false,
                namespaces: probe.namespaces && helper.is_some(),
                unix_wall: false,
                status: SandboxStatus {
                    available: false,
                    walls: walls(&probe, Some(&reason)),
                    reason: Some(reason),
                    landlock_abi: probe.landlock_abi,
                    seccomp: probe.seccomp,
                    pid_namespaces: probe.namespaces && helper.is_some(),
                    helper: helper.as_ref().map(|h| h.display().to_string()),
                },
                helper,
                hide: Vec::new(),
                state_dir: None,
            }
        };
        let Some(path) = helper.filter(|h| h.is_file()) else {
            let why = format!("the helper executable {HELPER_NAME} was not found beside agentd (--sandbox-helper)");
            return unavailable(None, why, Probe::default());
        };
        let probe = match std::process::Command::new(&path).arg("--probe").output() {
            Ok(out) if out.status.success() => serde_json::from_slice::<Probe>(&out.stdout).unwrap_or_else(|e| Probe {
                error: Some(format!("the helper's probe answered nonsense: {e}")),
                ..Probe::default()
            }),
            Ok(out) => Probe { error: Some(format!("the helper's probe failed: {}", out.status)), ..Probe::default() },
            Err(e) => {
                Probe { error: Some(format!("cannot run the helper {}: {e}", path.display())), ..Probe::default() }
            }
        };
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
        Facility {
            available: true,
            namespaces: probe.namespaces,
            unix_wall: probe.unix_wall,
            status: SandboxStatus {
                available: true,
                walls: walls(&probe, None),
                reason: None,
                landlock_abi: probe.landlock_abi,
                seccomp: probe.seccomp,
                pid_namespaces: probe.namespaces,
                helper: Some(path.display().to_string()),
            },
            helper: Some(path),
            hide: Vec::new(),
            state_dir: None,
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
            status: SandboxStatus::default(),
            hide: Vec::new(),
            state_dir: None,
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
        wall("namespaces", probe.namespaces, "user, PID and mount namespaces cannot be made"),
        wall(
            "unix_sockets",
            probe.unix_wall,
            "seccomp user notification, pidfd_getfd or the call's own /proc is missing",
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

/// How a Bash call came to be allowed, for [`profile_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowedBy {
    /// The engine judged the command read-only (nobody approved it).
    Judgement,
    /// A rule, the mode, or the user approved it.
    Approval,
}

/// The profile a Bash call runs in: a pure function of the session's
/// choice, the call's `dangerouslyDisableSandbox`, how it was allowed, and
/// whether the kernel can confine at all.
pub fn profile_for(options: &SandboxOptions, available: bool, disable: bool, by: AllowedBy) -> SandboxProfile {
    if disable || !available {
        return SandboxProfile::Off;
    }
    match (options.mode, by) {
        (SandboxMode::Off, _) => SandboxProfile::Off,
        // What runs unasked runs read-only, whatever the session's choice
        // for approved commands (only `off` is off).
        (SandboxMode::ReadOnly, _) | (_, AllowedBy::Judgement) => SandboxProfile::ReadOnly,
        (SandboxMode::WorkspaceWrite | SandboxMode::Auto, AllowedBy::Approval) => SandboxProfile::WorkspaceWrite,
    }
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

/// The protected paths that exist under `roots` (bind mounts need them);
/// `settings` is what [`settings_present`] found there.
pub fn protected_paths(roots: &[PathBuf], settings: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let user = crate::permission::user_protected_paths();
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
                if let Ok(real) = std::fs::canonicalize(path)
                    && roots.iter().any(|r| real.starts_with(r))
                {
                    out.push(real);
                }
            }
        }
        let deeper =
            settings.iter().filter(|p| p.starts_with(root) && !PROTECTED.iter().any(|rel| root.join(rel) == **p));
        for path in PROTECTED.iter().map(|rel| root.join(rel)).chain(deeper.cloned()).chain(user.iter().cloned()) {
            if std::fs::symlink_metadata(&path).is_ok() {
                // A symlink is bound where it points; outside the roots
                // that is not writable anyway.
                if let Ok(real) = std::fs::canonicalize(&path)
                    && roots.iter().any(|r| real.starts_with(r))
                {
                    out.push(real);
                }
            }
        }
    }
    out
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

/// Names that hold settings agentd, other agents or git obey (a
/// `commondir` sends git to another repository's hooks).
pub const SETTINGS_NAMES: &[&str] = &[".agentd", ".claude", ".mcp.json", ".git/commondir", ".git/config.worktree"];

/// Which settings names exist in each root now.
/// At the roots, and settings directories a few levels down (a session
/// opened on `pkg/` reads `pkg/.claude`), skipping build and dependency
/// trees; bounded.
pub fn settings_present(roots: &[PathBuf]) -> Vec<PathBuf> {
    scan(roots).0
}

/// [`settings_present`], and the `.git` entries (directories, or files
/// naming a git directory) of the roots and of the repositories nested in
/// them, found in the same walk: their hooks and config are protected like
/// the workspace's own. Breadth first, directories only descended into, at
/// most [`SCAN_ENTRIES`] entries looked at (said in the log when cut).
pub fn scan(roots: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    const SKIP: &[&str] =
        &[".git", "node_modules", "target", "vendor", ".venv", "venv", "dist", "build", "__pycache__"];
    let mut out: Vec<PathBuf> = roots
        .iter()
        .flat_map(|r| SETTINGS_NAMES.iter().map(move |n| r.join(n)))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    let mut git: Vec<PathBuf> = roots.iter().map(|r| r.join(".git")).filter(|g| g.symlink_metadata().is_ok()).collect();
    let mut queue: std::collections::VecDeque<(PathBuf, usize)> = roots.iter().map(|r| (r.clone(), 0)).collect();
    let mut seen = 0usize;
    while let Some((dir, depth)) = queue.pop_front() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            seen += 1;
            if seen > SCAN_ENTRIES {
                tracing::warn!(
                    "more than {SCAN_ENTRIES} entries within 4 levels of {}: settings and repositories past them \
                     are not looked for",
                    roots.first().map(|r| r.display().to_string()).unwrap_or_default()
                );
                return (out, git);
            }
            let name = entry.file_name();
            let path = entry.path();
            let name = name.to_string_lossy();
            if matches!(name.as_ref(), ".agentd" | ".claude" | ".mcp.json") && !out.contains(&path) {
                out.push(path.clone());
            }
            if name == ".git" && !git.contains(&path) {
                git.push(path.clone());
            }
            if depth + 1 < 4 && entry.file_type().is_ok_and(|t| t.is_dir()) && !SKIP.contains(&name.as_ref()) {
                queue.push_back((path, depth + 1));
            }
        }
    }
    (out, git)
}

/// Entries [`scan`] looks at, at most.
pub const SCAN_ENTRIES: usize = 200_000;

/// The git directory a `.git` entry is or names (`gitdir: …`).
pub fn git_dir_of(entry: &Path) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(entry).ok()?;
    if meta.is_dir() {
        return Some(entry.to_path_buf());
    }
    if !meta.is_file() || meta.len() > 4096 {
        return None;
    }
    let text = std::fs::read_to_string(entry).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    std::fs::canonicalize(entry.parent()?.join(target)).ok()
}

/// Every path of [`PROTECTED`] at the roots and of the user's protected
/// files inside them that does not exist: these get placeholders for the
/// call. `.git/*` only where `.git` is a directory (an empty `.git` would
/// hide a repository above), and nothing whose parent would have to be made
/// but in the home directory.
pub fn absent_protected(roots: &[PathBuf]) -> Vec<PathBuf> {
    absent_protected_kinds(roots).into_iter().map(|(p, _)| p).collect()
}

/// [`absent_protected`], each with whether it is a directory (a file's
/// placeholder is an empty file: a tool that reads `~/.gitconfig` while a
/// call runs finds an empty one, not a directory).
pub fn absent_protected_kinds(roots: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let is_file = |p: &Path| {
        home.as_ref().is_some_and(|h| crate::permission::USER_PROTECTED_FILES.iter().any(|rel| p == h.join(rel)))
    };
    let mut out: Vec<(PathBuf, bool)> = absent_protected_paths(roots)
        .into_iter()
        .map(|p| {
            let dir = !is_file(&p);
            (p, dir)
        })
        .collect();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn absent_protected_paths(roots: &[PathBuf]) -> Vec<PathBuf> {
    let user = crate::permission::user_protected_paths();
    let mut out = Vec::new();
    for root in roots {
        let git_dir = std::fs::symlink_metadata(root.join(".git")).is_ok_and(|m| m.is_dir());
        for rel in PROTECTED {
            if rel.starts_with(".git/") && !git_dir {
                continue;
            }
            out.push(root.join(rel));
        }
        out.extend(user.iter().filter(|p| p.starts_with(root) && *p != root).cloned());
    }
    out.retain(|p| std::fs::symlink_metadata(p).is_err());
    out.sort();
    out.dedup();
    out
}

/// The directories between a root and each protected path: bound onto
/// themselves so that none can be renamed away with the read-only bind
/// inside it (`mv ~/.config ~/.c && mkdir -p ~/.config/agentd`).
pub fn parents_to_pin(roots: &[PathBuf], protect: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in protect {
        let Some(root) = roots.iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.as_os_str().len()) else {
            continue;
        };
        let mut dir = path.parent();
        while let Some(d) = dir {
            if !d.starts_with(root) || d == root {
                break;
            }
            if !out.iter().any(|o: &PathBuf| o == d) && d.is_dir() && !d.is_symlink() {
                out.push(d.to_path_buf());
            }
            dir = d.parent();
        }
    }
    // Outer directories first: each bind then lands inside the one before.
    out.sort_by_key(|p| p.components().count());
    out
}

/// What one confined call guards on its workspace from start to end (to
/// the end of its job, for a background one): the settings present at the
/// start (what is new at the end is moved aside), the placeholders of
/// protected paths that do not exist, and the nested repositories' hooks
/// and config. While it lives, a `session/create` on the workspace first
/// moves aside what it created so far ([`quarantine_live`]).
#[derive(Debug)]
pub struct CallGuard {
    roots: Vec<PathBuf>,
    before: Vec<PathBuf>,
    /// What git obeys that exists (nested repositories' hooks and config,
    /// hook directories and included files the configuration names).
    git_protect: Vec<PathBuf>,
    /// The git directories there were at the start.
    git_before: Vec<PathBuf>,
    /// Protected paths that are symbolic links, and where they point: a
    /// command can replace the link (the bind covers its target), so it is
    /// put back at the end.
    links: Vec<(PathBuf, PathBuf)>,
    held: placeholders::Held,
    /// Its entry among the live guards, gone when it is dropped (also when
    /// the call never started).
    live: LiveEntry,
    /// In a worktree: (staging, the repository's objects, SHA-256).
    objects: Option<(PathBuf, PathBuf, bool)>,
}

/// What a [`CallGuard`] did at the end of its call.
#[derive(Debug, Default)]
pub struct Finished {
    /// Settings moved aside (from → to).
    pub moved: Vec<String>,
    /// Staged objects that were not taken into the repository, and why.
    pub objects_refused: Vec<String>,
}

/// A [`CallGuard`]'s entry in [`LIVE_GUARDS`].
#[derive(Debug)]
struct LiveEntry(u64);

impl Drop for LiveEntry {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE_GUARDS.lock() {
            live.retain(|(i, ..)| *i != self.0);
        }
    }
}

/// A live guard: its id, the roots, the settings present at its start.
type LiveGuard = (u64, Vec<PathBuf>, Vec<PathBuf>);

static LIVE_GUARDS: std::sync::Mutex<Vec<LiveGuard>> = std::sync::Mutex::new(Vec::new());
static NEXT_GUARD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl CallGuard {
    /// Scans the roots and makes the placeholders.
    pub fn new(roots: &[PathBuf]) -> CallGuard {
        let (before, git_before) = scan(roots);
        let git_dirs: Vec<PathBuf> = git_before.iter().filter_map(|e| git_dir_of(e)).collect();
        let obeyed = git_obeys(&git_dirs);
        let exists = |p: &PathBuf| std::fs::symlink_metadata(p).is_ok();
        let inside = |p: &PathBuf| roots.iter().any(|r| p.starts_with(r));
        let mut absent = absent_protected_kinds(roots);
        // Hook directories are directories; included configuration files
        // are files.
        absent.extend(obeyed.iter().filter(|p| !exists(p) && inside(p)).map(|p| {
            let dir = p.file_name().is_some_and(|n| n == "hooks") || p.extension().is_none() && !p.ends_with("config");
            (p.clone(), dir)
        }));
        let git_protect: Vec<PathBuf> = obeyed.iter().filter(|p| exists(p)).cloned().collect();
        let user = crate::permission::user_protected_paths();
        let candidates = roots
            .iter()
            .flat_map(|r| PROTECTED.iter().map(move |rel| r.join(rel)))
            .chain(user.into_iter().filter(|p| inside(p)))
            .chain(obeyed.iter().cloned())
            .chain(before.iter().cloned());
        let links: Vec<(PathBuf, PathBuf)> = candidates
            .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()))
            .filter_map(|p| std::fs::read_link(&p).ok().map(|t| (p, t)))
            .collect();
        // A protected link to nothing: its target gets the placeholder (a
        // command would otherwise create what the link makes obeyed), when
        // it is plainly inside a root (no `.` or `..` on the way).
        for (link, target) in &links {
            if std::fs::metadata(link).is_ok() {
                continue;
            }
            let Some(parent) = link.parent() else { continue };
            let plain = target
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::RootDir));
            let target = parent.join(target);
            if plain && inside(&target) {
                absent.push((target, true));
            }
        }
        let held = placeholders::hold(&absent, roots);
        let id = NEXT_GUARD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut live) = LIVE_GUARDS.lock() {
            live.push((id, roots.to_vec(), before.clone()));
        }
        CallGuard {
            roots: roots.to_vec(),
            before,
            git_protect,
            git_before,
            links,
            held,
            live: LiveEntry(id),
            objects: None,
        }
    }

    /// In a worktree: the objects the call stages in `staging` are taken
    /// into `objects` at its end ([`objects::migrate`]).
    pub fn with_objects(mut self, staging: PathBuf, objects: PathBuf, sha256: bool) -> CallGuard {
        self.objects = Some((staging, objects, sha256));
        self
    }

    /// Settings present at the start, and the nested repositories' hooks
    /// and config: bound read-only with [`PROTECTED`].
    pub fn protect_too(&self) -> Vec<PathBuf> {
        self.before.iter().chain(&self.git_protect).cloned().collect()
    }

    /// The placeholders this call holds (they exist now).
    pub fn placeholders(&self) -> &[PathBuf] {
        self.held.paths()
    }

    /// At the end of the call: the placeholders go (unless another call
    /// holds them), and settings it created are moved aside; returns what
    /// moved.
    pub fn finish(self) -> Finished {
        let CallGuard { roots, before, held, live, objects, links, git_before, .. } = self;
        drop(live);
        drop(held);
        let mut moved = restore_links(&roots, &links);
        moved.extend(quarantine_new_repositories(&roots, &git_before));
        let objects_refused = match objects {
            Some((staging, main, sha256)) => objects::migrate(&staging, &main, sha256).refused,
            None => Vec::new(),
        };
        moved.extend(quarantine_new_settings(&roots, &before));
        Finished { moved, objects_refused }
    }
}

/// What git obeys in the repositories of `git_dirs` beyond their `hooks`
/// and `config`: those two, the hook directory `core.hooksPath` names, the
/// files their configuration includes (whatever the condition), and the
/// git directories of their submodules and linked worktrees (hooks,
/// config, commondir, config.worktree).
pub fn git_obeys(git_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in git_dirs {
        out.push(dir.join("hooks"));
        out.push(dir.join("config"));
        let top = dir.parent().unwrap_or(dir);
        for entry in crate::permission::git_config_entries(&dir.join("config")) {
            let path = match entry.key.as_str() {
                "core.hookspath" => match entry.value.strip_prefix("~/") {
                    Some(_) => crate::permission::git_config_path(&entry.value, &entry.file),
                    None => Some(top.join(&entry.value)),
                },
                k if k.ends_with(".path") && (k.starts_with("include.") || k.starts_with("includeif.")) => {
                    crate::permission::git_config_path(&entry.value, &entry.file)
                }
                _ => None,
            };
            out.extend(path);
            if entry.file != dir.join("config") {
                out.push(entry.file);
            }
        }
        for sub in ["modules", "worktrees"] {
            for entry in std::fs::read_dir(dir.join(sub)).into_iter().flatten().flatten() {
                for name in ["hooks", "config", "commondir", "config.worktree"] {
                    let p = entry.path().join(name);
                    if std::fs::symlink_metadata(&p).is_ok() {
                        out.push(p);
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Puts back each protected symbolic link a command replaced (what is
/// there now is moved aside); returns what it did.
fn restore_links(roots: &[PathBuf], links: &[(PathBuf, PathBuf)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, target) in links {
        if std::fs::read_link(path).ok().as_ref() == Some(target) {
            continue;
        }
        let aside = aside_name(path, "link");
        let there = std::fs::symlink_metadata(path).is_ok();
        if there && let Err(e) = rename_aside(roots, path, &aside) {
            out.push(format!("{} (a protected link it replaced, which could NOT be moved aside: {e})", path.display()));
            continue;
        }
        match symlink_beneath(roots, target, path) {
            Ok(()) if there => out.push(format!(
                "{} (it replaced the link; now {}, the link restored)",
                path.display(),
                aside.display()
            )),
            Ok(()) => out.push(format!("{} (it removed the link; restored)", path.display())),
            Err(e) => {
                out.push(format!("{} (a protected link it replaced, which could NOT be restored: {e})", path.display()))
            }
        }
    }
    out
}

/// Moves aside a git directory a command made (`git init`) whose hooks or
/// configuration would run a program when the user next runs git there.
fn quarantine_new_repositories(roots: &[PathBuf], before: &[PathBuf]) -> Vec<String> {
    let (_, now) = scan(roots);
    let mut out = Vec::new();
    for entry in now.iter().filter(|d| !before.contains(d)) {
        // A `.git` file names its git directory (a bare one made beside it):
        // that is what git would obey.
        let Some(dir) = git_dir_of(entry) else { continue };
        let hook = std::fs::read_dir(dir.join("hooks")).into_iter().flatten().flatten().find(|e| {
            !e.file_name().to_string_lossy().ends_with(".sample")
                && e.metadata().is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0)
        });
        let why = match hook {
            Some(h) => Some(format!("hook {}", h.file_name().to_string_lossy())),
            None => entry.parent().and_then(crate::permission::git_config_runs_code),
        };
        let Some(why) = why else { continue };
        let aside = aside_name(entry, "repository");
        match rename_aside(roots, entry, &aside) {
            Ok(()) => out.push(format!(
                "{} (a new repository whose {why} would run; now {})",
                entry.display(),
                aside.display()
            )),
            Err(e) => out.push(format!(
                "{} (a new repository whose {why} would run, which could NOT be moved aside: {e})",
                entry.display()
            )),
        }
    }
    out
}

/// Before settings are read for `cwd` (`session/create`): moves aside the
/// settings that calls still running (background jobs) created in any
/// workspace that holds `cwd` or lies inside it; returns what moved.
pub fn quarantine_live(cwd: &Path) -> Vec<String> {
    let live: Vec<(Vec<PathBuf>, Vec<PathBuf>)> = match LIVE_GUARDS.lock() {
        Ok(live) => live
            .iter()
            .filter(|(_, roots, _)| roots.iter().any(|r| cwd.starts_with(r) || r.starts_with(cwd)))
            .map(|(_, r, b)| (r.clone(), b.clone()))
            .collect(),
        Err(_) => Vec::new(),
    };
    live.iter().flat_map(|(roots, before)| quarantine_new_settings(roots, before)).collect()
}

/// Moves settings that appeared during the call out of the way
/// (`.claude` → `.claude.agentd-quarantine-<time>`); returns what moved.
pub fn quarantine_new_settings(roots: &[PathBuf], before: &[PathBuf]) -> Vec<String> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut moved = Vec::new();
    for path in settings_present(roots) {
        // A placeholder another call holds is a read-only mount in its
        // sandbox: moving it would move that mount out of the way.
        if before.contains(&path) || placeholders::is_live(&path) {
            continue;
        }
        // A name nobody can have made beforehand, and never over anything:
        // a rename that fails must not leave the settings in place unsaid.
        let aside = aside_name(&path, &stamp.to_string());
        match rename_aside(roots, &path, &aside) {
            Ok(()) => moved.push(format!("{} (now {})", path.display(), aside.display())),
            Err(e) => {
                tracing::warn!("settings {} could not be moved aside: {e}", path.display());
                moved.push(format!("{} (which could NOT be moved aside: {e}; remove it)", path.display()));
            }
        }
    }
    moved
}

/// Where `path` is moved aside: `<name>.agentd-quarantine-<tag>-<random>`
/// beside it, a name nobody can have made beforehand.
fn aside_name(path: &Path, tag: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let random = uuid::Uuid::new_v4().simple().to_string();
    path.with_file_name(format!("{name}.agentd-quarantine-{tag}-{}", &random[..12]))
}

/// The directory holding `path`, opened beneath the root of `roots` that
/// holds it with no symbolic link on the way (a command may swap one into
/// the path at any moment), and the entry's name in it.
fn parent_beneath(roots: &[PathBuf], path: &Path) -> std::io::Result<(std::os::fd::OwnedFd, std::ffi::OsString)> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let outside = || std::io::Error::other(format!("{} is not inside a workspace root", path.display()));
    let root = roots.iter().filter(|r| path.starts_with(r) && path != r.as_path()).max_by_key(|r| r.as_os_str().len());
    let root = root.ok_or_else(outside)?;
    let name = path.file_name().ok_or_else(outside)?.to_os_string();
    let rel = path.parent().and_then(|p| p.strip_prefix(root).ok()).ok_or_else(outside)?;
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    use std::os::fd::AsFd;
    let how = OpenHow::new().flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW);
    let root_fd = openat2(nix::fcntl::AT_FDCWD, root.as_path(), how).map_err(std::io::Error::from)?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let parent = openat2(root_fd.as_fd(), rel, how).map_err(std::io::Error::from)?;
    Ok((parent, name))
}

/// Moves `path` (inside a root) aside to `aside` (beside it), never over
/// anything, never through a symbolic link.
#[allow(unsafe_code)]
fn rename_aside(roots: &[PathBuf], path: &Path, aside: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let (dir, name) = parent_beneath(roots, path)?;
    let to = aside.file_name().ok_or_else(|| std::io::Error::other("no name"))?;
    let c = |n: &std::ffi::OsStr| std::ffi::CString::new(n.as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(&name)?, c(to)?);
    // SAFETY: a directory descriptor and two valid C strings.
    let rc = unsafe {
        nix::libc::renameat2(dir.as_raw_fd(), from.as_ptr(), dir.as_raw_fd(), to.as_ptr(), nix::libc::RENAME_NOREPLACE)
    };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Makes the symbolic link `path` → `target` (inside a root), never through
/// a symbolic link.
fn symlink_beneath(roots: &[PathBuf], target: &Path, path: &Path) -> std::io::Result<()> {
    let (dir, name) = parent_beneath(roots, path)?;
    nix::unistd::symlinkat(target, &dir, name.as_os_str()).map_err(std::io::Error::from)
}

/// The note for the model when a confined command failed in a way the
/// sandbox may have caused.
pub fn blocked_note(profile: SandboxProfile, output: &str) -> Option<String> {
    let signs = ["Read-only file system", "Permission denied", "Operation not permitted", "Network is unreachable"];
    if profile == SandboxProfile::Off || !signs.iter().any(|s| output.contains(s)) {
        return None;
    }
    Some(match profile {
        SandboxProfile::ReadOnly => "[this may have been blocked by the read-only sandbox (no writes outside a \
            private temp directory, no network, no sockets, reads limited to the workspace and system \
            directories); ask to run it with write access by running it again with \
            dangerouslyDisableSandbox: true, which asks the user]"
            .to_owned(),
        _ => "[this may have been blocked by the workspace sandbox (writes only inside the workspace, not to \
            .git/hooks, .git/config, .agentd, .claude, .mcp.json, .vscode, .idea or .gitmodules, whether or not \
            they exist; no Unix socket outside this command; credentials hidden; network as the session \
            allows); if it needs more, run it again with dangerouslyDisableSandbox: true, which asks the user]"
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(mode: SandboxMode) -> SandboxOptions {
        SandboxOptions { mode, ..SandboxOptions::default() }
    }

    #[test]
    fn profile_table() {
        use AllowedBy::*;
        use SandboxMode::*;
        use SandboxProfile as P;
        // (mode, available, dangerouslyDisableSandbox, allowed by) -> profile
        let rows = [
            (Auto, true, false, Judgement, P::ReadOnly),
            (Auto, true, false, Approval, P::WorkspaceWrite),
            (Auto, true, true, Judgement, P::Off),
            (Auto, false, false, Judgement, P::Off),
            (WorkspaceWrite, true, false, Judgement, P::ReadOnly),
            (WorkspaceWrite, true, false, Approval, P::WorkspaceWrite),
            (ReadOnly, true, false, Approval, P::ReadOnly),
            (ReadOnly, true, true, Approval, P::Off),
            (Off, true, false, Judgement, P::Off),
        ];
        for (mode, available, disable, by, want) in rows {
            assert_eq!(profile_for(&opts(mode), available, disable, by), want, "{mode:?} {available} {disable} {by:?}");
        }
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
        assert!(blocked_note(SandboxProfile::Off, "Permission denied").is_none());
        assert!(blocked_note(SandboxProfile::ReadOnly, "all good").is_none());
        assert!(blocked_note(SandboxProfile::ReadOnly, "touch: x: Permission denied").is_some());
    }
}
