//! How a Bash call is launched: the sandbox helper's spec for the call's
//! profile (its roots, reads, protected and masked paths, Unix sockets,
//! the network gate), or bash directly where there is no helper.

use std::path::{Path, PathBuf};

use agentd_protocol::session::SandboxProfile;

use super::{BashInput, DRAIN_AFTER_EXIT};
use crate::process::Launch;
use crate::tool::{ToolContext, ToolError};

/// The directories a command may write in its sandbox: the workspace's,
/// and in a worktree EnterWorktree made what a commit there writes of the
/// repository's git directory — objects, the worktree branches' refs and
/// their logs, the worktree's own git directory — and nothing else of it
/// (not its config, hooks, other branches, the main index or HEAD).
pub(super) fn sandbox_roots(ctx: &ToolContext) -> Vec<PathBuf> {
    let mut roots = vec![ctx.cwd.to_path_buf()];
    roots.extend(ctx.info.add_dirs.iter().cloned());
    if let Some(w) = ctx.session.worktree.as_ref().filter(|w| !w.by_hook) {
        let c = &w.common_dir;
        // Not the repository's objects (add-only: see object_staging).
        for dir in [c.join("refs/heads/worktree"), c.join("logs/refs/heads/worktree"), w.git_dir.clone()] {
            if dir.is_dir() && !dir.is_symlink() && !roots.iter().any(|r| dir.starts_with(r)) {
                roots.push(dir);
            }
        }
    }
    roots
}

/// In a worktree EnterWorktree made: where the command's new objects go
/// (made if missing), the repository's objects, and whether it hashes with
/// SHA-256.
pub(super) fn object_staging(ctx: &ToolContext) -> Option<(PathBuf, PathBuf, bool)> {
    // A hook's worktree has no git directory of agentd's.
    let w = ctx.session.worktree.as_ref().filter(|w| !w.by_hook)?;
    let staging = crate::sandbox::objects::staging_dir(&w.git_dir);
    if !staging.is_dir() {
        std::fs::create_dir(&staging).ok()?;
    }
    let config = std::fs::read_to_string(w.common_dir.join("config")).unwrap_or_default();
    let sha256 = config.lines().any(|l| {
        let l = l.trim().to_ascii_lowercase().replace(' ', "");
        l == "objectformat=sha256"
    });
    Some((staging, w.common_dir.join("objects"), sha256))
}

/// The walls `daemon/info` lists that this kernel cannot apply, for a
/// confined call's result.
pub(super) fn walls_missing(ctx: &ToolContext, profile: SandboxProfile) -> Vec<String> {
    if profile == SandboxProfile::Off {
        return Vec::new();
    }
    // The layer is a wall for calls that may write.
    let layer = |w: &&str| *w != "layer" || profile == SandboxProfile::WorkspaceWrite;
    ctx.sandbox().missing_walls().into_iter().filter(layer).map(str::to_owned).collect()
}

/// What git would obey of a worktree EnterWorktree made, bound read-only:
/// its `.git` file and its git directory's `commondir`, `gitdir` and
/// `config.worktree` (made empty when the worktree was, so it exists).
/// Refused when one inside a root cannot be examined.
fn worktree_protected(ctx: &ToolContext, roots: &[PathBuf]) -> Result<Vec<PathBuf>, ToolError> {
    let Some(w) = &ctx.session.worktree else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for p in
        [w.path.join(".git"), w.git_dir.join("commondir"), w.git_dir.join("gitdir"), w.git_dir.join("config.worktree")]
    {
        if crate::sandbox::present(&p, roots).map_err(ToolError::new)? {
            out.push(p);
        }
    }
    Ok(out)
}

/// The network the call has (see [`crate::sandbox::gate::network_access`]).
pub(super) fn network_of(ctx: &ToolContext, profile: SandboxProfile) -> agentd_protocol::session::NetworkAccess {
    if ctx.sandbox().helper.is_none() {
        return agentd_protocol::session::NetworkAccess::All;
    }
    crate::sandbox::gate::network_access(profile, &ctx.info.sandbox, ctx.sandbox().gate && ctx.sandbox().namespaces)
}

