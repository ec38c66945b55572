//! `agentctl top` (what every session does: `daemon/activity`,
//! `daemon/watch`) and `agentctl cron list|delete` (a session's schedules).

use super::{Failure, human_duration, now_ms, print_json, trust};
use agentd_client::Client;
use clap::Subcommand;

#[derive(Debug, Subcommand)]
pub(super) enum CronCommand {
    /// The session's schedules, soonest first
    List {
        /// The session
        session: String,
    },
    /// Delete one
    Delete {
        /// The session
        session: String,
        /// The schedule's id
        cron_id: String,
    },
}

/// `agentctl top`: `daemon/activity`, one line a session and one a call.
pub(super) async fn top(json: bool, client: &Client, follow: bool) -> Result<(), Failure> {
    use agentd_client::protocol::methods::{DaemonActivity, DaemonActivityParams};
    if follow {
        let mut watch = client.watch_activity().await?;
        while let Some(activity) = watch.next().await {
            let activity = activity.map_err(|e| Failure::Local(format!("daemon/watch: {e}")))?;
            if json {
                print_json(&activity);
            } else {
                println!();
                print_activity(&activity);
            }
        }
        return Ok(());
    }
    let activity = client.call::<DaemonActivity>(DaemonActivityParams {}).await?;
    if json {
        print_json(&activity);
        return Ok(());
    }
    print_activity(&activity);
    Ok(())
}

/// One snapshot of `daemon/activity`, a line a session and one a call.
fn print_activity(activity: &agentd_client::protocol::methods::DaemonActivityResult) {
    println!("{} session(s); the daemon holds {} MiB", activity.sessions.len(), activity.rss_kib / 1024);
    println!("{:<36}  {:<12}  {:<7}  {:>6}  CALLS JOBS CRON ASKING  CWD", "SESSION", "NAME", "STATE", "AGE");
    for s in &activity.sessions {
        println!(
            "{:<36}  {:<12}  {:<7}  {:>6}  {:>5} {:>4} {:>4} {:>6}  {}",
            s.session_id,
            trust::visible(s.name.as_deref().unwrap_or("-")),
            s.state,
            human_duration(s.age_ms),
            s.calls.len(),
            s.jobs.len(),
            s.schedules.len(),
            s.questions.len(),
            s.cwd.display()
        );
        for c in &s.calls {
            let state = if c.running { "running" } else { "queued" };
            println!("    {state:<8} {:<12} {:>6}  {}", c.name, human_duration(c.age_ms), trust::visible(&c.render));
        }
        for j in &s.jobs {
            println!("    job      {:<12}         {}", j.job_id, trust::visible(&j.command));
        }
    }
}

/// `agentctl cron list|delete`.
pub(super) async fn cron(json: bool, client: &Client, cmd: &CronCommand) -> Result<(), Failure> {
    use agentd_client::protocol::methods::{CronDelete, CronList};
    use agentd_client::protocol::schedule::{CronDeleteParams, CronListParams};
    match cmd {
        CronCommand::List { session } => {
            let list = client.call::<CronList>(CronListParams { session_id: session.clone() }).await?;
            if json {
                print_json(&list);
            } else if list.jobs.is_empty() {
                println!("no schedules");
            } else {
                for j in &list.jobs {
                    let kind = if j.recurring { "recurring" } else { "one-shot" };
                    let keep = if j.durable { "durable" } else { "session-only" };
                    let first = j.prompt.lines().next().unwrap_or_default();
                    let next = human_duration(j.next_at_ms.saturating_sub(now_ms()));
                    println!(
                        "{}  {:<15}  {kind}, {keep}  next in {next}  {}",
                        j.cron_id,
                        j.cron,
                        trust::visible(first)
                    );
                }
            }
        }
        CronCommand::Delete { session, cron_id } => {
            let params = CronDeleteParams { session_id: session.clone(), cron_id: cron_id.clone() };
            let deleted = client.call::<CronDelete>(params).await?;
            if json {
                print_json(&deleted);
            } else {
                println!("deleted {} ({})", deleted.job.cron_id, deleted.job.cron);
            }
        }
    }
    Ok(())
}
