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

impl Session {
    /// A page of the workspace's files the session may Read unasked
    /// (blocking: it walks the file system).
    pub fn files(&self, cursor: Option<&Path>, prefix: &str, limit: usize) -> WorkspaceFilesResult {
        let root = self.executor.workspace_dir();
        page(&root, cursor, prefix, limit, &|p| self.executor.listable(p))
    }

    /// A file a Read call would read unasked, or why not (blocking).
    pub fn read_file(&self, path: &str, content: bool) -> Result<WorkspaceReadResult, (ErrorCode, String)> {
        let admitted =
            self.executor.readable_unasked(path).map_err(|e| (ErrorCode::PermissionDenied, format!("{path}: {e}")))?;
        read(&admitted, content)
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
fn read(path: &crate::fs::WsPath, content: bool) -> Result<WorkspaceReadResult, (ErrorCode, String)> {
    let refused = |e: String| (ErrorCode::PermissionDenied, e);
    let (file, meta) = crate::fs::open_file(path).map_err(|e| refused(e.to_string()))?;
    if !meta.is_file() {
        return Err((ErrorCode::InvalidParams, "not a regular file".into()));
    }
    let modified_ms = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_millis() as u64);
    let real = crate::fs::real_path(&path.abs()).unwrap_or_else(|| path.abs());
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
    match String::from_utf8(bytes) {
        Ok(text) => result.text = Some(text),
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
    match (known, bytes) {
        ("", Some(b)) if std::str::from_utf8(b).is_err() => "application/octet-stream",
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
    fn media_types_come_from_the_name_then_the_bytes() {
        assert_eq!(mime_type(Path::new("x.md"), None), "text/markdown");
        assert_eq!(mime_type(Path::new("x"), Some(b"hi")), "text/plain");
        assert_eq!(mime_type(Path::new("x"), Some(&[0xff, 0xfe, 0])), "application/octet-stream");
        assert_eq!(mime_type(Path::new("X.PNG"), Some(&[0x89])), "image/png");
    }
}
