//! The task list tools, as Claude Code's: TaskCreate, TaskGet, TaskList and
//! TaskUpdate keep a list of tasks (subject, description, status, owner,
//! dependencies) per session, beside TodoWrite's list. Changes are context
//! modifiers (so in request order); the executor sends `tasks/changed`
//! with the whole list after each; `session/get` shows it.

use agentd_protocol::session::{TaskItem, TodoStatus};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::tool::{ProgressSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Most tasks a session keeps.
const MAX_TASKS: usize = 1000;
/// Longest subject, in characters.
const MAX_SUBJECT: usize = 500;
/// Longest description (and metadata, serialised), in bytes.
const MAX_TEXT: usize = 20_000;
/// Longest activeForm or owner, in characters.
const MAX_SHORT: usize = 500;
/// Most bytes of the whole list, serialised (it travels whole in every
/// `tasks/changed` event).
const MAX_LIST_BYTES: usize = 1024 * 1024;

/// The TaskCreate tool.
#[derive(Debug, Clone, Copy)]
pub struct TaskCreate;
/// The TaskGet tool.
#[derive(Debug, Clone, Copy)]
pub struct TaskGet;
/// The TaskList tool.
#[derive(Debug, Clone, Copy)]
pub struct TaskList;
/// The TaskUpdate tool.
#[derive(Debug, Clone, Copy)]
pub struct TaskUpdate;

/// Input of TaskCreate.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskCreateInput {
    /// A brief title for the task, in the imperative
    pub subject: String,
    /// A detailed description of what needs to be done
    pub description: String,
    /// Present continuous form shown while in progress (e.g. "Running tests")
    #[serde(default, rename = "activeForm")]
    pub active_form: Option<String>,
    /// Arbitrary metadata to attach to the task
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Input of TaskGet.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskGetInput {
    /// The ID of the task to retrieve
    #[serde(rename = "taskId")]
    pub task_id: String,
}

/// Input of TaskList (none).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskListInput {}

/// The states TaskUpdate sets (`deleted` removes the task).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UpdateStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Done.
    Completed,
    /// Removed from the list.
    Deleted,
}

/// Input of TaskUpdate.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskUpdateInput {
    /// The ID of the task to update
    #[serde(rename = "taskId")]
    pub task_id: String,
    /// New subject for the task
    #[serde(default)]
    pub subject: Option<String>,
    /// New description for the task
    #[serde(default)]
    pub description: Option<String>,
    /// Present continuous form shown while in progress
    #[serde(default, rename = "activeForm")]
    pub active_form: Option<String>,
    /// New status for the task ("deleted" removes it)
    #[serde(default)]
    pub status: Option<UpdateStatus>,
    /// Task IDs that cannot start until this one completes
    #[serde(default, rename = "addBlocks")]
    pub add_blocks: Option<Vec<String>>,
    /// Task IDs that must complete before this one can start
    #[serde(default, rename = "addBlockedBy")]
    pub add_blocked_by: Option<Vec<String>>,
    /// New owner for the task
    #[serde(default)]
    pub owner: Option<String>,
    /// Metadata keys to merge into the task (a null value deletes the key)
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, serde_json::Value>>,
}

/// What the task tools return.
#[derive(Debug, Clone, Serialize)]
pub struct TasksOutput {
    /// What to tell the model.
    pub message: String,
    /// The tasks concerned (one for TaskCreate, TaskGet and TaskUpdate,
    /// all for TaskList).
    pub tasks: Vec<TaskItem>,
}

fn status_mark(status: TodoStatus) -> &'static str {
    match status {
        TodoStatus::Pending => "pending",
        TodoStatus::InProgress => "in_progress",
        TodoStatus::Completed => "completed",
    }
}

