//! A path's real name at a fixed cost, resolved once per admission.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// `std::fs::canonicalize` at a fixed cost: the path opened `O_PATH`
/// (no read permission needed, nothing of a FIFO or device set off) and
/// its descriptor's name read back — three system calls where `realpath`
/// makes one per component. Where the kernel's name is not a path (no
/// `/proc`, a file deleted meanwhile), `realpath` answers. Inside a
/// [`remember_canonical`] scope each path is resolved once.
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    if let Some(known) = CANONICAL.with(|m| m.borrow().as_ref().and_then(|m| m.get(path).cloned())) {
        return known.map_err(std::io::Error::from);
    }
    let found = canonical_now(path);
    CANONICAL.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut()
            && m.len() < 16
        {
            m.insert(path.to_owned(), found.as_ref().map(Clone::clone).map_err(std::io::Error::kind));
        }
    });
    found
}

fn canonical_now(path: &Path) -> std::io::Result<PathBuf> {
    let fd = nix::fcntl::open(path, OFlag::O_PATH | OFlag::O_CLOEXEC, Mode::empty())?;
    match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        // The name must still lead to what was opened: a file of a mount
        // detached meanwhile, or renamed, is named as if it were elsewhere.
        Ok(real) if real.is_absolute() && same_file(&fd, &real) => Ok(real),
        _ => std::fs::canonicalize(path),
    }
}

/// Opens the directory whose real name is `dir` (`O_PATH`), as a root to
/// work beneath: refused when what the name leads to now is not that
/// directory (a directory on the way swapped for a link since `dir` was
/// judged), so nothing opened beneath the descriptor lies elsewhere.
pub fn open_dir_as(dir: &Path) -> std::io::Result<OwnedFd> {
    let fd = nix::fcntl::open(dir, OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC, Mode::empty())?;
    match std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())) {
        Ok(real) if real == dir => Ok(fd),
        _ => Err(std::io::Error::other(format!("{} changed while it was checked", dir.display()))),
    }
}

/// Whether the directory `fd` is open on is still the one at `dir`.
pub fn still_at(fd: &OwnedFd, dir: &Path) -> bool {
    same_file(fd, dir) && std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).is_ok_and(|real| real == dir)
}

/// Whether `name` leads to the file `fd` is open on.
fn same_file(fd: &OwnedFd, name: &Path) -> bool {
    let (Ok(held), Ok(named)) = (nix::sys::stat::fstat(fd), nix::sys::stat::stat(name)) else { return false };
    (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)
}

type Canonicals = std::collections::HashMap<PathBuf, Result<PathBuf, std::io::ErrorKind>>;

thread_local! {
    static CANONICAL: std::cell::RefCell<Option<Canonicals>> = const { std::cell::RefCell::new(None) };
}

/// While the guard lives, [`canonical`] on this thread resolves each path
/// once (admission judges a call's path, then the tool judges it again:
/// microseconds apart, and what is opened is checked anew at the open).
pub fn remember_canonical() -> RememberCanonical {
    let outer = CANONICAL.with(|m| m.borrow().is_some());
    if !outer {
        CANONICAL.with(|m| *m.borrow_mut() = Some(Canonicals::new()));
    }
    RememberCanonical { outer, _here: std::marker::PhantomData }
}

/// See [`remember_canonical`]. Not `Send`: it must end on the thread it
/// began on.
#[must_use]
pub struct RememberCanonical {
    outer: bool,
    _here: std::marker::PhantomData<*const ()>,
}

impl Drop for RememberCanonical {
    fn drop(&mut self) {
        if !self.outer {
            CANONICAL.with(|m| *m.borrow_mut() = None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attack review's attempt, kept: a directory judged by its real
    /// name, then swapped for a link to another before it is opened (or
    /// while it is walked), is not taken for the one judged.
    #[test]
    fn a_directory_swapped_for_a_link_after_it_was_judged_is_refused() {
        let (_tmp, base) = crate::fs::real_temp_dir();
        let (ws, elsewhere) = (base.join("ws"), base.join("elsewhere"));
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir(&elsewhere).unwrap();
        let judged = canonical(&ws.join("sub")).unwrap();
        let held = open_dir_as(&judged).unwrap();
        assert!(still_at(&held, &judged));
        // Swapped: `sub` is now a link out of the workspace.
        std::fs::rename(ws.join("sub"), ws.join("sub-away")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, ws.join("sub")).unwrap();
        let e = open_dir_as(&judged).unwrap_err();
        assert!(e.to_string().contains("changed while it was checked"), "{e}");
        assert!(!still_at(&held, &judged), "the held directory is not at its name any more");
        // Swapped back: the held one is at its name again.
        std::fs::remove_file(ws.join("sub")).unwrap();
        std::fs::rename(ws.join("sub-away"), ws.join("sub")).unwrap();
        assert!(still_at(&held, &judged));
        assert!(open_dir_as(&judged).is_ok());
    }
}
