//! The store on disk, under `<state-dir>/store/<session id>/` (apart from
//! the tools' files in `<state-dir>/sessions/<session id>/output`, which a
//! session's own commands may read; the store is hidden from all commands):
//!
//! - `session.json`: the [`SessionRecord`], replaced atomically (temp file,
//!   fsync, rename, fsync of the directory);
//! - `events.log`: the session's events, appended one line each as
//!   `<crc32 in hex> <event as JSON>`. A line whose checksum does not match
//!   (a torn last write) ends the log: it and what follows are cut off when
//!   the session is loaded;
//!
//! An event is written (`write(2)`, no sync) before any client is sent it,
//! so it survives the daemon dying; journals are synced to disk in groups
//! (every flush of the session manager, 200 ms), so a crash of the machine
//! loses at most that much.
//!
//! A session whose record cannot be read is moved aside
//! (`<id>.corrupt-<unix time>`), reported with its path, and skipped.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use agentd_protocol::turn::Event;

use super::{Journal, RECORD_VERSION, SessionRecord, Store, StoreError, Stored};

use crate::sync::MutexExt;

/// Limits of what the store keeps.
#[derive(Debug, Clone, Copy)]
pub struct StoreLimits {
    /// Sessions kept; at start the least recently used beyond this go.
    pub max_sessions: usize,
    /// Bytes of one session's event log before it is rewritten with only
    /// the events replay keeps.
    pub max_log_bytes: u64,
    /// Sessions untouched for this long are removed at start.
    pub max_idle: Duration,
    /// Events of a session loaded at start (replay keeps no more).
    pub max_events: usize,
}

impl Default for StoreLimits {
    fn default() -> Self {
        StoreLimits {
            max_sessions: 1000,
            max_log_bytes: 64 * 1024 * 1024,
            max_idle: Duration::from_secs(30 * 24 * 3600),
            max_events: super::DEFAULT_LOG_CAPACITY,
        }
    }
}

/// Sessions in `<state-dir>/store`.
pub struct DiskStore {
    root: PathBuf,
    limits: StoreLimits,
    journals: Mutex<HashMap<String, Arc<FileJournal>>>,
    /// The store's size, and when it was measured.
    size_cache: Mutex<Option<(std::time::Instant, u64)>>,
}

/// One session's `events.log`, open for appending.
pub struct FileJournal {
    path: PathBuf,
    file: Mutex<Option<File>>,
    /// Written since the last sync.
    dirty: AtomicBool,
    /// The file's size.
    bytes: AtomicU64,
    /// The last durable line, written again when the log is compacted.
    durable: Mutex<Vec<u8>>,
}

impl Journal for FileJournal {
    fn remember_durable(&self, line: &[u8]) {
        *self.durable.locked() = line.to_vec();
    }

    fn append_lines(&self, line: &[u8]) {
        if line.is_empty() {
            return;
        }
        let mut file = self.file.locked();
        if file.is_none() {
            *file = open_append(&self.path).inspect_err(|e| warn_once(&self.path, e)).ok();
        }
        let Some(f) = file.as_mut() else { return };
        match f.write_all(line) {
            Ok(()) => {
                self.bytes.fetch_add(line.len() as u64, Ordering::Relaxed);
                self.dirty.store(true, Ordering::Release);
            }
            Err(e) => {
                warn_once(&self.path, &e);
                // Reopened on the next event: a failed write may have left
                // a partial line, which the next start cuts off.
                *file = None;
            }
        }
    }
}

impl FileJournal {
    fn sync(&self) {
        if self.dirty.swap(false, Ordering::AcqRel) {
            let file = self.file.locked();
            if let Some(f) = file.as_ref() {
                let _ = f.sync_data();
            }
        }
    }
}

fn warn_once(path: &Path, e: &std::io::Error) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!("cannot write the event log {}: {e} (events are kept in memory only)", path.display());
    }
}

fn open_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().append(true).create(true).mode(0o600).open(path)
}

