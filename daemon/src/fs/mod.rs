//! File access that stays inside the workspace. Paths are resolved by the
//! kernel with `openat2(RESOLVE_BENEATH)` from a descriptor of the
//! workspace, so `..`, absolute symlinks and symlinked directories cannot
//! lead out, and a file swapped for a symlink between two calls is caught
//! when it is opened, not before. Writes are atomic: a temporary file in
//! the same directory, `fsync`, `renameat`, `fsync` of the directory.
//!
//! The file-state cache (what Read saw: mtime, size, content hash) lives in
//! the session context; [`FileState`] is its entry.

pub mod append_log;
pub mod history;

use std::fs::File;
use std::hash::Hasher;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

use crate::sync::{MutexExt, RwLockExt};

mod canonical;
pub use canonical::{canonical, open_dir_as, remember_canonical, still_at};

/// Largest file Read hashes, Edit edits and Write replaces (bytes).
pub const MAX_EDIT_BYTES: u64 = 64 * 1024 * 1024;

/// What the session saw of a file when it last read or wrote it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FileState {
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i128,
    /// Size in bytes.
    pub size: u64,
    /// Hash of the whole content (`None` for files too large to hash).
    pub hash: Option<u64>,
}

/// Why a path cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// The path has a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// The path is outside the workspace (directly, via `..`, or via a symlink).
    #[error("{path} is outside the workspace {root}")]
    Outside {
        /// The path asked for.
        path: String,
        /// The workspace.
        root: String,
    },
    /// No such file.
    #[error("{path} does not exist")]
    NotFound {
        /// The path.
        path: String,
    },
    /// Not a regular file (directory, FIFO, device…).
    #[error("{path} is {what}")]
    NotAFile {
        /// The path.
        path: String,
        /// What it is instead, with advice.
        what: String,
    },
    /// Anything else, with what was being done.
    #[error("{op} {path}: {why}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// On what.
        path: String,
        /// Why it failed, as told to the model.
        why: String,
        /// The system's error, when one caused it.
        #[source]
        source: Option<IoSource>,
    },
}

/// The system's error behind an [`FsError`], shared so the error stays
/// cheap to clone; equal when of the same kind and text.
#[derive(Debug, Clone)]
pub struct IoSource(pub std::sync::Arc<std::io::Error>);

