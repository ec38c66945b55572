//! FileChanged and ConfigChange: the files a session's FileChanged hooks
//! name, and its settings files when it has ConfigChange hooks, looked at
//! once a second while the session lives (a `stat` each: no inotify
//! instance or watch is taken from the user's, and a file that does not
//! exist yet is watched as well as one that does). A file that appears,
//! changes (its size, modification time or inode) or goes runs the hooks
//! for it: FileChanged with `file_path` and `event` (`add`, `change`,
//! `unlink`), ConfigChange with `source` and `file_path`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentd_protocol::hooks::HookEvent;
use serde_json::json;

use super::{About, Completions, Hooks};

/// How often the files are looked at.
const EVERY: Duration = Duration::from_secs(1);

/// What was seen of a file: its size, modification time and inode (`None`:
/// not there).
type Seen = Option<(u64, std::time::SystemTime, u64)>;

fn look(path: &std::path::Path) -> Seen {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// Starts watching, when the session has FileChanged hooks (and a runtime
/// to watch on); the task ends with the session.
pub(super) fn start(hooks: &Arc<Hooks>) {
    // (event, subject, path)
    let mut watched: Vec<(HookEvent, String, PathBuf)> = hooks
        .set
        .watched_files()
        .into_iter()
        .map(|f| {
            let path = if f.starts_with('/') { PathBuf::from(&f) } else { hooks.cwd.join(&f) };
            (HookEvent::FileChanged, f, path)
        })
        .collect();
    for (path, source) in &hooks.set.config_files {
        if hooks.set.wants(HookEvent::ConfigChange, source) {
            watched.push((HookEvent::ConfigChange, (*source).to_owned(), path.clone()));
        }
    }
    if watched.is_empty() || tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let (me, stop) = (Arc::downgrade(hooks), hooks.background.clone());
    hooks.tracker.spawn(async move {
        let mut seen: Vec<Seen> = watched.iter().map(|(_, _, p)| look(p)).collect();
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => return,
            }
            for ((event, subject, path), before) in watched.iter().zip(seen.iter_mut()) {
                let now = look(path);
                let change = match (&*before, &now) {
                    (None, Some(_)) => "add",
                    (Some(_), None) => "unlink",
                    (Some(a), Some(b)) if a != b => "change",
                    _ => continue,
                };
                *before = now;
                let Some(hooks) = me.upgrade() else { return };
                if hooks.is_closed() {
                    return;
                }
                let about = About { turn_id: None, tool_use_id: None, tool_name: None };
                let file_path = path.display().to_string();
                let input = match event {
                    HookEvent::ConfigChange => json!({ "source": subject, "file_path": file_path }),
                    _ => json!({ "file_path": file_path, "event": change }),
                };
                hooks.run(*event, subject, input, &about, &stop, Completions::Pushed).await;
            }
        }
    });
}
