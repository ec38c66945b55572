//! What a command may not change, judged against the call's merged view
//! (its upper directory over the root): the protected names at any depth,
//! and in any git directory — found as git finds one — what makes git run
//! a program (hooks, configuration, where the repository's common
//! directory is). Git's own bookkeeping (index, refs, logs, objects)
//! changes as any file does.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use super::ChangeKind;

/// Names of files and directories a command's change never reaches, at
/// any depth and in any case (the one table in `permission`).
pub const NEVER_CHANGED: &[&str] = crate::permission::SETTINGS_NAMES;

/// The keys a new repository's configuration may hold: what `git init`,
/// `git clone`, `git submodule` and `git worktree` write. Anything else in
/// a configuration a command makes (an include, a pager, a driver, a hook
/// path, a helper) refuses it.
const NEW_CONFIG_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "core.worktree",
    "core.sharedrepository",
    "extensions.objectformat",
    "extensions.refstorage",
    "extensions.worktreeconfig",
    "extensions.partialclone",
    "init.defaultbranch",
    "user.name",
    "user.email",
];

/// Keys of a new configuration allowed under any subsection name
/// (`remote.origin.url`): section and variable.
const NEW_CONFIG_SUBSECTION_KEYS: &[(&str, &str)] = &[
    ("remote", "url"),
    ("remote", "pushurl"),
    ("remote", "fetch"),
    ("remote", "push"),
    ("remote", "tagopt"),
    ("remote", "mirror"),
    ("remote", "promisor"),
    ("remote", "partialclonefilter"),
    ("branch", "remote"),
    ("branch", "merge"),
    ("branch", "rebase"),
    ("submodule", "url"),
    ("submodule", "active"),
];

/// The judge of one layer's changes, with what it learned on the way.
pub struct Judgement<'a> {
    layer: &'a agentd_sandbox::Layer,
    /// Whether a directory (relative to the root) is a git directory in
    /// the merged view.
    git_dirs: RefCell<HashMap<PathBuf, bool>>,
    /// The user's own configuration (when the root holds the home
    /// directory).
    user: Vec<PathBuf>,
    /// Where protected names at the root's top link to (as written, and
    /// resolved where the target exists).
    links: Vec<PathBuf>,
    /// What the upper directory holds at a directory's path.
    upper_dirs: RefCell<HashMap<PathBuf, Upper>>,
    /// Whether the root has a directory at a path.
    lower_dirs: RefCell<HashMap<PathBuf, bool>>,
    /// The nearest repository (its top, relative) of a directory.
    repos: RefCell<HashMap<PathBuf, Option<PathBuf>>>,
    /// What a repository (by its top) obeys outside its git directory.
    obeyed: RefCell<HashMap<PathBuf, Vec<PathBuf>>>,
    /// Hook directories the user's own git configuration names relative
    /// to a repository's top (`core.hooksPath = .githooks`), by components.
    user_hooks: Vec<PathBuf>,
}

/// What the upper directory holds at a path.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upper {
    /// Nothing: the root's shows through.
    Nothing,
    /// A directory merged with the root's.
    Merged,
    /// Something that hides the root's beneath it: a deletion, a file, a
    /// directory that replaced the root's.
    Hides,
}