/// The network gate of one call, started: it and the helper's end of its
/// control socket.
fn start_gate(
    ctx: &ToolContext,
    input: &BashInput,
    web: &std::sync::Arc<crate::web::Web>,
) -> Result<(crate::sandbox::gate::Gate, std::os::fd::OwnedFd), ToolError> {
    use crate::sandbox::gate::{Gate, GatePolicy, Shared};
    let mode = ctx.session.mode.unwrap_or(ctx.info.mode);
    let (policy, _) =
        GatePolicy::from_options(&ctx.info.sandbox, mode == agentd_protocol::session::PermissionMode::Bypass);
    let line = ctx.services.get::<crate::tool::context::CallLine>().cloned();
    let slots = match &line {
        Some(c) => c.connection_slots(),
        None => std::sync::Arc::new(tokio::sync::Semaphore::new(crate::sandbox::gate::SESSION_CONNECTIONS)),
    };
    let shown = serde_json::json!({ "command": input.command, "description": input.description });
    let shared = Shared::new(policy, ctx.rules.clone(), line, shown, slots, web.clone());
    Gate::start(shared).map_err(|e| ToolError::new(format!("cannot start the network gate: {e}")))
}

/// What keeps a `workspace_write` call's writes in check: its layer, or
/// the older wall's guard (neither in other profiles).
#[derive(Clone, Copy, Default)]
pub(super) struct Wall<'a> {
    /// The older wall (placeholders, pins, the scan).
    pub guard: Option<&'a crate::sandbox::CallGuard>,
    /// The copy-on-write layer.
    pub layers: Option<&'a crate::sandbox::layer::CallLayers>,
}

