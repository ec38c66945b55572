//! Protected paths that do not exist yet (issue 24): a read-only bind
//! needs something to cover, so for the lifetime of the calls that need it
//! the daemon makes an empty directory where a protected file or directory
//! would be (`.claude`, `.mcp.json`, `~/.zshrc`, `~/.config/systemd`, …),
//! which the helper binds read-only. Creating the file then fails inside the
//! sandbox from the first instant, background jobs included.
//!
//! - A directory, whatever the name: git does not see empty directories
//!   (`git status` and `git add -A` stay as they were), and agentd's
//!   settings readers take an empty directory, or a directory where a file
//!   belongs, for nothing there.
//! - Shared: calls on one workspace take a count on each placeholder; the
//!   last one to end removes it (`rmdir`, so anything a process outside the
//!   sandbox put there stays), and the parents it had to make.
//! - Recorded in `<state-dir>/placeholders/ledger` before it is made (a
//!   line appended: its id and what is made for it; another when it is
//!   removed), so the next daemon removes what a killed one left. One file
//!   for all: a record file per placeholder cost a Bash call in
//!   `workspace_write` six inodes made and removed. The ledger is the
//!   daemon's ([`Ledger`], carried by the sandbox facility); the counts are
//!   the process's, on purpose: calls of two daemons on one workspace hold
//!   the same paths, and the last to end removes the placeholder and closes
//!   its record in the ledger that made it.
//! - Across processes: a call binds what exists as it is, and another
//!   daemon's placeholder exists, so each call takes a shared `flock` on
//!   every protected directory or file it binds that it did not make (its
//!   [`Held`] pins), and a placeholder is removed only under an exclusive
//!   lock. While a call of another process pins it, the removal waits (a
//!   thread blocked on the lock; the record stays open, so a daemon killed
//!   meanwhile leaves it to its next start). A pin checks after locking
//!   that the path is still the inode it locked: one removed meanwhile is
//!   absent, and gets the call's own placeholder.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use nix::fcntl::{Flock, FlockArg};

use crate::fs::append_log::{AppendLog, read_left};
use crate::sync::MutexExt;

static LIVE: Mutex<Option<HashMap<PathBuf, Entry>>> = Mutex::new(None);

/// Placeholders no call of this process holds any more, waiting for a
/// call of another process to let go of them: still placeholders (never
/// taken for settings a command made and moved aside, which would pull the
/// read-only mount from under that call).
static WAITING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// A daemon's record of the placeholders it made: the open ledger file
/// (none when it could not be kept, or in unit tests) and the next
/// record's id.
#[derive(Default)]
pub struct Ledger(Mutex<Option<(AppendLog<u64>, u64)>>);

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.0.lock().is_ok_and(|l| l.is_some());
        f.debug_struct("placeholders::Ledger").field("kept", &kept).finish()
    }
}

struct Entry {
    count: usize,
    /// What was made for it, deepest first (the placeholder, then the
    /// parents that did not exist).
    made: Vec<PathBuf>,
    /// Its record: the ledger that made it, and the record's id there.
    record: Option<(Arc<Ledger>, u64)>,
    /// This process's shared lock on it while its calls hold it: a
    /// command cannot lock it exclusively (to refuse other daemons'
    /// calls), nor can another daemon's removal or clean-up take it.
    _pin: Option<Flock<File>>,
}

/// What a ledger's text leaves made and not removed: `+ id [paths]` not
/// followed by `- id`.
fn live_in(text: &str) -> Vec<(u64, Vec<PathBuf>)> {
    let mut open: HashMap<u64, (usize, Vec<PathBuf>)> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let mut parts = line.splitn(3, ' ');
        match (parts.next(), parts.next().and_then(|p| p.parse::<u64>().ok()), parts.next()) {
            (Some("+"), Some(id), Some(json)) => {
                if let Ok(paths) = serde_json::from_str::<Vec<PathBuf>>(json) {
                    open.insert(id, (n, paths));
                }
            }
            (Some("-"), Some(id), None) => {
                open.remove(&id);
            }
            _ => {}
        }
    }
    let mut out: Vec<(u64, (usize, Vec<PathBuf>))> = open.into_iter().collect();
    out.sort_by_key(|(_, (n, _))| *n);
    out.into_iter().map(|(id, (_, paths))| (id, paths)).collect()
}

