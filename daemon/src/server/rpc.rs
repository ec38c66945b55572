//! Typed method registration on jsonrpsee's `RpcModule`, and the one place
//! where errors become JSON-RPC error objects.
//!
//! Params are always by name. They are parsed with `serde_path_to_error` so an
//! `invalid_params` error names the field that was wrong, as the issue asks
//! and as a model retrying a call needs.

use std::future::Future;

use agentd_protocol::error::InvalidParamsData;
use agentd_protocol::{ErrorCode, Method};
use jsonrpsee::RpcModule;
use jsonrpsee::types::{ErrorObjectOwned, Params};
use serde::de::DeserializeOwned;

use crate::session::{RespondError, SessionError, TurnError};

/// An error answer to a request: a stable code, a message a person can act
/// on, and optional structured data.
#[derive(Debug, Clone)]
pub struct RpcError {
    /// The code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
    /// Structured detail (e.g. [`InvalidParamsData`]).
    pub data: Option<serde_json::Value>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }

    /// An `invalid_params` error about `field`.
    pub fn invalid_params(field: impl Into<String>, message: impl std::fmt::Display) -> Self {
        let field = field.into();
        let message = if field == "." {
            format!("invalid params: {message}")
        } else {
            format!("invalid params: {field}: {message}")
        };
        let data = serde_json::to_value(InvalidParamsData { field }).ok();
        RpcError { code: ErrorCode::InvalidParams, message, data }
    }
}

impl From<RpcError> for ErrorObjectOwned {
    fn from(e: RpcError) -> Self {
        ErrorObjectOwned::owned(e.code.code(), e.message, e.data)
    }
}

impl From<TurnError> for RpcError {
    fn from(e: TurnError) -> Self {
        let field = match &e {
            TurnError::TurnEnded { .. } | TurnError::UnknownTurn { .. } => "turn_id",
            TurnError::DuplicateToolUse { .. } | TurnError::EmptyToolUseId => "tool_uses",
            TurnError::UnknownToolUse { .. } => "tool_use_id",
            TurnError::Closed => return RpcError::new(ErrorCode::UnknownSession, e.to_string()),
        };
        RpcError::invalid_params(field, e)
    }
}

impl From<RespondError> for RpcError {
    fn from(e: RespondError) -> Self {
        match e {
            RespondError::UnknownRequest(_) => RpcError::invalid_params("request_id", e),
            RespondError::NoRule | RespondError::BadRule(_) => RpcError::invalid_params("rule", e),
        }
    }
}

impl From<SessionError> for RpcError {
    fn from(e: SessionError) -> Self {
        match &e {
            SessionError::Unknown { .. } => RpcError::new(ErrorCode::UnknownSession, e.to_string()),
            SessionError::Invalid { field, why } => RpcError::invalid_params(*field, why),
            SessionError::Store(_) => RpcError::new(ErrorCode::InternalError, e.to_string()),
        }
    }
}

/// Parses by-name params into `T`. Absent params count as `{}`, so methods
/// whose fields are all optional need none.
pub fn parse_params<T: DeserializeOwned>(params: &Params<'_>) -> Result<T, RpcError> {
    let raw = params.as_str().unwrap_or("{}");
    let first = raw.trim_start().as_bytes().first().copied();
    match first {
        Some(b'{') => {}
        Some(b'[') => {
            return Err(RpcError::invalid_params(".", "params must be an object of named fields, not an array"));
        }
        _ if raw.trim() == "null" => return parse_params(&Params::new(None)),
        _ => {
            return Err(RpcError::invalid_params(".", "params must be an object of named fields"));
        }
    }
    let mut de = serde_json::Deserializer::from_str(raw);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        RpcError::invalid_params(path, e.into_inner())
    })
}

/// Registers `handler` as the synchronous implementation of method `M`; it
/// runs on the connection's task, so it must not block for long.
pub fn register<M, C, F>(module: &mut RpcModule<C>, handler: F)
where
    M: Method,
    C: Send + Sync + 'static,
    F: Fn(M::Params, &C) -> Result<M::Result, RpcError> + Send + Sync + Clone + 'static,
    M::Result: Clone,
{
    let registered = module.register_method(M::NAME, move |params, ctx, _ext| {
        let parsed: M::Params = parse_params(&params).map_err(ErrorObjectOwned::from)?;
        handler(parsed, ctx).map_err(ErrorObjectOwned::from)
    });
    if let Err(e) = registered {
        // Only reachable by registering one name twice: a bug caught by every test run.
        tracing::error!(method = M::NAME, "method registration failed: {e}");
    }
}

/// Registers `handler` as the asynchronous implementation of method `M`; it
/// runs in a task of its own, so a slow call does not hold up the connection.
pub fn register_async<M, C, F, Fut>(module: &mut RpcModule<C>, handler: F)
where
    M: Method,
    C: Send + Sync + 'static,
    F: Fn(M::Params, std::sync::Arc<C>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    M::Result: Clone,
{
    register_async_conn::<M, C, _, Fut>(module, move |params, ctx, _conn| handler(params, ctx));
}

/// Like [`register_async`], the handler also given the id of the
/// connection the call came on.
pub fn register_async_conn<M, C, F, Fut>(module: &mut RpcModule<C>, handler: F)
where
    M: Method,
    C: Send + Sync + 'static,
    F: Fn(M::Params, std::sync::Arc<C>, Option<usize>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    M::Result: Clone,
{
    let registered = module.register_async_method(M::NAME, move |params, ctx, ext| {
        let handler = handler.clone();
        let parsed: Result<M::Params, RpcError> = parse_params(&params);
        let conn = ext.get::<jsonrpsee::ConnectionId>().map(|c| c.0);
        async move {
            let parsed = parsed.map_err(ErrorObjectOwned::from)?;
            handler(parsed, ctx, conn).await.map_err(ErrorObjectOwned::from)
        }
    });
    if let Err(e) = registered {
        tracing::error!(method = M::NAME, "method registration failed: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentd_protocol::session::SessionCreateParams;

    fn parse(raw: &str) -> Result<SessionCreateParams, RpcError> {
        parse_params(&Params::new(Some(raw)))
    }

    #[test]
    fn wrong_params_name_the_field() {
        let e = parse(r#"{"cwd": 5}"#).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidParams);
        assert!(e.message.contains("cwd"), "{}", e.message);
        assert_eq!(e.data.unwrap()["field"], "cwd");

        let e = parse(r#"{"cwd": "/", "permissions": {"allow": ["a", 7]}}"#).unwrap_err();
        assert_eq!(e.data.unwrap()["field"], "permissions.allow[1]");

        let e = parse(r#"{}"#).unwrap_err();
        assert!(e.message.contains("missing field `cwd`"), "{}", e.message);

        let e = parse(r#"{"cwd": "/", "cwdd": 1}"#).unwrap_err();
        assert!(e.message.contains("unknown field `cwdd`"), "{}", e.message);

        let e = parse(r#"["/"]"#).unwrap_err();
        assert!(e.message.contains("not an array"), "{}", e.message);
        assert!(parse("3").is_err());
        assert!(parse(r#"{"cwd": "/", "mode": "plan"}"#).is_ok());
    }

    #[test]
    fn absent_or_null_params_are_an_empty_object() {
        let p: Result<agentd_protocol::methods::DaemonInfoParams, _> = parse_params(&Params::new(None));
        assert!(p.is_ok());
        let p: Result<agentd_protocol::methods::DaemonInfoParams, _> = parse_params(&Params::new(Some("null")));
        assert!(p.is_ok());
    }
}
