//! What the daemon started, recorded in the state directory
//! (`<state-dir>/procs/ledger`) from its start until it is over, so that a
//! daemon that starts after one that died ends whatever it left running.
//!
//! - One line is appended when a group starts — its leader's pid and start
//!   time, the marker its leader carries, and the marker the command's
//!   processes carry (a helper started ahead of its call carries its own)
//!   — and one when it is over. Appending costs no file creation (a file
//!   per group cost an ext4 inode per Bash call, ~0.1 ms).
//! - The start time is checked before a group is signalled, so a reused
//!   pid is never hit; a leader must carry its marker too.
//! - Kept as a [`crate::fs::append_log`] (compacted as it grows). What is
//!   read at start is bounded (16 MiB, [`GROUPS_AT_MOST`]), and the
//!   processes are looked through once for every marker, so a forged or
//!   runaway ledger cannot stall a start.
//! - Locks: a [`Ledger`]'s live groups (the markers, for [`kill_all`])
//!   and its file (the open ledger and the lines of live groups) are never
//!   held together.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};

use crate::fs::append_log::{AppendLog, read_left};
use crate::sync::MutexExt;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// At most this many groups of a ledger are ended at start.
const GROUPS_AT_MOST: usize = 10_000;

/// A daemon's ledger: the open file (the lines of the groups not yet
/// over) and the groups running now. Each daemon has its own (several in
/// one test process record each into their own state directory).
#[derive(Default)]
pub struct Ledger {
    file: Mutex<Option<AppendLog<i32>>>,
    /// The groups running now: the marker their processes carry.
    live: Mutex<HashMap<i32, String>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").field("live", &self.live().len()).finish_non_exhaustive()
    }
}

/// Every ledger alive in this process, for [`kill_all`] (an exit without
/// the clean shutdown knows no daemon object).
static LEDGERS: Mutex<Vec<Weak<Ledger>>> = Mutex::new(Vec::new());

/// The start time of `pid` (field 22 of `/proc/<pid>/stat`, in ticks since boot).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// A group a ledger leaves live.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Left {
    pgid: i32,
    started: String,
    /// What the leader carries.
    leader: String,
    /// What the command's processes carry.
    sweep: String,
}

/// The groups a ledger's text leaves live: `+ pgid start leader [sweep]`
/// not followed by `- pgid` (a later `+` of the same pgid replaces it).
fn live_in(text: &str) -> Vec<Left> {
    let mut open: HashMap<i32, (usize, Left)> = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let mut parts = line.split(' ');
        match (parts.next(), parts.next().and_then(|p| p.parse::<i32>().ok())) {
            (Some("+"), Some(pgid)) => {
                if let (Some(started), Some(leader)) = (parts.next(), parts.next()) {
                    let sweep = parts.next().unwrap_or(leader).to_owned();
                    let left = Left { pgid, started: started.to_owned(), leader: leader.to_owned(), sweep };
                    open.insert(pgid, (n, left));
                }
            }
            (Some("-"), Some(pgid)) => {
                open.remove(&pgid);
            }
            _ => {}
        }
    }
    let mut out: Vec<(usize, Left)> = open.into_values().collect();
    out.sort_by_key(|(n, _)| *n);
    out.into_iter().map(|(_, l)| l).collect()
}

impl Ledger {
    /// A ledger in memory only (no state directory: unit tests), still
    /// known to [`kill_all`].
    pub fn in_memory() -> Arc<Ledger> {
        Ledger::default().registered()
    }

    /// The ledger of `state_dir`, after ending what a dead predecessor left
    /// running there; with how many groups it ended.
    pub fn open(state_dir: &Path) -> (Arc<Ledger>, usize) {
        let ledger = Ledger::default();
        let ended = ledger.take_over(state_dir);
        (ledger.registered(), ended)
    }

    fn registered(self) -> Arc<Ledger> {
        let me = Arc::new(self);
        let mut all = LEDGERS.locked();
        all.retain(|l| l.strong_count() > 0);
        all.push(Arc::downgrade(&me));
        me
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<i32, String>> {
        self.live.locked()
    }

    fn file(&self) -> std::sync::MutexGuard<'_, Option<AppendLog<i32>>> {
        self.file.locked()
    }

