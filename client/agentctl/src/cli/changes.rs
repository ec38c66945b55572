//! `agentctl diff` and `agentctl rewind`: what a turn changed, and undoing
//! it; and how one change reads on a line (also in `watch` and `run`).

use super::{Failure, print_json};
use agentd_client::Client;

/// `agentctl diff SESSION [TURN]`: the turn's changes and one diff.
pub(super) async fn diff(client: &Client, json: bool, session: &str, turn: Option<&str>) -> Result<(), Failure> {
    let params = agentd_client::protocol::changes::TurnDiffParams {
        session_id: session.to_owned(),
        turn_id: turn.map(str::to_owned),
    };
    let result = client.call::<agentd_client::protocol::methods::TurnDiff>(params).await?;
    if json {
        print_json(&result);
    } else {
        println!("turn {}: {}", result.turn_id, counted_changes(result.changes.len()));
        for change in &result.changes {
            println!("  {}", describe_change(change));
        }
        print!("{}", result.diff);
    }
    Ok(())
}

/// `agentctl rewind SESSION (--turn T | --call ID) [--dry-run] [--force]`.
pub(super) async fn rewind(
    client: &Client,
    json: bool,
    session: &str,
    turn: Option<&str>,
    call: Option<&str>,
    dry_run: bool,
    force: bool,
) -> Result<(), Failure> {
    let params = agentd_client::protocol::changes::TurnRewindParams {
        session_id: session.to_owned(),
        turn_id: turn.map(str::to_owned),
        tool_use_id: call.map(str::to_owned),
        dry_run,
        force,
    };
    let result = client.call::<agentd_client::protocol::methods::TurnRewind>(params).await?;
    if json {
        print_json(&result);
        return Ok(());
    }
    let verb = if dry_run { "would restore" } else { "restored" };
    println!("{verb}: {}", counted_changes(result.restored.len()));
    for change in &result.restored {
        println!("  undo {}", describe_change(change));
    }
    for c in &result.conflicts {
        println!("  conflict {}: {}", c.path, c.reason);
    }
    for n in &result.not_rewindable {
        println!("  not rewindable {}: {}", n.path, n.reason);
    }
    if !result.conflicts.is_empty() && !force {
        println!("(--force restores the conflicting files too)");
    }
    Ok(())
}

/// "1 change", "3 changes".
pub(super) fn counted_changes(n: usize) -> String {
    if n == 1 { "1 change".into() } else { format!("{n} changes") }
}

/// One change on a line: its kind, path and sizes.
pub(super) fn describe_change(change: &agentd_client::protocol::changes::FileChange) -> String {
    use agentd_client::protocol::changes::ChangeKind;
    let kind = match change.kind {
        ChangeKind::Created => "created",
        ChangeKind::Modified => "modified",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Renamed => "renamed",
        ChangeKind::Mode => "mode",
    };
    let from = change.from.as_ref().map(|f| format!(" (from {f})")).unwrap_or_default();
    let size = |n: Option<u64>| n.map_or("-".to_owned(), |n| n.to_string());
    format!("{kind:<8} {}{from} ({} -> {} bytes)", change.path, size(change.bytes_before), size(change.bytes_after))
}
