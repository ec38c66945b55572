//! The session's workspace as files, for `workspace/files` and
//! `workspace/read` (what `agentctl mcp` serves as resources): a file is
//! listed only when the session may Read it unasked by its path, and read
//! only through the whole admission of a Read call that would run unasked.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use agentd_protocol::ErrorCode;
use agentd_protocol::workspace::{MAX_READ_BYTES, WorkspaceFile, WorkspaceFilesResult, WorkspaceReadResult};

use super::Session;

/// Entries one page's walk visits at most: a page of a huge tree ends
/// early (with a cursor) rather than walking it all.
const MAX_VISITED: usize = 200_000;

/// Reads of one session served at once (each up to 8 MiB).
pub(super) const READ_SLOTS: usize = 2;

impl Session {
    /// A page of the workspace's files the session may Read unasked
    /// (blocking: it walks the file system). Nothing when the session does
    /// not offer Read.
    pub fn files(&self, cursor: Option<&Path>, prefix: &str, limit: usize) -> Result<WorkspaceFilesResult, String> {
        if !self.executor.offers("Read") {
            return Err("this session does not offer the Read tool".into());
        }
        let root = self.executor.workspace_dir();
        Ok(page(&root, cursor, prefix, limit, &|p| self.executor.listable(p)))
    }

    /// A file a Read call would read unasked, or why not: admitted (with
    /// the session's PreToolUse hooks for Read), opened, and the opened
    /// file's real path checked again (a link swapped meanwhile).
    pub async fn read_file(
        self: std::sync::Arc<Self>,
        path: String,
        content: bool,
    ) -> Result<WorkspaceReadResult, (ErrorCode, String)> {
        let admitted = self
            .executor
            .readable_unasked(&path)
            .await
            .map_err(|e| (ErrorCode::PermissionDenied, format!("{path}: {e}")))?;
        let _slot = self.read_slots.acquire().await.map_err(|_| (ErrorCode::ShuttingDown, "closed".to_owned()))?;
        let session = self.clone();
        let recheck = move |real: &Path| session.executor.listable(real) && session.executor.inside_workspace(real);
        tokio::task::spawn_blocking(move || read(&admitted, content, &recheck))
            .await
            .map_err(|e| (ErrorCode::InternalError, format!("failed: {e}")))?
    }
}