    /// Ends what the ledger of `state_dir` leaves running and opens it,
    /// emptied; how many groups it ended.
    fn take_over(&self, state_dir: &Path) -> usize {
        use std::os::unix::fs::DirBuilderExt;
        let dir = state_dir.join("procs");
        if std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).is_err() {
            return 0;
        }
        let path = dir.join("ledger");
        let text = read_left(&path);
        let mut left = live_in(&text);
        // A file per group: what a daemon of an earlier version left.
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Some(pgid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let _ = std::fs::remove_file(entry.path());
            if let Some((started, marker)) = text.trim().split_once(' ') {
                let (started, marker) = (started.to_owned(), marker.to_owned());
                left.push(Left { pgid, started, leader: marker.clone(), sweep: marker });
            }
        }
        if left.len() > GROUPS_AT_MOST {
            tracing::warn!(
                "the process ledger names {} groups; only the first {GROUPS_AT_MOST} are looked at",
                left.len()
            );
            left.truncate(GROUPS_AT_MOST);
        }
        let ended = end_left(&left);
        // Emptied: what it named is over. Not through a link a command (of a
        // workspace holding the state directory) put there.
        match AppendLog::start(path.clone()) {
            Ok(log) => *self.file() = Some(log),
            Err(e) => tracing::warn!("cannot keep the process ledger {}: {e}", path.display()),
        }
        ended
    }

    /// Records a group just started whose leader and processes carry
    /// `marker`.
    pub fn record(&self, pgid: i32, marker: &str) {
        self.record_as(pgid, marker, marker);
    }

    /// Records (again) a group whose leader carries `leader` and whose
    /// command's processes carry `sweep` (a helper started ahead of its call).
    pub fn record_as(&self, pgid: i32, leader: &str, sweep: &str) {
        self.live().insert(pgid, sweep.to_owned());
        let Some(started) = start_time(pgid) else { return };
        let line = format!("+ {pgid} {started} {leader} {sweep}\n");
        if let Some(log) = self.file().as_mut() {
            log.open(pgid, line);
        }
    }

    /// Forgets a group that is over.
    pub fn forget(&self, pgid: i32) {
        self.live().remove(&pgid);
        if let Some(log) = self.file().as_mut() {
            log.close(&pgid, &format!("- {pgid}\n"));
        }
    }
}

/// Ends the groups `left` names: a leader with the recorded start time
/// that carries its marker, its descendants, and every process carrying a
/// sweep marker (found in one pass over the processes). A live process of
/// a recorded pid that is not the recorded one (the pid was reused) is not
/// touched. Returns how many groups had something ended.
fn end_left(left: &[Left]) -> usize {
    let mut hit: HashSet<i32> = HashSet::new();
    let mut sweep: HashMap<&str, i32> = HashMap::new();
    for l in left {
        if l.pgid <= 1 {
            continue;
        }
        match start_time(l.pgid) {
            Some(t) if t.to_string() == l.started && carries(l.pgid, &l.leader) => {
                for pid in super::descendants(l.pgid) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                if killpg(Pid::from_raw(l.pgid), Signal::SIGKILL).is_ok() {
                    hit.insert(l.pgid);
                }
            }
            Some(_) => continue,
            None => {}
        }
        sweep.insert(l.sweep.as_str(), l.pgid);
    }
    if !sweep.is_empty() {
        for (pid, marker) in super::carrying_markers() {
            if let Some(pgid) = sweep.get(marker.as_str())
                && kill(Pid::from_raw(pid), Signal::SIGKILL).is_ok()
            {
                hit.insert(*pgid);
            }
        }
    }
    for pgid in &hit {
        tracing::warn!(pgid, "ended a command a previous daemon left running");
    }
    hit.len()
}

/// Whether `pid`'s environment holds the marker `marker`.
fn carries(pid: i32, marker: &str) -> bool {
    let needle = format!("{}={marker}", super::MARKER_VAR);
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|entry| entry == needle.as_bytes()))
}

