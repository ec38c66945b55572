//! Running one command hook: `sh -c COMMAND` in the workspace, outside the
//! tool sandbox (it is the user's program), with the plain environment MCP
//! servers get plus `CLAUDE_PROJECT_DIR`, the moment's JSON on stdin, in
//! the process ledger, and never past its timeout.

use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

/// Most bytes of a hook's stdout kept (its JSON output); the rest is read
/// and dropped, and the output counts as cut.
pub const MAX_STDOUT: usize = 1024 * 1024;

/// Most bytes of its stderr kept.
pub const MAX_STDERR: usize = 64 * 1024;

/// How long the output may keep coming after the shell exited (a process
/// it left behind holding the pipe) before the rest is dropped.
const AFTER_EXIT: Duration = Duration::from_millis(200);

/// How a command hook ended.
#[derive(Debug, Default)]
pub struct Ran {
    /// Its exit code (`None`: it did not exit by itself).
    pub code: Option<i32>,
    /// What it printed on stdout (cut at [`MAX_STDOUT`]).
    pub stdout: String,
    /// What it printed on stderr (cut at [`MAX_STDERR`]).
    pub stderr: String,
    /// It printed more than was kept.
    pub cut: bool,
    /// It was still running at its timeout and was killed.
    pub timed_out: bool,
    /// The call it ran for was cancelled first.
    pub cancelled: bool,
    /// It could not be started.
    pub failed: Option<String>,
}

/// How to start a hook.
pub struct Program<'a> {
    /// The command line (`sh -c`), or the program when `args` are given.
    pub command: &'a str,
    /// Exec form: the program's arguments, no shell (`${CLAUDE_PROJECT_DIR}`
    /// in them is replaced).
    pub args: Option<&'a [String]>,
    /// `bash -c` rather than `sh -c`.
    pub bash: bool,
    /// Where its processes are recorded while it runs.
    pub ledger: &'a std::sync::Arc<crate::process::Ledger>,
}

/// Runs `program` with `input` (and a newline) on its stdin.
///
/// # Cancellation safety
/// Dropping the future kills the hook's process group (the process tree
/// ends everything it started when dropped).
pub async fn command(
    program: Program<'_>,
    input: &[u8],
    cwd: &Path,
    project_dir: &Path,
    timeout: Duration,
    session_env: &std::collections::BTreeMap<String, String>,
    cancel: &CancellationToken,
) -> Ran {
    let marker = format!("hook-{}", uuid::Uuid::new_v4().simple());
    let project = project_dir.display().to_string();
    let mut env = session_env.clone();
    env.insert("CLAUDE_PROJECT_DIR".to_owned(), project.clone());
    let (exe, args): (&str, Vec<String>) = match program.args {
        Some(args) => (program.command, args.iter().map(|a| a.replace("${CLAUDE_PROJECT_DIR}", &project)).collect()),
        None => (if program.bash { "bash" } else { "/bin/sh" }, vec!["-c".to_owned(), program.command.to_owned()]),
    };
    let mut tree = match crate::process::spawn_server(exe, &args, cwd, &env, &marker, program.ledger) {
        Ok(t) => t,
        Err(e) => return Ran { failed: Some(format!("cannot start {exe}: {e}")), ..Ran::default() },
    };
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (tree.child.stdin.take(), tree.child.stdout.take(), tree.child.stderr.take())
    else {
        tree.kill_now();
        return Ran { failed: Some("its pipes could not be opened".into()), ..Ran::default() };
    };
    let mut input = input.to_vec();
    input.push(b'\n');
    // A hook that never reads its stdin must not stall the rest.
    let feed = async move {
        let _ = stdin.write_all(&input).await;
        drop(stdin);
    };
    let mut ran = Ran::default();
    let (mut stdout_kept, mut stderr_kept) = (Vec::new(), Vec::new());
    let (mut out_done, mut err_done) = (None, None);
    {
        let out = bounded(stdout, MAX_STDOUT, &mut stdout_kept);
        let err = bounded(stderr, MAX_STDERR, &mut stderr_kept);
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline, out, err, feed);
        let mut fed = false;
        let mut exited_at: Option<tokio::time::Instant> = None;
        loop {
            let after_exit = async {
                match exited_at {
                    Some(at) => tokio::time::sleep_until(at + AFTER_EXIT).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut feed, if !fed => fed = true,
                o = &mut out, if out_done.is_none() => out_done = Some(o),
                e = &mut err, if err_done.is_none() => err_done = Some(e),
                code = tree.wait_shell(), if exited_at.is_none() => {
                    ran.code = code.ok();
                    exited_at = Some(tokio::time::Instant::now());
                }
                _ = after_exit => break,
                _ = &mut deadline => {
                    ran.timed_out = true;
                    break;
                }
                _ = cancel.cancelled() => {
                    ran.cancelled = true;
                    break;
                }
            }
            if exited_at.is_some() && out_done.is_some() && err_done.is_some() {
                break;
            }
        }
    }
    if ran.timed_out || ran.cancelled {
        ran.code = None;
    }
    // Whatever it left running goes with it: at once when it exited by
    // itself (one sweep), else with SIGTERM and a grace first.
    if ran.code.is_some() {
        tree.end_leftovers();
    } else {
        tree.terminate().await;
    }
    ran.stdout = String::from_utf8_lossy(&stdout_kept).into_owned();
    ran.stderr = String::from_utf8_lossy(&stderr_kept).into_owned();
    // Still reading at the end: whatever came later was not kept.
    ran.cut =
        out_done.unwrap_or(stdout_kept.len() >= MAX_STDOUT) || err_done.unwrap_or(stderr_kept.len() >= MAX_STDERR);
    ran
}

