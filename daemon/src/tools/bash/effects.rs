//! A foreground `workspace_write` command's effects: it runs with its
//! roots behind a copy-on-write layer (`sandbox::layer`), and when it ends
//! what it changed is judged — by the protected names, at any depth, and
//! the session's Edit deny rules — and applied, each change by itself.

use std::path::{Path, PathBuf};

use agentd_protocol::session::SandboxProfile;
use serde::Serialize;

use crate::permission::rules::{Facts, RuleKind, RuleSet};
use crate::sandbox::layer::{CallLayers, ChangeKind, Outcome, Say};
use crate::tool::ToolContext;

/// How many changes (applied, and not applied) a result's text names; the
/// structured result has them all.
const SHOWN: usize = 20;

/// One change as a result carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChangeView {
    /// The path (lossy where it is not UTF-8).
    pub path: String,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Its size before (files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_before: Option<u64>,
    /// Its size after (files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_after: Option<u64>,
}

/// A change not applied, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RefusedView {
    /// The path (lossy where it is not UTF-8).
    pub path: String,
    /// What the command did to it.
    pub kind: ChangeKind,
    /// Why it was not applied.
    pub reason: String,
}

/// What a result says of a call's layer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Effects {
    /// Changes applied to the workspace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ChangeView>,
    /// Changes not applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused: Vec<RefusedView>,
    /// Why none were applied, when none were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discarded: Option<String>,
    /// Where paths in the text are shown from (the command's directory).
    #[serde(skip)]
    pub base: PathBuf,
}

impl Effects {
    fn from(outcome: Outcome) -> Effects {
        let view = |c: &crate::sandbox::layer::Change| ChangeView {
            path: c.path.to_string_lossy().into_owned(),
            kind: c.kind,
            bytes_before: c.bytes_before,
            bytes_after: c.bytes_after,
        };
        Effects {
            changes: outcome.applied.iter().map(view).collect(),
            refused: outcome
                .refused
                .iter()
                .map(|r| RefusedView {
                    path: r.change.path.to_string_lossy().into_owned(),
                    kind: r.change.kind,
                    reason: r.reason.clone(),
                })
                .collect(),
            discarded: outcome.discarded,
            base: PathBuf::from("/"),
        }
    }

    /// The lines a result's text carries: what was not applied, and why
    /// (what was applied is in the structured `changes`, not in what the
    /// model reads: the command's own output says what it did). Paths
    /// relative to [`Effects::base`] where inside.
    pub fn lines(&self) -> Vec<String> {
        let rel = |p: &str| {
            let p = Path::new(p);
            p.strip_prefix(&self.base).ok().filter(|r| !r.as_os_str().is_empty()).unwrap_or(p).display().to_string()
        };
        let mut lines = Vec::new();
        if let Some(why) = &self.discarded {
            lines.push(format!("[{why}]"));
        }
        for r in self.refused.iter().take(SHOWN) {
            lines.push(format!("[not applied: {} {} — {}]", kind_word(r.kind), rel(&r.path), r.reason));
        }
        if self.refused.len() > SHOWN {
            lines.push(format!("[and {} more changes not applied]", self.refused.len() - SHOWN));
        }
        lines
    }
}

fn kind_word(kind: ChangeKind) -> &'static str {
    match kind {
        ChangeKind::Created => "created",
        ChangeKind::Modified => "modified",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Mode => "mode of",
        ChangeKind::Renamed => "renamed",
    }
}

/// Whether this call runs with its roots behind a layer: a foreground
/// `workspace_write` call where the kernel can make one and the daemon has
/// a state directory for it (not in a worktree, whose objects go to a
/// staging directory of their own).
pub(super) fn layered(ctx: &ToolContext, profile: SandboxProfile, background: bool, staging: bool) -> bool {
    let facility = ctx.sandbox();
    profile == SandboxProfile::WorkspaceWrite
        && !background
        && !staging
        && facility.layer
        && facility.namespaces
        && facility.state_dir.is_some()
}

/// Makes the call's layers.
pub(super) fn prepare(ctx: &ToolContext, roots: &[PathBuf], marker: &str) -> Result<CallLayers, String> {
    let state = ctx.sandbox().state_dir.as_deref().ok_or("no state directory for the call's layer")?;
    CallLayers::prepare(state, roots, marker)
}