impl Ledger {
    /// Opens the ledger in `state_dir` and removes what a previous daemon
    /// left; the ledger and how many placeholders were removed.
    pub fn open(state_dir: &Path) -> (Arc<Ledger>, usize) {
        use std::os::unix::fs::DirBuilderExt;
        let dir = state_dir.join("placeholders");
        if std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).is_err() {
            return (Arc::default(), 0);
        }
        let path = dir.join("ledger");
        // Bounded: a forged or runaway ledger cannot stall a start.
        let text = read_left(&path);
        let mut left: Vec<Vec<PathBuf>> = live_in(&text).into_iter().map(|(_, p)| p).take(10_000).collect();
        // A record file per placeholder: what a daemon of an earlier version left.
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.path() == path {
                continue;
            }
            if let Ok(text) = std::fs::read_to_string(entry.path()) {
                left.push(text.lines().map(PathBuf::from).collect());
            }
            let _ = std::fs::remove_file(entry.path());
        }
        // Emptied: what it named is gone, or is recorded anew below while
        // a call of another daemon still binds it.
        let log = match AppendLog::start(path.clone()) {
            Ok(log) => Some((log, 1)),
            Err(e) => {
                tracing::warn!("cannot keep the placeholder ledger {}: {e}", path.display());
                None
            }
        };
        let ledger = Arc::new(Ledger(Mutex::new(log)));
        let mut removed = 0;
        for made in left {
            match try_remove(&made) {
                Ok(n) => removed += n,
                Err(busy) => {
                    let shallowest_first: Vec<PathBuf> = made.iter().rev().cloned().collect();
                    let record = ledger.record(&shallowest_first).map(|id| (ledger.clone(), id));
                    remove_once_free(busy, made, record);
                }
            }
        }
        if removed > 0 {
            tracing::info!("removed {removed} placeholder(s) of protected paths a previous daemon left");
        }
        (ledger, removed)
    }

    /// Appends the record of `made` (deepest first, as they are removed); its
    /// id.
    fn record(&self, made: &[PathBuf]) -> Option<u64> {
        let mut guard = self.0.locked();
        let (log, next) = guard.as_mut()?;
        let id = *next;
        *next += 1;
        let deepest_first: Vec<&PathBuf> = made.iter().rev().collect();
        let line = format!("+ {id} {}\n", serde_json::to_string(&deepest_first).ok()?);
        log.open(id, line).then_some(id)
    }

    /// Closes record `id`: what it names is gone.
    fn close(&self, id: u64) {
        if let Some((log, _)) = self.0.locked().as_mut() {
            log.close(&id, &format!("- {id}\n"));
        }
    }
}

/// Whether `path` is a placeholder some call holds now, or one waiting to
/// be removed.
pub fn is_live(path: &Path) -> bool {
    LIVE.lock().is_ok_and(|live| live.as_ref().is_some_and(|l| l.contains_key(path)))
        || WAITING.lock().is_ok_and(|w| w.iter().any(|p| p == path))
}

/// Whether a call should hold a placeholder at `path`: nothing is there,
/// or another call's placeholder is (which goes when that call ends: a
/// call that took it for something that exists would bind a path that
/// may be gone by the time its sandbox is built).
pub fn absent(path: &Path) -> bool {
    is_live(path) || std::fs::symlink_metadata(path).is_err()
}

/// The placeholders one call holds (they go when it is dropped, and no
/// other call holds them), and its pins: shared locks on the protected
/// paths it binds as they are, which may be another process's
/// placeholders (removed only once no call pins them).
#[derive(Debug, Default)]
pub struct Held(Vec<PathBuf>, Vec<(PathBuf, Flock<File>)>);

impl Held {
    /// The paths bound read-only for the call (the placeholders).
    pub fn paths(&self) -> &[PathBuf] {
        &self.0
    }

