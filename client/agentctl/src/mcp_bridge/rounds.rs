//! MCP 2026-07-28's multi-round-trip requests. A server of that revision
//! sends its client no request of its own: a call that needs an answer
//! from the client's user — a permission request of agentd, or an
//! elicitation or sampling request of one of agentd's own MCP servers —
//! ends its `tools/call` with an `input_required` result (one input
//! request, and a `requestState` naming the waiting call), and goes on
//! when the client sends the call again with the answer
//! (`inputResponses`) and that `requestState`. Meanwhile the daemon's call
//! waits here: at most [`MAX_SUSPENDED`] calls, each for at most
//! [`SUSPENDED_FOR`] (then it is cancelled, as a call whose client left).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentd_client::Client;
use agentd_protocol::methods::TurnCancel;
use agentd_protocol::turn::TurnCancelParams;
use rmcp::model::{CallToolRequestParams, CallToolResponse};
use rmcp::service::{RequestContext, RoleServer};

use super::results::{convert, known};
use super::{Served, internal, lock};
use agentd_protocol::mcp::{McpElicitationAction, McpSamplingDecision};
use agentd_protocol::methods::{McpElicitationRespond, McpSamplingRespond, PermissionRespond};
use agentd_protocol::permission::{PermissionDecision, PermissionRespondParams};
use agentd_protocol::tools::ToolCallResult;
use serde_json::{Value, json};

/// The key of the one input request a round asks.
pub(super) const KEY: &str = "agentd";
/// Calls waiting for their client's answer, at most.
pub(super) const MAX_SUSPENDED: usize = 64;
/// How long a call waits for its client to send it again.
pub(super) const SUSPENDED_FOR: Duration = Duration::from_secs(600);

/// What a call needs its client's user to answer.
pub(super) enum Question {
    /// agentd asks whether the call may run.
    Permission { request_id: String, tool: String, reason: String, render: String, input: Value },
    /// One of agentd's MCP servers asks the user for input (a form, or
    /// its page and id in URL mode).
    Elicitation { request_id: String, server: String, message: String, schema: Value, page: Option<(String, String)> },
    /// One of agentd's MCP servers asks for a completion of the client's model.
    Sampling { request_id: String, server: String, request: Value },
}

/// A call waiting between two rounds.
pub(super) struct Suspended {
    /// The tool called (the next round must call the same).
    pub name: String,
    /// The daemon call's `tool_use` id.
    pub tool_use_id: String,
    /// The daemon call.
    pub call: tokio::task::JoinHandle<Result<ToolCallResult, String>>,
    /// Its questions, as the bridge's follower sees them.
    pub questions: tokio::sync::mpsc::UnboundedReceiver<Question>,
    /// The question the last round asked.
    pub asked: Option<Question>,
    /// When it is given up.
    pub until: Instant,
}

impl Question {
    /// The input request the client is sent.
    pub fn input_request(&self) -> Value {
        match self {
            Question::Permission { tool, reason, render, input, .. } => json!({
                "method": "elicitation/create",
                "params": super::permission_form(tool, reason, render, input),
            }),
            Question::Elicitation { server, message, schema, page, .. } => json!({
                "method": "elicitation/create",
                "params": super::elicitation_params(server, message, schema.clone(), page.clone()),
            }),
            Question::Sampling { request, .. } => json!({ "method": "sampling/createMessage", "params": request }),
        }
    }

    /// Answers the daemon with what the client's user said (`response`;
    /// absent or unreadable: declined). Answered elsewhere meanwhile (by
    /// `agentctl respond`, a timeout): the daemon says so, and that is fine.
    pub async fn answer(&self, client: &Client, session: &str, response: Option<&Value>) {
        let session_id = session.to_owned();
        match self {
            Question::Permission { request_id, .. } => {
                let (decision, message) = match response {
                    Some(r) => super::permission_answer(r),
                    None => (PermissionDecision::Deny, Some("the MCP client sent no answer".into())),
                };
                let request_id = request_id.clone();
                let params = PermissionRespondParams {
                    session_id,
                    request_id,
                    decision,
                    rule: None,
                    message,
                    answers: None,
                    no_user: false,
                };
                let _ = client.call::<PermissionRespond>(params).await;
            }
            Question::Elicitation { request_id, .. } => {
                let (action, content) = response.map_or((McpElicitationAction::Decline, None), super::elicited);
                let request_id = request_id.clone();
                let params =
                    agentd_protocol::mcp::McpElicitationRespondParams { session_id, request_id, action, content };
                let _ = client.call::<McpElicitationRespond>(params).await;
            }
            Question::Sampling { request_id, server, .. } => {
                let (result, error) = match response {
                    Some(r) if r.get("content").is_some() => (Some(r.clone()), None),
                    _ => (None, Some(format!("{server}: the MCP client of agentctl mcp sent no completion"))),
                };
                let request_id = request_id.clone();
                // The MCP client asks its user (MCP's human in the loop).
                let decision = McpSamplingDecision::Allow;
                let params =
                    agentd_protocol::mcp::McpSamplingRespondParams { session_id, request_id, decision, result, error };
                let _ = client.call::<McpSamplingRespond>(params).await;
            }
        }
    }
}

/// The `input_required` result asking `question`, resumed by `state`.
pub(super) fn input_required(question: &Question, state: &str) -> Result<rmcp::model::InputRequiredResult, String> {
    let request: rmcp::model::InputRequest =
        serde_json::from_value(question.input_request()).map_err(|e| format!("an input request: {e}"))?;
    let requests = rmcp::model::InputRequests::from([(KEY.to_owned(), request)]);
    Ok(rmcp::model::InputRequiredResult::new(Some(requests), Some(state.to_owned())))
}

