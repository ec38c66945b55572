//! Worktrees a WorktreeCreate hook makes in place of git (any version
//! control, anywhere the hook chooses) and WorktreeRemove hooks remove:
//! the path a hook names becomes the session's working directory and
//! write root, so it is checked (`allowed`) when made and again before
//! the removal hooks run on it.

use std::path::{Path, PathBuf};

use agentd_protocol::hooks::HookEvent;
use agentd_protocol::session::WorktreeInfo;
use tokio_util::sync::CancellationToken;

use super::{Removal, check_name};
use crate::tool::{ToolContext, ToolError};

/// A worktree named `name`, made by the
/// session's WorktreeCreate `hooks`.
pub(super) async fn make(
    ctx: &ToolContext,
    hooks: &crate::hooks::Hooks,
    name: String,
) -> Result<WorktreeInfo, ToolError> {
    check_name(&name).map_err(ToolError::new)?;
    let about = crate::hooks::About { turn_id: None, tool_use_id: None, tool_name: None };
    let input = serde_json::json!({ "name": name, "cwd": ctx.cwd.display().to_string() });
    let said =
        hooks.run(HookEvent::WorktreeCreate, "", input, &about, &ctx.cancel, crate::hooks::Completions::Pushed).await;
    let failed = |why: String| ToolError::new(format!("WorktreeCreate hook failed: {why}"));
    if !said.blocks.is_empty() || !said.failures.is_empty() {
        return Err(failed(said.blocks.iter().chain(&said.failures).cloned().collect::<Vec<_>>().join("; ")));
    }
    let Some(named) = said.worktree_path else {
        return Err(failed(
            "it succeeded but named no worktree (a command prints the path as its last line of output; a \
             socket or http hook answers hookSpecificOutput.worktreePath)"
                .into(),
        ));
    };
    let path = crate::fs::normalize(&ctx.cwd.join(&named));
    if !std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
        return Err(failed(format!("it named {named:?}, which is not a directory: it must make it first")));
    }
    allowed(&path, &ctx.cwd).map_err(|why| failed(format!("it named {named:?}: {why}")))?;
    Ok(WorktreeInfo {
        path: path.clone(),
        branch: String::new(),
        cwd: path,
        original_cwd: ctx.cwd.to_path_buf(),
        repository: ctx.cwd.to_path_buf(),
        common_dir: PathBuf::new(),
        git_dir: PathBuf::new(),
        base: None,
        entered: false,
        by_hook: true,
    })
}

/// Removes `w`, a worktree a hook made, with the session's WorktreeRemove
/// `hooks` (without any, it stays): removed when it is gone.
pub(super) async fn remove(
    w: &WorktreeInfo,
    hooks: Option<&crate::hooks::Hooks>,
    cancel: &CancellationToken,
) -> Result<String, Removal> {
    // Made by a hook: only hooks know how to remove it — the directory
    // it was, still reached the same way (not a link planted since).
    if let Err(why) = allowed(&w.path, &w.original_cwd) {
        return Err(Removal::Kept(format!("{} is no longer the worktree the hook made: {why}", w.path.display())));
    }
    let Some(hooks) = hooks else {
        return Err(Removal::Kept(
            "a WorktreeCreate hook made it and the session has no WorktreeRemove hook to remove it".into(),
        ));
    };
    // Removed when it is gone (a hook that failed after removing it
    // removed it all the same).
    let failed = removal_hooks(w, hooks, cancel).await;
    if std::fs::symlink_metadata(&w.path).is_ok() {
        return Err(Removal::Kept(match failed {
            Some(why) => format!("the WorktreeRemove hook failed: {why}"),
            None => "the WorktreeRemove hook left it in place".into(),
        }));
    }
    Ok(format!("Removed the worktree {} (by the WorktreeRemove hook)", w.path.display()))
}

/// Whether a hook's worktree may become the session's working directory
/// and write root (and later be given to the WorktreeRemove hook): a
/// directory reached through no symbolic link (one a command planted
/// would send the session, and the removal, anywhere), and none of `/`,
/// the home directory, the workspace or a directory holding it, agentd's
/// state or a file kept secret.
fn allowed(path: &Path, workspace: &Path) -> Result<(), String> {
    let real = std::fs::canonicalize(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if real != path {
        return Err(format!("the way there goes through a symbolic link (it is {})", real.display()));
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let workspace = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    if real == Path::new("/") || home.as_deref().is_some_and(|h| h.starts_with(&real)) || workspace.starts_with(&real) {
        return Err("it is /, the home directory, the workspace or a directory holding one of them".into());
    }
    if crate::fs::in_state_dir(&real) || crate::fs::holds_state_dir(&real) || crate::fs::holds_secret(&real) {
        return Err("it is or holds what agentd keeps from every tool".into());
    }
    Ok(())
}

/// Runs the session's WorktreeRemove hooks on `w`: what they said went
/// wrong, if anything (a hook that failed or blocked).
pub(super) async fn removal_hooks(
    w: &WorktreeInfo,
    hooks: &crate::hooks::Hooks,
    cancel: &CancellationToken,
) -> Option<String> {
    let about = crate::hooks::About { turn_id: None, tool_use_id: None, tool_name: None };
    let input = serde_json::json!({ "worktree_path": w.path.display().to_string() });
    let said = hooks.run(HookEvent::WorktreeRemove, "", input, &about, cancel, crate::hooks::Completions::Pushed).await;
    let wrong: Vec<String> = said.blocks.into_iter().chain(said.failures).collect();
    (!wrong.is_empty()).then(|| wrong.join("; "))
}
