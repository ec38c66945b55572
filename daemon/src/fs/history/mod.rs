//! A session's change history: the earlier state of every path a call
//! changed in the workspace, kept so a turn (or a call) can be shown as a
//! diff (`turn/diff`) and rewound (`turn/rewind`, in `rewind.rs`).
//!
//! **Layout** (`<state-dir>/sessions/<session id>/history/`, which goes
//! with the session and is hidden from every tool like the rest of the
//! state directory): `index.json`, the entries of each turn in the order
//! they were recorded (replaced atomically after every change: temp file,
//! `fsync`, rename, `fsync` of the directory), and `blobs/<n>`, one file per
//! earlier content. Blobs the index does not name (a daemon that died
//! between the two) are removed when the history is opened again, so it
//! survives a restart.
//!
//! **Entries.** Each records, for one path and one call (turn id,
//! `tool_use` id): the change's kind, what the path was before
//! ([`Kept`]: absent, a file whose content is a blob, a directory, or not
//! kept with a reason), and what the change left ([`State`]: absent, a
//! file's size and content hash, a directory). The after state is how a
//! rewind tells that something else changed the file since (a conflict).
//!
//! **Bounds** ([`Bounds`], defaults [`MAX_TURNS`], [`MAX_TOTAL_BYTES`],
//! [`MAX_FILE_BYTES`]): 20 turns per session (a new turn drops the oldest
//! whole), 512 MiB of earlier contents per session (older turns are
//! dropped whole to make room; a change the current turn alone cannot fit
//! is recorded as not rewindable), 64 MiB per file (a larger file is
//! recorded as not rewindable; a rewind reports it and leaves it).
//!
//! **Who records.** The file tools, through [`CallRecorder`] (a service the
//! executor gives calls of the kinds that change files, with the call's
//! ids): `ToolContext::write_file` calls [`CallRecorder::capture`] before
//! its atomic write and [`Capture::commit`] after it. A file tool's copy
//! of the earlier content is a copy: its write refuses a file with
//! several hard links, so the old inode cannot be linked before the
//! rename, and its files are bounded (`MAX_EDIT_BYTES`) anyway. Bash,
//! once it applies a command's changes itself, calls
//! [`History::record`] per path with [`Before::Content`] naming a file
//! that holds the earlier content (the old inode it moved aside): it is
//! hard-linked into the history when on the same file system, else
//! copied.

mod rewind;

use std::collections::HashSet;
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentd_protocol::changes::{ChangeKind, FileChange};
use serde::{Deserialize, Serialize};

use crate::sync::MutexExt;

pub use rewind::{Target, file_diff};

/// Turns kept per session; a new one drops the oldest whole.
pub const MAX_TURNS: usize = 20;
/// Bytes of earlier contents kept per session.
pub const MAX_TOTAL_BYTES: u64 = 512 * 1024 * 1024;
/// The largest file whose earlier content is kept.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// Changes kept, all turns together (a command that makes a million files
/// must not make the history's index a million entries long).
pub const MAX_ENTRIES: usize = 100_000;

/// The bounds of one session's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// Turns kept.
    pub turns: usize,
    /// Bytes of earlier contents kept, all turns together.
    pub total_bytes: u64,
    /// The largest file whose earlier content is kept.
    pub file_bytes: u64,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds { turns: MAX_TURNS, total_bytes: MAX_TOTAL_BYTES, file_bytes: MAX_FILE_BYTES }
    }
}

/// What a path was before a change, as a recorder hands it to
/// [`History::record`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Before {
    /// It did not exist.
    Absent,
    /// A regular file, whose earlier content (and mode) is the file at this
    /// path (outside the workspace, which the caller no longer changes):
    /// hard-linked into the history when on the same file system, copied
    /// otherwise.
    Content(PathBuf),
    /// A directory.
    Directory,
    /// Its earlier state could not be kept: why.
    NotRewindable(String),
}

