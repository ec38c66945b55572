//! Output capture that never grows with the output: the first and last
//! halves of the limit are kept in memory, the middle is counted and
//! elided; everything goes to a file (itself capped) whose path the result
//! gives.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Most bytes written to the full-output file.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;
/// What a session keeps of its calls' outputs (full command output,
/// monitors' logs, MCP results' files), at most: past it, the oldest go.
pub const SESSION_OUTPUT_BYTES: u64 = 256 * 1024 * 1024;

/// Keeps the outputs in `dir` within `budget` bytes: the files calls wrote
/// there (commands' and monitors' logs, MCP results' files) count, and the
/// oldest go first — never one of `keep`, nor one written in the last
/// minute (a call may still be writing it). What was removed, in a
/// sentence, when anything was.
pub fn keep_within(dir: &std::path::Path, budget: u64, keep: &[std::path::PathBuf]) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let mut files: Vec<(std::time::SystemTime, u64, std::path::PathBuf)> = Vec::new();
    let mut total = 0u64;
    let recent = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let output = (name.starts_with("bash-") || name.starts_with("monitor-")) && name.ends_with(".log")
            || name.starts_with("mcp-");
        // Not following links: a link is not an output.
        let Ok(meta) = entry.metadata() else { continue };
        if !output || !meta.is_file() {
            continue;
        }
        // Blocks on disk: a sparse file counts what it takes.
        let size = meta.blocks() * 512;
        total += size;
        let path = entry.path();
        let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
        if !keep.contains(&path) && modified < recent {
            files.push((modified, size, path));
        }
    }
    if total <= budget {
        return None;
    }
    files.sort();
    let (mut count, mut freed) = (0usize, 0u64);
    for (_, size, path) in files {
        if total - freed <= budget {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            count += 1;
            freed += size;
        }
    }
    (count > 0).then(|| {
        format!(
            "the session's outputs passed {} MiB: its {count} oldest output file(s) ({} MiB) were removed",
            budget >> 20,
            freed >> 20
        )
    })
}

/// Captures one command's output.
pub struct Capture {
    limit_chars: usize,
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total_bytes: u64,
    total_chars: u64,
    /// Where the full output goes once it outgrows the limit.
    path: Option<PathBuf>,
    file: Option<(std::fs::File, PathBuf)>,
    file_bytes: u64,
}

/// What a capture holds at the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaptureSummary {
    /// The output, its middle elided when it was longer than the limit.
    pub text: String,
    /// Characters left out of `text`.
    pub elided_chars: u64,
    /// All bytes the command wrote.
    pub total_bytes: u64,
    /// All characters the command wrote.
    pub total_chars: u64,
    /// Where the full output is (when a file could be written).
    pub file: Option<PathBuf>,
    /// The file stopped at [`MAX_FILE_BYTES`].
    pub file_truncated: bool,
}

impl Capture {
    /// A capture keeping about `limit_chars` characters. Once the output
    /// outgrows that, all of it goes to `file` (when given; errors there
    /// only lose the file). Short output needs no file: the result holds it.
    pub fn new(limit_chars: usize, file: Option<&Path>) -> Self {
        Capture {
            limit_chars: limit_chars.max(2),
            head: Vec::new(),
            tail: std::collections::VecDeque::new(),
            total_bytes: 0,
            total_chars: 0,
            path: file.map(Path::to_owned),
            file: None,
            file_bytes: 0,
        }
    }