impl<'a> Judgement<'a> {
    /// The judge of `layer`'s changes.
    pub fn new(layer: &'a agentd_sandbox::Layer) -> Judgement<'a> {
        let root = &layer.root;
        let mut links = Vec::new();
        for name in NEVER_CHANGED.iter().chain(&[".git"]) {
            let link = root.join(name);
            if let Ok(target) = std::fs::read_link(&link) {
                links.push(crate::fs::normalize(&root.join(target)));
                links.extend(std::fs::canonicalize(&link));
            }
        }
        let user = crate::permission::user_protected_paths()
            .into_iter()
            .filter(|p| p.starts_with(root) || root.starts_with(p))
            .collect();
        Judgement {
            layer,
            git_dirs: RefCell::new(HashMap::new()),
            user,
            links,
            upper_dirs: RefCell::new(HashMap::new()),
            lower_dirs: RefCell::new(HashMap::new()),
            repos: RefCell::new(HashMap::new()),
            obeyed: RefCell::new(HashMap::new()),
            user_hooks: user_hook_paths(),
        }
    }

    /// Why the command may not make this change at `rel`, if it may not.
    pub fn refuses(&self, rel: &Path, kind: ChangeKind) -> Option<String> {
        let root = &self.layer.root;
        let names: Vec<&OsStr> = rel.components().map(|c| c.as_os_str()).collect();
        if let Some(n) = names.iter().find(|n| NEVER_CHANGED.iter().any(|p| n.eq_ignore_ascii_case(p))) {
            return Some(format!("protected ({} configures agentd or runs code later)", n.to_string_lossy()));
        }
        // The deepest git directory the path is in (or is), the root
        // itself included (a bare repository as the workspace).
        let git_dir = (0..=names.len()).rev().find(|&n| self.is_git_dir(&names[..n].iter().collect::<PathBuf>()));
        if let Some(n) = git_dir {
            let git: PathBuf = names[..n].iter().collect();
            if let Some(why) = self.git_change_refused(&git, &names[n..], rel, kind) {
                return Some(why);
            }
        }
        if kind != ChangeKind::Deleted {
            // A `.git` file or link: where git goes for this directory.
            if names.last().is_some_and(|n| n.eq_ignore_ascii_case(".git"))
                && !self.meta(rel).is_some_and(|m| m.is_dir())
                && let Some(why) = self.gitfile_refused(rel)
            {
                return Some(why);
            }
            // What makes a directory a repository (its `HEAD`, `objects`,
            // `refs`, `commondir`): the repository is judged whole.
            if let (Some(name), Some(parent)) = (names.last(), rel.parent())
                && ["HEAD", "objects", "refs", "commondir"].iter().any(|m| name == m)
                && !self.lower_is_git_dir(parent)
                && self.is_git_dir(parent)
                && let Some(why) = self.repository_refused(parent)
            {
                return Some(why);
            }
        }
        let abs = root.join(rel);
        // What the repository the path is in obeys elsewhere (its
        // `core.hooksPath`, included files); hook directories the user's
        // own configuration names for every repository.
        let parent = rel.parent().unwrap_or(Path::new(""));
        if let Some(top) = self.nearest_repo(parent)
            && let Some(p) = self.repo_obeys(&top).iter().find(|p| abs.starts_with(p))
        {
            return Some(format!("protected (the repository's configuration has git run or read {})", p.display()));
        }
        let comps: Vec<&OsStr> = names.clone();
        for hooks in &self.user_hooks {
            let h: Vec<&OsStr> = hooks.components().map(|c| c.as_os_str()).collect();
            if !h.is_empty() && comps.windows(h.len()).any(|w| w == h.as_slice()) && comps.len() > h.len() {
                return Some(format!("protected (your git configuration runs hooks from {})", hooks.display()));
            }
        }
        if self.user.iter().any(|p| crate::permission::starts_with_any_case(&abs, p)) {
            return Some("protected (the user's own configuration)".into());
        }
        if self.links.iter().any(|l| abs.starts_with(l)) {
            return Some("protected (a protected name links here)".into());
        }
        if crate::fs::in_state_dir(&abs) {
            return Some("agentd's state".into());
        }
        None
    }

    /// A path's metadata as the command left it: the upper's entry, else
    /// the root's (`None`: absent, or deleted by the command).
    pub fn meta(&self, rel: &Path) -> Option<std::fs::Metadata> {
        match std::fs::symlink_metadata(self.layer.upper.join(rel)) {
            Ok(m) if m.file_type().is_char_device() && m.rdev() == 0 => return None,
            Ok(m) => return Some(m),
            Err(_) => {}
        }
        let mut above: Vec<&Path> = rel.ancestors().skip(1).filter(|a| !a.as_os_str().is_empty()).collect();
        above.reverse();
        for a in above {
            match self.upper_at(a) {
                Upper::Nothing => break,
                Upper::Hides => return None,
                Upper::Merged => {}
            }
        }
        let parent = rel.parent().unwrap_or(Path::new(""));
        if !parent.as_os_str().is_empty() && !self.lower_dir(parent) {
            return None;
        }
        super::lower_meta(&self.layer.root, rel)
    }

    /// What the upper directory holds at `dir` (cached).
    fn upper_at(&self, dir: &Path) -> Upper {
        if let Some(u) = self.upper_dirs.borrow().get(dir) {
            return *u;
        }
        let path = self.layer.upper.join(dir);
        let u = match std::fs::symlink_metadata(&path) {
            Err(_) => Upper::Nothing,
            Ok(m) if !m.is_dir() => Upper::Hides,
            Ok(_) if super::xattr(&path, "user.overlay.opaque").ok().flatten().as_deref() == Some(b"y") => Upper::Hides,
            Ok(_) => Upper::Merged,
        };
        self.upper_dirs.borrow_mut().insert(dir.to_owned(), u);
        u
    }

    /// Whether the root has a directory at `dir`, reached through no link
    /// (cached).
    fn lower_dir(&self, dir: &Path) -> bool {
        if let Some(d) = self.lower_dirs.borrow().get(dir) {
            return *d;
        }
        let parent = dir.parent().unwrap_or(Path::new(""));
        let d = (parent.as_os_str().is_empty() || self.lower_dir(parent))
            && super::lower_meta(&self.layer.root, dir).is_some_and(|m| m.is_dir());
        self.lower_dirs.borrow_mut().insert(dir.to_owned(), d);
        d
    }

    /// The top of the repository `dir` is in (relative; the nearest
    /// directory up from it with a `.git`, as the command left it).
    fn nearest_repo(&self, dir: &Path) -> Option<PathBuf> {
        if let Some(known) = self.repos.borrow().get(dir) {
            return known.clone();
        }
        let found = if self.meta(&dir.join(".git")).is_some() {
            Some(dir.to_owned())
        } else if dir.as_os_str().is_empty() {
            None
        } else {
            self.nearest_repo(dir.parent().unwrap_or(Path::new("")))
        };
        self.repos.borrow_mut().insert(dir.to_owned(), found.clone());
        found
    }

    /// What the repository whose top is `top` obeys outside its git
    /// directory, as configured before the call (its configuration cannot
    /// be changed by one): its `core.hooksPath` and included files.
    fn repo_obeys(&self, top: &Path) -> Vec<PathBuf> {
        if let Some(known) = self.obeyed.borrow().get(top) {
            return known.clone();
        }
        let abs = self.layer.root.join(top);
        let out = crate::permission::git_dir_of(&abs.join(".git")).map(|dir| obeyed_by(&dir, &abs)).unwrap_or_default();
        self.obeyed.borrow_mut().insert(top.to_owned(), out.clone());
        out
    }

    /// Whether `dir` is what git takes for a git directory in the merged
    /// view, loosely (a false yes only protects more): a `.git`
    /// directory; or one holding a `HEAD` (file or link), a `commondir`,
    /// or both `objects` and `refs` (of any kind).
    fn is_git_dir(&self, dir: &Path) -> bool {
        if let Some(known) = self.git_dirs.borrow().get(dir) {
            return *known;
        }
        let named = dir.file_name().is_some_and(|n| n.eq_ignore_ascii_case(".git"));
        let is = self.meta(dir).is_some_and(|m| m.is_dir())
            && (named
                || self.meta(&dir.join("HEAD")).is_some()
                || self.meta(&dir.join("commondir")).is_some()
                || (self.meta(&dir.join("objects")).is_some() && self.meta(&dir.join("refs")).is_some()));
        self.git_dirs.borrow_mut().insert(dir.to_owned(), is);
        is
    }

    /// Whether `dir` was a git directory before the call (in the root).
    fn lower_is_git_dir(&self, dir: &Path) -> bool {
        let at = |name: &str| std::fs::symlink_metadata(self.layer.root.join(dir).join(name)).is_ok();
        at("HEAD") || at("commondir") || (at("objects") && at("refs"))
    }

    /// Why a change inside the git directory `git` (names `inside`
    /// beneath it; `rel` the whole path) is refused, if it is.
    fn git_change_refused(&self, git: &Path, inside: &[&OsStr], rel: &Path, kind: ChangeKind) -> Option<String> {
        let Some(first) = inside.first() else {
            // The git directory itself: made (`git init`), or removed; its
            // mode is the user's (000 would hide it from everyone).
            return (kind == ChangeKind::Mode).then(|| "protected (a git directory's mode)".to_owned());
        };
        // Bookkeeping: refs, logs and objects are data git reads, never runs.
        if [OsStr::new("refs"), OsStr::new("logs"), OsStr::new("objects")].contains(first) {
            return None;
        }
        if kind != ChangeKind::Deleted && self.meta(rel).is_some_and(|m| m.file_type().is_symlink()) {
            return Some("protected (a link in a git directory: git would follow it)".into());
        }
        let last = inside.last().copied().unwrap_or_default();
        let new_repository = !self.lower_is_git_dir(git);
        // A rebase or cherry-pick in progress: its todo list can hold
        // `exec` lines the user's `git rebase --continue` runs.
        if ["rebase-merge", "rebase-apply", "sequencer"].iter().any(|n| first.eq_ignore_ascii_case(n))
            && kind != ChangeKind::Deleted
            && let Some(why) = self.todo_refused(rel)
        {
            return Some(why);
        }
        if let Some(h) = inside.iter().position(|n| n.eq_ignore_ascii_case("hooks")) {
            let hook = "protected (a git hook runs at the next git command)".to_owned();
            // The hooks directory itself may be made (`git init`): a
            // directory, nothing else.
            if h + 1 == inside.len() {
                let made = kind == ChangeKind::Created && self.meta(rel).is_some_and(|m| m.is_dir());
                return (!made).then_some(hook);
            }
            // `git init` writes examples git never runs.
            if kind == ChangeKind::Created && last.as_bytes().ends_with(b".sample") {
                return None;
            }
            return Some(hook);
        }
        let configures =
            ["config", "config.worktree", "commondir", "gitdir"].iter().any(|n| last.eq_ignore_ascii_case(n))
                || (first.eq_ignore_ascii_case("info") && !last.eq_ignore_ascii_case("exclude"));
        if !configures {
            return None;
        }
        let refused = "protected (git's configuration: it can make git run programs)";
        if kind != ChangeKind::Created || !new_repository {
            return Some(refused.to_owned());
        }
        if last.eq_ignore_ascii_case("config") || last.eq_ignore_ascii_case("config.worktree") {
            return self.new_config_refused(rel).map(|why| format!("{refused}; {why}"));
        }
        if last.eq_ignore_ascii_case("commondir") {
            return self.commondir_refused(git).map(|why| format!("{refused}; {why}"));
        }
        None
    }

    /// Why a change to a rebase's or sequencer's state is refused: a line
    /// that runs a program (`exec`, `x`), or a file that cannot be read.
    fn todo_refused(&self, rel: &Path) -> Option<String> {
        if self.meta(rel).is_some_and(|m| m.is_dir()) {
            return None;
        }
        let text = match merged_read(self.layer, rel) {
            Ok(bytes) if bytes.len() <= 4 << 20 => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(_) => return Some("protected (a rebase's state larger than it reads)".into()),
            Err(e) => return Some(format!("protected (a rebase's state that cannot be examined: {e})")),
        };
        let runs = text.lines().map(str::trim_start).any(|l| {
            let word = l.split_whitespace().next().unwrap_or("");
            word.eq_ignore_ascii_case("exec") || word.eq_ignore_ascii_case("x")
        });
        runs.then(|| "protected (a rebase's todo list that runs a program at `git rebase --continue`)".into())
    }

    /// Why a configuration for a new repository is refused: a key beyond
    /// what git writes for one (read by git itself, with no other
    /// configuration and no includes). `rel` is read as the command left
    /// it.
    fn new_config_refused(&self, rel: &Path) -> Option<String> {
        let upper = self.layer.upper.join(rel);
        let file = if std::fs::symlink_metadata(&upper).is_ok() { upper } else { self.layer.root.join(rel) };
        match std::fs::symlink_metadata(&file) {
            Ok(m) if m.is_file() && m.len() <= 1 << 20 => {}
            Ok(m) if m.is_file() => return Some("it is larger than 1 MiB".into()),
            _ => return Some("it is not a plain file".into()),
        }
        let out = std::process::Command::new("git")
            .args(["config", "--no-includes", "--null", "--list", "--file"])
            .arg(&file)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", "/nonexistent")
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output();
        let out = match out {
            Ok(out) if out.status.success() => out.stdout,
            Ok(_) => return Some("git cannot read it".into()),
            Err(e) => return Some(format!("git cannot be run to read it: {e}")),
        };
        for item in out.split(|b| *b == 0).filter(|i| !i.is_empty()) {
            let mut parts = item.splitn(2, |b| *b == b'\n');
            let key = String::from_utf8_lossy(parts.next().unwrap_or_default()).to_lowercase();
            let value = String::from_utf8_lossy(parts.next().unwrap_or_default()).to_lowercase();
            // A remote whose transport is a program (`ext::sh -c …`).
            if (key.ends_with(".url") || key.ends_with(".pushurl")) && value.trim_start().starts_with("ext::") {
                return Some(format!("{key} runs a program (an ext:: transport)"));
            }
            let plain = NEW_CONFIG_KEYS.contains(&key.as_str());
            let sub = key.split_once('.').is_some_and(|(section, rest)| {
                rest.rsplit_once('.').is_some_and(|(_, var)| NEW_CONFIG_SUBSECTION_KEYS.contains(&(section, var)))
            });
            if !plain && !sub {
                return Some(format!("it sets {key}, which a new repository does not need"));
            }
        }
        None
    }

    /// Why a new `commondir` is refused: it must name the repository it is
    /// made in (`git worktree add`: `../..` from `.git/worktrees/<name>`), a
    /// `.git` directory that was there before the call.
    fn commondir_refused(&self, git: &Path) -> Option<String> {
        let text = match merged_read(self.layer, &git.join("commondir")) {
            Ok(bytes) if bytes.len() <= 4096 => String::from_utf8_lossy(&bytes).trim().to_owned(),
            Ok(_) => return Some("it is too long".into()),
            Err(e) => return Some(format!("it cannot be examined: {e}")),
        };
        let target = crate::fs::normalize(&self.layer.root.join(git).join(&text));
        let ok = target.starts_with(&self.layer.root)
            && target.file_name().is_some_and(|n| n == ".git")
            && std::fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir())
            && git.starts_with(target.strip_prefix(&self.layer.root).unwrap_or(Path::new("/")));
        (!ok).then(|| format!("it sends git to {}, not to the repository it is in", target.display()))
    }

