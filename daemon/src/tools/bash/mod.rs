//! Bash: runs a shell command in the session's workspace.
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
//! - `run_in_background` starts a job and returns at once with its id and
//!   the file its output goes to (Read it, or BashOutput; TaskStop ends it).

use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use agentd_protocol::session::SandboxProfile;

use crate::permission::Decision;
use crate::process::{self, Capture};
use crate::shell;
use crate::tool::{InterruptBehavior, ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

mod caches;
mod effects;
mod facts;
mod launch;
mod result;
mod stale;
use launch::{Wall, launch, network_of, object_staging, sandbox_roots, walls_missing};
pub use result::{BashResult, KillReason};
use result::{moved_result, result_text};

/// Progress reports stop after this many bytes (the result still has it all).
const MAX_PROGRESS_BYTES: usize = 256 * 1024;
/// A progress report is sent once this much output waits, or every tick.
const PROGRESS_CHUNK: usize = 4096;
/// A background command's own limit when it names no `timeout` (Claude
/// Code 2.1.332's), and the most it may name.
const BACKGROUND_DEFAULT_TIMEOUT_MS: u64 = 1_800_000;
const BACKGROUND_MAX_TIMEOUT_MS: u64 = 7_200_000;
/// After the shell exits, how long output still held by its children is read.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(100);

/// The Bash tool.
#[derive(Debug, Clone)]
pub struct Bash(pub std::sync::Arc<crate::web::Web>);

/// Its name.
pub const NAME: &str = "Bash";

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
    /// ended when it runs out. With run_in_background it is the job's own
    /// limit: default 1800000, at most 7200000.
    #[serde(default, deserialize_with = "crate::tool::input::opt_u64")]
    pub timeout: Option<u64>,
    /// Start the command as a background job and return its job id at once;
    /// read its output with Read on the file the result names (or
    /// BashOutput) and end it with TaskStop. Use this
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
    #[serde(default, deserialize_with = "crate::tool::input::literal_true", rename = "dangerouslyDisableSandbox")]
    pub dangerously_disable_sandbox: bool,
}

/// A chunk of output.
#[derive(Debug, Clone, Serialize)]
pub struct BashProgress {
    /// The output.
    pub text: String,
}

impl crate::tool::ToolProgress for BashProgress {
    /// The last line written so far.
    fn render(&self) -> String {
        one_line(self.text.trim_end().lines().last().unwrap_or(""), 120)
    }
}

impl Tool for Bash {
    type Input = BashInput;
    type Output = BashResult;

    const NAME: &'static str = NAME;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Shell;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::FAIL_CLOSED };

    fn shell_facts(&self, input: &BashInput, ctx: &ToolContext) -> Option<crate::permission::policy::BashFacts> {
        Some(facts::permission_facts(input, ctx))
    }

    fn description(&self) -> String {
        "Runs a bash command in the workspace and returns its output and exit code. The shell's \
         directory carries over between calls (cd persists); environment variables do not. Prefer \
         the Read, Glob and Grep tools for reading and searching files. Quote paths with spaces. \
         Long output is shortened in the middle; the full output is saved to a file whose path the \
         result gives. Use run_in_background for servers and other long-running processes, then \
         Read the output file the result names (or BashOutput) and TaskStop to stop them."
            .to_owned()
    }

