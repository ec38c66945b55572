//! ListAgents and SendMessage as Claude Code 2.1.332 offers them, served by
//! the daemon for every harness: the sessions a session may reach (its
//! own sub-agents, sessions of other clients and harnesses), and a message
//! to one of them, which arrives as a `message/received` event in its log
//! (`crate::peers`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::peers::{MAX_MESSAGE_BYTES, MAX_SUMMARY_CHARS, Outgoing, PeerBook};
use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolKind, ToolOutput, ValidationError};

/// Most sessions one ListAgents page lists.
const PAGE: usize = 50;

/// Lists the sessions this one may message.
#[derive(Debug, Clone, Copy)]
pub struct ListAgents;

/// Input of ListAgents (Claude Code's fields; `channel` and `q` are not
/// available there either).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListAgentsInput {
    /// Not available in this build; leave unset.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub channel: Option<String>,
    /// Not available in this build; leave unset.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub q: Option<String>,
    /// The cursor the last line of a long listing gave, for its next page.
    /// Omit to list from the start.
    #[serde(default)]
    #[schemars(length(max = 256))]
    pub cursor: Option<String>,
}

/// One session listed.
#[derive(Debug, Clone, Serialize)]
pub struct Listed {
    /// Its name, if any.
    pub name: Option<String>,
    /// Its id.
    pub session_id: String,
    /// Its workspace.
    pub cwd: String,
    /// `running` or `idle`.
    pub state: &'static str,
    /// The session it is a sub-agent of.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// What ListAgents found.
#[derive(Debug, Clone, Serialize)]
pub struct ListAgentsOutput {
    /// This page.
    pub agents: Vec<Listed>,
    /// The cursor of the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// The caller's parent, listed as `main`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub main: Option<String>,
}

fn book(ctx: &ToolContext) -> Result<&PeerBook, ToolError> {
    ctx.services.get::<PeerBook>().ok_or_else(|| ToolError::new("this session cannot reach other sessions"))
}

impl Tool for ListAgents {
    type Input = ListAgentsInput;
    type Output = ListAgentsOutput;

    const NAME: &'static str = "ListAgents";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: ToolKind = ToolKind::Peers;
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn aliases(&self) -> &'static [&'static str] {
        &["ListPeers"]
    }

    fn should_defer(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Lists the agent sessions you can SendMessage to: other sessions on this machine (other harnesses, \
         other clients) and your own sub-agents, each with its name, id, workspace and whether it is running \
         a turn or idle."
            .to_owned()
    }

    fn validate_input(&self, input: &ListAgentsInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.channel.is_some() || input.q.is_some() {
            return Err(ValidationError::new("channel and q are not available; leave them unset"));
        }
        if input.cursor.as_deref().is_some_and(|c| c.parse::<usize>().is_err()) {
            return Err(ValidationError::new("cursor: not a cursor a listing gave"));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &ListAgentsInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: ListAgentsInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<ListAgentsOutput>, ToolError> {
        let peers = book(&ctx)?.list(&ctx.session_id);
        let main = peers.iter().find(|p| p.is_parent).map(|p| p.session_id.clone());
        let from = input.cursor.and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
        let agents: Vec<Listed> = peers
            .into_iter()
            .skip(from)
            .take(PAGE + 1)
            .map(|p| Listed {
                name: p.name,
                session_id: p.session_id,
                cwd: p.cwd.display().to_string(),
                state: p.state,
                parent: p.parent,
            })
            .collect();
        let mut agents = agents;
        let next_cursor = (agents.len() > PAGE).then(|| (from + PAGE).to_string());
        agents.truncate(PAGE);
        Ok(ToolOutput::new(ListAgentsOutput { agents, next_cursor, main }))
    }

    fn result_content(&self, out: &ListAgentsOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = String::new();
        if out.agents.is_empty() {
            text.push_str("No other agent sessions can be reached.");
        }
        for a in &out.agents {
            let label = match &a.name {
                Some(name) => format!("{name} [{}]", a.session_id),
                None => a.session_id.clone(),
            };
            let role = if out.main.as_deref() == Some(a.session_id.as_str()) { " (main: your parent)" } else { "" };
            let parent = a.parent.as_deref().map(|p| format!(", sub-agent of {p}")).unwrap_or_default();
            text.push_str(&format!("{label}{role} — {} — {}{parent}\n", a.state, a.cwd));
        }
        if let Some(c) = &out.next_cursor {
            text.push_str(&format!("More: ListAgents with cursor {c:?}.\n"));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text.trim_end())]
    }

    fn render_use(&self, _input: &ListAgentsInput) -> String {
        "List agents".to_owned()
    }

    fn render_result(&self, out: &ListAgentsOutput) -> String {
        match out.agents.len() {
            1 => "1 agent".to_owned(),
            n => format!("{n} agents"),
        }
    }
}

/// Sends a message to another session.
#[derive(Debug, Clone, Copy)]
pub struct SendMessage;

/// Input of SendMessage (Claude Code 2.1.332's).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SendMessageInput {
    /// Recipient: a name from ListAgents (or its `name [id]` as listed), a
    /// session id, or "main" (the session you are a sub-agent of).
    #[schemars(length(max = 300), regex(pattern = r"^[^\n\r]*$"))]
    pub to: String,
    /// A 5-10 word label for your own transcript row. Truncated to 200
    /// characters rather than rejected.
    #[serde(default)]
    pub summary: Option<String>,
    /// Plain text message content; make the first line a clear,
    /// self-contained sentence saying what this is about.
    #[serde(default)]
    pub message: String,
    /// Ask the session to send you ONE notice when it next finishes its
    /// turn or closes. With a message: deliver it now AND subscribe.
    /// Without one: a pure subscription.
    #[serde(default)]
    pub notify_when_idle: Option<bool>,
}

