//! The layer's file work: the root read and written through no link, the
//! upper directory's extended attributes, contents compared and read.

use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{AT_FDCWD, OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::Mode;

use super::DIFF_FILE_BYTES;

/// The upper's file `from` copied into `dir` as `name`: a temporary file
/// beside it, then a rename (the layer on another file system).
pub(super) fn copy_in(from: &Path, dir: std::os::fd::BorrowedFd, name: &OsStr, new: bool) -> Result<(), String> {
    let tmp = format!(".{}.agentd-{}.tmp", name.to_string_lossy(), uuid::Uuid::new_v4().simple());
    let meta = std::fs::symlink_metadata(from).map_err(|e| e.to_string())?;
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).map_err(|e| e.to_string())?;
        nix::unistd::symlinkat(target.as_path(), dir, tmp.as_str()).map_err(|e| e.to_string())?;
    } else {
        let fd = nix::fcntl::openat(
            dir,
            tmp.as_str(),
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| e.to_string())?;
        let mut out = std::fs::File::from(fd);
        let copied = std::fs::File::open(from)
            .and_then(|mut src| std::io::copy(&mut src, &mut out))
            .and_then(|_| out.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o777)));
        if let Err(e) = copied {
            let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
            return Err(e.to_string());
        }
    }
    let flags = if new { nix::fcntl::RenameFlags::RENAME_NOREPLACE } else { nix::fcntl::RenameFlags::empty() };
    nix::fcntl::renameat2(dir, tmp.as_str(), dir, name, flags).map_err(|e| {
        let _ = nix::unistd::unlinkat(dir, tmp.as_str(), nix::unistd::UnlinkatFlags::NoRemoveDir);
        e.to_string()
    })
}

/// The root's entry `rel` (not followed), reached through no link: a
/// directory a background job swapped for a link cannot make the daemon
/// look outside the workspace. `None` when absent or unreachable.
pub(crate) fn lower_meta(root: &Path, rel: &Path) -> Option<std::fs::Metadata> {
    if rel.as_os_str().is_empty() {
        return std::fs::symlink_metadata(root).ok();
    }
    beneath(root, rel, |p| std::fs::symlink_metadata(p).ok()).flatten()
}

/// Runs `f` with a path that names the root's entry `rel` through its
/// parent, opened beneath the root with no link followed
/// (`/proc/self/fd/N/name`, valid while `f` runs).
pub(super) fn beneath<T>(root: &Path, rel: &Path, f: impl FnOnce(&Path) -> T) -> Option<T> {
    use std::os::fd::AsRawFd;
    let (dir, name) = parent_beneath(root, rel).ok()?;
    let path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let out = f(&path);
    drop(dir);
    Some(out)
}

/// Lists the root's directory `rel`, reached through no link.
pub(super) fn read_dir_beneath(root: &Path, rel: &Path) -> std::io::Result<Vec<std::ffi::OsString>> {
    beneath(root, rel, |path| {
        let meta = std::fs::symlink_metadata(path)?;
        if !meta.is_dir() {
            return Err(std::io::Error::other("not a directory"));
        }
        std::fs::read_dir(path)?.map(|e| e.map(|e| e.file_name())).collect()
    })
    .unwrap_or_else(|| Err(std::io::Error::other("reached through a link")))
}

/// The directory holding `rel` beneath `root`, opened without following
/// any link (a directory swapped for a link since cannot carry a change
/// elsewhere), and `rel`'s last name.
pub(super) fn parent_beneath<'a>(root: &Path, rel: &'a Path) -> Result<(OwnedFd, &'a OsStr), String> {
    let name = rel.file_name().ok_or_else(|| "the root itself".to_owned())?;
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let how = OpenHow::new()
        .flags(OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let root_fd = openat2(AT_FDCWD, root, how).map_err(|e| format!("open {}: {e}", root.display()))?;
    let how = OpenHow::new()
        .flags(OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let dir = openat2(root_fd.as_fd(), parent, how).map_err(|e| match e {
        nix::errno::Errno::ELOOP | nix::errno::Errno::EXDEV => {
            format!("{} is reached through a link (not followed)", parent.display())
        }
        e => format!("open {}: {e}", parent.display()),
    })?;
    Ok((dir, name))
}

/// A regular file's bytes (never a FIFO, never through a link), at most
/// [`DIFF_FILE_BYTES`].
pub(super) fn read_plain(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
        .open(path)
        .ok()
        .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))?;
    let mut bytes = Vec::new();
    file.take(DIFF_FILE_BYTES).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Whether two files hold the same bytes.
pub(super) fn same_content(a: &Path, b: &Path) -> bool {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    // Never waiting on a FIFO swapped in meanwhile, never following a link.
    let open = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOFOLLOW)
            .open(p)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
    };
    let (Some(mut a), Some(mut b)) = (open(a), open(b)) else { return false };
    let (mut x, mut y) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    loop {
        let Ok(n) = a.read(&mut x) else { return false };
        if n == 0 {
            return b.read(&mut y).is_ok_and(|m| m == 0);
        }
        if b.read_exact(&mut y[..n]).is_err() || x[..n] != y[..n] {
            return false;
        }
    }
}

/// An extended attribute of `path` (not followed), `None` when absent.
#[allow(unsafe_code)]
pub(super) fn xattr(path: &Path, name: &str) -> std::io::Result<Option<Vec<u8>>> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let c_name = std::ffi::CString::new(name).map_err(std::io::Error::other)?;
    let mut buf = vec![0u8; 256];
    // SAFETY: valid C strings and a buffer of the length given.
    let n = unsafe { nix::libc::lgetxattr(c_path.as_ptr(), c_name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(nix::libc::ENODATA) | Some(nix::libc::ENOTSUP) => Ok(None),
            _ => Err(e),
        };
    }
    buf.truncate(n as usize);
    Ok(Some(buf))
}

/// The names of `path`'s extended attributes (not followed).
#[allow(unsafe_code)]
pub(super) fn xattr_names(path: &Path) -> std::io::Result<Vec<Vec<u8>>> {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    let mut buf = vec![0u8; 4096];
    // SAFETY: a valid C string and a buffer of the length given.
    let n = unsafe { nix::libc::llistxattr(c_path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(nix::libc::ENOTSUP) => Ok(Vec::new()),
            _ => Err(e),
        };
    }
    buf.truncate(n as usize);
    Ok(buf.split(|b| *b == 0).filter(|n| !n.is_empty()).map(<[u8]>::to_vec).collect())
}

/// The first extended attribute of an upper file that the workspace does
/// not take (capabilities, security labels, anything not `user.*`).
pub(super) fn special_xattrs(path: &Path) -> std::io::Result<Option<String>> {
    Ok(xattr_names(path)?
        .into_iter()
        .find(|n| !n.starts_with(b"user."))
        .map(|n| String::from_utf8_lossy(&n).into_owned()))
}

/// Removes the overlay's own attributes from an applied file.
#[allow(unsafe_code)]
pub(super) fn strip_overlay_xattrs(path: &Path) {
    let Ok(names) = xattr_names(path) else { return };
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else { return };
    for name in names.into_iter().filter(|n| n.starts_with(b"user.overlay.")) {
        let Ok(c_name) = std::ffi::CString::new(name) else { continue };
        // SAFETY: valid C strings.
        unsafe { nix::libc::lremovexattr(c_path.as_ptr(), c_name.as_ptr()) };
    }
}