    fn validate_input(&self, input: &BashInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.command.trim().is_empty() {
            return Err(ValidationError::new("command is empty"));
        }
        // In the background `timeout` is the job's own limit, not how long
        // the call waits.
        let max = if input.run_in_background { BACKGROUND_MAX_TIMEOUT_MS } else { ctx.info.bash.max_timeout_ms };
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
        let confinable = confinable(&ctx.info, ctx.sandbox());
        let reads = shell::is_read_only(&script) || (confinable && shell::is_inspection(&script));
        if let Some(why) = exposure(&ctx.info, ctx.sandbox(), &ctx.cwd) {
            return Decision::ask(format!("run `{}` ({why})", one_line(&input.command, 120)));
        }
        // Without the sandbox a walk that follows links (`grep -R`) reads
        // wherever a link in the workspace points: ask.
        let reads = reads && (confinable || !shell::follows_links(&script));
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
        progress: ProgressSink,
    ) -> Result<ToolOutput<BashResult>, ToolError> {
        let started = std::time::Instant::now();
        let workspace: &Path = &ctx.cwd;
        if input.run_in_background {
            let job = self.start_job(&input, &ctx, None).await?;
            let timeout_ms = input.timeout.unwrap_or(BACKGROUND_DEFAULT_TIMEOUT_MS);
            return Ok(ToolOutput::new(BashResult::started(job.id.clone(), job.output_file.clone(), timeout_ms, &ctx)));
        }
        let Ready { cwd, marker, log_file, tmp, cwd_file, script, profile, roots, layers, guard } =
            self.ready(&input, &ctx).await?;

        // A command that only reads changes no file: its call pays no stat
        // (and a sibling's Edit meanwhile is not blamed on it), as Claude
        // Code looks only at commands that may write.
        let watched = (!read_only(&input.command)).then(|| stale::Watched::before(ctx.session.files.keys().cloned()));
        let wall = Wall { guard: guard.as_ref(), layers: layers.as_ref() };
        let launched = launch(&ctx, &self.0, &input, &marker, tmp.path(), true, wall);
        let started_tree = launched.and_then(|(launch, gate)| {
            process::spawn_bash(&script, &cwd, &marker, &ctx.info.env, launch)
                .map(|tree| (tree, gate))
                .map_err(|e| ToolError::new(format!("cannot start bash: {e}")))
        });
        let (mut tree, gate) = match started_tree {
            Ok(tree) => {
                if let Ok(metrics) = ctx.need::<crate::metrics::Metrics>() {
                    metrics.sandbox_setup(profile_name(profile), started.elapsed());
                }
                tree
            }
            Err(e) => {
                if let Some(layers) = layers {
                    layers.discard();
                }
                return Err(e);
            }
        };
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
        // Where a command that reaches its timeout goes on running.
        let jobs = ctx.need::<process::jobs::JobTable>().ok();
        let mut moved = false;
        // A layer is measured while the call runs: past its bounds, the
        // command is stopped and nothing of it applies.
        let (_watching, mut overflow) = match &layers {
            Some(l) => {
                let (guard, rx) = crate::sandbox::layer::watch(l.uppers());
                (Some(guard), Some(rx))
            }
            None => (None, None),
        };
        let mut overflowed: Option<String> = None;
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
                    // Claude Code 2.1.332 moves a command that reaches its
                    // timeout to the background, its output so far kept;
                    // only where no job may start is it killed.
                    if jobs.is_some_and(|j| j.has_room()) {
                        moved = true;
                        break;
                    }
                    killed = Some(KillReason::Timeout);
                    tree.terminate().await;
                    break;
                }
                _ = ctx.cancel.cancelled(), if exit.is_none() => {
                    killed = Some(KillReason::Cancelled);
                    tree.terminate().await;
                    break;
                }
                why = async {
                    match overflow.as_mut() {
                        Some(rx) => rx.await,
                        None => std::future::pending().await,
                    }
                }, if overflow.is_some() && exit.is_none() => {
                    overflow = None;
                    if let Ok(why) = why {
                        overflowed = Some(why);
                        killed = Some(KillReason::Overflow);
                        tree.terminate().await;
                        break;
                    }
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
        if moved && let Some(jobs) = jobs {
            // The job reads the pipes on from where the call stopped.
            tree.child.stdout = Some(out);
            tree.child.stderr = Some(err);
            let summary = capture.summary();
            let job = jobs.adopt(
                &input.command,
                tree,
                capture,
                process::jobs::Adopted {
                    limit: Duration::from_millis(BACKGROUND_DEFAULT_TIMEOUT_MS),
                    tmp: Some(tmp.keep()),
                    at_end: match layers {
                        Some(layers) => Some(effects::at_end(layers, ctx.rules.clone(), effects::asking(&ctx, &input))),
                        None => job_end(guard),
                    },
                },
            );
            let refused = gate.as_ref().map(|g| g.refusals()).unwrap_or_default();
            return Ok(ToolOutput::new(moved_result(&ctx, summary, &job, timeout_ms, started, refused)));
        }
        let mut leftovers = if killed.is_none() { tree.end_leftovers() } else { 0 };
        if let Some(gate) = &gate {
            gate.settle(Duration::from_millis(500)).await;
        }
        let report = tree.report();
        let memory_limit_hit = tree.memory_limit_hit();
        let new_cwd = read_cwd_file(&cwd_file);
        // Walks, renames and object checks: off the runtime's threads.
        let finished = match guard {
            Some(g) => tokio::task::spawn_blocking(move || g.finish()).await.unwrap_or_default(),
            None => crate::sandbox::Finished::default(),
        };
        // What the command changed, judged and applied — unless the
        // sandbox could not be applied (then nothing ran).
        let layered = layers.is_some();
        let effects = match layers {
            Some(layers) if overflowed.is_none() && report.as_ref().is_none_or(|r| r.error.is_none()) => {
                let rules = ctx.rules.clone();
                let recorder = ctx.services.shared::<crate::fs::history::CallRecorder>();
                let asking = effects::asking(&ctx, &input);
                let mut effects = tokio::task::spawn_blocking(move || effects::finish(layers, rules, recorder, asking))
                    .await
                    .unwrap_or_else(|_| effects::Effects {
                        discarded: Some("the command's changes could not be applied (the check failed)".into()),
                        ..effects::Effects::default()
                    });
                effects.base = cwd.clone();
                effects
            }
            Some(layers) => {
                tokio::task::spawn_blocking(move || layers.discard());
                effects::Effects::default()
            }
            None => effects::Effects::default(),
        };
        let effects = match overflowed {
            Some(why) => effects::Effects { discarded: Some(why), ..effects },
            None => effects,
        };
        // Nothing of the call is left to use it: removed after the result
        // is out (a directory's removal cost the call ~0.1 ms on ext4).
        let tmp = tmp.keep();
        let stale = tmp.clone();
        tokio::task::spawn_blocking(move || std::fs::remove_dir_all(stale));
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
        let stale_reads = match (watched, killed) {
            (Some(watched), None) => tokio::task::spawn_blocking(move || watched.moved()).await.unwrap_or_default(),
            _ => Vec::new(),
        };
        let parsed = shell::parse(&input.command).ok();
        let code = if killed.is_some() { None } else { exit };
        let note = match (code, &parsed) {
            (Some(c), Some(script)) if c != 0 => shell::benign_exit(script, c).map(str::to_owned),
            _ => None,
        };
        let memory_note = memory_limit_hit.map(|limit| {
            format!(
                "[the call reached its memory limit of {} MiB (agentd --call-memory-limit): the kernel killed a \
                 process of it; use less memory at once]",
                limit >> 20
            )
        });
        let sandbox_note = match code {
            _ if memory_note.is_some() => memory_note,
            Some(c) if c != 0 && note.is_none() => {
                // Where the call could write: a path named outside these
                // is the one the wall refused.
                let mut writable = if profile == SandboxProfile::WorkspaceWrite { roots.clone() } else { Vec::new() };
                writable.push(tmp.clone());
                if let (SandboxProfile::WorkspaceWrite, Some(home)) = (profile, std::env::var_os("HOME")) {
                    let env = |var: &str| caches::call_env(&ctx, var);
                    writable.extend(caches::cache_places(Path::new(&home), &env).into_iter().map(|(_, place)| place));
                }
                let inotify_limited = ctx.sandbox().status.inotify.enforced;
                crate::sandbox::blocked_note(profile, &summary.text, &writable, inotify_limited)
            }
            _ => None,
        };
        // `cd` as Claude Code 2.1.332 carries it: only a command that
        // succeeded (exit 0: its `&& pwd -P` runs only then) moves the
        // shell; one that ends outside the working directories sends it
        // back to the start folder, the session's cwd.
        let new_cwd = new_cwd.filter(|_| code == Some(0));
        let (kept_cwd, cwd_note, cwd_reset) = match new_cwd {
            Some(dir) if dir != cwd && carries(&ctx, &dir) => (Some(dir.clone()), Some(dir), false),
            Some(dir) if !carries(&ctx, &dir) => (Some(workspace.to_owned()), Some(dir), true),
            _ => (None, None, false),
        };
        // Outputs grow by the files calls write: a call that wrote none
        // (most) looks at nothing.
        let outputs_removed =
            summary.file.is_some().then(|| running_outputs(&ctx, summary.file.as_deref())).and_then(|kept| {
                crate::process::keep_within(&ctx.output_dir, crate::process::SESSION_OUTPUT_BYTES, &kept)
            });
        let result = BashResult {
            exit_code: code,
            killed,
            output: summary.text,
            elided_chars: summary.elided_chars,
            output_file: summary.file,
            note,
            stale_read_hint: stale::hint(&stale_reads, kept_cwd.as_deref().unwrap_or(&cwd)),
            stale_reads,
            output_bytes: summary.total_bytes,
            ended_leftovers: leftovers,
            cwd: cwd_note,
            cwd_reset,
            reset_to: cwd_reset.then(|| workspace.to_owned()),
            job_id: None,
            timed_out_after_ms: None,
            duration_ms: started.elapsed().as_millis() as u64,
            timeout_ms,
            sandbox: profile,
            network: network_of(&ctx, profile),
            network_refused: gate.as_ref().map(|g| g.refusals()).unwrap_or_default(),
            quarantined: finished.moved,
            outputs_removed,
            unexamined: finished.unexamined,
            objects_refused: finished.objects_refused,
            walls_missing: walls_missing(&ctx, profile),
            layered,
            effects,
        };
        let failed = result.killed.is_some() || (result.exit_code != Some(0) && result.note.is_none());
        if failed {
            let mut text = result_text(&result);
            if let Some(n) = sandbox_note {
                text.push_str(&n);
                text.push('\n');
            }
            return Err(ToolError::new(text));
        }
        if let Some(dir) = kept_cwd.as_ref().filter(|d| **d != cwd) {
            // Observed, not decided: the command has run.
            let moved = serde_json::json!({ "old_cwd": cwd, "new_cwd": dir });
            let _ = crate::hooks::Hooks::moment(&ctx, agentd_protocol::hooks::HookEvent::CwdChanged, moved).await;
        }
        match kept_cwd {
            Some(dir) => Ok(ToolOutput::with_modifier(result, Box::new(move |s| s.shell_cwd = Some(dir)))),
            None => Ok(ToolOutput::new(result)),
        }
    }