/// How to start the call's shell: through the sandbox helper (in the
/// profile the permission check chose) where there is one; and its network
/// gate's state when it has one.
#[allow(clippy::type_complexity)]
pub(super) fn launch<'a>(
    ctx: &'a ToolContext,
    web: &std::sync::Arc<crate::web::Web>,
    input: &BashInput,
    marker: &str,
    tmp: &Path,
    foreground: bool,
    wall: Wall<'_>,
) -> Result<(Launch<'a>, Option<std::sync::Arc<crate::sandbox::gate::Shared>>), ToolError> {
    let profile = ctx.grant.sandbox_profile;
    // Without a helper, directly. With the sandbox off the helper still
    // runs the call: the subreaper of its processes, it ends one that left
    // the group and cleared its environment (`setsid env -i`), which the
    // daemon could not tell from another call's.
    let Some(pool) = ctx.sandbox().warm.as_ref() else {
        // Only a call granted no sandbox runs without the helper: one
        // whose profile confines it never runs unconfined (fail closed).
        if profile != SandboxProfile::Off {
            return Err(ToolError::new(
                "the sandbox this command must run in is not available here (no sandbox helper); nothing ran",
            ));
        }
        return Ok((
            Launch::Direct { tmp: Some(tmp.to_owned()), scrub_env: ctx.grant.scrub_env, ledger: &ctx.sandbox().ledger },
            None,
        ));
    };
    let access = network_of(ctx, profile);
    let gate = match access {
        agentd_protocol::session::NetworkAccess::Gated => Some(start_gate(ctx, input, web)?),
        _ => None,
    };
    let shared = gate.as_ref().map(|(g, _)| g.shared());
    let roots = sandbox_roots(ctx);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let caches = if profile == SandboxProfile::WorkspaceWrite && ctx.sandbox().namespaces {
        super::caches::package_caches(
            ctx.sandbox().state_dir.as_deref(),
            home.as_deref(),
            &roots,
            std::env::var_os("PATH").as_deref(),
            &|var| super::caches::call_env(ctx, var),
        )
    } else {
        Vec::new()
    };
    let spec = crate::sandbox::Spec {
        profile,
        // Toolchains on the PATH the command gets: the session's, else the
        // daemon's.
        read: {
            let mut read = crate::sandbox::extra_reads(
                home.as_deref(),
                ctx.info.env.get("PATH").map(std::ffi::OsString::from).or_else(|| std::env::var_os("PATH")).as_deref(),
            );
            // In a worktree git reads the repository's common directory:
            // what `git log` and `git status` read of it (not other
            // worktrees' directories, submodules' or tools' data there).
            read.extend(worktree_git_reads(ctx));
            read
        },
        // Behind a layer nothing of the workspace needs binding: what the
        // command changes there is judged after it.
        protect: if profile == SandboxProfile::WorkspaceWrite && wall.layers.is_none() {
            let extra = wall.guard.map(crate::sandbox::CallGuard::protect_too).unwrap_or_default();
            let mut protect = crate::sandbox::protected_paths(&roots, &extra).map_err(ToolError::new)?;
            protect.extend(
                worktree_protected(ctx, &roots)?.into_iter().filter(|p| roots.iter().any(|r| p.starts_with(r))),
            );
            // What Edit deny rules name, whatever program would write it.
            for p in ctx.rules.denied_edit_paths() {
                if roots.iter().any(|r| p.starts_with(r))
                    && crate::sandbox::present(&p, &roots).map_err(ToolError::new)?
                {
                    protect.push(p);
                }
            }
            // The daemon's state (other calls' output, reports) when the
            // workspace holds it.
            protect.extend(ctx.sandbox().state_dir.iter().filter(|s| roots.iter().any(|r| s.starts_with(r))).cloned());
            protect
        } else {
            Vec::new()
        },
        scrub_env: ctx.grant.scrub_env,
        pin: Vec::new(),
        mask: {
            let mut mask = denied_reads(ctx);
            // The TLS face's key and certificates.
            mask.extend(crate::fs::secret_files());
            if profile != SandboxProfile::Off {
                mask.extend(sensitive_files());
                if let Some(home) = &home {
                    let allowed = allowed_credentials(ctx, home);
                    mask.extend(crate::sandbox::credential_masks(home, &roots, |p| {
                        allowed.iter().any(|a| p.starts_with(a)) || ctx.rules.read_allowed(p)
                    }));
                }
            }
            mask.sort();
            mask.dedup();
            mask
        },
        unix_wall: profile == SandboxProfile::WorkspaceWrite
            && ctx.sandbox().unix_wall
            && !ctx.info.sandbox.allow_all_unix_sockets,
        allow_unix: allowed_unix_sockets(ctx, home.as_deref()),
        // The daemon's socket directory, unless it holds a root.
        hide: ctx.sandbox().hide.iter().filter(|h| !roots.iter().any(|r| r.starts_with(h))).cloned().collect(),
        roots,
        tmp: tmp.to_owned(),
        network: access != agentd_protocol::session::NetworkAccess::None,
        gate: gate.is_some(),
        // Off is off: no user namespace (sudo, file owners as they are);
        // the helper still reaps every process of the call.
        namespaces: ctx.sandbox().namespaces && profile != SandboxProfile::Off,
        parent: std::process::id() as i32,
        foreground,
        drain_ms: DRAIN_AFTER_EXIT.as_millis() as u64,
        report: Some(ctx.output_dir.join(format!("bash-{marker}.report"))),
        caches,
        layers: wall.layers.map(crate::sandbox::layer::CallLayers::spec).unwrap_or_default(),
        max_processes: Some(crate::sandbox::process_limit()),
        max_inotify: crate::sandbox::inotify_limit(),
    };
    let mut spec = spec;
    if profile == SandboxProfile::WorkspaceWrite && wall.layers.is_none() {
        // `.git` (whose hooks and config are protected) and every directory
        // between a root and a protected path: none can be renamed away.
        let mut pin = crate::sandbox::git_dirs(&spec.roots);
        pin.extend(crate::sandbox::parents_to_pin(&spec.roots, &spec.protect));
        // The directories down to a secret file (the TLS key), so that
        // renaming one cannot carry the file out from under its mask.
        pin.extend(crate::sandbox::parents_to_pin(&spec.roots, &crate::fs::secret_files()));
        pin.sort_by_key(|p| p.components().count());
        pin.dedup();
        spec.pin = pin;
    }
    let gate = gate.map(|(g, fd)| (Box::new(g) as crate::process::Kept, fd));
    // A writable root that holds the cgroups' hierarchies (a session on
    // `/`, `add_dirs` naming /sys): they stay read-only to the call, or it
    // could leave its cgroup or raise its limits.
    if profile == SandboxProfile::WorkspaceWrite {
        let held = ctx.sandbox().cgroups.mounts().iter().filter(|m| spec.roots.iter().any(|r| m.starts_with(r)));
        spec.protect.extend(held.cloned());
    }
    Ok((Launch::Helper { pool, spec: Box::new(spec), gate }, shared))
}

