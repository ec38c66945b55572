//! Tests named after the invariants of `executor/mod.rs`, on the pure machine:
//! all but 8, which the driver carries out (`tests/e2e/turns.rs` checks it).

use super::*;

fn spec(turn: TurnIdx, safe: bool) -> CallSpec {
    CallSpec { turn, safe, cancels_siblings: false, block: false }
}

fn bash(turn: TurnIdx, safe: bool) -> CallSpec {
    CallSpec { cancels_siblings: true, ..spec(turn, safe) }
}

fn starts(actions: &[Action]) -> Vec<CallIdx> {
    actions.iter().filter_map(|a| if let Action::Start(i) = a { Some(*i) } else { None }).collect()
}

fn yields(actions: &[Action]) -> Vec<(CallIdx, Option<CancelReason>)> {
    actions.iter().filter_map(|a| if let Action::Yield(i, r) = a { Some((*i, r.clone())) } else { None }).collect()
}

fn aborts(actions: &[Action]) -> Vec<CallIdx> {
    actions.iter().filter_map(|a| if let Action::Abort(i) = a { Some(*i) } else { None }).collect()
}

/// Submits every call at once, then repeatedly finishes everything running;
/// returns the waves of calls that ran together.
fn waves(safety: &[bool], cap: usize) -> Vec<Vec<CallIdx>> {
    let mut m = Machine::new(cap, true);
    let t = m.new_turn();
    let mut running = Vec::new();
    for &safe in safety {
        running.extend(starts(&m.apply(Event::Submit(spec(t, safe)))));
    }
    let mut waves = Vec::new();
    while !running.is_empty() {
        waves.push(running.clone());
        let mut next = Vec::new();
        for call in std::mem::take(&mut running) {
            next.extend(starts(&m.apply(Event::Finished { call, failed: false })));
        }
        running = next;
    }
    waves
}

#[test]
fn invariant_1_each_call_moves_forward_through_its_states_once() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    m.apply(Event::Submit(spec(t, false)));
    m.apply(Event::Submit(spec(t, false)));
    assert_eq!((m.state(0), m.state(1)), (Some(CallState::Executing), Some(CallState::Queued)));
    let a = m.apply(Event::Finished { call: 0, failed: false });
    assert_eq!(yields(&a), [(0, None)]);
    assert_eq!(starts(&a), [1]);
    assert_eq!((m.state(0), m.state(1)), (Some(CallState::Yielded), Some(CallState::Executing)));
    // A second Finished for the same call changes nothing.
    assert!(m.apply(Event::Finished { call: 0, failed: false }).is_empty());
    assert_eq!(m.state(0), Some(CallState::Yielded));
}

#[test]
fn invariant_2_safe_calls_run_together_unsafe_alone_in_request_order_under_the_cap() {
    // Reference case 1: [Read a, Read b, Bash ls, Read c] → [a,b] [ls] [c].
    assert_eq!(waves(&[true, true, false, true], 10), vec![vec![0, 1], vec![2], vec![3]]);
    // Reference case 2: [Glob, Grep, Bash, Read, Edit, Glob] → [Glob,Grep] [Bash] [Read] [Edit] [Glob].
    assert_eq!(
        waves(&[true, true, false, true, false, true], 10),
        vec![vec![0, 1], vec![2], vec![3], vec![4], vec![5]]
    );
    // The waves are exactly the partition of the batch path.
    for safety in [vec![true, true, false, true], vec![true, true, false, true, false, true], vec![false, false, true]]
    {
        let batches: Vec<Vec<CallIdx>> =
            super::super::partition::partition(&safety).into_iter().map(|r| r.collect()).collect();
        assert_eq!(waves(&safety, 10), batches, "{safety:?}");
    }
    // The cap.
    assert_eq!(waves(&[true; 5], 2), vec![vec![0, 1], vec![2, 3], vec![4]]);
    // A later safe call never overtakes an earlier unsafe one.
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    m.apply(Event::Submit(spec(t, true)));
    m.apply(Event::Submit(spec(t, false)));
    let a = m.apply(Event::Submit(spec(t, true)));
    assert!(starts(&a).is_empty(), "call 2 waits behind the unsafe call 1");
    assert_eq!(m.state(2), Some(CallState::Queued));
}

