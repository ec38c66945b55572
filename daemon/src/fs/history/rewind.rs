//! `turn/diff` and `turn/rewind` over a session's [`History`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agentd_protocol::changes::{ChangeKind, FileChange, RewindSkipped, TurnDiffResult, TurnRewindResult};

use super::{Entry, History, HistoryError, Index, Kept, State};

/// The most a file's part of a turn's diff takes.
pub const MAX_FILE_DIFF_BYTES: usize = 64 * 1024;

/// What a rewind undoes: a turn and every later one, or a call and every
/// later one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Back to before this turn.
    Turn(String),
    /// Back to before this call.
    Call(String),
}

/// Where an entry is: (turn, entry) positions in the index.
type At = (usize, usize);

impl History {
    /// Every path turn `turn_id` (the latest kept when `None`) changed,
    /// before the turn against after it, and one unified diff.
    pub fn diff(&self, turn_id: Option<&str>) -> Result<TurnDiffResult, HistoryError> {
        let index = self.lock();
        let t = match turn_id {
            Some(id) => index.turns.iter().position(|t| t.turn_id == id).ok_or_else(|| unknown_turn(id))?,
            None => index
                .turns
                .len()
                .checked_sub(1)
                .ok_or_else(|| HistoryError::Unknown("this session's history holds no turn yet".into()))?,
        };
        let turn = &index.turns[t];
        let mut order: Vec<&Path> = Vec::new();
        for e in &turn.entries {
            if !order.contains(&e.path.as_path()) {
                order.push(&e.path);
            }
        }
        let (mut changes, mut diff) = (Vec::new(), String::new());
        for path in order {
            let mine: Vec<&Entry> = turn.entries.iter().filter(|e| e.path == path).collect();
            let (first, last) = (mine[0], mine[mine.len() - 1]);
            let Some(kind) = net_kind(first, last) else { continue };
            let change = FileChange {
                path: path.display().to_string(),
                kind,
                from: first.from.as_ref().map(|p| p.display().to_string()),
                bytes_before: first.change().bytes_before,
                bytes_after: last.after.size(),
            };
            let before = self.content(&first.before);
            let after = self.after_content(&index, t, last);
            diff.push_str(&file_diff(&first.root, path, &change, before, after));
            changes.push(change);
        }
        Ok(TurnDiffResult { turn_id: turn.turn_id.clone(), changes, diff })
    }

    /// The content an entry kept: `Some(empty)` for absent, `None` when not
    /// kept (or not a file).
    fn content(&self, kept: &Kept) -> Option<Vec<u8>> {
        match kept {
            Kept::Absent => Some(Vec::new()),
            Kept::File { blob, .. } => std::fs::read(self.blobs().join(blob)).ok(),
            _ => None,
        }
    }

    /// What `last` (of turn `t`) left at its path: the next turn's kept
    /// content, or the file now, when it is still what `last` left.
    fn after_content(&self, index: &Index, t: usize, last: &Entry) -> Option<Vec<u8>> {
        if last.after == State::Absent {
            return Some(Vec::new());
        }
        let later = index.turns[t + 1..].iter().flat_map(|t| &t.entries).find(|e| e.path == last.path);
        let (bytes, state) = match later {
            Some(e) => {
                let bytes = self.content(&e.before)?;
                let state = match &e.before {
                    Kept::File { size, hash, .. } => State::File { size: *size, hash: *hash },
                    _ => return None,
                };
                (bytes, state)
            }
            None => {
                let state = super::state_at(&last.path, self.bounds.file_bytes);
                (std::fs::read(&last.path).ok()?, state)
            }
        };
        (state == last.after).then_some(bytes)
    }

