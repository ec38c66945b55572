//! Asking the client: permission requests for calls (and for what a call
//! asks mid-way), their `Notification` hooks, the wait for an answer, and
//! `permission/respond`.

use super::*;

impl SessionExecutor {
    /// Opens a permission request for a call: the call itself, or (`what`:
    /// kind, host, port) something it asks for while it runs.
    pub(super) fn open_request(&self, call: &CallIds, ask: AskFor, what: Option<Asked>) -> Waiting {
        let no_client = format!(
            "permission required: {}. No client is attached to the session's event stream to approve it \
             (subscribe with turn/stream to be asked), so it was denied",
            ask.reason
        );
        let (request_id, answer) = self.services.asks.open(ask.suggestions.clone(), &call.turn_id, &call.tool_use_id);
        let (kind, host, port, changes, diff) = match what {
            Some(a) => (Some(a.kind.to_owned()), a.host, a.port, a.changes, a.diff),
            None => (None, None, None, Vec::new(), None),
        };
        self.events.push(EventKind::PermissionRequest {
            turn_id: call.turn_id.clone(),
            tool_use_id: call.tool_use_id.clone(),
            request_id: request_id.clone(),
            tool: call.name.clone(),
            input: ask.input,
            reason: ask.reason,
            render: call.render.clone(),
            suggestions: ask.suggestions,
            kind,
            host,
            port,
            changes,
            diff,
        });
        self.notify_hooks(call);
        Waiting {
            request_id,
            answer,
            turn_id: call.turn_id.clone(),
            tool_use_id: call.tool_use_id.clone(),
            no_client,
            outside: ask.outside,
            client_attached: self.events.subscriber_count() > 0,
        }
    }

    /// Runs the `Notification` hooks of a permission prompt, beside it
    /// (nothing waits for them).
    pub(super) fn notify_hooks(&self, call: &CallIds) {
        use crate::hooks::Completions;
        use agentd_protocol::hooks::HookEvent;
        if !self.services.hooks.wants(HookEvent::Notification, "permission_prompt") {
            return;
        }
        let hooks = self.services.hooks.clone();
        let input = serde_json::json!({
            "message": format!("agentd needs your permission to use {}", call.name),
            "notification_type": "permission_prompt",
            "title": "Permission needed",
        });
        let about = crate::hooks::About {
            turn_id: Some(call.turn_id.clone()),
            tool_use_id: Some(call.tool_use_id.clone()),
            tool_name: Some(call.name.clone()),
        };
        let token = self.cancel.child_token();
        self.tracker.spawn(async move {
            hooks.run(HookEvent::Notification, "permission_prompt", input, &about, &token, Completions::Pushed).await;
        });
    }

    /// Waits for the client's answer: `Err` is the refusal to yield. No
    /// answer in time, the last client leaving the stream (or none coming
    /// within [`NO_CLIENT_GRACE`]), or the call being cancelled all deny it.
    pub(super) async fn wait_for_answer(
        &self,
        mut wait: Waiting,
        token: &CancellationToken,
    ) -> Result<Option<ask::Answers>, String> {
        let timeout = Duration::from_millis(self.services.info.permission_timeout_ms);
        let deadline = tokio::time::sleep(timeout);
        let mut deadline = std::pin::pin!(deadline);
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let asked = tokio::time::Instant::now();
        let mut seen_client = wait.client_attached;
        let (verdict, why) = loop {
            let gave_up = tokio::select! {
                biased;
                answer = &mut wait.answer => break match answer {
                    // A cancel that came with (or just after) the answer wins.
                    Ok(Answer::Allow(_)) if token.is_cancelled() => {
                        (Err("cancelled while waiting for permission".to_owned()), "cancelled".to_owned())
                    }
                    Ok(Answer::Allow(answers)) => (Ok(answers), "the client allowed it".to_owned()),
                    Ok(Answer::Deny { message, no_user }) => {
                        // Truthful about who refused (issue 49 #13): a
                        // client that asked nobody is not the user.
                        let mut refusal = match no_user {
                            false => "permission denied: the user refused this call".to_owned(),
                            true => "permission denied: nobody could be asked, so the client refused this call".to_owned(),
                        };
                        if let Some(m) = message.filter(|m| !m.trim().is_empty()) {
                            refusal.push_str(": ");
                            refusal.push_str(m.trim());
                        }
                        (Err(refusal), "the client denied it".to_owned())
                    }
                    Ok(Answer::Cancelled) => {
                        (Err("cancelled while waiting for permission".to_owned()), "cancelled".to_owned())
                    }
                    Err(_) => (Err("permission denied: the request was dropped".to_owned()), "dropped".to_owned()),
                },
                _ = &mut deadline => if seen_client {
                    format!(
                        "permission denied: nobody answered the permission request within {} ms",
                        timeout.as_millis()
                    )
                } else {
                    wait.no_client.clone()
                },
                _ = token.cancelled() => "cancelled while waiting for permission".to_owned(),
                _ = tick.tick() => {
                    if self.events.subscriber_count() > 0 {
                        seen_client = true;
                        continue;
                    }
                    if seen_client {
                        "permission denied: the last client left the session's event stream before answering"
                            .to_owned()
                    } else if asked.elapsed() >= NO_CLIENT_GRACE {
                        wait.no_client.clone()
                    } else {
                        continue;
                    }
                }
            };
            // An answer that came in just before giving up wins.
            if !self.services.asks.forget(&wait.request_id) {
                continue;
            }
            break (Err(gave_up.clone()), gave_up);
        };
        self.events.push(EventKind::PermissionResolved {
            turn_id: wait.turn_id,
            tool_use_id: wait.tool_use_id,
            request_id: wait.request_id,
            allowed: verdict.is_ok(),
            reason: why,
        });
        verdict
    }

    /// Answers a permission request (`permission/respond`).
    pub fn respond(
        &self,
        params: &agentd_protocol::permission::PermissionRespondParams,
    ) -> Result<Option<String>, ask::RespondError> {
        // Under the lock (and its batch): the granted rule is in the
        // journal before the call it lets run reports anything, and before
        // this answers.
        let inner = self.lock();
        let added = self.services.asks.respond(params)?;
        if added.is_some() {
            self.changed(&inner.context);
        }
        Ok(added)
    }

    /// Rules added by `allow_always` answers.
    pub fn granted_rules(&self) -> Vec<String> {
        self.services.asks.granted_texts()
    }

    /// The ids of the permission requests waiting for an answer.
    pub fn pending_permissions(&self) -> Vec<String> {
        self.services.asks.open_ids()
    }
}
