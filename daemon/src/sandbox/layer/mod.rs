//! The copy-on-write layer of a foreground `workspace_write` call (issue
//! 48: judge what a command did, not what it says).
//!
//! Each workspace root is seen by the call through an overlay whose upper
//! directory the daemon makes here, in its state directory (on the root's
//! own file system where it is, so a change is applied by a rename). The
//! command writes freely; nothing reaches the workspace while it runs.
//! When the call ends the daemon reads **only the upper directory** — what
//! the command changed: files created and modified, deletions
//! (whiteouts), directories replaced (opaque), links, modes — judges each
//! change as a file tool's write is judged (the protected names, at any
//! depth and in any repository; Edit deny rules) and applies the accepted
//! ones, each by itself and atomically. Nothing is scanned, nothing is
//! bounded but the call's own output, and an upper directory the daemon
//! cannot read completely is discarded whole: no error is read as "nothing
//! there".
//!
//! A file changed in the workspace while the command ran (another session,
//! a file tool, the user's editor) is a conflict: its change time is at or
//! after the layer's, and it is reported, never overwritten.

use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::AT_FDCWD;
use nix::sys::stat::Mode;

mod files;
mod judge;
use files::{
    beneath, copy_in, lower_meta, parent_beneath, read_dir_beneath, read_plain, same_content, special_xattrs,
    strip_overlay_xattrs, xattr,
};
pub use judge::{NEVER_CHANGED, git_obeyed};

/// The most a call may write to its layer (bytes of files): a call over
/// it applies nothing.
pub const MAX_LAYER_BYTES: u64 = 4 << 30;

/// The most entries (files, directories, links, deletions) a call's layer
/// may hold: a call over it applies nothing.
pub const MAX_LAYER_ENTRIES: usize = 1_000_000;

/// How often a running call's layer is measured against the bounds.
pub const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The bytes bound in force ([`MAX_LAYER_BYTES`]; the tests lower it with
/// `AGENTD_TEST_LAYER_MAX_BYTES`).
fn max_bytes() -> u64 {
    std::env::var("AGENTD_TEST_LAYER_MAX_BYTES").ok().and_then(|v| v.parse().ok()).unwrap_or(MAX_LAYER_BYTES)
}

/// Why a layer holding this much is over its bounds, if it is.
fn over(budget: &Budget) -> Option<String> {
    if budget.entries > MAX_LAYER_ENTRIES {
        return Some(format!(
            "the command changed more than {MAX_LAYER_ENTRIES} files and directories, so none of its changes were \
             applied"
        ));
    }
    let max = max_bytes();
    (budget.bytes > max).then(|| {
        let shown = if max >= 1 << 30 { format!("{} GiB", max >> 30) } else { format!("{max} bytes") };
        format!("the command wrote more than {shown}, so none of its changes were applied")
    })
}

/// Watches a running call's upper directories: every [`WATCH_EVERY`] they
/// are measured (a walk that stops at the bounds), and the first time they
/// are over, the returned receiver says why. The watch ends when the
/// guard is dropped. (What cannot be read now is left to the final
/// reading, which discards the call whole.)
pub fn watch(uppers: Vec<PathBuf>) -> (WatchGuard, tokio::sync::oneshot::Receiver<String>) {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(async move {
        let uppers = std::sync::Arc::new(uppers);
        loop {
            tokio::time::sleep(WATCH_EVERY).await;
            let these = uppers.clone();
            let measured = tokio::task::spawn_blocking(move || measure(&these)).await;
            if let Ok(Some(why)) = measured {
                let _ = tx.send(why);
                return;
            }
        }
    });
    (WatchGuard(task.abort_handle()), rx)
}

/// Ends a [`watch`] when dropped.
pub struct WatchGuard(tokio::task::AbortHandle);

impl Drop for WatchGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Walks `uppers` until the bounds are passed: why, if they are.
fn measure(uppers: &[PathBuf]) -> Option<String> {
    let mut budget = Budget::default();
    let mut stack: Vec<PathBuf> = uppers.to_vec();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            budget.entries += 1;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                budget.bytes += meta.len();
            }
            if let Some(why) = over(&budget) {
                return Some(why);
            }
        }
    }
    None
}

pub use agentd_protocol::changes::ChangeKind;

/// One change a command made, applied or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// The workspace root it is in.
    pub root: PathBuf,
    /// The path in the workspace (absolute).
    pub path: PathBuf,
    /// What happened to it.
    pub kind: ChangeKind,
    /// Its size before (files).
    pub bytes_before: Option<u64>,
    /// Its size after (files).
    pub bytes_after: Option<u64>,
}

