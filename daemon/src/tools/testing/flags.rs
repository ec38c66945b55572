//! Test builds only: three tools that differ only in the flags the
//! registry's filter and deferral rules read — a deferrable tool, a
//! deferrable tool that must always load, and a tool that is not enabled.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput};

/// Input of the flag tools: nothing.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoInput {}

macro_rules! flag_tool {
    ($(#[$doc:meta])* $ty:ident, $name:literal, defer: $defer:expr, always: $always:expr, enabled: $enabled:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $ty;

        impl Tool for $ty {
            type Input = NoInput;
            type Output = String;

            const NAME: &'static str = $name;

            fn description(&self) -> String {
                concat!("A test tool: ", $name, ".").to_owned()
            }

            fn check_permissions(&self, _input: &NoInput, _ctx: &ToolContext) -> Decision {
                Decision::Allow
            }

            fn should_defer(&self) -> bool {
                $defer
            }

            fn always_load(&self) -> bool {
                $always
            }

            fn is_enabled(&self) -> bool {
                $enabled
            }

            async fn call(&self, _input: NoInput, _ctx: ToolContext, _p: ProgressSink) -> Result<ToolOutput<String>, ToolError> {
                Ok(ToolOutput::new(concat!($name, " ran").to_owned()))
            }

            fn render_use(&self, _input: &NoInput) -> String {
                concat!("Running ", $name).to_owned()
            }

            fn render_result(&self, output: &String) -> String {
                output.clone()
            }
        }
    };
}

flag_tool!(
    /// Deferrable.
    TestDeferred, "TestDeferred", defer: true, always: false, enabled: true
);
flag_tool!(
    /// Deferrable, but `always_load` wins.
    TestAlwaysLoad, "TestAlwaysLoad", defer: true, always: true, enabled: true
);
flag_tool!(
    /// Not enabled: never offered.
    TestDisabled, "TestDisabled", defer: false, always: false, enabled: false
);