impl DiskStore {
    /// The store under `state_dir` (created 0700 when missing).
    pub fn open(state_dir: &Path, limits: StoreLimits) -> std::io::Result<DiskStore> {
        let root = state_dir.join("store");
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&root)?;
        Ok(DiskStore { root, limits, journals: Mutex::new(HashMap::new()), size_cache: Mutex::new(None) })
    }

    fn dir(&self, session_id: &str) -> PathBuf {
        self.root.join(session_id)
    }

    fn journals(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<FileJournal>>> {
        self.journals.locked()
    }

    /// Moves a session that cannot be read out of the way.
    fn set_aside(&self, dir: &Path, why: &str) {
        let stamp = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let aside = self.root.join(format!("{name}.corrupt-{stamp}"));
        tracing::error!("session store {} cannot be read ({why}); moved to {}", dir.display(), aside.display());
        let _ = std::fs::rename(dir, &aside);
    }

    fn load_one(&self, dir: &Path) -> Result<Stored, String> {
        let text = std::fs::read_to_string(dir.join("session.json")).map_err(|e| format!("session.json: {e}"))?;
        let record: SessionRecord = serde_json::from_str(&text).map_err(|e| format!("session.json: {e}"))?;
        if record.version > RECORD_VERSION {
            return Err(format!("session.json is of a newer version ({})", record.version));
        }
        let log = dir.join("events.log");
        let (events, durable, good_bytes, total) = read_log(&log, self.limits.max_events);
        if good_bytes < total {
            tracing::warn!(
                "{}: {} bytes after the last whole event are cut off (a write torn by a crash)",
                log.display(),
                total - good_bytes
            );
            if let Ok(f) = OpenOptions::new().write(true).open(&log) {
                let _ = f.set_len(good_bytes);
                let _ = f.sync_all();
            }
        }
        Ok(Stored { record, events, durable })
    }
}

/// The events of a log (the last `keep`), its last durable line, the
/// length of its good part, and its length.
fn read_log(path: &Path, keep: usize) -> (Vec<Event>, Option<super::Durable>, u64, u64) {
    let Ok(file) = File::open(path) else { return (Vec::new(), None, 0, 0) };
    let total = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::new(file);
    let mut events = std::collections::VecDeque::new();
    let mut durable = None;
    let mut good = 0u64;
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let Some(parsed) = parse_line(&line) else { break };
        good += line.len() as u64;
        match parsed {
            Line::Event(event) => {
                events.push_back(event);
                if events.len() > keep {
                    events.pop_front();
                }
            }
            Line::Durable(d) => durable = Some(d),
        }
    }
    (events.into(), durable, good, total)
}

enum Line {
    Event(Event),
    Durable(super::Durable),
}

/// One whole line: its checksum matches, its event (or durable state)
/// parses.
fn parse_line(line: &[u8]) -> Option<Line> {
    let body = line.strip_suffix(b"\n")?;
    let (crc, json) = (body.get(..8)?, body.get(9..)?);
    if body.get(8) != Some(&b' ') {
        return None;
    }
    let crc = u32::from_str_radix(std::str::from_utf8(crc).ok()?, 16).ok()?;
    if crc != crc32(json) {
        return None;
    }
    if json.starts_with(b"{\"durable\"") {
        return serde_json::from_slice::<super::DurableLine>(json).ok().map(|l| Line::Durable(l.durable));
    }
    serde_json::from_slice(json).ok().map(Line::Event)
}

/// Writes `body` to `tmp`, syncs it, renames it over `path`, syncs the
/// directory.
pub(crate) fn write_atomically(tmp: &Path, path: &Path, body: &[u8]) -> std::io::Result<()> {
    write_atomically_with(tmp, path, |f| f.write_all(body))
}

