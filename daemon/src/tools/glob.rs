//! Glob: files whose path matches a glob pattern, newest first. Walks with
//! the `ignore` crate's parallel walker, so `.gitignore` and hidden files
//! follow ripgrep's defaults (with options to include them).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::sync::MutexExt;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Paths returned when no limit is given.
const DEFAULT_LIMIT: usize = 100;

/// The Glob tool.
#[derive(Debug, Clone, Copy)]
pub struct Glob;

/// Input of Glob.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GlobInput {
    /// The glob, as ripgrep's `--glob` takes it: without a `/` it names files
    /// at any depth under `path` (`*.rs`, `*.{ts,tsx}`); with one, paths
    /// from `path` (`src/**/test_*.py`, `**/*.rs`). An absolute pattern
    /// searches from its literal directories (`/ws/src/**/*.rs`).
    pub pattern: String,
    /// Directory to search (absolute or relative to the workspace; default the workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// Most paths to return (default 100).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub limit: Option<usize>,
    /// Include hidden files and directories (default: skipped, like ripgrep).
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub include_hidden: bool,
    /// Include files that .gitignore/.ignore exclude (default: skipped).
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub include_ignored: bool,
}

/// What Glob found.
#[derive(Debug, Clone, Serialize)]
pub struct GlobOutput {
    /// Matching files, newest first.
    pub files: Vec<PathBuf>,
    /// Matches beyond the limit.
    pub more: usize,
}

impl Tool for Glob {
    type Input = GlobInput;
    type Output = GlobOutput;

    const NAME: &'static str = "Glob";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Searches;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Finds files by name with a glob pattern, newest first: `*.rs` (no `/`) matches file names at \
         any depth, `src/**/*.ts` paths from the search directory. Respects .gitignore and skips hidden \
         files unless asked. Use it instead of `find` or `ls`."
            .to_owned()
    }

    fn validate_input(&self, input: &GlobInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        let search = Search::of(input);
        if let Some(p) = &search.dir {
            // Outside the workspace is a question for the permission check.
            ctx.validate_path(p).map_err(|e| ValidationError::new(e.to_string()))?;
        }
        matcher(&search.pattern).map_err(|e| ValidationError::new(e.message))?;
        if input.limit == Some(0) {
            return Err(ValidationError::new("limit must be at least 1"));
        }
        Ok(())
    }

    fn permission_target(&self, input: &GlobInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(Search::of(input).dir.unwrap_or_else(|| ".".into()))
    }

    fn check_permissions(&self, input: &GlobInput, ctx: &ToolContext) -> Decision {
        match &Search::of(input).dir {
            Some(p) if !ctx.outside_note(p).is_empty() => Decision::ask(format!("search {p}, outside the workspace")),
            _ => Decision::Allow,
        }
    }

    async fn call(
        &self,
        input: GlobInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<GlobOutput>, ToolError> {
        let search = Search::of(&input);
        let dir = match &search.dir {
            Some(p) => ctx.target_path(p).map_err(|e| ToolError::new(e.to_string()))?.abs(),
            None => ctx.cwd.to_path_buf(),
        };
        let canonical = crate::fs::canonical(&dir).map_err(|e| ToolError::new(format!("{}: {e}", dir.display())))?;
        if !ctx.inside(&canonical) && ctx.grant.approved_outside.as_deref() != Some(&canonical) {
            return Err(ToolError::new(format!("{} is outside the workspace", dir.display())));
        }
        if !canonical.is_dir() {
            return Err(ToolError::new(format!("{} is not a directory", dir.display())));
        }
        // The directory judged, held: a directory on the way swapped for a
        // link (before the walk, or while it ran) makes the listing an
        // error, not a list of names elsewhere.
        let held = crate::fs::open_dir_as(&canonical).map_err(|e| ToolError::new(e.to_string()))?;
        let unchanged = |found: GlobOutput| match crate::fs::still_at(&held, &canonical) {
            true => Ok(ToolOutput::new(found)),
            false => Err(ToolError::new(format!("{} changed while it was searched", dir.display()))),
        };
        let cancel = ctx.cancel.clone();
        let rules = ctx.rules.clone();
        // A small tree is walked here, with no thread started; a larger one
        // on the blocking pool by the parallel walker.
        if let Some(found) = glob_small(&canonical, &input, &search, rules.clone())? {
            return unchanged(found);
        }
        let root = canonical.clone();
        let found = tokio::task::spawn_blocking(move || glob(&root, &input, &search, &cancel, rules))
            .await
            .map_err(|e| ToolError::new(format!("glob failed: {e}")))??;
        unchanged(found)
    }

    fn result_content(&self, out: &GlobOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text: String = out.files.iter().map(|f| format!("{}\n", f.display())).collect();
        // Claude Code 2.1.332's words.
        if out.files.is_empty() {
            text.push_str("No files found\n");
        }
        if out.more > 0 {
            text.push_str(&format!(
                "(Showing {} of {} matching files; {} more are not listed. Narrow the pattern or path to see the \
                 rest.)\n",
                out.files.len(),
                out.files.len() + out.more,
                out.more
            ));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &GlobInput) -> String {
        format!("Finding {}", input.pattern)
    }

    fn render_result(&self, out: &GlobOutput) -> String {
        format!("Found {}", crate::tools::counted(out.files.len() + out.more, "file", "files"))
    }
}

/// Entries a walk on the caller's thread may visit before it gives up and
/// leaves the tree to the parallel walker.
pub const SMALL_TREE_ENTRIES: usize = 512;

fn walker(
    dir: &std::path::Path,
    input: &GlobInput,
    rules: std::sync::Arc<crate::permission::rules::RuleSet>,
) -> ignore::WalkBuilder {
    let secrets = crate::fs::secret_ids();
    let in_state = crate::fs::state_dir_filter();
    let mut walk = ignore::WalkBuilder::new(dir);
    walk.hidden(!input.include_hidden)
        .git_ignore(!input.include_ignored)
        .git_global(!input.include_ignored && super::global_gitignore_exists())
        .git_exclude(!input.include_ignored)
        .ignore(!input.include_ignored)
        .parents(!input.include_ignored)
        // What a Read deny rule forbids is never listed.
        .filter_entry(move |e| {
            rules.read_denied(e.path()).is_none() && !in_state(e.path()) && !crate::fs::secret_entry(&secrets, e)
        });
    walk
}

/// Where a Glob searches and what it matches there.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Search {
    /// The directory (as given; `None`: the workspace).
    dir: Option<String>,
    /// The glob, relative to it.
    pattern: String,
}

