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

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::fs::append_log::{AppendLog, read_left};

static LIVE: Mutex<Option<HashMap<PathBuf, Entry>>> = Mutex::new(None);

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
        let mut removed = 0;
        for made in left {
            for path in made {
                if remove_if_empty(&path) {
                    removed += 1;
                }
            }
        }
        if removed > 0 {
            tracing::info!("removed {removed} placeholder(s) of protected paths a previous daemon left");
        }
        // Emptied: what it named is gone. Not through a link put there.
        let log = match AppendLog::start(path.clone()) {
            Ok(log) => Some((log, 1)),
            Err(e) => {
                tracing::warn!("cannot keep the placeholder ledger {}: {e}", path.display());
                None
            }
        };
        (Arc::new(Ledger(Mutex::new(log))), removed)
    }

    /// Appends the record of `made` (deepest first, as they are removed); its
    /// id.
    fn record(&self, made: &[PathBuf]) -> Option<u64> {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let (log, next) = guard.as_mut()?;
        let id = *next;
        *next += 1;
        let deepest_first: Vec<&PathBuf> = made.iter().rev().collect();
        let line = format!("+ {id} {}\n", serde_json::to_string(&deepest_first).ok()?);
        log.open(id, line).then_some(id)
    }

    /// Closes record `id`: what it names is gone.
    fn close(&self, id: u64) {
        if let Some((log, _)) = self.0.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            log.close(&id, &format!("- {id}\n"));
        }
    }
}

/// Whether `path` is a placeholder some call holds now.
pub fn is_live(path: &Path) -> bool {
    LIVE.lock().is_ok_and(|live| live.as_ref().is_some_and(|l| l.contains_key(path)))
}

/// Whether a call should hold a placeholder at `path`: nothing is there,
/// or another call's placeholder is (which goes when that call ends: a
/// call that took it for something that exists would bind a path that
/// may be gone by the time its sandbox is built).
pub fn absent(path: &Path) -> bool {
    is_live(path) || std::fs::symlink_metadata(path).is_err()
}

/// The placeholders one call holds; they go when it is dropped (and no
/// other call holds them).
#[derive(Debug, Default)]
pub struct Held(Vec<PathBuf>);

impl Held {
    /// The paths bound read-only for the call (the placeholders).
    pub fn paths(&self) -> &[PathBuf] {
        &self.0
    }
}

/// Makes (or takes a count on) an empty directory (or, where the bool says
/// it is not one, an empty file) at each of `paths` that does not exist,
/// inside `roots` only (what lies outside is read-only in the sandbox
/// anyway). Paths whose parent cannot be made are skipped. What is made is
/// recorded in `ledger`.
pub fn hold(paths: &[(PathBuf, bool)], roots: &[PathBuf], ledger: &Arc<Ledger>) -> Held {
    let mut held = Vec::new();
    let Ok(mut live) = LIVE.lock() else { return Held(held) };
    let live = live.get_or_insert_with(HashMap::new);
    for (path, is_dir) in paths {
        if held.contains(path) || !roots.iter().any(|r| path.starts_with(r) && path != r) {
            continue;
        }
        if let Some(entry) = live.get_mut(path) {
            entry.count += 1;
            held.push(path.clone());
            continue;
        }
        if std::fs::symlink_metadata(path).is_ok() {
            continue; // it exists: bound as it is
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
        let mut ok = true;
        let last = made.len() - 1;
        for (i, d) in made.iter().enumerate() {
            let created = if i == last && !is_dir {
                std::fs::OpenOptions::new().write(true).create_new(true).open(d).map(drop)
            } else {
                std::fs::create_dir(d)
            };
            if created.is_err() {
                ok = false;
                made.truncate(i);
                break;
            }
        }
        made.reverse();
        if !ok {
            remove(&made, record);
            continue;
        }
        live.insert(path.clone(), Entry { count: 1, made, record });
        held.push(path.clone());
    }
    Held(held)
}

/// Removes the placeholder `path` while it is still empty (an empty
/// directory or file): what someone outside the sandbox put there stays,
/// and nothing is removed through a directory swapped for a link.
fn remove_if_empty(path: &Path) -> bool {
    crate::fs::remove_no_links(path, crate::fs::Removable::Empty)
}

fn remove(made: &[PathBuf], record: Option<(Arc<Ledger>, u64)>) {
    for d in made {
        if !remove_if_empty(d) {
            break;
        }
    }
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
            if last && let Some(entry) = live.remove(&path) {
                remove(&entry.made, entry.record);
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
        let a = hold(&want, std::slice::from_ref(&r), &ledger);
        assert!(r.join(".claude").is_dir() && r.join(".config/systemd").is_dir() && r.join(".zshrc").is_file());
        let b = hold(&want[..1], std::slice::from_ref(&r), &ledger);
        drop(a);
        assert!(r.join(".claude").is_dir(), "still held by the second call");
        assert!(!r.join(".config").exists(), "the parent made for it goes too");
        assert!(!r.join(".zshrc").exists());
        drop(b);
        assert!(!r.join(".claude").exists());
        // Something put there from outside stays.
        let c = hold(&want[..1], std::slice::from_ref(&r), &ledger);
        std::fs::write(r.join(".claude/settings.json"), "{}").unwrap();
        drop(c);
        assert!(r.join(".claude/settings.json").exists());
        // Outside the roots: nothing.
        let other = tempfile::tempdir().unwrap();
        let d = hold(&[(other.path().join(".claude"), true)], std::slice::from_ref(&r), &ledger);
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
        let by_a = hold(&[(r.join(".claude"), true)], std::slice::from_ref(&r), &a);
        let by_b = hold(&[(r.join(".vscode"), true), (r.join(".claude"), true)], std::slice::from_ref(&r), &b);
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
        std::mem::forget(hold(&[(r.join(".idea"), true)], std::slice::from_ref(&r), &b));
        assert!(r.join(".idea").is_dir());
        LIVE.lock().unwrap().as_mut().unwrap().remove(&r.join(".idea"));
        assert_eq!(Ledger::open(a_state.path()).1, 0);
        assert_eq!(Ledger::open(b_state.path()).1, 1);
        assert!(!r.join(".idea").exists());
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
        std::mem::forget(hold(&[(r.join(".config/systemd"), true)], std::slice::from_ref(&r), &ledger));
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
        std::mem::forget(hold(&want, std::slice::from_ref(&r), &ledger));
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
