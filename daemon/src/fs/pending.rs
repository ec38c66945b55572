//! Temporary files of writes in progress, recorded in the state directory
//! (`<state-dir>/pending-writes/`, one small file each naming the temporary
//! file) from before the file is created until it is renamed or removed. A
//! daemon that starts removes what a dead one left: only files whose name
//! is agentd's own (`.<name>.agentd-<32 hex>.tmp`), never a user's.

use std::path::{Path, PathBuf};

/// Where a daemon records its writes in progress (its sessions' tools
/// get it from their context); nowhere in unit tests.
#[derive(Debug, Clone, Default)]
pub struct Records(Option<PathBuf>);

impl Records {
    /// Records kept nowhere.
    pub const NONE: Records = Records(None);

    /// The records of the daemon whose state directory is `state_dir`.
    pub fn in_state_dir(state_dir: &Path) -> Records {
        Records(Some(state_dir.join(DIR)))
    }
}

const DIR: &str = "pending-writes";

/// Makes the directory of the records in `state_dir` and removes what a
/// previous daemon left unfinished; returns how many temporary files
/// were removed.
pub fn clean(state_dir: &Path) -> usize {
    use std::os::unix::fs::DirBuilderExt;
    let dir = state_dir.join(DIR);
    if std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&dir).is_err() {
        return 0;
    }
    let mut removed = 0;
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        if let Ok(target) = std::fs::read_to_string(entry.path()) {
            let target = PathBuf::from(target);
            if is_ours(&target) && super::remove_no_links(&target, super::Removable::NotADirectory) {
                tracing::info!("removed {}, left by a write a previous daemon did not finish", target.display());
                removed += 1;
            }
        }
        let _ = std::fs::remove_file(entry.path());
    }
    removed
}

/// Whether `path` names one of agentd's temporary files.
pub fn is_ours(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return false };
    let Some(rest) = name.strip_prefix('.').and_then(|n| n.strip_suffix(".tmp")) else { return false };
    let Some((_, id)) = rest.rsplit_once(".agentd-") else { return false };
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A write in progress; its record goes when this is dropped.
pub struct Pending(Option<PathBuf>);

impl Pending {
    /// Records the temporary file `tmp` in `records` (nothing when they
    /// are kept nowhere).
    pub fn record(records: &Records, tmp: &Path) -> Pending {
        let Some(dir) = &records.0 else { return Pending(None) };
        let Some(name) = tmp.file_name() else { return Pending(None) };
        let record = dir.join(name);
        match std::fs::write(&record, tmp.as_os_str().as_encoded_bytes()) {
            Ok(()) => Pending(Some(record)),
            Err(_) => Pending(None),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(record) = self.0.take() {
            let _ = std::fs::remove_file(record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_agentds_own_names_are_ours() {
        assert!(is_ours(Path::new("/w/.notes.txt.agentd-0123456789abcdef0123456789abcdef.tmp")));
        assert!(!is_ours(Path::new("/w/notes.txt")));
        assert!(!is_ours(Path::new("/w/.notes.txt.agentd-xyz.tmp")));
        assert!(!is_ours(Path::new("/w/.notes.txt.agentd-0123456789abcdef0123456789abcdef.tmp.bak")));
        assert!(!is_ours(Path::new("/w/.x.tmp")));
    }

    #[test]
    fn each_daemon_records_its_writes_in_its_own_state_directory() {
        let (work, a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        assert_eq!((clean(a.path()), clean(b.path())), (0, 0));
        let (to_a, to_b) = (Records::in_state_dir(a.path()), Records::in_state_dir(b.path()));
        let listed = |d: &tempfile::TempDir| std::fs::read_dir(d.path().join(DIR)).unwrap().count();
        let tmp = work.path().join(".notes.txt.agentd-0123456789abcdef0123456789abcdef.tmp");
        let pending = Pending::record(&to_b, &tmp);
        assert_eq!((listed(&a), listed(&b)), (0, 1));
        drop(pending);
        assert_eq!(listed(&b), 0);
        // A daemon that died mid-write: the next on its state directory
        // removes the temporary file; the other's finds nothing.
        std::fs::write(&tmp, "half").unwrap();
        std::mem::forget(Pending::record(&to_a, &tmp));
        assert_eq!(Pending::record(&Records::NONE, &tmp).0, None);
        assert_eq!((clean(b.path()), clean(a.path())), (0, 1));
        assert!(!tmp.exists());
    }

    /// A record left by a dead daemon (forged here as it would be
    /// left) names a user's file, or agentd's name now taken by a link
    /// to a user's file: the next start removes neither the file nor
    /// what the link leads to.
    #[test]
    fn clean_removes_only_agentds_own_names_never_what_a_link_leads_to() {
        let (_work, work) = crate::fs::real_temp_dir();
        let (_state, state) = crate::fs::real_temp_dir();
        let records = Records::in_state_dir(&state);
        assert_eq!(clean(&state), 0);
        std::fs::write(work.join("notes.txt"), "mine").unwrap();
        std::fs::write(work.join(".notes.txt.agentd-0123.tmp"), "mine too").unwrap();
        let link = work.join(".notes.txt.agentd-0123456789abcdef0123456789abcdef.tmp");
        std::os::unix::fs::symlink(work.join("notes.txt"), &link).unwrap();
        for named in [work.join("notes.txt"), work.join(".notes.txt.agentd-0123.tmp"), link.clone()] {
            std::mem::forget(Pending::record(&records, &named));
        }
        assert_eq!(clean(&state), 1, "the link alone");
        assert!(link.symlink_metadata().is_err());
        assert_eq!(std::fs::read_to_string(work.join("notes.txt")).unwrap(), "mine");
        assert_eq!(std::fs::read_to_string(work.join(".notes.txt.agentd-0123.tmp")).unwrap(), "mine too");
        assert_eq!(std::fs::read_dir(state.join(DIR)).unwrap().count(), 0, "the records go");
    }

    /// A daemon killed mid-write in `sub/`; before the next starts,
    /// `sub` is swapped for a link to a directory elsewhere holding a
    /// file of the same name. The next start must not remove through
    /// the link.
    #[test]
    fn clean_never_removes_through_a_directory_swapped_for_a_link() {
        let (_work, work) = crate::fs::real_temp_dir();
        let (_state, state) = crate::fs::real_temp_dir();
        let (_elsewhere, elsewhere) = crate::fs::real_temp_dir();
        let name = ".notes.txt.agentd-0123456789abcdef0123456789abcdef.tmp";
        std::fs::create_dir(work.join("sub")).unwrap();
        std::fs::write(work.join("sub").join(name), "half").unwrap();
        assert_eq!(clean(&state), 0);
        std::mem::forget(Pending::record(&Records::in_state_dir(&state), &work.join("sub").join(name)));
        std::fs::remove_dir_all(work.join("sub")).unwrap();
        std::fs::write(elsewhere.join(name), "someone else's").unwrap();
        std::os::unix::fs::symlink(&elsewhere, work.join("sub")).unwrap();
        clean(&state);
        assert!(elsewhere.join(name).exists(), "removed through a link swapped in for sub");
    }
}