/// What a path was before a change, as the history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "is", rename_all = "snake_case")]
pub enum Kept {
    /// It did not exist.
    Absent,
    /// A regular file, its content in `blobs/<blob>`.
    File {
        /// The blob's name.
        blob: String,
        /// Its size.
        size: u64,
        /// Its hash ([`crate::fs::hash_bytes`]).
        hash: u64,
        /// Its mode (permission bits).
        mode: u32,
    },
    /// A directory.
    Directory,
    /// Not kept.
    Lost {
        /// Why.
        reason: String,
        /// Its size, when it was a file.
        size: Option<u64>,
    },
}

/// What a path is, as far as a rewind compares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "is", rename_all = "snake_case")]
pub enum State {
    /// Nothing there.
    Absent,
    /// A regular file of this size and content hash.
    File {
        /// Its size.
        size: u64,
        /// Its hash ([`crate::fs::hash_bytes`]).
        hash: u64,
    },
    /// A regular file too large to hash: its size.
    Large {
        /// Its size.
        size: u64,
    },
    /// A directory.
    Directory,
    /// Anything else (a link, a FIFO, …).
    Other,
}

impl State {
    fn size(&self) -> Option<u64> {
        match self {
            State::File { size, .. } | State::Large { size } => Some(*size),
            _ => None,
        }
    }
}

/// One change of one call to one path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The call.
    pub tool_use_id: String,
    /// The workspace directory the path is in.
    pub root: PathBuf,
    /// The path (absolute).
    pub path: PathBuf,
    /// What happened to it.
    pub kind: ChangeKind,
    /// For a rename: where it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<PathBuf>,
    /// What it was before.
    pub before: Kept,
    /// What the change left.
    pub after: State,
}

impl Entry {
    /// The change as the wire carries it.
    pub fn change(&self) -> FileChange {
        let bytes_before = match &self.before {
            Kept::File { size, .. } => Some(*size),
            Kept::Lost { size, .. } => *size,
            _ => None,
        };
        FileChange {
            path: self.path.display().to_string(),
            kind: self.kind,
            from: self.from.as_ref().map(|p| p.display().to_string()),
            bytes_before,
            bytes_after: self.after.size(),
        }
    }
}

