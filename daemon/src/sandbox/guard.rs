//! What one confined call guards on its workspace from its start to its
//! end (its job's, in the background) — issue 24's "nothing left for
//! later": the scan of the settings and repositories there, placeholders
//! for protected paths that do not exist, protected links put back,
//! settings and repositories a command created moved aside, and the
//! objects a worktree call staged taken in. Every move is made through a
//! directory opened beneath the workspace root with no symbolic link on
//! the way.

use std::path::{Path, PathBuf};

use super::{objects, placeholders, protected};

/// Names that hold settings agentd, other agents or git obey (a
/// `commondir` sends git to another repository's hooks).
pub const SETTINGS_NAMES: &[&str] = &[".agentd", ".claude", ".mcp.json", ".git/commondir", ".git/config.worktree"];

/// What [`scan`] found, and what it could not look at.
#[derive(Debug, Default)]
pub struct Scan {
    /// Settings names (any case).
    pub settings: Vec<PathBuf>,
    /// `.git` entries: directories, or files naming a git directory.
    pub git: Vec<PathBuf>,
    /// Directories that could not be listed and paths that could not be
    /// looked at, with why: what they hold is unknown, never "nothing".
    pub unexaminable: Vec<(PathBuf, std::io::Error)>,
    /// Directories that were listed and then were gone (or no longer
    /// directories) when the walk came to them: renamed meanwhile, so
    /// what they hold may be elsewhere, unseen.
    pub vanished: Vec<PathBuf>,
    /// The bound was reached: what lies past it was not looked at.
    pub cut: bool,
}

impl Scan {
    /// Why a call must not start on what this scan saw, if it must not:
    /// anything not looked at is refused, never taken for nothing there.
    pub fn refusal(&self) -> Option<String> {
        if let Some((path, e)) = self.unexaminable.first() {
            return Some(format!(
                "{} cannot be examined ({e}): it may hold settings or repositories that would be obeyed, so the \
                 command was not run (give it its permissions back, e.g. chmod u+rwx, or remove it)",
                path.display()
            ));
        }
        if self.cut {
            return Some(format!(
                "the workspace holds more than {SCAN_ENTRIES} entries within 4 levels (outside node_modules, \
                 target, build, vendor, dist, .venv, __pycache__), too many to look for planted settings and \
                 repositories in, so the command was not run (move or remove what is not needed, or put it under \
                 one of those directories)"
            ));
        }
        // A directory renamed meanwhile (a job at work) is not refused: what
        // it holds, unseen now, is new at the end and moved aside then.
        None
    }
}

/// Whether an error looking at a path says only that nothing is there.
fn absence(e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
}

/// The settings present in the roots (at the roots, and settings
/// directories a few levels down: a session opened on `pkg/` reads
/// `pkg/.claude`; build and dependency trees skipped), and the
/// `.git` entries (directories, or files naming a git directory) of the
/// roots and of the repositories nested in them, found in the same walk:
/// their hooks and config are protected like the workspace's own. Breadth
/// first, directories only descended into, at most `bound` entries looked
/// at (then [`Scan::cut`]). Every error but absence is kept in
/// [`Scan::unexaminable`] (issue 48: a directory made unlistable, `chmod
/// 0311 pkg`, hid the settings planted in it).
pub fn scan(roots: &[PathBuf], bound: Option<usize>) -> Scan {
    const SKIP: &[&str] =
        &[".git", "node_modules", "target", "vendor", ".venv", "venv", "dist", "build", "__pycache__"];
    let mut s = Scan::default();
    let there = |p: PathBuf, s: &mut Scan| match std::fs::symlink_metadata(&p) {
        Ok(_) => Some(p),
        Err(e) if absence(&e) => None,
        Err(e) => {
            s.unexaminable.push((p, e));
            None
        }
    };
    for root in roots {
        for name in SETTINGS_NAMES {
            if let Some(p) = there(root.join(name), &mut s) {
                s.settings.push(p);
            }
        }
        if let Some(p) = there(root.join(".git"), &mut s) {
            s.git.push(p);
        }
    }
    // Found so far, looked up in constant time: the walk after a call has
    // no bound, and a linear look-up per name made 90,000 planted `.claude`
    // directories cost minutes (attack on issue 48).
    let mut found: std::collections::HashSet<PathBuf> = s.settings.iter().chain(&s.git).cloned().collect();
    let mut queue: std::collections::VecDeque<(PathBuf, usize)> = roots.iter().map(|r| (r.clone(), 0)).collect();
    let mut seen = 0usize;
    while let Some((dir, depth)) = queue.pop_front() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // A root that is gone is no workspace to protect; a directory
            // listed a moment ago and gone now was moved.
            Err(e) if absence(&e) && depth == 0 => continue,
            Err(e) if absence(&e) => {
                s.vanished.push(dir);
                continue;
            }
            Err(e) => {
                s.unexaminable.push((dir, e));
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    s.unexaminable.push((dir.clone(), e));
                    break;
                }
            };
            seen += 1;
            if bound.is_some_and(|b| seen > b) {
                s.cut = true;
                return s;
            }
            let name = entry.file_name();
            let path = entry.path();
            // In any case: a case-insensitive directory takes `.Claude`
            // for `.claude`.
            let name = name.to_string_lossy().to_ascii_lowercase();
            if matches!(name.as_str(), ".agentd" | ".claude" | ".mcp.json") && found.insert(path.clone()) {
                s.settings.push(path.clone());
            }
            if name == ".git" && found.insert(path.clone()) {
                s.git.push(path.clone());
            }
            if depth + 1 < 4 && !SKIP.contains(&name.as_str()) {
                match entry.file_type() {
                    Ok(t) if t.is_dir() => queue.push_back((path, depth + 1)),
                    Ok(_) => {}
                    Err(e) if absence(&e) => s.vanished.push(path),
                    Err(e) => s.unexaminable.push((path, e)),
                }
            }
        }
    }
    s
}

