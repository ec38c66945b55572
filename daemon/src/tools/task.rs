//! Task (alias Agent): runs a sub-agent. agentd runs no model, so the call
//! makes a child session (the parent's workspace, mode, rules and sandbox;
//! its own file state, events and todos; the definition's tools, never
//! Task itself), sends an `agent/request` event, and waits for the client
//! that runs agents to answer with `agent/respond`; the answer is the
//! call's result. Cancelling the call cancels the child's work; the child
//! closes when the call ends. Offered only while a client that declared
//! `capabilities: ["agents"]` follows the session.

use agentd_protocol::hooks::HookEvent;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::agents::{AgentAnswer, AgentDef, Announce};
use crate::permission::Decision;
use crate::sync::MutexExt;
use crate::tool::{
    DynTool, ExternalToolSource, ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError,
};

/// The tool's name.
pub const NAME: &str = "Task";
/// How long a Task waits with no client that runs agents following the
/// session before it fails.
const RUNNER_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// A session's sub-agent definitions as a tool source (the Task tool).
pub struct AgentSource {
    tools: Vec<Arc<dyn DynTool>>,
    identity: String,
}

impl AgentSource {
    /// A source for `defs`.
    pub fn new(defs: Vec<AgentDef>) -> Self {
        let identity = defs.iter().map(|d| format!("{}={:?}:{}", d.name, d.tools, d.description)).collect();
        let tool = Arc::new(crate::tool::erased::Erased::new(TaskTool { defs: Arc::new(defs) })) as Arc<dyn DynTool>;
        AgentSource { tools: vec![tool], identity }
    }

    /// What sets this source apart (sessions with the same definitions
    /// share a tool set).
    pub fn identity(&self) -> &str {
        &self.identity
    }
}

impl ExternalToolSource for AgentSource {
    fn source_name(&self) -> &str {
        "agents"
    }

    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.tools.clone()
    }
}

/// The Task tool, with the session's sub-agent definitions.
#[derive(Debug, Clone)]
pub struct TaskTool {
    defs: Arc<Vec<AgentDef>>,
}

/// Input of Task.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskInput {
    /// A short (3-5 word) description of the task
    pub description: String,
    /// The task for the agent to perform
    pub prompt: String,
    /// The type of specialized agent to use for this task (default
    /// `general-purpose`)
    #[serde(default = "general_purpose_name")]
    pub subagent_type: String,
    /// The model for the agent: `sonnet`, `opus`, `haiku`, `fable`, or
    /// `inherit` (the parent's, the default). The client that runs the
    /// agent takes it.
    #[serde(default)]
    #[schemars(extend("enum" = ["sonnet", "opus", "haiku", "fable", "inherit"]))]
    pub model: Option<String>,
    /// Reasoning effort for the agent: `low`, `medium`, `high`, `xhigh` or
    /// `max` (the client that runs it takes it).
    #[serde(default)]
    #[schemars(extend("enum" = ["low", "medium", "high", "xhigh", "max", "lower", "higher"]))]
    pub effort: Option<String>,
    /// Run the agent in the background (the default, as in Claude Code
    /// 2.1.332): the call returns at once with its id, and a
    /// `task/notification` brings its result when it is done (TaskOutput
    /// with that task_id waits for it; TaskStop ends it). false: wait for
    /// its result.
    #[serde(default, deserialize_with = "crate::tool::input::opt_flag")]
    pub run_in_background: Option<bool>,
    /// A name for the agent (letters, digits, `-`, `_`; up to 64): while it
    /// runs, SendMessage reaches it by this name and TaskStop stops it.
    #[serde(default)]
    pub name: Option<String>,
    /// Claude Code 2.1's `mode`, deprecated in 2.1.332: a sub-agent takes
    /// its parent's mode. Accepted and ignored.
    #[serde(default)]
    #[schemars(skip)]
    #[allow(dead_code)]
    pub mode: Option<String>,
    /// `worktree`: the agent works in a new git worktree of the
    /// repository (`.claude/worktrees/agent-…`, on a branch of its own),
    /// an isolated copy where its changes leave the checkout alone; the
    /// result names it. (Claude Code's `remote` is not done by agentd.)
    #[serde(default)]
    #[schemars(extend("enum" = ["worktree"]))]
    pub isolation: Option<String>,
}