    /// Restores the workspace to before `target` (see the protocol's
    /// `turn/rewind`): the entries from there on are undone newest first;
    /// an entry whose path is no longer what it left is a conflict (left
    /// alone and kept, unless `force`); one whose earlier state was not
    /// kept is reported. Undone and unrewindable entries leave the history
    /// (not with `dry_run`, which changes nothing).
    pub fn rewind(&self, target: &Target, dry_run: bool, force: bool) -> Result<TurnRewindResult, HistoryError> {
        let mut index = self.lock();
        let start = start_of(&index, target)?;
        let mut chosen: Vec<At> = Vec::new();
        for (t, turn) in index.turns.iter().enumerate().skip(start.0) {
            let from = if t == start.0 { start.1 } else { 0 };
            chosen.extend((from..turn.entries.len()).map(|i| (t, i)));
        }
        let mut result = TurnRewindResult::default();
        for turn in index.turns.iter().skip(start.0).filter(|t| t.omitted > 0) {
            let root = turn.entries.first().map(|e| e.root.display().to_string()).unwrap_or_default();
            result.not_rewindable.push(RewindSkipped {
                path: root,
                reason: format!(
                    "turn {} made {} more changes than the history keeps ({} entries): those are not rewound",
                    turn.turn_id,
                    turn.omitted,
                    super::MAX_ENTRIES
                ),
            });
        }
        // What each path is once the undone entries so far are undone.
        let mut now: HashMap<PathBuf, State> = HashMap::new();
        let mut leaving: Vec<At> = Vec::new();
        for &(t, i) in chosen.iter().rev() {
            let entry = &index.turns[t].entries[i];
            let skipped = |reason: String| RewindSkipped { path: entry.path.display().to_string(), reason };
            if let Kept::Lost { reason, .. } = &entry.before {
                result.not_rewindable.push(skipped(reason.clone()));
                leaving.push((t, i));
                continue;
            }
            let current = *now.entry(entry.path.clone()).or_insert_with(|| self.state_now(entry));
            if current != entry.after && !force {
                result.conflicts.push(skipped(format!(
                    "changed since by something else: {} now, {} after the change",
                    describe(current),
                    describe(entry.after)
                )));
                continue;
            }
            if !dry_run && let Err(why) = self.undo(entry, current) {
                result.conflicts.push(skipped(format!("could not be restored: {why}")));
                continue;
            }
            now.insert(entry.path.clone(), before_state(&entry.before));
            result.restored.push(entry.change());
            leaving.push((t, i));
        }
        if !dry_run && !leaving.is_empty() {
            let mut gone = Vec::new();
            leaving.sort_unstable();
            for &(t, i) in leaving.iter().rev() {
                gone.push(index.turns[t].entries.remove(i));
            }
            index.turns.retain(|t| !t.entries.is_empty());
            let saved = self.save(&index);
            drop(index);
            self.forget(&gone);
            saved?;
        }
        Ok(result)
    }

    /// What the entry's path is now, beneath its root.
    fn state_now(&self, entry: &Entry) -> State {
        let Ok(rel) = entry.path.strip_prefix(&entry.root) else { return State::Other };
        let ws = crate::fs::WsPath { root: entry.root.clone(), rel: rel.to_owned() };
        match crate::fs::open_file(&ws) {
            Err(crate::fs::FsError::NotFound { .. }) => match std::fs::symlink_metadata(&entry.path) {
                Err(_) => State::Absent,
                Ok(m) if m.is_dir() => State::Directory,
                Ok(_) => State::Other,
            },
            Err(crate::fs::FsError::NotAFile { .. }) if entry.path.is_dir() => State::Directory,
            Err(_) => State::Other,
            Ok((_, meta)) if meta.len() > self.bounds.file_bytes => State::Large { size: meta.len() },
            Ok((mut file, meta)) => match super::copy_hashing(&mut file, &mut std::io::sink()) {
                Ok(hash) => State::File { size: meta.len(), hash },
                Err(_) => State::Other,
            },
        }
    }

    /// Puts back what the entry's path was before it (`current`: what it is).
    fn undo(&self, entry: &Entry, current: State) -> Result<(), String> {
        let rel = entry.path.strip_prefix(&entry.root).map_err(|_| "not inside its workspace".to_owned())?;
        // The path as recorded, never another a link now leads to (a
        // directory swapped for a link to `.git/hooks` since).
        let mut step = entry.root.clone();
        for c in rel.parent().unwrap_or(Path::new("")).components() {
            step.push(c);
            if std::fs::symlink_metadata(&step).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(format!("{} is a link now; the change is not restored through it", step.display()));
            }
        }
        let ws = crate::fs::WsPath { root: entry.root.clone(), rel: rel.to_owned() };
        let remove = |what| {
            if crate::fs::remove_no_links(&entry.path, what) {
                Ok(())
            } else {
                Err(format!("{} could not be removed", entry.path.display()))
            }
        };
        match (&entry.before, current) {
            (Kept::Absent, State::Absent) | (Kept::Directory, State::Directory) => Ok(()),
            (Kept::Absent, State::Directory) => remove(crate::fs::Removable::Empty),
            (Kept::Absent, _) => remove(crate::fs::Removable::NotADirectory),
            (Kept::Directory, _) => {
                if current != State::Absent {
                    remove(crate::fs::Removable::NotADirectory)?;
                }
                std::fs::create_dir(&entry.path).map_err(|e| format!("mkdir {}: {e}", entry.path.display()))
            }
            (Kept::File { blob, mode, .. }, _) => {
                let bytes = std::fs::read(self.blobs().join(blob)).map_err(|e| format!("its earlier content: {e}"))?;
                let elsewhere = |_: &Path, real: &Path| real != entry.path;
                crate::fs::write_atomic_guarded(&ws, &bytes, Some(&elsewhere), &self.records)
                    .map_err(|e| e.to_string())?;
                super::set_mode(&ws, *mode)
            }
            (Kept::Lost { reason, .. }, _) => Err(reason.clone()),
        }
    }
}

