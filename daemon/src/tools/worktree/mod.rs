//! EnterWorktree and ExitWorktree: the session works in a git worktree of
//! its own, on a new branch, and comes back.
//!
//! EnterWorktree makes `<repository>/.claude/worktrees/<name>` on a new
//! branch `worktree/<name>` from HEAD (an orphan branch in a repository
//! without commits) and, through a context modifier (so in request order),
//! makes it the session's working directory and workspace root.
//! ExitWorktree goes back; `remove` deletes the worktree and its branch
//! only when git says, at that moment, that nothing in it is uncommitted
//! and no commit of it is on no other branch, tag or remote — otherwise it
//! keeps it and says why. `discard_changes: true` removes it anyway, and
//! asks first.
//!
//! Git runs as the daemon, never through the shell: with hooks and
//! fsmonitor off and none of the daemon's `GIT_*` variables, so the
//! repository chooses no program that runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentd_protocol::hooks::HookEvent;
use agentd_protocol::session::WorktreeInfo;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use tokio_util::sync::CancellationToken;

use crate::permission::Decision;
use crate::tool::{ProgressSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

mod existing;
mod hooked;
use existing::{ensure_worktree_config, enter_existing};

/// Longest a git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Where worktrees are made, under the repository's top directory.
const WORKTREES: &str = ".claude/worktrees";

/// The EnterWorktree tool.
#[derive(Debug, Clone, Copy)]
pub struct EnterWorktree;

/// Input of EnterWorktree.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnterWorktreeInput {
    /// Optional name for a new worktree (letters, digits, `.`, `_`, `-`;
    /// at most 64). A random name is generated if not provided. Mutually
    /// exclusive with `path`.
    #[serde(default)]
    pub name: Option<String>,
    /// Path to an existing worktree to switch into instead of creating a
    /// new one: a linked worktree of this repository (one `git worktree
    /// list` shows). Mutually exclusive with `name`.
    #[serde(default)]
    pub path: Option<String>,
}

/// The ExitWorktree tool.
#[derive(Debug, Clone, Copy)]
pub struct ExitWorktree;

/// What ExitWorktree does with the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ExitAction {
    /// Leave it (and its branch) on disk.
    Keep,
    /// Delete it and its branch.
    Remove,
}

/// Input of ExitWorktree.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitWorktreeInput {
    /// "keep" leaves the worktree and its branch on disk; "remove" deletes
    /// both (refused while there are uncommitted changes or commits on no
    /// other branch, unless discard_changes is true).
    pub action: ExitAction,
    /// With "remove": delete even uncommitted changes and commits found on
    /// no other branch. Only when the user asked for them to be thrown away.
    #[serde(default)]
    pub discard_changes: Option<bool>,
}

/// What either tool did.
#[derive(Debug, Clone, Serialize)]
pub struct WorktreeOutput {
    /// The worktree.
    pub worktree_path: PathBuf,
    /// Its branch.
    pub branch: String,
    /// The session's working directory now.
    pub cwd: PathBuf,
    /// Whether the worktree is gone (ExitWorktree with `remove`).
    pub removed: bool,
    /// What happened, in a sentence or two.
    pub message: String,
}

/// Whether `name` may name a worktree (and, prefixed, a branch).
fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("the name must be 1 to 64 characters".into());
    }
    if name.starts_with('-') || name.starts_with('.') {
        return Err(format!("the name {name:?} may not start with '-' or '.'"));
    }
    if name.contains("..") || name.ends_with(".lock") {
        return Err(format!("the name {name:?} may not contain '..' or end in .lock"));
    }
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))) {
        return Err(format!("the name {name:?} has {c:?}: use letters, digits, '.', '_' and '-'"));
    }
    Ok(())
}

/// What a git command gave.
struct GitOut {
    ok: bool,
    stdout: String,
    stderr: String,
}

impl GitOut {
    /// Git's own words for a failure.
    fn why(&self) -> String {
        let text = if self.stderr.trim().is_empty() { &self.stdout } else { &self.stderr };
        text.trim().lines().take(6).collect::<Vec<_>>().join("; ")
    }
}

