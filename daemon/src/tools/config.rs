//! Config: the model reads the session's settings, and changes the few that
//! only shape its own work (how long a command runs by default, how much
//! of its output a result keeps). Everything that decides what may run —
//! mode, rules, sandbox, network, workspace — is the user's: reading it is
//! fine, changing it is refused with the reason. Changes are context
//! modifiers (in request order) and last for the session.

use agentd_protocol::session::SessionInfo;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::permission::Decision;
use crate::tool::{ProgressSink, SessionContext, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// The Config tool.
#[derive(Debug, Clone, Copy)]
pub struct Config;

/// Input of Config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigInput {
    /// The setting's name, e.g. "bash.default_timeout_ms"
    pub setting: String,
    /// The new value; omit it to read the setting
    #[serde(default)]
    pub value: Option<Value>,
}

/// A setting's value, after the call.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigOutput {
    /// The setting.
    pub setting: String,
    /// Its value now.
    pub value: Value,
    /// Whether the call changed it.
    pub changed: bool,
}

/// Every setting Config knows: its value in `info`, and whether (and
/// within what) the model may change it.
fn read(info: &SessionInfo, setting: &str) -> Option<Value> {
    Some(match setting {
        "mode" => v(&info.mode),
        "cwd" => v(&info.cwd),
        "add_dirs" => v(&info.add_dirs),
        "permissions" => v(&info.permissions),
        "sandbox.mode" => v(&info.sandbox.mode),
        "sandbox.network" => v(&info.sandbox.network),
        "web.allow_private_network" => v(&info.web.allow_private_network),
        "max_concurrency" => v(&info.max_concurrency),
        "permission_timeout_ms" => v(&info.permission_timeout_ms),
        "sibling_cancel" => v(&info.sibling_cancel),
        "bash.default_timeout_ms" => v(&info.bash.default_timeout_ms),
        "bash.max_timeout_ms" => v(&info.bash.max_timeout_ms),
        "bash.max_output_chars" => v(&info.bash.max_output_chars),
        _ => return None,
    })
}

/// The settings, in the order they are listed.
const SETTINGS: &[&str] = &[
    "mode",
    "cwd",
    "add_dirs",
    "permissions",
    "sandbox.mode",
    "sandbox.network",
    "web.allow_private_network",
    "max_concurrency",
    "permission_timeout_ms",
    "sibling_cancel",
    "bash.default_timeout_ms",
    "bash.max_timeout_ms",
    "bash.max_output_chars",
];

/// The settings the model may change.
pub const WRITABLE: &[&str] = &["bash.default_timeout_ms", "bash.max_output_chars"];

/// Anything serialisable, as JSON.
fn v<T: Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap_or(Value::Null)
}

/// Why `value` cannot be given to `setting` in a session whose settings
/// (as the user made them) are `base`, or the value to keep.
fn check(base: &SessionInfo, setting: &str, value: &Value) -> Result<Value, String> {
    if !SETTINGS.contains(&setting) {
        return Err(format!("no setting {setting:?}; the settings are: {}", SETTINGS.join(", ")));
    }
    if !WRITABLE.contains(&setting) {
        return Err(format!(
            "{setting} decides what may run or where: it is the user's to change (in the session's options or \
             settings), not the model's{}",
            if setting == "mode" { "; EnterPlanMode and ExitPlanMode move in and out of plan mode" } else { "" }
        ));
    }
    let n = value
        .as_u64()
        .or_else(|| value.as_f64().filter(|f| f.fract() == 0.0 && *f >= 0.0).map(|f| f as u64))
        .or_else(|| value.as_str().and_then(|s| s.trim().parse().ok()))
        .ok_or_else(|| format!("{setting} takes a whole number, not {value}"))?;
    let (low, high) = match setting {
        "bash.default_timeout_ms" => (1_000.min(base.bash.default_timeout_ms), base.bash.max_timeout_ms),
        // More than the user allowed would hold more than they budgeted.
        _ => (1_000.min(base.bash.max_output_chars), base.bash.max_output_chars),
    };
    if !(low..=high).contains(&n) {
        return Err(format!("{setting} must be between {low} and {high}"));
    }
    Ok(Value::from(n))
}

impl Tool for Config {
    type Input = ConfigInput;
    type Output = ConfigOutput;

    const NAME: &'static str = "Config";

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: true, ..agentd_protocol::tools::ToolHints::ADDITIVE };

    fn description(&self) -> String {
        format!(
            "Reads a setting of this session (omit value), or changes one of those that only shape your own \
             work: {}. Settings that decide what may run (mode, permissions, sandbox, network, workspace) can \
             be read, not changed. Settings: {}.",
            WRITABLE.join(", "),
            SETTINGS.join(", ")
        )
    }

    fn validate_input(&self, input: &ConfigInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        match &input.value {
            None if read(&ctx.info, input.setting.trim()).is_none() => Err(ValidationError::new(format!(
                "no setting {:?}; the settings are: {}",
                input.setting,
                SETTINGS.join(", ")
            ))),
            None => Ok(()),
            Some(v) => check(&ctx.info, input.setting.trim(), v).map(|_| ()).map_err(ValidationError::new),
        }
    }

    fn check_permissions(&self, _input: &ConfigInput, _ctx: &ToolContext) -> Decision {
        // Reading, or a change within what the user allowed.
        Decision::Allow
    }

    fn is_read_only(&self, input: &ConfigInput) -> bool {
        input.value.is_none()
    }

    fn is_concurrency_safe(&self, input: &ConfigInput) -> bool {
        input.value.is_none()
    }

    async fn call(
        &self,
        input: ConfigInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<ConfigOutput>, ToolError> {
        let setting = input.setting.trim().to_owned();
        let Some(value) = input.value else {
            let value = read(&ctx.info, &setting).ok_or_else(|| ToolError::new(format!("no setting {setting:?}")))?;
            return Ok(ToolOutput::new(ConfigOutput { setting, value, changed: false }));
        };
        let value = check(&ctx.info, &setting, &value).map_err(ToolError::new)?;
        let (key, kept) = (setting.clone(), value.clone());
        let modifier = Box::new(move |s: &mut SessionContext| {
            s.settings.insert(key, kept);
        });
        Ok(ToolOutput::with_modifier(ConfigOutput { setting, value, changed: true }, modifier))
    }

    fn result_content(&self, out: &ConfigOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        vec![agentd_protocol::tools::ContentBlock::text(if out.changed {
            format!("{} is now {} for this session.", out.setting, out.value)
        } else {
            format!("{} = {}", out.setting, out.value)
        })]
    }

    fn render_use(&self, input: &ConfigInput) -> String {
        match &input.value {
            Some(v) => format!("Setting {} to {v}", input.setting),
            None => format!("Reading {}", input.setting),
        }
    }

    fn render_result(&self, out: &ConfigOutput) -> String {
        format!("{} = {}", out.setting, out.value)
    }
}
