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
    /// The session's plan file (Claude Code 2.1's plan mode: the model
    /// writes its plan there; it is the one file Write and Edit may change
    /// in plan mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan_file: Option<std::path::PathBuf>,
    /// The plan approved (ExitPlanMode): the call's `plan`, else the plan
    /// file's text; empty when there was neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
}

impl Tool for EnterPlanMode {
    type Input = EnterPlanModeInput;
    type Output = PlanModeOutput;

    const NAME: &'static str = "EnterPlanMode";

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

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

    async fn call(
        &self,
        _input: EnterPlanModeInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<PlanModeOutput>, ToolError> {
        let modifier = Box::new(|s: &mut SessionContext| {
            if s.mode != Some(PermissionMode::Plan) {
                s.mode_before_plan = s.mode;
                s.mode = Some(PermissionMode::Plan);
            }
        });
        let plan_file = ctx.services.get::<crate::tool::context::PlanFile>().map(|p| p.0.clone());
        if let Some(file) = &plan_file {
            crate::fs::make_plans_dir(file);
        }
        let out = PlanModeOutput { mode: PermissionMode::Plan, plan_file, plan: None };
        Ok(ToolOutput::with_modifier(out, modifier))
    }

    fn result_content(&self, out: &PlanModeOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let file = match &out.plan_file {
            Some(f) => format!(
                " Write your plan to {} (with Write, then Edit: it is the one file you may change in plan mode).",
                f.display()
            ),
            None => String::new(),
        };
        vec![agentd_protocol::tools::ContentBlock::text(format!(
            "The session is in plan mode: only read-only tools run. Explore the code, then plan.{file} When \
             the plan is complete, call ExitPlanMode for the user to approve it."
        ))]
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
    /// The plan, in markdown (earlier Claude Code versions); without it the
    /// plan is the session's plan file, which EnterPlanMode named.
    #[serde(default)]
    pub plan: Option<String>,
    /// Deprecated: no longer used.
    #[serde(default, rename = "allowedPrompts")]
    #[schemars(with = "Option<Vec<AllowedPrompt>>")]
    #[expect(dead_code, reason = "accepted from the model, not acted on")]
    pub allowed_prompts: Option<serde_json::Value>,
    /// Claude Code's own (remote sessions, agent teams): ignored.
    #[serde(default, rename = "planFilePath")]
    #[schemars(skip)]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub plan_file_path: Option<serde_json::Value>,
    /// Ignored, as `planFilePath`.
    #[serde(default, rename = "launchSwarm")]
    #[schemars(skip)]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub launch_swarm: Option<serde_json::Value>,
    /// Ignored, as `planFilePath`.
    #[serde(default, rename = "teammateCount")]
    #[schemars(skip)]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub teammate_count: Option<serde_json::Value>,
    /// Claude Code 2.1's: push the plan to a remote claude.ai session
    /// (ignored: agentd has none).
    #[serde(default, rename = "pushToRemote")]
    #[schemars(with = "Option<bool>")]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub push_to_remote: Option<serde_json::Value>,
    /// The remote session's id, when pushed (ignored).
    #[serde(default, rename = "remoteSessionId")]
    #[schemars(with = "Option<String>")]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub remote_session_id: Option<serde_json::Value>,
    /// The remote session's URL, when pushed (ignored).
    #[serde(default, rename = "remoteSessionUrl")]
    #[schemars(with = "Option<String>")]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub remote_session_url: Option<serde_json::Value>,
    /// The remote session's title, when pushed (ignored).
    #[serde(default, rename = "remoteSessionTitle")]
    #[schemars(with = "Option<String>")]
    #[expect(dead_code, reason = "accepted from the model, ignored")]
    pub remote_session_title: Option<serde_json::Value>,
}

/// What `allowedPrompts` held in Claude Code 2.0 (its schema, published as
/// it was; the field is not acted on).
#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
struct AllowedPrompt {
    /// The tool this prompt applies to
    tool: AllowedPromptTool,
    /// Semantic description of the action, e.g. "run tests", "install
    /// dependencies"
    prompt: String,
}

/// The tools `allowedPrompts` could name.
#[derive(JsonSchema)]
#[expect(dead_code, reason = "a schema only")]
enum AllowedPromptTool {
    /// Bash commands.
    Bash,
}

/// The plan a call presents: its own `plan`, else the plan file's text
/// (cut at [`MAX_PLAN`]), else nothing.
fn plan_of(input: &ExitPlanModeInput, ctx: &ToolContext) -> (String, Option<std::path::PathBuf>) {
    if let Some(plan) = &input.plan {
        return (plan.clone(), None);
    }
    let Some(file) = ctx.services.get::<crate::tool::context::PlanFile>().map(|p| p.0.clone()) else {
        return (String::new(), None);
    };
    let text = std::fs::File::open(&file)
        .and_then(|f| {
            let mut text = String::new();
            std::io::Read::read_to_string(&mut std::io::Read::take(f, MAX_PLAN as u64), &mut text).map(|_| text)
        })
        .unwrap_or_default();
    let found = file.exists().then_some(file);
    (text, found)
}

impl Tool for ExitPlanMode {
    type Input = ExitPlanModeInput;
    type Output = PlanModeOutput;

    const NAME: &'static str = "ExitPlanMode";

    /// Read-only: it must run in plan mode, where only read-only tools do;
    /// it changes nothing but the mode, once the user agreed.
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

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
            return Err(ValidationError::new(
                "You are not in plan mode. To enter plan mode, call the EnterPlanMode tool first.",
            ));
        }
        if let Some(plan) = &input.plan {
            if plan.trim().is_empty() {
                return Err(ValidationError::new("the plan is empty"));
            }
            if plan.len() > MAX_PLAN {
                return Err(ValidationError::new(format!("the plan is over {MAX_PLAN} bytes")));
            }
        }
        Ok(())
    }

