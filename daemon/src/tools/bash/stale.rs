//! `staleReadFileStateHint`: the files of the session's read cache (what
//! Read and Edit keep to refuse clobbering a changed file) whose
//! modification time moved while a command ran, named in the result so
//! the model Reads them again before its next Edit instead of meeting a
//! "changed since it was last read" refusal without knowing why. Claude
//! Code 2.1.332 adds the same note, in these words.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Most cached files looked at per command: a stat each before and after,
/// so a session that read thousands of files does not pay for all of them.
const MAX_WATCHED: usize = 2_000;

/// Files named in the note; the rest are counted.
const MAX_NAMED: usize = 5;

/// The cached files and their modification times before the command.
pub(super) struct Watched(Vec<(PathBuf, Option<i128>)>);

impl Watched {
    /// Takes the modification times of the session's cached files now.
    pub(super) fn before(files: impl Iterator<Item = PathBuf>) -> Self {
        Watched(
            files
                .take(MAX_WATCHED)
                .map(|path| {
                    let before = mtime(&path);
                    (path, before)
                })
                .collect(),
        )
    }

    /// The files whose modification time moved (or that are gone), in
    /// path order.
    pub(super) fn moved(self) -> Vec<PathBuf> {
        let mut moved: Vec<PathBuf> = self
            .0
            .into_iter()
            .filter(|(path, before)| before.is_some() && mtime(path) != *before)
            .map(|(p, _)| p)
            .collect();
        moved.sort();
        moved
    }
}

fn mtime(path: &Path) -> Option<i128> {
    let meta = std::fs::metadata(path).ok()?;
    Some(i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()))
}

/// The note, as Claude Code 2.1.332 words it, the paths relative to `cwd`
/// where they are inside it.
pub(super) fn hint(moved: &[PathBuf], cwd: &Path) -> Option<String> {
    if moved.is_empty() {
        return None;
    }
    let named: Vec<String> =
        moved.iter().take(MAX_NAMED).map(|p| p.strip_prefix(cwd).unwrap_or(p).display().to_string()).collect();
    let more = match moved.len().saturating_sub(MAX_NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    let files = if moved.len() == 1 { "file" } else { "files" };
    Some(format!(
        "[This command modified {} {files} you've previously read: {}{more}. Call Read before editing.]",
        moved.len(),
        named.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hint_names_five_files_and_counts_the_rest() {
        let cwd = Path::new("/ws");
        assert_eq!(hint(&[], cwd), None);
        assert_eq!(
            hint(&[PathBuf::from("/ws/src/a.rs")], cwd).as_deref(),
            Some("[This command modified 1 file you've previously read: src/a.rs. Call Read before editing.]")
        );
        let many: Vec<PathBuf> = (1..=7).map(|i| PathBuf::from(format!("/ws/{i}.rs"))).collect();
        assert_eq!(
            hint(&many, cwd).as_deref(),
            Some(
                "[This command modified 7 files you've previously read: 1.rs, 2.rs, 3.rs, 4.rs, 5.rs and 2 more. \
                 Call Read before editing.]"
            )
        );
        assert_eq!(
            hint(&[PathBuf::from("/elsewhere/b")], cwd).as_deref(),
            Some("[This command modified 1 file you've previously read: /elsewhere/b. Call Read before editing.]")
        );
    }

    #[test]
    fn only_files_whose_mtime_moved_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let (same, touched, gone) = (dir.path().join("same"), dir.path().join("touched"), dir.path().join("gone"));
        for f in [&same, &touched, &gone] {
            std::fs::write(f, "x").unwrap();
        }
        let watched = Watched::before([same.clone(), touched.clone(), gone.clone()].into_iter());
        let file = std::fs::File::options().write(true).open(&touched).unwrap();
        file.set_modified(std::time::SystemTime::UNIX_EPOCH).unwrap();
        std::fs::remove_file(&gone).unwrap();
        assert_eq!(watched.moved(), vec![gone, touched]);
    }
}
