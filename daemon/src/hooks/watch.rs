//! FileChanged: the files a session's FileChanged hooks name, looked at
//! once a second while the session lives (a `stat` each: no inotify
//! instance or watch is taken from the user's, and a file that does not
//! exist yet is watched as well as one that does). A file that appears,
//! changes (its size, modification time or inode) or goes runs the hooks
//! that name it, with `file_path` and `event` (`add`, `change`, `unlink`).

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
    let files = hooks.set.watched_files();
    if files.is_empty() || tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let watched: Vec<(String, PathBuf)> = files
        .into_iter()
        .map(|f| {
            let path = if f.starts_with('/') { PathBuf::from(&f) } else { hooks.cwd.join(&f) };
            (f, path)
        })
        .collect();
    let (me, stop) = (Arc::downgrade(hooks), hooks.background.clone());
    hooks.tracker.spawn(async move {
        let mut seen: Vec<Seen> = watched.iter().map(|(_, p)| look(p)).collect();
        let mut tick = tokio::time::interval(EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => return,
            }
            for ((entry, path), before) in watched.iter().zip(seen.iter_mut()) {
                let now = look(path);
                let event = match (&*before, &now) {
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
                let input = json!({ "file_path": path.display().to_string(), "event": event });
                hooks.run(HookEvent::FileChanged, entry, input, &about, &stop, Completions::Pushed).await;
            }
        }
    });
}
