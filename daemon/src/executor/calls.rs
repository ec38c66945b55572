//! What a call sees of its session: the workspace as the session's
//! context has it (a worktree, the model's settings), the tools, and the
//! [`ToolContext`] a call runs with; and the calls as they stand now
//! (`daemon/activity`, whether the session is busy).

use super::*;
use crate::sync::RwLockExt;

/// A background task's end is the session's to hear: a
/// `task/notification` (2.1.332 tells the model; the harness hands it over).
pub(super) fn tell_ends(jobs: &JobTable, events: &Arc<EventLog>) {
    let log = Arc::downgrade(events);
    jobs.notify_with(Arc::new(move |job: &crate::process::jobs::Job| {
        if let Some(log) = log.upgrade() {
            let (status, summary, text) = job.notice();
            log.push(EventKind::TaskNotification {
                task_id: job.id.clone(),
                task_type: job.kind.task_type().to_owned(),
                status: status.to_owned(),
                summary,
                text,
            });
        }
    }));
}

impl SessionExecutor {
    /// Moves the session into the worktree `w` (a sub-agent's isolation), as
    /// EnterWorktree's modifier does.
    pub fn work_in(&self, w: agentd_protocol::session::WorktreeInfo) {
        let mut inner = self.lock();
        inner.context.worktree = Some(w);
        inner.context.shell_cwd = None;
    }

    pub(super) fn unknown_tool(&self, name: &str, context: &SessionContext) -> CallOutcome {
        match self.tools().resolve_for_call(name, context) {
            Err(e) => CallOutcome::input_error(e.to_string()),
            Ok(_) => CallOutcome::input_error(format!("no tool named {name:?}")),
        }
    }

    /// The session's workspace as `context` has it: its directory and its
    /// settings (a worktree EnterWorktree made replaces the directory).
    pub(super) fn workspace(&self, context: &SessionContext) -> (Arc<PathBuf>, Arc<SessionInfo>) {
        if context.worktree.is_none() && context.settings.is_empty() {
            return (self.cwd.clone(), self.services.info.clone());
        }
        let mut info = (*self.services.info).clone();
        context.apply_settings(&mut info);
        match &context.worktree {
            None => (self.cwd.clone(), Arc::new(info)),
            Some(w) => {
                info.cwd = w.cwd.clone();
                (Arc::new(w.cwd.clone()), Arc::new(info))
            }
        }
    }

    /// The session's tools now.
    pub fn tools(&self) -> Arc<ToolSet> {
        self.tools.read_locked().clone()
    }

    /// Replaces the session's tools (an MCP server's list changed); calls
    /// admitted before keep the tool they resolved. Returns the old set.
    pub fn replace_tools(&self, tools: Arc<ToolSet>) -> Arc<ToolSet> {
        std::mem::replace(&mut *self.tools.write_locked(), tools)
    }

    /// The session's workspace as calls see it now (a worktree's, once
    /// EnterWorktree moved there).
    pub fn workspace_dir(&self) -> PathBuf {
        self.with_context(|c| (*self.workspace(c).0).clone())
    }

    pub(super) fn tool_context(&self, cancel: CancellationToken, context: &SessionContext) -> ToolContext {
        let (cwd, info) = self.workspace(context);
        let mut services = crate::tool::context::Services::default();
        services.provide(self.services.jobs.clone());
        services.provide(self.services.sandbox.clone());
        services.provide(self.services.plan_file.clone());
        services.provide(self.services.pending_writes.clone());
        services.provide(self.services.hooks.clone());
        if let Some(metrics) = self.metrics.get() {
            services.provide(metrics.clone());
        }
        ToolContext {
            session_id: self.session_id.clone(),
            cwd,
            cancel,
            tools: self.tools(),
            session: Arc::new(context.clone()),
            info,
            output_dir: self.services.output_dir.clone(),
            rules: self.services.rules.clone(),
            grant: crate::tool::context::CallGrant::default(),
            services,
        }
    }

    /// The calls queued or running now: each one's id, tool, what it does,
    /// whether it runs, and how long since it was accepted.
    pub fn calls_now(&self) -> Vec<agentd_protocol::methods::ActiveCall> {
        use machine::CallState;
        let inner = self.lock();
        (inner.slots.start()..inner.slots.end())
            .filter_map(|i| {
                let state = inner.machine.state(i)?;
                let slot = inner.slots.get(i)?;
                let running = match state {
                    CallState::Queued => false,
                    CallState::Executing => true,
                    _ => return None,
                };
                Some(agentd_protocol::methods::ActiveCall {
                    tool_use_id: slot.tool_use_id.clone(),
                    turn_id: slot.turn_id.to_string(),
                    name: slot.name.clone(),
                    render: slot.render_use.clone(),
                    running,
                    age_ms: slot.since.elapsed().as_millis() as u64,
                })
            })
            .collect()
    }

    /// Whether a turn is open (a call queued, running or not yet handed
    /// out, or more calls to come):
    /// the session is `running`, else `idle`.
    pub fn busy(&self) -> bool {
        use machine::CallState;
        let inner = self.lock();
        let calls = (inner.slots.start()..inner.slots.end()).any(|i| {
            matches!(inner.machine.state(i), Some(CallState::Queued | CallState::Executing | CallState::Completed))
        });
        calls || (inner.turns.start()..inner.turns.end()).any(|t| !inner.machine.turn_ended(t))
    }
}