    /// Claude Code 2.1.332's names for what its Bash output carries beside
    /// stdout (see `result.rs`).
    fn structured(&self, r: &BashResult) -> Option<serde_json::Value> {
        r.structured()
    }

    fn result_content(&self, result: &BashResult) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(result_text(result))]
    }

    fn render_use(&self, input: &BashInput) -> String {
        match &input.description {
            Some(d) if !d.trim().is_empty() => d.trim().to_owned(),
            _ => format!("$ {}", one_line(&input.command, 80)),
        }
    }

    fn render_result(&self, r: &BashResult) -> String {
        if let Some(job) = &r.job_id {
            return match r.timed_out_after_ms {
                Some(ms) => format!("moved to the background as {job} after {ms} ms"),
                None => format!("started {job} in the background"),
            };
        }
        let lines = crate::tools::counted(r.output.lines().count(), "line", "lines");
        match (&r.note, r.exit_code) {
            (Some(note), Some(code)) => format!("exit {code} ({note}), {lines}"),
            (_, Some(code)) => format!("exit {code}, {lines}"),
            _ => lines,
        }
    }

    fn render_error(&self, input: &BashInput, error: &ToolError) -> String {
        let last = error.message.lines().rev().find(|l| l.starts_with('[')).unwrap_or("failed");
        format!("{}: {last}", self.render_use(input))
    }
}