/// One page of the workspace's files: in walk order (each directory's
/// entries by name, depth first; the order of `Path`'s comparison, so a
/// cursor is a relative path and the walk skips whole directories before
/// it), what `.gitignore` files and hidden names leave out skipped, then
/// what `listable` refuses.
fn page(
    root: &Path,
    cursor: Option<&Path>,
    prefix: &str,
    limit: usize,
    listable: &dyn Fn(&Path) -> bool,
) -> WorkspaceFilesResult {
    let (owned_prefix, owned_cursor) = (prefix.to_owned(), cursor.map(Path::to_path_buf));
    let keep_dir = move |rel: &Path| {
        let dir = rel.to_string_lossy();
        let p = &owned_prefix;
        let fits = p.is_empty() || p.starts_with(&*dir) || dir.starts_with(p.as_str());
        let after = owned_cursor.as_deref().is_none_or(|c| c.starts_with(rel) || rel > c);
        fits && after
    };
    let walk = ignore::WalkBuilder::new(root)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry({
            let root = root.to_path_buf();
            move |e| {
                let rel = e.path().strip_prefix(&root).unwrap_or(e.path());
                rel.as_os_str().is_empty() || !e.file_type().is_some_and(|t| t.is_dir()) || keep_dir(rel)
            }
        })
        .build();
    let mut files = Vec::new();
    let mut last: Option<PathBuf> = None;
    for (visited, entry) in walk.flatten().enumerate() {
        if visited >= MAX_VISITED {
            // A cursor where the walk stopped: the next page goes on.
            return WorkspaceFilesResult { files, next_cursor: last.map(|l| l.to_string_lossy().into_owned()) };
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        if cursor.is_some_and(|c| rel <= c) || !rel.to_string_lossy().starts_with(prefix) {
            continue;
        }
        last = Some(rel.to_path_buf());
        if files.len() == limit {
            let end = files.last().map(|f: &WorkspaceFile| f.relative.clone());
            return WorkspaceFilesResult { files, next_cursor: end };
        }
        let real = std::fs::canonicalize(entry.path()).unwrap_or_else(|_| entry.path().to_path_buf());
        if !listable(&real) {
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        files.push(WorkspaceFile {
            path: entry.path().to_string_lossy().into_owned(),
            relative: rel.to_string_lossy().into_owned(),
            size,
            mime_type: mime_type(rel, None).to_owned(),
        });
    }
    WorkspaceFilesResult { files, next_cursor: None }
}

/// A file `readable_unasked` admitted, opened by agentd's checked open
/// (no secret file, whatever path led to it).
fn read(
    path: &crate::fs::WsPath,
    content: bool,
    recheck: &dyn Fn(&Path) -> bool,
) -> Result<WorkspaceReadResult, (ErrorCode, String)> {
    let refused = |e: String| (ErrorCode::PermissionDenied, e);
    // What was opened, whatever the path led to by now.
    let (file, meta, opened) = crate::fs::open_file_seen(path).map_err(|e| refused(e.to_string()))?;
    if !recheck(&opened) {
        return Err(refused(format!(
            "{}: changed while it was checked (not readable without asking)",
            path.abs().display()
        )));
    }
    if !meta.is_file() {
        return Err((ErrorCode::InvalidParams, "not a regular file".into()));
    }
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    let real = opened;
    let mut result = WorkspaceReadResult {
        path: real.to_string_lossy().into_owned(),
        mime_type: mime_type(&real, None).to_owned(),
        size: meta.len(),
        modified_ms,
        text: None,
        blob: None,
    };
    if !content {
        return Ok(result);
    }
    if meta.len() > MAX_READ_BYTES {
        return Err((
            ErrorCode::RequestTooLarge,
            format!("{} is {} bytes; at most {} are read", path.abs().display(), meta.len(), MAX_READ_BYTES),
        ));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_READ_BYTES + 1).read_to_end(&mut bytes).map_err(|e| refused(e.to_string()))?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err((ErrorCode::RequestTooLarge, "the file grew past the limit while it was read".into()));
    }
    result.mime_type = mime_type(&real, Some(&bytes)).to_owned();
    // Text that is mostly control characters would grow sixfold as JSON
    // (`\u0001`): it goes as base64 like other bytes.
    let controls = bytes.iter().filter(|&&b| (b < 0x20 && !b"\t\n\r\x0c\x1b".contains(&b)) || b == 0x7f).count();
    match String::from_utf8(bytes) {
        Ok(text) if controls * 100 <= text.len() => result.text = Some(text),
        Ok(text) => result.blob = Some(crate::tools::read::base64(text.as_bytes())),
        Err(e) => result.blob = Some(crate::tools::read::base64(e.as_bytes())),
    }
    Ok(result)
}

/// A media type from a file's name (and, when known, its bytes).
fn mime_type(path: &Path, bytes: Option<&[u8]>) -> &'static str {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let known = match ext.as_deref() {
        Some("md" | "markdown") => "text/markdown",
        Some("html" | "htm") => "text/html",
        Some("css") => "text/css",
        Some("csv") => "text/csv",
        Some("js" | "mjs" | "cjs") => "text/javascript",
        Some("json") => "application/json",
        Some("xml") => "application/xml",
        Some("toml") => "application/toml",
        Some("yaml" | "yml") => "application/yaml",
        Some("pdf") => "application/pdf",
        Some("png") => "image/png",
        Some("jpg" | "jpeg") => "image/jpeg",
        Some("gif") => "image/gif",
        Some("webp") => "image/webp",
        Some("svg") => "image/svg+xml",
        Some("wav") => "audio/wav",
        Some("zip") => "application/zip",
        Some("gz" | "tgz") => "application/gzip",
        Some("wasm") => "application/wasm",
        _ => "",
    };
    let binary = |b: &[u8]| {
        std::str::from_utf8(b).is_err() || b.iter().filter(|&&c| c < 0x09 || c == 0x7f).count() * 100 > b.len()
    };
    match (known, bytes) {
        ("", Some(b)) if binary(b) => "application/octet-stream",
        ("", _) => "text/plain",
        (k, _) => k,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, f).unwrap();
        }
        dir
    }

    fn all_pages(root: &Path, limit: usize, prefix: &str, listable: &dyn Fn(&Path) -> bool) -> Vec<Vec<String>> {
        let mut pages = Vec::new();
        let mut cursor: Option<PathBuf> = None;
        loop {
            let p = page(root, cursor.as_deref(), prefix, limit, listable);
            pages.push(p.files.iter().map(|f| f.relative.clone()).collect());
            match p.next_cursor {
                Some(c) => cursor = Some(PathBuf::from(c)),
                None => return pages,
            }
        }
    }

    #[test]
    fn pages_cover_every_file_once_in_walk_order() {
        // `a-c` sorts before `a/b` as a string but after it as a path.
        let dir = tree(&["a/b", "a-c", "a/z/y", "b", "c/d/e", ".hidden", "z"]);
        let pages = all_pages(dir.path(), 2, "", &|_| true);
        let flat: Vec<String> = pages.concat();
        assert_eq!(flat, ["a/b", "a/z/y", "a-c", "b", "c/d/e", "z"]);
        assert!(pages.iter().all(|p| p.len() <= 2), "{pages:?}");
        assert_eq!(all_pages(dir.path(), 1000, "", &|_| true), vec![flat]);
    }

    #[test]
    fn refused_files_are_skipped_and_do_not_end_a_page_early() {
        let dir = tree(&["a", "b", "secret", "c"]);
        let pages = all_pages(dir.path(), 2, "", &|p| !p.ends_with("secret"));
        assert_eq!(pages.concat(), ["a", "b", "c"]);
    }

    #[test]
    fn a_prefix_lists_only_what_starts_with_it() {
        let dir = tree(&["src/main.rs", "src/lib.rs", "srcx/a", "docs/x"]);
        assert_eq!(all_pages(dir.path(), 10, "src/m", &|_| true).concat(), ["src/main.rs"]);
        assert_eq!(all_pages(dir.path(), 10, "src", &|_| true).concat(), ["src/lib.rs", "src/main.rs", "srcx/a"]);
    }

    #[test]
    fn a_file_whose_opened_path_fails_the_recheck_is_refused() {
        let dir = tree(&["a", "b"]);
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let path = crate::fs::resolve(&root, &root, "a").unwrap();
        let read_ok = read(&path, true, &|p| p.ends_with("a")).unwrap();
        assert_eq!(read_ok.text.as_deref(), Some("a"));
        // What was opened is checked, not the path asked for: a link
        // swapped in leads to `b`, which the check refuses.
        std::fs::remove_file(root.join("a")).unwrap();
        std::os::unix::fs::symlink("b", root.join("a")).unwrap();
        let (code, message) = read(&path, true, &|p| p.ends_with("a")).unwrap_err();
        assert_eq!(code, ErrorCode::PermissionDenied);
        assert!(message.contains("changed while it was checked"), "{message}");
    }

    #[test]
    fn media_types_come_from_the_name_then_the_bytes() {
        assert_eq!(mime_type(Path::new("x.md"), None), "text/markdown");
        assert_eq!(mime_type(Path::new("x"), Some(b"hi")), "text/plain");
        assert_eq!(mime_type(Path::new("x"), Some(&[0xff, 0xfe, 0])), "application/octet-stream");
        assert_eq!(mime_type(Path::new("X.PNG"), Some(&[0x89])), "image/png");
    }
}