/// A change that was not applied, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The change.
    pub change: Change,
    /// Why it was not applied.
    pub reason: String,
}

/// What came of a call's layers.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Changes applied to the workspace, in the order applied.
    pub applied: Vec<Change>,
    /// Changes not applied (protected, denied, conflicting, not a kind of
    /// file the workspace takes).
    pub refused: Vec<Refused>,
    /// Why nothing was applied, when nothing was (an upper directory the
    /// daemon could not read completely, or the call over its bounds).
    pub discarded: Option<String>,
}

/// What the caller says about a path the command changed: `Err(why)`
/// refuses it (an Edit deny rule); the protected names are judged here.
pub type Judge<'a> = &'a (dyn Fn(&Path, ChangeKind) -> Say + Sync);

/// What the caller says about a change the protected names let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Say {
    /// Apply it.
    Apply,
    /// Apply it only if the user approves (`auto_allow: "effects"`).
    Ask,
    /// Not applied, for this reason.
    Refuse(String),
}

/// Asked once, before anything is applied, about the changes the judge
/// said to ask about: the changes and one unified diff of them; true
/// applies them.
pub type Approve<'a> = &'a (dyn Fn(Vec<agentd_protocol::changes::FileChange>, String) -> bool + Sync);

/// Told, once, of every change applied, each with what its path was
/// before (an earlier file's content kept aside in the layer's directory,
/// which is removed after): the turn history keeps them to rewind.
pub type Recorder<'a> = &'a (dyn Fn(Vec<(Change, crate::fs::history::Before)>) + Sync);

/// The layers of one call: made before it starts, finished after it ends.
#[derive(Debug)]
pub struct CallLayers {
    base: PathBuf,
    layers: Vec<agentd_sandbox::Layer>,
    /// The change time of the layer's own directory, made just before the
    /// call: a root file whose change time is not before it changed while
    /// the call ran.
    since: (i64, i64),
}

impl CallLayers {
    /// Makes a layer for each root not inside another, under
    /// `<state>/layers/<marker>`.
    pub fn prepare(state_dir: &Path, roots: &[PathBuf], marker: &str) -> Result<CallLayers, String> {
        use std::os::unix::fs::DirBuilderExt;
        let base = state_dir.join("layers").join(marker);
        let make = |dir: &Path| {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot make the call's layer {}: {e}", dir.display()))
        };
        make(&base)?;
        let mut layers = Vec::new();
        let tops = roots.iter().filter(|r| !roots.iter().any(|o| o != *r && r.starts_with(o)));
        for (i, root) in tops.enumerate() {
            let dir = base.join(i.to_string());
            let (upper, work) = (dir.join("u"), dir.join("w"));
            make(&upper)?;
            make(&work)?;
            layers.push(agentd_sandbox::Layer { root: root.clone(), upper, work });
        }
        // The layer's own change time, taken fine-grained where the file
        // system has multigrain timestamps: looked at once (so the next
        // change of it is stamped finely), changed, looked at again. Files
        // changed before it then have earlier times, and files changed
        // after it (coarse times are never below a fine one handed out)
        // have the same or later ones.
        let ctime = || {
            std::fs::metadata(&base)
                .map(|m| (m.ctime(), m.ctime_nsec()))
                .map_err(|e| format!("cannot examine {}: {e}", base.display()))
        };
        ctime()?;
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot examine {}: {e}", base.display()))?;
        let since = ctime()?;
        Ok(CallLayers { base, layers, since })
    }

    /// What the helper is told.
    pub fn spec(&self) -> Vec<agentd_sandbox::Layer> {
        self.layers.clone()
    }

    /// The upper directories (what [`watch`] measures).
    pub fn uppers(&self) -> Vec<PathBuf> {
        self.layers.iter().map(|l| l.upper.clone()).collect()
    }

    /// The roots with a layer.
    pub fn roots(&self) -> impl Iterator<Item = &Path> {
        self.layers.iter().map(|l| l.root.as_path())
    }