/// What a call made ready before its command starts.
struct Ready {
    cwd: PathBuf,
    marker: String,
    log_file: PathBuf,
    tmp: CallTmp,
    cwd_file: PathBuf,
    script: String,
    profile: SandboxProfile,
    roots: Vec<PathBuf>,
    layers: Option<crate::sandbox::layer::CallLayers>,
    guard: Option<crate::sandbox::CallGuard>,
}

impl Bash {
    /// Starts `input`'s command as a background job of the session (Bash's
    /// `run_in_background`, or a Monitor's command with its `watcher`),
    /// confined as the call's grant says.
    pub(crate) async fn start_job(
        &self,
        input: &BashInput,
        ctx: &ToolContext,
        watcher: Option<std::sync::Arc<dyn process::jobs::Watcher>>,
    ) -> Result<std::sync::Arc<process::jobs::Job>, ToolError> {
        let Ready { cwd, marker, log_file, tmp, script, guard, .. } = self.ready(input, ctx).await?;
        let (launch, _gate) =
            launch(ctx, &self.0, input, &marker, tmp.path(), false, Wall { guard: guard.as_ref(), layers: None })?;
        ctx.need::<process::jobs::JobTable>()?
            .start(
                &input.command,
                &script,
                &cwd,
                process::jobs::JobRun {
                    marker: &marker,
                    output_file: Some(&log_file),
                    launch,
                    env: &ctx.info.env,
                    tmp: Some(tmp.path().to_owned()),
                    limit: Duration::from_millis(input.timeout.unwrap_or(BACKGROUND_DEFAULT_TIMEOUT_MS)),
                    at_end: job_end(guard),
                    watcher,
                },
            )
            // Started, the job removes it at its end; not, it goes now.
            .inspect(move |_| {
                tmp.keep();
            })
            .map_err(|e| ToolError::new(format!("cannot start bash: {e}")))
    }

