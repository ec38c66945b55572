//! Admission: the last checks before a call runs and the facts the
//! permission policy decides on (one parse of a Bash command, the paths a
//! call names, the rules that match), then the verdict.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentd_protocol::hooks::HookEvent;
use agentd_protocol::session::SandboxProfile::WorkspaceWrite;
use agentd_protocol::tools::ContentBlock;

use super::{AskFor, Grant, SessionExecutor, Slot};
use crate::hooks::Completions;
use crate::permission::PermissionTarget;
use crate::permission::ask;
use crate::permission::policy::{self, CallFacts, RuleHit, Verdict};
use crate::permission::rules::{Facts, RuleKind};
use crate::tool::{CallOutcome, PreparedCall, SessionContext, ToolContext, ToolKind};

impl SessionExecutor {
    /// The last checks before a call runs, against the session as it is
    /// now (after every earlier result's modifier): a deferred tool must be
    /// loaded, the input valid, the tool willing. `Err` is the result to
    /// yield instead.
    ///
    /// `Ok(Some(_))`: the client must approve the call first.
    pub(super) fn admit(
        &self,
        slot: &Slot,
        call: &dyn PreparedCall,
        context: &SessionContext,
        ctx: &ToolContext,
        grant: &mut Grant,
        hook_allows: bool,
    ) -> Result<Option<AskFor>, CallOutcome> {
        // The call's path is resolved once for the facts and the tool's view.
        let _paths = crate::fs::remember_canonical();
        self.offered_and_valid(slot, call, context, ctx)?;
        let mode = context.mode.unwrap_or(self.services.info.mode);
        let (target, kind) = (call.permission_target(), call.kind());
        let facts = self.facts(ctx, target.clone());
        let plan_file = self.off_limits(kind, &facts)?;
        let rule_tool = call.rule_family().unwrap_or(&slot.name);
        let granted;
        let mut rule = self.rule_for(slot, call, &facts);
        if rule.is_none() {
            granted = self.services.asks.granted(rule_tool, &facts);
            rule = granted.as_ref();
        }
        let outside = match &facts {
            Facts::Path(p) if !ctx.inside(p) => Some(p.clone()),
            _ => None,
        };
        let edits = matches!(kind, ToolKind::EditsFile | ToolKind::EditsNotebook);
        let protected = if edits { protected_target(ctx, &facts) } else { None };
        let bash = call.shell_facts(ctx);
        // In accept_edits an output redirection into the workspace is an
        // edit: an allow rule for the rest of the command covers it.
        if rule.is_none()
            && mode == agentd_protocol::session::PermissionMode::AcceptEdits
            && let Facts::Bash(command) = &facts
            && bash.as_ref().is_some_and(|b| b.redirects_edit_inside)
        {
            rule = self.services.rules.allow_but_for_redirects(command);
        }
        let rule = rule.map(|r| RuleHit { kind: r.kind, text: r.text.clone(), source: r.origin.source.clone() });
        let rule = rule.or_else(|| hook_allows.then(hook_allow));
        let call_facts = CallFacts {
            tool: slot.name.clone(),
            mode,
            read_only: call.is_read_only(),
            question: kind == ToolKind::Question,
            edits,
            outside: outside.is_some(),
            protected,
            rule,
            tool_view: call.check_permissions(ctx),
            bash,
            sandbox: self.services.info.sandbox.clone(),
            sandbox_available: self.services.sandbox.available,
            missing_walls: self.services.sandbox.missing_walls().into_iter().map(str::to_owned).collect(),
            plan_file,
        };
        match policy::decide(&call_facts) {
            Verdict::Allow { open_outside, profile: p, unasked } => {
                if open_outside {
                    grant.approved_outside = outside;
                }
                grant.profile = p;
                grant.scrub_env = unasked;
                // Unasked in workspace_write: `auto_allow` did it.
                grant.effects = unasked && p == Some(WorkspaceWrite) && self.services.info.sandbox.auto_allow.effects();
                Ok(None)
            }
            Verdict::Ask { reason, suggestion, suggest, profile: p } => {
                grant.profile = p;
                let mut suggestions: Vec<String> = suggestion.into_iter().collect();
                if suggest {
                    let more = ask::suggestions(rule_tool, &target, &facts, &ctx.cwd);
                    suggestions.extend(more.into_iter().filter(|s| !suggestions.contains(s)).collect::<Vec<_>>());
                }
                Ok(Some(AskFor { reason, suggestions, input: slot.input.clone().unwrap_or_default(), outside }))
            }
            Verdict::Refuse { message } => Err(refused(call, message)),
        }
    }