/// A task as Claude Code 2.1.332 shows it: TaskList's line (`#1
/// [pending] subject (owner) [blocked by #2]`), or TaskGet's lines
/// (`Task #1: subject`, `Status:`, `Description:`, `Blocked by:`,
/// `Blocks:`; then its owner and metadata).
fn describe(t: &TaskItem, full: bool) -> String {
    let ids = |ids: &[String]| ids.iter().map(|i| format!("#{i}")).collect::<Vec<_>>().join(", ");
    if !full {
        let mut text = format!("#{} [{}] {}", t.id, status_mark(t.status), t.subject);
        if let Some(owner) = &t.owner {
            text.push_str(&format!(" ({owner})"));
        }
        if !t.blocked_by.is_empty() {
            text.push_str(&format!(" [blocked by {}]", ids(&t.blocked_by)));
        }
        return text;
    }
    let mut text =
        format!("Task #{}: {}\nStatus: {}\nDescription: {}", t.id, t.subject, status_mark(t.status), t.description);
    if !t.blocked_by.is_empty() {
        text.push_str(&format!("\nBlocked by: {}", ids(&t.blocked_by)));
    }
    if !t.blocks.is_empty() {
        text.push_str(&format!("\nBlocks: {}", ids(&t.blocks)));
    }
    if let Some(owner) = &t.owner {
        text.push_str(&format!("\nOwner: {owner}"));
    }
    if !t.metadata.is_empty() {
        text.push_str(&format!("\nMetadata: {}", serde_json::Value::Object(t.metadata.clone())));
    }
    text
}

fn text_result(out: &TasksOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
    vec![agentd_protocol::tools::ContentBlock::text(out.message.clone())]
}

fn check_short(field: &str, value: Option<&str>) -> Result<(), ValidationError> {
    if value.is_some_and(|v| v.chars().count() > MAX_SHORT) {
        return Err(ValidationError::new(format!("{field} is longer than {MAX_SHORT} characters")));
    }
    Ok(())
}

/// Whether `tasks` (the list after a change) still fits its budget.
fn check_list(tasks: &[TaskItem]) -> Result<(), String> {
    let bytes = serde_json::to_string(tasks).map_or(usize::MAX, |t| t.len());
    if bytes > MAX_LIST_BYTES {
        return Err(format!(
            "the task list would take {bytes} bytes, more than {MAX_LIST_BYTES}; delete or shorten tasks first"
        ));
    }
    Ok(())
}

fn check_text(
    subject: Option<&str>,
    description: Option<&str>,
    metadata: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<(), ValidationError> {
    if let Some(s) = subject {
        if s.trim().is_empty() {
            return Err(ValidationError::new("the subject is empty"));
        }
        if s.chars().count() > MAX_SUBJECT {
            return Err(ValidationError::new(format!("the subject is longer than {MAX_SUBJECT} characters")));
        }
    }
    if description.is_some_and(|d| d.len() > MAX_TEXT) {
        return Err(ValidationError::new(format!("the description is longer than {MAX_TEXT} bytes")));
    }
    if metadata.is_some_and(|m| serde_json::to_string(m).map_or(true, |t| t.len() > MAX_TEXT)) {
        return Err(ValidationError::new(format!("the metadata is larger than {MAX_TEXT} bytes")));
    }
    Ok(())
}

fn find<'a>(ctx: &'a ToolContext, id: &str) -> Option<&'a TaskItem> {
    ctx.session.tasks.iter().find(|t| t.id == id.trim().trim_start_matches('#'))
}

macro_rules! list_tool_basics {
    () => {
        fn check_permissions(&self, _input: &Self::Input, _ctx: &ToolContext) -> Decision {
            // Only the session's own list.
            Decision::Allow
        }

        fn is_destructive(&self, _input: &Self::Input) -> bool {
            false
        }

        fn result_content(&self, out: &TasksOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
            text_result(out)
        }
    };
}

impl Tool for TaskCreate {
    type Input = TaskCreateInput;
    type Output = TasksOutput;

    const NAME: &'static str = "TaskCreate";

    list_tool_basics!();

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::ADDITIVE;

    fn description(&self) -> String {
        "Creates a task in the session's task list (subject, description, optional activeForm and \
         metadata); it starts pending. Use the list for multi-step work, to track progress and \
         dependencies; update tasks with TaskUpdate as you go."
            .to_owned()
    }

    fn validate_input(&self, input: &TaskCreateInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        check_text(Some(&input.subject), Some(&input.description), input.metadata.as_ref())?;
        check_short("activeForm", input.active_form.as_deref())?;
        let mut after = ctx.session.tasks.clone();
        after.push(TaskItem {
            id: String::new(),
            subject: input.subject.clone(),
            description: input.description.clone(),
            status: TodoStatus::Pending,
            active_form: input.active_form.clone(),
            owner: None,
            blocks: Vec::new(),
            blocked_by: Vec::new(),
            metadata: input.metadata.clone().unwrap_or_default(),
        });
        check_list(&after).map_err(ValidationError::new)?;
        if ctx.session.tasks.len() >= MAX_TASKS {
            return Err(ValidationError::new(format!("the list already holds {MAX_TASKS} tasks; delete some first")));
        }
        Ok(())
    }