    /// Why a `.git` file or link the command made is refused: it must
    /// send git to a git directory inside the root, reached through no
    /// link, which is then judged whole.
    fn gitfile_refused(&self, rel: &Path) -> Option<String> {
        let meta = self.meta(rel)?;
        if meta.file_type().is_symlink() {
            return Some("protected (a .git that is a link)".into());
        }
        let text = match merged_read(self.layer, rel) {
            Ok(bytes) if bytes.len() <= 4096 => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(_) => return Some("protected (a .git file longer than git reads)".into()),
            Err(e) => return Some(format!("a .git file that cannot be examined: {e}")),
        };
        let Some(target) = text.strip_prefix("gitdir: ").map(|t| t.trim_end_matches('\n')) else {
            return Some("a .git file that is not a `gitdir:` pointer".into());
        };
        if target.contains('\n') || target.ends_with(['\r', ' ', '\t']) {
            return Some("protected (a .git file git would read otherwise than agentd)".into());
        }
        let dir = rel.parent().unwrap_or(Path::new(""));
        let target = if Path::new(target).is_absolute() {
            PathBuf::from(target)
        } else {
            self.layer.root.join(dir).join(target)
        };
        let target = crate::fs::normalize(&target);
        let Ok(inside) = target.strip_prefix(&self.layer.root) else {
            return Some(format!(
                "protected (a .git file that sends git to {}, outside the workspace)",
                target.display()
            ));
        };
        // Every step to it a directory, not a link (a link could lead out).
        let mut step = PathBuf::new();
        for c in inside.components() {
            step.push(c);
            if !self.meta(&step).is_some_and(|m| m.is_dir()) {
                return Some(format!("protected (a .git file that sends git through {})", step.display()));
            }
        }
        self.repository_refused(inside)
    }