/// Runs git in `dir` with `args` and no program of the repository's
/// choosing: hooks and fsmonitor off, and every filter, diff or merge
/// driver, helper, editor, pager, ssh command or submodule update the
/// repository's own configuration (its config files and what they include)
/// names is set empty for the command ([`program_overrides`]); no `GIT_*`
/// variable of the daemon's, no prompt; ended when `cancel` fires.
async fn git(dir: &Path, args: &[&str], cancel: &tokio_util::sync::CancellationToken) -> Result<GitOut, ToolError> {
    // The same repository git will be told about (`--git-dir`, `--work-tree`).
    let mut list: Vec<&str> =
        args.iter().copied().take_while(|a| a.starts_with("--git-dir=") || a.starts_with("--work-tree=")).collect();
    list.extend(["config", "--list", "--includes", "--show-scope", "-z"]);
    let listing = git_raw(dir, &list, &[], cancel).await?;
    // What git lists depends on conditions (`includeIf "onbranch:…"`) that
    // differ in the worktree git is about to check out: the files are also
    // read here, every include followed whatever its condition.
    let mut keys = Vec::new();
    let named = args.iter().find_map(|a| a.strip_prefix("--git-dir=")).map(PathBuf::from);
    for git_dir in named.into_iter().chain(crate::permission::git_dir(dir)) {
        let common = std::fs::read_to_string(git_dir.join("commondir")).ok().map(|c| git_dir.join(c.trim()));
        for d in std::iter::once(&git_dir).chain(common.as_ref()) {
            for file in ["config", "config.worktree"] {
                keys.extend(crate::permission::git_config_entries(&d.join(file)).into_iter().map(|e| e.key));
            }
        }
    }
    git_raw(dir, args, &program_overrides(&listing.stdout, &keys), cancel).await
}

/// The `-c` settings that take back every program the repository's own
/// configuration (scopes `local` and `worktree`, includes counted as the
/// file that includes them) names, from `git config --list --includes
/// --show-scope -z` output; plus those that are always off.
fn program_overrides(listing: &str, keys: &[String]) -> Vec<String> {
    let mut out: Vec<String> = [
        "core.hooksPath=/dev/null",
        "core.fsmonitor=false",
        "core.pager=cat",
        "submodule.recurse=false",
        "diff.external=",
        "protocol.ext.allow=never",
        "log.showSignature=false",
    ]
    .map(str::to_owned)
    .to_vec();
    let mut listed = Vec::new();
    let mut fields = listing.split('\0');
    while let (Some(scope), Some(entry)) = (fields.next(), fields.next()) {
        if scope == "local" || scope == "worktree" {
            listed.push(entry.split('\n').next().unwrap_or_default());
        }
    }
    for key in listed.into_iter().chain(keys.iter().map(String::as_str)) {
        let lower = key.to_ascii_lowercase();
        let section = lower.split('.').next().unwrap_or_default();
        let last = lower.rsplit('.').next().unwrap_or_default();
        let value = match (section, last) {
            ("filter", "clean" | "smudge" | "process") => "",
            ("filter", "required") => "false",
            ("diff", "textconv" | "command") | ("merge", "driver") => "",
            ("core", "sshcommand" | "editor" | "askpass" | "gitproxy" | "alternaterefscommand") => "",
            ("sequence", "editor") | ("gpg", "program") | ("credential", "helper") | ("pager", _) => "",
            ("uploadpack", "packobjectshook") | ("remote", "uploadpack" | "receivepack") => "",
            ("submodule", "update") => "none",
            _ => continue,
        };
        let setting = format!("{key}={value}");
        if !out.contains(&setting) {
            out.push(setting);
        }
        if section == "filter" && last != "required" {
            // A required filter that no longer runs would stop git.
            if let Some((name, _)) = key.get("filter.".len()..).and_then(|r| r.rsplit_once('.')) {
                let required = format!("filter.{name}.required=false");
                if !out.contains(&required) {
                    out.push(required);
                }
            }
        }
    }
    out
}