/// Where a rewind to `target` starts.
fn start_of(index: &Index, target: &Target) -> Result<At, HistoryError> {
    match target {
        Target::Turn(id) => {
            index.turns.iter().position(|t| &t.turn_id == id).map(|t| (t, 0)).ok_or_else(|| unknown_turn(id))
        }
        Target::Call(id) => index
            .turns
            .iter()
            .enumerate()
            .find_map(|(t, turn)| turn.entries.iter().position(|e| &e.tool_use_id == id).map(|i| (t, i)))
            .ok_or_else(|| {
                HistoryError::Unknown(format!(
                    "no change of call {id:?} is in this session's history (it changed no file, was rewound, or is older than the turns kept)"
                ))
            }),
    }
}

fn unknown_turn(id: &str) -> HistoryError {
    HistoryError::Unknown(format!(
        "turn {id:?} is not in this session's history (it changed no file, was rewound, or is older than the turns kept)"
    ))
}

/// What an entry's path was before it, as a state.
fn before_state(kept: &Kept) -> State {
    match kept {
        Kept::Absent => State::Absent,
        Kept::File { size, hash, .. } => State::File { size: *size, hash: *hash },
        Kept::Directory => State::Directory,
        Kept::Lost { .. } => State::Other,
    }
}

/// A state in words, for a conflict's reason.
fn describe(state: State) -> String {
    match state {
        State::Absent => "absent".into(),
        State::File { size, .. } => format!("a file of {size} bytes"),
        State::Large { size } => format!("a file of {size} bytes"),
        State::Directory => "a directory".into(),
        State::Other => "not a regular file".into(),
    }
}

/// The kind of a turn's changes to one path taken together (`first` and
/// `last` of them); `None` when they cancel out (created, then deleted).
fn net_kind(first: &Entry, last: &Entry) -> Option<ChangeKind> {
    let existed = !matches!(first.before, Kept::Absent);
    let exists = last.after != State::Absent;
    match (existed, exists) {
        (false, false) => None,
        (false, true) if first.kind == ChangeKind::Renamed => Some(ChangeKind::Renamed),
        (false, true) => Some(ChangeKind::Created),
        (true, false) => Some(ChangeKind::Deleted),
        (true, true) if first.kind == ChangeKind::Mode && last.kind == ChangeKind::Mode => Some(ChangeKind::Mode),
        (true, true) => Some(ChangeKind::Modified),
    }
}

/// One file's part of a turn's diff: a unified diff of text (cut at
/// [`MAX_FILE_DIFF_BYTES`]), or a one-line note.
pub fn file_diff(
    root: &Path,
    path: &Path,
    change: &FileChange,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
) -> String {
    let name = path.strip_prefix(root).unwrap_or(path).display().to_string();
    let sizes = format!(
        "{} -> {}",
        change.bytes_before.map_or("absent".to_owned(), |n| format!("{n} bytes")),
        change.bytes_after.map_or("absent".to_owned(), |n| format!("{n} bytes"))
    );
    let (Some(before), Some(after)) = (before, after) else {
        return format!("# {name}: {sizes} (its content on one side is not kept, or changed since)\n");
    };
    let text = |b: &[u8]| std::str::from_utf8(b).ok().filter(|s| !s.contains('\0')).map(str::to_owned);
    let (Some(old), Some(new)) = (text(&before), text(&after)) else {
        return format!("Binary file {name}: {sizes}\n");
    };
    let old_name = if change.kind == ChangeKind::Created { "/dev/null".to_owned() } else { format!("a/{name}") };
    let new_name = if change.kind == ChangeKind::Deleted { "/dev/null".to_owned() } else { format!("b/{name}") };
    let mut out = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &new_name)
        .missing_newline_hint(true)
        .to_string();
    if out.is_empty() {
        return format!("# {name}: {sizes} (same content)\n");
    }
    if out.len() > MAX_FILE_DIFF_BYTES {
        let mut cut = MAX_FILE_DIFF_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!("# {name}: the diff is cut at {MAX_FILE_DIFF_BYTES} bytes\n"));
    }
    out
}
