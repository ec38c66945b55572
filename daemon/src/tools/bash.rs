//! Bash: runs a shell command in the session's workspace (seed §3.3).
//!
//! - Each call is `bash -c` in a process group of its own, marked in its
//!   environment; cancel and timeout end the whole tree (see `process`).
//! - `cd` carries over to the session's next calls (the shell's directory
//!   is kept in the session context); exported variables do not — each
//!   call starts from the daemon's environment. A directory outside the
//!   workspace is not kept.
//! - Output streams as progress while the command runs; the result keeps
//!   the first and last parts of it (the middle elided) and the whole of it
//!   goes to a file.
//! - Exit codes mean what the final command says they mean: `grep` exit 1
//!   is "no matches", not a failure. A failed call cancels its siblings.
//! - `run_in_background` starts a job and returns at once (BashOutput,
//!   KillShell).

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use agentd_protocol::session::SandboxProfile;

use crate::permission::Decision;
use crate::process::{self, Capture, Launch};
use crate::shell;
use crate::tool::{InterruptBehavior, ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Progress reports stop after this many bytes (the result still has it all).
const MAX_PROGRESS_BYTES: usize = 256 * 1024;
/// A progress report is sent once this much output waits, or every tick.
const PROGRESS_CHUNK: usize = 4096;
/// After the shell exits, how long output still held by its children is read.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(100);

/// The Bash tool.
#[derive(Debug, Clone, Copy)]
pub struct Bash;

/// Its name.
pub const NAME: &str = "Bash";

/// The command of a Bash input, on one line, for permission reasons.
pub fn command_line(input: Option<&serde_json::Value>) -> String {
    one_line(input.and_then(|i| i.get("command")).and_then(|c| c.as_str()).unwrap_or(""), 120)
}

/// What to do with a running command when the user interrupts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnInterrupt {
    /// Stop the command.
    #[default]
    Cancel,
    /// Let it finish: for test suites and builds whose result is still wanted.
    Block,
}

/// Input of Bash.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashInput {
    /// The command to run, in bash syntax. It runs in the session's shell
    /// directory: a `cd` carries over to later commands, exported variables
    /// do not.
    pub command: String,
    /// What the command does, in 5–10 words, shown to the user.
    #[serde(default)]
    pub description: Option<String>,
    /// Timeout in milliseconds (default 120000; at most 600000 unless the
    /// session allows more). The command and everything it started is
    /// ended when it runs out.
    #[serde(default, deserialize_with = "crate::tool::input::opt_u64")]
    pub timeout: Option<u64>,
    /// Start the command as a background job and return its job id at once;
    /// read its output with BashOutput and end it with KillShell. Use this
    /// for servers and watchers, never `&`.
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub run_in_background: bool,
    /// If the user interrupts: `cancel` (stop the command, the default) or
    /// `block` (let it finish, e.g. a test suite whose result is still wanted).
    #[serde(default)]
    pub on_interrupt: OnInterrupt,
    /// Run the command outside the sandbox. Only when a command failed
    /// because the sandbox blocked it and it truly needs more (the result
    /// says so); the user is always asked.
    #[serde(default, deserialize_with = "crate::tool::input::flag", rename = "dangerouslyDisableSandbox")]
    #[expect(dead_code, reason = "the permission check reads it from the raw input, before parsing")]
    pub dangerously_disable_sandbox: bool,
}

/// Why a command was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KillReason {
    /// It ran out of time.
    Timeout,
    /// The call was cancelled (the user, a failed sibling, the session).
    Cancelled,
}

/// The result of a command.
#[derive(Debug, Clone, Serialize)]
pub struct BashResult {
    /// The exit code (128+signal when a signal ended the shell).
    pub exit_code: Option<i32>,
    /// Set when the daemon stopped the command.
    pub killed: Option<KillReason>,
    /// The output (stdout and stderr as they came), its middle elided when long.
    pub output: String,
    /// Characters of output left out.
    pub elided_chars: u64,
    /// The file with the whole output.
    pub output_file: Option<PathBuf>,
    /// What a non-zero exit code means by the command's convention.
    pub note: Option<String>,
    /// Processes the command left running, ended with it.
    pub ended_leftovers: usize,
    /// The shell's directory after the command, when it changed.
    pub cwd: Option<PathBuf>,
    /// That directory is outside the workspace: the next command starts at
    /// the workspace instead.
    pub cwd_reset: bool,
    /// The job id, for a command started in the background.
    pub job_id: Option<String>,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// Its timeout, in milliseconds.
    pub timeout_ms: u64,
    /// The sandbox profile it ran in.
    pub sandbox: SandboxProfile,
    /// The network it had.
    pub network: agentd_protocol::session::NetworkAccess,
    /// Connections the network gate refused (host:port: why).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_refused: Vec<String>,
    /// Settings files the command created, moved aside (from → to).
    pub quarantined: Vec<String>,
    /// In a worktree: objects the command wrote that were not taken into
    /// the repository (not what their names say, packs), and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects_refused: Vec<String>,
    /// Walls of the sandbox this kernel could not apply to the command
    /// (`daemon/info`'s `sandbox.walls`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub walls_missing: Vec<String>,
}