#[test]
fn invariant_3_results_are_yielded_in_request_order() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    for _ in 0..3 {
        m.apply(Event::Submit(spec(t, true)));
    }
    assert!(yields(&m.apply(Event::Finished { call: 2, failed: false })).is_empty());
    assert!(yields(&m.apply(Event::Finished { call: 1, failed: true })).is_empty());
    let a = m.apply(Event::Finished { call: 0, failed: false });
    assert_eq!(yields(&a), [(0, None), (1, None), (2, None)]);
}

#[test]
fn invariant_3_a_turns_results_do_not_wait_for_another_turns() {
    let mut m = Machine::new(10, true);
    let (t, u) = (m.new_turn(), m.new_turn());
    for turn in [t, u, t, u] {
        m.apply(Event::Submit(spec(turn, true)));
    }
    // Call 0 (turn t) runs on; turn u's calls come back as they finish.
    assert!(yields(&m.apply(Event::Finished { call: 3, failed: false })).is_empty(), "3 waits for 1, its turn's");
    assert_eq!(yields(&m.apply(Event::Finished { call: 1, failed: false })), [(1, None), (3, None)]);
    m.apply(Event::EndTurn(u));
    assert!(yields(&m.apply(Event::Finished { call: 2, failed: false })).is_empty(), "2 waits for 0");
    let a = m.apply(Event::Finished { call: 0, failed: false });
    assert_eq!(yields(&a), [(0, None), (2, None)]);
    // Everything is out: the records can go.
    m.apply(Event::EndTurn(t));
    assert_eq!(m.compact().calls, 4);
}

#[test]
fn invariant_4_a_failing_bash_call_cancels_its_turns_queued_and_running_siblings() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    let other = m.new_turn();
    m.apply(Event::Submit(spec(t, true))); // 0 running
    m.apply(Event::Submit(bash(t, true))); // 1 running
    m.apply(Event::Submit(spec(other, true))); // 2 running, another turn
    m.apply(Event::Submit(spec(t, false))); // 3 queued
    let a = m.apply(Event::Finished { call: 1, failed: true });
    assert_eq!(aborts(&a), [0], "the running sibling of the same turn, not call 2");
    assert!(a.contains(&Action::Cancelled(3)));
    let a = m.apply(Event::Finished { call: 0, failed: true });
    let reason = Some(CancelReason::SiblingFailed { call: 1 });
    assert_eq!(yields(&a), [(0, reason.clone()), (1, None), (3, reason.clone())], "call 2's turn is another");
    // Later calls of that turn are cancelled at once; other turns go on.
    let a = m.apply(Event::Submit(spec(t, true)));
    assert!(starts(&a).is_empty());
    assert_eq!(yields(&a), [(4, reason)]);
    let a = m.apply(Event::Finished { call: 2, failed: false });
    assert_eq!(yields(&a), [(2, None)]);
}

#[test]
fn invariant_4_other_failures_and_sibling_cancel_never_cancel_nothing() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    m.apply(Event::Submit(spec(t, true)));
    m.apply(Event::Submit(spec(t, true)));
    let a = m.apply(Event::Finished { call: 1, failed: true });
    assert!(aborts(&a).is_empty(), "a failing Read cancels nothing");

    let mut m = Machine::new(10, false);
    let t = m.new_turn();
    m.apply(Event::Submit(spec(t, true)));
    m.apply(Event::Submit(bash(t, true)));
    let a = m.apply(Event::Finished { call: 1, failed: true });
    assert!(aborts(&a).is_empty(), "sibling_cancel: never");
}