    /// The paths pinned (they exist, and stay while the call lives).
    pub fn pinned(&self) -> impl Iterator<Item = &PathBuf> {
        self.1.iter().map(|(p, _)| p)
    }
}

/// What [`pin`] found at a path.
enum Pin {
    /// Locked shared, and still the path's inode.
    Held(Flock<File>),
    /// Nothing there (removed before or while it was locked).
    Gone,
    /// Not a directory or regular file (a link, a socket): not anything a
    /// daemon makes as a placeholder.
    NotOurs,
}

/// How long a pin waits for a removal under way (an exclusive lock held
/// for an `rmdir`) before the call is refused.
const PIN_PATIENCE: std::time::Duration = std::time::Duration::from_millis(500);

/// Opens `path` itself (never through a link at its end; a FIFO without
/// waiting for a writer) when it is a directory or a regular file.
fn open_placeholder(path: &Path) -> Result<Option<File>, std::io::Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_dir() && !meta.is_file() {
        return Ok(None);
    }
    let flags = nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY;
    match std::fs::OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => Ok(Some(f)),
        // Replaced by a link meanwhile: not anything made as a placeholder.
        Err(e) if e.raw_os_error() == Some(nix::libc::ELOOP) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The refusal of a call one of whose protected paths cannot be looked at
/// (a directory on its way made unreadable, say by an earlier command's
/// `chmod 000 .git`): it could be neither bound nor given a placeholder.
pub fn unexaminable(path: &Path, e: &std::io::Error) -> String {
    format!(
        "{} cannot be examined ({e}), so it could not be protected; the command was not run (give the \
         directories on its way their permissions back, e.g. chmod u+rwx)",
        path.display()
    )
}

/// Whether `path` is still the inode `file` has open.
fn still(path: &Path, file: &File) -> Option<bool> {
    let now = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(_) => return Some(false),
    };
    let held = file.metadata().ok()?;
    Some(now.dev() == held.dev() && now.ino() == held.ino())
}

/// Takes a shared lock on `path` (see the module's "Across processes").
fn pin(path: &Path) -> Result<Pin, String> {
    let start = std::time::Instant::now();
    loop {
        let mut file = match open_placeholder(path) {
            Ok(Some(f)) => f,
            Ok(None) => return Ok(Pin::NotOurs),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Pin::Gone),
            Err(e) => return Err(unexaminable(path, &e)),
        };
        loop {
            match Flock::lock(file, FlockArg::LockSharedNonblock) {
                Ok(lock) => match still(path, &lock) {
                    Some(true) => return Ok(Pin::Held(lock)),
                    None => return Ok(Pin::Gone),
                    Some(false) => break, // replaced: pin what is there now
                },
                Err((f, nix::errno::Errno::EWOULDBLOCK)) if start.elapsed() < PIN_PATIENCE => {
                    file = f;
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => {
                    return Err(format!(
                        "{} is locked by another process (a daemon removing its placeholder, or a program \
                         holding it); the command was not run, try again",
                        path.display()
                    ));
                }
                Err((f, nix::errno::Errno::EINTR)) => file = f,
                // A file system without locks: bound as it is, as before
                // there were pins.
                Err((
                    _,
                    e @ (nix::errno::Errno::ENOLCK | nix::errno::Errno::EOPNOTSUPP | nix::errno::Errno::EINVAL),
                )) => {
                    tracing::debug!("cannot pin {}: {e}", path.display());
                    return Ok(Pin::NotOurs);
                }
                Err((_, e)) => {
                    return Err(format!("{} could not be locked ({e}); the command was not run", path.display()));
                }
            }
        }
        if start.elapsed() >= PIN_PATIENCE {
            return Err(format!("{} keeps changing under the call; the command was not run", path.display()));
        }
    }
}

