//! The agentd wire protocol: every type that crosses the socket, every method
//! name and every error code, with no logic of its own.
//!
//! JSON-RPC 2.0 over a Unix stream socket, one JSON object per line. Params are
//! always passed by name (a JSON object). Each method is a type implementing
//! [`Method`], which ties its wire name to its params and result types; the
//! daemon registers handlers through it and the client calls through it, so
//! the two cannot disagree. The JSON Schema of the whole protocol is generated
//! from these types by [`schema::protocol_schema`] and committed as
//! `protocol/schema/agentd-protocol.json`.
#![warn(missing_docs)]

pub mod agent;
pub mod changes;
pub mod docs;
pub mod error;
pub mod hooks;
pub mod mcp;
pub mod methods;
pub mod permission;
pub mod schedule;
pub mod schema;
pub mod session;
pub mod socket;
pub mod tools;
pub mod turn;
pub mod workspace;

pub use error::ErrorCode;
pub use methods::Method;

/// What kind of JSON value `v` is, as an error message names it ("got an
/// array").
pub fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// Version of the wire protocol. Bumped when a change is not backwards
/// compatible for clients; additions (new optional fields, new methods) keep it.
pub const PROTOCOL_VERSION: u32 = 1;