/// Reads `pipe` to its end, keeping the first `limit` bytes in `kept`;
/// whether more came.
async fn bounded(mut pipe: impl tokio::io::AsyncRead + Unpin, limit: usize, kept: &mut Vec<u8>) -> bool {
    let mut cut = false;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match pipe.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = limit.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
                cut |= n > room;
            }
        }
    }
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn run(cmd: &str, timeout_ms: u64) -> Ran {
        let dir = std::env::temp_dir();
        let ledger = crate::process::Ledger::in_memory();
        let program = Program { command: cmd, args: None, bash: false, ledger: &ledger };
        command(
            program,
            b"{\"x\":1}",
            &dir,
            Path::new("/proj"),
            Duration::from_millis(timeout_ms),
            &Default::default(),
            &CancellationToken::new(),
        )
        .await
    }

    #[tokio::test]
    async fn stdin_env_and_exit_code() {
        let ran = run("cat; echo \"$CLAUDE_PROJECT_DIR\" >&2; exit 3", 10_000).await;
        assert_eq!(ran.code, Some(3));
        assert_eq!(ran.stdout, "{\"x\":1}\n");
        assert_eq!(ran.stderr, "/proj\n");
        assert!(!ran.cut && !ran.timed_out);
    }

    #[tokio::test]
    async fn exec_form_runs_without_a_shell() {
        let args = ["${CLAUDE_PROJECT_DIR}/x".to_owned(), "$HOME".to_owned()];
        let ledger = crate::process::Ledger::in_memory();
        let program = Program { command: "echo", args: Some(&args), bash: false, ledger: &ledger };
        let dir = std::env::temp_dir();
        let (timeout, env) = (Duration::from_secs(10), Default::default());
        let ran = command(program, b"{}", &dir, Path::new("/proj"), timeout, &env, &CancellationToken::new()).await;
        assert_eq!(ran.stdout, "/proj/x $HOME\n", "no shell expands $HOME");
    }

    #[tokio::test]
    async fn a_hook_past_its_timeout_is_killed_with_its_children() {
        let started = std::time::Instant::now();
        let ran = run("sleep 30 & echo $! > /dev/stderr; sleep 30", 300).await;
        assert!(ran.timed_out && ran.code.is_none(), "{ran:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        let pid: i32 = ran.stderr.trim().parse().unwrap();
        assert!(ended_soon(pid).await, "the hook's child is gone");
    }

    #[tokio::test]
    async fn megabytes_of_output_are_cut() {
        let ran = run("head -c 5000000 /dev/zero | tr '\\0' a", 20_000).await;
        assert_eq!(ran.code, Some(0));
        assert_eq!(ran.stdout.len(), MAX_STDOUT);
        assert!(ran.cut);
    }

    #[tokio::test]
    async fn a_child_holding_the_pipe_does_not_hold_the_hook() {
        let started = std::time::Instant::now();
        let ran = run("echo '{}'; sleep 30 & echo $! >&2", 20_000).await;
        assert_eq!(ran.code, Some(0));
        assert_eq!(ran.stdout, "{}\n");
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let pid: i32 = ran.stderr.trim().parse().unwrap();
        assert!(ended_soon(pid).await, "what the hook left running is ended");
    }

    /// Whether `pid` is gone or a zombie within a few seconds: SIGKILL is
    /// sent before the hook's result, but on a loaded machine the process
    /// may still be runnable for a moment before it dies.
    async fn ended_soon(pid: i32) -> bool {
        for _ in 0..100 {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }
}

/// Posts `input` (JSON) to an http hook's URL and reads its answer as a
/// command hook's stdout: a 2xx answer's body (empty is `{}`), else a
/// non-blocking error naming the status. No redirects; within `timeout`.
///
/// # Cancellation safety
/// Dropping the future drops the request.
pub async fn post(
    target: &super::config::HttpTarget,
    input: &[u8],
    timeout: Duration,
    session_env: &std::collections::BTreeMap<String, String>,
    daemon_env: bool,
    cancel: &CancellationToken,
) -> Ran {
    crate::web::install_tls_provider();
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .timeout(timeout)
        .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION"), " (hook)"))
        .build()
    {
        Ok(c) => c,
        Err(e) => return Ran { failed: Some(format!("cannot make the HTTP client: {e}")), ..Ran::default() },
    };
    let mut request = client.post(&target.url).header("Content-Type", "application/json").body(input.to_vec());
    for (name, value) in &target.headers {
        if ["content-length", "transfer-encoding", "content-type"].iter().any(|h| name.eq_ignore_ascii_case(h)) {
            continue;
        }
        request = request.header(name, interpolate(value, &target.allowed_env, session_env, daemon_env));
    }
    let answer = async {
        let response = request.send().await.map_err(|e| crate::web::describe(&e))?;
        let status = response.status();
        let body = crate::web::body(response, cancel).await?;
        Ok::<_, String>((status, body))
    };
    let result = tokio::select! {
        r = answer => r,
        _ = cancel.cancelled() => return Ran { cancelled: true, ..Ran::default() },
    };
    match result {
        Ok((status, body)) if status.is_success() => {
            let cut = body.len() > MAX_STDOUT;
            let kept = &body[..body.len().min(MAX_STDOUT)];
            Ran { code: Some(0), stdout: String::from_utf8_lossy(kept).into_owned(), cut, ..Ran::default() }
        }
        Ok((status, _)) => Ran { code: Some(1), stderr: format!("the hook's URL answered {status}"), ..Ran::default() },
        Err(e) if e.contains("timed out") => Ran { timed_out: true, ..Ran::default() },
        Err(e) => Ran { failed: Some(e), ..Ran::default() },
    }
}

/// `$VAR` and `${VAR}` in `value` replaced: by the variable (the session's
/// command environment first, then — unless the hook is a workspace's own,
/// `daemon_env` false — the daemon's) when `allowed` names it and it is not
/// the model's or agentd's own credential, by nothing otherwise (as Claude
/// Code 2.1.332 leaves them).
fn interpolate(
    value: &str,
    allowed: &[String],
    session_env: &std::collections::BTreeMap<String, String>,
    daemon_env: bool,
) -> String {
    let own = |name: &str| {
        name.starts_with("AGENTD_")
            || ["ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"].contains(&name)
    };
    let lookup = |name: &str| -> String {
        if !allowed.iter().any(|a| a == name) || own(name) {
            return String::new();
        }
        let from_daemon = || if daemon_env { std::env::var(name).ok() } else { None };
        session_env.get(name).cloned().or_else(from_daemon).unwrap_or_default()
    };
    let mut out = String::new();
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, skip) = if let Some(braced) = after.strip_prefix('{') {
            match braced.find('}') {
                Some(end) => (&braced[..end], end + 2),
                None => ("", 0),
            }
        } else {
            let end = after.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            out.push('$');
            rest = after;
        } else {
            out.push_str(&lookup(name));
            rest = &after[skip..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod http_tests {
    use super::*;

    #[test]
    fn headers_take_only_the_variables_allowed() {
        let env: std::collections::BTreeMap<String, String> =
            [("TEAM".to_owned(), "core".to_owned()), ("OTHER".to_owned(), "x".to_owned())].into();
        let allowed = vec!["TEAM".to_owned()];
        assert_eq!(interpolate("team=$TEAM other=${OTHER}!", &allowed, &env, true), "team=core other=!");
        assert_eq!(interpolate("${TEAM}-$", &allowed, &env, true), "core-$");
        assert_eq!(interpolate("cost $5", &allowed, &env, true), "cost ");
        // A workspace's hook never reads the daemon's environment.
        let path = vec!["PATH".to_owned()];
        assert!(!interpolate("$PATH", &path, &Default::default(), true).is_empty());
        assert_eq!(interpolate("$PATH", &path, &Default::default(), false), "");
        let own = vec!["ANTHROPIC_API_KEY".to_owned()];
        let env: std::collections::BTreeMap<String, String> =
            [("ANTHROPIC_API_KEY".to_owned(), "sk".to_owned())].into();
        assert_eq!(interpolate("Bearer $ANTHROPIC_API_KEY", &own, &env, true), "Bearer ", "never the model's key");
    }
}