/// Entries [`scan`] looks at before a call, at most: past them the call is
/// refused ([`Scan::refusal`]). At the end of a call the scan has no bound
/// (what the call made is examined whole, whatever it costs that call).
pub const SCAN_ENTRIES: usize = 200_000;

/// Opens `path` without waiting (a FIFO planted where a git file or a
/// configuration is read would block the daemon for good).
fn open_nonblocking(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new().read(true).custom_flags(nix::libc::O_NONBLOCK).open(path)
}

/// Every path of [`protected`] at the roots and of the user's protected
/// files inside them that does not exist: these get placeholders for the
/// call. `.git/*` only where `.git` is a directory (an empty `.git` would
/// hide a repository above), and nothing whose parent would have to be made
/// but in the home directory.
pub fn absent_protected(roots: &[PathBuf]) -> Vec<PathBuf> {
    absent_protected_kinds(roots).into_iter().map(|(p, _)| p).collect()
}

/// [`absent_protected`], each with whether it is a directory (a file's
/// placeholder is an empty file: a tool that reads `~/.gitconfig` while a
/// call runs finds an empty one, not a directory).
pub fn absent_protected_kinds(roots: &[PathBuf]) -> Vec<(PathBuf, bool)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let is_file = |p: &Path| {
        home.as_ref().is_some_and(|h| crate::permission::USER_PROTECTED_FILES.iter().any(|rel| p == h.join(rel)))
    };
    let mut out: Vec<(PathBuf, bool)> = absent_protected_paths(roots)
        .into_iter()
        .map(|p| {
            let dir = !is_file(&p);
            (p, dir)
        })
        .collect();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn absent_protected_paths(roots: &[PathBuf]) -> Vec<PathBuf> {
    let user = crate::permission::user_protected_paths();
    let mut out = Vec::new();
    for root in roots {
        let git_dir = std::fs::symlink_metadata(root.join(".git")).is_ok_and(|m| m.is_dir());
        for rel in protected() {
            if rel.starts_with(".git/") && !git_dir {
                continue;
            }
            out.push(root.join(rel));
        }
        out.extend(user.iter().filter(|p| p.starts_with(root) && *p != root).cloned());
    }
    out.retain(|p| placeholders::absent(p));
    out.sort();
    out.dedup();
    out
}

/// The directories between a root and each protected path: bound onto
/// themselves so that none can be renamed away with the read-only bind
/// inside it (`mv ~/.config ~/.c && mkdir -p ~/.config/agentd`).
pub fn parents_to_pin(roots: &[PathBuf], protect: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for path in protect {
        let Some(root) = roots.iter().filter(|r| path.starts_with(r)).max_by_key(|r| r.as_os_str().len()) else {
            continue;
        };
        let mut dir = path.parent();
        while let Some(d) = dir {
            if !d.starts_with(root) || d == root {
                break;
            }
            if !out.iter().any(|o: &PathBuf| o == d) && d.is_dir() && !d.is_symlink() {
                out.push(d.to_path_buf());
            }
            dir = d.parent();
        }
    }
    // Outer directories first: each bind then lands inside the one before.
    out.sort_by_key(|p| p.components().count());
    out
}

