//! The built-in tools, one file each (schema, validation, permission view,
//! call, render — in the order of the `Tool` trait's elements). Adding a tool
//! is one file here and one line in [`builtin_registry`].

pub mod ask_user_question;
pub mod bash;
pub mod bash_output;
pub mod brief;
pub mod config;
pub mod cron;
pub mod edit;
pub mod glob;
pub mod grep;
pub mod ls;
pub mod monitor;
pub mod notebook_edit;
pub mod peers;
pub mod plan_mode;
pub mod read;
pub mod skill;
pub mod task;
pub mod task_stop;
pub mod tasks;
pub mod todo_write;
pub mod tool_search;
pub mod web_fetch;
pub mod web_search;
pub mod worktree;
pub mod write;

#[cfg(feature = "test-tools")]
pub mod testing;

use std::sync::Arc;

use crate::sync::MutexExt;
use crate::tool::{ExternalToolSource, Registry};

/// Every built-in tool this build carries.
///
/// Tools behind cargo features are absent from builds without them (left
/// out at compile time, not hidden at run time): `test-tools` adds the
/// deterministic tools the tests drive, never part of a default build.
pub fn builtin_registry(web: Arc<crate::web::Web>) -> Registry {
    let mut registry = Registry::default();
    registry.add(bash::Bash(web.clone()));
    registry.add(bash_output::BashOutput);
    registry.add(bash_output::TaskOutput);
    registry.add(task_stop::TaskStop);
    registry.add(monitor::Monitor(web.clone()));
    registry.add(read::Read);
    registry.add(write::Write);
    registry.add(edit::Edit);
    registry.add(edit::MultiEdit);
    registry.add(glob::Glob);
    registry.add(ls::Ls);
    registry.add(grep::Grep);
    registry.add(notebook_edit::NotebookEdit);
    registry.add(todo_write::TodoWrite);
    registry.add(brief::Brief);
    registry.add(peers::ListAgents);
    registry.add(peers::SendMessage);
    registry.add(cron::CronCreate);
    registry.add(cron::CronList);
    registry.add(cron::CronDelete);
    registry.add(config::Config);
    registry.add(tasks::TaskCreate);
    registry.add(tasks::TaskGet);
    registry.add(tasks::TaskList);
    registry.add(tasks::TaskUpdate);
    registry.add(ask_user_question::AskUserQuestion);
    registry.add(plan_mode::EnterPlanMode);
    registry.add(worktree::EnterWorktree);
    registry.add(worktree::ExitWorktree);
    registry.add(plan_mode::ExitPlanMode);
    registry.add(tool_search::ToolSearch);
    registry.add(web_fetch::WebFetch(web.clone()));
    registry.add(web_search::WebSearch(web));
    #[cfg(feature = "test-tools")]
    {
        registry.add(testing::echo::TestEcho);
        registry.add(testing::sleep::TestSleep);
        registry.add(testing::shell::TestShell);
        registry.add(testing::block::TestBlock);
        registry.add(testing::flags::TestDeferred);
        registry.add(testing::flags::TestAlwaysLoad);
        registry.add(testing::flags::TestDisabled);
    }
    registry
}

/// Tool sources of the daemon as a whole (MCP servers, skills and
/// sub-agent definitions are per session): only test builds have one, a
/// synthetic source of `AGENTD_TEST_EXTERNAL_TOOLS` tools.
pub fn external_sources() -> Vec<Arc<dyn ExternalToolSource>> {
    #[allow(unused_mut)]
    let mut sources: Vec<Arc<dyn ExternalToolSource>> = Vec::new();
    #[cfg(feature = "test-tools")]
    if let Some(count) = std::env::var("AGENTD_TEST_EXTERNAL_TOOLS").ok().and_then(|n| n.parse().ok()) {
        sources.push(Arc::new(testing::external::SyntheticSource::new("synthetic", count)));
    }
    sources
}

/// Whether the user has a global gitignore (git's `core.excludesFile`, or
/// `~/.config/git/ignore`). Finding out reads git's config files, which a
/// walk would otherwise do on every call; the answer is kept for a few
/// seconds. When there is none, walks skip looking (same result, fewer
/// system calls).
pub fn global_gitignore_exists() -> bool {
    use std::sync::Mutex;
    use std::time::{Duration, Instant};
    static SEEN: Mutex<Option<(Instant, bool)>> = Mutex::new(None);
    const FRESH: Duration = Duration::from_secs(5);
    let mut seen = SEEN.locked();
    if let Some((at, exists)) = *seen
        && at.elapsed() < FRESH
    {
        return exists;
    }
    let (global, _) = ignore::gitignore::GitignoreBuilder::new("").build_global();
    let exists = !global.is_empty();
    *seen = Some((Instant::now(), exists));
    exists
}

/// `n` and a noun in the right number, for render texts: `1 file`,
/// `2 files`, `0 lines` (Claude Code's "Found 1 file").
pub(crate) fn counted(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod counted_tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        for (n, want) in [(0, "0 files"), (1, "1 file"), (2, "2 files"), (11, "11 files")] {
            assert_eq!(super::counted(n, "file", "files"), want);
        }
    }
}
