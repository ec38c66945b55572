//! Submitting calls: a turn opened (or found) for them, each call
//! prepared and queued in the machine, or refused at once.

use super::*;

impl SessionExecutor {
    /// Adds `tool_uses` to a turn (a new one when `turn_id` is absent or
    /// unknown); they start as soon as the rules allow. Returns the turn id.
    /// Refused as a whole, changing nothing, when an id is a duplicate or
    /// the turn has ended.
    pub fn submit(&self, turn_id: Option<String>, tool_uses: Vec<ToolUse>, end: bool) -> Result<String, TurnError> {
        let mut inner = self.lock();
        if inner.closed {
            return Err(TurnError::Closed);
        }
        let mut seen = std::collections::HashSet::new();
        for tu in &tool_uses {
            if tu.id.is_empty() {
                return Err(TurnError::EmptyToolUseId);
            }
            if inner.tool_use_ids.contains_key(&tu.id)
                || inner.forgotten.call_set.contains(&tu.id)
                || !seen.insert(tu.id.as_str())
            {
                return Err(TurnError::DuplicateToolUse { id: tu.id.clone() });
            }
        }
        if let Some(id) = turn_id.as_deref().filter(|id| inner.forgotten.turn_set.contains(*id)) {
            return Err(TurnError::TurnEnded { turn_id: id.to_owned() });
        }
        let turn = match turn_id.as_deref().and_then(|id| inner.turn_ids.get(id).copied()) {
            Some(t) if inner.machine.turn_ended(t) => {
                return Err(TurnError::TurnEnded { turn_id: inner.turns[t].id.to_string() });
            }
            Some(t) => t,
            None => {
                let t = self.new_turn(&mut inner, turn_id);
                // One message's calls: the batch the PostToolBatch hooks see.
                if self.services.hooks.wants(agentd_protocol::hooks::HookEvent::PostToolBatch, "") {
                    inner.turns[t].batch = Some(Vec::new());
                }
                t
            }
        };
        let turn_id = inner.turns[turn].id.clone();
        for tu in tool_uses {
            let actions = self.enqueue(&mut inner, turn, tu, None);
            self.carry_out(&mut inner, actions);
        }
        if end {
            let actions = inner.machine.apply(Event::EndTurn(turn));
            self.carry_out(&mut inner, actions);
        }
        Ok(turn_id.to_string())
    }

    pub(super) fn new_turn(&self, inner: &mut Inner, id: Option<String>) -> TurnIdx {
        let id: Arc<str> = Arc::from(id.unwrap_or_else(|| self.fresh_id("turn")));
        let t = inner.machine.new_turn();
        inner.turns.push(TurnSlot { id: id.clone(), token: self.cancel.child_token(), failed: None, batch: None });
        inner.turn_ids.insert(id, t);
        t
    }

    /// Runs one call in a turn of its own and waits for its result
    /// (`tool/call`).
    ///
    /// # Cancellation safety
    /// Dropping the future leaves the call running; its result still goes
    /// to the event log.
    pub async fn call(
        &self,
        name: &str,
        input: serde_json::Value,
        tool_use_id: Option<String>,
    ) -> Result<ToolCallResult, TurnError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            if inner.closed {
                return Err(TurnError::Closed);
            }
            let id = match tool_use_id {
                Some(id) if id.is_empty() => return Err(TurnError::EmptyToolUseId),
                Some(id) if inner.tool_use_ids.contains_key(&id) || inner.forgotten.call_set.contains(&id) => {
                    return Err(TurnError::DuplicateToolUse { id });
                }
                Some(id) => id,
                None => self.fresh_id("call"),
            };
            let turn = self.new_turn(&mut inner, None);
            let tu = ToolUse { id, name: name.to_owned(), input };
            let mut actions = self.enqueue(&mut inner, turn, tu, Some(tx));
            actions.extend(inner.machine.apply(Event::EndTurn(turn)));
            self.carry_out(&mut inner, actions);
        }
        Ok(rx.await.unwrap_or_else(|_| ToolCallResult {
            name: name.to_owned(),
            content: vec![ContentBlock::text("the call was discarded before it finished")],
            is_error: true,
            render: "discarded".into(),
            render_use: name.to_owned(),
            sandbox: None,
            network: None,
            structured_content: None,
            content_meta: Vec::new(),
            changes: Vec::new(),
            changes_omitted: None,
        }))
    }

    /// Looks the tool up and parses the input; what depends on the state
    /// of the session when the call runs (a deferred tool being loaded,
    /// validation, permission) is decided when it starts.
    pub(super) fn enqueue(
        &self,
        inner: &mut Inner,
        turn: TurnIdx,
        tu: ToolUse,
        waiter: Option<oneshot::Sender<ToolCallResult>>,
    ) -> Vec<Action> {
        if let Some(batch) = inner.turns[turn].batch.as_mut().filter(|b| b.len() < 1_000) {
            batch.push(serde_json::json!({"tool_name": tu.name, "tool_input": tu.input, "tool_use_id": tu.id}));
        }
        let turn_slot = &inner.turns[turn];
        let token = turn_slot.token.child_token();
        let parsed = match self.tools().find(&tu.name) {
            None => Err((tu.name.clone(), tu.name.clone(), self.unknown_tool(&tu.name, &inner.context))),
            Some(tool) => match tool.prepare(tu.input.clone()) {
                Ok(call) => Ok((tool.name().to_owned(), call, tool.cancels_siblings_on_failure())),
                Err(e) => {
                    Err((tool.name().to_owned(), tool.name().to_owned(), CallOutcome::input_error(e.to_string())))
                }
            },
        };
        let idx = inner.machine.next_call();
        inner.tool_use_ids.insert(tu.id.clone(), idx);
        let (name, render_use, spec, refused, prepared) = match parsed {
            Ok((name, call, cancels_siblings)) => {
                let block = call.interrupt_behavior() == InterruptBehavior::Block;
                let spec = CallSpec { turn, safe: call.is_concurrency_safe(), cancels_siblings, block };
                (name, call.render_use(), Some(spec), None, Some(call))
            }
            Err((name, render_use, outcome)) => (name, render_use, None, Some(outcome), None),
        };
        self.events.push(EventKind::ToolQueued {
            turn_id: turn_slot.id.to_string(),
            tool_use_id: tu.id.clone(),
            name: name.clone(),
            render: render_use.clone(),
        });
        inner.slots.push(Slot {
            tool_use_id: tu.id,
            name,
            turn_id: turn_slot.id.clone(),
            prepared,
            outcome: refused,
            token: Some(token),
            live: Arc::new(AtomicBool::new(true)),
            waiter,
            render_use,
            input: Some(tu.input),
            sandbox: None,
            since: std::time::Instant::now(),
            network: None,
        });
        match spec {
            Some(spec) => inner.machine.apply(Event::Submit(spec)),
            None => inner.machine.apply(Event::SubmitRefused { turn }),
        }
    }
}