/// What one confined call guards on its workspace from start to end (to
/// the end of its job, for a background one): the settings present at the
/// start (what is new at the end is moved aside), the placeholders of
/// protected paths that do not exist, and the nested repositories' hooks
/// and config. While it lives, a `session/create` on the workspace first
/// moves aside what it created so far ([`quarantine_live`]).
#[derive(Debug)]
pub struct CallGuard {
    roots: Vec<PathBuf>,
    before: Vec<PathBuf>,
    /// What git obeys that exists (nested repositories' hooks and config,
    /// hook directories and included files the configuration names).
    git_protect: Vec<PathBuf>,
    /// The git directories there were at the start.
    git_before: Vec<PathBuf>,
    /// Protected paths that are symbolic links, and where they point: a
    /// command can replace the link (the bind covers its target), so it is
    /// put back at the end.
    links: Vec<(PathBuf, PathBuf)>,
    held: placeholders::Held,
    /// Its entry among the live guards, gone when it is dropped (also when
    /// the call never started).
    live: LiveEntry,
    /// In a worktree: (staging, the repository's objects, SHA-256).
    objects: Option<(PathBuf, PathBuf, bool)>,
}

/// What a [`CallGuard`] did at the end of its call.
#[derive(Debug, Default)]
pub struct Finished {
    /// Settings moved aside (from → to).
    pub moved: Vec<String>,
    /// Staged objects that were not taken into the repository, and why.
    pub objects_refused: Vec<String>,
    /// What could not be examined after the call, and what was done with
    /// it ([`set_aside_unexaminable`]).
    pub unexamined: Vec<String>,
}

/// A [`CallGuard`]'s entry in [`LIVE_GUARDS`].
#[derive(Debug)]
struct LiveEntry(u64);

impl Drop for LiveEntry {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE_GUARDS.lock() {
            live.retain(|(i, ..)| *i != self.0);
        }
    }
}

/// A live guard: its id, the roots, the settings present at its start.
type LiveGuard = (u64, Vec<PathBuf>, Vec<PathBuf>);

static LIVE_GUARDS: std::sync::Mutex<Vec<LiveGuard>> = std::sync::Mutex::new(Vec::new());
static NEXT_GUARD: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl CallGuard {
    /// Scans the roots, makes the placeholders (recorded in `ledger`) and
    /// pins the protected paths that exist; refused when one stays locked
    /// by another process.
    pub fn new(roots: &[PathBuf], ledger: &std::sync::Arc<placeholders::Ledger>) -> Result<CallGuard, String> {
        let found = scan(roots, Some(SCAN_ENTRIES));
        if let Some(refusal) = found.refusal() {
            return Err(refusal);
        }
        let Scan { settings: before, git: git_before, .. } = found;
        // A `.git` file that cannot be read names a git directory whose
        // hooks would go unprotected: refused like any unexaminable path.
        for entry in &git_before {
            if crate::permission::git_dir_of(entry).is_none()
                && let Err(e) = open_nonblocking(entry)
                && !absence(&e)
            {
                return Err(placeholders::unexaminable(entry, &e));
            }
        }
        let git_dirs: Vec<PathBuf> = git_before.iter().filter_map(|e| crate::permission::git_dir_of(e)).collect();
        let obeyed = git_obeys(&git_dirs)?;
        let exists = |p: &PathBuf| !placeholders::absent(p);
        let inside = |p: &PathBuf| roots.iter().any(|r| p.starts_with(r));
        let mut absent = absent_protected_kinds(roots);
        // Hook directories are directories; included configuration files
        // are files.
        absent.extend(obeyed.iter().filter(|p| !exists(p) && inside(p)).map(|p| {
            let dir = p.file_name().is_some_and(|n| n == "hooks") || p.extension().is_none() && !p.ends_with("config");
            (p.clone(), dir)
        }));
        let git_protect: Vec<PathBuf> = obeyed.iter().filter(|p| exists(p)).cloned().collect();
        let user = crate::permission::user_protected_paths();
        let candidates: Vec<PathBuf> = roots
            .iter()
            .flat_map(|r| protected().map(move |rel| r.join(rel)))
            .chain(user.into_iter().filter(|p| inside(p)))
            .chain(obeyed.iter().cloned())
            .chain(before.iter().cloned())
            .collect();
        let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
        for path in &candidates {
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => {
                    links.extend(std::fs::read_link(path).ok().map(|t| (path.clone(), t)));
                }
                // What exists is pinned, with what it would get if it went
                // (it may be another daemon's placeholder).
                Ok(m) => absent.push((path.clone(), m.is_dir())),
                Err(_) => {}
            }
        }
        // A protected link to nothing: its target gets the placeholder (a
        // command would otherwise create what the link makes obeyed), when
        // it is plainly inside a root (no `.` or `..` on the way).
        for (link, target) in &links {
            if std::fs::metadata(link).is_ok() {
                continue;
            }
            let Some(parent) = link.parent() else { continue };
            let plain = target
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_) | std::path::Component::RootDir));
            let target = parent.join(target);
            if plain && inside(&target) {
                absent.push((target, true));
            }
        }
        // Another call's placeholders among the settings found (a session
        // on a directory inside these roots makes its own) are among what
        // exists: held too.
        let held = placeholders::hold(&absent, roots, ledger)?;
        let id = NEXT_GUARD.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut live) = LIVE_GUARDS.lock() {
            live.push((id, roots.to_vec(), before.clone()));
        }
        Ok(CallGuard {
            roots: roots.to_vec(),
            before,
            git_protect,
            git_before,
            links,
            held,
            live: LiveEntry(id),
            objects: None,
        })
    }

    /// In a worktree: the objects the call stages in `staging` are taken
    /// into `objects` at its end ([`objects::migrate`]).
    pub fn with_objects(mut self, staging: PathBuf, objects: PathBuf, sha256: bool) -> CallGuard {
        self.objects = Some((staging, objects, sha256));
        self
    }

    /// Settings present at the start, the nested repositories' hooks and
    /// config, and the placeholders it holds (a hook directory git is told
    /// to use that does not exist is none of [`protected`]): bound
    /// read-only with [`protected`].
    pub fn protect_too(&self) -> Vec<PathBuf> {
        let mut out: Vec<PathBuf> = Vec::new();
        for p in self.before.iter().chain(&self.git_protect).chain(self.held.paths()).chain(self.held.pinned()) {
            if !out.contains(p) {
                out.push(p.clone());
            }
        }
        out
    }

    /// The placeholders this call holds (they exist now).
    pub fn placeholders(&self) -> &[PathBuf] {
        self.held.paths()
    }

    /// At the end of the call: the placeholders go (unless another call
    /// holds them), and settings it created are moved aside, with what
    /// could not be examined; returns what moved.
    pub fn finish(self) -> Finished {
        let CallGuard { roots, before, held, live, objects, links, git_before, .. } = self;
        drop(live);
        drop(held);
        let mut moved = restore_links(&roots, &links);
        // One walk for what the call left, whole: no bound (what the call
        // made is examined, whatever that costs it), walked again while
        // directories move under it (a job renaming them), a few times.
        let mut found = scan(&roots, None);
        for _ in 0..3 {
            if found.vanished.is_empty() {
                break;
            }
            found = scan(&roots, None);
        }
        let mut unexamined = set_aside_unexaminable(&roots, &found);
        let (repositories, unreadable) = quarantine_new_repositories(&roots, &git_before, &found.git);
        moved.extend(repositories);
        unexamined.extend(unreadable);
        let objects_refused = match objects {
            Some((staging, main, sha256)) => objects::migrate(&staging, &main, sha256).refused,
            None => Vec::new(),
        };
        moved.extend(quarantine_new_settings(&roots, &before, found.settings));
        Finished { moved, objects_refused, unexamined }
    }
}

