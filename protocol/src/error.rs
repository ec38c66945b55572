//! Stable JSON-RPC error codes. Clients match on the number, people read the
//! message. The standard codes come from JSON-RPC 2.0; the rest live in the
//! implementation-defined server range (-32000 to -32099).

use serde::{Deserialize, Serialize};

/// Every error code the daemon sends. The numbers never change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The line is not valid JSON (or not valid UTF-8).
    ParseError,
    /// Valid JSON, but not a JSON-RPC 2.0 request object.
    InvalidRequest,
    /// No method of that name.
    MethodNotFound,
    /// The params are missing, of the wrong shape, or name a bad value; the
    /// message names the field.
    InvalidParams,
    /// A bug in the daemon; the message says what was being done.
    InternalError,
    /// No open session has the given id.
    UnknownSession,
    /// The permission pipeline refused the request.
    PermissionDenied,
    /// A request line exceeded the size limit; the connection is closed after it.
    RequestTooLarge,
    /// The connecting process runs as a user the daemon does not serve.
    PeerNotAllowed,
    /// The daemon is shutting down and takes no new work.
    ShuttingDown,
    /// Too many requests of one connection are still running.
    TooManyRequests,
    /// An MCP server could not do what was asked of it (`mcp/get_prompt`:
    /// it failed, is not running, or answered with an error); the message
    /// says which server and why.
    McpServerFailed,
}

impl ErrorCode {
    /// Every code, for documentation and the generated schema.
    pub const ALL: [ErrorCode; 12] = [
        ErrorCode::ParseError,
        ErrorCode::InvalidRequest,
        ErrorCode::MethodNotFound,
        ErrorCode::InvalidParams,
        ErrorCode::InternalError,
        ErrorCode::UnknownSession,
        ErrorCode::PermissionDenied,
        ErrorCode::RequestTooLarge,
        ErrorCode::PeerNotAllowed,
        ErrorCode::ShuttingDown,
        ErrorCode::TooManyRequests,
        ErrorCode::McpServerFailed,
    ];

    /// The number sent in the JSON-RPC `error.code` field.
    pub const fn code(self) -> i32 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
            ErrorCode::UnknownSession => -32001,
            ErrorCode::PermissionDenied => -32003,
            ErrorCode::RequestTooLarge => -32004,
            ErrorCode::PeerNotAllowed => -32005,
            ErrorCode::ShuttingDown => -32006,
            ErrorCode::TooManyRequests => -32007,
            ErrorCode::McpServerFailed => -32008,
        }
    }

    /// The code for a number, if it is one of ours.
    pub fn from_code(code: i32) -> Option<ErrorCode> {
        ErrorCode::ALL.into_iter().find(|c| c.code() == code)
    }

    /// A short lower-case name, as in `snake_case` serialization.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::ParseError => "parse_error",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::MethodNotFound => "method_not_found",
            ErrorCode::InvalidParams => "invalid_params",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::UnknownSession => "unknown_session",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::RequestTooLarge => "request_too_large",
            ErrorCode::PeerNotAllowed => "peer_not_allowed",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::TooManyRequests => "too_many_requests",
            ErrorCode::McpServerFailed => "mcp_server_failed",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name(), self.code())
    }
}

/// The `data` member of an `invalid_params` error: which field was wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct InvalidParamsData {
    /// Dotted path of the offending field (`cwd`, `permissions.allow[2]`), or
    /// `.` when the params as a whole are wrong.
    pub field: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_round_trip() {
        let mut seen = std::collections::HashSet::new();
        for code in ErrorCode::ALL {
            assert!(seen.insert(code.code()), "duplicate code {}", code.code());
            assert_eq!(ErrorCode::from_code(code.code()), Some(code));
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::String(code.name().to_owned()));
        }
        assert_eq!(ErrorCode::from_code(-1), None);
    }
}