/// One turn's entries, in the order they were recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Turn {
    turn_id: String,
    entries: Vec<Entry>,
    /// Changes of the turn not kept: past the session's bound on entries.
    #[serde(default, skip_serializing_if = "is_zero")]
    omitted: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What `index.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Index {
    version: u32,
    /// The next blob's number.
    next_blob: u64,
    /// Oldest first.
    turns: Vec<Turn>,
}

const INDEX_VERSION: u32 = 1;

/// A failure of the history itself (not of one path's rewind).
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// No turn (or call) by that id is kept.
    #[error("{0}")]
    Unknown(String),
    /// Reading or writing the history failed.
    #[error("the change history: {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> HistoryError + 'a {
    move |source| HistoryError::Io { op, path: path.display().to_string(), source }
}

/// One session's change history (see the module's documentation). Shared
/// by the session's calls, which record, and its `turn/diff` and
/// `turn/rewind`.
pub struct History {
    dir: PathBuf,
    bounds: Bounds,
    /// Where rewinds record their temporary files.
    records: crate::fs::pending::Records,
    index: Mutex<Index>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History").field("dir", &self.dir).field("bounds", &self.bounds).finish()
    }
}

impl History {
    /// The history kept in `dir` (read back when it exists: a restored
    /// session's; an index that cannot be read is reported and started
    /// afresh). Nothing is created until the first change is recorded.
    pub fn open(dir: PathBuf, bounds: Bounds, records: crate::fs::pending::Records) -> History {
        let index = match std::fs::read(dir.join("index.json")) {
            Ok(bytes) => match serde_json::from_slice::<Index>(&bytes) {
                Ok(index) if index.version == INDEX_VERSION => index,
                Ok(_) | Err(_) => {
                    tracing::warn!("{} cannot be read; the session's earlier changes cannot be rewound", dir.display());
                    Index::default()
                }
            },
            Err(_) => Index::default(),
        };
        let history = History { dir, bounds, records, index: Mutex::new(index) };
        history.sweep();
        history
    }

    /// The bounds it keeps to.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Index> {
        self.index.locked()
    }

    fn blobs(&self) -> PathBuf {
        self.dir.join("blobs")
    }

    /// Removes blobs the index does not name.
    fn sweep(&self) {
        let index = self.lock();
        let named: HashSet<&str> = index
            .turns
            .iter()
            .flat_map(|t| &t.entries)
            .filter_map(|e| match &e.before {
                Kept::File { blob, .. } => Some(blob.as_str()),
                _ => None,
            })
            .collect();
        for entry in std::fs::read_dir(self.blobs()).into_iter().flatten().flatten() {
            if !entry.file_name().to_str().is_some_and(|n| named.contains(n)) {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }

    /// A fresh blob's name and path (the directory made when missing).
    fn new_blob(&self) -> Result<(String, PathBuf), HistoryError> {
        let blobs = self.blobs();
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&blobs).map_err(io("create", &blobs))?;
        let name = {
            let mut index = self.lock();
            index.next_blob += 1;
            index.next_blob.to_string()
        };
        let path = blobs.join(&name);
        Ok((name, path))
    }

    /// Keeps a copy of `from`'s content (open, of `size` bytes) as a new
    /// blob; its hash is computed on the way.
    fn copy_blob(&self, from: &mut std::fs::File, size: u64, mode: u32) -> Result<Kept, HistoryError> {
        let (blob, path) = self.new_blob()?;
        let kept = (|| {
            let mut out = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path)?;
            let hash = copy_hashing(from, &mut out)?;
            out.sync_all()?;
            Ok(Kept::File { blob: blob.clone(), size, hash, mode })
        })();
        kept.map_err(|e| {
            let _ = std::fs::remove_file(&path);
            io("keep a copy in", &path)(e)
        })
    }

    /// Keeps the file at `from` as a new blob: a hard link when it is on
    /// the history's file system, else a copy.
    fn link_blob(&self, from: &Path) -> Result<Kept, HistoryError> {
        let mut file = std::fs::File::open(from).map_err(io("open", from))?;
        let meta = file.metadata().map_err(io("stat", from))?;
        if !meta.is_file() {
            return Ok(Kept::Lost { reason: format!("{} is not a regular file", from.display()), size: None });
        }
        if meta.len() > self.bounds.file_bytes {
            return Ok(self.too_large(meta.len()));
        }
        let mode = meta.mode() & 0o7777;
        let (blob, path) = self.new_blob()?;
        if std::fs::hard_link(from, &path).is_ok() {
            let hash = copy_hashing(&mut file, &mut std::io::sink()).map_err(io("read", from))?;
            return Ok(Kept::File { blob, size: meta.len(), hash, mode });
        }
        self.copy_blob(&mut file, meta.len(), mode)
    }

    fn too_large(&self, size: u64) -> Kept {
        Kept::Lost {
            reason: format!(
                "{size} bytes, over the {} bytes a file's earlier content is kept for",
                self.bounds.file_bytes
            ),
            size: Some(size),
        }
    }

    /// Records a change a call made (or is about to make: see
    /// [`CallRecorder::capture`] for the file tools' two steps):
    /// `before` is what the path was, and the history reads what it is
    /// now as the change's after state (so call it once the change is in
    /// place). Returns the change as results carry it.
    ///
    /// This is the API for the Bash tool once it applies a command's
    /// changes: per changed path, `record(turn_id, tool_use_id, Change {
    /// root, path, kind, from }, before)`, with [`Before::Content`] naming
    /// a file that holds the earlier content (hard-linked when on the
    /// state directory's file system, else copied; a file over the
    /// per-file bound is recorded as not rewindable). A rename is two
    /// records: the source `deleted` (its content as before) and the
    /// destination `renamed` with `from`. Results of the call then carry
    /// the changes (`changes_of`).
    pub fn record(
        &self,
        turn_id: &str,
        tool_use_id: &str,
        change: Change<'_>,
        before: Before,
    ) -> Result<FileChange, HistoryError> {
        let kept = self.keep(before)?;
        self.push(turn_id, self.entry(tool_use_id, change, kept))
    }

    /// What the history keeps of `before` (an earlier content linked or
    /// copied into it).
    fn keep(&self, before: Before) -> Result<Kept, HistoryError> {
        Ok(match before {
            Before::Absent => Kept::Absent,
            Before::Directory => Kept::Directory,
            Before::NotRewindable(reason) => Kept::Lost { reason, size: None },
            Before::Content(from) => self.link_blob(&from)?,
        })
    }

    /// The entry of `change` (its path's state now is what it left).
    fn entry(&self, tool_use_id: &str, change: Change<'_>, before: Kept) -> Entry {
        Entry {
            tool_use_id: tool_use_id.to_owned(),
            root: change.root.to_owned(),
            path: change.path.to_owned(),
            kind: change.kind,
            from: change.from.map(Path::to_owned),
            before,
            after: state_at(change.path, self.bounds.file_bytes),
        }
    }

    /// Makes `turn_id` the newest turn if it is not there yet; returns the
    /// turns that left for it (beyond the bound on turns).
    fn open_turn(&self, index: &mut Index, turn_id: &str) -> Vec<Turn> {
        let mut dropped = Vec::new();
        if !index.turns.iter().any(|t| t.turn_id == turn_id) {
            while index.turns.len() >= self.bounds.turns.max(1) {
                dropped.push(index.turns.remove(0));
            }
            index.turns.push(Turn { turn_id: turn_id.to_owned(), entries: Vec::new(), omitted: 0 });
        }
        dropped
    }

    /// Records many changes of one call at once (what a command's layer
    /// applied), as [`History::record`] does each, saving the index once.
    /// Past [`MAX_ENTRIES`] older turns go whole; what still does not fit
    /// is counted as omitted, and a rewind of the turn says so.
    pub fn record_all(&self, turn_id: &str, tool_use_id: &str, items: Vec<(Change<'_>, Before)>) -> Vec<FileChange> {
        let entries: Vec<Entry> = items
            .into_iter()
            .map(|(change, before)| {
                let kept = self.keep(before).unwrap_or_else(|e| Kept::Lost {
                    reason: format!("its earlier content could not be kept: {e}"),
                    size: None,
                });
                self.entry(tool_use_id, change, kept)
            })
            .collect();
        let mut index = self.lock();
        let mut dropped = self.open_turn(&mut index, turn_id);
        let mut bytes = kept_bytes(&index);
        let mut count: usize = index.turns.iter().map(|t| t.entries.len()).sum();
        let mut changes = Vec::with_capacity(entries.len());
        let mut omitted = 0u64;
        for mut entry in entries {
            let size = match &entry.before {
                Kept::File { size, .. } => *size,
                _ => 0,
            };
            // Room: older turns go whole.
            while (bytes + size > self.bounds.total_bytes || count >= MAX_ENTRIES) && index.turns.len() > 1 {
                let oldest = if index.turns[0].turn_id == turn_id { 1 } else { 0 };
                let turn = index.turns.remove(oldest);
                bytes -= turn
                    .entries
                    .iter()
                    .map(|e| match &e.before {
                        Kept::File { size, .. } => *size,
                        _ => 0,
                    })
                    .sum::<u64>();
                count -= turn.entries.len();
                dropped.push(turn);
            }
            if count >= MAX_ENTRIES {
                if let Kept::File { blob, .. } = &entry.before {
                    let _ = std::fs::remove_file(self.blobs().join(blob));
                }
                omitted += 1;
                continue;
            }
            if bytes + size > self.bounds.total_bytes {
                if let Kept::File { blob, .. } = &entry.before {
                    let _ = std::fs::remove_file(self.blobs().join(blob));
                }
                entry.before = Kept::Lost {
                    reason: format!("the session's history is full ({} bytes)", self.bounds.total_bytes),
                    size: Some(size),
                };
            } else {
                bytes += size;
            }
            count += 1;
            changes.push(entry.change());
            if let Some(turn) = index.turns.iter_mut().find(|t| t.turn_id == turn_id) {
                turn.entries.push(entry);
            }
        }
        if let Some(turn) = index.turns.iter_mut().find(|t| t.turn_id == turn_id) {
            turn.omitted += omitted;
        }
        if let Err(e) = self.save(&index) {
            tracing::warn!("the session's history could not be saved: {e}");
        }
        drop(index);
        for turn in dropped {
            self.forget(&turn.entries);
        }
        changes
    }

    /// Adds `entry` to `turn_id`'s (a new turn drops the oldest beyond the
    /// bound), makes room for its blob, and saves the index.
    fn push(&self, turn_id: &str, mut entry: Entry) -> Result<FileChange, HistoryError> {
        let mut index = self.lock();
        let mut dropped = self.open_turn(&mut index, turn_id);
        let size = match &entry.before {
            Kept::File { size, .. } => *size,
            _ => 0,
        };
        // Room for the new content: older turns go whole.
        while kept_bytes(&index) + size > self.bounds.total_bytes && index.turns.len() > 1 {
            let oldest = if index.turns[0].turn_id == turn_id { 1 } else { 0 };
            dropped.push(index.turns.remove(oldest));
        }
        if kept_bytes(&index) + size > self.bounds.total_bytes {
            if let Kept::File { blob, .. } = &entry.before {
                let _ = std::fs::remove_file(self.blobs().join(blob));
            }
            entry.before = Kept::Lost {
                reason: format!("the session's history is full ({} bytes)", self.bounds.total_bytes),
                size: Some(size),
            };
        }
        let change = entry.change();
        if let Some(turn) = index.turns.iter_mut().find(|t| t.turn_id == turn_id) {
            turn.entries.push(entry);
        }
        let saved = self.save(&index);
        drop(index);
        for turn in dropped {
            self.forget(&turn.entries);
        }
        saved.map(|()| change)
    }

    /// Removes the blobs of entries that left the history.
    fn forget(&self, entries: &[Entry]) {
        for e in entries {
            if let Kept::File { blob, .. } = &e.before {
                let _ = std::fs::remove_file(self.blobs().join(blob));
            }
        }
    }

    /// Writes the index atomically.
    fn save(&self, index: &Index) -> Result<(), HistoryError> {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&self.dir).map_err(io("create", &self.dir))?;
        let path = self.dir.join("index.json");
        let tmp = self.dir.join("index.json.tmp");
        let body = serde_json::to_vec(&Index { version: INDEX_VERSION, ..index.clone() })
            .map_err(|e| io("encode", &path)(std::io::Error::other(e)))?;
        (|| {
            let mut file = std::fs::File::create(&tmp)?;
            file.write_all(&body)?;
            file.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            std::fs::File::open(&self.dir)?.sync_all()
        })()
        .map_err(io("write", &path))
    }

    /// The changes the call `tool_use_id` of `turn_id` made, in order.
    pub fn changes_of(&self, turn_id: &str, tool_use_id: &str) -> Vec<FileChange> {
        let index = self.lock();
        let Some(turn) = index.turns.iter().find(|t| t.turn_id == turn_id) else { return Vec::new() };
        turn.entries.iter().filter(|e| e.tool_use_id == tool_use_id).map(Entry::change).collect()
    }

    /// The turns kept, oldest first.
    pub fn turn_ids(&self) -> Vec<String> {
        self.lock().turns.iter().map(|t| t.turn_id.clone()).collect()
    }
}

/// Bytes of earlier contents the index keeps.
fn kept_bytes(index: &Index) -> u64 {
    index
        .turns
        .iter()
        .flat_map(|t| &t.entries)
        .map(|e| match &e.before {
            Kept::File { size, .. } => *size,
            _ => 0,
        })
        .sum()
}

/// Copies `from` to `to`, returning the hash of what passed
/// ([`crate::fs::hash_bytes`] of the whole).
fn copy_hashing(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<u64> {
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.write(&buf[..n]);
        to.write_all(&buf[..n])?;
    }
    Ok(h.finish())
}

/// What is at `path` now (not following a last link), a file hashed when
/// not over `max` bytes.
pub fn state_at(path: &Path, max: u64) -> State {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return State::Absent };
    if meta.is_dir() {
        return State::Directory;
    }
    if !meta.is_file() {
        return State::Other;
    }
    if meta.len() > max {
        return State::Large { size: meta.len() };
    }
    match std::fs::File::open(path).and_then(|mut f| copy_hashing(&mut f, &mut std::io::sink())) {
        Ok(hash) => State::File { size: meta.len(), hash },
        Err(_) => State::Other,
    }
}