impl PartialEq for IoSource {
    fn eq(&self, other: &Self) -> bool {
        self.0.kind() == other.0.kind() && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for IoSource {}

impl std::fmt::Display for IoSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for IoSource {}

/// A path inside the workspace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsPath {
    /// Canonical workspace root.
    pub root: PathBuf,
    /// Relative to the root, without `.`/`..` (lexically normalized).
    pub rel: PathBuf,
}

impl WsPath {
    /// The absolute path (as the user would write it).
    pub fn abs(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

/// Largest settings file read (a settings file, `.mcp.json`).
pub const MAX_SETTINGS_BYTES: u64 = 1024 * 1024;

/// A settings file's text: a regular file (a link to one is fine) of at
/// most [`MAX_SETTINGS_BYTES`], opened without waiting on a FIFO — a
/// repository's `.claude/settings.json` that is a link to `/dev/zero` or a
/// pipe is an error, not a read without end.
pub fn read_settings(path: &Path) -> std::io::Result<String> {
    let bytes = read_regular(path, MAX_SETTINGS_BYTES)?;
    if bytes.len() as u64 > MAX_SETTINGS_BYTES {
        return Err(std::io::Error::other(format!("larger than {MAX_SETTINGS_BYTES} bytes")));
    }
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The first `max` + 1 bytes of the regular file `path` (a link to one is
/// fine), opened without waiting on a FIFO: what a repository or a
/// command planted (a pipe, a link to `/dev/zero`) is an error, never a
/// read without end. A directory is `IsADirectory` (a sandbox's
/// placeholder for a file that is not there). Whether more than `max`
/// bytes came is the caller's to judge.
pub fn read_regular(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(path)?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory));
    }
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut out = Vec::new();
    file.take(max + 1).read_to_end(&mut out)?;
    Ok(out)
}

/// Resolves `input` (absolute, or relative to `cwd`) to a path inside
/// `root`. Lexical only: symlinks are judged when the file is opened.
pub fn resolve(root: &Path, cwd: &Path, input: &str) -> Result<WsPath, FsError> {
    if input.contains('\0') {
        return Err(FsError::Nul);
    }
    let raw = Path::new(input);
    let normal = normalize(&if raw.is_absolute() { raw.to_owned() } else { cwd.join(raw) });
    // The workspace is canonical; the path may reach it through a symlinked
    // prefix (e.g. /var → /private/var): compare the canonical deepest
    // existing ancestor.
    let rel = match normal.strip_prefix(root) {
        Ok(rel) => rel.to_owned(),
        Err(_) => {
            let mut existing = normal.clone();
            let mut tail = PathBuf::new();
            while !existing.exists() {
                let Some(name) = existing.file_name().map(|n| n.to_owned()) else { break };
                tail = Path::new(&name).join(&tail);
                existing.pop();
            }
            let canonical = std::fs::canonicalize(&existing).unwrap_or(existing);
            canonical
                .strip_prefix(root)
                .map(|r| r.join(&tail))
                .map_err(|_| FsError::Outside { path: input.to_owned(), root: root.display().to_string() })?
        }
    };
    Ok(WsPath { root: root.to_owned(), rel })
}

/// A file outside the workspace that the user (or a rule) approved, by its
/// canonical path. It is opened with no symlink followed at all, so what
/// opens is the file that was approved, not one swapped in since.
pub fn approved_outside(canonical: &Path) -> WsPath {
    // Only plain names: a `..` could walk from an approved directory into
    // another once a missing directory is created.
    let rel: PathBuf = canonical.components().filter(|c| matches!(c, Component::Normal(_))).collect();
    WsPath { root: PathBuf::from("/"), rel }
}

/// `abs` with `.` and `..` removed lexically.
pub fn normalize(abs: &Path) -> PathBuf {
    let mut normal = PathBuf::new();
    for c in abs.components() {
        match c {
            Component::ParentDir => {
                normal.pop();
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal
}

/// A path as permission rules judge it: symlinks resolved (of the file,
/// or of its directory for a file not there yet), or `..` removed
/// lexically when it cannot be resolved.
pub fn judged_path(abs: &Path) -> PathBuf {
    real_path(abs).unwrap_or_else(|| normalize(abs))
}

/// Where `abs` really is: `..` removed, symlinks resolved (of the file, or
/// of its directory for a file not there yet). `None` when neither exists.
pub fn real_path(abs: &Path) -> Option<PathBuf> {
    // As the kernel resolves it: `link/..` is the parent of where the link
    // points, not `.` (a textual `..` removal would judge another file than
    // a command opens).
    real_path_within(abs, 8)
}

fn real_path_within(abs: &Path, links: usize) -> Option<PathBuf> {
    canonical(abs).ok().or_else(|| {
        // A dangling symlink is where it points (a write creates that);
        // a chain longer than the budget is nowhere known (the kernel
        // follows 40 links: it is not a new file here).
        if std::fs::symlink_metadata(abs).is_ok_and(|m| m.file_type().is_symlink()) {
            let target = std::fs::read_link(abs).ok().filter(|_| links > 0)?;
            let next = if target.is_absolute() { target } else { abs.parent()?.join(target) };
            return real_path_within(&next, links - 1);
        }
        let name = abs.file_name()?;
        let dir = canonical(abs.parent()?).ok()?;
        Some(dir.join(name))
    })
}

/// Resolves `input` inside the workspace: `cwd`, then the added
/// directories (relative paths start at `here`).
pub fn resolve_in(cwd: &Path, add_dirs: &[PathBuf], here: &Path, input: &str) -> Result<WsPath, FsError> {
    let first = resolve(cwd, here, input);
    if !matches!(first, Err(FsError::Outside { .. })) {
        return first;
    }
    add_dirs.iter().find_map(|dir| resolve(dir, here, input).ok()).map_or(first, Ok)
}

/// Whether a real (canonical) path is inside the workspace.
pub fn is_inside(cwd: &Path, add_dirs: &[PathBuf], path: &Path) -> bool {
    path.starts_with(cwd) || add_dirs.iter().any(|d| path.starts_with(d))
}

fn open_root(root: &Path) -> Result<OwnedFd, FsError> {
    nix::fcntl::open(root, OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC, Mode::empty())
        .map_err(|e| io_err("open workspace", root, e))
}

fn io_err<E: std::fmt::Display + Into<std::io::Error>>(op: &'static str, path: &Path, e: E) -> FsError {
    let why = e.to_string();
    FsError::Io { op, path: path.display().to_string(), why, source: Some(IoSource(std::sync::Arc::new(e.into()))) }
}

/// An [`FsError::Io`] that no system error caused: agentd refuses.
fn refusal(op: &'static str, path: &Path, why: impl Into<String>) -> FsError {
    FsError::Io { op, path: path.display().to_string(), why: why.into(), source: None }
}

/// Opens `path` beneath its workspace; symlinks are followed only while
/// they stay inside.
fn open_beneath(path: &WsPath, flags: OFlag, mode: Mode) -> Result<OwnedFd, FsError> {
    open_beneath_seen(path, flags, mode).map(|(fd, _)| fd)
}

/// [`open_beneath`], and where what it opened really is (as the kernel
/// names the descriptor; an error when it cannot tell).
fn open_beneath_seen(path: &WsPath, flags: OFlag, mode: Mode) -> Result<(OwnedFd, std::io::Result<PathBuf>), FsError> {
    let root = open_root(&path.root)?;
    let rel: &Path = if path.rel.as_os_str().is_empty() { Path::new(".") } else { &path.rel };
    let mut resolve = ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS;
    if path.root == Path::new("/") {
        // An approved path outside the workspace: exactly that path.
        resolve |= ResolveFlag::RESOLVE_NO_SYMLINKS;
    }
    let how = OpenHow::new().flags(flags | OFlag::O_CLOEXEC).mode(mode).resolve(resolve);
    let fd = openat2(root.as_fd(), rel, how).map_err(|e| match e {
        nix::errno::Errno::ENOENT => FsError::NotFound { path: path.abs().display().to_string() },
        nix::errno::Errno::EXDEV | nix::errno::Errno::ELOOP => {
            FsError::Outside { path: path.abs().display().to_string(), root: path.root.display().to_string() }
        }
        other => io_err("open", &path.abs(), other),
    })?;
    // What was opened, not what was checked before: a symlink swapped in
    // since must not carry a tool into agentd's state. Directories are
    // opened to write in; files to read, where the sessions' command output
    // (also readable by their commands) is the one part allowed.
    let seen = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()));
    let opened = seen.as_deref().unwrap_or(Path::new(""));
    // The plans exception only for a path named as itself: no symlink
    // followed on the way (one swapped in after the exact-path check could
    // lead to another session's plan).
    let in_plans = in_plans(opened) && opened == path.abs();
    let refused = if flags.contains(OFlag::O_DIRECTORY) {
        in_state_dir(opened) && !in_plans
    } else {
        in_state_dir(opened) && !in_plans && !state_dirs().iter().any(|s| opened.starts_with(s.join("sessions")))
    };
    if refused {
        return Err(refusal(
            "open",
            &path.abs(),
            "it is in agentd's state directory, which no tool may read or change",
        ));
    }
    if has_secrets() && nix::sys::stat::fstat(&fd).is_ok_and(|st| secret_ids().contains(&(st.st_dev, st.st_ino))) {
        return Err(refusal("open", &path.abs(), SECRET_REFUSAL));
    }
    Ok((fd, seen))
}

/// Opens a regular file for reading. Directories, FIFOs, devices, sockets
/// and `/proc`/`/sys` files are refused with a message that says what to
/// use instead.
pub fn open_file(path: &WsPath) -> Result<(File, std::fs::Metadata), FsError> {
    open_regular(path).map(|(file, meta, _)| (file, meta))
}

/// [`open_file`], and where the file opened really is (symlinks resolved,
/// as the kernel names the descriptor): what a caller rechecks against
/// what it was allowed to open.
pub fn open_file_seen(path: &WsPath) -> Result<(File, std::fs::Metadata, PathBuf), FsError> {
    let (file, meta, seen) = open_regular(path)?;
    let opened = seen.map_err(|e| io_err("tell what was opened of", &path.abs(), e))?;
    Ok((file, meta, opened))
}

fn open_regular(path: &WsPath) -> Result<(File, std::fs::Metadata, std::io::Result<PathBuf>), FsError> {
    let abs = path.abs();
    if abs.starts_with("/proc") || abs.starts_with("/sys") || abs.starts_with("/dev") {
        return Err(FsError::NotAFile {
            path: abs.display().to_string(),
            what: "a kernel pseudo-file; read it with Bash (e.g. `cat`) if you must".into(),
        });
    }
    // O_NONBLOCK: opening a FIFO must not wait for a writer.
    let (fd, seen) = open_beneath_seen(path, OFlag::O_RDONLY | OFlag::O_NOCTTY | OFlag::O_NONBLOCK, Mode::empty())?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| io_err("stat", &abs, e))?;
    let ft = meta.file_type();
    use std::os::unix::fs::FileTypeExt;
    let what = if ft.is_dir() {
        Some("a directory; list it with Glob (or `ls` in Bash)")
    } else if ft.is_fifo() {
        Some("a FIFO (named pipe); reading it could block forever")
    } else if ft.is_char_device() || ft.is_block_device() {
        Some("a device")
    } else if ft.is_socket() {
        Some("a socket")
    } else {
        None
    };
    if let Some(what) = what {
        return Err(FsError::NotAFile { path: abs.display().to_string(), what: what.into() });
    }
    nix::fcntl::fcntl(file.as_fd(), nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()))
        .map_err(|e| io_err("set blocking", &abs, e))?;
    Ok((file, meta, seen))
}

/// The state of a file as Read records it.
pub fn state_of(meta: &std::fs::Metadata, hash: Option<u64>) -> FileState {
    FileState { mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128, size: meta.size(), hash }
}

/// Hash of a file's content (stable across runs: SipHash with fixed keys).
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    h.write(bytes);
    h.finish()
}

