//! Stable JSON-RPC error codes. Clients match on the number, people read the
//! message. The standard codes come from JSON-RPC 2.0; the rest live in the
//! implementation-defined server range (-32000 to -32099).

use serde::{Deserialize, Serialize};

/// Every error code the daemon sends, with its number. The numbers never
/// change meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[repr(i32)]
pub enum ErrorCode {
    /// The line is not valid JSON (or not valid UTF-8).
    ParseError = -32700,
    /// Valid JSON, but not a JSON-RPC 2.0 request object.
    InvalidRequest = -32600,
    /// No method of that name.
    MethodNotFound = -32601,
    /// The params are missing, of the wrong shape, or name a bad value; the
    /// message names the field.
    InvalidParams = -32602,
    /// A bug in the daemon; the message says what was being done.
    InternalError = -32603,
    /// No open session has the given id.
    UnknownSession = -32001,
    /// The permission pipeline refused the request.
    PermissionDenied = -32003,
    /// A request line exceeded the size limit; the connection is closed after it.
    RequestTooLarge = -32004,
    /// The connecting process runs as a user the daemon does not serve.
    PeerNotAllowed = -32005,
    /// The daemon is shutting down and takes no new work.
    ShuttingDown = -32006,
    /// Too many requests of one connection are still running.
    TooManyRequests = -32007,
    /// An MCP server could not do what was asked of it (`mcp/get_prompt`:
    /// it failed, is not running, or answered with an error); the message
    /// says which server and why.
    McpServerFailed = -32008,
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
        self as i32
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