    /// Makes ready what a call's command needs: its directory, private
    /// temp directory and output file, the walls of its profile (a layer
    /// or the older guard), and the script that runs it.
    async fn ready(&self, input: &BashInput, ctx: &ToolContext) -> Result<Ready, ToolError> {
        let cwd = ctx
            .session
            .shell_cwd
            .clone()
            .filter(|d| carries(ctx, d) && d.is_dir())
            .unwrap_or_else(|| ctx.cwd.to_path_buf());
        let marker = uuid::Uuid::new_v4().simple().to_string();
        let _ = std::fs::create_dir_all(&*ctx.output_dir);
        let log_file = ctx.output_dir.join(format!("bash-{marker}.log"));
        let tmp = private_tmp(ctx.sandbox().call_tmp.as_deref().unwrap_or(&ctx.output_dir), &marker)?;
        let cwd_file = tmp.path().join(".agentd-cwd");
        let script = format!("trap 'pwd -P > {}' EXIT\n{}", quote(&cwd_file), input.command);
        let profile = ctx.grant.sandbox_profile;
        if profile == SandboxProfile::Off
            && ctx.info.sandbox.network.gate().is_some_and(|g| g.allowed_domains.is_some())
        {
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
        let roots = sandbox_roots(ctx);
        // In a worktree the repository's objects are read-only: new ones go
        // to the worktree's staging directory, taken in at the end.
        let staging = if profile == SandboxProfile::WorkspaceWrite { object_staging(ctx) } else { None };
        // A foreground call that may write runs with its roots behind a
        // copy-on-write layer: what it changes is judged and applied when it
        // ends, and nothing of the workspace is examined before (issue 48).
        // Background jobs write through, behind the older wall.
        let layers = if effects::layered(ctx, profile, input.run_in_background, staging.is_some()) {
            Some(effects::prepare(ctx, &roots, &marker).map_err(ToolError::new)?)
        } else {
            None
        };
        // Under `auto_allow: "effects"` a command with no layer (a job, a
        // worktree's) would write the workspace as it goes: it asks first.
        if ctx.grant.effects && layers.is_none() {
            let asked = match ctx.services.get::<crate::tool::context::CallLine>() {
                None => Err("nobody can be asked".to_owned()),
                Some(line) => {
                    line.ask(crate::tool::MidCallAsk {
                        reason: format!(
                            "run `{}`: it writes the workspace as it goes (a background job, or no layer here), so \
                             what it changes cannot wait for approval",
                            one_line(&input.command, 80)
                        ),
                        suggestions: Vec::new(),
                        input: serde_json::json!({ "command": input.command, "description": input.description }),
                        kind: "command",
                        host: None,
                        port: None,
                        changes: Vec::new(),
                        diff: None,
                    })
                    .await
                }
            };
            if let Err(why) = asked {
                return Err(ToolError::new(format!("permission denied: {why}")));
            }
        }
        let guard = (profile == SandboxProfile::WorkspaceWrite && layers.is_none())
            .then(|| {
                let guard = crate::sandbox::CallGuard::new(&roots, &ctx.sandbox().placeholders)?;
                Ok(match staging.clone() {
                    Some((staging, main, sha256)) => guard.with_objects(staging, main, sha256),
                    None => guard,
                })
            })
            .transpose()
            .map_err(|e: String| ToolError::new(e))?;
        let script = match &staging {
            Some((staging, main, _)) => format!(
                "export GIT_OBJECT_DIRECTORY={} GIT_ALTERNATE_OBJECT_DIRECTORIES={}\n{script}",
                quote(staging),
                quote(main)
            ),
            None => script,
        };
        Ok(Ready { cwd, marker, log_file, tmp, cwd_file, script, profile, roots, layers, guard })
    }
}

/// What a job checks when its processes are gone: what its sandbox
/// guarded on the workspace, said in its output.
fn job_end(guard: Option<crate::sandbox::CallGuard>) -> Option<process::jobs::AtEnd> {
    guard.map(|guard| -> process::jobs::AtEnd {
        Box::new(move || {
            let finished = guard.finish();
            let refused = finished
                .objects_refused
                .iter()
                .map(|r| format!("an object the job wrote was not taken into the repository: {r}"));
            let moved = finished
                .moved
                .iter()
                .map(|m| format!("the job created {m}: settings that would be obeyed later, moved aside"));
            let unexamined = finished.unexamined.iter().map(|u| format!("the job ended: {u}"));
            refused.chain(moved).chain(unexamined).collect()
        })
    })
}

/// Whether the shell may stay in `dir` for the next call: inside the
/// working directories (the workspace and the session's added ones), and
/// not in agentd's own state.
fn carries(ctx: &ToolContext, dir: &Path) -> bool {
    ctx.inside(dir) && !crate::fs::in_state_dir(dir)
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
/// writable place outside the workspace in the sandbox, in `base` (the
/// short `/tmp/agentd-tmp-UID` where there is one: `TMPDIR/x.sock` must fit
/// a socket address, 107 bytes). Named by the first 12 characters of the
/// call's marker (48 random bits: `create` fails rather than reuse one).
fn private_tmp(base: &Path, marker: &str) -> Result<CallTmp, ToolError> {
    use std::os::unix::fs::DirBuilderExt;
    let tmp = base.join(format!("t-{}", marker.get(..12).unwrap_or(marker)));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&tmp)
        .map_err(|e| ToolError::new(format!("cannot create a temp directory for the command: {e}")))?;
    Ok(CallTmp(Some(tmp)))
}

/// A call's temp directory, removed when this goes (a call that fails, or
/// is dropped, part-way leaves none behind) unless it is handed on with
/// [`CallTmp::keep`] (to a background job, or to be removed after the
/// result is out).
struct CallTmp(Option<PathBuf>);

impl CallTmp {
    fn path(&self) -> &Path {
        self.0.as_deref().unwrap_or(Path::new(""))
    }