/// [`write_atomically`] with the body written by `fill`, through a
/// buffer: a body made piece by piece (a compacted log) is never whole in
/// memory.
fn write_atomically_with(
    tmp: &Path,
    path: &Path,
    fill: impl FnOnce(&mut std::io::BufWriter<File>) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let f = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(tmp)?;
    let mut buffered = std::io::BufWriter::with_capacity(64 << 10, f);
    fill(&mut buffered)?;
    let f = buffered.into_inner().map_err(|e| e.into_error())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

fn backend<E: std::fmt::Display + Into<Box<dyn std::error::Error + Send + Sync>>>(
    op: &'static str,
    session_id: &str,
    e: E,
) -> StoreError {
    StoreError::Backend { op, session_id: session_id.to_owned(), why: e.to_string(), source: e.into() }
}

impl Store for DiskStore {
    fn save(&self, record: &SessionRecord) -> Result<(), StoreError> {
        let id = &record.info.session_id;
        let dir = self.dir(id);
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).map_err(|e| backend("save", id, e))?;
        let body = serde_json::to_vec(record).map_err(|e| backend("save", id, e))?;
        write_atomically(&dir.join("session.json.tmp"), &dir.join("session.json"), &body)
            .map_err(|e| backend("save", id, e))
    }

    fn remove_session(&self, session_id: &str) -> Result<(), StoreError> {
        self.journals().remove(session_id);
        match std::fs::remove_dir_all(self.dir(session_id)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(backend("remove", session_id, e)),
            _ => Ok(()),
        }
    }

    fn load_sessions(&self) -> Result<Vec<Stored>, StoreError> {
        let entries = std::fs::read_dir(&self.root).map_err(|e| backend("load", "*", e))?;
        let mut found: Vec<(SystemTime, Stored)> = Vec::new();
        for entry in entries.flatten() {
            let dir = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if !dir.is_dir() || name.contains(".corrupt-") {
                continue;
            }
            if !dir.join("session.json").exists() {
                // Made, never saved (a crash between the two): nothing to keep.
                let _ = std::fs::remove_dir_all(&dir);
                continue;
            }
            let touched = ["events.log", "session.json"]
                .iter()
                .filter_map(|f| std::fs::metadata(dir.join(f)).and_then(|m| m.modified()).ok())
                .max()
                .unwrap_or(SystemTime::UNIX_EPOCH);
            if touched.elapsed().is_ok_and(|idle| idle > self.limits.max_idle) {
                tracing::info!("session {name} untouched for longer than the store keeps sessions; removed");
                let _ = std::fs::remove_dir_all(&dir);
                continue;
            }
            match self.load_one(&dir) {
                Ok(stored) if stored.record.info.session_id == name => found.push((touched, stored)),
                Ok(_) => self.set_aside(&dir, "its record names another session"),
                Err(why) => self.set_aside(&dir, &why),
            }
        }
        // The most recently used first; beyond the limit, the rest go.
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        for (_, extra) in found.iter().skip(self.limits.max_sessions) {
            tracing::info!(session_id = %extra.record.info.session_id, "more sessions than the store keeps; removed");
            let _ = std::fs::remove_dir_all(self.dir(&extra.record.info.session_id));
        }
        Ok(found.into_iter().take(self.limits.max_sessions).map(|(_, s)| s).collect())
    }

    fn journal(&self, session_id: &str) -> Option<Arc<dyn Journal>> {
        let dir = self.dir(session_id);
        let path = dir.join("events.log");
        let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let journal = Arc::new(FileJournal {
            // Opened on the first event: an idle session holds no descriptor.
            file: Mutex::new(None),
            path,
            dirty: AtomicBool::new(false),
            bytes: AtomicU64::new(bytes),
            durable: Mutex::new(Vec::new()),
        });
        self.journals().insert(session_id.to_owned(), journal.clone());
        Some(journal)
    }

    fn oversized(&self) -> Vec<String> {
        self.journals()
            .iter()
            .filter(|(_, j)| j.bytes.load(Ordering::Relaxed) > self.limits.max_log_bytes)
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Rewrites the log with only `events` (replay needs no more).
    fn compact(&self, session_id: &str, events: &[Arc<Event>]) {
        let Some(journal) = self.journals().get(session_id).cloned() else { return };
        if journal.bytes.load(Ordering::Relaxed) <= self.limits.max_log_bytes {
            return;
        }
        let mut file = journal.file.locked();
        let tmp = journal.path.with_extension("log.tmp");
        // Written line by line: the log (up to max_log_bytes) is never
        // whole in memory, where the allocator would keep its pages.
        let mut written = 0u64;
        let wrote = write_atomically_with(&tmp, &journal.path, |out| {
            let mut line = Vec::new();
            for event in events {
                line.clear();
                super::journal_line(event, &mut line);
                out.write_all(&line)?;
                written += line.len() as u64;
            }
            // What the events do not carry, newest, after them.
            let durable = journal.durable.locked();
            written += durable.len() as u64;
            out.write_all(&durable)
        });
        match wrote {
            Ok(()) => {
                *file = open_append(&journal.path).ok();
                journal.bytes.store(written, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!("cannot rewrite {}: {e}", journal.path.display()),
        }
    }

    fn sync(&self) {
        let journals: Vec<Arc<FileJournal>> = self.journals().values().cloned().collect();
        for j in journals {
            j.sync();
        }
    }

    fn size(&self) -> u64 {
        // Walking the store costs a system call per file: measured at most
        // once every few seconds.
        let mut cached = self.size_cache.locked();
        if let Some((at, bytes)) = *cached
            && at.elapsed() < Duration::from_secs(5)
        {
            return bytes;
        }
        let bytes = dir_size(&self.root);
        *cached = Some((std::time::Instant::now(), bytes));
        bytes
    }
}

fn dir_size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => dir_size(&e.path()),
                    _ => e.metadata().map(|m| m.len()).unwrap_or(0),
                })
                .sum()
        })
        .unwrap_or(0)
}