/// A `requestState`: unguessable, naming nothing of the call (the client
/// holds it; the call stays here).
pub(super) fn new_state() -> Result<String, String> {
    super::http::random_hex::<16>().map_err(|e| format!("no randomness for a request state: {e}"))
}

impl Served {
    /// `tools/call` of MCP 2026-07-28: the call runs until it is done or
    /// needs an answer from the client's user, which the result then asks
    /// for (`input_required`); the client's next round (the same call with
    /// `requestState` and `inputResponses`) answers and goes on.
    pub(super) async fn call_in_rounds(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, rmcp::ErrorData> {
        let (client, session) = self.session().await?;
        let name = request.name.to_string();
        let mut waiting = match &request.request_state {
            Some(state) => {
                let waiting = self.resume(state, &name)?;
                if let Some(asked) = &waiting.asked {
                    let answer = request.input_responses.as_ref().and_then(|r| r.get(KEY));
                    asked.answer(&client, &session, answer).await;
                }
                // This round's stream carries the call's progress now.
                if let Some(route) = lock(&self.calls).get_mut(&waiting.tool_use_id) {
                    route.peer = context.peer.clone();
                    route.progress = context.meta.get_progress_token();
                }
                waiting
            }
            None => {
                let (tx, questions) = tokio::sync::mpsc::unbounded_channel();
                let (tool_use_id, call) = self.start_call(&request, &context, Some(tx)).await?;
                let until = Instant::now() + SUSPENDED_FOR;
                Suspended { name: name.clone(), tool_use_id, call, questions, asked: None, until }
            }
        };
        let id = waiting.tool_use_id.clone();
        let result = tokio::select! {
            r = &mut waiting.call => r.unwrap_or_else(|e| Err(e.to_string())),
            Some(question) = waiting.questions.recv() => {
                let state = new_state().map_err(internal)?;
                let asking = input_required(&question, &state).map_err(internal)?;
                waiting.asked = Some(question);
                waiting.until = Instant::now() + SUSPENDED_FOR;
                self.suspend(state, waiting, &client, &session);
                return Ok(CallToolResponse::InputRequired(asking));
            }
            _ = context.ct.cancelled() => {
                let cancel = TurnCancelParams { session_id: session.clone(), turn_id: None, tool_use_id: Some(id.clone()) };
                let _ = client.call::<TurnCancel>(cancel).await;
                (&mut waiting.call).await.unwrap_or_else(|e| Err(e.to_string()))
            }
        };
        let result = known(&name, self.end_call(&id, result)?)?;
        if name == "ToolSearch" && !result.is_error {
            self.tools_changed().await;
        }
        Ok(CallToolResponse::Complete(convert(&name, result)))
    }

    /// The call `state` names, taken to go on (it must be a call of `name`).
    fn resume(&self, state: &str, name: &str) -> Result<Suspended, rmcp::ErrorData> {
        let mut suspended = lock(&self.suspended);
        if let Some(s) = suspended.get(state).filter(|s| s.name != name) {
            let why = format!("requestState is of a call of {}, not of {name}", s.name);
            return Err(rmcp::ErrorData::invalid_params(why, None));
        }
        if suspended.get(state).is_some_and(|s| s.until <= Instant::now()) {
            // Its time is over: its timer gives it up.
            return Err(rmcp::ErrorData::invalid_params("requestState names a call that waited too long", None));
        }
        suspended.remove(state).ok_or_else(|| {
            rmcp::ErrorData::invalid_params(
                "requestState names no call waiting here (it was answered, or waited too long, or is not ours)",
                None,
            )
        })
    }

    /// Keeps `waiting` for its next round under `state`; calls that waited
    /// too long (or the oldest, past [`MAX_SUSPENDED`]) are
    /// cancelled.
    fn suspend(&self, state: String, waiting: Suspended, client: &Arc<Client>, session: &str) {
        let now = Instant::now();
        let mut given_up = Vec::new();
        {
            let mut suspended = lock(&self.suspended);
            let expired: Vec<String> =
                suspended.iter().filter(|(_, s)| s.until <= now).map(|(k, _)| k.clone()).collect();
            given_up.extend(expired.iter().filter_map(|k| suspended.remove(k)));
            while suspended.len() >= MAX_SUSPENDED {
                let Some(oldest) = suspended.iter().min_by_key(|(_, s)| s.until).map(|(k, _)| k.clone()) else { break };
                given_up.extend(suspended.remove(&oldest));
            }
            suspended.insert(state.clone(), waiting);
        }
        // Given up when its time is over, whatever else happens meanwhile.
        let (all, calls, timer_client, timer_session) =
            (Arc::downgrade(&self.suspended), self.calls.clone(), client.clone(), session.to_owned());
        tokio::spawn(async move {
            let (client, session) = (timer_client, timer_session);
            tokio::time::sleep(SUSPENDED_FOR).await;
            let Some(all) = all.upgrade() else { return };
            let expired = {
                let mut all = lock(&all);
                let over = all.get(&state).is_some_and(|s| s.until <= Instant::now());
                if over { all.remove(&state) } else { None }
            };
            if let Some(s) = expired {
                lock(&calls).remove(&s.tool_use_id);
                let cancel = TurnCancelParams { session_id: session, turn_id: None, tool_use_id: Some(s.tool_use_id) };
                let _ = client.call::<TurnCancel>(cancel).await;
                s.call.abort();
            }
        });
        for s in given_up {
            lock(&self.calls).remove(&s.tool_use_id);
            let cancel =
                TurnCancelParams { session_id: session.to_owned(), turn_id: None, tool_use_id: Some(s.tool_use_id) };
            let client = client.clone();
            tokio::spawn(async move {
                let _ = client.call::<TurnCancel>(cancel).await;
                s.call.abort();
            });
        }
    }
}
