//! Sessions brought back at start-up from the store: their records, the
//! calls the last daemon left unfinished (ended, and said so), and the
//! context their last events imply.

use super::*;

impl SessionManager {
    /// Opens every session the store kept, as it was: its context, granted
    /// rules and events. A call the previous daemon never finished gets an
    /// error result ("interrupted: the daemon restarted"), its turn
    /// completes, and an open permission request is resolved as denied, so
    /// no client waits for them forever. Returns how many were restored.
    pub fn restore(&self) -> usize {
        let stored = match self.store.load_sessions() {
            Ok(stored) => stored,
            Err(e) => {
                tracing::error!("cannot read the session store: {e}");
                return 0;
            }
        };
        let mut stored = stored;
        stored.sort_by_key(|s| s.record.info.created_at_ms);
        let mut count = 0;
        for Stored { record, events, durable } in stored {
            let SessionRecord { mut info, mut context, mut granted_rules, jobs, .. } = record;
            // Events are journaled before the record is saved: the last
            // worktree and task list they announce are the newest, and the
            // journal's last durable line is newer than the record for all
            // it holds.
            recover_from_events(&mut context, &events);
            if let Some(durable) = durable {
                granted_rules = durable.apply(&mut context);
            }
            let id = info.session_id.clone();
            // Its connection died with the daemon that had it; a child's
            // Task call (or its parent's rules as they were) did too.
            if info.close_with_connection || info.parent_session_id.is_some() {
                let _ = self.store.remove_session(&id);
                let _ = std::fs::remove_dir_all(self.state_dir.join("sessions").join(&id));
                tracing::info!(session_id = %id, "not restored: a child session, or one that closed with its connection");
                continue;
            }
            // What session/create would refuse is not restored either.
            match canonical_workspace(&info.cwd) {
                Ok(cwd) => info.cwd = cwd,
                Err(e) => {
                    tracing::warn!(session_id = %id, "not restored: {e}");
                    continue;
                }
            }
            info.max_concurrency = info.max_concurrency.clamp(1, MAX_TOOL_CONCURRENCY_LIMIT);
            let files = settings_files(&info.cwd, &self.trust);
            let rules = session_rules(&mut info, &files);
            session_env(&mut info, &files);
            let hooks = session_hooks(&mut info, &files);
            info.untrusted = crate::trust::untrusted(&info.cwd, &self.trust);
            let mcp = self.session_mcp(&mut info);
            let past_jobs: Vec<JobInfo> = jobs
                .into_iter()
                .map(|mut j| {
                    if j.status == "running" {
                        j.status = "killed".into();
                    }
                    j
                })
                .collect();
            let unfinished = unfinished(&events);
            self.open(info, rules, hooks, Some(Restored { context, events, granted_rules }), past_jobs, mcp);
            if let Ok(session) = self.handle(&id) {
                let log = session.executor.events();
                for kind in unfinished {
                    log.push(kind);
                }
                // Its record is as the store has it; the events that ended
                // what was unfinished are in its journal.
                session.saved.store(session.executor.revision(), Ordering::Relaxed);
            }
            tracing::info!(session_id = %id, "session restored");
            count += 1;
        }
        self.flush();
        count
    }
}

/// What a dead daemon left unfinished in a session's events, as the events
/// that finish it: each call without a result gets an error result, each
/// open permission request is resolved as denied, each turn not completed
/// or discarded completes.
pub(super) fn unfinished(events: &[Event]) -> Vec<EventKind> {
    const WHY: &str = "interrupted: the daemon restarted";
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut requests: Vec<(String, String, String)> = Vec::new();
    let mut turns: Vec<String> = Vec::new();
    for e in events {
        match &e.kind {
            EventKind::ToolQueued { turn_id, tool_use_id, name, .. } => {
                calls.push((turn_id.clone(), tool_use_id.clone(), name.clone()));
                if !turns.contains(turn_id) {
                    turns.push(turn_id.clone());
                }
            }
            EventKind::ToolResult { tool_use_id, .. } => calls.retain(|c| &c.1 != tool_use_id),
            EventKind::PermissionRequest { turn_id, tool_use_id, request_id, .. } => {
                requests.push((turn_id.clone(), tool_use_id.clone(), request_id.clone()));
            }
            EventKind::PermissionResolved { request_id, .. } => requests.retain(|r| &r.2 != request_id),
            EventKind::TurnCompleted { turn_id, .. } | EventKind::TurnDiscarded { turn_id } => {
                turns.retain(|t| t != turn_id);
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    for (turn_id, tool_use_id, request_id) in requests {
        out.push(EventKind::PermissionResolved {
            turn_id,
            tool_use_id,
            request_id,
            allowed: false,
            reason: WHY.into(),
        });
    }
    for (turn_id, tool_use_id, name) in calls {
        out.push(EventKind::ToolResult {
            turn_id,
            tool_use_id,
            name,
            content: vec![agentd_protocol::tools::ContentBlock::text(WHY)],
            is_error: true,
            render: WHY.into(),
            sandbox: None,
            network: None,
            structured_content: None,
            content_meta: Vec::new(),
            changes: Vec::new(),
            changes_omitted: None,
        });
    }
    for turn_id in turns {
        out.push(EventKind::turn_completed(turn_id));
    }
    out
}

/// Brings a restored context up to what its last events announced (a
/// daemon killed right after a call may not have saved its record yet).
pub(super) fn recover_from_events(context: &mut SessionContext, events: &[agentd_protocol::turn::Event]) {
    use agentd_protocol::turn::EventKind;
    if let Some(worktree) = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::WorktreeChanged { worktree, .. } => Some(worktree),
        _ => None,
    }) && context.worktree != *worktree
    {
        context.worktree = worktree.clone();
        context.shell_cwd = None;
    }
    if let Some(tasks) = events.iter().rev().find_map(|e| match &e.kind {
        EventKind::TasksChanged { tasks, .. } => Some(tasks),
        _ => None,
    }) {
        context.tasks = tasks.clone();
        let highest = tasks.iter().filter_map(|t| t.id.parse::<u64>().ok()).max().unwrap_or(0);
        context.last_task_id = context.last_task_id.max(highest);
    }
}