/// Removes what was made for a placeholder (`made`, deepest first) and
/// closes its record, under an exclusive lock on the placeholder: now when
/// no call pins it, else from a thread that waits for the last pin to go.
fn remove_when_free(made: Vec<PathBuf>, record: Option<(Arc<Ledger>, u64)>) {
    match try_remove(&made) {
        Ok(_) => close(record),
        Err(busy) => remove_once_free(busy, made, record),
    }
}

/// Removes `made` now under an exclusive lock (how many paths), or gives
/// back the placeholder's open file while a call pins it.
fn try_remove(made: &[PathBuf]) -> Result<usize, File> {
    let Some(first) = made.first() else { return Ok(0) };
    let file = match open_placeholder(first) {
        Ok(Some(f)) => f,
        // Gone, or no longer anything made for it: what is left of its
        // parents goes if empty.
        Ok(None) | Err(_) => return Ok(remove(made, None)),
    };
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(remove_locked(made, None, &lock)),
        Err((file, nix::errno::Errno::EWOULDBLOCK)) => Err(file),
        Err(_) => Ok(0),
    }
}

/// From a thread: waits for an exclusive lock on the placeholder `file`,
/// then removes `made` and closes the record.
fn remove_once_free(file: File, made: Vec<PathBuf>, record: Option<(Arc<Ledger>, u64)>) {
    let path = made.first().cloned().unwrap_or_default();
    set_waiting(&path, true);
    let waits = std::thread::Builder::new().name("placeholder-wait".into()).spawn(move || {
        if let Ok(lock) = Flock::lock(file, FlockArg::LockExclusive) {
            remove_locked(&made, record, &lock);
        }
        if let Some(first) = made.first() {
            set_waiting(first, false);
        }
    });
    if let Err(e) = waits {
        // Still a placeholder (never moved aside as settings) until the
        // next start removes it.
        tracing::warn!("placeholder {} is left to the next start: {e}", path.display());
    }
}

/// Adds `path` to [`WAITING`], or takes it out.
fn set_waiting(path: &Path, wait: bool) {
    let mut w = WAITING.locked();
    if wait {
        w.push(path.to_path_buf());
    } else if let Some(i) = w.iter().position(|p| p == path) {
        w.swap_remove(i);
    }
}

/// [`remove`], with the placeholder locked exclusively: only if the path
/// is still what was locked (something put in its place stays).
fn remove_locked(made: &[PathBuf], record: Option<(Arc<Ledger>, u64)>, lock: &File) -> usize {
    match made.first().and_then(|p| still(p, lock)) {
        Some(false) => {
            close(record);
            0
        }
        _ => remove(made, record),
    }
}

/// For each of `paths` (with whether a placeholder there is a directory
/// or, where the bool says it is not one, an empty file), inside `roots`
/// only (what lies outside is read-only in the sandbox anyway): takes a
/// count on this process's placeholder there, pins what exists (see the
/// module's "Across processes"), and makes a placeholder where nothing
/// is. Paths whose parent cannot be made are skipped. What is made is
/// recorded in `ledger`. Refused (and nothing held) when something there
/// stays locked by another process.
pub fn hold(paths: &[(PathBuf, bool)], roots: &[PathBuf], ledger: &Arc<Ledger>) -> Result<Held, String> {
    let mut held = Held::default();
    let outcome = match LIVE.lock() {
        Ok(mut live) => hold_in(live.get_or_insert_with(HashMap::new), &mut held, paths, roots, ledger),
        Err(_) => Ok(()),
    };
    // On refusal `held` is dropped here, with the lock released.
    outcome.map(|()| held)
}

