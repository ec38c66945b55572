//! Child sessions: the sessions the Task tool makes (what they inherit
//! of their parent and cannot widen), the agent host that makes them, and
//! cancelling them with their parent.

use super::*;

/// The session manager as the Task tool's host.
pub(super) struct ChildMaker(std::sync::Weak<SessionManager>);

impl crate::agents::AgentHost for ChildMaker {
    fn spawn_child(&self, parent: &str, child: crate::agents::ChildAsk<'_>) -> Result<(String, Vec<String>), String> {
        self.0.upgrade().ok_or("the daemon is stopping")?.spawn_child(parent, child)
    }

    fn cancel_child(&self, child: &str) {
        if let Some(sessions) = self.0.upgrade() {
            sessions.cancel_all(child);
        }
    }

    fn close_child(&self, child: &str) {
        if let Some(sessions) = self.0.upgrade() {
            let _ = sessions.close(child);
        }
    }
}

impl SessionManager {
    /// A child's `session/create` params: the parent's settings, narrowed
    /// by what the child asked (tools, deny and ask rules); anything that
    /// would widen them is refused.
    pub(super) fn inherit(
        &self,
        parent_id: &str,
        asked: SessionCreateParams,
    ) -> Result<SessionCreateParams, SessionError> {
        let parent = self.handle(parent_id)?;
        let refuse = |field: &'static str| SessionError::Invalid {
            field,
            why: "a child session inherits it from its parent".into(),
        };
        if asked.mode.is_some() {
            return Err(refuse("mode"));
        }
        if asked.sandbox.is_some() {
            return Err(refuse("sandbox"));
        }
        if asked.add_dirs.is_some() {
            return Err(refuse("add_dirs"));
        }
        if asked.web.is_some() {
            return Err(refuse("web"));
        }
        if asked.mcp_servers.is_some() || asked.enable_project_mcp.is_some() {
            return Err(refuse("mcp_servers"));
        }
        if asked.hooks.is_some() || asked.enable_project_hooks.is_some() {
            return Err(refuse("hooks"));
        }
        if asked.env.is_some() {
            return Err(refuse("env"));
        }
        if asked.permissions.as_ref().is_some_and(|p| !p.allow.is_empty()) {
            return Err(SessionError::Invalid {
                field: "permissions",
                why: "a child session may add deny and ask rules, not allow rules".into(),
            });
        }
        let info = parent.current_info();
        let context = parent.context();
        let workspace = context.worktree.as_ref().map(|w| w.cwd.clone()).unwrap_or_else(|| info.cwd.clone());
        // The child works in the parent's workspace (a directory of it).
        let cwd = canonical_workspace(&asked.cwd)?;
        if !crate::fs::is_inside(&workspace, &info.add_dirs, &cwd) {
            return Err(SessionError::Invalid {
                field: "cwd",
                why: format!("a child session works inside its parent's workspace ({})", workspace.display()),
            });
        }
        let mut permissions = info.permissions.clone();
        permissions.allow.extend(info.granted_rules.iter().cloned());
        if let Some(p) = &asked.permissions {
            permissions.deny.extend(p.deny.iter().cloned());
            permissions.ask.extend(p.ask.iter().cloned());
        }
        let mut tools = info.tools.clone();
        if let Some(t) = &asked.tools {
            tools.simple |= t.simple;
            tools.disabled.extend(t.disabled.iter().cloned());
            // A child narrows its parent's list, never widens it.
            tools.only = match (tools.only.take(), &t.only) {
                (Some(parent), Some(child)) => Some(parent.into_iter().filter(|n| child.contains(n)).collect()),
                (parent, child) => parent.or_else(|| child.clone()),
            };
        }
        // Sub-agents do not make sub-agents.
        tools.disabled.push(crate::tools::task::NAME.to_owned());
        let mut bash = info.bash;
        context.apply_bash_settings(&mut bash);
        Ok(SessionCreateParams {
            cwd,
            mode: Some(context.mode.unwrap_or(info.mode)),
            permissions: Some(permissions),
            tools: Some(tools),
            max_concurrency: Some(info.max_concurrency),
            sibling_cancel: Some(info.sibling_cancel),
            bash: Some(bash),
            permission_timeout_ms: Some(info.permission_timeout_ms),
            add_dirs: Some(info.add_dirs.clone()),
            sandbox: Some(info.sandbox.clone()),
            web: Some(info.web),
            close_with_connection: asked.close_with_connection,
            parent_session_id: Some(parent_id.to_owned()),
            // The parent's own variables; the user's come from the settings.
            env: info.session_env.clone(),
            name: asked.name.clone(),
            // A hidden parent's sub-agents are hidden too (they would name it).
            discoverable: Some(info.discoverable && asked.discoverable.unwrap_or(true)),
            ..SessionCreateParams::new(info.cwd.clone())
        })
    }

    /// The open children of a session.
    pub fn children(&self, session_id: &str) -> Vec<String> {
        let mut out: Vec<(u64, String)> = self
            .lock()
            .values()
            .filter(|s| s.info.parent_session_id.as_deref() == Some(session_id))
            .map(|s| (s.seq, s.info.session_id.clone()))
            .collect();
        out.sort();
        out.into_iter().map(|(_, id)| id).collect()
    }

    /// Makes this manager the Task tool's host (weakly: the manager owns
    /// the sessions, which own their executors, which hold the host).
    pub fn install_agent_host(self: &Arc<Self>) {
        self.set_agent_host(Arc::new(ChildMaker(Arc::downgrade(self))));
    }

    /// Gives sessions (those open now and to come) what makes child
    /// sessions for the Task tool.
    pub fn set_agent_host(&self, host: crate::agents::Host) {
        for session in self.lock().values() {
            session.executor.set_agent_host(host.clone());
        }
        let _ = self.agent_host.set(host);
    }

    /// A child of `parent` for a sub-agent: the parent's settings, the
    /// tools `tools` names (all the parent's when `None`) but never Task.
    /// Its id and the tools it offers.
    pub fn spawn_child(
        &self,
        parent: &str,
        child: crate::agents::ChildAsk<'_>,
    ) -> Result<(String, Vec<String>), String> {
        let crate::agents::ChildAsk { tools, disallowed, name, worktree } = child;
        // Claude Code 2.1.332's cap (checked again here: two calls may race).
        if self.children(parent).len() >= crate::agents::MAX_CONCURRENT {
            return Err(crate::process::jobs::cap_reached(crate::agents::MAX_CONCURRENT));
        }
        let handle = self.handle(parent).map_err(|e| e.to_string())?;
        let context = handle.context();
        let cwd = match worktree {
            Some(w) => w.cwd.clone(),
            None => context.worktree.as_ref().map(|w| w.cwd.clone()).unwrap_or_else(|| handle.info.cwd.clone()),
        };
        let mut disabled = vec![crate::tools::task::NAME.to_owned()];
        disabled.extend(disallowed.iter().cloned());
        if let Some(keep) = tools {
            let offered = handle.tools().listed_names().into_iter().chain(handle.tools().deferred_names());
            disabled.extend(offered.filter(|n| !keep.iter().any(|k| k == n)));
        }
        drop(handle);
        let params = SessionCreateParams {
            tools: Some(agentd_protocol::session::ToolOptions {
                disabled,
                only: tools.map(<[String]>::to_vec),
                ..Default::default()
            }),
            parent_session_id: Some(parent.to_owned()),
            name: name.map(str::to_owned),
            ..SessionCreateParams::new(cwd)
        };
        let prepared = self.prepare(params).map_err(|e| e.to_string())?;
        let info = self.commit(prepared).map_err(|e| e.to_string())?;
        let child = self.handle(&info.session_id).map_err(|e| e.to_string())?;
        if let Some(w) = worktree {
            child.executor.work_in(w.clone());
        }
        let tools = child.tools();
        let mut names = tools.listed_names();
        names.extend(tools.deferred_names());
        Ok((info.session_id, names))
    }

    /// Cancels everything a session's children (and theirs) run.
    pub fn cancel_children(&self, session_id: &str) {
        for child in self.children(session_id) {
            self.cancel_all(&child);
            self.cancel_children(&child);
        }
    }
}
