//! Type erasure (the role of Claude Code's `buildTool`): any [`Tool`]
//! becomes an `Arc<dyn DynTool>` the registry can hold. JSON input is parsed
//! into the tool's `Input` once, into a [`PreparedCall`] that answers the
//! per-input questions (concurrency safety, permissions, render text) and
//! then runs.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;

use agentd_protocol::tools::{ContentBlock, ToolDefinition};
use futures_util::FutureExt;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

use super::context::{ContextModifier, ProgressReporter, ProgressSink, ToolContext};
use super::{InterruptBehavior, Tool, ValidationError};
use crate::permission::Decision;

/// A boxed future that can cross tasks.
pub type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// The model's input does not fit the tool's schema. The message names the
/// field and what was expected, so the model can fix it and retry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid input for {tool}: {detail}")]
pub struct InputError {
    /// The tool.
    pub tool: String,
    /// Dotted path of the bad field, or `.` for the input as a whole.
    pub field: String,
    /// The field and what was wrong with it.
    pub detail: String,
}

use crate::metrics::Failure;

/// How a finished call turned out, ready to become a `tool_result`.
pub struct CallOutcome {
    /// Content for the model.
    pub content: Vec<ContentBlock>,
    /// Whether the model should read it as a failure.
    pub is_error: bool,
    /// Short text for a UI.
    pub render: String,
    /// A change to the session, applied after the call in request order.
    pub modifier: Option<ContextModifier>,
    /// An MCP tool's `structuredContent`, checked.
    pub structured: Option<serde_json::Value>,
    /// An MCP tool's blocks as their server described them.
    pub content_meta: Box<[agentd_protocol::tools::ContentMeta]>,
    /// Why it failed, when the daemon knows better than "the tool's own
    /// error" (`is_error` without one): the metrics' error kinds.
    pub failure: Option<Failure>,
}

impl CallOutcome {
    /// The daemon's own failure (`internal error: …`).
    pub fn internal(what: &str) -> Self {
        CallOutcome::error(format!("internal error: {what}")).failed_as(Failure::Internal)
    }

    /// The same outcome, counted as failed for `why`.
    pub fn failed_as(self, why: Failure) -> Self {
        CallOutcome { failure: Some(why), ..self }
    }

    /// A call refused before it ran because of what the model sent (its
    /// input, an unknown or unloaded tool): the model reads it inside
    /// `<tool_use_error>…</tool_use_error>`, as Claude Code 2.1.332 gives
    /// such errors; the render stays plain.
    pub fn input_error(message: impl Into<String>) -> Self {
        let message = message.into();
        // What the model sent, echoed, cannot end the tag early.
        let inside = message.replace("</tool_use_error>", "&lt;/tool_use_error&gt;");
        CallOutcome {
            content: vec![ContentBlock::text(format!("<tool_use_error>{inside}</tool_use_error>"))],
            is_error: true,
            render: message,
            modifier: None,
            structured: None,
            content_meta: Box::default(),
            failure: Some(Failure::Input),
        }
    }

    /// A failed call whose message is both the content and the render text.
    pub fn error(message: impl Into<String>) -> Self {
        let message = message.into();
        CallOutcome {
            content: vec![ContentBlock::text(message.clone())],
            is_error: true,
            render: message,
            modifier: None,
            structured: None,
            content_meta: Box::default(),
            failure: None,
        }
    }
}

/// A tool with its types erased, as the registry and the executor hold it.
/// A built-in tool is one through [`Erased`], which says everything; the
/// defaults are those of a tool from an external source (an MCP server's),
/// the other kind that implements this directly: enabled, deferred behind
/// ToolSearch, never loaded up front.
pub trait DynTool: Send + Sync + 'static {
    /// The tool's name.
    fn name(&self) -> &str;
    /// Old names that still reach the tool.
    fn aliases(&self) -> &[&'static str];
    /// The description the model reads.
    fn description(&self) -> String;
    /// The JSON Schema of the input (an object schema, no `$ref`s).
    fn input_schema(&self) -> &Value;
    /// Is the tool available here?
    fn is_enabled(&self) -> bool {
        true
    }
    /// Never deferred.
    fn always_load(&self) -> bool {
        false
    }
    /// May be deferred behind ToolSearch.
    fn should_defer(&self) -> bool {
        true
    }
    /// Comes from an external source (MCP): always deferrable.
    fn is_external(&self) -> bool {
        true
    }
    /// Does a failed call cancel the other calls of its turn?
    fn cancels_siblings_on_failure(&self) -> bool {
        false
    }
    /// Callable, never offered: a tool of an earlier Claude Code version,
    /// or an MCP tool a model API would reject.
    fn is_legacy(&self) -> bool {
        false
    }
    /// What the tool does whatever its input (MCP tool annotations).
    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        agentd_protocol::tools::ToolHints::FAIL_CLOSED
    }
    /// A title and icons for people (an MCP tool's), when it has any.
    fn label(&self) -> Option<agentd_protocol::tools::ToolLabel> {
        None
    }
    /// Parses `input` into a call of this tool.
    fn prepare(&self, input: Value) -> Result<Box<dyn PreparedCall>, InputError>;
    /// One line for several calls of this tool side by side.
    fn render_grouped(&self, calls: &[&dyn PreparedCall]) -> String;

    /// The definition a model API takes.
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: self.name().to_owned(),
            description: self.description(),
            input_schema: self.input_schema().clone(),
        }
    }

    /// Does `name` name this tool, by its name or an alias?
    fn answers_to(&self, name: &str) -> bool {
        self.name() == name || self.aliases().contains(&name)
    }
}