/// Reads a whole regular file (up to [`MAX_EDIT_BYTES`]).
pub fn read_all(path: &WsPath) -> Result<(Vec<u8>, std::fs::Metadata), FsError> {
    let (mut file, meta) = open_file(path)?;
    if meta.len() > MAX_EDIT_BYTES {
        return Err(FsError::NotAFile {
            path: path.abs().display().to_string(),
            what: format!("{} bytes, larger than the {} bytes this tool handles", meta.len(), MAX_EDIT_BYTES),
        });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(|e| io_err("read", &path.abs(), e))?;
    Ok((bytes, meta))
}

/// What an atomic write replaced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// The file's state after the write.
    pub state: FileState,
    /// Whether a file was replaced (not created).
    pub replaced: bool,
}

/// Writes `content` to `path` atomically: a temporary file beside it,
/// `fsync`, `renameat` over it, `fsync` of the directory. A replaced file
/// keeps its mode (and owner, where permitted). A file with more than one
/// hard link is refused: replacing it would break the links, and writing
/// in place would not be atomic. A symlink is followed to its target when
/// the target is inside the workspace. Missing parent directories are
/// created.
#[cfg(test)]
pub fn write_atomic(path: &WsPath, content: &[u8]) -> Result<Written, FsError> {
    write_atomic_guarded(path, content, None, &pending::Records::NONE)
}

