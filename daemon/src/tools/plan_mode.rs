//! EnterPlanMode and ExitPlanMode: the model switches the session into
//! plan mode (read-only tools only) to explore and plan, then presents the
//! plan; leaving plan mode needs the user's approval of it (a
//! `permission/request`), and restores the mode the session had before.

use agentd_protocol::session::PermissionMode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Longest plan accepted, in bytes.
const MAX_PLAN: usize = 100_000;

/// The session's mode now (a plan mode tool may have changed it).
pub fn current_mode(ctx: &ToolContext) -> PermissionMode {
    ctx.session.mode.unwrap_or(ctx.info.mode)
}

/// The EnterPlanMode tool.
#[derive(Debug, Clone, Copy)]
pub struct EnterPlanMode;

/// Input of EnterPlanMode (none).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EnterPlanModeInput {}

/// Output of both tools: the mode the session is in afterwards.
#[derive(Debug, Clone, Serialize)]
pub struct PlanModeOutput {
    /// The mode now.
    pub mode: PermissionMode,
}

impl Tool for EnterPlanMode {
    type Input = EnterPlanModeInput;
    type Output = PlanModeOutput;
    type Progress = ();

    const NAME: &'static str = "EnterPlanMode";

    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        agentd_protocol::tools::ToolHints { read_only: false, destructive: false, idempotent: true, open_world: false }
    }

    fn description(&self) -> String {
        "Switches the session to plan mode: only read-only tools run. Use it before a large or unclear \
         change to explore the code and write a plan; then present the plan with ExitPlanMode, which asks \
         the user to approve it."
            .to_owned()
    }

    fn validate_input(&self, _input: &EnterPlanModeInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if current_mode(ctx) == PermissionMode::Plan {
            return Err(ValidationError::new("the session is already in plan mode"));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &EnterPlanModeInput, _ctx: &ToolContext) -> Decision {
        // It only narrows what may run.
        Decision::Allow
    }

    fn is_read_only(&self, _input: &EnterPlanModeInput) -> bool {
        true
    }

    fn is_destructive(&self, _input: &EnterPlanModeInput) -> bool {
        false
    }

    async fn call(
        &self,
        _input: EnterPlanModeInput,
        _ctx: ToolContext,
        _p: ProgressSink<()>,
    ) -> Result<ToolOutput<PlanModeOutput>, ToolError> {
        let modifier = Box::new(|s: &mut SessionContext| {
            if s.mode != Some(PermissionMode::Plan) {
                s.mode_before_plan = s.mode;
                s.mode = Some(PermissionMode::Plan);
            }
        });
        Ok(ToolOutput::with_modifier(PlanModeOutput { mode: PermissionMode::Plan }, modifier))
    }

    fn result_content(&self, _out: &PlanModeOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(
            "The session is in plan mode: only read-only tools run. Explore, then present your plan with \
             ExitPlanMode for the user to approve.",
        )]
    }

    fn render_use(&self, _input: &EnterPlanModeInput) -> String {
        "Entering plan mode".to_owned()
    }

    fn render_result(&self, _out: &PlanModeOutput) -> String {
        "in plan mode".to_owned()
    }
}

/// The ExitPlanMode tool.
#[derive(Debug, Clone, Copy)]
pub struct ExitPlanMode;

/// Input of ExitPlanMode.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExitPlanModeInput {
    /// The plan, in markdown, for the user to approve: what you will change,
    /// where, and how you will check it.
    pub plan: String,
    /// Later Claude Code versions' prompts to allow once the plan is
    /// approved (accepted, not acted on: approvals here are the user's).
    #[serde(default, rename = "allowedPrompts")]
    #[expect(dead_code, reason = "accepted from the model, not acted on")]
    pub allowed_prompts: Option<serde_json::Value>,
}

impl Tool for ExitPlanMode {
    type Input = ExitPlanModeInput;
    type Output = PlanModeOutput;
    type Progress = ();

    const NAME: &'static str = "ExitPlanMode";

    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        agentd_protocol::tools::ToolHints { read_only: false, destructive: false, idempotent: true, open_world: false }
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["exit_plan_mode"]
    }

    fn description(&self) -> String {
        "Presents your plan to the user and, once they approve it, leaves plan mode so you can carry it \
         out. Use it only in plan mode, when the plan is complete; if the user refuses, revise the plan."
            .to_owned()
    }

    fn validate_input(&self, input: &ExitPlanModeInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if current_mode(ctx) != PermissionMode::Plan {
            return Err(ValidationError::new("the session is not in plan mode"));
        }
        if input.plan.trim().is_empty() {
            return Err(ValidationError::new("the plan is empty"));
        }
        if input.plan.len() > MAX_PLAN {
            return Err(ValidationError::new(format!("the plan is over {MAX_PLAN} bytes")));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &ExitPlanModeInput, _ctx: &ToolContext) -> Decision {
        Decision::ask("approve the plan and leave plan mode")
    }

    /// It must run in plan mode, where only read-only tools do; it changes
    /// nothing but the mode, once the user agreed.
    fn is_read_only(&self, _input: &ExitPlanModeInput) -> bool {
        true
    }

    fn is_destructive(&self, _input: &ExitPlanModeInput) -> bool {
        false
    }

    async fn call(
        &self,
        _input: ExitPlanModeInput,
        ctx: ToolContext,
        _p: ProgressSink<()>,
    ) -> Result<ToolOutput<PlanModeOutput>, ToolError> {
        let after = ctx.session.mode_before_plan.unwrap_or(ctx.info.mode);
        let after = if after == PermissionMode::Plan { PermissionMode::Default } else { after };
        let modifier = Box::new(move |s: &mut SessionContext| {
            s.mode = Some(after);
            s.mode_before_plan = None;
        });
        Ok(ToolOutput::with_modifier(PlanModeOutput { mode: after }, modifier))
    }

    fn result_content(&self, out: &PlanModeOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mode = serde_json::to_value(out.mode).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        vec![agentd_protocol::tools::ContentBlock::text(format!(
            "The user approved the plan. The session left plan mode (now {mode}); carry the plan out."
        ))]
    }

    fn render_use(&self, input: &ExitPlanModeInput) -> String {
        let first = input.plan.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let first: String = first.chars().take(80).collect();
        format!("Plan: {first}")
    }

    fn render_result(&self, _out: &PlanModeOutput) -> String {
        "plan approved".to_owned()
    }
}