    async fn call(
        &self,
        input: TaskCreateInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<TasksOutput>, ToolError> {
        let number = ctx.session.last_task_id + 1;
        let task = TaskItem {
            id: number.to_string(),
            subject: input.subject.trim().to_owned(),
            description: input.description,
            status: TodoStatus::Pending,
            active_form: input.active_form.filter(|a| !a.trim().is_empty()),
            owner: None,
            blocks: Vec::new(),
            blocked_by: Vec::new(),
            metadata: input.metadata.unwrap_or_default(),
        };
        crate::hooks::Hooks::moment(&ctx, agentd_protocol::hooks::HookEvent::TaskCreated, task_hook_input(&task))
            .await
            .map_err(|why| ToolError::new(format!("the task was not created: {why}")))?;
        let message = format!("Task #{number} created successfully: {}", task.subject);
        let kept = task.clone();
        let modifier = Box::new(move |s: &mut SessionContext| {
            s.last_task_id = s.last_task_id.max(number);
            s.tasks.push(kept);
        });
        Ok(ToolOutput::with_modifier(TasksOutput { message, tasks: vec![task] }, modifier))
    }

    fn render_use(&self, input: &TaskCreateInput) -> String {
        format!("New task: {}", input.subject)
    }

    fn render_result(&self, out: &TasksOutput) -> String {
        out.tasks.first().map(|t| format!("task #{}", t.id)).unwrap_or_default()
    }
}

impl Tool for TaskGet {
    type Input = TaskGetInput;
    type Output = TasksOutput;

    const NAME: &'static str = "TaskGet";
    const CONCURRENCY_SAFE: bool = true;

    list_tool_basics!();

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Gets one task of the session's task list by its ID, with its description, dependencies and metadata."
            .to_owned()
    }

    fn validate_input(&self, input: &TaskGetInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        find(ctx, &input.task_id)
            .map(|_| ())
            .ok_or_else(|| ValidationError::new(format!("no task {:?}", input.task_id)))
    }

    async fn call(
        &self,
        input: TaskGetInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<TasksOutput>, ToolError> {
        let task = find(&ctx, &input.task_id)
            .cloned()
            .ok_or_else(|| ToolError::new(format!("no task {:?}", input.task_id)))?;
        Ok(ToolOutput::new(TasksOutput { message: describe(&task, true), tasks: vec![task] }))
    }

    fn render_use(&self, input: &TaskGetInput) -> String {
        format!("Task #{}", input.task_id)
    }

    fn render_result(&self, out: &TasksOutput) -> String {
        out.tasks.first().map(|t| t.subject.clone()).unwrap_or_default()
    }
}

impl Tool for TaskList {
    type Input = TaskListInput;
    type Output = TasksOutput;

    const NAME: &'static str = "TaskList";
    const CONCURRENCY_SAFE: bool = true;

    list_tool_basics!();

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Lists the session's tasks: ID, status, subject, owner and what blocks each.".to_owned()
    }