/// SIGKILL to every group running now (of every ledger in this process)
/// and to every process marked as one of its commands (a daemon exiting
/// without its clean shutdown).
pub fn kill_all() {
    let ledgers: Vec<Arc<Ledger>> = LEDGERS.locked().iter().filter_map(Weak::upgrade).collect();
    let groups: Vec<(i32, String)> =
        ledgers.iter().flat_map(|l| l.live().iter().map(|(p, m)| (*p, m.clone())).collect::<Vec<_>>()).collect();
    for (pgid, marker) in groups {
        if pgid > 1 && killpg(Pid::from_raw(pgid), None).is_ok() {
            for pid in super::descendants(pgid) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
        for pid in super::marked(&marker) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Left, live_in};

    fn left(pgid: i32, started: &str, leader: &str, sweep: &str) -> Left {
        Left { pgid, started: started.into(), leader: leader.into(), sweep: sweep.into() }
    }

    #[test]
    fn the_live_groups_of_a_ledger() {
        let text = "+ 10 111 aaa\n+ 11 112 bbb\n- 10\n+ 12 113 ccc\n+ 10 114 ddd\ngarbage\n- 99\n+ 13\n- 12\n\
                    + 14 115 warm\n+ 14 115 warm call\n";
        // 10 ended and was started again (a reused pid), 12 ended, 13's
        // line is torn, 14 was recorded again for its call.
        assert_eq!(
            live_in(text),
            vec![left(11, "112", "bbb", "bbb"), left(10, "114", "ddd", "ddd"), left(14, "115", "warm", "call")]
        );
        // A torn last line (a crash mid-write) names nothing.
        assert_eq!(live_in("+ 20 1 m\n+ 21 2").len(), 1);
    }

    /// Two daemons in one process (as in tests): each records in its own
    /// state directory, and ends only what its own predecessor left.
    #[test]
    fn each_daemon_keeps_its_own_ledger() {
        let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, _) = super::Ledger::open(a_dir.path());
        let (b, _) = super::Ledger::open(b_dir.path());
        let me = std::process::id() as i32;
        a.record(me, "of-a");
        b.record(me, "of-b");
        let text = |d: &tempfile::TempDir| std::fs::read_to_string(d.path().join("procs/ledger")).unwrap();
        assert!(text(&a_dir).contains("of-a") && !text(&a_dir).contains("of-b"), "{}", text(&a_dir));
        assert!(text(&b_dir).contains("of-b") && !text(&b_dir).contains("of-a"), "{}", text(&b_dir));
        b.forget(me);
        assert_eq!(live_in(&text(&a_dir)).len(), 1, "b's end is not a's");
        assert!(live_in(&text(&b_dir)).is_empty());
    }

    /// Compaction, whichever line crosses the limit, from several
    /// threads: it once locked the live set under the ledger while a
    /// group's end locked them the other way round (and itself, when its
    /// own line crossed), and the daemon hung.
    #[test]
    fn recording_across_compactions_never_hangs_and_keeps_what_is_live() {
        let dir = tempfile::tempdir().unwrap();
        let (ledger, _) = super::Ledger::open(dir.path());
        let me = std::process::id() as i32;
        let (done, finished) = std::sync::mpsc::channel();
        for t in 0..4 {
            let done = done.clone();
            let ledger = ledger.clone();
            std::thread::spawn(move || {
                for i in 0..3_000 {
                    // Our own pid (a start time is needed), and others the
                    // live map alone keeps.
                    ledger.record_as(me, "leader", &format!("m{t}-{i}"));
                    ledger.forget(me);
                }
                done.send(()).unwrap();
            });
        }
        for _ in 0..4 {
            finished.recv_timeout(std::time::Duration::from_secs(120)).expect("the ledger hung");
        }
        ledger.record(me, "last");
        let text = std::fs::read_to_string(dir.path().join("procs/ledger")).unwrap();
        assert!(text.len() < 300 * 1024, "compacted: {} bytes", text.len());
        let live = live_in(&text);
        assert_eq!(live.len(), 1, "{live:?}");
        assert_eq!(live[0].leader, "last");
    }
}