fn general_purpose_name() -> String {
    "general-purpose".to_owned()
}

impl TaskInput {
    fn background(&self) -> bool {
        self.run_in_background.unwrap_or(true)
    }
}

/// Whether `name` may name an agent (Claude Code 2.1.332's rule).
fn valid_agent_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.len() <= 64
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !["main", "team-lead", "user", "system"].iter().any(|r| r.eq_ignore_ascii_case(name))
        && !name.to_ascii_lowercase().starts_with("job_")
}

/// The models a Task call may name (Claude Code 2.1's, and `inherit`).
const MODELS: &[&str] = &["sonnet", "opus", "haiku", "fable", "inherit"];
/// The efforts it may name.
const EFFORTS: &[&str] = &["low", "medium", "high", "xhigh", "max", "lower", "higher"];

/// What the sub-agent gave back.
#[derive(Debug, Clone, Serialize)]
pub struct TaskOutput {
    /// The child session it worked in (empty for an agent started in the
    /// background: its job says).
    pub child_session_id: String,
    /// Its result.
    pub result: String,
    /// The background job running it (`run_in_background`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
}

impl TaskTool {
    fn find(&self, name: &str) -> Option<&AgentDef> {
        self.defs.iter().find(|d| d.name == name)
    }
}

/// Other names the Task tool answers to (`Agent` is Claude Code 2.1's).
pub const ALIASES: &[&str] = &["Agent"];

impl Tool for TaskTool {
    type Input = TaskInput;
    type Output = TaskOutput;

    const NAME: &'static str = NAME;
    const CONCURRENCY_SAFE: bool = true;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Agents;