/// What a guarded write refuses: whether the file `real` (its real path)
/// in the workspace `root` is a protected one.
pub type Protected<'a> = &'a dyn Fn(&Path, &Path) -> bool;

/// [`write_atomic`], refusing a file that turns out, once its directory is
/// open, to be one `protected` names (`.git`, settings): a directory
/// swapped for a symlink between the permission check and the write must
/// not carry the write there. `None` refuses nothing. The temporary file is
/// recorded in `records` while it exists.
pub fn write_atomic_guarded(
    path: &WsPath,
    content: &[u8],
    protected: Option<Protected>,
    records: &pending::Records,
) -> Result<Written, FsError> {
    let abs = path.abs();
    let Some(name) = path.rel.file_name().map(|n| n.to_owned()) else {
        return Err(FsError::NotAFile { path: abs.display().to_string(), what: "the workspace itself".into() });
    };
    let parent = WsPath { root: path.root.clone(), rel: path.rel.parent().map(Path::to_owned).unwrap_or_default() };
    // Create missing parents: each one with mkdirat in a directory opened
    // beneath the workspace, so no component can be swapped for a link out.
    // (Not for a plan file: its directory is there, and the state
    // directory above it is not for tools to open.) A write refused or
    // failed after that removes what it made (while empty).
    let mut made: Vec<PathBuf> = Vec::new();
    let plans = state_dirs().iter().any(|s| s.join("plans") == parent.abs());
    let written = make_parents(path, &parent, plans, &mut made)
        .and_then(|()| write_in_parent(path, &parent, &name, content, protected, records));
    if written.is_err() {
        for dir in made.iter().rev() {
            if !remove_no_links(dir, Removable::Empty) {
                break;
            }
        }
    }
    written
}

