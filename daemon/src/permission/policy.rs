//! The one permission policy (issue 12): a pure function of typed facts
//! about one call — the tool, the mode, the strongest rule, the tool's own
//! view, what the Bash command is found to do, the sandbox — to a verdict:
//! allow (and in which sandbox profile), ask (why), or deny (why). The
//! executor gathers the facts once per call (one parse of a Bash command)
//! and carries the verdict out; it decides nothing itself. The table at
//! the bottom is the specification.

use agentd_protocol::session::{PermissionMode, SandboxMode, SandboxOptions, SandboxProfile};

use super::Decision;
use super::rules::RuleKind;

/// The strongest rule that matched the call (deny > ask > allow; session
/// and settings rules first, then rules granted by `allow_always`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleHit {
    /// What it says.
    pub kind: RuleKind,
    /// The rule as written.
    pub text: String,
    /// Where it came from.
    pub source: String,
}

/// What is known about a Bash command.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BashFacts {
    /// The command on one line, for reasons.
    pub command: String,
    /// `dangerouslyDisableSandbox`.
    pub disable_sandbox: bool,
    /// It redirects output into files (or cannot be parsed).
    pub writes_files: bool,
    /// The repository's git configuration runs programs, and the command
    /// runs git: what in the configuration.
    pub git_runs_code: Option<String>,
    /// An Edit/Write deny rule one of its redirections runs into.
    pub redirect_denied: Option<String>,
    /// A Read deny rule one of its arguments names.
    pub read_denied: Option<String>,
    /// What the sandbox cannot hide from any command of the session (the
    /// TLS face's key): the command asks whatever a rule says.
    pub exposes: Option<String>,
    /// Every output redirection is an edit `accept_edits` allows (a literal
    /// target inside the workspace, not protected): admission lets an
    /// allow rule for the rest of the command cover it.
    pub redirects_edit_inside: bool,
}

/// Everything the policy looks at.
#[derive(Debug, Clone)]
pub struct CallFacts {
    /// The tool's name.
    pub tool: String,
    /// The permission mode now (plan mode changes it).
    pub mode: PermissionMode,
    /// The tool says this call only reads (plan mode runs only these).
    pub read_only: bool,
    /// AskUserQuestion: only the user answers it.
    pub question: bool,
    /// Edit, Write or NotebookEdit.
    pub edits: bool,
    /// Its file is outside the workspace.
    pub outside: bool,
    /// Its file configures agentd or runs code later (shown in the reason).
    pub protected: Option<String>,
    /// The strongest matching rule.
    pub rule: Option<RuleHit>,
    /// The tool's own view (`Tool::check_permissions`).
    pub tool_view: Decision,
    /// Bash only.
    pub bash: Option<BashFacts>,
    /// The session's sandbox options.
    pub sandbox: SandboxOptions,
    /// Whether the kernel can confine commands here.
    pub sandbox_available: bool,
    /// Walls of the sandbox this kernel cannot apply (`daemon/info`'s
    /// `sandbox.walls`): without `namespaces` what the engine judged
    /// read-only asks (it could read other processes' memory and
    /// environment); without any but `network`, `auto_allow` asks.
    pub missing_walls: Vec<String>,
    /// The call writes the session's own plan file (Write/Edit of exactly
    /// that path): allowed in every mode, plan mode included, unless a deny
    /// says otherwise.
    pub plan_file: bool,
}

/// What to do with the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow {
        /// A file outside the workspace may be opened (a rule, bypass or
        /// the user allowed exactly it).
        open_outside: bool,
        /// The sandbox profile (Bash).
        profile: Option<SandboxProfile>,
        /// Nobody approved it (the engine's judgement, `auto_allow`): a
        /// command gets no secrets in its environment.
        unasked: bool,
    },
    /// Ask the user; if allowed, run it in `profile`.
    Ask {
        /// What the user is asked.
        reason: String,
        /// A rule the tool suggests for "always allow".
        suggestion: Option<String>,
        /// Offer rules as "always allow" suggestions (not for questions or
        /// protected files).
        suggest: bool,
        /// The sandbox profile once allowed (Bash).
        profile: Option<SandboxProfile>,
    },
    /// Refuse it; the model reads `message`.
    Refuse {
        /// Why, in words the model can act on.
        message: String,
    },
}