    fn aliases(&self) -> &'static [&'static str] {
        ALIASES
    }

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { open_world: true, ..agentd_protocol::tools::ToolHints::ADDITIVE };

    fn description(&self) -> String {
        let mut text = String::from(
            "Launches a sub-agent to handle a complex, multi-step task on its own: it works in a child \
             session with its own context and returns one final report. Give it a complete, self-contained \
             prompt (it does not see this conversation) and say what it should return. Several Task calls in \
             one message run side by side.\n\nAvailable agent types:\n",
        );
        for d in self.defs.iter() {
            let tools = d.tools.as_ref().map_or("all tools".to_owned(), |t| t.join(", "));
            text.push_str(&format!("- {}: {} (Tools: {tools})\n", d.name, d.description));
        }
        text
    }

    fn always_load(&self) -> bool {
        true
    }

    fn validate_input(&self, input: &TaskInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.description.trim().is_empty() || input.prompt.trim().is_empty() {
            return Err(ValidationError::new("description and prompt must not be empty"));
        }
        if let Some(m) = input.model.as_deref().filter(|m| !MODELS.contains(m)) {
            return Err(ValidationError::new(format!("model {m:?} is none of {}", MODELS.join(", "))));
        }
        if let Some(e) = input.effort.as_deref().filter(|e| !EFFORTS.contains(e)) {
            return Err(ValidationError::new(format!("effort {e:?} is none of {}", EFFORTS.join(", "))));
        }
        if let Some(name) = input.name.as_deref().filter(|n| !valid_agent_name(n)) {
            return Err(ValidationError::new(format!(
                "name {name:?}: 1 to 64 letters, digits, `-` or `_`, starting with a letter or digit (not main, \
                 team-lead, user, system, or a job id)"
            )));
        }
        if let Some(isolation) = input.isolation.as_deref().filter(|i| *i != "worktree") {
            return Err(ValidationError::new(format!(
                "isolation {isolation:?} is not supported by agentd (only \"worktree\": a remote machine is not \
                 agentd's to start)"
            )));
        }
        if self.find(input.subagent_type.trim()).is_none() {
            let names: Vec<&str> = self.defs.iter().map(|d| d.name.as_str()).collect();
            return Err(ValidationError::new(format!(
                "no agent type {:?}; the types are: {}",
                input.subagent_type,
                names.join(", ")
            )));
        }
        Ok(())
    }

    /// `Task(Explore)` (or `Agent(Explore)`) rules name the agent type.
    fn permission_target(&self, input: &TaskInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Name(input.subagent_type.trim().to_owned())
    }

    fn check_permissions(&self, input: &TaskInput, _ctx: &ToolContext) -> Decision {
        // A new worktree and branch in the repository asks, as EnterWorktree
        // does; the sub-agent's calls are checked in its session, by the
        // parent's rules.
        if input.isolation.as_deref() == Some("worktree") {
            return Decision::ask("give the sub-agent a new git worktree and branch of this repository");
        }
        Decision::Allow
    }

    async fn call(
        &self,
        input: TaskInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<TaskOutput>, ToolError> {
        let slot = ctx
            .need::<crate::process::jobs::JobTable>()?
            .agent_slot(crate::agents::MAX_CONCURRENT, crate::agents::MAX_PER_SESSION)
            .map_err(ToolError::new)?;
        if !input.background() {
            let _slot = slot;
            return self.run(input, ctx).await.map(ToolOutput::new);
        }
        // A runner must be there to start it; the job then fails as the
        // call would when the runner goes.
        if !ctx.services.get::<crate::agents::AgentCall>().is_some_and(|a| (a.runner)()) {
            return Err(ToolError::new(
                "no client that runs sub-agents follows this session (turn/stream with capabilities [\"agents\"])",
            ));
        }
        let what = format!("{}: {}", input.subagent_type.trim(), input.description.trim());
        let tool = self.clone();
        let jobs = ctx
            .services
            .shared::<crate::process::jobs::JobTable>()
            .ok_or_else(|| ToolError::new("this session has no background jobs"))?;
        let name = input.name.clone();
        let job = jobs
            .start_work_named(&what, name.as_deref(), move |token| {
                let ctx = ToolContext { cancel: token, ..ctx };
                async move {
                    let _slot = slot;
                    let out = tool.run(input, ctx).await.map_err(|e| e.to_string())?;
                    Ok(format!("{}\n[the sub-agent worked in the child session {}]", out.result, out.child_session_id))
                }
            })
            .map_err(|e| ToolError::new(e.to_string()))?;
        // Claude Code 2.1.332's words (its agent ids are agentd's job ids).
        let reach = name.as_deref().map(|to| {
            format!(" Use SendMessage with to: '{to}', summary: '<5-10 word recap>' to reach this agent while it runs.")
        });
        let result = format!(
            "Async agent launched successfully. (This tool result is internal metadata — never quote or paste any \
             part of it, including the agentId below, into a user-facing reply.)\nagentId: {id} (internal ID - do \
             not mention to user.{reach})\nThe agent is working in the background. You will be notified automatically when it \
             completes. You know nothing about its results until that notification arrives — do not report, \
             assume, or predict them; continue other work or respond to the user in the meantime.\nDo not \
             duplicate this agent's work — avoid working with the same files or topics it is using.\n(TaskOutput \
             with task_id \"{id}\" waits for its result; TaskStop with task_id \"{id}\" ends it.)",
            id = job.id,
            reach = reach.unwrap_or_default()
        );
        Ok(ToolOutput::new(TaskOutput { child_session_id: String::new(), result, job_id: Some(job.id.clone()) }))
    }

    fn result_content(&self, out: &TaskOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(out.result.clone())]
    }

    fn render_use(&self, input: &TaskInput) -> String {
        let background = if input.background() { " (in the background)" } else { "" };
        format!("{}: {}{background}", input.subagent_type, input.description)
    }

    fn render_result(&self, out: &TaskOutput) -> String {
        let first = out.result.lines().next().unwrap_or_default();
        first.chars().take(80).collect()
    }
}

