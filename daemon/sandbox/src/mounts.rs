//! The mounts of a call's mount namespace, made by the helper: read-only
//! and writable binds, the package caches, hidden directories, and the
//! copy-on-write layer over a root (and its removal by the daemon).
#![allow(unsafe_code)] // mount_setattr(2), which nix does not wrap

use std::ffi::CString;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;

/// Covers `dir` with an empty tmpfs except for `own` (beneath it), which
/// stays as it was.
pub(crate) fn hide_all_but(dir: &Path, own: &Path, flags: nix::mount::MsFlags) -> Result<(), String> {
    use nix::mount::{MsFlags, mount};
    use std::os::fd::AsRawFd;
    let keep =
        nix::fcntl::open(own, nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC, nix::sys::stat::Mode::empty())
            .map_err(|e| format!("open {}: {e}", own.display()))?;
    mount(Some("tmpfs"), dir, Some("tmpfs"), flags, Some("size=64k,mode=0700"))
        .map_err(|e| format!("hide {}: {e}", dir.display()))?;
    std::fs::create_dir_all(own).map_err(|e| format!("recreate {}: {e}", own.display()))?;
    let source = format!("/proc/self/fd/{}", keep.as_raw_fd());
    mount(Some(source.as_str()), own, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)
        .map_err(|e| format!("keep {}: {e}", own.display()))?;
    mount(None::<&str>, dir, None::<&str>, MsFlags::MS_REMOUNT | MsFlags::MS_RDONLY | flags, Some("size=64k,mode=0700"))
        .map_err(|e| format!("make {} read-only: {e}", dir.display()))
}

/// `mount_setattr(path, AT_RECURSIVE)` setting or clearing read-only on
/// every mount beneath `path` (Linux 5.12; every kernel with Landlock).
pub(crate) fn set_read_only(path: &Path, read_only: bool) -> Result<(), Errno> {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 1;
    const AT_RECURSIVE: nix::libc::c_uint = 0x8000;
    let attr = MountAttr {
        attr_set: if read_only { MOUNT_ATTR_RDONLY } else { 0 },
        attr_clr: if read_only { 0 } else { MOUNT_ATTR_RDONLY },
        propagation: 0,
        userns_fd: 0,
    };
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: a valid C string and a properly sized `mount_attr`.
    let rc = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_mount_setattr,
            nix::libc::AT_FDCWD,
            c_path.as_ptr(),
            AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if rc == 0 { Ok(()) } else { Err(Errno::last()) }
}

/// Mounts an unprivileged overlay over `layer.root` (its lower directory)
/// with the layer's upper and work directories. Each directory is named
/// by an `O_PATH` descriptor (`/proc/self/fd/N`), so no path needs the
/// escaping overlay's options would ask of a comma or a colon, and none is
/// resolved twice. Only this user's writes can land in the upper one: the
/// mount is in the call's own user namespace.
pub(crate) fn mount_layer(layer: &super::Layer) -> Result<(), String> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::Mode;
    let dir = |p: &Path| {
        open(p, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC, Mode::empty())
            .map_err(|e| format!("open {}: {e}", p.display()))
    };
    let (lower, upper, work) = (dir(&layer.root)?, dir(&layer.upper)?, dir(&layer.work)?);
    let options = format!(
        "lowerdir=/proc/self/fd/{},upperdir=/proc/self/fd/{},workdir=/proc/self/fd/{},userxattr",
        lower.as_raw_fd(),
        upper.as_raw_fd(),
        work.as_raw_fd()
    );
    nix::mount::mount(
        Some("overlay"),
        &layer.root,
        Some("overlay"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(|e| format!("mount overlay: {e}"))
}

/// Removes a layer's directory (or the probe's) whatever the command left
/// in it: directories it made unreadable are given their permissions back
/// first (they are the user's own). Links are removed, never followed.
pub fn remove_layer_dir(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
        return;
    }
    fn open_up(dir: &Path) {
        let Ok(meta) = std::fs::symlink_metadata(dir) else { return };
        if !meta.is_dir() {
            return;
        }
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                open_up(&entry.path());
            }
        }
    }
    open_up(dir);
    let _ = std::fs::remove_dir_all(dir);
}

/// Binds `source` over `target` and makes that writable.
pub(crate) fn bind_cache(source: &Path, target: &Path) -> Result<(), Errno> {
    use nix::mount::{MsFlags, mount};
    mount(Some(source), target, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)?;
    set_read_only(target, false)
}

/// Binds `path` onto itself and makes that writable.
pub(crate) fn bind_writable(path: &Path) -> Result<(), Errno> {
    use nix::mount::{MsFlags, mount};
    mount(Some(path), path, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)?;
    set_read_only(path, false)
}

pub(crate) fn bind_read_only(path: &Path) -> Result<(), Errno> {
    use nix::mount::{MsFlags, mount};
    mount(Some(path), path, None::<&str>, MsFlags::MS_BIND | MsFlags::MS_REC, None::<&str>)?;
    set_read_only(path, true)
}