    async fn call(
        &self,
        _input: TaskListInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<TasksOutput>, ToolError> {
        let tasks = ctx.session.tasks.clone();
        let message = if tasks.is_empty() {
            "No tasks found".to_owned()
        } else {
            tasks.iter().map(|t| describe(t, false)).collect::<Vec<_>>().join("\n")
        };
        Ok(ToolOutput::new(TasksOutput { message, tasks }))
    }

    fn render_use(&self, _input: &TaskListInput) -> String {
        "Listing tasks".to_owned()
    }

    fn render_result(&self, out: &TasksOutput) -> String {
        format!("{} tasks", out.tasks.len())
    }
}

/// `task` with `input`'s changes, or why not.
fn updated(tasks: &[TaskItem], input: &TaskUpdateInput) -> Result<Option<TaskItem>, String> {
    let id = input.task_id.trim().trim_start_matches('#');
    let mut task = tasks.iter().find(|t| t.id == id).cloned().ok_or_else(|| format!("no task {:?}", input.task_id))?;
    if input.status == Some(UpdateStatus::Deleted) {
        return Ok(None);
    }
    for other in input.add_blocks.iter().chain(&input.add_blocked_by).flatten() {
        let other = other.trim().trim_start_matches('#');
        if other == task.id {
            return Err(format!("task #{} cannot depend on itself", task.id));
        }
        if !tasks.iter().any(|t| t.id == other) {
            return Err(format!("no task {other:?}"));
        }
    }
    if let Some(s) = &input.subject {
        task.subject = s.trim().to_owned();
    }
    if let Some(d) = &input.description {
        task.description = d.clone();
    }
    if let Some(a) = &input.active_form {
        task.active_form = Some(a.clone()).filter(|a| !a.trim().is_empty());
    }
    if let Some(o) = &input.owner {
        task.owner = Some(o.clone()).filter(|o| !o.trim().is_empty());
    }
    task.status = match input.status {
        Some(UpdateStatus::Pending) => TodoStatus::Pending,
        Some(UpdateStatus::InProgress) => TodoStatus::InProgress,
        Some(UpdateStatus::Completed) => TodoStatus::Completed,
        Some(UpdateStatus::Deleted) | None => task.status,
    };
    let add = |list: &mut Vec<String>, ids: &Option<Vec<String>>| {
        for id in ids.iter().flatten() {
            let id = id.trim().trim_start_matches('#').to_owned();
            if !list.contains(&id) {
                list.push(id);
            }
        }
    };
    add(&mut task.blocks, &input.add_blocks);
    add(&mut task.blocked_by, &input.add_blocked_by);
    for (k, v) in input.metadata.iter().flatten() {
        if v.is_null() {
            task.metadata.remove(k);
        } else {
            task.metadata.insert(k.clone(), v.clone());
        }
    }
    Ok(Some(task))
}

/// Applies a TaskUpdate to the whole list: the task, and the other side
/// of each dependency (a deleted task leaves no dangling ids).
fn apply(tasks: &mut Vec<TaskItem>, input: &TaskUpdateInput) {
    let Ok(new) = updated(tasks, input) else { return };
    let id = input.task_id.trim().trim_start_matches('#').to_owned();
    match new {
        None => {
            tasks.retain(|t| t.id != id);
            for t in tasks.iter_mut() {
                t.blocks.retain(|b| *b != id);
                t.blocked_by.retain(|b| *b != id);
            }
        }
        Some(task) => {
            for t in tasks.iter_mut() {
                if task.blocks.contains(&t.id) && !t.blocked_by.contains(&id) {
                    t.blocked_by.push(id.clone());
                }
                if task.blocked_by.contains(&t.id) && !t.blocks.contains(&id) {
                    t.blocks.push(id.clone());
                }
            }
            if let Some(slot) = tasks.iter_mut().find(|t| t.id == id) {
                *slot = task;
            }
        }
    }
}

impl Tool for TaskUpdate {
    type Input = TaskUpdateInput;
    type Output = TasksOutput;

    const NAME: &'static str = "TaskUpdate";

    list_tool_basics!();

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: true, ..agentd_protocol::tools::ToolHints::ADDITIVE };

    fn description(&self) -> String {
        "Updates a task of the session's task list: status (pending, in_progress, completed, or deleted to \
         remove it), subject, description, activeForm, owner, dependencies (addBlocks, addBlockedBy) and \
         metadata. Mark a task in_progress when you start it and completed as soon as it is done."
            .to_owned()
    }

    fn validate_input(&self, input: &TaskUpdateInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        check_text(input.subject.as_deref(), input.description.as_deref(), input.metadata.as_ref())?;
        check_short("activeForm", input.active_form.as_deref())?;
        check_short("owner", input.owner.as_deref())?;
        let task = updated(&ctx.session.tasks, input).map_err(ValidationError::new)?;
        if let Some(task) = &task
            && serde_json::to_string(&task.metadata).map_or(true, |m| m.len() > MAX_TEXT)
        {
            return Err(ValidationError::new(format!("the task's metadata would be larger than {MAX_TEXT} bytes")));
        }
        let mut after = ctx.session.tasks.clone();
        apply(&mut after, input);
        check_list(&after).map_err(ValidationError::new)
    }

