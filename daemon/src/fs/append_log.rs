//! A record kept in the state directory as one append-only file of lines:
//! one appended when something starts and one when it is over, so that a
//! daemon starting after one that died finds what is left. Appending costs
//! no file creation (a file per record cost an inode made and removed, on
//! a Bash call's path). Past [`COMPACT_AT`] bytes the file is rewritten
//! with the open records' lines only. Used by the process ledger and the
//! placeholders' records.

use std::collections::HashMap;
use std::hash::Hash;
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// The log is rewritten with only the open records past this size.
const COMPACT_AT: u64 = 256 * 1024;

/// At most this much of a log is read at start (a forged or runaway one
/// cannot stall a start).
pub const READ_AT_MOST: u64 = 16 * 1024 * 1024;

/// An open log: the lines of the records not yet over, by key.
pub struct AppendLog<K> {
    path: PathBuf,
    file: std::fs::File,
    bytes: u64,
    open: HashMap<K, String>,
}

/// Opens `path` (0600, never through a link) for writing only.
fn create(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().append(true).create_new(true).mode(0o600).custom_flags(nix::libc::O_NOFOLLOW).open(path)
}

/// What is left of the log at `path` (at most [`READ_AT_MOST`] bytes; not
/// through a link).
pub fn read_left(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(f) = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NOFOLLOW).open(path) {
        let _ = f.take(READ_AT_MOST).read_to_string(&mut text);
    }
    text
}

impl<K: Hash + Eq> AppendLog<K> {
    /// A new, empty log at `path`, replacing what was there (read it
    /// first with [`read_left`]).
    pub fn start(path: PathBuf) -> std::io::Result<AppendLog<K>> {
        let _ = std::fs::remove_file(&path);
        let file = create(&path)?;
        Ok(AppendLog { path, file, bytes: 0, open: HashMap::new() })
    }

    /// Appends `line` (ending in a newline, one `write(2)`) opening the
    /// record `key`. Whether it was written.
    pub fn open(&mut self, key: K, line: String) -> bool {
        let written = self.append(&line);
        self.open.insert(key, line);
        written
    }

    /// Appends `line` closing the record `key`, if it is open.
    pub fn close(&mut self, key: &K, line: &str) {
        if self.open.remove(key).is_some() {
            self.append(line);
        }
    }

    fn append(&mut self, line: &str) -> bool {
        let written = self.file.write_all(line.as_bytes()).is_ok();
        if written {
            self.bytes += line.len() as u64;
        }
        if self.bytes > COMPACT_AT {
            self.compact();
        }
        written
    }

    /// Writes the open records' lines to a new file renamed over the log.
    fn compact(&mut self) {
        let body: String = self.open.values().map(String::as_str).collect();
        let tmp = self.path.with_extension("new");
        let _ = std::fs::remove_file(&tmp);
        let written = create(&tmp).and_then(|mut f| f.write_all(body.as_bytes()).map(|()| f));
        if let Ok(new) = written
            && std::fs::rename(&tmp, &self.path).is_ok()
        {
            self.file = new;
        }
        // Not rewritten: tried again only after as much again.
        self.bytes = body.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_open_records_survive_a_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log");
        let mut log = AppendLog::start(path.clone()).unwrap();
        let pad = "x".repeat(1000);
        for i in 0..600u32 {
            assert!(log.open(i, format!("+ {i} {pad}\n")));
            if i != 7 {
                log.close(&i, &format!("- {i}\n"));
            }
        }
        let text = read_left(&path);
        assert!(text.len() < COMPACT_AT as usize, "{}", text.len());
        assert!(text.contains("+ 7 "), "the open record is kept");
        assert!(!text.contains("+ 8 "), "closed ones are gone");
        // Closing what is not open writes nothing.
        let before = read_left(&path).len();
        log.close(&9999, "- 9999\n");
        assert_eq!(read_left(&path).len(), before);
    }
}