/// Runs git with `args` and `settings` (`key=value`, the value after the
/// last `=`: a subsection may hold one) as configuration of the command,
/// given through `GIT_CONFIG_COUNT`/`KEY_n`/`VALUE_n` (see [`git`]).
async fn git_raw(
    dir: &Path,
    args: &[&str],
    settings: &[String],
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<GitOut, ToolError> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir);
    cmd.args(args).stdin(std::process::Stdio::null());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GIT_") {
            cmd.env_remove(key);
        }
    }
    for (i, setting) in settings.iter().enumerate() {
        let (key, value) = setting.rsplit_once('=').unwrap_or((setting.as_str(), ""));
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key).env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    cmd.env("GIT_CONFIG_COUNT", settings.len().to_string());
    cmd.env("GIT_TERMINAL_PROMPT", "0").env("LC_ALL", "C");
    let run = tokio::time::timeout(GIT_TIMEOUT, crate::process::output_owned(cmd));
    let out = tokio::select! {
        r = run => match r {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Err(ToolError::new(format!("git could not be run: {e}"))),
            Err(_) => return Err(ToolError::new(format!("git {} took longer than {GIT_TIMEOUT:?}", args.join(" ")))),
        },
        _ = cancel.cancelled() => return Err(ToolError::new("cancelled")),
    };
    Ok(GitOut {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Git's answer as one trimmed line, or an error naming what was asked.
async fn git_line(
    dir: &Path,
    args: &[&str],
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<String>, ToolError> {
    let out = git(dir, args, cancel).await?;
    Ok(out.ok.then(|| out.stdout.trim().to_owned()))
}

/// A directory that must not be a symlink (git would follow it anywhere).
fn no_symlink(path: &Path) -> Result<(), ToolError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(ToolError::new(format!(
            "{} is a symbolic link; refusing to make a worktree through it",
            path.display()
        ))),
        Ok(m) if !m.is_dir() => Err(ToolError::new(format!("{} is not a directory", path.display()))),
        _ => Ok(()),
    }
}

impl Tool for EnterWorktree {
    type Input = EnterWorktreeInput;
    type Output = WorktreeOutput;

    const NAME: &'static str = "EnterWorktree";

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::ADDITIVE;

    fn description(&self) -> String {
        "Creates an isolated git worktree (in .claude/worktrees/<name>, on a new branch worktree/<name> from \
         HEAD) and moves the session into it: the working directory and workspace become the worktree, so \
         changes there leave the main checkout alone. With `path` instead of `name`, the session moves into \
         a linked worktree of this repository that exists already (git worktree list shows them); ExitWorktree \
         then keeps it. Use it only when the user asks to work in a worktree. Leave with ExitWorktree."
            .to_owned()
    }

    fn validate_input(&self, input: &EnterWorktreeInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if let Some(w) = &ctx.session.worktree {
            return Err(ValidationError::new(format!(
                "the session is already in the worktree {}; leave it with ExitWorktree first",
                w.path.display()
            )));
        }
        if input.name.is_some() && input.path.is_some() {
            return Err(ValidationError::new("Provide at most one of `name` or `path`, not both."));
        }
        if let Some(name) = &input.name {
            check_name(name).map_err(ValidationError::new)?;
        }
        if input.path.as_deref().is_some_and(|p| p.trim().is_empty()) {
            return Err(ValidationError::new("path is empty"));
        }
        Ok(())
    }

    fn check_permissions(&self, input: &EnterWorktreeInput, ctx: &ToolContext) -> Decision {
        if let Some(path) = &input.path {
            let raw = Path::new(path.trim());
            let real = std::fs::canonicalize(if raw.is_absolute() { raw.to_path_buf() } else { ctx.cwd.join(raw) });
            let shown = real.map_or_else(|_| path.clone(), |r| r.display().to_string());
            return Decision::Ask {
                reason: format!(
                    "enter the existing worktree {shown}: the session's working directory and write access move there"
                ),
                suggestion: None,
            };
        }
        let name = input.name.as_deref().unwrap_or("<generated>");
        if ctx.services.get::<crate::hooks::Hooks>().is_some_and(|h| h.wants(HookEvent::WorktreeCreate, "")) {
            let reason = format!("create the worktree {name} with the session's WorktreeCreate hook and work there");
            return Decision::Ask { reason, suggestion: Some(Self::NAME.to_owned()) };
        }
        let mut reason = format!("create the git worktree {WORKTREES}/{name} on a new branch worktree/{name}");
        if let Some(what) = crate::permission::git_config_runs_code(&ctx.cwd) {
            reason.push_str(&format!(
                " (the repository's configuration names a program — {what} — which agentd's git does not run)"
            ));
        }
        Decision::Ask { reason, suggestion: Some(Self::NAME.to_owned()) }
    }

    async fn call(
        &self,
        input: EnterWorktreeInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<WorktreeOutput>, ToolError> {
        // A background command could be rewriting the repository's git
        // files while git reads them.
        if ctx.need::<crate::process::jobs::JobTable>()?.list().iter().any(|j| j.status == "running") {
            return Err(ToolError::new(
                "background commands of this session are still running; end them with TaskStop first",
            ));
        }
        if let Some(path) = &input.path {
            let (top, common_dir) = repository(&ctx).await?;
            return enter_existing(path, &ctx, top, common_dir).await;
        }
        let info = create(&ctx, input.name.clone()).await?;
        let WorktreeInfo { path, branch, cwd: session_cwd, base, .. } = info.clone();
        let made = if info.by_hook {
            "(by the WorktreeCreate hook)".to_owned()
        } else {
            format!(
                "on the new branch {branch} ({})",
                match &base {
                    Some(c) => format!("from {}", &c[..c.len().min(12)]),
                    None => "an orphan branch: the repository has no commits".to_owned(),
                }
            )
        };
        let message = format!(
            "Created the worktree {} {made}. The session now works there: its working directory is {}. Leave \
             with ExitWorktree (keep or remove).",
            path.display(),
            session_cwd.display()
        );
        let output = WorktreeOutput { worktree_path: path, branch, cwd: session_cwd, removed: false, message };
        let modifier = Box::new(move |s: &mut SessionContext| {
            s.worktree = Some(info);
            s.shell_cwd = None;
        });
        Ok(ToolOutput::with_modifier(output, modifier))
    }
    fn result_content(&self, out: &WorktreeOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(out.message.clone())]
    }

    fn render_use(&self, input: &EnterWorktreeInput) -> String {
        match (&input.name, &input.path) {
            (_, Some(p)) => format!("Entering the worktree {p}"),
            (Some(n), None) => format!("Entering a new worktree {n}"),
            (None, None) => "Entering a new worktree".to_owned(),
        }
    }

    fn render_result(&self, out: &WorktreeOutput) -> String {
        format!("in {} ({})", out.worktree_path.display(), out.branch)
    }
}

/// The repository the session's directory is in: its top directory and
/// its common git directory (a linked worktree's main repository), both
/// canonical; refused for a bare repository, no repository, or a main git
/// directory that sends git elsewhere.
pub(crate) async fn repository(ctx: &ToolContext) -> Result<(PathBuf, PathBuf), ToolError> {
    let cancel = &ctx.cancel;
    let cwd: &Path = &ctx.cwd;
    let Some(top) = git_line(cwd, &["rev-parse", "--show-toplevel"], cancel).await? else {
        let bare = git_line(cwd, &["rev-parse", "--is-bare-repository"], cancel).await?;
        return Err(ToolError::new(if bare.as_deref() == Some("true") {
            format!("{} is a bare git repository: a worktree needs a checkout", cwd.display())
        } else {
            format!("{} is not in a git repository: EnterWorktree needs one", cwd.display())
        }));
    };
    let top = std::fs::canonicalize(&top).map_err(|e| ToolError::new(format!("{top}: {e}")))?;
    // A session inside a linked worktree makes the new one from the
    // main checkout's repository all the same.
    let common = git_line(&top, &["rev-parse", "--path-format=absolute", "--git-common-dir"], cancel)
        .await?
        .ok_or_else(|| ToolError::new("git did not name the repository's common directory"))?;
    let common_dir = std::fs::canonicalize(&common).map_err(|e| ToolError::new(format!("{common}: {e}")))?;
    // The main git directory names no other (a `commondir` there would
    // send git, and the user's next commands, to another's config and
    // hooks).
    if common_dir.join("commondir").exists() {
        return Err(ToolError::new(format!(
            "{} holds a commondir file, which sends git elsewhere; refusing to run git on it",
            common_dir.display()
        )));
    }
    Ok((top, common_dir))
}

/// Makes a new worktree named `name` (a random one when `None`) for
/// EnterWorktree or an isolated sub-agent: by the session's WorktreeCreate
/// hooks when it has any (in place of git, as in Claude Code: any version
/// control, anywhere the hook chooses), otherwise by `git worktree add`.
pub(crate) async fn create(ctx: &ToolContext, name: Option<String>) -> Result<WorktreeInfo, ToolError> {
    let name = name.unwrap_or_else(|| format!("wt-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
    let hooks = ctx.services.get::<crate::hooks::Hooks>();
    let Some(hooks) = hooks.filter(|h| h.wants(HookEvent::WorktreeCreate, "")) else {
        let (top, common_dir) = repository(ctx).await?;
        return make(ctx, name, top, common_dir).await;
    };
    hooked::make(ctx, hooks, name).await
}

/// Why a worktree was not removed: it holds work (or is not as it was
/// made), or git failed.
pub(crate) enum Removal {
    Kept(String),
    Failed(ToolError),
}

impl From<ToolError> for Removal {
    fn from(e: ToolError) -> Self {
        Removal::Failed(e)
    }
}

/// Removes the worktree `w` — only when nothing in it is unsaved, unless
/// `discard` — and its branch when the branch holds no commit another ref
/// lacks: what was removed, said.
pub(crate) async fn remove(
    w: &WorktreeInfo,
    discard: bool,
    hooks: Option<&crate::hooks::Hooks>,
    cancel: &CancellationToken,
) -> Result<String, Removal> {
    let hooks = hooks.filter(|h| h.wants(HookEvent::WorktreeRemove, ""));
    if w.by_hook {
        return hooked::remove(w, hooks, cancel).await;
    }
    let mut message = remove_by_git(w, discard, cancel).await?;
    // The user's hooks hear of it (cleaning up what they keep beside it).
    if let Some(hooks) = hooks
        && let Some(why) = hooked::removal_hooks(w, hooks, cancel).await
    {
        message.push_str(&format!(" (the WorktreeRemove hook failed: {why})"));
    }
    Ok(message)
}

async fn remove_by_git(w: &WorktreeInfo, discard: bool, cancel: &CancellationToken) -> Result<String, Removal> {
    let common = format!("--git-dir={}", w.common_dir.display());
    let gone = !w.path.exists();
    if gone {
        // Deleted by hand: only its registration and branch are left.
        // Its registration alone goes (`git worktree prune` would take
        // every other stale one of the repository with it).
        let recorded = std::fs::read_to_string(w.git_dir.join("gitdir")).unwrap_or_default();
        let ours = w.git_dir.parent() == Some(w.common_dir.join("worktrees").as_path())
            && Path::new(recorded.trim()) == w.path.join(".git");
        if ours && std::fs::symlink_metadata(&w.git_dir).is_ok_and(|m| m.is_dir()) {
            let _ = std::fs::remove_dir_all(&w.git_dir);
        }
    } else {
        intact(w).map_err(|why| Removal::Kept(format!("{why}; refusing to run git on it")))?;
        if !discard && let Some(why) = unsaved_work(w, cancel).await? {
            return Err(Removal::Kept(format!(
                "{why}. Commit or push that work, or exit with action \"keep\"; remove with discard_changes \
                     only if the user wants it thrown away."
            )));
        }
        let path_arg = w.path.to_string_lossy().into_owned();
        let remove: Vec<&str> = if discard {
            vec![&common, "worktree", "remove", "--force", "--force", "--", &path_arg]
        } else {
            // Git itself refuses if anything changed since the check.
            vec![&common, "worktree", "remove", "--", &path_arg]
        };
        let out = git(&w.repository, &remove, cancel).await?;
        if !out.ok && w.path.exists() {
            return Err(Removal::Kept(format!("git worktree remove refused: {}", out.why())));
        }
    }
    // The branch goes only if it holds nothing no other ref does
    // (checked again now that the worktree is gone).
    let branch_ref = format!("refs/heads/{}", w.branch);
    let branch_exists =
        git_line(&w.repository, &[&common, "rev-parse", "--verify", "-q", &branch_ref], cancel).await?.is_some();
    let mut message = format!("Removed the worktree {}", w.path.display());
    if branch_exists {
        let only_here = if discard {
            None
        } else {
            let exclude = format!("--exclude={}", w.branch);
            let args =
                [&common, "rev-list", "--count", &branch_ref, "--not", &exclude, "--branches", "--tags", "--remotes"];
            let count = git_line(&w.repository, &args, cancel).await?;
            (count.as_deref() != Some("0")).then(|| count.unwrap_or_else(|| "?".into()))
        };
        match only_here {
            Some(n) => message
                .push_str(&format!("; kept its branch {}, which holds {n} commit(s) no other branch has", w.branch)),
            None => {
                let out = git(&w.repository, &[&common, "branch", "-D", "--", &w.branch], cancel).await?;
                if out.ok {
                    message.push_str(&format!(" and its branch {}", w.branch));
                } else {
                    message.push_str(&format!("; its branch {} stays: {}", w.branch, out.why()));
                }
            }
        }
    }
    Ok(message)
}

/// Makes a worktree of the repository at `top` (its common git directory
/// `common_dir`) under `.claude/worktrees/<name>` on a new branch
/// `worktree/<name>` from HEAD, as EnterWorktree and Agent's `isolation:
/// "worktree"` make one: what a session working there needs to know.
async fn make(ctx: &ToolContext, name: String, top: PathBuf, common_dir: PathBuf) -> Result<WorktreeInfo, ToolError> {
    let cancel = &ctx.cancel;
    let branch = format!("worktree/{name}");
    git_line(&top, &["check-ref-format", "--branch", &branch], cancel)
        .await?
        .ok_or_else(|| ToolError::new(format!("{branch:?} is not a valid branch name")))?;
    if git_line(&top, &["rev-parse", "--verify", "-q", &format!("refs/heads/{branch}")], cancel).await?.is_some() {
        return Err(ToolError::new(format!("a branch {branch} already exists; choose another name")));
    }
    for dir in [top.join(".claude"), top.join(WORKTREES)] {
        no_symlink(&dir)?;
    }
    let path = top.join(WORKTREES).join(&name);
    if std::fs::symlink_metadata(&path).is_ok() {
        return Err(ToolError::new(format!("{} already exists; choose another name", path.display())));
    }
    if common_dir.join("worktrees").join(&name).exists() {
        return Err(ToolError::new(format!("git already has a worktree named {name}; choose another name")));
    }
    let base = git_line(&top, &["rev-parse", "--verify", "-q", "HEAD^{commit}"], cancel).await?;
    let path_arg = path.to_string_lossy().into_owned();
    let git_dir_arg = format!("--git-dir={}", common_dir.display());
    let mut add: Vec<&str> = vec![&git_dir_arg, "worktree", "add", "--quiet"];
    match &base {
        Some(commit) => add.extend(["-b", &branch, "--", &path_arg, commit]),
        // No commit yet: an orphan branch (git 2.42 or later).
        None => add.extend(["--orphan", "-b", &branch, "--", &path_arg]),
    }
    let out = git(&top, &add, cancel).await?;
    if !out.ok {
        return Err(ToolError::new(format!("git worktree add failed: {}", out.why())));
    }
    let path = std::fs::canonicalize(&path).map_err(|e| ToolError::new(format!("{}: {e}", path.display())))?;
    let git_dir = std::fs::canonicalize(common_dir.join("worktrees").join(&name))
        .map_err(|e| ToolError::new(format!("git made no git directory for the worktree: {e}")))?;
    // Present (empty, so nothing changes) and so bound read-only in the
    // sandbox: a command cannot create one that git would obey.
    ensure_worktree_config(&git_dir)?;
    // The same place in the worktree as the session had in the
    // checkout, where it exists.
    let original_cwd = ctx.cwd.to_path_buf();
    let rel = original_cwd.strip_prefix(&top).unwrap_or(Path::new(""));
    let inner = path.join(rel);
    let session_cwd = if rel.as_os_str().is_empty() || !inner.is_dir() { path.clone() } else { inner };
    let info = WorktreeInfo {
        path: path.clone(),
        branch: branch.clone(),
        cwd: session_cwd.clone(),
        original_cwd,
        repository: top,
        common_dir,
        git_dir,
        base: base.clone(),
        entered: false,
        by_hook: false,
    };
    Ok(info)
}

/// Git's options that make it work on the recorded worktree, not on what
/// files in it say: its git directory and work tree named outright.
fn explicit(w: &WorktreeInfo) -> [String; 2] {
    [format!("--git-dir={}", w.git_dir.display()), format!("--work-tree={}", w.path.display())]
}

/// Whether the worktree's git files are still the ones EnterWorktree made:
/// its `.git` file names its git directory, whose `commondir` names the
/// repository's. Otherwise git would be sent elsewhere.
fn intact(w: &WorktreeInfo) -> Result<(), String> {
    let dot = std::fs::read_to_string(w.path.join(".git")).map_err(|e| format!("its .git file: {e}"))?;
    let named = dot.lines().find_map(|l| l.strip_prefix("gitdir:")).map(str::trim).unwrap_or_default();
    let named = w.path.join(named);
    if std::fs::canonicalize(&named).ok().as_deref() != Some(w.git_dir.as_path()) {
        return Err(format!("its .git file no longer names {}", w.git_dir.display()));
    }
    let common = std::fs::read_to_string(w.git_dir.join("commondir")).map_err(|e| format!("its commondir: {e}"))?;
    if std::fs::canonicalize(w.git_dir.join(common.trim())).ok().as_deref() != Some(w.common_dir.as_path()) {
        return Err(format!("its commondir no longer names {}", w.common_dir.display()));
    }
    if w.common_dir.join("commondir").exists() {
        return Err(format!("{} holds a commondir file", w.common_dir.display()));
    }
    Ok(())
}

/// Why the worktree cannot go without losing work, if it cannot: changed,
/// untracked or ignored files, files git was told not to look at, or
/// commits that only it holds (its HEAD, its branch, its own refs, and
/// what their reflogs remember).
async fn unsaved_work(
    w: &WorktreeInfo,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Option<String>, ToolError> {
    let [gd, wt] = explicit(w);
    let at = |rest: &[&'static str]| -> Vec<String> {
        [gd.clone(), wt.clone()].into_iter().chain(rest.iter().map(|s| s.to_string())).collect()
    };
    let run = |args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        git(&w.path, &refs, cancel).await
    };
    let listed = |out: &GitOut, what: &str| -> Option<String> {
        let lines: Vec<&str> = out.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        (!lines.is_empty()).then(|| {
            let shown: Vec<&str> = lines.iter().take(10).copied().collect();
            format!(
                "{} {what}: {}{}",
                lines.len(),
                shown.join(", "),
                if lines.len() > shown.len() { ", …" } else { "" }
            )
        })
    };
    let status =
        run(at(&["status", "--porcelain", "--untracked-files=all", "--ignored=matching", "--ignore-submodules=none"]))
            .await?;
    if !status.ok {
        return Ok(Some(format!("git status failed in it: {}", status.why())));
    }
    let (ignored, changed): (Vec<&str>, Vec<&str>) = status.stdout.lines().partition(|l| l.starts_with("!!"));
    let changed_out = GitOut { ok: true, stdout: changed.join("\n"), stderr: String::new() };
    if let Some(why) = listed(&changed_out, "uncommitted change(s)") {
        return Ok(Some(why));
    }
    let ignored_out = GitOut { ok: true, stdout: ignored.join("\n"), stderr: String::new() };
    if let Some(why) = listed(&ignored_out, "ignored file(s) or directories, which removal would delete") {
        return Ok(Some(why));
    }
    // assume-unchanged (lower-case tag) and skip-worktree (S) entries hide
    // their edits from status.
    let flags = run(at(&["ls-files", "-v"])).await?;
    let hidden: Vec<&str> =
        flags.stdout.lines().filter(|l| l.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == 'S')).collect();
    let hidden_out = GitOut { ok: true, stdout: hidden.join("\n"), stderr: String::new() };
    if let Some(why) = listed(&hidden_out, "file(s) marked assume-unchanged or skip-worktree") {
        return Ok(Some(why));
    }
    // Every commit the worktree could still reach.
    let mut tips: Vec<String> = Vec::new();
    let branch_ref = format!("refs/heads/{}", w.branch);
    for tip in ["HEAD".to_owned(), branch_ref.clone()] {
        let out = run(at(&["rev-parse", "--verify", "-q"]).into_iter().chain([format!("{tip}^{{commit}}")]).collect())
            .await?;
        if out.ok {
            tips.push(out.stdout.trim().to_owned());
        }
        let log = run(at(&["reflog", "show", "--format=%H"]).into_iter().chain([tip]).collect()).await?;
        if log.ok {
            tips.extend(log.stdout.lines().map(str::to_owned));
        }
    }
    let own =
        run(at(&["for-each-ref", "--format=%(objectname)", "refs/worktree", "refs/bisect", "refs/rewritten"])).await?;
    if own.ok {
        tips.extend(own.stdout.lines().map(str::to_owned));
    }
    tips.retain(|t| t.len() >= 40 && t.chars().all(|c| c.is_ascii_hexdigit()));
    tips.sort();
    tips.dedup();
    if tips.is_empty() {
        return Ok(None);
    }
    if tips.len() > 500 {
        return Ok(Some(format!("{} commits in its history to check; too many to be sure", tips.len())));
    }
    // (--exclude before --branches takes a name without refs/heads/.)
    let mut args = at(&["rev-list", "--count"]);
    args.extend(tips);
    args.extend([
        "--not".to_owned(),
        format!("--exclude={}", w.branch),
        "--branches".into(),
        "--tags".into(),
        "--remotes".into(),
    ]);
    let count = run(args).await?;
    if !count.ok {
        return Ok(Some(format!("git could not count its commits: {}", count.why())));
    }
    match count.stdout.trim().parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(n) => Ok(Some(format!("{n} commit(s) on no other branch, tag or remote"))),
        Err(_) => Ok(Some(format!("git counted its commits as {:?}", count.stdout.trim()))),
    }
}
impl Tool for ExitWorktree {
    type Input = ExitWorktreeInput;
    type Output = WorktreeOutput;

    const NAME: &'static str = "ExitWorktree";

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { read_only: false, destructive: true, idempotent: false, open_world: false };

    fn description(&self) -> String {
        "Leaves the worktree EnterWorktree made and returns the session to its original directory. \
         action \"keep\" leaves the worktree and its branch on disk; \"remove\" deletes both, but only when \
         nothing in it is uncommitted and none of its commits exist only there (otherwise it is kept and \
         the result says why). Set discard_changes to true only when the user wants that work thrown away."
            .to_owned()
    }

    fn validate_input(&self, input: &ExitWorktreeInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if ctx.session.worktree.is_none() {
            return Err(ValidationError::new("the session is not in a worktree EnterWorktree made"));
        }
        if input.discard_changes == Some(true) && input.action == ExitAction::Keep {
            return Err(ValidationError::new("discard_changes goes with action \"remove\""));
        }
        if let Some(w) = ctx.session.worktree.as_ref().filter(|w| w.entered && input.action == ExitAction::Remove) {
            return Err(ValidationError::new(format!(
                "the session entered the worktree {}, which was there before: it is kept (use action \"keep\"; \
                 remove it yourself with git worktree remove)",
                w.path.display()
            )));
        }
        Ok(())
    }

    fn check_permissions(&self, input: &ExitWorktreeInput, ctx: &ToolContext) -> Decision {
        // What a hook made agentd cannot look into: removing it (by the
        // WorktreeRemove hook) may lose work, so it is asked.
        if input.action == ExitAction::Remove
            && let Some(w) = ctx.session.worktree.as_ref().filter(|w| w.by_hook)
        {
            return Decision::ask(format!(
                "remove the worktree {} with the WorktreeRemove hook (whatever is in it goes)",
                w.path.display()
            ));
        }
        match (input.action, input.discard_changes == Some(true)) {
            (ExitAction::Remove, true) => Decision::ask(format!(
                "remove the worktree {} and its branch, throwing away uncommitted changes and commits only it holds",
                ctx.session.worktree.as_ref().map(|w| w.path.display().to_string()).unwrap_or_default()
            )),
            // git status and worktree remove in a repository whose
            // configuration names programs: asked, and run without them.
            (ExitAction::Remove, false)
                if let Some(what) =
                    ctx.session.worktree.as_ref().and_then(|w| crate::permission::git_config_runs_code(&w.path)) =>
            {
                Decision::ask(format!(
                    "remove the worktree {} (the repository's configuration names a program — {what} — which \
                     agentd's git does not run)",
                    ctx.session.worktree.as_ref().map(|w| w.path.display().to_string()).unwrap_or_default()
                ))
            }
            // Keeping loses nothing; removing checks first that nothing is lost.
            _ => Decision::Allow,
        }
    }

    fn is_read_only(&self, input: &ExitWorktreeInput) -> bool {
        input.action == ExitAction::Keep
    }

    fn is_destructive(&self, input: &ExitWorktreeInput) -> bool {
        input.discard_changes == Some(true)
    }

    async fn call(
        &self,
        input: ExitWorktreeInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<WorktreeOutput>, ToolError> {
        let Some(w) = ctx.session.worktree.clone() else {
            return Err(ToolError::new("the session is not in a worktree EnterWorktree made"));
        };
        let cancel = &ctx.cancel;
        let back = w.original_cwd.clone();
        let leave = move |s: &mut SessionContext| {
            s.worktree = None;
            s.shell_cwd = None;
        };
        let done = |removed: bool, message: String| WorktreeOutput {
            worktree_path: w.path.clone(),
            branch: w.branch.clone(),
            cwd: back.clone(),
            removed,
            message,
        };
        if input.action == ExitAction::Keep {
            let kept = if w.by_hook { "kept".to_owned() } else { format!("kept, with its branch {}", w.branch) };
            let message = format!(
                "Left the worktree {} ({kept}). The session works in {} again.",
                w.path.display(),
                back.display()
            );
            return Ok(ToolOutput::with_modifier(done(false, message), Box::new(leave)));
        }
        let discard = input.discard_changes == Some(true);
        let kept = |why: String| {
            ToolError::new(format!("kept the worktree {} and the session is still in it: {why}", w.path.display()))
        };
        if ctx.need::<crate::process::jobs::JobTable>()?.list().iter().any(|j| j.status == "running") {
            return Err(kept(
                "background commands of this session are still running (one may be in the worktree); end them \
                 with TaskStop first, or exit with action \"keep\""
                    .into(),
            ));
        }
        let hooks = ctx.services.get::<crate::hooks::Hooks>();
        let mut message = remove(&w, discard, hooks, cancel).await.map_err(|e| match e {
            Removal::Kept(why) => kept(why),
            Removal::Failed(e) => e,
        })?;
        message.push_str(&format!(". The session works in {} again.", back.display()));
        Ok(ToolOutput::with_modifier(done(true, message), Box::new(leave)))
    }
    fn result_content(&self, out: &WorktreeOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(out.message.clone())]
    }

    fn render_use(&self, input: &ExitWorktreeInput) -> String {
        match (input.action, input.discard_changes == Some(true)) {
            (ExitAction::Keep, _) => "Leaving the worktree (keeping it)".to_owned(),
            (ExitAction::Remove, false) => "Leaving and removing the worktree".to_owned(),
            (ExitAction::Remove, true) => "Leaving and removing the worktree, discarding its changes".to_owned(),
        }
    }

    fn render_result(&self, out: &WorktreeOutput) -> String {
        if out.removed { format!("removed {}", out.worktree_path.display()) } else { "left the worktree".to_owned() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_could_be_options_or_paths_are_refused() {
        for ok in ["feature", "fix-1", "a.b_c", "X9"] {
            assert!(check_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-rf", ".hidden", "a/b", "..", "a..b", "x.lock", "a b", "ü", "a\nb", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}

#[cfg(test)]
mod override_tests {
    use super::program_overrides;

    #[test]
    fn every_program_the_repository_names_is_taken_back() {
        let listing = [
            ("global", "filter.lfs.smudge\ngit-lfs smudge"),
            ("local", "filter.Evil.Dots.smudge\ntouch x"),
            ("local", "filter.Evil.Dots.process\ntouch x"),
            ("local", "core.sshcommand\ntouch x"),
            ("worktree", "credential.https://h.helper\nx"),
            ("local", "diff.t.textconv\nx"),
            ("local", "submodule.s.update\n!x"),
            ("local", "user.name\nme"),
        ]
        .iter()
        .map(|(s, e)| format!("{s}\0{e}\0"))
        .collect::<String>();
        let got = program_overrides(&listing, &["filter.a=b.smudge".to_owned()]);
        for want in [
            "filter.Evil.Dots.smudge=",
            "filter.Evil.Dots.process=",
            "filter.Evil.Dots.required=false",
            "core.sshcommand=",
            "credential.https://h.helper=",
            "diff.t.textconv=",
            "submodule.s.update=none",
            "core.hooksPath=/dev/null",
            "filter.a=b.smudge=",
            "filter.a=b.required=false",
        ] {
            assert!(got.iter().any(|g| g == want), "{want}: {got:?}");
        }
        // The user's own (git-lfs) is the user's choice; names are not settings.
        assert!(!got.iter().any(|g| g.starts_with("filter.lfs") || g.starts_with("user.")), "{got:?}");
    }
}
