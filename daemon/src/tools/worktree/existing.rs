//! EnterWorktree `path`: the session moves into a linked worktree of the
//! repository that is there already (git's list of them read and checked
//! both ways), and the `config.worktree` both paths make safely.

use std::path::{Path, PathBuf};

use agentd_protocol::session::WorktreeInfo;

use super::{WorktreeOutput, git, intact};
use crate::tool::{SessionContext, ToolContext, ToolError, ToolOutput};

/// Makes the worktree's `config.worktree` present and empty if it is not
/// there (so that the sandbox binds it read-only and a command cannot
/// create one git would obey), never through a symlink: one planted there
/// would have the daemon create a file wherever it points.
pub(super) fn ensure_worktree_config(git_dir: &Path) -> Result<(), ToolError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = git_dir.join("config.worktree");
    let refuse = || {
        ToolError::new(format!("{} is not a regular file (a symlink?); refusing to use the worktree", path.display()))
    };
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_file() => Ok(()),
        Ok(_) => Err(refuse()),
        Err(_) => match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .mode(0o644)
            .open(&path)
        {
            Ok(_) => Ok(()),
            Err(_) if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) => Ok(()),
            Err(_) => Err(refuse()),
        },
    }
}

/// One entry of `git worktree list --porcelain -z`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Listed {
    path: PathBuf,
    head: Option<String>,
    branch: Option<String>,
    bare: bool,
    locked: Option<String>,
    prunable: bool,
}

/// The entries of `git worktree list --porcelain -z` (the main worktree
/// first).
fn parse_worktree_list(out: &str) -> Vec<Listed> {
    let mut all = Vec::new();
    let mut current: Option<Listed> = None;
    for field in out.split('\0') {
        if field.is_empty() {
            all.extend(current.take());
            continue;
        }
        let (key, value) = field.split_once(' ').unwrap_or((field, ""));
        if key == "worktree" {
            all.extend(current.replace(Listed { path: PathBuf::from(value), ..Listed::default() }));
            continue;
        }
        let Some(entry) = current.as_mut() else { continue };
        match key {
            "HEAD" => entry.head = Some(value.to_owned()),
            "branch" => entry.branch = Some(value.strip_prefix("refs/heads/").unwrap_or(value).to_owned()),
            "bare" => entry.bare = true,
            "locked" => entry.locked = Some(value.to_owned()),
            "prunable" => entry.prunable = true,
            _ => {}
        }
    }
    all.extend(current);
    all
}