/// One call of a tool with its input parsed. The defaults are fail-closed,
/// as [`Tool`]'s: a call that says nothing runs alone, may destroy, and
/// asks.
pub trait PreparedCall: Send + Sync {
    /// The tool's canonical name.
    fn tool_name(&self) -> &str;
    /// The typed input, for `render_grouped`.
    fn input_any(&self) -> &dyn Any;
    /// May run beside other concurrency-safe calls.
    fn is_concurrency_safe(&self) -> bool {
        false
    }
    /// Only reads.
    fn is_read_only(&self) -> bool {
        false
    }
    /// Could destroy something.
    fn is_destructive(&self) -> bool {
        true
    }
    /// First permission layer: is the input legal at all?
    fn validate(&self, _ctx: &ToolContext) -> Result<(), ValidationError> {
        Ok(())
    }
    /// Second permission layer: the tool's own view.
    fn check_permissions(&self, _ctx: &ToolContext) -> Decision {
        Decision::ask(format!("{} wants to run", self.tool_name()))
    }
    /// What an interrupt does to this call while it runs.
    fn interrupt_behavior(&self) -> InterruptBehavior {
        InterruptBehavior::Cancel
    }
    /// What the executor and the permission policy treat it as.
    fn kind(&self) -> super::ToolKind {
        super::ToolKind::Other
    }
    /// The facts of a shell command (see [`super::Tool::shell_facts`]).
    fn shell_facts(&self, _ctx: &ToolContext) -> Option<crate::permission::policy::BashFacts> {
        None
    }
    /// What permission rules look at.
    fn permission_target(&self) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::None
    }
    /// The tool whose rules also judge the call (see [`super::Tool::rule_family`]).
    fn rule_family(&self) -> Option<&'static str> {
        None
    }
    /// One line describing the call.
    fn render_use(&self) -> String;
    /// Short text when the call is refused.
    fn render_rejected(&self, reason: &str) -> String {
        format!("{} refused: {reason}", self.render_use())
    }
    /// Runs the call. A panic inside the tool becomes an error outcome.
    fn run(self: Box<Self>, ctx: ToolContext, progress: Option<ProgressReporter>) -> BoxFuture<CallOutcome>;
}

/// A [`Tool`] behind the [`DynTool`] interface.
pub struct Erased<T: Tool> {
    tool: Arc<T>,
    schema: Value,
}

impl<T: Tool> Erased<T> {
    /// Erases `tool`, generating its input schema once.
    pub fn new(tool: T) -> Self {
        Erased { tool: Arc::new(tool), schema: input_schema_for::<T::Input>() }
    }
}

/// The input schema of `I` as model APIs take it: an object schema with
/// every subschema inline (no `$ref`/`$defs`), no `$schema` or `title`,
/// shaped as Claude Code's schemas are ([`super::input::model_schema`]).
pub fn input_schema_for<I: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    super::input::model_schema(generator.into_root_schema_for::<I>().to_value())
}

/// Parses JSON into `I`, naming the field that did not fit.
pub fn parse_input<I: serde::de::DeserializeOwned>(tool: &str, input: Value) -> Result<I, InputError> {
    if !input.is_object() {
        return Err(InputError {
            tool: tool.to_owned(),
            field: ".".into(),
            detail: format!("the input must be a JSON object, got {}", agentd_protocol::json_kind(&input)),
        });
    }
    serde_path_to_error::deserialize(input).map_err(|e| {
        let field = e.path().to_string();
        let detail = if field == "." { e.inner().to_string() } else { format!("field `{field}`: {}", e.inner()) };
        InputError { tool: tool.to_owned(), field, detail }
    })
}

