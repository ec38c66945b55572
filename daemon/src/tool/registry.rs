//! The registry of built-in tools (Claude Code's `getAllBaseTools()`): every
//! tool this build carries, looked up by name or alias. Which tools a build
//! carries is decided at compile time (cargo features): a tool left out is
//! not in the binary at all; the list itself is `tools::builtin_registry`.

use std::sync::Arc;

use super::Tool;
use super::erased::{DynTool, Erased};

/// Every built-in tool, in registration order.
#[derive(Default, Clone)]
pub struct Registry {
    tools: Vec<Arc<dyn DynTool>>,
}

/// Names model APIs accept for a tool.
pub fn is_valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl Registry {
    /// Adds a tool.
    pub fn add<T: Tool>(&mut self, tool: T) -> &mut Self {
        self.tools.push(Arc::new(Erased::new(tool)));
        self
    }

    /// Adds an already erased tool.
    pub fn add_dyn(&mut self, tool: Arc<dyn DynTool>) -> &mut Self {
        self.tools.push(tool);
        self
    }

    /// The tool `name` names, by its name or an alias.
    pub fn get(&self, name: &str) -> Option<&Arc<dyn DynTool>> {
        self.tools.iter().find(|t| t.name() == name).or_else(|| self.tools.iter().find(|t| t.answers_to(name)))
    }

    /// Every tool.
    pub fn tools(&self) -> &[Arc<dyn DynTool>] {
        &self.tools
    }
}