/// CRC-32 (IEEE 802.3), as zlib computes it (crc32fast: SIMD where the
/// CPU has it; the journal checksums every event).
pub fn crc32(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_protocol::turn::EventKind;

    #[test]
    fn crc32_is_zlibs() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    fn journal_at(path: &Path) -> FileJournal {
        FileJournal {
            path: path.to_path_buf(),
            file: Mutex::new(open_append(path).ok()),
            dirty: AtomicBool::new(false),
            bytes: AtomicU64::new(0),
            durable: Mutex::new(Vec::new()),
        }
    }

    #[test]
    fn a_torn_or_corrupt_line_ends_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.log");
        let j = journal_at(&path);
        for seq in 1..=3 {
            j.append(&Event { seq, kind: EventKind::turn_completed(format!("t{seq}")) });
        }
        let whole = std::fs::read(&path).unwrap();
        let (events, _, good, total) = read_log(&path, 100);
        assert_eq!((events.len(), good, total), (3, whole.len() as u64, whole.len() as u64));
        // A torn last line.
        std::fs::write(&path, &whole[..whole.len() - 5]).unwrap();
        let (events, _, good, _) = read_log(&path, 100);
        assert_eq!(events.len(), 2);
        let two = whole.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(1).unwrap().0 as u64 + 1;
        assert_eq!(good, two);
        // A flipped byte in the middle line: the log ends before it.
        let mut bad = whole.clone();
        let i = two as usize - 10;
        bad[i] ^= 1;
        std::fs::write(&path, &bad).unwrap();
        assert_eq!(read_log(&path, 100).0.len(), 1);
        // The last `keep` only.
        std::fs::write(&path, &whole).unwrap();
        assert_eq!(read_log(&path, 2).0.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    }

    #[test]
    fn the_last_durable_line_is_kept_beside_the_events_and_through_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.log");
        let j = journal_at(&path);
        let state = |rule: &str| super::super::Durable { granted_rules: vec![rule.into()], ..Default::default() };
        for (seq, rule) in [(1, "Bash(a)"), (2, "Bash(b)")] {
            j.append(&Event { seq, kind: EventKind::turn_completed(format!("t{seq}")) });
            let mut line = Vec::new();
            super::super::durable_line(&state(rule), &mut line);
            j.append_lines(&line);
            j.remember_durable(&line);
        }
        let (events, durable, ..) = read_log(&path, 100);
        assert_eq!(events.len(), 2, "durable lines are not events and do not end the log");
        assert_eq!(durable, Some(state("Bash(b)")));
        // Compacted, the log keeps the newest durable line.
        let root = tempfile::tempdir().unwrap();
        let store = DiskStore::open(root.path(), StoreLimits { max_log_bytes: 1, ..StoreLimits::default() }).unwrap();
        std::fs::create_dir_all(store.dir("s")).unwrap();
        let journal = store.journal("s").unwrap();
        let last = Arc::new(Event { seq: 2, kind: EventKind::turn_completed("t2") });
        journal.append(&last);
        let mut line = Vec::new();
        super::super::durable_line(&state("Bash(c)"), &mut line);
        journal.append_lines(&line);
        journal.remember_durable(&line);
        store.compact("s", &[last]);
        let (events, durable, ..) = read_log(&store.dir("s").join("events.log"), 100);
        assert_eq!((events.len(), durable), (1, Some(state("Bash(c)"))));
    }
}
