//! NotebookEdit: replaces, inserts or deletes one cell of a Jupyter
//! notebook (`.ipynb`), by cell id or index, leaving the rest of the JSON as
//! it was. The notebook must have been read and be unchanged since, as for
//! Edit. Written back the way Jupyter writes it (sorted keys, one-space
//! indent, trailing newline), atomically.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};
use crate::tools::write::check_unchanged;

/// The NotebookEdit tool.
#[derive(Debug, Clone, Copy)]
pub struct NotebookEdit;

/// What to do with the cell.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EditMode {
    /// Replace the cell's source (the default).
    #[default]
    Replace,
    /// Insert a new cell after the given one (at the start when none is given).
    Insert,
    /// Delete the cell.
    Delete,
}

/// A cell's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CellType {
    /// Code.
    Code,
    /// Markdown.
    Markdown,
}

/// Input of NotebookEdit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotebookEditInput {
    /// The notebook: absolute, or relative to the workspace. Read it first.
    pub notebook_path: String,
    /// The cell's id (as Read shows it).
    #[serde(default)]
    pub cell_id: Option<String>,
    /// The cell's index, counting from 0 (when it has no id). Earlier
    /// Claude Code versions called it `cell_number`.
    #[serde(default, alias = "cell_number", deserialize_with = "crate::tool::input::opt_usize")]
    #[schemars(extend("x-aliases" = ["cell_number"]))]
    pub cell_index: Option<usize>,
    /// The new source (replace and insert; ignored on delete).
    #[serde(default)]
    #[schemars(extend("x-required" = true))]
    pub new_source: Option<String>,
    /// The cell's type: required to insert; changes it on replace.
    #[serde(default)]
    pub cell_type: Option<CellType>,
    /// `replace` (default), `insert` or `delete`.
    #[serde(default)]
    pub edit_mode: EditMode,
}

/// What NotebookEdit did.
#[derive(Debug, Clone, Serialize)]
pub struct NotebookEditOutput {
    /// The notebook.
    pub path: PathBuf,
    /// What was done, e.g. "replaced cell 3".
    pub summary: String,
    /// Cells now.
    pub cells: usize,
}

impl Tool for NotebookEdit {
    type Input = NotebookEditInput;
    type Output = NotebookEditOutput;

    const NAME: &'static str = "NotebookEdit";
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::EditsNotebook;

    fn description(&self) -> String {
        "Edits one cell of a Jupyter notebook: replace its source, insert a new cell after it, or delete \
         it; name the cell by cell_id (or cell_index). Read the notebook first."
            .to_owned()
    }

    fn validate_input(&self, input: &NotebookEditInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        // Outside the workspace is a question for the permission check.
        ctx.validate_path(&input.notebook_path).map_err(|e| ValidationError::new(e.to_string()))?;
        if !input.notebook_path.ends_with(".ipynb") {
            return Err(ValidationError::new("notebook_path must be an .ipynb file; use Edit for other files"));
        }
        match input.edit_mode {
            EditMode::Replace | EditMode::Insert if input.new_source.is_none() => {
                Err(ValidationError::new("new_source is required to replace or insert"))
            }
            EditMode::Insert if input.cell_type.is_none() => {
                Err(ValidationError::new("cell_type is required to insert"))
            }
            EditMode::Replace | EditMode::Delete if input.cell_id.is_none() && input.cell_index.is_none() => {
                Err(ValidationError::new("name the cell with cell_id or cell_index"))
            }
            _ => Ok(()),
        }
    }