/// A chunk of output.
#[derive(Debug, Clone, Serialize)]
pub struct BashProgress {
    /// The output.
    pub text: String,
}

impl Tool for Bash {
    type Input = BashInput;
    type Output = BashResult;
    type Progress = BashProgress;

    const NAME: &'static str = NAME;

    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::default() }
    }

    fn description(&self) -> String {
        "Runs a bash command in the workspace and returns its output and exit code. The shell's \
         directory carries over between calls (cd persists); environment variables do not. Prefer \
         the Read, Glob and Grep tools for reading and searching files. Quote paths with spaces. \
         Long output is shortened in the middle; the full output is saved to a file whose path the \
         result gives. Use run_in_background for servers and other long-running processes, then \
         BashOutput to read them and KillShell to stop them."
            .to_owned()
    }

    fn validate_input(&self, input: &BashInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.command.trim().is_empty() {
            return Err(ValidationError::new("command is empty"));
        }
        let max = ctx.info.bash.max_timeout_ms;
        match input.timeout {
            Some(0) => Err(ValidationError::new("timeout must be at least 1 ms")),
            Some(t) if t > max => Err(ValidationError::new(format!("timeout must be at most {max} ms"))),
            _ => Ok(()),
        }
    }

    fn permission_target(&self, input: &BashInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Command(input.command.clone())
    }

    fn check_permissions(&self, input: &BashInput, ctx: &ToolContext) -> Decision {
        if let Some(why) = shell::too_complex(&input.command).or_else(|| too_many_parts(&input.command)) {
            return Decision::deny(format!("{why}; split it into smaller commands"));
        }
        let Ok(script) = shell::parse(&input.command) else {
            return Decision::ask(format!("run `{}`", one_line(&input.command, 120)));
        };
        // Where the kernel confines what runs unasked (the read_only
        // profile), inspecting commands run too: globs, loops, `cd`, `xargs`,
        // version queries. Without the sandbox only the strict judgement.
        let confinable = ctx.sandbox.available && ctx.info.sandbox.mode != agentd_protocol::session::SandboxMode::Off;
        let reads = shell::is_read_only(&script) || (confinable && shell::is_inspection(&script));
        // Without the sandbox nothing hides agentd's state from a command
        // in a workspace that holds it (as the home directory does): no
        // judgement of paths can be complete (`xargs` joins them, `grep
        // --rec` walks), so every command asks.
        let state_exposed = !confinable
            && (crate::fs::holds_state_dir(&ctx.cwd)
                || ctx.info.add_dirs.iter().any(|d| crate::fs::holds_state_dir(d)));
        if state_exposed {
            return Decision::ask(format!(
                "run `{}` (the workspace holds agentd's state directory, and no sandbox hides it)",
                one_line(&input.command, 120)
            ));
        }
        if !input.run_in_background && reads && paths_inside(&script, ctx) {
            Decision::Allow
        } else if !input.run_in_background
            && crate::tools::plan_mode::current_mode(ctx) == agentd_protocol::session::PermissionMode::AcceptEdits
            && only_edits_inside(&input.command, ctx)
            && paths_inside(&script, ctx)
        {
            // An output redirection is an edit of its file: accept_edits
            // allows it inside the workspace, as it allows Edit and Write.
            Decision::Allow
        } else {
            Decision::ask(format!("run `{}`", one_line(&input.command, 120)))
        }
    }

    fn is_concurrency_safe(&self, input: &BashInput) -> bool {
        !input.run_in_background && read_only(&input.command)
    }

    fn is_read_only(&self, input: &BashInput) -> bool {
        self.is_concurrency_safe(input)
    }

    fn is_destructive(&self, input: &BashInput) -> bool {
        !read_only(&input.command)
    }

    fn interrupt_behavior(&self, input: &BashInput) -> InterruptBehavior {
        match input.on_interrupt {
            OnInterrupt::Cancel => InterruptBehavior::Cancel,
            OnInterrupt::Block => InterruptBehavior::Block,
        }
    }

    fn cancels_siblings_on_failure(&self) -> bool {
        true
    }

    async fn call(
        &self,
        input: BashInput,
        ctx: ToolContext,
        progress: ProgressSink<BashProgress>,
    ) -> Result<ToolOutput<BashResult>, ToolError> {
        let started = std::time::Instant::now();
        let workspace: &Path = &ctx.cwd;
        let cwd = ctx
            .session
            .shell_cwd
            .clone()
            .filter(|d| d.starts_with(workspace) && d.is_dir())
            .unwrap_or_else(|| workspace.to_owned());
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let _ = std::fs::create_dir_all(&*ctx.output_dir);
        let log_file = ctx.output_dir.join(format!("bash-{marker}.log"));
        let tmp = private_tmp(&ctx.output_dir, &marker)?;
        let cwd_file = tmp.join(".agentd-cwd");
        let script = format!("trap 'pwd -P > {}' EXIT\n{}", quote(&cwd_file), input.command);
        let profile = ctx.sandbox_profile;
        if profile == SandboxProfile::Off
            && ctx.info.sandbox.network.gate().is_some_and(|g| g.allowed_domains.is_some())
        {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(ToolError::new(
                "this session limits the network to its sandbox.network.allowed_domains, and a command outside \
                 the sandbox would not be held to that list, so it was not run; run it in the sandbox (without \
                 dangerouslyDisableSandbox)",
            ));
        }

        // What a confined command could leave for later: protected paths
        // that do not exist get placeholders bound read-only for the call
        // (its job's, in the background), and settings it creates where
        // the scan found none are moved aside at the end — in every mode,
        // bypass included (bypass is for this session's calls, not for the
        // sessions that would obey the settings).
        let roots = sandbox_roots(&ctx);
        // In a worktree the repository's objects are read-only: new ones go
        // to the worktree's staging directory, taken in at the end.
        let staging = if profile == SandboxProfile::WorkspaceWrite { object_staging(&ctx) } else { None };
        let guard = (profile == SandboxProfile::WorkspaceWrite).then(|| {
            let guard = crate::sandbox::CallGuard::new(&roots);
            match staging.clone() {
                Some((staging, main, sha256)) => guard.with_objects(staging, main, sha256),
                None => guard,
            }
        });
        let script = match &staging {
            Some((staging, main, _)) => format!(
                "export GIT_OBJECT_DIRECTORY={} GIT_ALTERNATE_OBJECT_DIRECTORIES={}\n{script}",
                quote(staging),
                quote(main)
            ),
            None => script,
        };
        if input.run_in_background {
            let (launch, _gate) = launch(&ctx, &input, &marker, &tmp, false, guard.as_ref()).inspect_err(|_| {
                let _ = std::fs::remove_dir_all(&tmp);
            })?;
            let job = ctx
                .jobs
                .start(
                    &input.command,
                    &script,
                    &cwd,
                    process::jobs::JobRun {
                        marker: &marker,
                        output_file: Some(&log_file),
                        launch,
                        env: &ctx.info.env,
                        tmp: Some(tmp.clone()),
                        settings_guard: guard,
                    },
                )
                .map_err(|e| {
                    let _ = std::fs::remove_dir_all(&tmp);
                    ToolError::new(format!("cannot start bash: {e}"))
                })?;
            return Ok(ToolOutput::new(BashResult {
                exit_code: None,
                killed: None,
                output: String::new(),
                elided_chars: 0,
                output_file: Some(log_file),
                note: None,
                ended_leftovers: 0,
                cwd: None,
                cwd_reset: false,
                job_id: Some(job.id.clone()),
                duration_ms: 0,
                timeout_ms: 0,
                sandbox: profile,
                network: network_of(&ctx, profile),
                network_refused: Vec::new(),
                quarantined: Vec::new(),
                objects_refused: Vec::new(),
                walls_missing: walls_missing(&ctx, profile),
            }));
        }

        let (launch, gate) = launch(&ctx, &input, &marker, &tmp, true, guard.as_ref()).inspect_err(|_| {
            let _ = std::fs::remove_dir_all(&tmp);
        })?;
        let mut tree = process::spawn_bash(&script, &cwd, &marker, &ctx.info.env, launch).map_err(|e| {
            let _ = std::fs::remove_dir_all(&tmp);
            ToolError::new(format!("cannot start bash: {e}"))
        })?;
        let (Some(mut out), Some(mut err)) = (tree.child.stdout.take(), tree.child.stderr.take()) else {
            return Err(ToolError::new("cannot read the command's output"));
        };
        let limit = usize::try_from(ctx.info.bash.max_output_chars).unwrap_or(usize::MAX);
        let mut capture = Capture::new(limit, Some(&log_file));
        let mut pending = Vec::new();
        let mut streamed = 0usize;
        let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
        let (mut out_open, mut err_open) = (true, true);
        let timeout_ms = input.timeout.unwrap_or(ctx.info.bash.default_timeout_ms);
        let deadline = tokio::time::sleep(Duration::from_millis(timeout_ms));
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut exit: Option<i32> = None;
        let mut exited_at: Option<tokio::time::Instant> = None;
        let mut killed = None;
        loop {
            tokio::select! {
                n = out.read(&mut out_buf), if out_open => match n {
                    Ok(0) | Err(_) => out_open = false,
                    Ok(n) => { capture.push(&out_buf[..n]); pending.extend_from_slice(&out_buf[..n]); }
                },
                n = err.read(&mut err_buf), if err_open => match n {
                    Ok(0) | Err(_) => err_open = false,
                    Ok(n) => { capture.push(&err_buf[..n]); pending.extend_from_slice(&err_buf[..n]); }
                },
                code = tree.wait_shell(), if exit.is_none() => {
                    exit = Some(code.unwrap_or(-1));
                    exited_at = Some(tokio::time::Instant::now());
                }
                _ = tick.tick() => flush(&progress, &mut pending, &mut streamed),
                _ = &mut deadline, if exit.is_none() => {
                    killed = Some(KillReason::Timeout);
                    tree.terminate().await;
                    break;
                }
                _ = ctx.cancel.cancelled(), if exit.is_none() => {
                    killed = Some(KillReason::Cancelled);
                    tree.terminate().await;
                    break;
                }
            }
            if pending.len() >= PROGRESS_CHUNK {
                flush(&progress, &mut pending, &mut streamed);
            }
            // The shell is gone: stop at EOF, or once the short drain is
            // over, whoever still holds the pipes.
            if let Some(at) = exited_at
                && ((!out_open && !err_open) || at.elapsed() >= DRAIN_AFTER_EXIT)
            {
                break;
            }
        }
        flush(&progress, &mut pending, &mut streamed);
        let mut leftovers = if killed.is_none() { tree.end_leftovers() } else { 0 };
        if let Some(gate) = &gate {
            gate.settle(Duration::from_millis(500)).await;
        }
        let report = tree.report();
        let new_cwd = read_cwd_file(&cwd_file);
        // Walks, renames and object checks: off the runtime's threads.
        let finished = match guard {
            Some(g) => tokio::task::spawn_blocking(move || g.finish()).await.unwrap_or_default(),
            None => crate::sandbox::Finished::default(),
        };
        let _ = std::fs::remove_dir_all(&tmp);
        if let Some(report) = report {
            if let Some(error) = report.error {
                return Err(ToolError::new(format!(
                    "the {} sandbox could not be applied, so the command did not run: {error}",
                    profile_name(profile)
                )));
            }
            leftovers += report.leftovers;
        }
        let summary = capture.summary();
        let parsed = shell::parse(&input.command).ok();
        let code = if killed.is_some() { None } else { exit };
        let note = match (code, &parsed) {
            (Some(c), Some(script)) if c != 0 => shell::benign_exit(script, c).map(str::to_owned),
            _ => None,
        };
        let sandbox_note = match code {
            Some(c) if c != 0 && note.is_none() => crate::sandbox::blocked_note(profile, &summary.text),
            _ => None,
        };
        let (kept_cwd, cwd_note, cwd_reset) = match new_cwd {
            Some(dir) if dir != cwd && dir.starts_with(workspace) => (Some(dir.clone()), Some(dir), false),
            // Outside the workspace: the next command starts at the workspace.
            Some(dir) if dir != cwd => (Some(workspace.to_owned()), Some(dir), true),
            _ => (None, None, false),
        };
        let result = BashResult {
            exit_code: code,
            killed,
            output: summary.text,
            elided_chars: summary.elided_chars,
            output_file: summary.file,
            note,
            ended_leftovers: leftovers,
            cwd: cwd_note,
            cwd_reset,
            job_id: None,
            duration_ms: started.elapsed().as_millis() as u64,
            timeout_ms,
            sandbox: profile,
            network: network_of(&ctx, profile),
            network_refused: gate.as_ref().map(|g| g.refusals()).unwrap_or_default(),
            quarantined: finished.moved,
            objects_refused: finished.objects_refused,
            walls_missing: walls_missing(&ctx, profile),
        };
        let failed = result.killed.is_some() || (result.exit_code != Some(0) && result.note.is_none());
        if failed {
            let mut text = result_text(&result, workspace);
            if let Some(n) = sandbox_note {
                text.push_str(&n);
                text.push('\n');
            }
            return Err(ToolError::new(text));
        }
        match kept_cwd {
            Some(dir) => Ok(ToolOutput::with_modifier(result, Box::new(move |s| s.shell_cwd = Some(dir)))),
            None => Ok(ToolOutput::new(result)),
        }
    }

    fn result_content(&self, result: &BashResult) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(result_text(result, Path::new("")))]
    }

    fn render_use(&self, input: &BashInput) -> String {
        match &input.description {
            Some(d) if !d.trim().is_empty() => d.trim().to_owned(),
            _ => format!("$ {}", one_line(&input.command, 80)),
        }
    }

    fn render_progress(&self, p: &BashProgress) -> String {
        one_line(p.text.trim_end().lines().last().unwrap_or(""), 120)
    }

    fn render_result(&self, r: &BashResult) -> String {
        if let Some(job) = &r.job_id {
            return format!("started {job} in the background");
        }
        let lines = r.output.lines().count();
        match (&r.note, r.exit_code) {
            (Some(note), Some(code)) => format!("exit {code} ({note}), {lines} lines"),
            (_, Some(code)) => format!("exit {code}, {lines} lines"),
            _ => format!("{lines} lines"),
        }
    }

    fn render_error(&self, input: &BashInput, error: &ToolError) -> String {
        let last = error.message.lines().rev().find(|l| l.starts_with('[')).unwrap_or("failed");
        format!("{}: {last}", self.render_use(input))
    }
}