    /// The directory, now the caller's to remove.
    fn keep(mut self) -> PathBuf {
        self.0.take().unwrap_or_default()
    }
}

impl Drop for CallTmp {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
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
/// Why any command of this session asks unless a rule allows it: what the
/// sandbox cannot hide from it.
/// - Without the sandbox, agentd's state directory (or the TLS face's key)
///   in the workspace: no judgement of paths can be complete (`xargs`
///   joins them, `grep --rec` walks).
/// - Where the sandbox has no mount namespace (a partial one reads all of
///   `/`), the TLS face's key wherever it is: no mask can cover it.
pub fn exposure(
    info: &agentd_protocol::session::SessionInfo,
    sandbox: &crate::sandbox::Facility,
    cwd: &Path,
) -> Option<&'static str> {
    if !confinable(info, sandbox) && holds(info, cwd, crate::fs::holds_state_dir) {
        return Some("the workspace holds agentd's state directory, and no sandbox hides it");
    }
    secret_exposure(info, sandbox, cwd)
}

/// Whether the session's commands can be confined (the sandbox works here
/// and the session did not turn it off).
fn confinable(info: &agentd_protocol::session::SessionInfo, sandbox: &crate::sandbox::Facility) -> bool {
    sandbox.available && info.sandbox.mode != agentd_protocol::session::SandboxMode::Off
}

/// Whether `cwd` or one of the session's added directories holds what
/// `test` looks for.
fn holds(info: &agentd_protocol::session::SessionInfo, cwd: &Path, test: fn(&Path) -> bool) -> bool {
    test(cwd) || info.add_dirs.iter().any(|d| test(d))
}

/// The part of [`exposure`] no rule overrides (only bypass mode does): the
/// TLS face's key, whoever reads it can connect as the daemon's client.
pub fn secret_exposure(
    info: &agentd_protocol::session::SessionInfo,
    sandbox: &crate::sandbox::Facility,
    cwd: &Path,
) -> Option<&'static str> {
    let confinable = confinable(info, sandbox);
    if !confinable && holds(info, cwd, crate::fs::holds_secret) {
        return Some("the workspace holds agentd's TLS key, and no sandbox hides it");
    }
    if confinable && !sandbox.namespaces && crate::fs::has_secrets() {
        return Some("the sandbox cannot hide agentd's TLS key here: it has no mount namespace");
    }
    None
}

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
                        Some(real)
                            if ctx.inside(&real) && !crate::fs::in_state_dir(&real) && !crate::fs::is_secret(&real) =>
                        {
                            here = real
                        }
                        _ => return false,
                    }
                }
            }
            continue;
        }
        let words = c.args.iter().chain(&c.reads_files);
        let ok = words.into_iter().all(|arg| word_inside(arg, &here, ctx));
        // A glob reads where its matches are: `cat /e*/hostname` is outside
        // however little of the path it spells.
        let globs_inside = c.glob_roots.iter().all(|root| {
            if root.starts_with('~') {
                return false;
            }
            let dir = here.join(root);
            crate::fs::real_path(&dir).is_some_and(|real| {
                ctx.inside(&real) && !crate::fs::in_state_dir(&real) && !crate::fs::is_secret(&real)
            })
        });
        if !ok || !globs_inside {
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
        Some(real) => ctx.inside(&real) && !crate::fs::in_state_dir(&real) && !crate::fs::is_secret(&real),
        None => ctx.resolve_from(here, value).is_ok() && !value.contains(".."),
    }
}