/// The verdict on one call.
pub fn decide(f: &CallFacts) -> Verdict {
    let refuse = |reason: &str| Verdict::Refuse { message: format!("permission denied: {reason}") };
    if f.plan_file
        && f.rule.as_ref().is_none_or(|r| r.kind != RuleKind::Deny)
        && !matches!(f.tool_view, Decision::Deny { .. })
    {
        return Verdict::Allow { open_outside: true, profile: None, unasked: false };
    }
    if f.mode == PermissionMode::Plan && !f.read_only {
        return Verdict::Refuse {
            message: "plan mode: only read-only tools run; leave plan mode to make changes".to_owned(),
        };
    }
    // Questions are for the user alone: no rule or mode answers them.
    if f.question {
        let reason = match &f.tool_view {
            Decision::Ask { reason, .. } => reason.clone(),
            _ => "answer the question".to_owned(),
        };
        return Verdict::Ask { reason, suggestion: None, suggest: false, profile: None };
    }
    let deny_rule = f.rule.as_ref().filter(|r| r.kind == RuleKind::Deny);
    let bash = f.bash.as_ref();
    if let Some(reason) = bash.and_then(|b| b.redirect_denied.as_ref().or(b.read_denied.as_ref())) {
        return refuse(reason);
    }
    // What no sandbox hides from the command: asked about in every mode
    // but bypass, whatever a rule says (a deny still wins).
    if let Some(why) = bash.and_then(|b| b.exposes.as_ref())
        && f.mode != PermissionMode::Bypass
        && deny_rule.is_none()
        && !matches!(f.tool_view, Decision::Deny { .. })
    {
        let command = bash.map(|b| b.command.as_str()).unwrap_or_default();
        return Verdict::Ask {
            reason: format!("run `{command}` ({why})"),
            suggestion: None,
            suggest: false,
            profile: None,
        };
    }
    // Protected files: asked about in every mode but bypass, whatever a
    // rule or accept_edits says (a deny, the rule's or the tool's, wins).
    if let Some(path) = &f.protected
        && f.edits
        && f.mode != PermissionMode::Bypass
        && deny_rule.is_none()
        && !matches!(f.tool_view, Decision::Deny { .. })
    {
        return Verdict::Ask {
            reason: format!("{} {path}, which configures agentd or runs code later (protected)", f.tool.to_lowercase()),
            suggestion: None,
            suggest: false,
            profile: None,
        };
    }
    let confinable = f.sandbox_available && f.sandbox.mode != SandboxMode::Off;
    let disable = bash.is_some_and(|b| b.disable_sandbox);
    // A command the tool itself judged to only read (no rule needed).
    let judged = bash.is_some_and(|b| !b.writes_files) && matches!(f.tool_view, Decision::Allow);
    let command = bash.map(|b| b.command.as_str()).unwrap_or_default();
    let mut auto_allowed = false;
    let decision = match (&f.rule, &f.tool_view) {
        (Some(r), _) if r.kind == RuleKind::Deny => {
            Decision::deny(format!("the rule {} ({}) denies it", r.text, r.source))
        }
        (_, Decision::Deny { reason }) => Decision::deny(reason.clone()),
        (Some(r), _) if r.kind == RuleKind::Ask => {
            Decision::ask(format!("the rule {} ({}) asks first", r.text, r.source))
        }
        _ if f.mode != PermissionMode::Bypass && bash.is_some_and(|b| b.git_runs_code.is_some()) => {
            Decision::ask(format!(
                "run `{command}`: this repository's git configuration runs programs ({})",
                bash.and_then(|b| b.git_runs_code.as_deref()).unwrap_or_default()
            ))
        }
        _ if disable => Decision::ask(format!("run `{command}` outside the sandbox (dangerouslyDisableSandbox)")),
        (Some(_), _) => Decision::Allow,
        (None, Decision::Allow) if judged && !confinable && f.sandbox.mode != SandboxMode::Off => Decision::ask(
            format!("run `{command}` (it looks read-only, but the sandbox that would guarantee it is unavailable)"),
        ),
        (None, Decision::Allow) if judged && confinable && f.missing_walls.iter().any(|w| w == "namespaces") => {
            Decision::ask(format!(
                "run `{command}` (it looks read-only, but the sandbox is partial: without its namespaces wall a \
                 command could read other processes' memory and environment)"
            ))
        }
        (None, Decision::Ask { .. })
            if bash.is_some()
                && f.sandbox.auto_allow.runs_unasked()
                && confinable
                && !f.missing_walls.iter().any(|w| w != "network" && w != "layer")
                // Effects are judged in the layer: without it, asked.
                && !(f.sandbox.auto_allow.effects() && f.missing_walls.iter().any(|w| w == "layer")) =>
        {
            auto_allowed = true;
            Decision::Allow
        }
        (None, view) => view.clone(),
    };
    let allowed_by_rule = f.rule.as_ref().is_some_and(|r| r.kind == RuleKind::Allow);
    let by = if judged && f.rule.is_none() { AllowedBy::Judgement } else { AllowedBy::Approval };
    let profile = |by| bash.map(|_| profile_for(&f.sandbox, f.sandbox_available, disable, by));
    match decision {
        Decision::Allow => Verdict::Allow {
            open_outside: allowed_by_rule && f.outside,
            profile: profile(by),
            unasked: auto_allowed || (judged && f.rule.is_none()),
        },
        Decision::Deny { reason } => refuse(&reason),
        Decision::Ask { .. } if f.mode == PermissionMode::Bypass => {
            Verdict::Allow { open_outside: f.outside, profile: profile(AllowedBy::Approval), unasked: false }
        }
        // accept_edits answers for edits, not for what an ask rule keeps
        // for the user.
        Decision::Ask { .. }
            if f.mode == PermissionMode::AcceptEdits
                && f.edits
                && !f.outside
                && f.rule.as_ref().is_none_or(|r| r.kind != RuleKind::Ask) =>
        {
            Verdict::Allow { open_outside: false, profile: None, unasked: false }
        }
        Decision::Ask { reason, suggestion } => {
            Verdict::Ask { reason, suggestion, suggest: true, profile: profile(AllowedBy::Approval) }
        }
    }
}

/// How a Bash call came to be allowed, for [`profile_for`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowedBy {
    /// The engine judged the command read-only (nobody approved it).
    Judgement,
    /// A rule, the mode, or the user approved it.
    Approval,
}

/// The profile a Bash call runs in: a pure function of the session's
/// choice, the call's `dangerouslyDisableSandbox`, how it was allowed, and
/// whether the kernel can confine at all.
pub fn profile_for(options: &SandboxOptions, available: bool, disable: bool, by: AllowedBy) -> SandboxProfile {
    if disable || !available {
        return SandboxProfile::Off;
    }
    match (options.mode, by) {
        (SandboxMode::Off, _) => SandboxProfile::Off,
        // What runs unasked runs read-only, whatever the session's choice
        // for approved commands (only `off` is off).
        (SandboxMode::ReadOnly, _) | (_, AllowedBy::Judgement) => SandboxProfile::ReadOnly,
        (SandboxMode::WorkspaceWrite | SandboxMode::Auto, AllowedBy::Approval) => SandboxProfile::WorkspaceWrite,
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
