//! Trust on first use: what agentd obeys from inside a workspace — its
//! settings files, `.mcp.json`, skills and agent definitions — is obeyed
//! only once the user approved that file's content. The approval is the
//! content's SHA-256, kept in the state directory (`trust/approved.json`,
//! hidden from commands): whatever
//! changes the file afterwards (a `git pull` or checkout, a background
//! job, another program) makes it new again, and it waits for the user.
//!
//! Readers take a file's text once, ask [`TrustStore::trusted`] about
//! those very bytes and obey them or not: nothing is read twice. A
//! settings file not trusted still adds its `deny` and `ask` rules (they
//! can only take away).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agentd_protocol::workspace::{ProjectFile, ProjectFileKind, TrustApproval, TrustStanding};
use serde::{Deserialize, Serialize};

use crate::sync::MutexExt;

/// Most approvals kept; past it the oldest are forgotten (asked again).
pub const MAX_APPROVALS: usize = 10_000;
/// Most of a file's text `workspace/trust` shows.
const MAX_SHOWN_BYTES: usize = 64 * 1024;
/// Most skill or agent definition files listed per workspace.
const MAX_DEFINITIONS: usize = 256;
/// Largest project file looked at (settings and definitions are smaller).
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The settings files of a workspace, relative to it.
pub const SETTINGS_FILES: [&str; 3] = [".agentd/settings.json", ".claude/settings.json", ".claude/settings.local.json"];

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Approval {
    sha256: String,
    at_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Record {
    version: u32,
    files: BTreeMap<PathBuf, Approval>,
}

/// The user's approvals of project files, by path.
#[derive(Debug)]
pub struct TrustStore {
    /// `<state>/trust/approved.json`; `None` for a daemon that keeps nothing.
    file: Option<PathBuf>,
    /// Every project file is trusted (`--trust-project-files`).
    all: bool,
    approved: Mutex<BTreeMap<PathBuf, Approval>>,
}

/// The SHA-256 of `bytes`, lower-case hex.
pub fn sha256(bytes: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

impl TrustStore {
    /// The approvals kept in `state_dir` (none when `persist` is off).
    /// A file that cannot be read trusts nothing, and says so.
    pub fn open(state_dir: &Path, all: bool, persist: bool) -> TrustStore {
        let file = persist.then(|| state_dir.join("trust/approved.json"));
        let approved = match file.as_deref().map(std::fs::read) {
            None => BTreeMap::new(),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Some(Err(e)) => {
                tracing::warn!(
                    "trust/approved.json cannot be read ({e}): no project file is trusted until approved again"
                );
                BTreeMap::new()
            }
            Some(Ok(bytes)) => match serde_json::from_slice::<Record>(&bytes) {
                Ok(record) => record.files,
                Err(e) => {
                    tracing::warn!("trust/approved.json is not what agentd writes ({e}): no project file is trusted");
                    BTreeMap::new()
                }
            },
        };
        TrustStore { file, all, approved: Mutex::new(approved) }
    }

    /// Whether every project file is trusted without asking.
    pub fn trusts_all(&self) -> bool {
        self.all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<PathBuf, Approval>> {
        self.approved.locked()
    }

    /// Where the file `path` whose content is `bytes` stands.
    pub fn standing(&self, path: &Path, bytes: &[u8]) -> TrustStanding {
        if self.all {
            return TrustStanding::Trusted;
        }
        match self.lock().get(path) {
            None => TrustStanding::New,
            Some(a) if a.sha256 == sha256(bytes) => TrustStanding::Trusted,
            Some(_) => TrustStanding::Changed,
        }
    }

    /// Whether the file `path` whose content is `bytes` is trusted.
    pub fn trusted(&self, path: &Path, bytes: &[u8]) -> bool {
        self.standing(path, bytes) == TrustStanding::Trusted
    }

    /// Records the user's answer for workspace `cwd`: each approval names
    /// one of its project files and the content the user saw; withdrawals
    /// forget files (`cwd` itself: every approval of a file under it, there
    /// now or not). All or nothing: an approval of a file that is not one
    /// of `cwd`'s project files, or whose content changed, refuses the lot.
    pub fn answer(&self, cwd: &Path, approve: &[TrustApproval], revoke: &[PathBuf]) -> Result<(), String> {
        if approve.is_empty() && revoke.is_empty() {
            return Ok(());
        }
        let files = survey(cwd, self, false);
        let mut approvals = Vec::new();
        for a in approve {
            let Some(file) = files.iter().find(|f| f.path == a.path) else {
                return Err(format!("{} is not a project file of {}", a.path.display(), cwd.display()));
            };
            if file.sha256 != a.sha256.to_ascii_lowercase() {
                return Err(format!(
                    "{} changed since it was shown (its SHA-256 is now {}): look again",
                    a.path.display(),
                    file.sha256
                ));
            }
            approvals.push((a.path.clone(), Approval { sha256: file.sha256.clone(), at_ms: now_ms() }));
        }
        let mut map = self.lock();
        for path in revoke {
            if path == cwd {
                map.retain(|p, _| !p.starts_with(cwd));
            } else {
                map.remove(path);
            }
        }
        map.extend(approvals);
        while map.len() > MAX_APPROVALS {
            let Some(oldest) = map.iter().min_by_key(|(_, a)| a.at_ms).map(|(p, _)| p.clone()) else { break };
            map.remove(&oldest);
        }
        self.save(&map).map_err(|e| format!("the approvals could not be kept: {e}"))
    }

    /// Writes the approvals whole (a temporary file renamed over the last).
    fn save(&self, map: &BTreeMap<PathBuf, Approval>) -> std::io::Result<()> {
        let Some(file) = &self.file else { return Ok(()) };
        let dir = file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let record = Record { version: 1, files: map.clone() };
        let body = serde_json::to_vec(&record)?;
        crate::store::disk::write_atomically(&file.with_extension("json.tmp"), file, &body)
    }
}

/// The project files of workspace `cwd` (each path as it is under `cwd`),
/// with their kind: what a session there would obey. A directory that
/// cannot be listed holds nothing a session could read either.
///
/// A name that is not UTF-8 is left out: what it names cannot be shown
/// or approved, and is never obeyed (each reader asks [`TrustStore`]).
/// The workspace that is the home directory holds the user's own skills
/// and agents, not the workspace's.
pub fn project_files(cwd: &Path) -> Vec<(PathBuf, ProjectFileKind)> {
    let mut out: Vec<(PathBuf, ProjectFileKind)> =
        SETTINGS_FILES.iter().map(|rel| (cwd.join(rel), ProjectFileKind::Settings)).collect();
    out.push((cwd.join(".mcp.json"), ProjectFileKind::Mcp));
    let listed = |dir: PathBuf, wanted: &dyn Fn(&Path) -> Option<PathBuf>| -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> =
            std::fs::read_dir(dir).map(|e| e.flatten().filter_map(|e| wanted(&e.path())).collect()).unwrap_or_default();
        paths.retain(|p| p.to_str().is_some());
        paths.sort();
        paths.truncate(MAX_DEFINITIONS);
        paths
    };
    if !is_home(cwd) {
        let skill = |dir: &Path| dir.is_dir().then(|| dir.join("SKILL.md"));
        out.extend(listed(cwd.join(".claude/skills"), &skill).into_iter().map(|f| (f, ProjectFileKind::Skill)));
        let agent = |file: &Path| file.extension().is_some_and(|x| x == "md").then(|| file.to_owned());
        out.extend(listed(cwd.join(".claude/agents"), &agent).into_iter().map(|f| (f, ProjectFileKind::Agent)));
    }
    out
}

/// Whether `cwd` is the user's home directory (whose `.claude/skills` and
/// `.claude/agents` are the user's own).
pub fn is_home(cwd: &Path) -> bool {
    let home = std::env::var_os("HOME").map(PathBuf::from).filter(|h| h.is_absolute());
    home.is_some_and(|h| std::fs::canonicalize(h).is_ok_and(|h| h == cwd))
}

/// Each project file of `cwd` that is there, with its standing (and its
/// text when `with_text`).
pub fn survey(cwd: &Path, store: &TrustStore, with_text: bool) -> Vec<ProjectFile> {
    project_files(cwd)
        .into_iter()
        .filter_map(|(path, kind)| {
            let bytes = crate::fs::read_regular(&path, MAX_FILE_BYTES).ok()?;
            let text = with_text.then(|| {
                let shown = &bytes[..bytes.len().min(MAX_SHOWN_BYTES)];
                String::from_utf8_lossy(shown).into_owned()
            });
            Some(ProjectFile {
                standing: store.standing(&path, &bytes),
                sha256: sha256(&bytes),
                bytes: bytes.len() as u64,
                path,
                kind,
                text,
            })
        })
        .collect()
}

/// The project files of `cwd` a session there does not obey.
pub fn untrusted(cwd: &Path, store: &TrustStore) -> Vec<ProjectFile> {
    if store.trusts_all() {
        return Vec::new();
    }
    survey(cwd, store, false).into_iter().filter(|f| f.standing != TrustStanding::Trusted).collect()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_approval_holds_for_that_content_only_and_survives_a_reopen() {
        let state = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let file = ws.path().join(".claude/settings.json");
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "{}").unwrap();
        let store = TrustStore::open(state.path(), false, true);
        assert_eq!(store.standing(&file, b"{}"), TrustStanding::New);
        let listed = survey(ws.path(), &store, true);
        assert_eq!(listed.len(), 1, "{listed:?}");
        assert_eq!(listed[0].text.as_deref(), Some("{}"));
        // A stale hash refuses the lot.
        let stale = TrustApproval { path: file.clone(), sha256: sha256(b"{ }") };
        assert!(store.answer(ws.path(), &[stale], &[]).unwrap_err().contains("changed since"));
        assert_eq!(store.standing(&file, b"{}"), TrustStanding::New);
        let seen = TrustApproval { path: file.clone(), sha256: listed[0].sha256.clone() };
        store.answer(ws.path(), &[seen], &[]).unwrap();
        assert!(store.trusted(&file, b"{}"));
        assert_eq!(store.standing(&file, b"{\"x\":1}"), TrustStanding::Changed);
        let again = TrustStore::open(state.path(), false, true);
        assert!(again.trusted(&file, b"{}"));
        again.answer(ws.path(), &[], std::slice::from_ref(&file)).unwrap();
        assert_eq!(TrustStore::open(state.path(), false, true).standing(&file, b"{}"), TrustStanding::New);
        // Not a project file: refused.
        let other = TrustApproval { path: ws.path().join("x"), sha256: sha256(b"") };
        assert!(store.answer(ws.path(), &[other], &[]).is_err());
    }

    #[test]
    fn a_damaged_store_trusts_nothing() {
        let state = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(state.path().join("trust")).unwrap();
        std::fs::write(state.path().join("trust/approved.json"), "{not json").unwrap();
        let store = TrustStore::open(state.path(), false, true);
        assert_eq!(store.standing(Path::new("/w/.mcp.json"), b""), TrustStanding::New);
    }
}
