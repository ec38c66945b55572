//! A session's schedules (CronCreate's), for clients: `cron/list` and
//! `cron/delete` (`agentctl cron list|delete`). Firings arrive as
//! `cron/fired` events.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Params of `cron/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronListParams {
    /// The session.
    pub session_id: String,
}

/// One schedule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CronJob {
    /// Its id.
    pub cron_id: String,
    /// The 5-field cron expression (the daemon's local time).
    pub cron: String,
    /// What a firing enqueues.
    pub prompt: String,
    /// Fires at every match until deleted or 30 days old; else once.
    pub recurring: bool,
    /// Survives daemon restarts.
    pub durable: bool,
    /// Its next firing, ms since the Unix epoch.
    pub next_at_ms: u64,
}

/// Result of `cron/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CronListResult {
    /// Soonest first.
    pub jobs: Vec<CronJob>,
}

/// Params of `cron/delete`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CronDeleteParams {
    /// The session.
    pub session_id: String,
    /// The schedule.
    pub cron_id: String,
}

/// Result of `cron/delete`: the schedule deleted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CronDeleteResult {
    /// What was deleted.
    pub job: CronJob,
}