    /// The rule that decides a call: its tool's, and for a call judged by
    /// another tool's rules too (Monitor's command by Bash's) the stricter.
    fn rule_for(&self, slot: &Slot, call: &dyn PreparedCall, facts: &Facts) -> Option<&crate::permission::rules::Rule> {
        let own = self.services.rules.decide_call(&slot.name, facts, slot.input.as_ref());
        match call.rule_family() {
            Some(family) => {
                crate::permission::rules::stricter(own, self.services.rules.decide_call(family, facts, None))
            }
            None => own,
        }
    }

    /// The tool is offered now (a deferred one loaded) and the input valid.
    fn offered_and_valid(
        &self,
        slot: &Slot,
        call: &dyn PreparedCall,
        context: &SessionContext,
        ctx: &ToolContext,
    ) -> Result<(), CallOutcome> {
        if let Err(e) = self.tools().resolve_for_call(&slot.name, context) {
            return Err(CallOutcome::input_error(e.to_string()));
        }
        call.validate(ctx).map_err(|e| CallOutcome::input_error(format!("invalid input for {}: {e}", slot.name)))
    }

    /// agentd's own state (every session's records, the ledgers) and its
    /// secret files are off limits to every tool, in every mode, but for
    /// the session's own plan file and output. `Ok(true)`: the call is
    /// about the session's plan file.
    fn off_limits(&self, kind: ToolKind, facts: &Facts) -> Result<bool, CallOutcome> {
        let Facts::Path(p) = facts else { return Ok(false) };
        // The session's own plan file, written by Write or Edit (or read).
        let plan_file = matches!(kind, ToolKind::ReadsFile | ToolKind::EditsFile) && self.services.plan_file.0 == *p;
        if crate::fs::in_state_dir(p)
            && !(matches!(kind, ToolKind::ReadsFile | ToolKind::Searches) && self.own_output(p))
            && !plan_file
        {
            return Err(CallOutcome::error(format!(
                "{} is in agentd's state directory, which no tool may read or change",
                p.display()
            ))
            .failed_as(crate::metrics::Failure::Refused));
        }
        if crate::fs::is_secret(p) {
            return Err(CallOutcome::error(format!("{}: {}", p.display(), crate::fs::SECRET_REFUSAL))
                .failed_as(crate::metrics::Failure::Refused));
        }
        Ok(plan_file)
    }

    /// Whether `path` is in this session's own output directory (where
    /// Bash keeps a command's full output, for the model to Read).
    fn own_output(&self, path: &std::path::Path) -> bool {
        crate::fs::canonical(&self.services.output_dir).is_ok_and(|dir| path.starts_with(dir))
    }

    /// What rules see of a call: its command, or its file resolved
    /// (symlinks followed) inside the workspace.
    pub(super) fn facts(&self, ctx: &ToolContext, target: PermissionTarget) -> Facts {
        match target {
            PermissionTarget::None => Facts::Other,
            PermissionTarget::Command(c) => Facts::Bash(c),
            PermissionTarget::Domain(d) => Facts::Domain(d),
            PermissionTarget::Name(n) => Facts::Name(n),
            PermissionTarget::Path(p) => match ctx.resolve(&p) {
                Ok(path) => Facts::Path(crate::fs::judged_path(&path.abs())),
                Err(_) => {
                    let raw = PathBuf::from(&p);
                    Facts::Path(crate::fs::judged_path(&if raw.is_absolute() { raw } else { ctx.cwd.join(raw) }))
                }
            },
        }
    }
}