/// Which path a change is about: for [`History::record`].
#[derive(Debug, Clone, Copy)]
pub struct Change<'a> {
    /// The workspace directory it is in (a rewind works beneath it).
    pub root: &'a Path,
    /// The path (absolute).
    pub path: &'a Path,
    /// What happened to it.
    pub kind: ChangeKind,
    /// For a rename: where it was.
    pub from: Option<&'a Path>,
}

/// A call's line to its session's history: the history and the call's ids.
/// The executor provides it to calls of the kinds that change files
/// (`ctx.services.get::<CallRecorder>()`).
#[derive(Debug, Clone)]
pub struct CallRecorder {
    /// The session's history.
    pub history: Arc<History>,
    /// The call's turn.
    pub turn_id: Arc<str>,
    /// The call's `tool_use` id.
    pub tool_use_id: String,
}

/// The earlier state of a file a file tool is about to write, kept until
/// the write is done ([`Capture::commit`]) or dropped (the write failed:
/// its copy is removed).
pub struct Capture {
    recorder: CallRecorder,
    root: PathBuf,
    path: PathBuf,
    before: Option<Kept>,
}

impl CallRecorder {
    /// Keeps what the file at `path` is now, before a file tool replaces
    /// or creates it. `inside`: whether it is inside the workspace (what
    /// is outside is recorded, as not rewindable). Never fails: what
    /// cannot be kept is recorded as not rewindable, with why.
    pub fn capture(&self, path: &crate::fs::WsPath, inside: bool) -> Capture {
        let history = &self.history;
        let before = if !inside {
            Kept::Lost { reason: "outside the workspace".into(), size: None }
        } else {
            match crate::fs::open_file(path) {
                Err(crate::fs::FsError::NotFound { .. }) => Kept::Absent,
                Err(e) => Kept::Lost { reason: format!("its earlier state could not be read: {e}"), size: None },
                Ok((_, meta)) if meta.len() > history.bounds.file_bytes => history.too_large(meta.len()),
                Ok((mut file, meta)) => history
                    .copy_blob(&mut file, meta.len(), meta.mode() & 0o7777)
                    .unwrap_or_else(|e| Kept::Lost { reason: e.to_string(), size: Some(meta.len()) }),
            }
        };
        Capture { recorder: self.clone(), root: path.root.clone(), path: path.abs(), before: Some(before) }
    }
}