/// What the end of a call does with what [`scan`] could not examine
/// (issue 48): a directory it could not list, or an entry it could not
/// look at, may hold settings or a repository the command planted, so it
/// is moved aside like them; one that cannot be moved is said, and the
/// next call there is refused until the user gives it its permissions
/// back (the scan before a call refuses it). A directory that kept moving
/// while the workspace was walked is said too. Returns what to tell.
fn set_aside_unexaminable(roots: &[PathBuf], found: &Scan) -> Vec<String> {
    let mut out = Vec::new();
    for (path, e) in &found.unexaminable {
        let aside = aside_name(path, "unexaminable");
        match rename_aside(roots, path, &aside) {
            Ok(()) => out.push(format!(
                "{} could not be examined after the command ({e}): it may hold settings or repositories the \
                 command planted, so it was moved aside to {}; look inside before using it (chmod -R u+rwx)",
                path.display(),
                aside.display()
            )),
            Err(moving) => out.push(format!(
                "{} could not be examined after the command ({e}) and could NOT be moved aside ({moving}): it may \
                 hold settings or repositories the command planted, and calls in this workspace are refused until \
                 it can be examined; look inside (chmod u+rwx) and remove what you did not put there",
                path.display()
            )),
        }
    }
    for path in &found.vanished {
        out.push(format!(
            "{} was renamed or removed again and again while the workspace was examined after the command: \
             settings or repositories planted in it may have been missed; look for .claude, .agentd, .mcp.json \
             and .git where it went",
            path.display()
        ));
    }
    out
}