/// Makes the missing directories of `parent` (see
/// [`write_atomic_guarded`]), each recorded in `made` as it is made.
fn make_parents(path: &WsPath, parent: &WsPath, plans: bool, made: &mut Vec<PathBuf>) -> Result<(), FsError> {
    let mut built = PathBuf::new();
    for c in parent.rel.components().filter(|_| !plans) {
        let above = WsPath { root: path.root.clone(), rel: built.clone() };
        built.push(c);
        let step = WsPath { root: path.root.clone(), rel: built.clone() };
        match open_beneath(&step, OFlag::O_DIRECTORY | OFlag::O_RDONLY, Mode::empty()) {
            Ok(_) => {}
            Err(FsError::NotFound { .. }) => {
                let above = open_beneath(&above, OFlag::O_DIRECTORY | OFlag::O_RDONLY, Mode::empty())?;
                nix::sys::stat::mkdirat(above.as_fd(), c.as_os_str(), Mode::from_bits_truncate(0o777))
                    .map_err(|e| io_err("create directory", &step.abs(), e))?;
                made.push(step.abs());
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// [`write_atomic_guarded`] once the parent exists.
fn write_in_parent(
    path: &WsPath,
    parent: &WsPath,
    name: &std::ffi::OsStr,
    content: &[u8],
    protected: Option<Protected>,
    records: &pending::Records,
) -> Result<Written, FsError> {
    let abs = path.abs();
    let dir = open_beneath(parent, OFlag::O_DIRECTORY | OFlag::O_RDONLY, Mode::empty())?;
    if let Some(protected) = protected {
        use std::os::fd::AsRawFd;
        // Where the open directory really is, as the kernel holds it.
        let real = std::fs::read_link(format!("/proc/self/fd/{}", dir.as_raw_fd()))
            .map_err(|e| io_err("resolve", &abs, e))?
            .join(name);
        if protected(&path.root, &real) {
            return Err(FsError::NotAFile {
                path: abs.display().to_string(),
                what: format!(
                    "{} (protected: it configures agentd or runs code later; write it by name)",
                    real.display()
                ),
            });
        }
    }
    let existing = nix::sys::stat::fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW);
    if let Ok(st) = existing
        && (st.st_mode & libc_s_ifmt()) == libc_s_iflnk()
    {
        // Follow the link only inside the workspace (the kernel checks).
        open_file(path)?;
        let target = std::fs::canonicalize(&abs).map_err(|e| io_err("resolve", &abs, e))?;
        let rel = target
            .strip_prefix(&path.root)
            .map_err(|_| FsError::Outside { path: abs.display().to_string(), root: path.root.display().to_string() })?;
        return write_atomic_guarded(
            &WsPath { root: path.root.clone(), rel: rel.to_owned() },
            content,
            protected,
            records,
        );
    }
    let old = existing.ok();
    if let Some(st) = &old {
        // The file about to be replaced, whatever path led here (a
        // directory swapped for a link since the checks): never agentd's
        // own secret files.
        if has_secrets() && secret_ids().contains(&(st.st_dev, st.st_ino)) {
            return Err(refusal("write", &abs, SECRET_REFUSAL));
        }
        if (st.st_mode & libc_s_ifmt()) != libc_s_ifreg() {
            return Err(FsError::NotAFile { path: abs.display().to_string(), what: "not a regular file".into() });
        }
        if st.st_nlink > 1 {
            return Err(FsError::NotAFile {
                path: abs.display().to_string(),
                what: format!(
                    "a file with {} hard links; replacing it would break them, so it is refused (edit it with Bash if you must)",
                    st.st_nlink
                ),
            });
        }
    }
    let mode = old.as_ref().map(|st| st.st_mode & 0o7777).unwrap_or(0o666 & !umask());
    let tmp = format!(".{}.agentd-{}.tmp", name.to_string_lossy(), uuid::Uuid::new_v4().simple());
    // Recorded first, so a daemon that dies mid-write has its successor
    // remove the temporary file.
    let _pending = pending::Pending::record(records, &parent.abs().join(&tmp));
    let fd = nix::fcntl::openat(
        dir.as_fd(),
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| io_err("create temporary file in", &parent.abs(), e))?;
    let mut file = File::from(fd);
    let result = (|| {
        file.write_all(content).map_err(|e| io_err("write", &abs, e))?;
        if let Some(st) = &old {
            // Owner first: chown clears setuid/setgid, which chmod then restores.
            let owner = (nix::unistd::Uid::from_raw(st.st_uid), nix::unistd::Gid::from_raw(st.st_gid));
            if nix::unistd::fchown(file.as_fd(), Some(owner.0), Some(owner.1)).is_err()
                && (owner.0 != nix::unistd::geteuid() || owner.1 != nix::unistd::getegid())
            {
                return Err(FsError::NotAFile {
                    path: abs.display().to_string(),
                    what: format!(
                        "owned by uid {} gid {}; replacing it would change its owner, so it is refused",
                        st.st_uid, st.st_gid
                    ),
                });
            }
        }
        nix::sys::stat::fchmod(file.as_fd(), Mode::from_bits_truncate(mode as _))
            .map_err(|e| io_err("chmod", &abs, e))?;
        file.sync_all().map_err(|e| io_err("fsync", &abs, e))?;
        match &old {
            Some(st) => {
                // The file must still be the one checked: same inode, size and
                // modification time (a narrow window remains until the rename).
                let now = nix::sys::stat::fstatat(dir.as_fd(), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
                    .map_err(|e| io_err("stat", &abs, e))?;
                let same = (now.st_dev, now.st_ino, now.st_size, now.st_mtime, now.st_mtime_nsec)
                    == (st.st_dev, st.st_ino, st.st_size, st.st_mtime, st.st_mtime_nsec);
                if !same {
                    return Err(refusal("replace", &abs, "the file changed while it was being written; read it again"));
                }
                nix::fcntl::renameat(dir.as_fd(), tmp.as_str(), dir.as_fd(), name)
                    .map_err(|e| io_err("rename into place", &abs, e))?;
            }
            None => {
                // Creating: never clobber a file that appeared meanwhile.
                nix::fcntl::renameat2(
                    dir.as_fd(),
                    tmp.as_str(),
                    dir.as_fd(),
                    name,
                    nix::fcntl::RenameFlags::RENAME_NOREPLACE,
                )
                .map_err(|e| match e {
                    nix::errno::Errno::EEXIST => refusal(
                        "create",
                        &abs,
                        "the file appeared while it was being written; Read it, then write again",
                    ),
                    other => io_err("rename into place", &abs, other),
                })?;
            }
        }
        nix::unistd::fsync(dir.as_fd()).map_err(|e| io_err("fsync directory of", &abs, e))?;
        Ok(())
    })();
    if let Err(e) = result {
        let _ = nix::unistd::unlinkat(dir.as_fd(), tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(e);
    }
    let meta = file.metadata().map_err(|e| io_err("stat", &abs, e))?;
    Ok(Written { state: state_of(&meta, Some(hash_bytes(content))), replaced: old.is_some() })
}

/// The process umask, read without changing it (`/proc/self/status`).
fn umask() -> u32 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Umask:").map(|v| v.trim().to_owned())))
        .and_then(|v| u32::from_str_radix(&v, 8).ok())
        .unwrap_or(0o022)
}

const fn libc_s_ifmt() -> u32 {
    0o170000
}
const fn libc_s_iflnk() -> u32 {
    0o120000
}
const fn libc_s_ifreg() -> u32 {
    0o100000
}

#[cfg(test)]
mod tests;

/// What [`remove_no_links`] may remove at a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removable {
    /// An empty directory or an empty regular file (a placeholder).
    Empty,
    /// Anything but a directory (a temporary file, or a link by its name).
    NotADirectory,
}

/// Removes `path` (absolute) when it is `what` may be and no directory on
/// the way to it is a symbolic link: one swapped in for a directory must not
/// carry the removal elsewhere. Whether it was removed.
pub fn remove_no_links(path: &Path, what: Removable) -> bool {
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else { return false };
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let Ok(dir) = openat2(nix::fcntl::AT_FDCWD, parent, how) else { return false };
    let Ok(st) = nix::sys::stat::fstatat(&dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) else { return false };
    let kind = st.st_mode & libc_s_ifmt();
    let (is_dir, is_file) = (kind == 0o040000, kind == libc_s_ifreg());
    let flag = match what {
        Removable::Empty if is_dir => nix::unistd::UnlinkatFlags::RemoveDir,
        Removable::Empty if is_file && st.st_size == 0 => nix::unistd::UnlinkatFlags::NoRemoveDir,
        Removable::NotADirectory if !is_dir => nix::unistd::UnlinkatFlags::NoRemoveDir,
        _ => return false,
    };
    nix::unistd::unlinkat(&dir, name, flag).is_ok()
}

/// A temporary directory for a test, and its real path (the kernel's name
/// for it: what path checks compare with).
#[cfg(test)]
pub fn real_temp_dir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let real = std::fs::canonicalize(dir.path()).unwrap();
    (dir, real)
}

pub mod pending;

/// Why a tool may not touch a file of [`guard_secret_files`].
pub const SECRET_REFUSAL: &str =
    "it is one of agentd's own secret files (its TLS key or certificates), which no tool may read or change";

/// The state directories (canonical) of the daemons of this process, each
/// registered by its daemon for as long as it or any of its sessions
/// lives ([`OffLimits`]): no tool of any of them may touch any of them. One
/// in a daemon's own process; several where tests run daemons side by side.
static STATE_DIRS: std::sync::RwLock<Vec<PathBuf>> = std::sync::RwLock::new(Vec::new());

fn state_dirs() -> std::sync::RwLockReadGuard<'static, Vec<PathBuf>> {
    STATE_DIRS.read_locked()
}

/// What a daemon keeps from every tool — its state directory and its TLS
/// face's files — for as long as this lives: the daemon and each of its
/// sessions hold it, so a tool still running after the daemon stopped
/// serving is still kept out.
pub struct OffLimits {
    state: StateDirGuard,
    _secrets: Option<SecretsGuard>,
    given: PathBuf,
}

impl OffLimits {
    /// Keeps `state_dir` and `secret_files` from every tool.
    pub fn guard(state_dir: &Path, secret_files: &[PathBuf]) -> OffLimits {
        let state = guard_state_dir(state_dir);
        let secrets = (!secret_files.is_empty()).then(|| guard_secret_files(secret_files));
        OffLimits { state, _secrets: secrets, given: state_dir.to_owned() }
    }

    /// The plan file of `session_id` (Claude Code 2.1's plan mode: the
    /// model writes its plan there, ExitPlanMode presents it), in the state
    /// directory as it was resolved when it was guarded. No I/O.
    pub fn plan_file(&self, session_id: &str) -> PathBuf {
        self.state_dir().join("plans").join(format!("{session_id}.md"))
    }

    /// Where the daemon records its writes in progress. No I/O.
    pub fn pending_writes(&self) -> pending::Records {
        pending::Records::in_state_dir(self.state_dir())
    }

    fn state_dir(&self) -> &Path {
        self.state.0.as_deref().unwrap_or(&self.given)
    }
}

/// What a walk of many files checks each one against: the state
/// directories as they are when it starts (one lock per walk, not per
/// file).
pub fn state_dir_filter() -> impl Fn(&Path) -> bool + Send + Sync + 'static {
    let dirs = state_dirs().clone();
    move |path: &Path| dirs.iter().any(|s| path.starts_with(s))
}