/// How a command that ran unasked under `auto_allow: "effects"` has its
/// changes approved: asked over its call's line, mid-call.
pub(super) struct Asking {
    /// The call's line back to its session (none: nobody can be asked,
    /// so nothing that waits for approval is applied).
    pub line: Option<crate::tool::context::CallLine>,
    /// The call's input, as the client should see it.
    pub input: serde_json::Value,
    /// The command, for the question.
    pub command: String,
    /// An Edit applies unasked in the session's mode (`accept_edits`,
    /// `bypass`): so do the command's changes (but what a rule asks).
    pub edits_unasked: bool,
    /// The runtime, to wait for the answer from the blocking pool.
    pub handle: tokio::runtime::Handle,
}

/// How this call's changes are approved, when it runs unasked under
/// `auto_allow: "effects"`.
pub(super) fn asking(ctx: &ToolContext, input: &super::BashInput) -> Option<Asking> {
    if !ctx.grant.effects {
        return None;
    }
    use agentd_protocol::session::PermissionMode;
    let mode = crate::tools::plan_mode::current_mode(ctx);
    Some(Asking {
        line: ctx.services.get::<crate::tool::context::CallLine>().cloned(),
        input: serde_json::json!({ "command": input.command, "description": input.description }),
        command: input.command.clone(),
        edits_unasked: matches!(mode, PermissionMode::AcceptEdits | PermissionMode::Bypass),
        handle: tokio::runtime::Handle::current(),
    })
}

/// Judges and applies what the command changed (off the runtime's
/// threads: the caller runs it on the blocking pool); each change applied
/// goes to the turn's history when the call has one. With `asking`, what
/// an Edit would ask about waits for the user's answer.
pub(super) fn finish(
    layers: CallLayers,
    rules: std::sync::Arc<RuleSet>,
    recorder: Option<std::sync::Arc<crate::fs::history::CallRecorder>>,
    asking: Option<Asking>,
) -> Effects {
    let effects = asking.as_ref().map(|a| a.edits_unasked);
    let judge = move |path: &Path, _kind: ChangeKind| -> Say {
        match rules.decide("Edit", &Facts::Path(path.to_owned())) {
            Some(rule) if rule.kind == RuleKind::Deny => {
                Say::Refuse(format!("the rule {} ({}) denies writing it", rule.text, rule.origin.source))
            }
            Some(rule) if rule.kind == RuleKind::Ask && effects.is_some() => Say::Ask,
            Some(rule) if rule.kind == RuleKind::Allow => Say::Apply,
            _ if effects == Some(false) => Say::Ask,
            _ => Say::Apply,
        }
    };
    let record = |done: Vec<(crate::sandbox::layer::Change, crate::fs::history::Before)>| {
        let Some(r) = &recorder else { return };
        let items = done
            .iter()
            .map(|(c, before)| {
                let change = crate::fs::history::Change { root: &c.root, path: &c.path, kind: c.kind, from: None };
                (change, before.clone())
            })
            .collect();
        r.history.record_all(&r.turn_id, &r.tool_use_id, items);
    };
    let approve = |changes: Vec<agentd_protocol::changes::FileChange>, diff: String| -> bool {
        let Some((a, line)) = asking.as_ref().and_then(|a| a.line.as_ref().map(|l| (a, l))) else { return false };
        let n = changes.len();
        let ask = crate::tool::MidCallAsk {
            reason: format!(
                "apply what `{}` changed in the workspace: {}",
                super::one_line(&a.command, 80),
                crate::tools::counted(n, "change", "changes")
            ),
            suggestions: Vec::new(),
            input: a.input.clone(),
            kind: "effects",
            host: None,
            port: None,
            changes,
            diff: Some(diff),
        };
        a.handle.block_on(line.ask(ask)).is_ok()
    };
    Effects::from(layers.finish(&judge, &record, Some(&approve)))
}

/// What a foreground call moved to the background does with its layer
/// when its processes are gone: applies it, saying so in the job's output.
/// Under `auto_allow: "effects"` (`asking`) nobody is asked any more:
/// what would wait for approval is discarded.
pub(super) fn at_end(
    layers: CallLayers,
    rules: std::sync::Arc<RuleSet>,
    asking: Option<Asking>,
) -> crate::process::jobs::AtEnd {
    let asking = asking.map(|a| Asking { line: None, ..a });
    Box::new(move || {
        let effects = finish(layers, rules, None, asking);
        let mut lines: Vec<String> = effects.lines().into_iter().map(strip_brackets).collect();
        if !effects.changes.is_empty() {
            lines.push("the job's changes are not rewindable".to_owned());
        }
        lines
    })
}

fn strip_brackets(line: String) -> String {
    line.strip_prefix('[').and_then(|l| l.strip_suffix(']')).map(str::to_owned).unwrap_or(line)
}