    /// Reads what the command changed, judges each change and applies the
    /// accepted ones; then removes the layers. `record` is told of each
    /// change applied.
    pub fn finish(self, judge: Judge, record: Recorder, approve: Option<Approve>) -> Outcome {
        let mut outcome = Outcome::default();
        let mut found = Vec::new();
        let mut budget = Budget::default();
        for layer in &self.layers {
            match collect(layer, &mut budget) {
                Ok(entries) => found.push((layer, entries)),
                Err(why) => {
                    outcome.discarded = Some(why);
                    break;
                }
            }
        }
        // A command that changed nothing (most calls) is done: nothing to
        // judge, so nothing of the repositories is read.
        let changed = found.iter().any(|(_, entries)| !entries.is_empty());
        // What git obeys beyond its own directory, as the workspace's
        // repositories are configured now (before anything is applied).
        let obeyed = match (&outcome.discarded, changed) {
            (None, true) => git_obeyed(self.layers.iter().map(|l| l.root.as_path())),
            _ => Ok(Default::default()),
        };
        if let Err(why) = &obeyed {
            outcome.discarded = Some(why.clone());
        }
        let obeyed = obeyed.unwrap_or_default();
        if outcome.discarded.is_none() && changed {
            for (layer, entries) in &found {
                let aside = self.base.join("aside");
                let mut apply = Apply {
                    layer,
                    since: self.since,
                    judge,
                    record,
                    approve,
                    aside: &aside,
                    kept: 0,
                    done: Vec::new(),
                    obeyed: &obeyed,
                    judgement: judge::Judgement::new(layer),
                    outcome: &mut outcome,
                };
                apply.run(entries);
                let done = std::mem::take(&mut apply.done);
                (apply.record)(done);
            }
            // A directory made for what was applied beneath it goes without
            // saying.
            let applied = &outcome.applied;
            let parents: std::collections::HashSet<&Path> =
                applied.iter().flat_map(|c| c.path.ancestors().skip(1)).collect();
            let implied: Vec<bool> = applied
                .iter()
                .map(|c| c.kind == ChangeKind::Created && c.bytes_after.is_none() && parents.contains(c.path.as_path()))
                .collect();
            let mut i = 0;
            outcome.applied.retain(|_| {
                i += 1;
                !implied[i - 1]
            });
        }
        // What is left (refused changes, the work directory) goes after the
        // result, on a thread of its own: a call that made 100,000 files
        // does not wait for their removal. A daemon that stops first
        // leaves it to the next one's sweep.
        let base = self.base;
        std::thread::spawn(move || agentd_sandbox::mounts::remove_layer_dir(&base));
        outcome
    }

    /// Removes the layers unapplied (the call never ran).
    pub fn discard(self) {
        agentd_sandbox::mounts::remove_layer_dir(&self.base);
    }
}

/// Removes layers a daemon that stopped mid-call left behind.
pub fn sweep(state_dir: &Path) {
    let dir = state_dir.join("layers");
    if let Ok(entries) = std::fs::read_dir(&dir) {
        for entry in entries.flatten() {
            agentd_sandbox::mounts::remove_layer_dir(&entry.path());
        }
    }
}

/// What the upper directories hold so far, against the bounds.
#[derive(Default)]
struct Budget {
    bytes: u64,
    entries: usize,
}

/// One entry of an upper directory.
#[derive(Debug)]
struct Entry {
    /// Relative to the root.
    rel: PathBuf,
    what: What,
}

#[derive(Debug)]
enum What {
    File {
        len: u64,
        mode: u32,
    },
    Link,
    /// A directory; `opaque`: it replaced the lower one (whose entries not
    /// in the upper are gone).
    Dir {
        mode: u32,
        opaque: bool,
    },
    /// A deletion.
    Whiteout,
    /// A FIFO, socket or device: not a kind of file the workspace takes.
    Other(&'static str),
}

/// Reads a layer's upper directory whole (or says why it cannot).
fn collect(layer: &agentd_sandbox::Layer, budget: &mut Budget) -> Result<Vec<Entry>, String> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = layer.upper.join(&rel);
        let entries = std::fs::read_dir(&dir).map_err(|e| {
            format!("the command's changes could not be read completely ({}: {e}), so none were applied", shown(&rel))
        })?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| {
                format!(
                    "the command's changes could not be read completely ({}: {e}), so none were applied",
                    shown(&rel)
                )
            })?;
            names.push(entry.file_name());
        }
        names.sort();
        for name in names {
            let rel = rel.join(&name);
            let path = layer.upper.join(&rel);
            let meta = std::fs::symlink_metadata(&path).map_err(|e| {
                format!(
                    "the command's changes could not be read completely ({}: {e}), so none were applied",
                    shown(&rel)
                )
            })?;
            budget.entries += 1;
            if let Some(why) = over(budget) {
                return Err(why);
            }
            let ft = meta.file_type();
            let what = if ft.is_file() {
                budget.bytes += meta.len();
                if let Some(why) = over(budget) {
                    return Err(why);
                }
                What::File { len: meta.len(), mode: meta.mode() & 0o7777 }
            } else if ft.is_symlink() {
                What::Link
            } else if ft.is_dir() {
                let opaque = xattr(&path, "user.overlay.opaque").map_err(|e| {
                    format!(
                        "the command's changes could not be read completely ({}: {e}), so none were applied",
                        shown(&rel)
                    )
                })?;
                stack.push(rel.clone());
                What::Dir { mode: meta.mode() & 0o7777, opaque: opaque.as_deref() == Some(b"y") }
            } else if ft.is_char_device() && meta.rdev() == 0 {
                What::Whiteout
            } else if ft.is_fifo() {
                What::Other("a FIFO")
            } else if ft.is_socket() {
                What::Other("a socket")
            } else {
                What::Other("a device")
            };
            out.push(Entry { rel, what });
        }
    }
    out.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(out)
}