impl<T: Tool> DynTool for Erased<T> {
    fn name(&self) -> &str {
        T::NAME
    }

    fn aliases(&self) -> &[&'static str] {
        self.tool.aliases()
    }

    fn description(&self) -> String {
        self.tool.description()
    }

    fn input_schema(&self) -> &Value {
        &self.schema
    }

    fn is_enabled(&self) -> bool {
        self.tool.is_enabled()
    }

    fn always_load(&self) -> bool {
        self.tool.always_load()
    }

    fn should_defer(&self) -> bool {
        self.tool.should_defer()
    }

    fn is_external(&self) -> bool {
        self.tool.is_external()
    }

    fn hints(&self) -> agentd_protocol::tools::ToolHints {
        self.tool.hints()
    }

    fn cancels_siblings_on_failure(&self) -> bool {
        self.tool.cancels_siblings_on_failure()
    }

    fn is_legacy(&self) -> bool {
        self.tool.is_legacy()
    }

    fn prepare(&self, input: Value) -> Result<Box<dyn PreparedCall>, InputError> {
        let input = parse_input::<T::Input>(T::NAME, input)?;
        Ok(Box::new(TypedCall { tool: self.tool.clone(), input }))
    }

    fn render_grouped(&self, calls: &[&dyn PreparedCall]) -> String {
        let inputs: Vec<&T::Input> = calls.iter().filter_map(|c| c.input_any().downcast_ref::<T::Input>()).collect();
        self.tool.render_grouped(&inputs)
    }
}

struct TypedCall<T: Tool> {
    tool: Arc<T>,
    input: T::Input,
}

impl<T: Tool> PreparedCall for TypedCall<T> {
    fn tool_name(&self) -> &str {
        T::NAME
    }

    fn input_any(&self) -> &dyn Any {
        &self.input
    }

    fn is_concurrency_safe(&self) -> bool {
        self.tool.is_concurrency_safe(&self.input)
    }

    fn is_read_only(&self) -> bool {
        self.tool.is_read_only(&self.input)
    }

    fn is_destructive(&self) -> bool {
        self.tool.is_destructive(&self.input)
    }

    fn validate(&self, ctx: &ToolContext) -> Result<(), ValidationError> {
        self.tool.validate_input(&self.input, ctx)
    }

    fn check_permissions(&self, ctx: &ToolContext) -> Decision {
        self.tool.check_permissions(&self.input, ctx)
    }

    fn interrupt_behavior(&self) -> InterruptBehavior {
        self.tool.interrupt_behavior(&self.input)
    }

    fn permission_target(&self) -> crate::permission::PermissionTarget {
        self.tool.permission_target(&self.input)
    }

    fn rule_family(&self) -> Option<&'static str> {
        self.tool.rule_family(&self.input)
    }

    fn kind(&self) -> super::ToolKind {
        T::KIND
    }

    fn shell_facts(&self, ctx: &ToolContext) -> Option<crate::permission::policy::BashFacts> {
        self.tool.shell_facts(&self.input, ctx)
    }

    fn render_use(&self) -> String {
        self.tool.render_use(&self.input)
    }

    fn render_rejected(&self, reason: &str) -> String {
        self.tool.render_rejected(&self.input, reason)
    }

    fn run(self: Box<Self>, ctx: ToolContext, progress: Option<ProgressReporter>) -> BoxFuture<CallOutcome> {
        let TypedCall { tool, input } = *self;
        Box::pin(async move {
            let sink = ProgressSink::new(progress);
            let kept = input.clone();
            let ran = AssertUnwindSafe(tool.call(input, ctx, sink)).catch_unwind().await;
            match ran {
                Ok(Ok(out)) => CallOutcome {
                    content: tool.result_content(&out.output),
                    is_error: false,
                    render: tool.render_result(&out.output),
                    structured: tool.structured(&out.output),
                    content_meta: Box::default(),
                    modifier: out.modifier,
                    failure: None,
                },
                Ok(Err(err)) => CallOutcome {
                    content: vec![ContentBlock::text(err.message.clone())],
                    is_error: true,
                    render: tool.render_error(&kept, &err),
                    modifier: None,
                    structured: None,
                    content_meta: Box::default(),
                    failure: Some(Failure::Tool),
                },
                Err(panic) => {
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| (*s).to_owned())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    tracing::error!(tool = T::NAME, "tool panicked: {what}");
                    CallOutcome::internal(&format!("the {} tool failed unexpectedly ({what})", T::NAME))
                }
            }
        })
    }
}

#[cfg(test)]
#[path = "erased_tests.rs"]
mod tests;
