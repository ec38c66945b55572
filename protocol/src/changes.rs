//! What a call changed in the workspace (`changes` on results and
//! `tool/result` events), and the turn history built from it:
//! `turn/diff` and `turn/rewind`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind of one change to a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// The path did not exist before.
    Created,
    /// Its content changed.
    Modified,
    /// It exists no more.
    Deleted,
    /// It was moved here from `from`.
    Renamed,
    /// Only its mode (permission bits) changed.
    Mode,
}

/// One change a call made to a path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct FileChange {
    /// The path (absolute).
    pub path: String,
    /// What happened to it.
    pub kind: ChangeKind,
    /// For `renamed`: where it was before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Its size before, when it was a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_before: Option<u64>,
    /// Its size after, when it is a file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_after: Option<u64>,
}

/// Params of `turn/diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnDiffParams {
    /// The session.
    pub session_id: String,
    /// The turn; the latest turn the session's history keeps when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
}

/// Result of `turn/diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TurnDiffResult {
    /// The turn.
    pub turn_id: String,
    /// Every path the turn changed, once each, as it was before the turn
    /// against as it was after it, in the order first changed.
    pub changes: Vec<FileChange>,
    /// One unified diff of the text files (at most 64 KiB per file, cut
    /// with a note); a binary file, a file whose content is not kept, or
    /// one changed since by something else is a one-line note.
    pub diff: String,
}

/// Params of `turn/rewind`: name a turn or a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnRewindParams {
    /// The session.
    pub session_id: String,
    /// Restore the workspace to before this turn (its calls and every later
    /// turn's are undone, newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_id: Option<String>,
    /// Restore the workspace to before this call (it and every later call
    /// are undone, newest first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// Only report what would be restored; change nothing.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// Restore files changed since by something else too (their conflicts
    /// are overwritten).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub force: bool,
}

/// A path `turn/rewind` left alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RewindSkipped {
    /// The path (absolute).
    pub path: String,
    /// Why it was left alone.
    pub reason: String,
}

/// Result of `turn/rewind`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub struct TurnRewindResult {
    /// Each change undone (with `dry_run`: that would be), newest first:
    /// the change as it was made (`created` means the file was removed).
    pub restored: Vec<FileChange>,
    /// Paths changed since by something else, left alone (no `force`);
    /// they stay in the history.
    pub conflicts: Vec<RewindSkipped>,
    /// Changes whose earlier state was not kept (over a bound, outside
    /// the workspace), left as they are.
    pub not_rewindable: Vec<RewindSkipped>,
}
