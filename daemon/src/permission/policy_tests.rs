//! The policy as a table: facts about a call → verdict. Explicit rows
//! first (each a sentence of the specification), then sweeps over every
//! combination of mode, rule, tool view and sandbox for the invariants
//! that must hold in all of them.

use super::*;
use SandboxProfile::{Off, ReadOnly, WorkspaceWrite};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Allow(Option<SandboxProfile>),
    AllowOutside,
    Ask,
    Refuse,
}

fn base(tool: &str) -> CallFacts {
    CallFacts {
        tool: tool.into(),
        mode: PermissionMode::Default,
        read_only: false,
        question: false,
        edits: matches!(tool, "Edit" | "Write" | "NotebookEdit"),
        outside: false,
        protected: None,
        rule: None,
        tool_view: Decision::ask("x"),
        bash: (tool == "Bash").then(|| BashFacts { command: "cmd".into(), ..BashFacts::default() }),
        sandbox: SandboxOptions::default(),
        sandbox_available: true,
        missing_walls: Vec::new(),
        plan_file: false,
    }
}

fn rule(kind: RuleKind) -> Option<RuleHit> {
    Some(RuleHit { kind, text: "Rule(x)".into(), source: "session".into() })
}

fn got(f: &CallFacts) -> Want {
    match decide(f) {
        Verdict::Allow { open_outside: true, .. } => Want::AllowOutside,
        Verdict::Allow { profile, .. } => Want::Allow(profile),
        Verdict::Ask { .. } => Want::Ask,
        Verdict::Refuse { .. } => Want::Refuse,
    }
}