    async fn call(
        &self,
        input: TaskUpdateInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<TasksOutput>, ToolError> {
        let new = updated(&ctx.session.tasks, &input).map_err(ToolError::new)?;
        let was_done = |id: &str| ctx.session.tasks.iter().any(|t| t.id == id && t.status == TodoStatus::Completed);
        if let Some(t) = new.as_ref().filter(|t| t.status == TodoStatus::Completed && !was_done(&t.id)) {
            crate::hooks::Hooks::moment(&ctx, agentd_protocol::hooks::HookEvent::TaskCompleted, task_hook_input(t))
                .await
                .map_err(|why| ToolError::new(format!("the task was not marked completed: {why}")))?;
        }
        let (message, tasks) = match &new {
            None => (format!("Updated task #{} deleted", input.task_id.trim().trim_start_matches('#')), Vec::new()),
            Some(t) => (format!("Updated task #{} {}", t.id, changed_fields(&input).join(", ")), vec![t.clone()]),
        };
        let modifier = Box::new(move |s: &mut SessionContext| apply(&mut s.tasks, &input));
        Ok(ToolOutput::with_modifier(TasksOutput { message, tasks }, modifier))
    }

    fn render_use(&self, input: &TaskUpdateInput) -> String {
        match input.status {
            Some(UpdateStatus::Deleted) => format!("Deleting task #{}", input.task_id),
            Some(s) => format!("Task #{} → {s:?}", input.task_id),
            None => format!("Updating task #{}", input.task_id),
        }
    }

    fn render_result(&self, out: &TasksOutput) -> String {
        out.message.clone()
    }
}

/// The fields a TaskUpdate names, as 2.1.332's result lists them.
fn changed_fields(input: &TaskUpdateInput) -> Vec<&'static str> {
    [
        ("subject", input.subject.is_some()),
        ("description", input.description.is_some()),
        ("activeForm", input.active_form.is_some()),
        ("owner", input.owner.is_some()),
        ("metadata", input.metadata.is_some()),
        ("status", input.status.is_some()),
        ("blocks", input.add_blocks.is_some()),
        ("blockedBy", input.add_blocked_by.is_some()),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

/// What TaskCreated and TaskCompleted hooks get of a task (Claude Code
/// 2.1.332's fields).
fn task_hook_input(task: &TaskItem) -> serde_json::Value {
    serde_json::json!({
        "task_id": task.id,
        "task_subject": task.subject,
        "task_description": task.description,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str) -> TaskItem {
        TaskItem {
            id: id.into(),
            subject: format!("task {id}"),
            description: String::new(),
            status: TodoStatus::Pending,
            active_form: None,
            owner: None,
            blocks: vec![],
            blocked_by: vec![],
            metadata: Default::default(),
        }
    }

    fn update(v: serde_json::Value) -> TaskUpdateInput {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn dependencies_have_two_sides_and_deletion_leaves_none_dangling() {
        let mut tasks = vec![task("1"), task("2"), task("3")];
        apply(&mut tasks, &update(serde_json::json!({"taskId": "1", "addBlocks": ["2"], "addBlockedBy": ["#3"]})));
        assert_eq!(tasks[0].blocks, ["2"]);
        assert_eq!(tasks[0].blocked_by, ["3"]);
        assert_eq!(tasks[1].blocked_by, ["1"]);
        assert_eq!(tasks[2].blocks, ["1"]);
        apply(&mut tasks, &update(serde_json::json!({"taskId": "1", "status": "deleted"})));
        assert_eq!(tasks.len(), 2);
        assert!(tasks.iter().all(|t| t.blocks.is_empty() && t.blocked_by.is_empty()));
        assert!(updated(&tasks, &update(serde_json::json!({"taskId": "2", "addBlocks": ["2"]}))).is_err());
        assert!(updated(&tasks, &update(serde_json::json!({"taskId": "2", "addBlocks": ["9"]}))).is_err());
        assert!(updated(&tasks, &update(serde_json::json!({"taskId": "7"}))).is_err());
    }

    #[test]
    fn metadata_merges_and_null_deletes() {
        let mut tasks = vec![task("1")];
        apply(&mut tasks, &update(serde_json::json!({"taskId": "1", "metadata": {"a": 1, "b": 2}})));
        apply(
            &mut tasks,
            &update(serde_json::json!({"taskId": "1", "metadata": {"a": null}, "status": "in_progress"})),
        );
        assert_eq!(serde_json::Value::Object(tasks[0].metadata.clone()), serde_json::json!({"b": 2}));
        assert_eq!(tasks[0].status, TodoStatus::InProgress);
    }
}