/// A daemon's state directory, kept from every tool while this lives (the
/// daemon holds it).
#[derive(Debug)]
pub struct StateDirGuard(Option<PathBuf>);

impl Drop for StateDirGuard {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let mut dirs = STATE_DIRS.write_locked();
            if let Some(i) = dirs.iter().position(|d| *d == dir) {
                dirs.remove(i);
            }
        }
    }
}

/// Keeps agentd's state directory `dir` from every tool until the guard
/// is dropped.
fn guard_state_dir(dir: &Path) -> StateDirGuard {
    let canonical = std::fs::canonicalize(dir).ok();
    if let Some(c) = &canonical {
        STATE_DIRS.write_locked().push(c.clone());
    }
    StateDirGuard(canonical)
}

/// Whether `path` (a real path: symlinks resolved) is agentd's state
/// directory or inside it.
pub fn in_state_dir(path: &Path) -> bool {
    state_dirs().iter().any(|s| path.starts_with(s))
}

/// The files of [`guard_secret_files`]: as given (absolute), as they
/// resolved at start, and the files they were then (device and inode). A
/// file is secret by what it is, not only by its path: a hard link to it, or
/// the key after its directory was renamed, is as secret as the key. A path
/// given through a symlink (a Kubernetes Secret volume's `tls.key ->
/// ..data/tls.key`) is resolved again at each check, so the file it leads
/// to after a rotation is secret too.
struct Secrets {
    given: Vec<PathBuf>,
    at_start: Vec<PathBuf>,
    ids_at_start: Vec<(u64, u64)>,
    /// The files as they were at start, held open (`O_PATH`): an inode of
    /// theirs cannot be given to another file while the daemon runs, so
    /// an innocent file never takes a secret's numbers after a rotation.
    _held: Vec<std::fs::File>,
}