/// A path for a message (relative, lossy).
fn shown(rel: &Path) -> String {
    if rel.as_os_str().is_empty() { ".".to_owned() } else { rel.to_string_lossy().into_owned() }
}

/// Applies one layer's entries: every change is judged first, against the
/// upper directory as the command left it, then the accepted ones are
/// applied (applying moves files out of the upper directory, which would
/// change what a later judgement sees).
struct Apply<'a> {
    layer: &'a agentd_sandbox::Layer,
    since: (i64, i64),
    judge: Judge<'a>,
    record: Recorder<'a>,
    approve: Option<Approve<'a>>,
    /// Where earlier contents wait for the history.
    aside: &'a Path,
    kept: usize,
    /// What was applied, with what it was before, for the history.
    done: Vec<(Change, crate::fs::history::Before)>,
    /// Paths git obeys outside its directory (see [`git_obeyed`]).
    obeyed: &'a [PathBuf],
    /// The protected names and git directories, as the command left them.
    judgement: judge::Judgement<'a>,
    outcome: &'a mut Outcome,
}

/// One change, planned: where, what, and the verdict on it.
struct Planned {
    rel: PathBuf,
    kind: ChangeKind,
    /// The root's entry before (none: absent).
    lower: Option<std::fs::Metadata>,
    /// What the upper holds (`None`: a deletion).
    what: Option<Step>,
    /// The same bytes and mode as before (a `touch`, a copy-up): applied
    /// (its times are the command's), not listed.
    same: bool,
    /// Applied only once the user approves.
    ask: bool,
    verdict: Result<(), String>,
}

#[derive(Clone, Copy)]
enum Step {
    File { len: u64, mode: u32 },
    Link,
    Dir { mode: u32 },
}