impl TaskTool {
    /// Runs the sub-agent to its end (or `ctx.cancel`).
    async fn run(&self, input: TaskInput, ctx: ToolContext) -> Result<TaskOutput, ToolError> {
        let Some(agent) = ctx.services.shared::<crate::agents::AgentCall>() else {
            return Err(ToolError::new("sub-agents are not available in this session"));
        };
        if !(agent.runner)() {
            return Err(ToolError::new(
                "no client that runs sub-agents follows this session (turn/stream with capabilities [\"agents\"])",
            ));
        }
        let def = self.find(input.subagent_type.trim()).cloned().ok_or_else(|| ToolError::new("unknown agent type"))?;
        // Making a session touches the file system (settings, the store):
        // off the runtime's threads, with a deadline.
        let (host, parent, wanted, denied) =
            (agent.host.clone(), ctx.session_id.to_string(), def.tools.clone(), def.disallowed.clone());
        let name = input.name.clone();
        // Its own worktree, made before the child (and kept after it: the
        // result names it).
        let worktree = match input.isolation.as_deref() {
            Some("worktree") => {
                let short = uuid::Uuid::new_v4().simple().to_string();
                Some(crate::tools::worktree::create(&ctx, Some(format!("agent-{}", &short[..8]))).await?)
            }
            _ => None,
        };
        let isolated = worktree.clone();
        // However the call ends, the child goes with it — also when the call
        // is dropped (stopped, cancelled) while the child is being made: the
        // maker then closes it itself.
        let close = Close { host: agent.host.clone(), made: Arc::new(std::sync::Mutex::new(Made::default())) };
        let made = close.made.clone();
        let spawned = tokio::task::spawn_blocking(move || {
            let ask = crate::agents::ChildAsk {
                tools: wanted.as_deref(),
                disallowed: &denied,
                name: name.as_deref(),
                worktree: isolated.as_ref(),
            };
            let spawned = host.spawn_child(&parent, ask);
            if let Ok((child, _)) = &spawned {
                let mut made = made.locked();
                if made.dropped {
                    host.cancel_child(child);
                    host.close_child(child);
                } else {
                    made.child = Some(child.clone());
                }
            }
            spawned
        });
        let spawned = match tokio::time::timeout(std::time::Duration::from_secs(30), spawned).await {
            Ok(Ok(made)) => made,
            Ok(Err(e)) => Err(format!("the child session could not be made: {e}")),
            Err(_) => Err("making the child session took longer than 30 s".to_owned()),
        };
        let (child, tools) = match spawned {
            Ok(made) => made,
            Err(why) => {
                // The worktree made for it goes too (it holds nothing yet).
                if let Some(w) = &worktree {
                    let hooks = ctx.services.get::<crate::hooks::Hooks>();
                    let _ = crate::tools::worktree::remove(w, false, hooks, &ctx.cancel).await;
                }
                return Err(ToolError::new(why));
            }
        };
        let _close = close;
        let request_id = format!("agent_{}", uuid::Uuid::new_v4().simple());
        let mut waiting = agent.requests.wait_for(&request_id);
        let run_hook = async |event: HookEvent, input: serde_json::Value| {
            let pushed = crate::hooks::Completions::Pushed;
            agent.hooks.run(event, &def.name, input, &agent.about, &ctx.cancel, pushed).await
        };
        // What SubagentStart hooks add is the sub-agent's to read.
        let mut instructions = def.instructions.clone();
        if agent.hooks.wants(HookEvent::SubagentStart, &def.name) {
            let input = serde_json::json!({ "agent_id": child, "agent_type": def.name });
            let said = run_hook(HookEvent::SubagentStart, input).await;
            if !said.context.is_empty() {
                let added = said.context.join("\n");
                instructions = Some(match instructions {
                    Some(own) => format!("{own}\n\n{added}"),
                    None => added,
                });
            }
        }
        (agent.announce)(Announce {
            request_id,
            child_session_id: child.clone(),
            subagent_type: def.name.clone(),
            description: input.description,
            prompt: input.prompt,
            instructions,
            tools,
            // The call's choice, else the definition's.
            model: input.model.clone().or_else(|| def.model.clone()),
            effort: input.effort.clone(),
        });
        // A client that runs agents must stay: once none has followed the
        // session for RUNNER_GRACE, the call fails (one that comes back
        // within it can still answer).
        let mut check = tokio::time::interval(std::time::Duration::from_millis(250));
        let mut absent_since: Option<std::time::Instant> = None;
        let answer: AgentAnswer = loop {
            tokio::select! {
                a = &mut waiting.answer => break a.map_err(|_| ToolError::new("the agent request was dropped"))?,
                _ = ctx.cancel.cancelled() => return Err(ToolError::new("cancelled")),
                _ = check.tick() => {
                    if (agent.runner)() {
                        absent_since = None;
                    } else if absent_since.get_or_insert_with(std::time::Instant::now).elapsed() >= RUNNER_GRACE {
                        return Err(ToolError::new(format!(
                            "the client running sub-agents went away (no agents stream for {} s); the sub-agent's \
                             work is ended",
                            RUNNER_GRACE.as_secs()
                        )));
                    }
                }
            }
        };
        let mut answer = answer;
        if agent.hooks.wants(HookEvent::SubagentStop, &def.name) {
            let input = serde_json::json!({
                "agent_id": child,
                "agent_type": def.name,
                "stop_hook_active": false,
                "agent_transcript_path": null,
                "last_assistant_message": answer.result,
            });
            let said = run_hook(HookEvent::SubagentStop, input).await;
            // The sub-agent's loop is the client's and is over: what would
            // keep it running is the parent's to read.
            for reason in said.blocks {
                answer.result.push_str(&format!("\n\nSubagentStop hook feedback: {reason}"));
            }
        }
        if let Some(w) = &worktree {
            // A worktree the agent changed nothing in goes, as in Claude
            // Code 2.1.332; else 2.1.332's lines say where its work is. What
            // a hook made, agentd cannot look into: it stays.
            let hooks = ctx.services.get::<crate::hooks::Hooks>();
            let removed = match w.by_hook {
                true => None,
                false => crate::tools::worktree::remove(w, false, hooks, &ctx.cancel).await.ok(),
            };
            match removed {
                Some(said) => answer.result.push_str(&format!("\n[it changed nothing in its worktree: {said}]")),
                None => answer.result.push_str(&format!(
                    "\nworktreePath: {}\nworktreeBranch: {}",
                    w.path.display(),
                    w.branch
                )),
            }
        }
        if answer.is_error {
            return Err(ToolError::new(answer.result));
        }
        Ok(TaskOutput { child_session_id: child, result: answer.result, job_id: None })
    }
}