impl SessionExecutor {
    /// Whether a Read of `file_path` would run now without asking: the
    /// checks of admission (the tool offered, the input valid, agentd's
    /// state and secret files, the rules, the policy), then the session's
    /// PreToolUse hooks for Read (a deny, an ask or a rewritten input
    /// refuses). `Ok` is the path such a call would open. What
    /// `workspace/read` (MCP resources) serves; a question is never asked
    /// here (the Read tool asks).
    pub async fn readable_unasked(&self, file_path: &str) -> Result<crate::fs::WsPath, String> {
        const READ: &str = crate::permission::READ_TOOL;
        let use_read = "ask for it with the Read tool";
        let tool = self.tools().find(READ).ok_or("this session has no Read tool")?.clone();
        let input = serde_json::json!({ "file_path": file_path });
        let call = tool.prepare(input.clone()).map_err(|e| format!("invalid path: {e}"))?;
        let slot = Slot {
            tool_use_id: String::new(),
            name: READ.to_owned(),
            turn_id: Arc::from(""),
            prepared: None,
            outcome: None,
            token: None,
            live: Arc::default(),
            waiter: None,
            render_use: String::new(),
            input: Some(input.clone()),
            sandbox: None,
            since: std::time::Instant::now(),
            network: None,
        };
        // Against the session as it is now, as a call's admission is.
        let (ctx, mode) = {
            let inner = self.lock();
            let ctx = self.tool_context(tokio_util::sync::CancellationToken::new(), &inner.context);
            match self.admit(&slot, call.as_ref(), &inner.context, &ctx, &mut Grant::default(), false) {
                Ok(None) => {}
                // Not the reason: it would name where a link leads.
                Ok(Some(_)) => return Err(format!("not readable without asking: {use_read}")),
                Err(outcome) => return Err(super::hooked::text_of(&outcome.content)),
            }
            (ctx, crate::hooks::mode_name(inner.context.mode.unwrap_or(self.services.info.mode)))
        };
        let path = ctx.resolve(file_path).map_err(|e| e.to_string())?;
        let hooks = &self.services.hooks;
        if !hooks.wants(HookEvent::PreToolUse, READ) {
            return Ok(path);
        }
        let id = format!("resource-{}", uuid::Uuid::new_v4().simple());
        let hook_input =
            super::hooked::pre_tool_use_json(READ, &input, Some(&id), mode, &ctx.cwd.display().to_string());
        let about = crate::hooks::About { turn_id: None, tool_use_id: Some(id), tool_name: Some(READ.to_owned()) };
        let token = tokio_util::sync::CancellationToken::new();
        let said = hooks.run(HookEvent::PreToolUse, READ, hook_input, &about, &token, Completions::Returned).await;
        {
            let _order = self.lock();
            for event in said.events {
                self.events.push(event);
            }
        }
        let reason = said.reason.unwrap_or_else(|| "(no reason given)".into());
        match said.decision {
            Some(crate::hooks::Decision::Deny | crate::hooks::Decision::Stop) => {
                Err(format!("denied by a PreToolUse hook: {reason}"))
            }
            Some(crate::hooks::Decision::Ask) => Err(format!("a PreToolUse hook asks ({reason}): {use_read}")),
            _ if said.updated_input.is_some() => Err(format!("a PreToolUse hook rewrites the call: {use_read}")),
            _ => Ok(path),
        }
    }

    /// Whether a file found by a walk of the workspace may be listed: what
    /// [`SessionExecutor::readable_unasked`] checks that depends on the
    /// path alone, cheaply (no hooks, no policy: a listed file is still
    /// checked in full when read). Also what an opened file's real path
    /// must pass (a link swapped after the check).
    pub fn listable(&self, real: &Path) -> bool {
        let facts = Facts::Path(real.to_path_buf());
        !crate::fs::in_state_dir(real)
            && !crate::fs::is_secret(real)
            && self.services.rules.read_denied(real).is_none()
            && !self
                .services
                .rules
                .decide(crate::permission::READ_TOOL, &facts)
                .is_some_and(|r| r.kind != RuleKind::Allow)
    }

    /// Whether `real` is inside the session's workspace (or an added
    /// directory), as calls see it now.
    pub fn inside_workspace(&self, real: &Path) -> bool {
        self.with_context(|context| {
            let (cwd, info) = self.workspace(context);
            crate::fs::is_inside(&cwd, &info.add_dirs, real)
        })
    }

    /// Whether the session offers the tool `name` now.
    pub fn offers(&self, name: &str) -> bool {
        self.with_context(|c| self.tools().resolve_for_call(name, c).is_ok())
    }
}

/// The protected file an edit names (hooks, settings, the repository's
/// git directory wherever a `.git` file points), if it names one.
fn protected_target(ctx: &ToolContext, facts: &Facts) -> Option<String> {
    let Facts::Path(p) = facts else { return None };
    crate::permission::names_protected(&ctx.cwd, p).then(|| p.display().to_string())
}

/// The result of a call the permission check refused.
pub(super) fn refused(call: &dyn PreparedCall, message: String) -> CallOutcome {
    let render = call.render_rejected(&message);
    CallOutcome {
        content: vec![ContentBlock::text(message)],
        is_error: true,
        render,
        modifier: None,
        structured: None,
        content_meta: Box::default(),
        failure: Some(crate::metrics::Failure::Refused),
    }
}

/// A PreToolUse hook's allow counts as an allow rule for its call: it
/// answers what a rule would, not what only a person may (protected files,
/// a repository's git configuration, running outside the sandbox), and a
/// deny or ask rule still decides.
fn hook_allow() -> RuleHit {
    RuleHit { kind: RuleKind::Allow, text: "allow".into(), source: "a PreToolUse hook".into() }
}