/// What git obeys in the repositories of `git_dirs` beyond their `hooks`
/// and `config`: those two, the hook directory `core.hooksPath` names, the
/// files their configuration includes (whatever the condition), and the
/// git directories of their submodules and linked worktrees (hooks,
/// config, commondir, config.worktree).
pub fn git_obeys(git_dirs: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for dir in git_dirs {
        out.push(dir.join("hooks"));
        out.push(dir.join("config"));
        out.extend(crate::permission::git_config_obeys(dir, dir.parent().unwrap_or(dir)));
        // Fail closed (issue 48): a `modules` made unlistable (`chmod 000
        // .git/modules`) hid its submodules' hooks from the call. A
        // submodule's git directory may hold submodules of its own
        // (`modules/lib/modules/inner`), and one named `a/b` lives in
        // `modules/a/b`: walked down, bounded, refused past the bound.
        let unexaminable = |p: &Path, e: std::io::Error| placeholders::unexaminable(p, &e);
        let mut queue: Vec<(PathBuf, usize)> = vec![(dir.join("modules"), 0), (dir.join("worktrees"), 0)];
        let mut seen = 0usize;
        while let Some((list, depth)) = queue.pop() {
            let entries = match std::fs::read_dir(&list) {
                Ok(entries) => entries,
                Err(e) if absence(&e) => continue,
                Err(e) => return Err(unexaminable(&list, e)),
            };
            for entry in entries {
                let entry = entry.map_err(|e| unexaminable(&list, e))?;
                seen += 1;
                // Bounded (a command could make a million to slow every
                // call), and refused past it rather than left unprotected.
                if seen > GIT_ENTRIES {
                    return Err(format!(
                        "{} holds more than {GIT_ENTRIES} entries in modules/ and worktrees/, too many to protect; the \
                         command was not run (remove what is not a submodule or worktree of yours)",
                        dir.display()
                    ));
                }
                let mut git_dir = false;
                for name in ["hooks", "config", "commondir", "config.worktree", "HEAD"] {
                    let p = entry.path().join(name);
                    match std::fs::symlink_metadata(&p) {
                        Ok(_) if name == "HEAD" => git_dir = true,
                        Ok(_) => {
                            git_dir = true;
                            out.push(p);
                        }
                        Err(e) if absence(&e) => {}
                        Err(e) => return Err(unexaminable(&p, e)),
                    }
                }
                if list.file_name().is_some_and(|n| n == "worktrees") || depth >= 8 {
                    continue;
                }
                if git_dir {
                    queue.push((entry.path().join("modules"), depth + 1));
                } else if entry.file_type().map_err(|e| unexaminable(&entry.path(), e))?.is_dir() {
                    queue.push((entry.path(), depth + 1));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Submodules or linked worktrees of one repository [`git_obeys`] looks at,
/// at most.
pub const GIT_ENTRIES: usize = 1000;

/// Puts back each protected symbolic link a command replaced (what is
/// there now is moved aside); returns what it did.
fn restore_links(roots: &[PathBuf], links: &[(PathBuf, PathBuf)]) -> Vec<String> {
    let mut out = Vec::new();
    for (path, target) in links {
        if std::fs::read_link(path).ok().as_ref() == Some(target) {
            continue;
        }
        let aside = aside_name(path, "link");
        let there = std::fs::symlink_metadata(path).is_ok();
        if there && let Err(e) = rename_aside(roots, path, &aside) {
            out.push(format!("{} (a protected link it replaced, which could NOT be moved aside: {e})", path.display()));
            continue;
        }
        match symlink_beneath(roots, target, path) {
            Ok(()) if there => out.push(format!(
                "{} (it replaced the link; now {}, the link restored)",
                path.display(),
                aside.display()
            )),
            Ok(()) => out.push(format!("{} (it removed the link; restored)", path.display())),
            Err(e) => {
                out.push(format!("{} (a protected link it replaced, which could NOT be restored: {e})", path.display()))
            }
        }
    }
    out
}

/// Moves aside a git directory a command made (`git init`) whose hooks or
/// configuration would run a program when the user next runs git there,
/// or which cannot be examined (`chmod 000 sub/.git/hooks`: the user's
/// `chmod` gives the hook back). Returns what moved, and what could not
/// be examined.
fn quarantine_new_repositories(roots: &[PathBuf], before: &[PathBuf], now: &[PathBuf]) -> (Vec<String>, Vec<String>) {
    let (mut out, mut unexamined) = (Vec::new(), Vec::new());
    for entry in now.iter().filter(|d| !before.contains(d)) {
        // A `.git` file names its git directory (a bare one made beside it):
        // that is what git would obey.
        let why = match crate::permission::git_dir_of(entry) {
            Some(dir) => repository_runs_code(entry, &dir),
            // A `.git` git would obey (a file, or a link to a file or
            // directory) that names nothing the daemon can look at:
            // unexaminable, moved aside (never taken for no repository).
            None => match open_nonblocking(entry) {
                Err(e) if absence(&e) => Ok(None),
                Err(e) => Err(e),
                Ok(f) if f.metadata().is_ok_and(|m| m.is_file() && m.len() == 0) => Ok(None),
                Ok(f) if f.metadata().is_ok_and(|m| m.is_file() || m.is_dir()) => {
                    Err(std::io::Error::other("a .git naming no git directory the daemon can read"))
                }
                Ok(_) => Ok(None),
            },
        };
        let why = match why {
            Ok(Some(why)) => why,
            Ok(None) => continue,
            Err(e) => {
                let aside = aside_name(entry, "repository");
                unexamined.push(match rename_aside(roots, entry, &aside) {
                    Ok(()) => format!(
                        "{} (a new repository) could not be examined after the command ({e}), so it was moved \
                         aside to {}; look at its hooks and config before using it",
                        entry.display(),
                        aside.display()
                    ),
                    Err(moving) => format!(
                        "{} (a new repository) could not be examined after the command ({e}) and could NOT be \
                         moved aside ({moving}); look at its hooks and config, and remove what you did not put there",
                        entry.display()
                    ),
                });
                continue;
            }
        };
        let aside = aside_name(entry, "repository");
        match rename_aside(roots, entry, &aside) {
            Ok(()) => out.push(format!(
                "{} (a new repository whose {why} would run; now {})",
                entry.display(),
                aside.display()
            )),
            Err(e) => out.push(format!(
                "{} (a new repository whose {why} would run, which could NOT be moved aside: {e})",
                entry.display()
            )),
        }
    }
    (out, unexamined)
}

/// What in the repository of the `.git` entry `entry` (git directory
/// `dir`) would run a program: an executable hook, or configuration that
/// names one; an error when its hooks or config cannot be looked at.
fn repository_runs_code(entry: &Path, dir: &Path) -> std::io::Result<Option<String>> {
    let hooks = match std::fs::read_dir(dir.join("hooks")) {
        Ok(hooks) => hooks.collect::<std::io::Result<Vec<_>>>()?,
        Err(e) if absence(&e) => Vec::new(),
        Err(e) => return Err(e),
    };
    for h in hooks {
        if h.file_name().to_string_lossy().ends_with(".sample") {
            continue;
        }
        match h.metadata() {
            Ok(m) if std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0 => {
                return Ok(Some(format!("hook {}", h.file_name().to_string_lossy())));
            }
            Ok(_) => {}
            Err(e) if absence(&e) => {}
            Err(e) => return Err(e),
        }
    }
    // Read below as git reads them: a FIFO there would block the daemon
    // (attack on issue 48), so what is not a regular file is unexaminable.
    for name in ["config", "config.worktree", "commondir"] {
        match std::fs::metadata(dir.join(name)) {
            Ok(m) if !m.is_file() => {
                return Err(std::io::Error::other(format!("{name} is not a regular file")));
            }
            Ok(_) => {
                open_nonblocking(&dir.join(name))?;
            }
            Err(e) if absence(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(entry.parent().and_then(crate::permission::git_config_runs_code))
}

/// Before settings are read for `cwd` (`session/create`): moves aside the
/// settings that calls still running (background jobs) created in any
/// workspace that holds `cwd` or lies inside it; returns what moved.
pub fn quarantine_live(cwd: &Path) -> Vec<String> {
    let live: Vec<(Vec<PathBuf>, Vec<PathBuf>)> = match LIVE_GUARDS.lock() {
        Ok(live) => live
            .iter()
            .filter(|(_, roots, _)| roots.iter().any(|r| cwd.starts_with(r) || r.starts_with(cwd)))
            .map(|(_, r, b)| (r.clone(), b.clone()))
            .collect(),
        Err(_) => Vec::new(),
    };
    live.iter()
        .flat_map(|(roots, before)| {
            let found = scan(roots, None);
            let mut out = set_aside_unexaminable(roots, &found);
            out.extend(quarantine_new_settings(roots, before, found.settings));
            out
        })
        .collect()
}

/// Moves the settings of `now` (what a scan of the roots found) that were
/// not there `before` out of the way (`.claude` →
/// `.claude.agentd-quarantine-<time>-<random>`); returns what moved.
fn quarantine_new_settings(roots: &[PathBuf], before: &[PathBuf], now: Vec<PathBuf>) -> Vec<String> {
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let mut moved = Vec::new();
    for path in now {
        // A placeholder another call holds is a read-only mount in its
        // sandbox: moving it would move that mount out of the way. So is
        // another daemon process's, which this one cannot tell from a
        // directory a command made: what is empty holds no settings and
        // stays (an empty directory or file is read as nothing).
        if before.contains(&path) || placeholders::is_live(&path) || holds_nothing(&path) {
            continue;
        }
        // A name nobody can have made beforehand, and never over anything:
        // a rename that fails must not leave the settings in place unsaid.
        let aside = aside_name(&path, &stamp.to_string());
        match rename_aside(roots, &path, &aside) {
            Ok(()) => moved.push(format!("{} (now {})", path.display(), aside.display())),
            Err(e) => {
                tracing::warn!("settings {} could not be moved aside: {e}", path.display());
                moved.push(format!("{} (which could NOT be moved aside: {e}; remove it)", path.display()));
            }
        }
    }
    moved
}

/// Whether `path` is an empty directory or an empty regular file (not
/// through a link).
fn holds_nothing(path: &Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::read_dir(path).is_ok_and(|mut d| d.next().is_none()),
        Ok(m) => m.is_file() && m.len() == 0,
        Err(_) => false,
    }
}

/// Where `path` is moved aside: `<name>.agentd-quarantine-<tag>-<random>`
/// beside it, a name nobody can have made beforehand.
fn aside_name(path: &Path, tag: &str) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let random = uuid::Uuid::new_v4().simple().to_string();
    path.with_file_name(format!("{name}.agentd-quarantine-{tag}-{}", &random[..12]))
}

/// The directory holding `path`, opened beneath the root of `roots` that
/// holds it with no symbolic link on the way (a command may swap one into
/// the path at any moment), and the entry's name in it.
fn parent_beneath(roots: &[PathBuf], path: &Path) -> std::io::Result<(std::os::fd::OwnedFd, std::ffi::OsString)> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let outside = || std::io::Error::other(format!("{} is not inside a workspace root", path.display()));
    let root = roots.iter().filter(|r| path.starts_with(r) && path != r.as_path()).max_by_key(|r| r.as_os_str().len());
    let root = root.ok_or_else(outside)?;
    let name = path.file_name().ok_or_else(outside)?.to_os_string();
    let rel = path.parent().and_then(|p| p.strip_prefix(root).ok()).ok_or_else(outside)?;
    let rel = if rel.as_os_str().is_empty() { Path::new(".") } else { rel };
    use std::os::fd::AsFd;
    let how = OpenHow::new().flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW);
    let root_fd = openat2(nix::fcntl::AT_FDCWD, root.as_path(), how).map_err(std::io::Error::from)?;
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let parent = openat2(root_fd.as_fd(), rel, how).map_err(std::io::Error::from)?;
    Ok((parent, name))
}

/// Moves `path` (inside a root) aside to `aside` (beside it), never over
/// anything, never through a symbolic link.
#[allow(unsafe_code)]
fn rename_aside(roots: &[PathBuf], path: &Path, aside: &Path) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let (dir, name) = parent_beneath(roots, path)?;
    let to = aside.file_name().ok_or_else(|| std::io::Error::other("no name"))?;
    let c = |n: &std::ffi::OsStr| std::ffi::CString::new(n.as_bytes()).map_err(std::io::Error::other);
    let (from, to) = (c(&name)?, c(to)?);
    let rename = || {
        // SAFETY: a directory descriptor and two valid C strings.
        let rc = unsafe {
            nix::libc::renameat2(
                dir.as_raw_fd(),
                from.as_ptr(),
                dir.as_raw_fd(),
                to.as_ptr(),
                nix::libc::RENAME_NOREPLACE,
            )
        };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    };
    let refused = match rename() {
        Err(e) if e.raw_os_error() == Some(nix::libc::EACCES) => e,
        done => return done,
    };
    // A directory a command made unwritable (`chmod 555 pkg` after
    // planting `pkg/.claude`; attack on issue 48): it is the daemon's user's,
    // so the daemon lets itself move out of it, then puts its mode back.
    use std::os::unix::fs::PermissionsExt;
    let held = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let Ok(mode) = std::fs::metadata(&held).map(|m| m.permissions().mode() & 0o7777) else { return Err(refused) };
    if std::fs::set_permissions(&held, std::fs::Permissions::from_mode(mode | 0o700)).is_err() {
        return Err(refused);
    }
    let moved = rename();
    let _ = std::fs::set_permissions(&held, std::fs::Permissions::from_mode(mode));
    moved
}

/// Makes the symbolic link `path` → `target` (inside a root), never through
/// a symbolic link.
fn symlink_beneath(roots: &[PathBuf], target: &Path, path: &Path) -> std::io::Result<()> {
    let (dir, name) = parent_beneath(roots, path)?;
    nix::unistd::symlinkat(target, &dir, name.as_os_str()).map_err(std::io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two calls on one workspace: the second finds the first's
    /// placeholders. Taken for settings that exist, they would be bound by
    /// a call that does not hold them, and gone (the first call ended)
    /// before its sandbox is built: "protect …/.vscode: ENOENT".
    /// Too many submodule or worktree entries to look at (a command could
    /// make a million to slow every call): refused, not left unprotected.
    #[test]
    fn too_many_worktrees_refuse_the_call() {
        let (_work, r) = crate::fs::real_temp_dir();
        for n in 0..=GIT_ENTRIES {
            std::fs::create_dir_all(r.join(format!(".git/worktrees/w{n}"))).unwrap();
        }
        let refused = CallGuard::new(std::slice::from_ref(&r), &Default::default()).unwrap_err();
        assert!(refused.contains("worktrees") && refused.contains("not run"), "{refused}");
        std::fs::remove_dir(r.join(".git/worktrees/w0")).unwrap();
        assert!(CallGuard::new(std::slice::from_ref(&r), &Default::default()).is_ok());
    }

    #[test]
    fn a_placeholder_another_call_made_is_held_by_the_next_too() {
        let (_root, r) = crate::fs::real_temp_dir();
        let roots = vec![r.clone()];
        let first = CallGuard::new(&roots, &Default::default()).unwrap();
        assert!(first.placeholders().contains(&r.join(".vscode")) && r.join(".vscode").is_dir());
        let second = CallGuard::new(&roots, &Default::default()).unwrap();
        assert!(second.placeholders().contains(&r.join(".vscode")), "{:?}", second.placeholders());
        first.finish();
        let bound = crate::sandbox::protected_paths(&roots, &second.protect_too()).unwrap();
        assert!(bound.contains(&r.join(".vscode")));
        for path in &bound {
            assert!(std::fs::symlink_metadata(path).is_ok(), "{} is bound and gone", path.display());
        }
        second.finish();
        assert!(!r.join(".vscode").exists());
    }

    /// `protected_paths` skips only what is not there (issue 48: it
    /// skipped a path whose `canonicalize` failed, so a `.git` flipped to
    /// mode 000 at the right moment left `.git/hooks` unbound): a link to
    /// nothing is no path to bind, a link that loops refuses the call.
    /// (Mode 000 itself is tested as `nobody`, e2e: root reads through it.)
    #[test]
    fn a_protected_path_that_cannot_be_resolved_refuses_the_call() {
        let (_root, r) = crate::fs::real_temp_dir();
        let roots = vec![r.clone()];
        assert_eq!(crate::sandbox::protected_paths(&roots, &[]).unwrap(), Vec::<PathBuf>::new());
        std::os::unix::fs::symlink("nowhere", r.join(".mcp.json")).unwrap();
        assert_eq!(crate::sandbox::protected_paths(&roots, &[]).unwrap(), Vec::<PathBuf>::new());
        std::os::unix::fs::symlink(".claude", r.join(".claude")).unwrap();
        let refused = crate::sandbox::protected_paths(&roots, &[]).unwrap_err();
        assert!(refused.contains(".claude cannot be examined"), "{refused}");
    }

    /// A hooks directory the configuration names and that does not exist
    /// gets a placeholder, and the placeholder is bound.
    #[test]
    fn an_absent_hooks_path_is_held_and_bound() {
        let (_root, r) = crate::fs::real_temp_dir();
        std::fs::create_dir(r.join(".git")).unwrap();
        std::fs::write(r.join(".git/config"), "[core]\n\thooksPath = hooks-later\n").unwrap();
        let roots = vec![r.clone()];
        let guard = CallGuard::new(&roots, &Default::default()).unwrap();
        assert!(r.join("hooks-later").is_dir());
        let bound = crate::sandbox::protected_paths(&roots, &guard.protect_too()).unwrap();
        assert!(bound.contains(&r.join("hooks-later")), "{bound:?}");
        guard.finish();
        assert!(!r.join("hooks-later").exists());
    }

    /// A placeholder swapped for a link (from outside the sandbox, where
    /// it is no mount) before the call ends: the end removes the link's
    /// target neither as a placeholder nor as a parent made for one, and
    /// a placeholder holding a file is left (and moved aside, as settings
    /// the call created).
    #[test]
    fn the_end_of_a_call_never_removes_through_a_placeholder_swapped_for_a_link() {
        let (_root, r) = crate::fs::real_temp_dir();
        let (_elsewhere, elsewhere) = crate::fs::real_temp_dir();
        std::fs::create_dir(elsewhere.join("empty")).unwrap();
        std::fs::create_dir(r.join(".git")).unwrap();
        std::fs::write(r.join(".git/config"), "[core]\n\thooksPath = later/hooks\n").unwrap();
        let roots = vec![r.clone()];
        let guard = CallGuard::new(&roots, &Default::default()).unwrap();
        assert!(r.join(".vscode").is_dir() && r.join("later/hooks").is_dir() && r.join(".claude").is_dir());
        std::fs::remove_dir(r.join(".vscode")).unwrap();
        std::os::unix::fs::symlink(elsewhere.join("empty"), r.join(".vscode")).unwrap();
        std::fs::remove_dir(r.join("later/hooks")).unwrap();
        std::fs::remove_dir(r.join("later")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, r.join("later")).unwrap();
        std::fs::create_dir(elsewhere.join("hooks")).unwrap();
        std::fs::write(r.join(".claude/settings.json"), "{}").unwrap();
        let finished = guard.finish();
        assert!(r.join(".vscode").is_symlink() && r.join("later").is_symlink());
        // Put in a placeholder: left there, and moved aside as new settings.
        assert!(!r.join(".claude").exists() && finished.moved.iter().any(|m| m.contains(".claude")), "{finished:?}");
        assert!(elsewhere.join("empty").is_dir(), "removed through the link at .vscode: {finished:?}");
        assert!(elsewhere.join("hooks").is_dir(), "removed through the link swapped in for later/: {finished:?}");
    }
}