/// A child session being made for a Task call, and whether the call is
/// gone (see [`Close`]).
#[derive(Default)]
struct Made {
    child: Option<String>,
    dropped: bool,
}

/// Closes a Task call's child when the call ends, however it ends.
struct Close {
    host: crate::agents::Host,
    made: Arc<std::sync::Mutex<Made>>,
}

impl Drop for Close {
    fn drop(&mut self) {
        let mut made = self.made.locked();
        made.dropped = true;
        if let Some(child) = made.child.take() {
            self.host.cancel_child(&child);
            self.host.close_child(&child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 49: the daemon defaults `subagent_type` (as Claude Code makes
    /// it optional), so the published schema must not require it.
    #[test]
    fn subagent_type_is_optional_in_the_published_schema() {
        let schema = crate::tool::input::model_schema(serde_json::to_value(schemars::schema_for!(TaskInput)).unwrap());
        assert!(!schema["required"].to_string().contains("subagent_type"), "{schema}");
        let input: TaskInput = serde_json::from_value(serde_json::json!({"description": "d", "prompt": "p"})).unwrap();
        assert_eq!(input.subagent_type, "general-purpose");
    }

    #[test]
    fn the_published_enums_are_the_values_taken() {
        let schema = serde_json::to_value(schemars::schema_for!(TaskInput)).unwrap();
        for (field, taken) in [("model", MODELS), ("effort", EFFORTS)] {
            let published: Vec<&str> =
                schema["properties"][field]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            assert_eq!(published, taken, "{field}");
        }
    }
}