/// The secret files of the daemons of this process, each set registered
/// by its daemon for as long as it lives ([`guard_secret_files`]).
static SECRETS: std::sync::Mutex<Vec<std::sync::Arc<Secrets>>> = std::sync::Mutex::new(Vec::new());
/// How many sets [`SECRETS`] holds: checks cost nothing without a TLS face.
static SECRET_SETS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn secret_sets() -> Vec<std::sync::Arc<Secrets>> {
    if SECRET_SETS.load(std::sync::atomic::Ordering::Acquire) == 0 {
        return Vec::new();
    }
    SECRETS.locked().clone()
}

/// A daemon's secret files, kept from every tool while this lives (the
/// daemon holds it).
pub struct SecretsGuard(std::sync::Arc<Secrets>);

impl Drop for SecretsGuard {
    fn drop(&mut self) {
        let mut sets = SECRETS.locked();
        if let Some(i) = sets.iter().position(|s| std::sync::Arc::ptr_eq(s, &self.0)) {
            sets.remove(i);
            SECRET_SETS.fetch_sub(1, std::sync::atomic::Ordering::Release);
        }
    }
}

fn file_id(meta: &std::fs::Metadata) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    (meta.dev(), meta.ino())
}

/// Keeps `files` (the TLS face's key and certificates) from every tool
/// besides the state directory, until the guard is dropped.
fn guard_secret_files(files: &[PathBuf]) -> SecretsGuard {
    let here = std::env::current_dir().unwrap_or_default();
    let given: Vec<PathBuf> = files.iter().map(|f| here.join(f)).collect();
    let at_start = given.iter().filter_map(|f| std::fs::canonicalize(f).ok()).collect();
    let ids_at_start = given.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| file_id(&m)).collect();
    let held = given
        .iter()
        .filter_map(|f| {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_PATH | nix::libc::O_CLOEXEC).open(f).ok()
        })
        .collect();
    let secrets = std::sync::Arc::new(Secrets { given, at_start, ids_at_start, _held: held });
    let mut sets = SECRETS.locked();
    sets.push(secrets.clone());
    SECRET_SETS.fetch_add(1, std::sync::atomic::Ordering::Release);
    SecretsGuard(secrets)
}