impl Apply<'_> {
    fn run(&mut self, entries: &[Entry]) {
        let root = self.layer.root.clone();
        // 1. Deletions (whiteouts; what an opaque directory, or a file or
        //    a directory of another kind, replaced), each expanded to what
        //    lies beneath, children first; then the changes the upper holds.
        let mut plan: Vec<Planned> = Vec::new();
        let mut refused_whole: Vec<(PathBuf, String)> = Vec::new();
        for e in entries {
            let lower = lower_meta(&root, &e.rel).ok_or(());
            let replaced = match (&e.what, &lower) {
                (What::Whiteout, Ok(_)) => vec![e.rel.clone()],
                (What::Dir { opaque: true, .. }, Ok(m)) if m.is_dir() => match read_dir_beneath(&root, &e.rel) {
                    Ok(names) => names
                        .into_iter()
                        .map(|n| e.rel.join(n))
                        .filter(|rel| entries.binary_search_by(|x| x.rel.cmp(rel)).is_err())
                        .collect(),
                    Err(err) => {
                        refused_whole.push((e.rel.clone(), format!("what it replaced cannot be listed: {err}")));
                        Vec::new()
                    }
                },
                (What::Dir { .. }, Ok(m)) if !m.is_dir() => vec![e.rel.clone()],
                (What::File { .. } | What::Link, Ok(m)) if m.is_dir() => vec![e.rel.clone()],
                _ => Vec::new(),
            };
            for rel in replaced {
                self.expand_deletion(&rel, &mut plan, &mut refused_whole);
            }
        }
        for e in entries {
            let step = match e.what {
                What::File { len, mode } => Step::File { len, mode },
                What::Link => Step::Link,
                What::Dir { mode, .. } => Step::Dir { mode },
                What::Whiteout => continue,
                What::Other(what) => {
                    let change = self.change(&e.rel, ChangeKind::Created, None, None);
                    self.refuse(change, format!("{what}: not applied to the workspace"));
                    continue;
                }
            };
            let lower = lower_meta(&root, &e.rel);
            let Some((kind, same)) = self.kind_of(&e.rel, step, lower.as_ref()) else { continue };
            let (verdict, ask) = split(self.verdict(&e.rel, kind));
            plan.push(Planned { rel: e.rel.clone(), kind, lower, what: Some(step), verdict, same, ask });
        }
        for (rel, why) in refused_whole {
            let change = self.change(&rel, ChangeKind::Deleted, None, None);
            self.refuse(change, why);
        }
        // What waits for approval: asked once, with a diff, before anything
        // is applied (a directory made for what lies beneath it follows
        // that; unchanged bytes are not asked about).
        let parents: std::collections::HashSet<&Path> =
            entries.iter().filter_map(|e| e.rel.parent()).filter(|p| !p.as_os_str().is_empty()).collect();
        let asked: Vec<usize> = (0..plan.len())
            .filter(|&i| {
                let p = &plan[i];
                p.ask
                    && p.verdict.is_ok()
                    && !p.same
                    && !(p.kind == ChangeKind::Created
                        && matches!(p.what, Some(Step::Dir { .. }))
                        && parents.contains(p.rel.as_path()))
            })
            .collect();
        if !asked.is_empty() {
            let (changes, diff) = self.question(&plan, &asked);
            let approved = self.approve.is_some_and(|approve| approve(changes, diff));
            if !approved {
                for p in plan.iter_mut().filter(|p| p.ask) {
                    p.verdict = Err("not approved: the user did not allow what the command changed".into());
                }
            }
        }
        // 2. Applied in that order; nothing beneath a path whose change
        //    failed or was refused.
        // Paths whose creation failed or was refused (nothing beneath them
        // is applied); directories holding what was not deleted (they stay,
        // silently: what stayed is listed); directories made only for what
        // lies beneath them, not made until something there is applied.
        let mut blocked: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
        let mut kept: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
        let mut deferred: std::collections::BTreeMap<PathBuf, (Planned, Change)> = std::collections::BTreeMap::new();
        let parents: std::collections::HashSet<&Path> =
            entries.iter().filter_map(|e| e.rel.parent()).filter(|p| !p.as_os_str().is_empty()).collect();
        for p in plan {
            if p.what.is_some() && p.rel.ancestors().skip(1).any(|a| blocked.contains(a)) {
                continue;
            }
            if p.what.is_none() && kept.contains(&p.rel) {
                continue;
            }
            let before = p.lower.as_ref().filter(|m| m.is_file()).map(|m| m.len());
            let after = match p.what {
                Some(Step::File { len, .. }) => Some(len),
                _ => None,
            };
            let change = self.change(&p.rel, p.kind, before, after);
            // A new directory with entries beneath it waits for one of them.
            if p.kind == ChangeKind::Created
                && matches!(p.what, Some(Step::Dir { .. }))
                && p.verdict.is_ok()
                && parents.contains(p.rel.as_path())
            {
                deferred.insert(p.rel.clone(), (p, change));
                continue;
            }
            if p.what.is_some() && p.verdict.is_ok() && !self.make_deferred(&p.rel, &mut deferred, &mut blocked) {
                continue;
            }
            let done = match p.verdict.clone() {
                Err(why) => Err(why),
                Ok(()) => match p.what {
                    None => self.delete(&p),
                    Some(Step::Dir { mode }) => self.directory(&p, mode),
                    Some(step) => self.file(&p, step),
                },
            };
            match done {
                Ok(_) if p.same => {}
                Ok(kept) => {
                    self.done.push((change.clone(), kept));
                    self.outcome.applied.push(change)
                }
                Err(why) => {
                    self.refuse(change, why);
                    // A deletion that did not happen keeps its parents; a
                    // creation that did not happen takes its children.
                    match p.what {
                        None => kept.extend(p.rel.ancestors().skip(1).map(Path::to_owned)),
                        Some(_) => {
                            blocked.insert(p.rel.clone());
                        }
                    }
                }
            }
        }
    }

    /// The question about the changes at `asked`: each as a change, and one
    /// unified diff (text bounded per file and in all; binaries and large
    /// files as one line with their sizes).
    fn question(&self, plan: &[Planned], asked: &[usize]) -> (Vec<agentd_protocol::changes::FileChange>, String) {
        let mut changes = Vec::new();
        let mut diff = String::new();
        let mut partial = false;
        for &i in asked {
            let p = &plan[i];
            let abs = self.layer.root.join(&p.rel);
            let before = p.lower.as_ref().filter(|m| m.is_file()).map(|m| m.len());
            let after = match p.what {
                Some(Step::File { len, .. }) => Some(len),
                _ => None,
            };
            let change = agentd_protocol::changes::FileChange {
                path: abs.to_string_lossy().into_owned(),
                kind: p.kind,
                from: None,
                bytes_before: before,
                bytes_after: after,
            };
            // Links: where they lead, on either side.
            let lower_link = p.lower.as_ref().is_some_and(|m| m.file_type().is_symlink());
            let upper_link = matches!(p.what, Some(Step::Link));
            if lower_link || upper_link {
                let name = p.rel.display();
                if lower_link
                    && let Some(Some(t)) = beneath(&self.layer.root, &p.rel, |path| std::fs::read_link(path).ok())
                {
                    diff.push_str(&format!("# {name}: was a link to {}\n", t.display()));
                }
                if upper_link && let Ok(t) = std::fs::read_link(self.layer.upper.join(&p.rel)) {
                    diff.push_str(&format!("# {name}: becomes a link to {}\n", t.display()));
                }
                changes.push(change);
                continue;
            }
            let small = |n: Option<u64>| n.is_none_or(|n| n <= DIFF_FILE_BYTES);
            if !small(before) || !small(after) {
                partial = true;
            }
            if diff.len() < DIFF_BYTES {
                let old = if small(before) {
                    before.and_then(|_| beneath(&self.layer.root, &p.rel, read_plain).flatten())
                } else {
                    None
                };
                let new =
                    if small(after) && after.is_some() { read_plain(&self.layer.upper.join(&p.rel)) } else { None };
                let (old, new) = match (p.kind, old, new) {
                    (ChangeKind::Created, _, new) => (Some(Vec::new()), new),
                    (ChangeKind::Deleted, old, _) => (old, Some(Vec::new())),
                    (_, old, new) => (old, new),
                };
                diff.push_str(&crate::fs::history::file_diff(&self.layer.root, &abs, &change, old, new));
            }
            changes.push(change);
        }
        if diff.len() >= DIFF_BYTES {
            partial = true;
            diff.push_str("[the rest of the diff is left out]\n");
        }
        if partial {
            diff.insert_str(0, "# NOT SHOWN IN FULL: some of these changes are larger than the diff shows\n");
        }
        (changes, diff)
    }

    /// Makes the new directories above `rel` that waited for something
    /// beneath them (parents first); false when one could not be made.
    fn make_deferred(
        &mut self,
        rel: &Path,
        deferred: &mut std::collections::BTreeMap<PathBuf, (Planned, Change)>,
        blocked: &mut std::collections::HashSet<PathBuf>,
    ) -> bool {
        let mut above: Vec<PathBuf> =
            rel.ancestors().skip(1).filter(|a| deferred.contains_key(*a)).map(Path::to_owned).collect();
        above.reverse();
        for a in above {
            let Some((p, change)) = deferred.remove(&a) else { continue };
            let Some(Step::Dir { mode }) = p.what else { continue };
            match self.directory(&p, mode) {
                Ok(kept) => {
                    self.done.push((change.clone(), kept));
                    self.outcome.applied.push(change);
                }
                Err(why) => {
                    self.refuse(change, why);
                    blocked.insert(a);
                    return false;
                }
            }
        }
        true
    }

    /// What a change of the upper's entry is, and whether its bytes and
    /// mode are as before (`None`: no change at all, a directory the
    /// command only passed through).
    fn kind_of(&self, rel: &Path, step: Step, lower: Option<&std::fs::Metadata>) -> Option<(ChangeKind, bool)> {
        if let (Step::File { len, mode }, Some(m)) = (step, lower)
            && m.is_file()
        {
            let same = m.len() == len
                && beneath(&self.layer.root, rel, |r| same_content(r, &self.layer.upper.join(rel))).unwrap_or(false);
            let same_mode = m.mode() & 0o7777 == mode;
            return Some(if same && !same_mode {
                (ChangeKind::Mode, false)
            } else {
                (ChangeKind::Modified, same && same_mode)
            });
        }
        Some((
            match (step, lower) {
                (Step::Dir { mode }, Some(m)) if m.is_dir() => {
                    if m.mode() & 0o7777 == mode {
                        return None;
                    }
                    ChangeKind::Mode
                }
                (Step::Dir { .. }, _) => ChangeKind::Created,
                (_, Some(m)) if m.is_dir() => ChangeKind::Created,
                (_, Some(_)) => ChangeKind::Modified,
                (_, None) => ChangeKind::Created,
            },
            false,
        ))
    }

    /// Plans the deletion of the root's `rel` and of everything beneath it
    /// (children first).
    fn expand_deletion(&self, rel: &Path, plan: &mut Vec<Planned>, refused: &mut Vec<(PathBuf, String)>) {
        let Some(meta) = lower_meta(&self.layer.root, rel) else { return };
        if meta.is_dir() {
            match read_dir_beneath(&self.layer.root, rel) {
                Ok(mut names) => {
                    names.sort();
                    for name in names {
                        self.expand_deletion(&rel.join(name), plan, refused);
                    }
                }
                Err(e) => {
                    refused.push((rel.to_owned(), format!("cannot be listed: {e}")));
                    return;
                }
            }
        }
        let (verdict, ask) = split(self.verdict(rel, ChangeKind::Deleted));
        plan.push(Planned {
            rel: rel.to_owned(),
            kind: ChangeKind::Deleted,
            lower: Some(meta),
            what: None,
            verdict,
            same: false,
            ask,
        });
    }

    fn change(&self, rel: &Path, kind: ChangeKind, before: Option<u64>, after: Option<u64>) -> Change {
        Change {
            root: self.layer.root.clone(),
            path: self.layer.root.join(rel),
            kind,
            bytes_before: before,
            bytes_after: after,
        }
    }

    fn refuse(&mut self, change: Change, reason: String) {
        self.outcome.refused.push(Refused { change, reason });
    }

    /// Why a change of `rel` may not be applied, if it may not (`Ok(true)`:
    /// only once approved).
    fn verdict(&self, rel: &Path, kind: ChangeKind) -> Result<bool, String> {
        if let Some(why) = self.judgement.refuses(rel, kind) {
            return Err(why);
        }
        let abs = self.layer.root.join(rel);
        if let Some(p) = self.obeyed.iter().find(|p| abs.starts_with(p)) {
            return Err(format!(
                "protected (the repository's configuration has git run or read {} as its own)",
                p.display()
            ));
        }
        match (self.judge)(&self.layer.root.join(rel), kind) {
            Say::Apply => Ok(false),
            Say::Ask => Ok(true),
            Say::Refuse(why) => Err(why),
        }
    }

    /// Whether the root's entry changed since the call began (or cannot be
    /// examined, which counts the same).
    fn conflict(&self, lower: &std::io::Result<std::fs::Metadata>) -> Result<(), String> {
        match lower {
            Ok(m) if (m.ctime(), m.ctime_nsec()) >= self.since => {
                Err("changed in the workspace while the command ran (a conflict: left as it is)".into())
            }
            Ok(_) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(format!("cannot be examined in the workspace: {e}")),
        }
    }

    /// Keeps the root's entry `rel` (as `meta` says it is) for the history
    /// before a change replaces or removes it: a file hard-linked aside
    /// (copied where the layer is on another file system).
    fn keep(&mut self, rel: &Path, meta: Option<&std::fs::Metadata>) -> crate::fs::history::Before {
        use crate::fs::history::Before;
        let Some(meta) = meta else { return Before::Absent };
        if meta.is_dir() {
            return Before::Directory;
        }
        if !meta.is_file() {
            return Before::NotRewindable("not a regular file".into());
        }
        if std::fs::create_dir_all(self.aside).is_err() {
            return Before::NotRewindable("no room to keep it".into());
        }
        self.kept += 1;
        let to = self.aside.join(self.kept.to_string());
        let linked = parent_beneath(&self.layer.root, rel).and_then(|(dir, name)| {
            nix::unistd::linkat(dir.as_fd(), name, AT_FDCWD, to.as_path(), nix::fcntl::AtFlags::empty())
                .map_err(|e| e.to_string())
        });
        match linked {
            Ok(()) => Before::Content(to),
            Err(_) => match beneath(&self.layer.root, rel, |from| std::fs::copy(from, &to)) {
                Some(Ok(_)) => Before::Content(to),
                Some(Err(e)) => Before::NotRewindable(format!("its earlier content could not be kept: {e}")),
                None => Before::NotRewindable("its earlier content could not be kept".into()),
            },
        }
    }

    /// Removes the root's entry (its contents went before it).
    fn delete(&mut self, p: &Planned) -> Result<crate::fs::history::Before, String> {
        let now =
            lower_meta(&self.layer.root, &p.rel).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound));
        // A directory's own change time moves with its entries (ours
        // included): only files are checked for a conflict.
        if !now.as_ref().is_ok_and(|m| m.is_dir()) {
            self.conflict(&now)?;
        }
        let Ok(meta) = now else { return Ok(crate::fs::history::Before::Absent) };
        let kept = self.keep(&p.rel, Some(&meta));
        let (dir, name) = parent_beneath(&self.layer.root, &p.rel)?;
        let flag =
            if meta.is_dir() { nix::unistd::UnlinkatFlags::RemoveDir } else { nix::unistd::UnlinkatFlags::NoRemoveDir };
        nix::unistd::unlinkat(dir.as_fd(), name, flag).map_err(|e| format!("could not be removed: {e}"))?;
        Ok(kept)
    }

    /// A directory of the upper: made when new, its mode set when changed.
    fn directory(&self, p: &Planned, mode: u32) -> Result<crate::fs::history::Before, String> {
        if mode & 0o6000 != 0 {
            return Err("a setuid or setgid directory: not applied".into());
        }
        let exists = lower_meta(&self.layer.root, &p.rel).is_some_and(|m| m.is_dir());
        let (dir, name) = parent_beneath(&self.layer.root, &p.rel)?;
        let mode = Mode::from_bits_truncate(mode);
        let chmod =
            || nix::sys::stat::fchmodat(dir.as_fd(), name, mode, nix::sys::stat::FchmodatFlags::NoFollowSymlink);
        if exists { chmod() } else { nix::sys::stat::mkdirat(dir.as_fd(), name, mode).and_then(|()| chmod()) }
            .map_err(|e| format!("could not be applied: {e}"))?;
        Ok(if exists { crate::fs::history::Before::Directory } else { crate::fs::history::Before::Absent })
    }

    /// A file or a link of the upper: moved into the root.
    fn file(&mut self, p: &Planned, step: Step) -> Result<crate::fs::history::Before, String> {
        let abs = self.layer.root.join(&p.rel);
        let upper = self.layer.upper.join(&p.rel);
        if let Step::File { mode, .. } = step
            && mode & 0o6000 != 0
            && p.lower.as_ref().is_none_or(|m| m.mode() & 0o6000 != mode & 0o6000)
        {
            return Err("a setuid or setgid file: not applied".into());
        }
        match special_xattrs(&upper) {
            Ok(None) => {}
            Ok(Some(name)) => return Err(format!("carries the extended attribute {name}: not applied")),
            Err(e) => return Err(format!("cannot be examined: {e}")),
        }
        let now =
            lower_meta(&self.layer.root, &p.rel).ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound));
        let existing = now.as_ref().ok().filter(|m| !m.is_dir()).cloned();
        if existing.is_some() {
            self.conflict(&now)?;
        }
        let kept = self.keep(&p.rel, existing.as_ref());
        self.move_in(&p.rel, existing.is_none()).map_err(|e| format!("could not be applied: {e}"))?;
        strip_overlay_xattrs(&abs);
        Ok(kept)
    }

    /// Renames the upper's `rel` over the root's (never following a link
    /// on the way; a new file never replaces one that appeared meanwhile),
    /// or copies it where the two are on different file systems.
    fn move_in(&self, rel: &Path, new: bool) -> Result<(), String> {
        let (to_dir, name) = parent_beneath(&self.layer.root, rel)?;
        let (from_dir, from_name) = parent_beneath(&self.layer.upper, rel)?;
        let flags = if new { nix::fcntl::RenameFlags::RENAME_NOREPLACE } else { nix::fcntl::RenameFlags::empty() };
        match nix::fcntl::renameat2(from_dir.as_fd(), from_name, to_dir.as_fd(), name, flags) {
            Ok(()) => Ok(()),
            Err(nix::errno::Errno::EEXIST) => Err("a file appeared there while the command ran (a conflict)".into()),
            Err(nix::errno::Errno::EXDEV) => copy_in(&self.layer.upper.join(rel), to_dir.as_fd(), name, new),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// A verdict, and whether it waits for approval.
fn split(verdict: Result<bool, String>) -> (Result<(), String>, bool) {
    match verdict {
        Ok(ask) => (Ok(()), ask),
        Err(why) => (Err(why), false),
    }
}

/// The largest file a question's diff reads (the diff itself shows the
/// changed regions; a larger file is named with its sizes, and the
/// question says some changes are not shown in full).
const DIFF_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The most a question's diff holds.
const DIFF_BYTES: usize = 1 << 20;
