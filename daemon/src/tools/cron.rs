//! CronCreate, CronList and CronDelete as Claude Code 2.1.332 offers them,
//! owned by the daemon (`crate::schedule`): a schedule fires into its
//! session's event log as `cron/fired`, whatever client is attached, and a
//! durable one outlives a daemon restart.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::schedule::{Job, Scheduler, cron::describe};
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolKind, ToolOutput, ValidationError};

fn scheduler(ctx: &ToolContext) -> Result<&Scheduler, ToolError> {
    ctx.services.get::<Scheduler>().ok_or_else(|| ToolError::new("this session has no schedules"))
}

/// One schedule as the tools show it.
#[derive(Debug, Clone, Serialize)]
pub struct Shown {
    /// Its id.
    pub id: String,
    /// The cron expression.
    pub cron: String,
    /// The expression in words.
    #[serde(rename = "humanSchedule")]
    pub human_schedule: String,
    /// What it enqueues.
    pub prompt: String,
    /// Fires until deleted or expired.
    pub recurring: bool,
    /// Survives restarts.
    pub durable: bool,
    /// Its next firing (RFC 3339, local time).
    pub next_fire: String,
}

fn shown(job: &Job) -> Shown {
    use chrono::TimeZone;
    let next = chrono::Local.timestamp_millis_opt(job.next_at_ms as i64).single().map(|t| t.to_rfc3339());
    Shown {
        id: job.id.clone(),
        cron: job.cron.clone(),
        human_schedule: describe(&job.cron),
        prompt: job.prompt.clone(),
        recurring: job.recurring,
        durable: job.durable,
        next_fire: next.unwrap_or_default(),
    }
}

/// Schedules a prompt.
#[derive(Debug, Clone, Copy)]
pub struct CronCreate;

/// Input of CronCreate (Claude Code 2.1.332's).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronCreateInput {
    /// Standard 5-field cron expression in local time: "M H DoM Mon DoW"
    /// (e.g. "*/5 * * * *" = every 5 minutes, "30 14 28 2 *" = Feb 28 at
    /// 2:30pm local once).
    pub cron: String,
    /// The prompt to enqueue at each fire time.
    pub prompt: String,
    /// true (default) = fire on every cron match until deleted or
    /// auto-expired after 30 days. false = fire once at the next match,
    /// then auto-delete.
    #[serde(default)]
    pub recurring: Option<bool>,
    /// true = survive daemon restarts (the result says session-only if it
    /// could not be saved). false (default) = dies with the daemon.
    #[serde(default)]
    pub durable: Option<bool>,
}

impl Tool for CronCreate {
    type Input = CronCreateInput;
    type Output = Shown;

    const NAME: &'static str = "CronCreate";
    const KIND: ToolKind = ToolKind::Schedules;
    // A schedule outlives plan mode's turn: not read-only.
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::ADDITIVE;

    fn should_defer(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        format!(
            "Schedules a prompt at cron times (standard 5-field cron, the daemon's local time zone): recurring \
             (the default; it ends after {} days) or once. At each firing the prompt arrives in this session as \
             a cron/fired event, for the harness to hand to the model; durable schedules survive a daemon \
             restart. At most {} per session.",
            crate::schedule::RECURRING_DAYS,
            crate::schedule::MAX_PER_SESSION
        )
    }