/// The shell's last directory, as its EXIT trap wrote it: the command
/// controls that file, so it must be a small regular file (not a symlink
/// to a secret, a FIFO that blocks, or `/dev/zero`), and the directory it
/// names is taken as its real path.
fn read_cwd_file(path: &Path) -> Option<PathBuf> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut text = String::new();
    file.take(4096).read_to_string(&mut text).ok()?;
    std::fs::canonicalize(text.trim_end_matches('\n')).ok()
}

/// A directory of the call's own for temporary files (`TMPDIR`), the only
/// writable place outside the workspace in the sandbox.
fn private_tmp(output_dir: &Path, marker: &str) -> Result<PathBuf, ToolError> {
    use std::os::unix::fs::DirBuilderExt;
    let tmp = output_dir.join(format!("tmp-{marker}"));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&tmp)
        .map_err(|e| ToolError::new(format!("cannot create a temp directory for the command: {e}")))?;
    Ok(tmp)
}

/// The directories a command may write in its sandbox: the workspace's,
/// and in a worktree EnterWorktree made what a commit there writes of the
/// repository's git directory — objects, the worktree branches' refs and
/// their logs, the worktree's own git directory — and nothing else of it
/// (not its config, hooks, other branches, the main index or HEAD).
fn sandbox_roots(ctx: &ToolContext) -> Vec<PathBuf> {
    let mut roots = vec![ctx.cwd.to_path_buf()];
    roots.extend(ctx.info.add_dirs.iter().cloned());
    if let Some(w) = &ctx.session.worktree {
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
fn object_staging(ctx: &ToolContext) -> Option<(PathBuf, PathBuf, bool)> {
    let w = ctx.session.worktree.as_ref()?;
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
fn walls_missing(ctx: &ToolContext, profile: SandboxProfile) -> Vec<String> {
    if profile == SandboxProfile::Off {
        return Vec::new();
    }
    ctx.sandbox.missing_walls().into_iter().map(str::to_owned).collect()
}

/// What git would obey of a worktree EnterWorktree made, bound read-only:
/// its `.git` file and its git directory's `commondir`, `gitdir` and
/// `config.worktree` (made empty when the worktree was, so it exists).
fn worktree_protected(ctx: &ToolContext) -> Vec<PathBuf> {
    let Some(w) = &ctx.session.worktree else { return Vec::new() };
    [w.path.join(".git"), w.git_dir.join("commondir"), w.git_dir.join("gitdir"), w.git_dir.join("config.worktree")]
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect()
}

/// The network the call has (see [`crate::sandbox::gate::network_access`]).
fn network_of(ctx: &ToolContext, profile: SandboxProfile) -> agentd_protocol::session::NetworkAccess {
    if ctx.sandbox.helper.is_none() {
        return agentd_protocol::session::NetworkAccess::All;
    }
    crate::sandbox::gate::network_access(profile, &ctx.info.sandbox, ctx.sandbox.gate && ctx.sandbox.namespaces)
}

/// The network gate of one call, started: it and the helper's end of its
/// control socket.
fn start_gate(
    ctx: &ToolContext,
    input: &BashInput,
) -> Result<(crate::sandbox::gate::Gate, std::os::fd::OwnedFd), ToolError> {
    use crate::sandbox::gate::{Gate, GatePolicy, Shared};
    let mode = ctx.session.mode.unwrap_or(ctx.info.mode);
    let (policy, _) =
        GatePolicy::from_options(&ctx.info.sandbox, mode == agentd_protocol::session::PermissionMode::Bypass);
    let slots = match &ctx.channel {
        Some(c) => c.connection_slots(),
        None => std::sync::Arc::new(tokio::sync::Semaphore::new(crate::sandbox::gate::SESSION_CONNECTIONS)),
    };
    let shown = serde_json::json!({ "command": input.command, "description": input.description });
    let shared = Shared::new(policy, ctx.rules.clone(), ctx.channel.clone(), shown, slots);
    Gate::start(shared).map_err(|e| ToolError::new(format!("cannot start the network gate: {e}")))
}

/// How to start the call's shell: through the sandbox helper (in the
/// profile the permission check chose) where there is one; and its network
/// gate's state when it has one.
#[allow(clippy::type_complexity)]
fn launch<'a>(
    ctx: &'a ToolContext,
    input: &BashInput,
    marker: &str,
    tmp: &Path,
    foreground: bool,
    guard: Option<&crate::sandbox::CallGuard>,
) -> Result<(Launch<'a>, Option<std::sync::Arc<crate::sandbox::gate::Shared>>), ToolError> {
    let profile = ctx.sandbox_profile;
    // Without a helper, directly. With the sandbox off the helper still
    // runs the call: the subreaper of its processes, it ends one that left
    // the group and cleared its environment (`setsid env -i`), which the
    // daemon could not tell from another call's.
    let Some(helper) = ctx.sandbox.helper.as_deref() else {
        return Ok((Launch::Direct { tmp: Some(tmp.to_owned()), scrub_env: ctx.scrub_env }, None));
    };
    let access = network_of(ctx, profile);
    let gate = match access {
        agentd_protocol::session::NetworkAccess::Gated => Some(start_gate(ctx, input)?),
        _ => None,
    };
    let shared = gate.as_ref().map(|(g, _)| g.shared());
    let roots = sandbox_roots(ctx);
    let home = std::env::var_os("HOME").map(PathBuf::from);
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
        protect: if profile == SandboxProfile::WorkspaceWrite {
            let extra = guard.map(crate::sandbox::CallGuard::protect_too).unwrap_or_default();
            let mut protect = crate::sandbox::protected_paths(&roots, &extra);
            protect.extend(worktree_protected(ctx).into_iter().filter(|p| roots.iter().any(|r| p.starts_with(r))));
            // What Edit deny rules name, whatever program would write it.
            protect.extend(
                ctx.rules
                    .denied_edit_paths()
                    .into_iter()
                    .filter(|p| std::fs::symlink_metadata(p).is_ok() && roots.iter().any(|r| p.starts_with(r))),
            );
            // The daemon's state (other calls' output, reports) when the
            // workspace holds it.
            protect.extend(ctx.sandbox.state_dir.iter().filter(|s| roots.iter().any(|r| s.starts_with(r))).cloned());
            protect
        } else {
            Vec::new()
        },
        scrub_env: ctx.scrub_env,
        pin: Vec::new(),
        mask: {
            let mut mask = denied_reads(ctx);
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
            && ctx.sandbox.unix_wall
            && !ctx.info.sandbox.allow_all_unix_sockets,
        allow_unix: allowed_unix_sockets(ctx, home.as_deref()),
        // The daemon's socket directory, unless it holds a root.
        hide: ctx.sandbox.hide.iter().filter(|h| !roots.iter().any(|r| r.starts_with(h))).cloned().collect(),
        roots,
        tmp: tmp.to_owned(),
        network: access != agentd_protocol::session::NetworkAccess::None,
        gate: gate.is_some(),
        // Off is off: no user namespace (sudo, file owners as they are);
        // the helper still reaps every process of the call.
        namespaces: ctx.sandbox.namespaces && profile != SandboxProfile::Off,
        parent: std::process::id() as i32,
        foreground,
        drain_ms: DRAIN_AFTER_EXIT.as_millis() as u64,
        report: Some(ctx.output_dir.join(format!("bash-{marker}.report"))),
    };
    let mut spec = spec;
    if profile == SandboxProfile::WorkspaceWrite {
        // `.git` (whose hooks and config are protected) and every directory
        // between a root and a protected path: none can be renamed away.
        let mut pin = crate::sandbox::git_dirs(&spec.roots);
        pin.extend(crate::sandbox::parents_to_pin(&spec.roots, &spec.protect));
        pin.sort_by_key(|p| p.components().count());
        pin.dedup();
        spec.pin = pin;
    }
    Ok((Launch::Helper { helper, spec: Box::new(spec), gate }, shared))
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
        .filter(|p| !ctx.sandbox.hide.iter().any(|h| p.starts_with(h)))
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

fn profile_name(profile: SandboxProfile) -> &'static str {
    match profile {
        SandboxProfile::ReadOnly => "read_only",
        SandboxProfile::WorkspaceWrite => "workspace_write",
        SandboxProfile::Off => "off",
    }
}

/// Whether every path-like argument of `command` (absolute, `~`, or with
/// `..`) stays inside the workspace: a read-only command is allowed without
/// asking only there (`cat ~/.ssh/id_rsa` asks).
fn paths_inside(script: &shell::Script, ctx: &ToolContext) -> bool {
    let workspace: &Path = &ctx.cwd;
    // Where the shell is as the command runs: `cd`s are followed in order
    // (`cd src; ls; cd ..` judges `..` from src).
    let mut here = ctx.session.shell_cwd.clone().unwrap_or_else(|| workspace.to_owned());
    // A `cd` behind a wrapper moves where the walk below cannot follow.
    if shell::wrapped_cd(script) {
        return false;
    }
    for c in &script.commands {
        if matches!(c.program.as_deref(), Some("cd" | "pushd" | "popd")) {
            let target = c.args.iter().find(|a| !a.starts_with('-') || a.as_str() == "-");
            match target {
                // A bare `cd` goes home, `cd -` back, `popd` who knows where:
                // outside what can be judged.
                None | Some(_) if c.program.as_deref() == Some("popd") => return false,
                None => return false,
                Some(t) if t == "-" || t.contains('$') || t.contains('`') || t.starts_with('~') => return false,
                Some(t) => {
                    let next = if Path::new(t).is_absolute() { PathBuf::from(t) } else { here.join(t) };
                    match crate::fs::real_path(&next) {
                        Some(real) if ctx.inside(&real) && !crate::fs::in_state_dir(&real) => here = real,
                        _ => return false,
                    }
                }
            }
            continue;
        }
        let words = c.args.iter().chain(&c.reads_files);
        let ok = words.into_iter().all(|arg| word_inside(arg, &here, ctx));
        if !ok {
            return false;
        }
    }
    true
}

/// Whether one argument, if it names a path, names one inside the
/// workspace (resolved as the kernel will: through symlinks, then `..`).
fn word_inside(arg: &str, here: &Path, ctx: &ToolContext) -> bool {
    let value = arg.split_once('=').map(|(_, v)| v).unwrap_or(arg);
    if value.starts_with('~') {
        return false;
    }
    // A path computed by a parameter expansion with an operator
    // (`${PWD:0:1}etc/shadow`) is no path anyone can judge.
    if let Some((_, rest)) = value.split_once("${")
        && rest.split('}').next().is_some_and(|inner| inner.contains([':', '#', '%', '/', '@', '!', '^', ',', '[']))
    {
        return false;
    }
    if value.starts_with('-') || value == "/dev/null" {
        return true;
    }
    let raw = Path::new(value);
    let abs = if raw.is_absolute() { raw.to_path_buf() } else { here.join(raw) };
    // A word is a path when something is there (a symlink included), or
    // its directory is (`/etc/new`); `/TODO/p` (a sed address) is not.
    let exists = std::fs::symlink_metadata(&abs).is_ok();
    let parent_exists = abs.parent().is_some_and(|p| p != Path::new("/") && std::fs::symlink_metadata(p).is_ok());
    if !exists && !parent_exists && !value.split('/').any(|part| part == "..") {
        return true;
    }
    match crate::fs::real_path(&abs) {
        // agentd's state is no command's to read unasked, inside or not.
        Some(real) => ctx.inside(&real) && !crate::fs::in_state_dir(&real),
        None => ctx.resolve_from(here, value).is_ok() && !value.contains(".."),
    }
}

/// Whether `command` only reads but for output redirections, all to files
/// inside the workspace (a symlink counts where it points; a new file where
/// its directory is).
fn only_edits_inside(command: &str, ctx: &ToolContext) -> bool {
    let Ok(mut script) = shell::parse(command) else { return false };
    if !redirects_edit_inside(&script, ctx) {
        return false;
    }
    script.commands.iter_mut().for_each(|c| c.writes_files.clear());
    shell::is_read_only(&script)
}

/// Whether `script` has output redirections and every one is an edit
/// `accept_edits` allows: a literal target inside the workspace (a symlink
/// counts where it points; a new file where its directory is) that is not
/// a protected file (hooks, settings: those ask).
pub fn redirects_edit_inside(script: &shell::Script, ctx: &ToolContext) -> bool {
    let targets: Vec<&String> = script.commands.iter().flat_map(|c| &c.writes_files).collect();
    if targets.is_empty() {
        return false;
    }
    // A `cd` (`builtin cd` too) would take a relative target elsewhere.
    let moves = shell::changes_directory(script);
    let workspace: &Path = &ctx.cwd;
    let here = ctx.session.shell_cwd.clone().unwrap_or_else(|| workspace.to_owned());
    targets.iter().all(|target| {
        if target.is_empty()
            || target.contains(['$', '`', '~', '*', '?', '[', '{'])
            || (moves && !target.starts_with('/'))
        {
            return false;
        }
        let raw = Path::new(target.as_str());
        let abs = if raw.is_absolute() { raw.to_path_buf() } else { here.join(raw) };
        let real = crate::fs::real_path(&abs);
        // Never a protected file (hooks, settings): that asks.
        real.is_some_and(|r| {
            ctx.inside(&r)
                && !crate::fs::in_state_dir(&r)
                // An ask or deny rule on the file keeps it for the user.
                && ["Edit", "Write"].iter().all(|tool| {
                    ctx.rules.decide(tool, &crate::permission::rules::Facts::Path(r.clone())).is_none_or(|rule| {
                        rule.kind == crate::permission::rules::RuleKind::Allow
                    })
                })
                && !crate::permission::is_protected(r.strip_prefix(&*ctx.cwd).unwrap_or(&r))
                && !crate::permission::is_protected_target(&ctx.cwd, &r)
                && !crate::permission::is_user_protected(&r)
                && crate::permission::git_dir(&ctx.cwd)
                    .and_then(|g| std::fs::canonicalize(g).ok())
                    .is_none_or(|g| !r.starts_with(g))
        })
    })
}

/// Whether `command` parses and only reads.
fn read_only(command: &str) -> bool {
    shell::parse(command).map(|s| shell::is_read_only(&s)).unwrap_or(false)
}

fn flush(progress: &ProgressSink<BashProgress>, pending: &mut Vec<u8>, streamed: &mut usize) {
    if pending.is_empty() {
        return;
    }
    if *streamed < MAX_PROGRESS_BYTES {
        let take = pending.len().min(MAX_PROGRESS_BYTES - *streamed);
        *streamed += take;
        let mut text = String::from_utf8_lossy(&pending[..take]).into_owned();
        if *streamed >= MAX_PROGRESS_BYTES {
            text.push_str("\n[progress output stops here; the result has the rest]\n");
        }
        progress.send(BashProgress { text });
    }
    pending.clear();
}

/// The text the model reads: the output, then bracketed notes.
fn result_text(r: &BashResult, _workspace: &Path) -> String {
    let mut text = r.output.clone();
    let mut note = |line: String| {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&line);
        text.push('\n');
    };
    if let Some(job) = &r.job_id {
        note(format!("[started background job {job}; read its output with BashOutput, stop it with KillShell]"));
    }
    match r.killed {
        Some(KillReason::Timeout) => note(format!("[killed: timed out after {} ms]", r.timeout_ms)),
        Some(KillReason::Cancelled) => note("[killed: cancelled]".to_owned()),
        None => {}
    }
    if let Some(code) = r.exit_code
        && code != 0
    {
        match &r.note {
            Some(n) => note(format!("[exit code {code}: {n}]")),
            None => note(format!("[exit code {code}]")),
        }
    }
    if r.ended_leftovers > 0 {
        note(format!(
            "[ended {} process(es) the command left running; use run_in_background for long-running processes]",
            r.ended_leftovers
        ));
    }
    if r.elided_chars > 0
        && let Some(file) = &r.output_file
    {
        note(format!("[{} characters of output elided; the full output is in {}]", r.elided_chars, file.display()));
    }
    for refused in &r.objects_refused {
        note(format!("[an object the command wrote was not taken into the repository: {refused}]"));
    }
    for refused in &r.network_refused {
        note(format!("[the network gate refused a connection: {refused}]"));
    }
    if !r.network_refused.is_empty() {
        note(
            "[confined commands reach the network only through agentd's gate (HTTP_PROXY/ALL_PROXY are set); \
             domains need a rule: WebFetch(domain:HOST) in permissions.allow or sandbox.network.allowedDomains]"
                .to_owned(),
        );
    }
    if !r.walls_missing.is_empty() {
        note(format!("[this kernel could not apply these walls of the sandbox: {}]", r.walls_missing.join(", ")));
    }
    for moved in &r.quarantined {
        note(format!(
            "[the command created {moved}: settings agentd or other tools would obey, so they were moved aside; \
             write settings with the Write tool, which asks the user]"
        ));
    }
    match (&r.cwd, r.cwd_reset) {
        (Some(dir), false) => note(format!("[the shell's directory is now {}]", dir.display())),
        (Some(dir), true) => note(format!(
            "[{} is outside the workspace; the next command starts in the workspace again]",
            dir.display()
        )),
        (None, _) => {}
    }
    text
}

fn one_line(s: &str, max: usize) -> String {
    let line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() > max { format!("{}…", line.chars().take(max).collect::<String>()) } else { line }
}

/// `path` as a single-quoted shell word.
fn quote(path: &Path) -> String {
    format!("'{}'", path.display().to_string().replace('\'', "'\\''"))
}

/// The sub-command limit, which needs a parse.
fn too_many_parts(command: &str) -> Option<String> {
    match shell::parse(command) {
        Err(e) if e.too_complex => Some(e.message),
        _ => None,
    }
}