type Row = (&'static str, fn(&mut CallFacts), Want);

fn mode(m: PermissionMode) -> impl Fn(&mut CallFacts) {
    move |f| f.mode = m
}

#[test]
fn the_table() {
    use PermissionMode::*;
    let rows: &[(&str, &str, Row)] = &[
        // Reads and edits by mode.
        ("Read", "a read the tool allows runs", ("read", |f| f.tool_view = Decision::Allow, Want::Allow(None))),
        ("Read", "a read outside asks", ("outside", |f| f.outside = true, Want::Ask)),
        (
            "Read",
            "outside, allowed by a rule: exactly that path opens",
            (
                "outside rule",
                |f| {
                    f.outside = true;
                    f.rule = rule(RuleKind::Allow)
                },
                Want::AllowOutside,
            ),
        ),
        (
            "Read",
            "outside in bypass opens",
            (
                "outside bypass",
                |f| {
                    f.outside = true;
                    f.mode = Bypass
                },
                Want::AllowOutside,
            ),
        ),
        ("Write", "an edit asks in default mode", ("edit", |_| {}, Want::Ask)),
        ("Write", "an edit runs in accept_edits", ("accept", |f| f.mode = AcceptEdits, Want::Allow(None))),
        (
            "Write",
            "an edit outside asks even in accept_edits",
            (
                "accept outside",
                |f| {
                    f.mode = AcceptEdits;
                    f.outside = true
                },
                Want::Ask,
            ),
        ),
        ("Write", "plan mode refuses edits", ("plan", |f| f.mode = Plan, Want::Refuse)),
        (
            "Read",
            "plan mode runs reads",
            (
                "plan read",
                |f| {
                    f.mode = Plan;
                    f.read_only = true;
                    f.tool_view = Decision::Allow
                },
                Want::Allow(None),
            ),
        ),
        ("Write", "bypass runs edits", ("bypass", |f| f.mode = Bypass, Want::Allow(None))),
        // Rules.
        (
            "Write",
            "a deny rule refuses, even in bypass",
            (
                "deny bypass",
                |f| {
                    f.mode = Bypass;
                    f.rule = rule(RuleKind::Deny)
                },
                Want::Refuse,
            ),
        ),
        (
            "Read",
            "a deny rule refuses what the tool allows",
            (
                "deny read",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.rule = rule(RuleKind::Deny)
                },
                Want::Refuse,
            ),
        ),
        (
            "Read",
            "an ask rule asks what the tool allows",
            (
                "ask read",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.rule = rule(RuleKind::Ask)
                },
                Want::Ask,
            ),
        ),
        ("Write", "an allow rule allows", ("allow", |f| f.rule = rule(RuleKind::Allow), Want::Allow(None))),
        (
            "Write",
            "the tool's deny beats an allow rule",
            (
                "tool deny",
                |f| {
                    f.rule = rule(RuleKind::Allow);
                    f.tool_view = Decision::deny("no")
                },
                Want::Refuse,
            ),
        ),
        // Protected files.
        (
            "Write",
            "a protected file asks in accept_edits",
            (
                "prot accept",
                |f| {
                    f.mode = AcceptEdits;
                    f.protected = Some(".claude/settings.json".into())
                },
                Want::Ask,
            ),
        ),
        (
            "Write",
            "a protected file asks under an allow rule",
            (
                "prot rule",
                |f| {
                    f.rule = rule(RuleKind::Allow);
                    f.protected = Some(".git/config".into())
                },
                Want::Ask,
            ),
        ),
        (
            "Write",
            "a protected file is written in bypass",
            (
                "prot bypass",
                |f| {
                    f.mode = Bypass;
                    f.protected = Some(".mcp.json".into())
                },
                Want::Allow(None),
            ),
        ),
        (
            "Write",
            "a deny rule on a protected file refuses",
            (
                "prot deny",
                |f| {
                    f.rule = rule(RuleKind::Deny);
                    f.protected = Some(".git/hooks/x".into())
                },
                Want::Refuse,
            ),
        ),
        // Questions.
        (
            "AskUserQuestion",
            "a question asks in bypass",
            (
                "q bypass",
                |f| {
                    f.question = true;
                    f.mode = Bypass;
                    f.read_only = true
                },
                Want::Ask,
            ),
        ),
        (
            "AskUserQuestion",
            "a question asks under an allow rule",
            (
                "q rule",
                |f| {
                    f.question = true;
                    f.rule = rule(RuleKind::Allow);
                    f.read_only = true
                },
                Want::Ask,
            ),
        ),
        // Bash and the sandbox.
        (
            "Bash",
            "a judged read runs in read_only",
            ("judged", |f| f.tool_view = Decision::Allow, Want::Allow(Some(ReadOnly))),
        ),
        (
            "Bash",
            "without the sandbox a judged read asks",
            (
                "judged unavailable",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.sandbox_available = false
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "sandbox off keeps the judgement, unconfined",
            (
                "judged off",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.sandbox.mode = SandboxMode::Off
                },
                Want::Allow(Some(Off)),
            ),
        ),
        ("Bash", "a command the tool asks about asks", ("asks", |_| {}, Want::Ask)),
        (
            "Bash",
            "an allow rule runs it in workspace_write",
            ("rule", |f| f.rule = rule(RuleKind::Allow), Want::Allow(Some(WorkspaceWrite))),
        ),
        (
            "Bash",
            "bypass runs it in workspace_write",
            ("bypass", |f| f.mode = Bypass, Want::Allow(Some(WorkspaceWrite))),
        ),
        (
            "Bash",
            "sandbox mode read_only confines approved commands too",
            (
                "ro session",
                |f| {
                    f.mode = Bypass;
                    f.sandbox.mode = SandboxMode::ReadOnly
                },
                Want::Allow(Some(ReadOnly)),
            ),
        ),
        (
            "Bash",
            "auto_allow runs what no rule asks about",
            ("auto", |f| f.sandbox.auto_allow = true.into(), Want::Allow(Some(WorkspaceWrite))),
        ),
        (
            "Bash",
            "auto_allow does not beat an ask rule",
            (
                "auto ask",
                |f| {
                    f.sandbox.auto_allow = true.into();
                    f.rule = rule(RuleKind::Ask)
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "auto_allow needs the sandbox",
            (
                "auto unavailable",
                |f| {
                    f.sandbox.auto_allow = true.into();
                    f.sandbox_available = false
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "auto_allow needs every wall of the sandbox",
            (
                "auto with a wall missing",
                |f| {
                    f.sandbox.auto_allow = true.into();
                    f.missing_walls = vec!["unix_sockets".into()]
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "auto_allow: \"effects\" runs unasked behind the layer, and asks without it",
            (
                "effects without the layer",
                |f| {
                    f.sandbox.auto_allow =
                        agentd_protocol::session::AutoAllow::Word(agentd_protocol::session::AutoAllowWord::Effects);
                    f.missing_walls = vec!["layer".into()]
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "auto_allow: \"effects\" runs what no rule asks about",
            (
                "effects",
                |f| {
                    f.sandbox.auto_allow =
                        agentd_protocol::session::AutoAllow::Word(agentd_protocol::session::AutoAllowWord::Effects)
                },
                Want::Allow(Some(WorkspaceWrite)),
            ),
        ),
        (
            "Bash",
            "auto_allow does not beat the tool's deny",
            (
                "auto tool deny",
                |f| {
                    f.sandbox.auto_allow = true.into();
                    f.tool_view = Decision::deny("too complex")
                },
                Want::Refuse,
            ),
        ),
        (
            "Bash",
            "disabling the sandbox asks under an allow rule",
            (
                "dis rule",
                |f| {
                    f.rule = rule(RuleKind::Allow);
                    f.bash.as_mut().unwrap().disable_sandbox = true
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "disabling the sandbox asks for a judged read",
            (
                "dis judged",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.bash.as_mut().unwrap().disable_sandbox = true
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "disabling the sandbox in bypass runs unconfined",
            (
                "dis bypass",
                |f| {
                    f.mode = Bypass;
                    f.bash.as_mut().unwrap().disable_sandbox = true
                },
                Want::Allow(Some(Off)),
            ),
        ),
        (
            "Bash",
            "a redirection into a denied file refuses, in bypass",
            (
                "redirect deny",
                |f| {
                    f.mode = Bypass;
                    f.bash.as_mut().unwrap().redirect_denied = Some("Edit(.env)".into())
                },
                Want::Refuse,
            ),
        ),
        (
            "Bash",
            "reading a denied file refuses, in bypass",
            (
                "read deny",
                |f| {
                    f.mode = Bypass;
                    f.bash.as_mut().unwrap().read_denied = Some("Read(.env)".into())
                },
                Want::Refuse,
            ),
        ),
        (
            "Bash",
            "git in a repository whose config runs code asks under a rule",
            (
                "git rule",
                |f| {
                    f.rule = rule(RuleKind::Allow);
                    f.bash.as_mut().unwrap().git_runs_code = Some("core.fsmonitor".into())
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "git in such a repository asks when judged read-only",
            (
                "git judged",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.bash.as_mut().unwrap().git_runs_code = Some("diff.external".into())
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "git in such a repository runs in bypass",
            (
                "git bypass",
                |f| {
                    f.mode = Bypass;
                    f.bash.as_mut().unwrap().git_runs_code = Some("x".into())
                },
                Want::Allow(Some(WorkspaceWrite)),
            ),
        ),
        (
            "Bash",
            "a judged command with a redirection (accept_edits) runs in workspace_write",
            (
                "edit redirect",
                |f| {
                    f.mode = AcceptEdits;
                    f.tool_view = Decision::Allow;
                    f.bash.as_mut().unwrap().writes_files = true
                },
                Want::Allow(Some(WorkspaceWrite)),
            ),
        ),
        ("Bash", "plan mode refuses what is not read-only", ("plan bash", |f| f.mode = Plan, Want::Refuse)),
        (
            "Bash",
            "a judged read asks when the sandbox has no namespaces wall",
            (
                "judged partial",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.missing_walls = vec!["namespaces".into()]
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "a judged read runs without the network wall (confined commands then have no network)",
            (
                "judged no netns",
                |f| {
                    f.tool_view = Decision::Allow;
                    f.missing_walls = vec!["network".into(), "unix_sockets".into()]
                },
                Want::Allow(Some(ReadOnly)),
            ),
        ),
        (
            "Edit",
            "an ask rule asks even in accept_edits",
            (
                "ask rule edit",
                |f| {
                    f.mode = AcceptEdits;
                    f.rule = rule(RuleKind::Ask)
                },
                Want::Ask,
            ),
        ),
        (
            "Bash",
            "a judged read in bypass still runs read_only",
            (
                "judged bypass",
                |f| {
                    f.mode = Bypass;
                    f.tool_view = Decision::Allow
                },
                Want::Allow(Some(ReadOnly)),
            ),
        ),
    ];
    for (tool, sentence, (name, adjust, want)) in rows {
        let mut f = base(tool);
        adjust(&mut f);
        assert_eq!(got(&f), *want, "{tool} / {name}: {sentence}\n{f:#?}");
    }
    let _ = mode(Default);
}

/// Every combination of the facts that matter, for the invariants.
fn sweep() -> Vec<CallFacts> {
    use PermissionMode::*;
    let mut out = Vec::new();
    for tool in ["Read", "Write", "Bash", "mcp__s__t"] {
        for m in [Default, AcceptEdits, Plan, Bypass] {
            for r in [None, Some(RuleKind::Allow), Some(RuleKind::Ask), Some(RuleKind::Deny)] {
                for view in [Decision::Allow, Decision::ask("x"), Decision::deny("no")] {
                    for outside in [false, true] {
                        for protected in [false, true] {
                            for (available, smode, auto) in [
                                (true, SandboxMode::Auto, false),
                                (false, SandboxMode::Auto, false),
                                (true, SandboxMode::Off, false),
                                (true, SandboxMode::Auto, true),
                            ] {
                                for disable in [false, true] {
                                    let mut f = base(tool);
                                    f.mode = m;
                                    f.rule = r.and_then(rule);
                                    f.tool_view = view.clone();
                                    f.outside = outside;
                                    f.read_only = tool == "Read";
                                    f.protected = (protected && f.edits).then(|| ".git/config".to_owned());
                                    f.sandbox_available = available;
                                    f.sandbox.mode = smode;
                                    f.sandbox.auto_allow = auto.into();
                                    if let Some(b) = f.bash.as_mut() {
                                        b.disable_sandbox = disable;
                                    } else if disable {
                                        continue;
                                    }
                                    out.push(f);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

#[test]
fn invariants_hold_in_every_combination() {
    let all = sweep();
    assert!(all.len() > 2000, "{}", all.len());
    for f in &all {
        let v = decide(f);
        let w = got(f);
        // A deny rule refuses, in every mode.
        if f.rule.as_ref().is_some_and(|r| r.kind == RuleKind::Deny) {
            assert_eq!(w, Want::Refuse, "deny rule: {f:#?}");
        }
        // The tool's own deny refuses (no rule or mode overrides it).
        if matches!(f.tool_view, Decision::Deny { .. }) {
            assert_eq!(w, Want::Refuse, "tool deny: {f:#?}");
        }
        // Plan mode runs nothing that is not read-only.
        if f.mode == PermissionMode::Plan && !f.read_only {
            assert_eq!(w, Want::Refuse, "plan: {f:#?}");
        }
        // Bypass never asks.
        if f.mode == PermissionMode::Bypass {
            assert_ne!(w, Want::Ask, "bypass asked: {f:#?}");
        }
        // Outside the workspace opens only on a rule or bypass.
        if w == Want::AllowOutside {
            assert!(
                f.outside
                    && (f.mode == PermissionMode::Bypass || f.rule.as_ref().is_some_and(|r| r.kind == RuleKind::Allow))
            );
        }
        // A protected file is written unasked only in bypass.
        if f.protected.is_some() && matches!(w, Want::Allow(_) | Want::AllowOutside) {
            assert_eq!(f.mode, PermissionMode::Bypass, "protected: {f:#?}");
        }
        if let Some(b) = &f.bash {
            match &v {
                // Bash always says which profile; nothing runs unconfined
                // but by the session's or the call's choice, or where the
                // kernel cannot confine.
                Verdict::Allow { profile, .. } | Verdict::Ask { profile, .. } => {
                    let p = profile.expect("a Bash verdict names a profile");
                    if p == Off {
                        assert!(
                            b.disable_sandbox || f.sandbox.mode == SandboxMode::Off || !f.sandbox_available,
                            "{f:#?}"
                        );
                    }
                }
                Verdict::Refuse { .. } => {}
            }
            // Disabling the sandbox asks outside bypass.
            if b.disable_sandbox && f.mode != PermissionMode::Bypass {
                assert_ne!(w, Want::Allow(Some(Off)), "{f:#?}");
                assert!(!matches!(w, Want::Allow(_)), "disable ran unasked: {f:#?}");
            }
            // Without the sandbox nothing runs on the tool's judgement alone.
            if !f.sandbox_available
                && f.rule.is_none()
                && f.mode != PermissionMode::Bypass
                && f.sandbox.mode != SandboxMode::Off
            {
                assert!(!matches!(w, Want::Allow(_)), "unconfined judgement: {f:#?}");
            }
            // What runs on the tool's judgement alone runs read_only.
            if f.rule.is_none()
                && matches!(f.tool_view, Decision::Allow)
                && f.sandbox_available
                && f.sandbox.mode == SandboxMode::Auto
                && !b.disable_sandbox
                && f.mode != PermissionMode::Plan
            {
                assert_eq!(w, Want::Allow(Some(ReadOnly)), "{f:#?}");
            }
        } else if let Verdict::Allow { profile, .. } = &v {
            assert!(profile.is_none());
        }
    }
}

fn opts(mode: agentd_protocol::session::SandboxMode) -> agentd_protocol::session::SandboxOptions {
    agentd_protocol::session::SandboxOptions { mode, ..Default::default() }
}

#[test]
fn profile_table() {
    use crate::permission::policy::{AllowedBy::*, profile_for};
    use SandboxProfile as P;
    use agentd_protocol::session::SandboxMode::*;
    use agentd_protocol::session::SandboxProfile;
    // (mode, available, dangerouslyDisableSandbox, allowed by) -> profile
    let rows = [
        (Auto, true, false, Judgement, P::ReadOnly),
        (Auto, true, false, Approval, P::WorkspaceWrite),
        (Auto, true, true, Judgement, P::Off),
        (Auto, false, false, Judgement, P::Off),
        (WorkspaceWrite, true, false, Judgement, P::ReadOnly),
        (WorkspaceWrite, true, false, Approval, P::WorkspaceWrite),
        (ReadOnly, true, false, Approval, P::ReadOnly),
        (ReadOnly, true, true, Approval, P::Off),
        (Off, true, false, Judgement, P::Off),
    ];
    for (mode, available, disable, by, want) in rows {
        assert_eq!(profile_for(&opts(mode), available, disable, by), want, "{mode:?} {available} {disable} {by:?}");
    }
}