/// `~/x` or an absolute path, as the session's options name them.
fn expand_home(path: &str, home: Option<&Path>) -> Option<PathBuf> {
    let path = match (path.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => home.join(rest),
        _ => PathBuf::from(path),
    };
    path.is_absolute().then_some(path)
}

/// What `sandbox.allow_credentials` lets the session's commands read.
fn allowed_credentials(ctx: &ToolContext, home: &Path) -> Vec<PathBuf> {
    ctx.info.sandbox.allow_credentials.iter().filter_map(|p| expand_home(p, Some(home))).collect()
}

/// The Unix sockets outside the call a command may connect to
/// (`sandbox.allow_unix_sockets`), never one in the daemon's own socket
/// directory.
fn allowed_unix_sockets(ctx: &ToolContext, home: Option<&Path>) -> Vec<PathBuf> {
    ctx.info
        .sandbox
        .allow_unix_sockets
        .iter()
        .filter_map(|p| expand_home(p, home))
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| !ctx.sandbox().hide.iter().any(|h| p.starts_with(h)))
        .collect()
}

/// Files a confined command never reads, whatever its profile allows:
/// password hashes, sudoers, host keys (the home directory's credentials
/// are [`crate::sandbox::CREDENTIALS`]).
fn sensitive_files() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        ["/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers", "/etc/sudoers.d"]
            .iter()
            .map(PathBuf::from)
            .collect();
    if let Ok(dir) = std::fs::read_dir("/etc/ssh") {
        out.extend(dir.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with("_key")));
    }
    out.retain(|p| std::fs::symlink_metadata(p).is_ok());
    out
}

/// What `Read` deny rules forbid that exists now, for the sandbox to
/// cover: the paths they name, and for patterns (`.env` at any depth,
/// `**/*.pem`) what a walk of the workspace finds (hidden and ignored files
/// included; at most 100,000 entries looked at).
/// What a read-only command in a worktree may read of the repository's
/// common git directory.
fn worktree_git_reads(ctx: &ToolContext) -> Vec<PathBuf> {
    let Some(w) = &ctx.session.worktree else { return Vec::new() };
    const GIT_READS: &[&str] =
        &["objects", "refs", "packed-refs", "HEAD", "config", "info", "logs", "shallow", "FETCH_HEAD", "ORIG_HEAD"];
    GIT_READS.iter().map(|n| w.common_dir.join(n)).filter(|p| std::fs::symlink_metadata(p).is_ok()).collect()
}

fn denied_reads(ctx: &ToolContext) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> =
        ctx.rules.denied_read_paths().into_iter().filter(|p| std::fs::symlink_metadata(p).is_ok()).collect();
    if !ctx.rules.has_read_deny_patterns() {
        return out;
    }
    let mut roots = vec![ctx.cwd.to_path_buf()];
    roots.extend(ctx.info.add_dirs.iter().cloned());
    // What a worktree's commands may read of the common git directory
    // (objects are named by their hashes: no rule names one).
    roots.extend(worktree_git_reads(ctx).into_iter().filter(|p| !p.ends_with("objects")));
    let mut seen = 0usize;
    for root in roots {
        let walk =
            ignore::WalkBuilder::new(root).standard_filters(false).follow_links(false).max_depth(Some(32)).build();
        for entry in walk.flatten() {
            seen += 1;
            if seen > 100_000 {
                return out;
            }
            if ctx.rules.read_denied(entry.path()).is_some() && !out.iter().any(|p| entry.path().starts_with(p)) {
                out.push(entry.path().to_path_buf());
            }
        }
    }
    out
}