/// EnterWorktree `path`: the session moves into a linked worktree of the
/// repository that is there already (it keeps it on ExitWorktree).
pub(super) async fn enter_existing(
    path: &str,
    ctx: &ToolContext,
    top: PathBuf,
    common_dir: PathBuf,
) -> Result<ToolOutput<WorktreeOutput>, ToolError> {
    let cancel = &ctx.cancel;
    let raw = Path::new(path.trim());
    let asked = if raw.is_absolute() { raw.to_path_buf() } else { ctx.cwd.join(raw) };
    let wanted = std::fs::canonicalize(&asked)
        .map_err(|e| ToolError::new(format!("Cannot enter worktree: {}: {e}", asked.display())))?;
    if crate::fs::in_state_dir(&wanted) {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is in agentd's state directory",
            wanted.display()
        )));
    }
    if !wanted.is_dir() {
        return Err(ToolError::new(format!("Cannot enter worktree: {} is not a directory", wanted.display())));
    }
    if wanted == *ctx.cwd {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is the current working directory.",
            wanted.display()
        )));
    }
    let git_dir_arg = format!("--git-dir={}", common_dir.display());
    let out = git(&top, &[&git_dir_arg, "worktree", "list", "--porcelain", "-z"], cancel).await?;
    if !out.ok {
        return Err(ToolError::new(format!("git worktree list failed: {}", out.why())));
    }
    let listed = parse_worktree_list(&out.stdout);
    let canonical = |p: &Path| std::fs::canonicalize(p).ok();
    // A registered path through a symlink is not taken: the entry's own
    // state (locked, its branch) would be another worktree's.
    if let Some(l) = listed.iter().find(|l| l.path != wanted && canonical(&l.path).as_deref() == Some(&wanted)) {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is registered as {}, through a symbolic link",
            wanted.display(),
            l.path.display()
        )));
    }
    let Some(index) = listed.iter().position(|l| l.path == wanted) else {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is not a registered worktree of {}. Run 'git -C {} worktree list' to \
             see registered worktrees.",
            wanted.display(),
            top.display(),
            top.display()
        )));
    };
    let entry = &listed[index];
    if index == 0 || entry.bare {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is the main working tree, not a linked worktree.",
            wanted.display()
        )));
    }
    if entry.prunable {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is marked prunable by git (its directory or administrative files are \
             missing or broken).",
            wanted.display()
        )));
    }
    if let Some(reason) = &entry.locked {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: {} is locked{}; unlock it with git worktree unlock first.",
            wanted.display(),
            if reason.is_empty() { String::new() } else { format!(" ({reason})") }
        )));
    }
    // Its git directory, as its .git file names it, must be the
    // repository's record of it (checked again by `intact` before any git
    // command that changes it).
    let dot = std::fs::read_to_string(wanted.join(".git"))
        .map_err(|e| ToolError::new(format!("Cannot enter worktree: its .git file: {e}")))?;
    let named = dot.lines().find_map(|l| l.strip_prefix("gitdir:")).map(str::trim).unwrap_or_default();
    let git_dir = std::fs::canonicalize(wanted.join(named))
        .ok()
        .filter(|g| g.parent() == Some(common_dir.join("worktrees").as_path()))
        .ok_or_else(|| {
            ToolError::new(format!(
                "Cannot enter worktree: its .git file does not name a git directory under {}",
                common_dir.join("worktrees").display()
            ))
        })?;
    let branch = entry.branch.clone().unwrap_or_else(|| "(detached HEAD)".to_owned());
    let info = WorktreeInfo {
        path: wanted.clone(),
        branch: branch.clone(),
        cwd: wanted.clone(),
        original_cwd: ctx.cwd.to_path_buf(),
        repository: top,
        common_dir,
        git_dir: git_dir.clone(),
        base: entry.head.clone(),
        entered: true,
        by_hook: false,
    };
    intact(&info).map_err(|why| ToolError::new(format!("Cannot enter worktree: {why}")))?;
    // Git's record of the worktree names this very directory back.
    let recorded = std::fs::read_to_string(git_dir.join("gitdir")).unwrap_or_default();
    if std::fs::canonicalize(recorded.trim()).ok() != Some(wanted.join(".git")) {
        return Err(ToolError::new(format!(
            "Cannot enter worktree: git's record of it ({}) does not name {}",
            git_dir.join("gitdir").display(),
            wanted.join(".git").display()
        )));
    }
    // Present (empty) so that the sandbox binds it read-only, as for a
    // worktree EnterWorktree makes.
    ensure_worktree_config(&git_dir)?;
    let message = format!(
        "Entered worktree at {} on branch {branch}. The session is now working in the worktree. Use \
         ExitWorktree to leave (it keeps this worktree: the session did not make it).",
        wanted.display()
    );
    let output = WorktreeOutput { worktree_path: wanted.clone(), branch, cwd: wanted, removed: false, message };
    let modifier = Box::new(move |s: &mut SessionContext| {
        s.worktree = Some(info);
        s.shell_cwd = None;
    });
    Ok(ToolOutput::with_modifier(output, modifier))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worktree_lists_are_read_entry_by_entry() {
        let out = "worktree /r\0HEAD abc\0branch refs/heads/main\0\0worktree /r/wt one\0HEAD def\0detached\0locked \
                   in use\0\0worktree /gone\0HEAD 123\0branch refs/heads/x\0prunable gitdir file points nowhere\0\0";
        let listed = parse_worktree_list(out);
        assert_eq!(listed.len(), 3, "{listed:?}");
        assert_eq!(listed[0].branch.as_deref(), Some("main"));
        assert_eq!(listed[1].path, PathBuf::from("/r/wt one"));
        assert_eq!((listed[1].branch.as_deref(), listed[1].locked.as_deref()), (None, Some("in use")));
        assert!(listed[2].prunable && listed[2].locked.is_none());
        assert!(parse_worktree_list("").is_empty());
    }
}
