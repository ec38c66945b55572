//! PDF text for Read, the daemon's side: the sandbox helper
//! (`agentd-sandbox --pdf-text`, see [`agentd_sandbox::pdf`]) parses the
//! document in a process of its own, never the daemon; this feeds it the
//! bytes, bounds its answer and time, and kills it on cancellation.

use std::path::Path;

pub use agentd_sandbox::pdf::{
    CPU_SECONDS, Extracted, MAX_PAGES, MAX_PDF_BYTES, MAX_TEXT_BYTES, MEMORY_BYTES, READERS, WALL_TIME, WHOLE_PAGES,
    Want, parse_pages,
};

/// Extracts text from `bytes` (a PDF) with the helper at `helper`,
/// bounded in memory and time, killed if `cancel` fires.
pub async fn extract(
    helper: &Path,
    bytes: Vec<u8>,
    want: Want,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Extracted, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    static PERMITS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(READERS);
    let _permit = tokio::select! {
        permit = PERMITS.acquire() => permit.map_err(|_| "the PDF reader is closed".to_owned())?,
        _ = cancel.cancelled() => return Err("cancelled".into()),
    };
    let args: [String; 3] = match want {
        Want::Range(first, last) => ["--pdf-text".into(), first.to_string(), last.to_string()],
        Want::Whole(max) => ["--pdf-text".into(), "whole".into(), max.to_string()],
    };
    let mut child = tokio::process::Command::new(helper)
        .args(args)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("the PDF reader ({}) could not start: {e}", helper.display()))?;
    let mut stdin = child.stdin.take().ok_or("no pipe to the PDF reader")?;
    let mut stdout = child.stdout.take().ok_or("no pipe from the PDF reader")?;
    let work = async {
        // The document in (the reader may stop reading early: not an error
        // here), the answer out (bounded), then its exit.
        let feed = async move {
            let _ = stdin.write_all(&bytes).await;
            drop(stdin);
        };
        let mut out = Vec::new();
        let limit = (MAX_TEXT_BYTES * 2 + 64 * 1024) as u64;
        let mut bounded = (&mut stdout).take(limit);
        let ((), read) = tokio::join!(feed, bounded.read_to_end(&mut out));
        read.map_err(|e| format!("reading the PDF reader's answer: {e}"))?;
        if out.len() as u64 >= limit {
            // Not waited for: it would block on the full pipe.
            let _ = child.start_kill();
            return Err("the PDF reader's answer is larger than a Read returns".to_owned());
        }
        let status = child.wait().await.map_err(|e| format!("the PDF reader: {e}"))?;
        Ok::<_, String>((status, out))
    };
    let (status, out) = tokio::select! {
        done = work => done?,
        _ = tokio::time::sleep(WALL_TIME) => {
            return Err(format!("the PDF took longer than {} s to read", WALL_TIME.as_secs()));
        }
        _ = cancel.cancelled() => return Err("cancelled".into()),
    };
    if !status.success() {
        use std::os::unix::process::ExitStatusExt;
        return Err(match status.signal() {
            Some(_) => format!(
                "the PDF is too large or too complex to read within the limits ({} MiB of memory, {CPU_SECONDS} s)",
                MEMORY_BYTES >> 20
            ),
            None => format!("the PDF reader failed ({status})"),
        });
    }
    serde_json::from_slice(&out).map_err(|e| format!("the PDF reader answered nonsense: {e}"))
}