fn hold_in(
    live: &mut HashMap<PathBuf, Entry>,
    held: &mut Held,
    paths: &[(PathBuf, bool)],
    roots: &[PathBuf],
    ledger: &Arc<Ledger>,
) -> Result<(), String> {
    for (path, is_dir) in paths {
        if held.0.contains(path)
            || held.pinned().any(|p| p == path)
            || !roots.iter().any(|r| path.starts_with(r) && path != r)
        {
            continue;
        }
        if let Some(entry) = live.get_mut(path) {
            entry.count += 1;
            held.0.push(path.clone());
            continue;
        }
        let there = match std::fs::symlink_metadata(path) {
            Ok(_) => true,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => false,
            Err(e) => return Err(unexaminable(path, &e)),
        };
        if there {
            // It exists: bound as it is, pinned.
            match pin(path)? {
                Pin::Held(lock) => {
                    held.1.push((path.clone(), lock));
                    continue;
                }
                Pin::NotOurs => continue,
                Pin::Gone => {} // removed meanwhile: made here
            }
        }
        // The parents that are missing, up to an existing one inside a root.
        let mut missing: Vec<PathBuf> = Vec::new();
        let mut dir = path.parent();
        while let Some(d) = dir {
            if std::fs::symlink_metadata(d).is_ok() {
                break;
            }
            missing.push(d.to_path_buf());
            dir = d.parent();
        }
        if dir.is_none_or(|d| !roots.iter().any(|r| d.starts_with(r)) || !d.is_dir() || d.is_symlink()) {
            continue;
        }
        let mut made: Vec<PathBuf> = missing.iter().rev().cloned().collect();
        made.push(path.clone());
        let record = ledger.record(&made).map(|id| (ledger.clone(), id));
        let mut failed = None;
        let last = made.len() - 1;
        for (i, d) in made.iter().enumerate() {
            let created = if i == last && !is_dir {
                std::fs::OpenOptions::new().write(true).create_new(true).open(d).map(drop)
            } else {
                std::fs::create_dir(d)
            };
            if let Err(e) = created {
                failed = Some(e.kind());
                made.truncate(i);
                break;
            }
        }
        made.reverse();
        if let Some(why) = failed {
            remove(&made, record);
            // Another process made it first: pinned like anything there.
            // Gone again by now, it would be left unbound: refused. (Made
            // by nobody, for another reason — a read-only or full file
            // system — it is skipped, as a parent that cannot be made is.)
            match pin(path)? {
                Pin::Held(lock) => held.1.push((path.clone(), lock)),
                Pin::NotOurs => {}
                Pin::Gone if why != std::io::ErrorKind::AlreadyExists => {}
                Pin::Gone => {
                    return Err(format!(
                        "{} appeared and went while the call started; the command was not run, try again",
                        path.display()
                    ));
                }
            }
            continue;
        }
        let pin = match pin(path) {
            Ok(Pin::Held(lock)) => Some(lock),
            _ => None,
        };
        live.insert(path.clone(), Entry { count: 1, made, record, _pin: pin });
        held.0.push(path.clone());
    }
    Ok(())
}

/// Removes the placeholder `path` while it is still empty (an empty
/// directory or file): what someone outside the sandbox put there stays,
/// and nothing is removed through a directory swapped for a link.
fn remove_if_empty(path: &Path) -> bool {
    crate::fs::remove_no_links(path, crate::fs::Removable::Empty)
}

/// Removes what was made (deepest first) while empty, and closes the
/// record; how many paths were removed.
fn remove(made: &[PathBuf], record: Option<(Arc<Ledger>, u64)>) -> usize {
    let removed = made.iter().take_while(|d| remove_if_empty(d)).count();
    close(record);
    removed
}

