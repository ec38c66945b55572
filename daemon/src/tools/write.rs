//! Write: creates a file, or replaces one the session has read and that has
//! not changed since (by content). Atomic; keeps mode and owner; never
//! leaves the workspace; refuses to break hard links.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::fs;
use crate::permission::Decision;
use crate::tool::{ProgressSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// The Write tool.
#[derive(Debug, Clone, Copy)]
pub struct Write;

/// Input of Write.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteInput {
    /// The file to write: absolute, or relative to the workspace. Missing
    /// directories are created.
    pub file_path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// What Write did.
#[derive(Debug, Clone, Serialize)]
pub struct WriteOutput {
    /// The file.
    pub path: PathBuf,
    /// True when the file did not exist before.
    pub created: bool,
    /// Lines written.
    pub lines: usize,
    /// Bytes written.
    pub bytes: usize,
}

/// Refuses to replace a file the session has not read, or that changed
/// since (compared by content, so a touch or a no-op rewrite is no alarm).
pub fn check_unchanged(path: &fs::WsPath, session: &SessionContext) -> Result<Vec<u8>, ToolError> {
    let abs = path.abs();
    // Open first: a path that now leads out of the workspace is refused as such.
    let (bytes, _) = fs::read_all(path).map_err(|e| ToolError::new(e.to_string()))?;
    let key = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
    let Some(seen) = session.files.get(&key) else {
        return Err(ToolError::new(format!("{} has not been read in this session; Read it first", abs.display())));
    };
    if seen.hash != Some(fs::hash_bytes(&bytes)) {
        return Err(ToolError::new(format!(
            "{} has changed since it was last read (by the user or another process); Read it again first",
            abs.display()
        )));
    }
    Ok(bytes)
}

/// What Claude Code 2.1.332 adds after a write: the model has the text.
pub(crate) const CURRENT: &str = "(file state is current in your context — no need to Read it back)";

impl Tool for Write {
    type Input = WriteInput;
    type Output = WriteOutput;

    const NAME: &'static str = "Write";
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::EditsFile;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: true, ..agentd_protocol::tools::ToolHints::FAIL_CLOSED };

    fn description(&self) -> String {
        "Writes a file in the workspace, creating it (and its directories) or replacing it whole. To \
         replace an existing file you must have Read it first, and it must not have changed since. \
         Prefer Edit for changing part of a file."
            .to_owned()
    }

    fn validate_input(&self, input: &WriteInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        // Outside the workspace is a question for the permission check.
        ctx.validate_path(&input.file_path).map_err(|e| ValidationError::new(e.to_string()))?;
        if input.content.len() as u64 > fs::MAX_EDIT_BYTES {
            return Err(ValidationError::new(format!("content is larger than {} bytes", fs::MAX_EDIT_BYTES)));
        }
        Ok(())
    }

    fn permission_target(&self, input: &WriteInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.file_path.clone())
    }

    fn check_permissions(&self, input: &WriteInput, ctx: &ToolContext) -> Decision {
        Decision::ask(format!("write {}{}", input.file_path, ctx.outside_note(&input.file_path)))
    }

    async fn call(
        &self,
        input: WriteInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<WriteOutput>, ToolError> {
        let path = ctx.target_path(&input.file_path).map_err(|e| ToolError::new(e.to_string()))?;
        let session = ctx.session.clone();
        let (output, state, key) = tokio::task::spawn_blocking(move || {
            let exists = match fs::open_file(&path) {
                Ok(_) => true,
                Err(fs::FsError::NotFound { .. }) => false,
                Err(e) => return Err(ToolError::new(e.to_string())),
            };
            if exists {
                check_unchanged(&path, &session)?;
            }
            let written = ctx.write_file(&path, input.content.as_bytes()).map_err(|e| ToolError::new(e.to_string()))?;
            let abs = path.abs();
            let key = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
            let output = WriteOutput {
                path: abs,
                created: !written.replaced,
                lines: input.content.lines().count(),
                bytes: input.content.len(),
            };
            Ok((output, written.state, key))
        })
        .await
        .map_err(|e| ToolError::new(format!("write failed: {e}")))??;
        Ok(ToolOutput::with_modifier(
            output,
            Box::new(move |s| {
                s.files.insert(key, state);
            }),
        ))
    }

    fn result_content(&self, out: &WriteOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        // Claude Code 2.1.332's words.
        let text = if out.created {
            format!("File created successfully at: {} {CURRENT}", out.path.display())
        } else {
            format!("The file {} has been updated successfully. {CURRENT}", out.path.display())
        };
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &WriteInput) -> String {
        format!("Writing {}", input.file_path)
    }

    fn render_result(&self, out: &WriteOutput) -> String {
        let lines = crate::tools::counted(out.lines, "line", "lines");
        format!("{} {} ({lines})", if out.created { "Created" } else { "Wrote" }, out.path.display())
    }
}
