//! `turn/cancel` and `turn/discard`, and the message a cancelled call
//! yields.

use super::*;

impl SessionExecutor {
    pub(super) fn cancel_message(&self, inner: &Inner, yielded: CallIdx, reason: &CancelReason) -> String {
        match reason {
            CancelReason::Client => "cancelled: the user interrupted this call".into(),
            CancelReason::SessionClosed => "cancelled: the session closed".into(),
            CancelReason::DaemonStopped => "interrupted: the daemon stopped".into(),
            CancelReason::SiblingFailed { call } => match inner.slots.get(*call) {
                Some(failed) => format!(
                    "cancelled: {} call {} in the same turn failed, so its sibling calls were cancelled",
                    failed.name, failed.tool_use_id
                ),
                None => match inner
                    .machine
                    .turn_of(yielded)
                    .and_then(|t| inner.turns.get(t))
                    .and_then(|t| t.failed.as_ref())
                {
                    Some((name, id)) => format!(
                        "cancelled: {name} call {id} in the same turn failed, so its sibling calls were cancelled"
                    ),
                    None => {
                        "cancelled: an earlier call in the same turn failed, so its sibling calls were cancelled".into()
                    }
                },
            },
        }
    }

    /// `turn/cancel`: one call, one turn, or everything. Returns the ids of
    /// the calls that were stopped or will not start.
    pub fn cancel(&self, turn_id: Option<&str>, tool_use_id: Option<&str>) -> Result<Vec<String>, TurnError> {
        let mut inner = self.lock();
        let forgotten = match (tool_use_id, turn_id) {
            (Some(id), _) => inner.forgotten.call_set.contains(id),
            (None, Some(t)) => inner.forgotten.turn_set.contains(t),
            (None, None) => false,
        };
        if forgotten {
            // Long over: nothing to cancel.
            return Ok(Vec::new());
        }
        let scope = match (tool_use_id, turn_id) {
            (Some(id), _) => {
                Scope::Call(*inner.tool_use_ids.get(id).ok_or_else(|| TurnError::UnknownToolUse { id: id.to_owned() })?)
            }
            (None, Some(t)) => {
                Scope::Turn(*inner.turn_ids.get(t).ok_or_else(|| TurnError::UnknownTurn { turn_id: t.to_owned() })?)
            }
            (None, None) => Scope::All,
        };
        // A call waiting for permission has not started: it is refused,
        // whatever its tool does on interrupt.
        let waiting = self.services.asks.cancel_where(|turn, call| match (tool_use_id, turn_id) {
            (Some(id), _) => call == id,
            (None, Some(t)) => turn == t,
            (None, None) => true,
        });
        let actions = inner.machine.apply(Event::Cancel { scope, reason: CancelReason::Client });
        let mut cancelled: Vec<String> = actions
            .iter()
            .filter_map(|a| match a {
                Action::Abort(i) | Action::Cancelled(i) => Some(inner.slots[*i].tool_use_id.clone()),
                _ => None,
            })
            .collect();
        for id in waiting {
            if !cancelled.contains(&id) {
                cancelled.push(id);
            }
        }
        self.carry_out(&mut inner, actions);
        Ok(cancelled)
    }

    /// `turn/discard`: drops the turn's queued, running and unyielded calls.
    pub fn discard(&self, turn_id: &str) -> Result<Vec<String>, TurnError> {
        let mut inner = self.lock();
        if inner.forgotten.turn_set.contains(turn_id) {
            return Ok(Vec::new());
        }
        let turn =
            *inner.turn_ids.get(turn_id).ok_or_else(|| TurnError::UnknownTurn { turn_id: turn_id.to_owned() })?;
        let actions = inner.machine.apply(Event::Discard(turn));
        let discarded = actions
            .iter()
            .filter_map(|a| match a {
                Action::Drop(i) => Some(inner.slots[*i].tool_use_id.clone()),
                _ => None,
            })
            .collect();
        self.carry_out(&mut inner, actions);
        Ok(discarded)
    }
}