    /// Opens the file and writes what is held so far: until the limit is
    /// passed, head and tail hold every byte.
    fn open_file(&mut self) {
        let Some(path) = self.path.take() else { return };
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // A command may write where this file goes (a workspace holding the
        // state directory): never through a link, never into a FIFO.
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&path);
        let opened = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(&path);
        match opened {
            Ok(mut f) => {
                let held: Vec<u8> = self.head.iter().chain(self.tail.iter()).copied().collect();
                if f.write_all(&held).is_ok() {
                    self.file_bytes = held.len() as u64;
                }
                self.file = Some((f, path));
            }
            Err(e) => tracing::warn!(path = %path.display(), "cannot keep the full output: {e}"),
        }
    }

    /// The capture with its file made at once, before any output (a
    /// background job's, whose path is given as it starts).
    pub fn opened(mut self) -> Self {
        self.open_file();
        self
    }

    /// The file once it is made.
    pub fn file_path(&self) -> Option<PathBuf> {
        self.file.as_ref().map(|(_, p)| p.clone())
    }

    /// Adds output.
    pub fn push(&mut self, bytes: &[u8]) {
        let chars = bytes.iter().filter(|b| (**b & 0xC0) != 0x80).count() as u64;
        if self.file.is_none() && self.path.is_some() && self.total_chars + chars > self.limit_chars as u64 {
            self.open_file();
        }
        self.total_bytes += bytes.len() as u64;
        self.total_chars += chars;
        if let Some((file, _)) = &mut self.file
            && self.file_bytes < MAX_FILE_BYTES
        {
            let room = (MAX_FILE_BYTES - self.file_bytes) as usize;
            let part = &bytes[..bytes.len().min(room)];
            if file.write_all(part).is_ok() {
                self.file_bytes += part.len() as u64;
            }
        }
        // Four bytes a character at most: keep enough bytes for half the
        // limit in characters at each end.
        let half_bytes = self.limit_chars / 2 * 4;
        let mut rest = bytes;
        if self.head.len() < half_bytes {
            let take = rest.len().min(half_bytes - self.head.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        self.tail.extend(rest);
        while self.tail.len() > half_bytes {
            self.tail.pop_front();
        }
    }

    /// The output so far.
    pub fn summary(&self) -> CaptureSummary {
        let file = self.file.as_ref().map(|(_, p)| p.clone());
        let file_truncated = self.total_bytes > MAX_FILE_BYTES;
        if self.total_chars as usize <= self.limit_chars {
            let mut all = self.head.clone();
            all.extend(self.tail.iter());
            let text = String::from_utf8_lossy(&all).into_owned();
            return CaptureSummary {
                text,
                elided_chars: 0,
                total_bytes: self.total_bytes,
                total_chars: self.total_chars,
                file,
                file_truncated,
            };
        }
        let half = self.limit_chars / 2;
        let head: String = String::from_utf8_lossy(&self.head).chars().take(half).collect();
        let tail_bytes: Vec<u8> = self.tail.iter().copied().collect();
        let tail_text = String::from_utf8_lossy(&tail_bytes).into_owned();
        let tail_chars: Vec<char> = tail_text.chars().collect();
        let tail: String = tail_chars[tail_chars.len().saturating_sub(half)..].iter().collect();
        let elided = self.total_chars.saturating_sub((head.chars().count() + tail.chars().count()) as u64);
        let where_ = match &file {
            Some(p) => format!("; the full output is in {}", p.display()),
            None => String::new(),
        };
        let text = format!("{head}\n\n[… {elided} characters elided{where_} …]\n\n{tail}");
        CaptureSummary {
            text,
            elided_chars: elided,
            total_bytes: self.total_bytes,
            total_chars: self.total_chars,
            file,
            file_truncated,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut c = Capture::new(100, None);
        c.push(b"hello ");
        c.push("wörld".as_bytes());
        let s = c.summary();
        assert_eq!((s.text.as_str(), s.elided_chars, s.total_chars), ("hello wörld", 0, 11));
    }

    #[test]
    fn long_output_keeps_both_ends_in_bounded_memory_and_the_file_has_it_all() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.log");
        let mut c = Capture::new(20, Some(&path));
        c.push(b"BEGIN");
        for _ in 0..10_000 {
            c.push(b"y\n");
        }
        c.push(b"END");
        assert!(c.head.len() + c.tail.len() <= 2 * 10 * 4, "memory stays bounded");
        let s = c.summary();
        assert!(s.text.starts_with("BEGIN") && s.text.ends_with("END"), "{}", s.text);
        assert_eq!(s.total_chars, 20_008);
        assert_eq!(s.elided_chars, 20_008 - 20);
        assert!(s.text.contains("20 characters") || s.text.contains(&format!("{} characters elided", s.elided_chars)));
        assert!(s.text.contains(path.to_str().unwrap()));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 20_008);
    }
}

#[cfg(test)]
mod budget_tests {
    use super::keep_within;

    /// Past the bound, the oldest outputs go first; a file kept (a running
    /// job's, the call's own) and files of other kinds stay.
    #[test]
    fn the_oldest_outputs_go_first_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, age_s: u64| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![7u8; 100_000]).unwrap();
            let when = std::time::SystemTime::now() - std::time::Duration::from_secs(age_s);
            std::fs::File::options().write(true).open(&path).unwrap().set_modified(when).unwrap();
            path
        };
        let (oldest, old, kept, newest) =
            (write("bash-1.log", 400), write("mcp-x-1.bin", 300), write("bash-2.log", 350), write("bash-3.log", 1));
        let plan = write("plan.md", 500);
        assert_eq!(keep_within(dir.path(), 10 << 20, &[]), None, "within the bound nothing goes");
        let said = keep_within(dir.path(), 250_000, std::slice::from_ref(&kept)).unwrap();
        assert!(said.contains("2 oldest"), "{said}");
        assert!(!oldest.exists() && !old.exists(), "the oldest two went");
        assert!(kept.exists() && newest.exists() && plan.exists());
    }
}
