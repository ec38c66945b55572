//! Admission: the last checks before a call runs and the facts the
//! permission policy decides on (one parse of a Bash command, the paths a
//! call names, the rules that match), then the verdict.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentd_protocol::tools::ContentBlock;

use super::{AskFor, EDIT_TOOLS, Grant, READ_TOOLS, SessionExecutor, Slot, real_path};
use crate::permission::PermissionTarget;
use crate::permission::ask;
use crate::permission::policy::{self, BashFacts, CallFacts, RuleHit, Verdict};
use crate::permission::rules::{Facts, RuleKind};
use crate::tool::{CallOutcome, PreparedCall, SessionContext, ToolContext};

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
        if let Err(e) = self.tools().resolve_for_call(&slot.name, context) {
            return Err(CallOutcome::error(e.to_string()));
        }
        if let Err(e) = call.validate(ctx) {
            return Err(CallOutcome::error(format!("invalid input for {}: {e}", slot.name)));
        }
        let mode = context.mode.unwrap_or(self.services.info.mode);
        let target = call.permission_target();
        let facts = self.facts(ctx, target.clone());
        // The session's own plan file, written by Write or Edit (or read).
        let plan_file = ["Write", "Edit", "MultiEdit", "Read"].contains(&slot.name.as_str())
            && matches!(&facts, Facts::Path(p) if crate::fs::plan_file(&ctx.session_id).is_some_and(|f| *p == f));
        // agentd's own state (every session's records, the ledgers) is off
        // limits to every tool, in every mode (but that file).
        if let Facts::Path(p) = &facts
            && crate::fs::in_state_dir(p)
            && !(READ_TOOLS.contains(&slot.name.as_str()) && self.own_output(p))
            && !plan_file
        {
            return Err(CallOutcome::error(format!(
                "{} is in agentd's state directory, which no tool may read or change",
                p.display()
            )));
        }
        if let Facts::Path(p) = &facts
            && crate::fs::is_secret(p)
        {
            return Err(CallOutcome::error(format!("{}: {}", p.display(), crate::fs::SECRET_REFUSAL)));
        }
        let granted;
        let mut rule = self.services.rules.decide(&slot.name, &facts);
        if rule.is_none() {
            granted = self.services.asks.granted(&slot.name, &facts);
            rule = granted.as_ref();
        }
        let outside = match &facts {
            Facts::Path(p) if !ctx.inside(p) => Some(p.clone()),
            _ => None,
        };
        let edits = EDIT_TOOLS.contains(&slot.name.as_str());
        // The repository's git directory is protected wherever it is (a
        // `.git` file may point anywhere).
        let git_dir =
            if edits { crate::permission::git_dir(&ctx.cwd).and_then(|g| std::fs::canonicalize(g).ok()) } else { None };
        let protected = match &facts {
            Facts::Path(p)
                if edits
                    && (crate::permission::is_protected(p.strip_prefix(&*ctx.cwd).unwrap_or(p))
                        || crate::permission::is_protected_target(&ctx.cwd, p)
                        || crate::permission::is_user_protected(p)
                        || git_dir.as_ref().is_some_and(|g| p.starts_with(g))) =>
            {
                Some(p.display().to_string())
            }
            _ => None,
        };
        let bash = match &facts {
            Facts::Bash(command) => Some(self.bash_facts(command, slot, context, &ctx.cwd)),
            _ => None,
        };
        // In accept_edits an output redirection into the workspace is an
        // edit: an allow rule for the rest of the command covers it.
        if rule.is_none()
            && mode == agentd_protocol::session::PermissionMode::AcceptEdits
            && let Facts::Bash(command) = &facts
            && crate::shell::parse(command).is_ok_and(|s| crate::tools::bash::redirects_edit_inside(&s, ctx))
        {
            rule = self.services.rules.allow_but_for_redirects(command);
        }
        // A PreToolUse hook's allow counts as an allow rule for this call:
        // it answers what a rule would, not what only a person may
        // (protected files, a repository's git configuration, running
        // outside the sandbox), and a deny or ask rule still decides.
        let rule = rule.map(|r| RuleHit { kind: r.kind, text: r.text.clone(), source: r.origin.source.clone() });
        let rule = rule.or_else(|| {
            hook_allows.then(|| RuleHit {
                kind: RuleKind::Allow,
                text: "allow".into(),
                source: "a PreToolUse hook".into(),
            })
        });
        let call_facts = CallFacts {
            tool: slot.name.clone(),
            mode,
            read_only: call.is_read_only(),
            question: slot.name == crate::tools::ask_user_question::NAME,
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
                Ok(None)
            }
            Verdict::Ask { reason, suggestion, suggest, profile: p } => {
                grant.profile = p;
                let mut suggestions: Vec<String> = suggestion.into_iter().collect();
                if suggest {
                    for s in ask::suggestions(&slot.name, &target, &facts, &ctx.cwd) {
                        if !suggestions.contains(&s) {
                            suggestions.push(s);
                        }
                    }
                }
                Ok(Some(AskFor { reason, suggestions, input: slot.input.clone().unwrap_or_default(), outside }))
            }
            Verdict::Refuse { message } => {
                let render = call.render_rejected(&message);
                Err(CallOutcome {
                    content: vec![ContentBlock::text(message)],
                    is_error: true,
                    render,
                    modifier: None,
                    structured: None,
                })
            }
        }
    }

    /// What the policy needs to know about a Bash command, from one parse.
    fn bash_facts(&self, command: &str, slot: &Slot, context: &SessionContext, workspace: &Path) -> BashFacts {
        let parsed = crate::shell::parse(command).ok();
        let parts = parsed.as_ref().map(crate::shell::effective).unwrap_or_default();
        let gits: Vec<&crate::shell::Effective> =
            parts.iter().filter(|e| e.program.as_deref() == Some("git")).collect();
        let here = context.shell_cwd.clone().unwrap_or_else(|| workspace.to_path_buf());
        let elsewhere = gits
            .iter()
            .any(|e| e.args.iter().any(|a| a == "-C" || a.starts_with("--git-dir") || a.starts_with("--work-tree")));
        // Where the command's `cd`s take git (a nested repository).
        let mut dirs = vec![here.clone()];
        // A `cd` behind a wrapper (`builtin cd`) goes where the walk below
        // does not look.
        let mut computed_cd = parsed.as_ref().is_some_and(crate::shell::wrapped_cd);
        for c in parsed.iter().flat_map(|s| &s.commands) {
            if matches!(c.program.as_deref(), Some("cd" | "pushd" | "popd")) {
                match c.args.iter().find(|a| !a.starts_with('-')) {
                    Some(t) if !crate::shell::target_is_computed(t) && c.program.as_deref() != Some("popd") => {
                        dirs.push(here.join(t))
                    }
                    // `cd` alone goes home, `cd -` back, `popd` anywhere.
                    _ => computed_cd = true,
                }
            }
        }
        let git_runs_code = if gits.is_empty() {
            None
        } else if elsewhere || computed_cd {
            Some(
                "-C, --git-dir, --work-tree or a computed cd name a repository whose configuration is not checked"
                    .to_owned(),
            )
        } else {
            dirs.iter().find_map(|d| crate::permission::git_config_runs_code(d))
        };
        BashFacts {
            command: crate::tools::bash::command_line(slot.input.as_ref()),
            disable_sandbox: slot
                .input
                .as_ref()
                .and_then(|i| i.get("dangerouslyDisableSandbox"))
                .and_then(|v| v.as_bool())
                == Some(true),
            writes_files: parsed.as_ref().is_none_or(|s| s.commands.iter().any(|c| !c.writes_files.is_empty())),
            git_runs_code,
            redirect_denied: self.redirect_denied(command, context, workspace),
            read_denied: self.read_denied(command, context, workspace),
            exposes: crate::tools::bash::secret_exposure(&self.services.info, &self.services.sandbox, workspace)
                .map(str::to_owned),
        }
    }

    /// What rules see of a call: its command, or its file resolved
    /// (symlinks followed) inside the workspace.
    /// Whether `path` is in this session's own output directory (where
    /// Bash keeps a command's full output, for the model to Read).
    fn own_output(&self, path: &std::path::Path) -> bool {
        std::fs::canonicalize(&*self.services.output_dir).is_ok_and(|dir| path.starts_with(dir))
    }

    pub(super) fn facts(&self, ctx: &ToolContext, target: PermissionTarget) -> Facts {
        match target {
            PermissionTarget::None => Facts::Other,
            PermissionTarget::Command(c) => Facts::Bash(c),
            PermissionTarget::Domain(d) => Facts::Domain(d),
            PermissionTarget::Name(n) => Facts::Name(n),
            PermissionTarget::Path(p) => match ctx.resolve(&p) {
                Ok(path) => Facts::Path(real_path(&path.abs())),
                Err(_) => {
                    let raw = PathBuf::from(&p);
                    Facts::Path(real_path(&if raw.is_absolute() { raw } else { ctx.cwd.join(raw) }))
                }
            },
        }
    }

    /// The `Read` deny rule an argument or input redirection of `command`
    /// names (after symlinks), if any. Arguments computed at run time are
    /// not judged here: the sandbox hides the files such rules name.
    fn read_denied(&self, command: &str, context: &SessionContext, workspace: &Path) -> Option<String> {
        if !self.services.rules.rules.iter().any(|r| r.kind == RuleKind::Deny && r.tool == "Read") {
            return None;
        }
        let script = crate::shell::parse(command).ok()?;
        // Git prints files' contents from its own objects, where no path
        // of the workspace is opened: a deny rule cannot be checked there.
        // Only subcommands that never print contents run.
        const GIT_NO_CONTENT: &[&str] = &[
            "status",
            "branch",
            "rev-parse",
            "ls-files",
            "worktree",
            "remote",
            "tag",
            "describe",
            "merge-base",
            "name-rev",
            "rev-list",
            "count-objects",
            "add",
            "commit",
            "push",
            "fetch",
            "pull",
            "checkout",
            "switch",
            "restore",
            "reset",
            "init",
            "clone",
            "config",
            "rm",
            "mv",
            "version",
            "help",
        ];
        for e in crate::shell::effective(&script) {
            if e.program.as_deref() == Some("git")
                && let Some(sub) = e.args.iter().find(|a| !a.starts_with('-'))
                && !GIT_NO_CONTENT.contains(&sub.as_str())
            {
                let rule = self.services.rules.rules.iter().find(|r| r.kind == RuleKind::Deny && r.tool == "Read")?;
                return Some(format!(
                    "git {sub} prints files from the repository's history, which the rule {} ({}) cannot be checked against",
                    rule.text, rule.origin.source
                ));
            }
        }
        let here = context.shell_cwd.clone().unwrap_or_else(|| workspace.to_path_buf());
        for word in script.commands.iter().flat_map(|c| c.args.iter().chain(&c.reads_files)) {
            let value = word.split_once('=').map(|(_, v)| v).unwrap_or(word);
            if value.is_empty() || value.starts_with('-') || crate::shell::target_is_computed(value) {
                continue;
            }
            let raw = PathBuf::from(value);
            let path = real_path(&if raw.is_absolute() { raw } else { here.join(raw) });
            if let Some(r) = self.services.rules.read_denied(&path) {
                return Some(format!("the rule {} ({}) denies reading {value}", r.text, r.origin.source));
            }
        }
        None
    }

    /// The deny rule an output redirection of `command` runs into, if any.
    fn redirect_denied(&self, command: &str, context: &SessionContext, workspace: &Path) -> Option<String> {
        let edit_deny = self
            .services
            .rules
            .rules
            .iter()
            .find(|r| r.kind == RuleKind::Deny && matches!(r.tool.as_str(), "Edit" | "Write"));
        let edit_deny = edit_deny?;
        let Ok(script) = crate::shell::parse(command) else {
            return Some(format!("the command cannot be parsed, so the rule {} cannot be checked", edit_deny.text));
        };
        let here = context.shell_cwd.clone().unwrap_or_else(|| workspace.to_path_buf());
        // Where a target lands is only known when it is written out and the
        // command does not change directory first.
        let moves = crate::shell::changes_directory(&script);
        // Programs that write the files their arguments name (in-place
        // editors, copies, moves): an Edit deny rule applies to those too.
        const WRITES_ARGS: &[&str] = &[
            "sed", "perl", "tee", "cp", "mv", "ln", "install", "truncate", "touch", "rm", "dd", "chmod", "chown",
            "sort", "patch", "rsync", "tar", "unzip", "git", "ex", "vi", "vim", "nvim", "ed", "nano", "emacs",
        ];
        let writers: Vec<String> = crate::shell::effective(&script)
            .iter()
            .filter(|e| e.program.as_deref().is_some_and(|p| WRITES_ARGS.contains(&p)))
            // `sed` without -i only reads.
            .filter(|e| {
                let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
                !(e.program.as_deref() == Some("sed") && crate::shell::program_reads("sed", &args))
            })
            .flat_map(|e| {
                e.args
                    .iter()
                    .filter(|a| !a.starts_with('-'))
                    .map(|a| a.split_once('=').map_or(a.as_str(), |(_, v)| v).to_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        let redirects = script.commands.iter().flat_map(|c| c.writes_files.iter().cloned());
        for target in redirects.chain(writers) {
            let target = &target;
            if target.is_empty() {
                continue;
            }
            if moves || crate::shell::target_is_computed(target) {
                return Some(format!(
                    "the redirection to {target} cannot be checked against the rule {} ({})",
                    edit_deny.text, edit_deny.origin.source
                ));
            }
            let raw = PathBuf::from(target);
            let facts = Facts::Path(real_path(&if raw.is_absolute() { raw } else { here.join(raw) }));
            for tool in ["Edit", "Write"] {
                if let Some(r) = self.services.rules.decide(tool, &facts).filter(|r| r.kind == RuleKind::Deny) {
                    return Some(format!("the rule {} ({}) denies writing {target}", r.text, r.origin.source));
                }
            }
        }
        None
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
        const READ: &str = "Read";
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
        if !hooks.wants(agentd_protocol::hooks::HookEvent::PreToolUse, READ) {
            return Ok(path);
        }
        let id = format!("resource-{}", uuid::Uuid::new_v4().simple());
        let hook_input =
            super::hooked::pre_tool_use_json(READ, &input, Some(&id), mode, &ctx.cwd.display().to_string());
        let about = crate::hooks::About { turn_id: None, tool_use_id: Some(id), tool_name: Some(READ.to_owned()) };
        let token = tokio_util::sync::CancellationToken::new();
        let said =
            hooks.run_deferred(agentd_protocol::hooks::HookEvent::PreToolUse, READ, hook_input, &about, &token).await;
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
            && !self.services.rules.decide("Read", &facts).is_some_and(|r| r.kind != RuleKind::Allow)
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
