//! `workspace/files`, `workspace/read` and `skills/list`: a session's
//! workspace as files and its skills, what `agentctl mcp` serves as MCP
//! resources and prompts (the checks are the session's: `session/files.rs`).

use std::path::PathBuf;

use agentd_protocol::ErrorCode;
use agentd_protocol::methods::{CronDelete, CronList, SkillsList, WorkspaceFiles, WorkspaceRead, WorkspaceTrust};
use agentd_protocol::workspace::{DEFAULT_FILES_PAGE, MAX_FILES_PAGE, SkillsListResult, WorkspaceTrustResult};
use jsonrpsee::RpcModule;

use crate::server::DaemonState;
use crate::server::rpc::{self, RpcError};

/// How long one page or one read may take (a hung network mount).
const DEADLINE: std::time::Duration = std::time::Duration::from_secs(10);

pub(super) fn register(module: &mut RpcModule<DaemonState>) {
    rpc::register_async::<WorkspaceFiles, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let limit = params.limit.unwrap_or(DEFAULT_FILES_PAGE);
        if !(1..=MAX_FILES_PAGE).contains(&limit) {
            return Err(RpcError::invalid_params("limit", format!("must be 1 to {MAX_FILES_PAGE}")));
        }
        let cursor = params.cursor.map(PathBuf::from);
        if cursor.as_ref().is_some_and(|c| c.is_absolute() || c.components().any(|p| p.as_os_str() == "..")) {
            return Err(RpcError::invalid_params("cursor", "not a cursor this method gave"));
        }
        let prefix = params.prefix.unwrap_or_default();
        blocking(move || {
            session.files(cursor.as_deref(), &prefix, limit).map_err(|e| RpcError::new(ErrorCode::PermissionDenied, e))
        })
        .await
    });
    rpc::register_async::<WorkspaceRead, _, _, _>(module, |params, state| async move {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        // Hooks may run first (each within its own timeout); the file
        // system within the deadline.
        let read = session.read_file(params.path, params.content);
        match tokio::time::timeout(DEADLINE * 7, read).await {
            Ok(done) => done.map_err(|(code, message)| match code {
                ErrorCode::InvalidParams => RpcError::invalid_params("path", message),
                code => RpcError::new(code, message),
            }),
            Err(_) => Err(RpcError::new(ErrorCode::InternalError, "the read did not finish within 70 s")),
        }
    });
    rpc::register::<SkillsList, _, _>(module, |params, state| {
        let session = state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        Ok(SkillsListResult { skills: session.skills().to_vec() })
    });
    rpc::register::<CronList, _, _>(module, |params, state| {
        state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let jobs =
            state.sessions.schedules().list(&params.session_id).iter().map(crate::schedule::Job::protocol).collect();
        Ok(agentd_protocol::schedule::CronListResult { jobs })
    });
    rpc::register::<CronDelete, _, _>(module, |params, state| {
        state.sessions.handle(&params.session_id).map_err(RpcError::from)?;
        let job = state
            .sessions
            .schedules()
            .delete(&params.session_id, &params.cron_id)
            .map_err(|why| RpcError::invalid_params("cron_id", why))?;
        Ok(agentd_protocol::schedule::CronDeleteResult { job: job.protocol() })
    });
    rpc::register_async::<WorkspaceTrust, _, _, _>(module, |params, state| async move {
        let trust = state.sessions.trust().clone();
        blocking(move || {
            let cwd = crate::session::canonical_workspace(&params.cwd).map_err(RpcError::from)?;
            if params.approve.len() + params.revoke.len() > crate::trust::MAX_APPROVALS {
                return Err(RpcError::invalid_params("approve", "too many files at once"));
            }
            trust
                .answer(&cwd, &params.approve, &params.revoke)
                .map_err(|why| RpcError::invalid_params("approve", why))?;
            let files = crate::trust::survey(&cwd, &trust, true);
            Ok(WorkspaceTrustResult { cwd, files, trust_all: trust.trusts_all() })
        })
        .await
    });
}

/// Runs `f` on the blocking pool within [`DEADLINE`].
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, RpcError> + Send + 'static) -> Result<T, RpcError> {
    match tokio::time::timeout(DEADLINE, tokio::task::spawn_blocking(f)).await {
        Ok(Ok(done)) => done,
        Ok(Err(join)) => Err(RpcError::new(ErrorCode::InternalError, format!("failed: {join}"))),
        Err(_) => Err(RpcError::new(
            ErrorCode::InternalError,
            format!("the file system did not answer within {} s", DEADLINE.as_secs()),
        )),
    }
}