/// Whether `command` only reads but for output redirections, all to files
/// inside the workspace (a symlink counts where it points; a new file where
/// its directory is).
fn only_edits_inside(command: &str, ctx: &ToolContext) -> bool {
    let Ok(mut script) = shell::parse(command) else { return false };
    if !facts::redirects_edit_inside(&script, ctx) {
        return false;
    }
    script.commands.iter_mut().for_each(|c| c.writes_files.clear());
    shell::is_read_only(&script)
}

/// Whether `command` parses and only reads.
fn read_only(command: &str) -> bool {
    shell::parse(command).map(|s| shell::is_read_only(&s)).unwrap_or(false)
}

/// The output files no sweep may remove: this call's, and those of the
/// session's background jobs still running (written as they go).
fn running_outputs(ctx: &ToolContext, own: Option<&Path>) -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = own.map(Path::to_path_buf).into_iter().collect();
    if let Ok(jobs) = ctx.need::<crate::process::jobs::JobTable>() {
        let running = jobs.list().into_iter().filter(|j| j.status == "running");
        keep.extend(running.filter_map(|j| jobs.get(&j.job_id)?.output_file.clone()));
    }
    keep
}

fn flush(progress: &ProgressSink, pending: &mut Vec<u8>, streamed: &mut usize) {
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
