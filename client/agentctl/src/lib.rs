//! `agentctl`: the command line of agentd (status, sessions, tools, calls,
//! turns with a live view and prompts, watch, respond, completions, man
//! page) and `agentctl mcp`, agentd's tools for any MCP client. Built on
//! the typed client `agentd-client`, which editors and scripts link
//! without any of this crate's terminal dependencies.

pub mod cli;
pub mod mcp_bridge;
