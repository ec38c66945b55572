//! The history's bounds, conflicts and order, on a temporary workspace.

use super::*;

/// A workspace, a history beside it, and a way to record a change the way
/// Bash will: the earlier content moved aside, the new one put in place.
struct Bench {
    _tmp: tempfile::TempDir,
    ws: PathBuf,
    aside: PathBuf,
    history: History,
}

impl Bench {
    fn new(bounds: Bounds) -> Bench {
        let tmp = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(tmp.path()).unwrap().join("ws");
        let aside = ws.with_file_name("aside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&aside).unwrap();
        let history = History::open(ws.with_file_name("history"), bounds, crate::fs::pending::Records::NONE);
        Bench { _tmp: tmp, ws, aside, history }
    }

    /// Writes `content` (None: removes) at `name` as call `call` of `turn`.
    fn write(&self, turn: &str, call: &str, name: &str, content: Option<&str>) {
        let path = self.ws.join(name);
        let before = if path.exists() {
            let kept = self.aside.join(format!("{call}-{name}"));
            std::fs::rename(&path, &kept).unwrap();
            Before::Content(kept)
        } else {
            Before::Absent
        };
        let kind = match (&before, content) {
            (Before::Absent, _) => ChangeKind::Created,
            (_, None) => ChangeKind::Deleted,
            _ => ChangeKind::Modified,
        };
        if let Some(c) = content {
            std::fs::write(&path, c).unwrap();
        }
        let change = Change { root: &self.ws, path: &path, kind, from: None };
        self.history.record(turn, call, change, before).unwrap();
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.ws.join(name)).ok()
    }
}

#[test]
fn rewinding_a_turn_undoes_it_and_every_later_turn_newest_first() {
    let b = Bench::new(Bounds::default());
    std::fs::write(b.ws.join("a"), "0").unwrap();
    b.write("t1", "c1", "a", Some("1"));
    b.write("t1", "c2", "new", Some("n"));
    b.write("t2", "c3", "a", Some("2"));
    b.write("t3", "c4", "a", None);
    let r = b.history.rewind(&Target::Turn("t1".into()), false, false).unwrap();
    assert!(r.conflicts.is_empty() && r.not_rewindable.is_empty(), "{r:?}");
    assert_eq!(r.restored.len(), 4, "{r:?}");
    assert_eq!((b.read("a").as_deref(), b.read("new")), (Some("0"), None));
    assert!(b.history.turn_ids().is_empty(), "rewound entries leave the history");
}

#[test]
fn rewinding_a_call_keeps_what_came_before_it() {
    let b = Bench::new(Bounds::default());
    b.write("t1", "c1", "a", Some("1"));
    b.write("t1", "c2", "a", Some("2"));
    b.write("t1", "c3", "a", Some("3"));
    b.history.rewind(&Target::Call("c2".into()), false, false).unwrap();
    assert_eq!(b.read("a").as_deref(), Some("1"));
    assert_eq!(b.history.changes_of("t1", "c1").len(), 1);
    assert!(b.history.changes_of("t1", "c2").is_empty());
}

#[test]
fn a_file_changed_since_is_a_conflict_until_forced_and_dry_run_changes_nothing() {
    let b = Bench::new(Bounds::default());
    b.write("t1", "c1", "a", Some("1"));
    std::fs::write(b.ws.join("a"), "by the user").unwrap();
    let dry = b.history.rewind(&Target::Turn("t1".into()), true, true).unwrap();
    assert_eq!((dry.restored.len(), b.read("a").as_deref()), (1, Some("by the user")));
    let r = b.history.rewind(&Target::Turn("t1".into()), false, false).unwrap();
    assert_eq!((r.restored.len(), r.conflicts.len()), (0, 1), "{r:?}");
    assert!(r.conflicts[0].reason.contains("changed since"), "{r:?}");
    assert_eq!(b.read("a").as_deref(), Some("by the user"));
    let r = b.history.rewind(&Target::Turn("t1".into()), false, true).unwrap();
    assert_eq!(r.restored.len(), 1, "{r:?}");
    assert_eq!(b.read("a"), None, "created by the turn: removed");
}

#[test]
fn the_bounds_drop_old_turns_and_refuse_large_files() {
    let b = Bench::new(Bounds { turns: 2, total_bytes: 8, file_bytes: 4 });
    std::fs::write(b.ws.join("big"), "12345").unwrap();
    b.write("t1", "c1", "big", Some("x"));
    let lost = b.history.rewind(&Target::Turn("t1".into()), true, false).unwrap();
    assert_eq!(lost.not_rewindable.len(), 1, "{lost:?}");
    assert!(lost.not_rewindable[0].reason.contains("over the 4 bytes"), "{lost:?}");
    b.write("t2", "c2", "big", Some("yyy"));
    b.write("t3", "c3", "f", Some("z"));
    assert_eq!(b.history.turn_ids(), ["t2", "t3"], "20 turns at most (here 2): the oldest goes whole");
    // Past 8 bytes kept, the older turn goes whole; then the new content is not kept.
    std::fs::write(b.ws.join("g"), "4444").unwrap();
    b.write("t3", "c4", "g", Some("w"));
    b.write("t3", "c5", "f", Some("zz"));
    std::fs::write(b.ws.join("h"), "4444").unwrap();
    b.write("t3", "c6", "h", Some("v"));
    assert_eq!(b.history.turn_ids(), ["t3"]);
    let r = b.history.rewind(&Target::Call("c6".into()), true, false).unwrap();
    assert!(r.not_rewindable[0].reason.contains("history is full"), "{r:?}");
}

#[test]
fn the_history_survives_reopening_and_orphan_blobs_go() {
    let b = Bench::new(Bounds::default());
    std::fs::write(b.ws.join("a"), "0").unwrap();
    b.write("t1", "c1", "a", Some("1"));
    std::fs::write(b.history.blobs().join("999"), "orphan").unwrap();
    let again = History::open(b.history.dir.clone(), Bounds::default(), crate::fs::pending::Records::NONE);
    assert!(!again.blobs().join("999").exists());
    let d = again.diff(None).unwrap();
    assert_eq!(d.turn_id, "t1");
    assert!(d.diff.contains("-0") && d.diff.contains("+1"), "{}", d.diff);
    again.rewind(&Target::Turn("t1".into()), false, false).unwrap();
    assert_eq!(b.read("a").as_deref(), Some("0"));
}

#[test]
fn a_diff_notes_binary_files_with_their_sizes() {
    let b = Bench::new(Bounds::default());
    std::fs::write(b.ws.join("bin"), b"\0\x01\x02").unwrap();
    b.write("t1", "c1", "bin", Some("text now"));
    let d = b.history.diff(Some("t1")).unwrap();
    assert_eq!(d.diff, "Binary file bin: 3 bytes -> 8 bytes\n");
    assert_eq!(d.changes[0].kind, ChangeKind::Modified);
}