fn close(record: Option<(Arc<Ledger>, u64)>) {
    if let Some((ledger, id)) = record {
        ledger.close(id);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Ok(mut live) = LIVE.lock() else { return };
        let Some(live) = live.as_mut() else { return };
        // The last made first: a parent made for an earlier one is empty
        // by the time its turn comes.
        for path in self.0.drain(..).rev() {
            let last = match live.get_mut(&path) {
                Some(e) => {
                    e.count -= 1;
                    e.count == 0
                }
                None => false,
            };
            if last && let Some(Entry { made, record, _pin, .. }) = live.remove(&path) {
                drop(_pin);
                remove_when_free(made, record);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_ledger_leaves_made() {
        let text = "+ 1 [\"/w/.claude\"]\n+ 2 [\"/w/.config/systemd\",\"/w/.config\"]\n- 1\n+ 3 [\"/w/a b\"]\n- 3 x\nbad\n+ 4 [\"/w/torn";
        let live = live_in(text);
        // 1 removed; 3's removal line is malformed (kept, to be safe); 4 torn.
        assert_eq!(
            live,
            vec![
                (2, vec![PathBuf::from("/w/.config/systemd"), PathBuf::from("/w/.config")]),
                (3, vec![PathBuf::from("/w/a b")])
            ]
        );
    }

    #[test]
    fn made_for_the_calls_and_gone_after_the_last() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path().to_path_buf();
        let ledger = Arc::default();
        let want = [(r.join(".claude"), true), (r.join(".config/systemd"), true), (r.join(".zshrc"), false)];
        let a = hold(&want, std::slice::from_ref(&r), &ledger).unwrap();
        assert!(r.join(".claude").is_dir() && r.join(".config/systemd").is_dir() && r.join(".zshrc").is_file());
        let b = hold(&want[..1], std::slice::from_ref(&r), &ledger).unwrap();
        drop(a);
        assert!(r.join(".claude").is_dir(), "still held by the second call");
        assert!(!r.join(".config").exists(), "the parent made for it goes too");
        assert!(!r.join(".zshrc").exists());
        drop(b);
        assert!(!r.join(".claude").exists());
        // Something put there from outside stays.
        let c = hold(&want[..1], std::slice::from_ref(&r), &ledger).unwrap();
        std::fs::write(r.join(".claude/settings.json"), "{}").unwrap();
        drop(c);
        assert!(r.join(".claude/settings.json").exists());
        // Outside the roots: nothing.
        let other = tempfile::tempdir().unwrap();
        let d = hold(&[(other.path().join(".claude"), true)], std::slice::from_ref(&r), &ledger).unwrap();
        assert!(d.paths().is_empty() && !other.path().join(".claude").exists());
    }

    #[test]
    fn each_daemon_records_what_it_made_in_its_own_ledger() {
        let (work, a_state, b_state) =
            (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let r = work.path().to_path_buf();
        let (a, _) = Ledger::open(a_state.path());
        let (b, _) = Ledger::open(b_state.path());
        let ledger_text =
            |state: &tempfile::TempDir| std::fs::read_to_string(state.path().join("placeholders/ledger")).unwrap();
        let by_a = hold(&[(r.join(".claude"), true)], std::slice::from_ref(&r), &a).unwrap();
        let by_b = hold(&[(r.join(".vscode"), true), (r.join(".claude"), true)], std::slice::from_ref(&r), &b).unwrap();
        assert!(ledger_text(&a_state).contains(".claude") && !ledger_text(&a_state).contains(".vscode"));
        assert!(ledger_text(&b_state).contains(".vscode") && !ledger_text(&b_state).contains(".claude"));
        // A's call ends first; B's holds `.claude` on, and its end closes
        // the record in A's ledger, which made it.
        drop(by_a);
        assert!(r.join(".claude").is_dir());
        drop(by_b);
        assert!(!r.join(".claude").exists() && !r.join(".vscode").exists());
        assert!(live_in(&ledger_text(&a_state)).is_empty() && live_in(&ledger_text(&b_state)).is_empty());
        // A daemon killed with a placeholder made: the next on its state
        // directory removes it; the other daemon's directory has nothing.
        std::mem::forget(hold(&[(r.join(".idea"), true)], std::slice::from_ref(&r), &b).unwrap());
        assert!(r.join(".idea").is_dir());
        LIVE.lock().unwrap().as_mut().unwrap().remove(&r.join(".idea"));
        assert_eq!(Ledger::open(a_state.path()).1, 0);
        assert_eq!(Ledger::open(b_state.path()).1, 1);
        assert!(!r.join(".idea").exists());
    }

    /// Until `cond` holds, for at most 5 s.
    fn soon(cond: impl Fn() -> bool) -> bool {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < end {
            if cond() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        cond()
    }

    /// What a call of another process holds on a placeholder it found
    /// (a lock on its own open file, as a second daemon's would be).
    fn pinned_elsewhere(path: &Path) -> Flock<File> {
        match pin(path) {
            Ok(Pin::Held(lock)) => lock,
            _ => panic!("{} not pinned", path.display()),
        }
    }

    /// A placeholder another process's call pins (it found it existing
    /// and binds it): the maker's last call ends, and the placeholder stays
    /// (its record open) until the pin goes; then it is removed and the
    /// record closed.
    #[test]
    fn a_placeholder_pinned_by_another_process_goes_only_after_the_pin() {
        let (_work, r) = crate::fs::real_temp_dir();
        let (_state, state) = crate::fs::real_temp_dir();
        let (ledger, _) = Ledger::open(&state);
        let held = hold(&[(r.join(".mcp.json/x"), true)], std::slice::from_ref(&r), &ledger).unwrap();
        let other = pinned_elsewhere(&r.join(".mcp.json/x"));
        drop(held);
        std::thread::sleep(std::time::Duration::from_millis(100));
        assert!(r.join(".mcp.json/x").is_dir(), "removed while another process's call binds it");
        let text = || std::fs::read_to_string(state.join("placeholders/ledger")).unwrap();
        assert_eq!(live_in(&text()).len(), 1, "the record stays open while it waits");
        drop(other);
        assert!(soon(|| !r.join(".mcp.json").exists()), "left once the pin went");
        assert!(soon(|| live_in(&text()).is_empty()));
    }

    /// A call that finds a protected path existing pins it; a path some
    /// program keeps locked exclusively refuses the call, and what the call
    /// had made by then goes with it.
    #[test]
    fn what_exists_is_pinned_and_a_lock_held_elsewhere_refuses_the_call() {
        let (_work, r) = crate::fs::real_temp_dir();
        let ledger = Arc::default();
        std::fs::create_dir(r.join(".claude")).unwrap();
        let held = hold(&[(r.join(".claude"), true)], std::slice::from_ref(&r), &ledger).unwrap();
        assert_eq!(held.pinned().collect::<Vec<_>>(), vec![&r.join(".claude")]);
        assert!(held.paths().is_empty(), "it exists: nothing made");
        let file = File::open(r.join(".claude")).unwrap();
        assert!(Flock::lock(file, FlockArg::LockExclusiveNonblock).is_err(), "a remover could lock it");
        drop(held);
        let file = File::open(r.join(".claude")).unwrap();
        let program = Flock::lock(file, FlockArg::LockExclusiveNonblock).unwrap();
        let want = [(r.join(".vscode"), true), (r.join(".claude"), true)];
        let refused = hold(&want, std::slice::from_ref(&r), &ledger).unwrap_err();
        assert!(refused.contains(".claude") && refused.contains("not run"), "{refused}");
        assert!(!r.join(".vscode").exists(), "a placeholder made for the refused call stays");
        drop(program);
        assert!(hold(&want, std::slice::from_ref(&r), &ledger).is_ok());
    }

    /// A placeholder is pinned by the process that made it while its calls
    /// hold it: a command's exclusive lock on it (to have other daemons'
    /// calls refused, or its removal taken early) fails.
    #[test]
    fn a_placeholder_is_pinned_by_its_maker_while_held() {
        let (_work, r) = crate::fs::real_temp_dir();
        let ledger = Arc::default();
        let held = hold(&[(r.join(".idea"), true)], std::slice::from_ref(&r), &ledger).unwrap();
        let exclusive = || Flock::lock(File::open(r.join(".idea")).unwrap(), FlockArg::LockExclusiveNonblock);
        assert!(exclusive().is_err(), "a command could lock the placeholder exclusively");
        drop(held);
        assert!(!r.join(".idea").exists(), "removed at once when nobody else pins it");
    }

    /// A restarted daemon finds what its predecessor left pinned by a call
    /// of another process: left in place, recorded anew, and removed once
    /// the pin goes.
    #[test]
    fn a_restart_leaves_a_placeholder_another_process_pins_until_the_pin_goes() {
        let (_work, r) = crate::fs::real_temp_dir();
        let (_state, state) = crate::fs::real_temp_dir();
        let (ledger, _) = Ledger::open(&state);
        std::mem::forget(hold(&[(r.join(".idea"), true)], std::slice::from_ref(&r), &ledger).unwrap());
        LIVE.lock().unwrap().as_mut().unwrap().remove(&r.join(".idea"));
        drop(ledger);
        let other = pinned_elsewhere(&r.join(".idea"));
        let (ledger, removed) = Ledger::open(&state);
        assert_eq!(removed, 0);
        assert!(r.join(".idea").is_dir());
        let text = || std::fs::read_to_string(state.join("placeholders/ledger")).unwrap();
        assert_eq!(live_in(&text()).len(), 1, "recorded anew for the next start");
        drop(other);
        assert!(soon(|| !r.join(".idea").exists()));
        assert!(soon(|| live_in(&text()).is_empty()));
        drop(ledger);
    }

    /// A daemon killed while it held `.config/systemd` (and the `.config`
    /// made for it); before the next starts, `.config` is swapped for a
    /// link to a directory elsewhere that holds an empty `systemd`. The
    /// restarted daemon's clean-up must not remove through the link.
    #[test]
    fn a_restarted_daemon_never_removes_through_a_parent_swapped_for_a_link() {
        let (_work, r) = crate::fs::real_temp_dir();
        let (_state, state) = crate::fs::real_temp_dir();
        let (_elsewhere, elsewhere) = crate::fs::real_temp_dir();
        std::fs::create_dir(elsewhere.join("systemd")).unwrap();
        let (ledger, _) = Ledger::open(&state);
        std::mem::forget(hold(&[(r.join(".config/systemd"), true)], std::slice::from_ref(&r), &ledger).unwrap());
        assert!(r.join(".config/systemd").is_dir());
        LIVE.lock().unwrap().as_mut().unwrap().remove(&r.join(".config/systemd"));
        drop(ledger);
        std::fs::remove_dir(r.join(".config/systemd")).unwrap();
        std::fs::remove_dir(r.join(".config")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, r.join(".config")).unwrap();
        let _ = Ledger::open(&state);
        assert!(r.join(".config").is_symlink(), "the link itself stays");
        assert!(elsewhere.join("systemd").is_dir(), "removed through a link swapped in for .config");
    }

    /// What a killed daemon left and someone changed since: a file put in
    /// a placeholder, a placeholder swapped for a link to an empty
    /// directory elsewhere, another for a file with content. The restarted
    /// daemon removes none of it, and nothing the links lead to.
    #[test]
    fn a_restarted_daemon_leaves_what_was_put_in_or_in_place_of_a_placeholder() {
        let (_work, r) = crate::fs::real_temp_dir();
        let (_state, state) = crate::fs::real_temp_dir();
        let (_elsewhere, elsewhere) = crate::fs::real_temp_dir();
        std::fs::create_dir(elsewhere.join("empty")).unwrap();
        let (ledger, _) = Ledger::open(&state);
        let want = [(r.join(".claude"), true), (r.join(".vscode"), true), (r.join(".idea"), true)];
        std::mem::forget(hold(&want, std::slice::from_ref(&r), &ledger).unwrap());
        for (p, _) in &want {
            LIVE.lock().unwrap().as_mut().unwrap().remove(p);
        }
        drop(ledger);
        std::fs::write(r.join(".claude/settings.json"), "{}").unwrap();
        std::fs::remove_dir(r.join(".vscode")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("empty"), r.join(".vscode")).unwrap();
        std::fs::remove_dir(r.join(".idea")).unwrap();
        std::fs::write(r.join(".idea"), "mine").unwrap();
        assert_eq!(Ledger::open(&state).1, 0);
        assert!(r.join(".claude/settings.json").is_file());
        assert!(r.join(".vscode").is_symlink() && elsewhere.join("empty").is_dir());
        assert_eq!(std::fs::read_to_string(r.join(".idea")).unwrap(), "mine");
        // The ledger was emptied: a second start removes nothing more.
        assert_eq!(Ledger::open(&state).1, 0);
        assert!(r.join(".claude/settings.json").is_file());
    }
}