    fn validate_input(&self, input: &CronCreateInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        crate::schedule::cron::Cron::parse(&input.cron).map_err(|e| ValidationError::new(format!("cron: {e}")))?;
        if input.prompt.trim().is_empty() {
            return Err(ValidationError::new("the prompt is empty"));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &CronCreateInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: CronCreateInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<Shown>, ToolError> {
        let recurring = input.recurring.unwrap_or(true);
        let durable = input.durable.unwrap_or(false);
        let job = scheduler(&ctx)?
            .create(&ctx.session_id, &input.cron, &input.prompt, recurring, durable)
            .map_err(ToolError::new)?;
        Ok(ToolOutput::new(shown(&job)))
    }

    fn result_content(&self, out: &Shown) -> Vec<agentd_protocol::tools::ContentBlock> {
        let kind = if out.recurring {
            format!("recurring, ends after {} days", crate::schedule::RECURRING_DAYS)
        } else {
            "one-shot".to_owned()
        };
        let keep = if out.durable { "durable" } else { "session-only" };
        vec![agentd_protocol::tools::ContentBlock::text(format!(
            "Scheduled {} ({}; {kind}; {keep}). Next fire: {}.",
            out.id, out.human_schedule, out.next_fire
        ))]
    }

    fn render_use(&self, input: &CronCreateInput) -> String {
        format!("Schedule {}", describe(&input.cron))
    }

    fn render_result(&self, out: &Shown) -> String {
        format!("scheduled {}", out.id)
    }
}

/// Lists the session's schedules.
#[derive(Debug, Clone, Copy)]
pub struct CronList;

/// Input of CronList: nothing.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronListInput {}

/// The session's schedules.
#[derive(Debug, Clone, Serialize)]
pub struct CronListOutput {
    /// Soonest first.
    pub jobs: Vec<Shown>,
}

impl Tool for CronList {
    type Input = CronListInput;
    type Output = CronListOutput;

    const NAME: &'static str = "CronList";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: ToolKind = ToolKind::Schedules;
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn should_defer(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Lists this session's schedules (CronCreate): id, cron, prompt, next firing.".to_owned()
    }

    fn check_permissions(&self, _input: &CronListInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        _input: CronListInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<CronListOutput>, ToolError> {
        let jobs = scheduler(&ctx)?.list(&ctx.session_id).iter().map(shown).collect();
        Ok(ToolOutput::new(CronListOutput { jobs }))
    }

    fn result_content(&self, out: &CronListOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = String::new();
        if out.jobs.is_empty() {
            text.push_str("No scheduled jobs.");
        }
        for j in &out.jobs {
            let first = j.prompt.lines().next().unwrap_or_default();
            let kind = if j.recurring { "recurring" } else { "one-shot" };
            let keep = if j.durable { "durable" } else { "session-only" };
            text.push_str(&format!(
                "{} — {} ({}; {kind}; {keep}) — next {} — {first}\n",
                j.id, j.cron, j.human_schedule, j.next_fire
            ));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text.trim_end())]
    }

    fn render_use(&self, _input: &CronListInput) -> String {
        "List schedules".to_owned()
    }

    fn render_result(&self, out: &CronListOutput) -> String {
        match out.jobs.len() {
            1 => "1 schedule".to_owned(),
            n => format!("{n} schedules"),
        }
    }
}

/// Cancels a schedule.
#[derive(Debug, Clone, Copy)]
pub struct CronDelete;

/// Input of CronDelete.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronDeleteInput {
    /// Job ID returned by CronCreate.
    pub id: String,
}

impl Tool for CronDelete {
    type Input = CronDeleteInput;
    type Output = Shown;

    const NAME: &'static str = "CronDelete";
    const KIND: ToolKind = ToolKind::Schedules;
    // A schedule outlives plan mode's turn: not read-only.
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::ADDITIVE;

    fn should_defer(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Cancels one of this session's schedules by the id CronCreate returned.".to_owned()
    }

    fn check_permissions(&self, _input: &CronDeleteInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: CronDeleteInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<Shown>, ToolError> {
        let job = scheduler(&ctx)?.delete(&ctx.session_id, input.id.trim()).map_err(ToolError::new)?;
        Ok(ToolOutput::new(shown(&job)))
    }

    fn result_content(&self, out: &Shown) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(format!("Cancelled {} ({}).", out.id, out.human_schedule))]
    }

    fn render_use(&self, input: &CronDeleteInput) -> String {
        format!("Cancel schedule {}", input.id)
    }

    fn render_result(&self, out: &Shown) -> String {
        format!("cancelled {}", out.id)
    }
}