/// What SendMessage did.
#[derive(Debug, Clone, Serialize)]
pub struct SendMessageOutput {
    /// Whether a message was delivered (none with a pure subscription).
    pub success: bool,
    /// The recipient's id.
    pub session_id: String,
    /// The recipient's name, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A client was attached to it; otherwise the message waits in its log.
    pub attached: bool,
    /// You will get a `session/idle` notice.
    pub notify_when_idle: bool,
}

impl Tool for SendMessage {
    type Input = SendMessageInput;
    type Output = SendMessageOutput;

    const NAME: &'static str = "SendMessage";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: ToolKind = ToolKind::Peers;
    // Another session may act on it (in any mode): not read-only, so plan
    // mode refuses it.
    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::ADDITIVE;

    fn should_defer(&self) -> bool {
        true
    }

    fn description(&self) -> String {
        "Sends a message to another agent session on this machine (ListAgents names them), or to \"main\", \
         the session you are a sub-agent of. It arrives in that session as a message/received event, at \
         once when a client is attached, else when one attaches. notify_when_idle asks for one notice when \
         that session next finishes its turn or closes."
            .to_owned()
    }

    fn validate_input(&self, input: &SendMessageInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.to.trim().is_empty() || input.to.contains(['\n', '\r']) || input.to.chars().count() > 300 {
            return Err(ValidationError::new("to: a name, an id or \"main\" on one line (at most 300 characters)"));
        }
        if input.message.len() > MAX_MESSAGE_BYTES {
            return Err(ValidationError::new(format!(
                "the message is {} bytes; at most {MAX_MESSAGE_BYTES} are sent (send a path to a file instead)",
                input.message.len()
            )));
        }
        if input.message.trim().is_empty() && input.notify_when_idle != Some(true) {
            return Err(ValidationError::new("nothing to send: the message is empty and notify_when_idle is not set"));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &SendMessageInput, _ctx: &ToolContext) -> Decision {
        Decision::Allow
    }

    async fn call(
        &self,
        input: SendMessageInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<SendMessageOutput>, ToolError> {
        let outgoing = Outgoing {
            summary: input.summary.map(|s| s.chars().take(MAX_SUMMARY_CHARS).collect()),
            notify_when_idle: input.notify_when_idle == Some(true),
            message: input.message,
        };
        let sent = !outgoing.message.trim().is_empty();
        let done = book(&ctx)?.send(&ctx.session_id, input.to.trim(), outgoing).map_err(ToolError::new)?;
        Ok(ToolOutput::new(SendMessageOutput {
            success: sent,
            session_id: done.session_id,
            name: done.name,
            attached: done.attached,
            notify_when_idle: done.watching,
        }))
    }

    fn result_content(&self, out: &SendMessageOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let who = match &out.name {
            Some(n) => format!("{n} [{}]", out.session_id),
            None => out.session_id.clone(),
        };
        let mut text = if out.success {
            if out.attached {
                format!("Message sent to {who}.")
            } else {
                format!("Message queued for {who}: no client is attached; it is delivered when one attaches.")
            }
        } else {
            format!("Subscribed to {who}.")
        };
        if out.notify_when_idle {
            text.push_str(" You will get one notice when it next finishes its turn or closes.");
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &SendMessageInput) -> String {
        let first = input.message.lines().next().unwrap_or_default();
        format!("To {}: {}", input.to, first.chars().take(60).collect::<String>())
    }

    fn render_result(&self, out: &SendMessageOutput) -> String {
        match (out.success, out.attached) {
            (false, _) => "subscribed",
            (true, true) => "sent",
            (true, false) => "queued",
        }
        .to_owned()
    }
}