    /// Why a directory becoming a repository (or named by a `.git` file)
    /// is refused: a hook in it, a configuration with more than a new one
    /// needs, a common directory elsewhere.
    fn repository_refused(&self, dir: &Path) -> Option<String> {
        if self.meta(&dir.join("commondir")).is_some()
            && let Some(why) = self.commondir_refused(dir)
        {
            return Some(format!("protected ({}'s commondir: {why})", shown(dir)));
        }
        let hooks = dir.join("hooks");
        match self.meta(&hooks) {
            None => {}
            Some(m) if !m.is_dir() => return Some(format!("protected ({} is not a directory)", shown(&hooks))),
            Some(_) => {
                for name in self.merged_names(&hooks) {
                    if !name.as_bytes().ends_with(b".sample") {
                        return Some(format!(
                            "protected ({} holds {}, a hook git would run)",
                            shown(dir),
                            name.to_string_lossy()
                        ));
                    }
                }
            }
        }
        // Its configuration, whoever wrote it and when: it was never a
        // repository's until now, so what git writes for a new one is all
        // it may hold.
        let config = dir.join("config");
        if self.meta(&config).is_some() {
            return self.new_config_refused(&config).map(|why| format!("protected ({}: {why})", shown(&config)));
        }
        None
    }

    /// The names in a directory of the merged view: the upper's (but
    /// deletions) and, unless it replaced the directory, the root's.
    fn merged_names(&self, dir: &Path) -> Vec<std::ffi::OsString> {
        let mut names: Vec<std::ffi::OsString> = Vec::new();
        let upper = self.layer.upper.join(dir);
        for entry in std::fs::read_dir(&upper).into_iter().flatten().flatten() {
            let whiteout = entry.metadata().is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == 0);
            if !whiteout {
                names.push(entry.file_name());
            }
        }
        let replaced = super::xattr(&upper, "user.overlay.opaque").ok().flatten().as_deref() == Some(b"y");
        if !replaced {
            for entry in std::fs::read_dir(self.layer.root.join(dir)).into_iter().flatten().flatten() {
                let name = entry.file_name();
                let deleted = std::fs::symlink_metadata(upper.join(&name))
                    .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == 0);
                if !deleted && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }
}