/// The real paths of [`guard_secret_files`]' files that exist now (resolved
/// now, and as they were at start), for the sandbox to mask and pin.
/// Nothing, and no I/O, without a TLS face.
pub fn secret_files() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for s in secret_sets() {
        out.extend(s.given.iter().filter_map(|f| std::fs::canonicalize(f).ok()));
        out.extend(s.at_start.iter().filter(|p| std::fs::symlink_metadata(p).is_ok()).cloned());
    }
    out.sort();
    out.dedup();
    out
}

/// The secret files' (device, inode), now and at start. A walk takes them
/// once; empty without a TLS face.
pub fn secret_ids() -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for s in secret_sets() {
        out.extend(s.ids_at_start.iter().copied());
        out.extend(s.given.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| file_id(&m)));
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `path` is (or leads to) one of [`guard_secret_files`]' files.
pub fn is_secret(path: &Path) -> bool {
    has_secrets()
        && std::fs::metadata(path).is_ok_and(|m| {
            let id = file_id(&m);
            secret_ids().contains(&id)
        })
}

/// Whether a walked entry is one of the files of `ids` ([`secret_ids`]):
/// its inode first (no I/O), its device only when that matches.
pub fn secret_entry(ids: &[(u64, u64)], entry: &ignore::DirEntry) -> bool {
    if ids.is_empty() {
        return false;
    }
    let Some(ino) = entry.ino() else { return false };
    ids.iter().any(|(_, i)| *i == ino) && entry.metadata().is_ok_and(|m| ids.contains(&file_id(&m)))
}

/// Opens `rel` for reading beneath the directory `root` (a descriptor
/// held from before a walk): however a directory on the way is swapped for
/// a link meanwhile, the file opened lies beneath `root`. Only a regular
/// file, and never one of the secret files; it and its size.
pub fn open_read_beneath(root: &std::os::fd::OwnedFd, rel: &Path) -> std::io::Result<(File, u64)> {
    use std::os::fd::AsFd;
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    let fd = openat2(root.as_fd(), rel, how).map_err(std::io::Error::from)?;
    let st = nix::sys::stat::fstat(&fd).map_err(std::io::Error::from)?;
    if (st.st_mode & libc_s_ifmt()) != libc_s_ifreg() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    if has_secrets() && secret_ids().contains(&(st.st_dev, st.st_ino)) {
        return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, SECRET_REFUSAL));
    }
    Ok((File::from(fd), u64::try_from(st.st_size).unwrap_or(0)))
}

/// Whether the daemon has secret files (a TLS face).
pub fn has_secrets() -> bool {
    SECRET_SETS.load(std::sync::atomic::Ordering::Acquire) > 0
}

/// Whether a secret file lies under `dir` (a workspace holding the TLS
/// key): where it is now, or was given or found at start (a key whose
/// directory was renamed since is still in the workspace).
pub fn holds_secret(dir: &Path) -> bool {
    let sets = secret_sets();
    !sets.is_empty()
        && (secret_files().iter().any(|f| f.starts_with(dir))
            || sets.iter().any(|s| s.given.iter().chain(&s.at_start).any(|f| f.starts_with(dir))))
}

/// Whether agentd's state directory lies under `dir` (a workspace that
/// is the home directory holds it).
pub fn holds_state_dir(dir: &Path) -> bool {
    state_dirs().iter().any(|s| s.starts_with(dir))
}

/// Whether `path` is in the plans directory of a state directory: the one
/// part of it file tools may write, each session its own file only
/// (admission sees to that).
fn in_plans(path: &Path) -> bool {
    state_dirs().iter().any(|s| path.starts_with(s.join("plans")))
}

/// Makes the directory of a plan file (private) if it is not there: once
/// a session enters plan mode, before its plan file is written.
pub fn make_plans_dir(plan_file: &Path) {
    if let Some(dir) = plan_file.parent().filter(|d| !d.is_dir()) {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir);
    }
}
