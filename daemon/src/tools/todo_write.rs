//! TodoWrite: the model's todo list for the session (pending /
//! in_progress / completed). Each call replaces the whole list; clients
//! read it in `session/get`.

use agentd_protocol::session::{TodoItem, TodoStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Most items a list may have.
const MAX_ITEMS: usize = 100;

/// The TodoWrite tool.
#[derive(Debug, Clone, Copy)]
pub struct TodoWrite;

/// Input of TodoWrite.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoWriteInput {
    /// The whole list, in order; it replaces the previous one. Keep at most
    /// one item `in_progress`, and mark items `completed` as soon as they are.
    pub todos: Vec<TodoInputItem>,
}

/// One item as the model writes it: Claude Code's fields, plus the `id`
/// and `priority` of its earlier versions, accepted and not kept.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoInputItem {
    /// What is to be done, in the imperative ("Run the tests").
    pub content: String,
    /// The item's state.
    pub status: TodoStatus,
    /// The same in the present continuous ("Running the tests"), shown
    /// while the item is in progress.
    #[serde(default, rename = "activeForm")]
    #[schemars(extend("x-required" = true))]
    pub active_form: Option<String>,
    /// Earlier versions' (ignored).
    #[serde(default)]
    #[expect(dead_code, reason = "earlier versions' field, accepted and not kept")]
    pub id: Option<serde_json::Value>,
    /// Earlier versions' (ignored).
    #[serde(default)]
    #[expect(dead_code, reason = "earlier versions' field, accepted and not kept")]
    pub priority: Option<serde_json::Value>,
}

impl TodoInputItem {
    fn item(&self) -> TodoItem {
        TodoItem {
            content: self.content.clone(),
            status: self.status,
            active_form: self.active_form.clone().filter(|a| !a.trim().is_empty()),
        }
    }
}

/// The list as stored.
#[derive(Debug, Clone, Serialize)]
pub struct TodoWriteOutput {
    /// The list.
    pub todos: Vec<TodoItem>,
}

impl Tool for TodoWrite {
    type Input = TodoWriteInput;
    type Output = TodoWriteOutput;

    const NAME: &'static str = "TodoWrite";

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: true, ..agentd_protocol::tools::ToolHints::ADDITIVE };

    fn description(&self) -> String {
        "Keeps your todo list for this task: send the whole list each time (content, status \
         pending/in_progress/completed, and activeForm for the item in progress). Use it for work of \
         three or more steps, so the user can follow along."
            .to_owned()
    }

    fn validate_input(&self, input: &TodoWriteInput, _ctx: &ToolContext) -> Result<(), ValidationError> {
        if input.todos.len() > MAX_ITEMS {
            return Err(ValidationError::new(format!("at most {MAX_ITEMS} items")));
        }
        if let Some(i) = input.todos.iter().position(|t| t.content.trim().is_empty()) {
            return Err(ValidationError::new(format!("item {i} has no content")));
        }
        Ok(())
    }

    fn check_permissions(&self, _input: &TodoWriteInput, _ctx: &ToolContext) -> Decision {
        // It only changes the session's own list.
        Decision::Allow
    }

    async fn call(
        &self,
        input: TodoWriteInput,
        _ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<TodoWriteOutput>, ToolError> {
        let todos: Vec<TodoItem> = input.todos.iter().map(TodoInputItem::item).collect();
        let kept = todos.clone();
        Ok(ToolOutput::with_modifier(TodoWriteOutput { todos }, Box::new(move |s| s.todos = kept)))
    }

    fn result_content(&self, out: &TodoWriteOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = String::from("The todo list is updated:\n");
        for t in &out.todos {
            let mark = match t.status {
                TodoStatus::Pending => "[ ]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Completed => "[x]",
            };
            text.push_str(&format!("{mark} {}\n", t.content));
        }
        let in_progress = out.todos.iter().filter(|t| t.status == TodoStatus::InProgress).count();
        if in_progress > 1 {
            text.push_str(&format!("Note: {in_progress} items are in_progress; keep one at a time.\n"));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &TodoWriteInput) -> String {
        format!("Updating the todo list ({} items)", input.todos.len())
    }

    fn render_result(&self, out: &TodoWriteOutput) -> String {
        let done = out.todos.iter().filter(|t| t.status == TodoStatus::Completed).count();
        format!("{done}/{} done", out.todos.len())
    }
}
