//! LS: a directory's tree, as Claude Code's earlier `LS` tool gave it. Not
//! offered (Glob and Bash `ls` do the job); it runs when a model trained
//! on that version calls it. Walks like Glob: `.gitignore` respected,
//! hidden entries skipped, what a Read deny rule forbids never listed.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Most entries listed.
const MAX_ENTRIES: usize = 1000;

/// The LS tool.
#[derive(Debug, Clone, Copy)]
pub struct Ls;

/// Input of LS.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LsInput {
    /// The directory to list: absolute, or relative to the workspace.
    pub path: String,
    /// Glob patterns of names to leave out.
    #[serde(default)]
    pub ignore: Option<Vec<String>>,
}

/// The tree.
#[derive(Debug, Clone, Serialize)]
pub struct LsOutput {
    /// The directory listed.
    pub root: PathBuf,
    /// Entries below it, relative, in walk order (directories end in `/`).
    pub entries: Vec<String>,
    /// Whether the listing stopped at the limit.
    pub truncated: bool,
}

impl Tool for Ls {
    type Input = LsInput;
    type Output = LsOutput;

    const NAME: &'static str = "LS";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Searches;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Lists the files and directories under a path, as a tree.".to_owned()
    }

    fn is_legacy(&self) -> bool {
        true
    }

    fn validate_input(&self, input: &LsInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        ctx.validate_path(&input.path).map_err(|e| ValidationError::new(e.to_string()))?;
        ignore_set(input.ignore.as_deref().unwrap_or_default()).map(|_| ())
    }

    fn permission_target(&self, input: &LsInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.path.clone())
    }

    fn check_permissions(&self, input: &LsInput, ctx: &ToolContext) -> Decision {
        if ctx.outside_note(&input.path).is_empty() {
            Decision::Allow
        } else {
            Decision::ask(format!("list {}, outside the workspace", input.path))
        }
    }

    async fn call(
        &self,
        input: LsInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<LsOutput>, ToolError> {
        let dir = ctx.target_path(&input.path).map_err(|e| ToolError::new(e.to_string()))?.abs();
        let canonical = std::fs::canonicalize(&dir).map_err(|e| ToolError::new(format!("{}: {e}", dir.display())))?;
        if !ctx.inside(&canonical) && ctx.grant.approved_outside.as_deref() != Some(&canonical) {
            return Err(ToolError::new(format!("{} is outside the workspace", dir.display())));
        }
        if !canonical.is_dir() {
            return Err(ToolError::new(format!("{} is not a directory", dir.display())));
        }
        let ignore = ignore_set(input.ignore.as_deref().unwrap_or_default()).map_err(|e| ToolError::new(e.message))?;
        let rules = ctx.rules.clone();
        let cancel = ctx.cancel.clone();
        let secrets = crate::fs::secret_ids();
        let in_state = crate::fs::state_dir_filter();
        tokio::task::spawn_blocking(move || {
            let walker = ignore::WalkBuilder::new(&canonical)
                .git_global(super::global_gitignore_exists())
                .sort_by_file_name(|a, b| a.cmp(b))
                .filter_entry(move |e| {
                    rules.read_denied(e.path()).is_none()
                        && !in_state(e.path())
                        && !crate::fs::secret_entry(&secrets, e)
                        && !ignore.is_match(e.file_name())
                })
                .build();
            let mut entries = Vec::new();
            let mut truncated = false;
            for entry in walker.flatten() {
                if cancel.is_cancelled() {
                    return Err(ToolError::new("cancelled"));
                }
                let Ok(rel) = entry.path().strip_prefix(&canonical) else { continue };
                if rel.as_os_str().is_empty() {
                    continue;
                }
                if entries.len() == MAX_ENTRIES {
                    truncated = true;
                    break;
                }
                let dir = entry.file_type().is_some_and(|t| t.is_dir());
                entries.push(format!("{}{}", rel.display(), if dir { "/" } else { "" }));
            }
            Ok(LsOutput { root: canonical, entries, truncated })
        })
        .await
        .map_err(|e| ToolError::new(format!("ls failed: {e}")))?
        .map(ToolOutput::new)
    }

    fn result_content(&self, out: &LsOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = format!("- {}/\n", out.root.display());
        for entry in &out.entries {
            let rel = Path::new(entry.trim_end_matches('/'));
            let depth = rel.components().count();
            let name = rel.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let slash = if entry.ends_with('/') { "/" } else { "" };
            text.push_str(&format!("{}- {name}{slash}\n", "  ".repeat(depth)));
        }
        if out.truncated {
            text.push_str(&format!(
                "[stopped at {MAX_ENTRIES} entries; list a subdirectory, or use Glob to find files by name]\n"
            ));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &LsInput) -> String {
        format!("Listing {}", input.path)
    }

    fn render_result(&self, out: &LsOutput) -> String {
        format!("Listed {} entries", out.entries.len())
    }
}

fn ignore_set(patterns: &[String]) -> Result<globset::GlobSet, ValidationError> {
    let mut set = globset::GlobSetBuilder::new();
    for p in patterns {
        set.add(globset::Glob::new(p).map_err(|e| ValidationError::new(format!("ignore: invalid glob {p:?}: {e}")))?);
    }
    set.build().map_err(|e| ValidationError::new(format!("ignore: {e}")))
}