#[test]
fn invariant_5_discard_drops_queued_running_and_unyielded_calls_of_the_turn() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    let other = m.new_turn();
    m.apply(Event::Submit(spec(other, true))); // 0 running, other turn
    m.apply(Event::Submit(CallSpec { block: true, ..spec(t, true) })); // 1 running, block tool
    m.apply(Event::Submit(spec(t, true))); // 2 running
    m.apply(Event::Finished { call: 2, failed: false }); // 2 completed, waits for 0 and 1
    m.apply(Event::Submit(spec(t, false))); // 3 queued
    let a = m.apply(Event::Discard(t));
    assert_eq!(aborts(&a), [1], "even a block tool is stopped");
    for i in [1, 2, 3] {
        assert!(a.contains(&Action::Drop(i)), "{i}: {a:?}");
    }
    assert!(a.contains(&Action::TurnDiscarded(t)));
    assert!(yields(&a).is_empty());
    let a = m.apply(Event::Finished { call: 1, failed: false });
    assert!(yields(&a).is_empty(), "nothing of a discarded turn is yielded");
    let a = m.apply(Event::Finished { call: 0, failed: false });
    assert_eq!(yields(&a), [(0, None)]);
    assert!(m.apply(Event::Discard(t)).is_empty(), "discarding twice does nothing");
}

#[test]
fn invariant_6_cancel_reaches_one_call_one_turn_or_everything_and_spares_completed_results() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    let u = m.new_turn();
    for turn in [t, t, u, u] {
        m.apply(Event::Submit(spec(turn, true)));
    }
    m.apply(Event::Finished { call: 0, failed: false });
    let a = m.apply(Event::Cancel { scope: Scope::Call(1), reason: CancelReason::Client });
    assert_eq!(aborts(&a), [1]);
    let a = m.apply(Event::Cancel { scope: Scope::Call(0), reason: CancelReason::Client });
    assert!(a.is_empty(), "a yielded call is not touched");
    let a = m.apply(Event::Cancel { scope: Scope::Turn(u), reason: CancelReason::Client });
    assert_eq!(aborts(&a), [2, 3]);

    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    let u = m.new_turn();
    m.apply(Event::Submit(spec(t, true)));
    m.apply(Event::Submit(spec(u, true)));
    m.apply(Event::Submit(spec(u, true)));
    m.apply(Event::Finished { call: 2, failed: false }); // completed, waits for call 1
    let a = m.apply(Event::Cancel { scope: Scope::All, reason: CancelReason::Client });
    assert_eq!(aborts(&a), [0, 1]);
    let a = m.apply(Event::Finished { call: 1, failed: true });
    assert_eq!(yields(&a), [(1, Some(CancelReason::Client)), (2, None)], "call 2 keeps its own result");
    let a = m.apply(Event::Finished { call: 0, failed: true });
    assert_eq!(yields(&a), [(0, Some(CancelReason::Client))]);
}

#[test]
fn invariant_7_block_tools_finish_on_interrupt_cancel_tools_stop() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    m.apply(Event::Submit(CallSpec { block: true, ..spec(t, true) }));
    m.apply(Event::Submit(spec(t, true)));
    let a = m.apply(Event::Cancel { scope: Scope::Turn(t), reason: CancelReason::Client });
    assert_eq!(aborts(&a), [1], "only the cancel tool");
    m.apply(Event::Finished { call: 1, failed: true });
    let a = m.apply(Event::Finished { call: 0, failed: false });
    assert_eq!(yields(&a), [(0, None), (1, Some(CancelReason::Client))]);
    // Closing the session stops block tools too.
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    m.apply(Event::Submit(CallSpec { block: true, ..spec(t, true) }));
    let a = m.apply(Event::Cancel { scope: Scope::All, reason: CancelReason::SessionClosed });
    assert_eq!(aborts(&a), [0]);
}

#[test]
fn invariant_9_a_turn_completes_once_after_it_ended_and_all_is_yielded() {
    let mut m = Machine::new(10, true);
    let t = m.new_turn();
    m.apply(Event::Submit(spec(t, true)));
    m.apply(Event::SubmitRefused { turn: t });
    let a = m.apply(Event::Finished { call: 0, failed: false });
    assert_eq!(yields(&a), [(0, None), (1, None)]);
    assert!(!a.contains(&Action::TurnCompleted(t)), "not ended yet");
    let a = m.apply(Event::EndTurn(t));
    assert_eq!(a, [Action::TurnCompleted(t)]);
    assert!(m.apply(Event::EndTurn(t)).is_empty());
    // An empty turn that ends completes at once.
    let u = m.new_turn();
    assert_eq!(m.apply(Event::EndTurn(u)), [Action::TurnCompleted(u)]);
}