impl Search {
    /// An absolute pattern is split at its first component with a glob
    /// character: the literal directories before it are where the search
    /// starts (`path` then does not count); `./` in front means nothing.
    fn of(input: &GlobInput) -> Search {
        let pattern = input.pattern.as_str();
        if !pattern.starts_with('/') {
            let pattern = pattern.trim_start_matches("./");
            return Search { dir: input.path.clone(), pattern: pattern.to_owned() };
        }
        let parts: Vec<&str> = pattern.split('/').filter(|p| !p.is_empty()).collect();
        let magic = |p: &&str| p.contains(['*', '?', '[', '{']);
        let split = parts.iter().position(magic).unwrap_or(parts.len().saturating_sub(1));
        Search { dir: Some(format!("/{}", parts[..split].join("/"))), pattern: parts[split..].join("/") }
    }
}

/// A compiled pattern: one without a `/` is matched against file names
/// (any depth), one with a `/` against paths from the search directory.
#[derive(Clone)]
struct Matcher {
    glob: globset::GlobMatcher,
    names: bool,
}

impl Matcher {
    fn is_match(&self, rel: &std::path::Path) -> bool {
        match self.names {
            true => rel.file_name().is_some_and(|n| self.glob.is_match(n)),
            false => self.glob.is_match(rel),
        }
    }
}

/// Compiled globs, by pattern.
static MATCHERS: std::sync::LazyLock<crate::tool::memo::Memo<String, Matcher>> =
    std::sync::LazyLock::new(|| crate::tool::memo::Memo::new(64));

fn matcher(pattern: &str) -> Result<Matcher, ToolError> {
    MATCHERS.get_or_try(pattern.to_owned(), || {
        if pattern.is_empty() {
            return Err(ToolError::new("the pattern is empty"));
        }
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| ToolError::new(format!("invalid glob: {e}")))?
            .compile_matcher();
        Ok(Matcher { glob, names: !pattern.trim_end_matches('/').contains('/') })
    })
}

/// The walk of a small tree, on this thread; `None` when the tree has more
/// than [`SMALL_TREE_ENTRIES`] entries.
fn glob_small(
    dir: &std::path::Path,
    input: &GlobInput,
    search: &Search,
    rules: std::sync::Arc<crate::permission::rules::RuleSet>,
) -> Result<Option<GlobOutput>, ToolError> {
    let matcher = matcher(&search.pattern)?;
    let mut found = Vec::new();
    for (seen, entry) in walker(dir, input, rules).build().enumerate() {
        if seen >= SMALL_TREE_ENTRIES {
            return Ok(None);
        }
        let Ok(entry) = entry else { continue };
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(dir) else { continue };
        if matcher.is_match(rel) {
            let mtime = entry.metadata().ok().and_then(|m| m.modified().ok()).unwrap_or(SystemTime::UNIX_EPOCH);
            found.push((mtime, entry.into_path()));
        }
    }
    Ok(Some(finish(found, input)))
}

/// Newest first (equal times by path, so the order is stable), cut at the limit.
fn finish(mut found: Vec<(SystemTime, PathBuf)>, input: &GlobInput) -> GlobOutput {
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let limit = input.limit.unwrap_or(DEFAULT_LIMIT);
    let more = found.len().saturating_sub(limit);
    GlobOutput { files: found.into_iter().take(limit).map(|(_, p)| p).collect(), more }
}

fn glob(
    dir: &std::path::Path,
    input: &GlobInput,
    search: &Search,
    cancel: &tokio_util::sync::CancellationToken,
    rules: std::sync::Arc<crate::permission::rules::RuleSet>,
) -> Result<GlobOutput, ToolError> {
    let matcher = matcher(&search.pattern)?;
    let found: Mutex<Vec<(SystemTime, PathBuf)>> = Mutex::new(Vec::new());
    let walker = walker(dir, input, rules)
        .threads(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2))
        .build_parallel();
    walker.run(|| {
        let matcher = &matcher;
        let found = &found;
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return ignore::WalkState::Quit;
            }
            let Ok(entry) = entry else { return ignore::WalkState::Continue };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            let Ok(rel) = entry.path().strip_prefix(dir) else { return ignore::WalkState::Continue };
            if matcher.is_match(rel) {
                let mtime = entry.metadata().ok().and_then(|m| m.modified().ok()).unwrap_or(SystemTime::UNIX_EPOCH);
                found.locked().push((mtime, entry.path().to_owned()));
            }
            ignore::WalkState::Continue
        })
    });
    Ok(finish(found.into_held(), input))
}