/// A path for a message (relative, lossy).
fn shown(rel: &Path) -> String {
    if rel.as_os_str().is_empty() { ".".to_owned() } else { rel.to_string_lossy().into_owned() }
}

/// The command's version of a file (the upper's, else the root's), at
/// most 4 MiB and a byte, never waiting on a FIFO.
fn merged_read(layer: &agentd_sandbox::Layer, rel: &Path) -> std::io::Result<Vec<u8>> {
    match crate::fs::read_regular(&layer.upper.join(rel), 4 << 20) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => crate::fs::read_regular(&layer.root.join(rel), 4 << 20),
        other => other,
    }
}

/// What the git directory `dir` (of the worktree at `top`) obeys outside
/// itself (see [`crate::permission::git_config_obeys`]), normalized.
fn obeyed_by(dir: &Path, top: &Path) -> Vec<PathBuf> {
    crate::permission::git_config_obeys(dir, top).iter().map(|p| crate::fs::normalize(p)).collect()
}

/// Hook directories the user's own git configuration (`~/.gitconfig`,
/// `$XDG_CONFIG_HOME/git/config`, `/etc/gitconfig`) names relative to
/// every repository's top.
fn user_hook_paths() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let xdg =
        std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).or_else(|| home.as_ref().map(|h| h.join(".config")));
    let files = home
        .iter()
        .map(|h| h.join(".gitconfig"))
        .chain(xdg.iter().map(|x| x.join("git/config")))
        .chain(std::iter::once(PathBuf::from("/etc/gitconfig")));
    let mut out = Vec::new();
    for file in files {
        for entry in crate::permission::git_config_entries(&file) {
            if entry.key == "core.hookspath" && !entry.value.starts_with(['/', '~']) && !entry.value.is_empty() {
                out.push(
                    crate::fs::normalize(&PathBuf::from("/").join(&entry.value))
                        .strip_prefix("/")
                        .map(Path::to_owned)
                        .unwrap_or_default(),
                );
            }
        }
    }
    out.retain(|p| !p.as_os_str().is_empty());
    out
}

/// What the repositories of `roots` (their own, found as git finds them)
/// obey outside their git directory, as configured now: the hook directory
/// `core.hooksPath` names, the files their configuration includes
/// (whatever the condition), where a `hooks` that is a link leads. A
/// configuration the daemon cannot read refuses every change.
pub fn git_obeyed<'a>(roots: impl Iterator<Item = &'a Path>) -> Result<Vec<PathBuf>, String> {
    let mut out = Vec::new();
    for root in roots {
        let Some(dir) = crate::permission::git_dir(root) else { continue };
        let config = dir.join("config");
        match crate::fs::read_regular(&config, 4 << 20) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(format!(
                    "the repository's configuration {} cannot be read ({e}), so none of the command's changes were \
                     applied",
                    config.display()
                ));
            }
        }
        out.extend(obeyed_by(&dir, dir.parent().unwrap_or(&dir)));
        if let Ok(target) = std::fs::read_link(dir.join("hooks")) {
            out.push(crate::fs::normalize(&dir.join(target)));
        }
    }
    Ok(out)
}