    /// The user approves the plan they are shown: the call's, or the plan
    /// file's (its first lines in the question).
    fn check_permissions(&self, input: &ExitPlanModeInput, ctx: &ToolContext) -> Decision {
        let (plan, file) = plan_of(input, ctx);
        match (file, plan.trim().is_empty()) {
            (Some(f), false) => {
                let head: Vec<&str> = plan.lines().take(40).collect();
                Decision::ask(format!("approve the plan in {} and leave plan mode:\n{}", f.display(), head.join("\n")))
            }
            (_, true) => Decision::ask("leave plan mode (no plan was written)"),
            (None, false) => Decision::ask("approve the plan and leave plan mode"),
        }
    }

    async fn call(
        &self,
        input: ExitPlanModeInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<PlanModeOutput>, ToolError> {
        let after = ctx.session.mode_before_plan.unwrap_or(ctx.info.mode);
        let after = if after == PermissionMode::Plan { PermissionMode::Default } else { after };
        let modifier = Box::new(move |s: &mut SessionContext| {
            s.mode = Some(after);
            s.mode_before_plan = None;
        });
        let (plan, plan_file) = plan_of(&input, &ctx);
        Ok(ToolOutput::with_modifier(PlanModeOutput { mode: after, plan_file, plan: Some(plan) }, modifier))
    }

    /// Claude Code 2.1's words, with the plan approved.
    fn result_content(&self, out: &PlanModeOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mode = serde_json::to_value(out.mode).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
        let plan = out.plan.as_deref().unwrap_or_default();
        let text = if plan.trim().is_empty() {
            format!("User has approved exiting plan mode (no plan was written). You can now proceed (mode: {mode}).")
        } else {
            let saved = match &out.plan_file {
                Some(f) => format!(
                    "\n\nYour plan has been saved to: {}\nYou can refer back to it if needed during implementation.",
                    f.display()
                ),
                None => String::new(),
            };
            format!(
                "User has approved your plan. You can now start coding (mode: {mode}). Start with updating your todo \
                 list if applicable.{saved}\n\n## Approved Plan:\n{plan}"
            )
        };
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &ExitPlanModeInput) -> String {
        let Some(plan) = &input.plan else { return "Plan: the session's plan file".to_owned() };
        let first = plan.lines().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let first: String = first.chars().take(80).collect();
        format!("Plan: {first}")
    }

    fn render_result(&self, _out: &PlanModeOutput) -> String {
        "plan approved".to_owned()
    }
}