impl Capture {
    /// Records the change once the write is done: `after` is the file's
    /// state the write reported. The change, as results carry it.
    pub fn commit(mut self, after: &crate::fs::FileState) -> Option<FileChange> {
        let before = self.before.take()?;
        let kind = if before == Kept::Absent { ChangeKind::Created } else { ChangeKind::Modified };
        let after = match after.hash {
            Some(hash) => State::File { size: after.size, hash },
            None => State::Large { size: after.size },
        };
        let entry = Entry {
            tool_use_id: self.recorder.tool_use_id.clone(),
            root: self.root.clone(),
            path: self.path.clone(),
            kind,
            from: None,
            before,
            after,
        };
        match self.recorder.history.push(&self.recorder.turn_id, entry) {
            Ok(change) => Some(change),
            Err(e) => {
                tracing::warn!("{e}");
                None
            }
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(Kept::File { blob, .. }) = self.before.take() {
            let _ = std::fs::remove_file(self.recorder.history.blobs().join(blob));
        }
    }
}

/// Sets the mode of the file at `path` (beneath its root).
fn set_mode(path: &crate::fs::WsPath, mode: u32) -> Result<(), String> {
    let (file, _) = crate::fs::open_file(path).map_err(|e| e.to_string())?;
    file.set_permissions(std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.abs().display()))
}

#[cfg(test)]
mod tests;