    fn permission_target(&self, input: &NotebookEditInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.notebook_path.clone())
    }

    fn check_permissions(&self, input: &NotebookEditInput, ctx: &ToolContext) -> Decision {
        Decision::ask(format!("edit {}{}", input.notebook_path, ctx.outside_note(&input.notebook_path)))
    }

    fn is_destructive(&self, input: &NotebookEditInput) -> bool {
        input.edit_mode == EditMode::Delete
    }

    async fn call(
        &self,
        input: NotebookEditInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<NotebookEditOutput>, ToolError> {
        let path = ctx.target_path(&input.notebook_path).map_err(|e| ToolError::new(e.to_string()))?;
        let session = ctx.session.clone();
        let (output, state, key) = tokio::task::spawn_blocking(move || {
            let bytes = check_unchanged(&path, &session)?;
            let abs = path.abs();
            let mut nb: Value = serde_json::from_slice(&bytes)
                .map_err(|e| ToolError::new(format!("{} is not valid notebook JSON: {e}", abs.display())))?;
            let summary = apply(&mut nb, &input).map_err(|e| ToolError::new(format!("{}: {e}", abs.display())))?;
            let cells = nb["cells"].as_array().map(Vec::len).unwrap_or(0);
            let written = ctx.write_file(&path, &serialize(&nb)).map_err(|e| ToolError::new(e.to_string()))?;
            let key = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
            Ok((NotebookEditOutput { path: abs, summary, cells }, written.state, key))
        })
        .await
        .map_err(|e| ToolError::new(format!("notebook edit failed: {e}")))??;
        Ok(ToolOutput::with_modifier(
            output,
            Box::new(move |s| {
                s.files.insert(key, state);
            }),
        ))
    }

    fn result_content(&self, out: &NotebookEditOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(format!(
            "{} in {} (it has {} cells now)",
            out.summary,
            out.path.display(),
            out.cells
        ))]
    }

    fn render_use(&self, input: &NotebookEditInput) -> String {
        format!("Editing notebook {}", input.notebook_path)
    }

    fn render_result(&self, out: &NotebookEditOutput) -> String {
        out.summary.clone()
    }
}

/// Jupyter's own layout: sorted keys (serde_json's maps are sorted), one
/// space of indent, a trailing newline.
fn serialize(nb: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    let _ = serde::Serialize::serialize(nb, &mut ser);
    out.push(b'\n');
    out
}

/// A source as nbformat stores it: a list of lines, each keeping its `\n`.
fn source_lines(source: &str) -> Value {
    Value::Array(source.split_inclusive('\n').map(|l| Value::String(l.to_owned())).collect())
}

fn apply(nb: &mut Value, input: &NotebookEditInput) -> Result<String, String> {
    let with_ids = nb["nbformat"].as_u64() == Some(4) && nb["nbformat_minor"].as_u64().unwrap_or(0) >= 5;
    let cells = nb.get_mut("cells").and_then(Value::as_array_mut).ok_or("the notebook has no cells list")?;
    let found = match (&input.cell_id, input.cell_index) {
        (Some(id), _) => Some(
            cells.iter().position(|c| c["id"].as_str() == Some(id)).ok_or_else(|| format!("no cell has id {id:?}"))?,
        ),
        (None, Some(i)) if i < cells.len() => Some(i),
        (None, Some(i)) => return Err(format!("cell index {i} is out of range (0..{})", cells.len())),
        (None, None) => None,
    };
    let kind = |t: CellType| match t {
        CellType::Code => "code",
        CellType::Markdown => "markdown",
    };
    match input.edit_mode {
        EditMode::Delete => {
            let i = found.ok_or("name the cell to delete")?;
            cells.remove(i);
            Ok(format!("deleted cell {i}"))
        }
        EditMode::Replace => {
            let i = found.ok_or("name the cell to replace")?;
            let cell = &mut cells[i];
            if let Some(t) = input.cell_type {
                cell["cell_type"] = json!(kind(t));
            }
            cell["source"] = source_lines(input.new_source.as_deref().unwrap_or(""));
            if cell["cell_type"] == "code" {
                // The old outputs belong to the old source.
                cell["outputs"] = json!([]);
                cell["execution_count"] = Value::Null;
            } else if let Some(obj) = cell.as_object_mut() {
                obj.remove("outputs");
                obj.remove("execution_count");
            }
            Ok(format!("replaced cell {i}"))
        }
        EditMode::Insert => {
            let t = input.cell_type.ok_or("cell_type is required to insert")?;
            let mut cell = json!({ "cell_type": kind(t), "metadata": {}, "source": source_lines(input.new_source.as_deref().unwrap_or("")) });
            if t == CellType::Code {
                cell["outputs"] = json!([]);
                cell["execution_count"] = Value::Null;
            }
            if with_ids {
                cell["id"] = json!(uuid::Uuid::new_v4().simple().to_string()[..8].to_owned());
            }
            let at = found.map(|i| i + 1).unwrap_or(0);
            cells.insert(at, cell);
            Ok(format!("inserted cell {at}"))
        }
    }
}
