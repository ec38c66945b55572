//! PDF text for Read: the sandbox helper (`agentd-sandbox --pdf-text`)
//! parses the document in a process of its own, never the daemon. A PDF is
//! input from anyone (a repository, a download), and a parser's bug — a
//! panic, a stack overflow, memory blown up by a crafted page — must cost
//! one Read, not the daemon.
//!
//! ```text
//! daemon ──bytes on stdin──▶ agentd-sandbox --pdf-text FIRST LAST|whole MAX
//!                             rlimits (1 GiB, 10 s CPU, no files), then
//!                             Landlock with no access at all + seccomp
//!                             (memory and stdio only), then lopdf
//!        ◀──JSON on stdout── { pages, text: [[page, text]…], encrypted, error }
//! ```
//!
//! The daemon reads the file itself (through the workspace's checks), so
//! the helper needs no file system at all; it is killed after
//! [`WALL_TIME`], and dies with the daemon.
#![allow(unsafe_code)] // setrlimit before the walls, in the single-threaded helper

use std::io::{Read as _, Write as _};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Largest PDF Read extracts text from.
pub const MAX_PDF_BYTES: u64 = 32 * 1024 * 1024;
/// Most pages one Read returns (`pages` may name at most this many).
pub const MAX_PAGES: u32 = 20;
/// Most pages a PDF may have to be read whole (without `pages`).
pub const WHOLE_PAGES: u32 = 10;
/// Memory the extracting process may map.
pub const MEMORY_BYTES: u64 = 512 * 1024 * 1024;
/// PDFs read at once, daemon-wide (each reader may take
/// [`MEMORY_BYTES`]; a turn of ten Reads must not take ten times that).
pub const READERS: usize = 2;
/// CPU time it may use.
pub const CPU_SECONDS: u64 = 10;
/// Wall-clock time it may take before it is killed.
pub const WALL_TIME: Duration = Duration::from_secs(15);
/// Most bytes a page's content may inflate to (a page of crafted operators
/// grows some 60 times when parsed, so this keeps under [`MEMORY_BYTES`]).
const PAGE_CONTENT_BYTES: usize = 4 * 1024 * 1024;
/// Most bytes any stream may inflate to while the document loads.
const STREAM_BYTES: usize = 64 * 1024 * 1024;
/// Most text returned, all pages together.
pub const MAX_TEXT_BYTES: usize = 2 * 1024 * 1024;

/// Which pages to extract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Pages `first..=last` (counted from 1).
    Range(u32, u32),
    /// Every page, if there are at most this many; else only the count.
    Whole(u32),
}

/// What the helper found.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extracted {
    /// Pages in the document.
    pub pages: u32,
    /// The text of each page extracted, by page number.
    pub text: Vec<(u32, String)>,
    /// The text was cut at the size limit (after the last page listed).
    pub cut: bool,
    /// The document needs a password.
    pub encrypted: bool,
    /// Why nothing could be extracted.
    pub error: Option<String>,
}

/// Claude Code's `pages`: one page (`"3"`) or one range (`"1-5"`), counted
/// from 1, at most [`MAX_PAGES`] of them.
pub fn parse_pages(text: &str) -> Result<(u32, u32), String> {
    let bad = || {
        format!(
            "Invalid pages parameter: {text:?}. Give one page (\"3\") or one range (\"1-5\"), not a list. To read \
             several pages or ranges, read each one separately. Pages are 1-indexed."
        )
    };
    let number = |s: &str| -> Result<u32, String> {
        let s = s.trim();
        if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    let (first, last) = match text.trim().split_once('-') {
        None => {
            let page = number(text)?;
            (page, page)
        }
        Some((_, rest)) if rest.trim().is_empty() => {
            return Err(format!(
                "Page range {text:?} exceeds maximum of {MAX_PAGES} pages per request. Please use a smaller range."
            ));
        }
        Some((a, b)) => (number(a)?, number(b)?),
    };
    if first < 1 || last < first {
        return Err(bad());
    }
    if last - first >= MAX_PAGES {
        return Err(format!(
            "Page range {text:?} exceeds maximum of {MAX_PAGES} pages per request. Please use a smaller range."
        ));
    }
    Ok((first, last))
}

/// The helper's side: `--pdf-text FIRST LAST` or `--pdf-text whole MAX`,
/// the document on stdin, the [`Extracted`] JSON on stdout.
pub fn helper_main(args: &[std::ffi::OsString]) -> std::process::ExitCode {
    let arg = |i: usize| args.get(i).and_then(|a| a.to_str()).unwrap_or_default();
    let want = match (arg(0), arg(1).parse::<u32>(), arg(0).parse::<u32>()) {
        ("whole", Ok(max), _) => Want::Whole(max),
        (_, Ok(last), Ok(first)) if first >= 1 && last >= first && last - first < MAX_PAGES => Want::Range(first, last),
        _ => {
            eprintln!("usage: agentd-sandbox --pdf-text FIRST LAST | whole MAX  (the PDF on stdin)");
            return std::process::ExitCode::from(2);
        }
    };
    // Die with the daemon; be the first the kernel's OOM killer takes.
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let _ = std::fs::write("/proc/self/oom_score_adj", "1000");
    limit_resources();
    let mut bytes = Vec::new();
    if std::io::stdin().take(MAX_PDF_BYTES + 1).read_to_end(&mut bytes).is_err() || bytes.len() as u64 > MAX_PDF_BYTES {
        return answer(&Extracted { error: Some("the PDF could not be read in whole".into()), ..Extracted::default() });
    }
    // From here on: no file, no socket, no process — only memory and the
    // pipes already open. A wall that cannot be applied is no reason to
    // fail: the limits hold, and the helper runs as the user anyway.
    let _ = wall_off();
    answer(&read_pdf(&bytes, want))
}

fn answer(extracted: &Extracted) -> std::process::ExitCode {
    let text = serde_json::to_string(extracted).unwrap_or_default();
    let mut out = std::io::stdout().lock();
    if out.write_all(text.as_bytes()).and_then(|()| out.flush()).is_err() {
        return std::process::ExitCode::FAILURE;
    }
    std::process::ExitCode::SUCCESS
}

/// Memory, CPU time, no files written, no core dump.
fn limit_resources() {
    use nix::sys::resource::{Resource, setrlimit};
    let _ = setrlimit(Resource::RLIMIT_AS, MEMORY_BYTES, MEMORY_BYTES);
    let _ = setrlimit(Resource::RLIMIT_CPU, CPU_SECONDS, CPU_SECONDS + 1);
    let _ = setrlimit(Resource::RLIMIT_FSIZE, 0, 0);
    let _ = setrlimit(Resource::RLIMIT_CORE, 0, 0);
}

/// Landlock with no access granted (no file, no TCP, no signals, no
/// abstract sockets), then a seccomp filter that lets through only what a
/// parser writing to its pipe needs.
fn wall_off() -> Result<(), String> {
    use landlock::{ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr, Scope};
    let abi = ABI::V6;
    let landlock = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.scope(Scope::Signal | Scope::AbstractUnixSocket))
        .and_then(|r| r.create())
        .and_then(|r| r.restrict_self())
        .map(|_| ())
        .map_err(|e| format!("landlock: {e}"));
    // Each wall on its own: one that fails does not take the other down.
    // Landlock set no_new_privs where it ran; seccomp needs it either way.
    let seccomp = nix::sys::prctl::set_no_new_privs()
        .map_err(|e| format!("no_new_privs: {e}"))
        .and_then(|()| seccomp_memory_only());
    landlock.and(seccomp)
}

fn seccomp_memory_only() -> Result<(), String> {
    use nix::libc;
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let allowed: &[libc::c_long] = &[
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_writev,
        libc::SYS_close,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mremap,
        libc::SYS_mprotect,
        libc::SYS_madvise,
        libc::SYS_brk,
        libc::SYS_futex,
        libc::SYS_getrandom,
        libc::SYS_clock_gettime,
        libc::SYS_sched_yield,
        libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigaction,
        libc::SYS_sigaltstack,
        libc::SYS_gettid,
        libc::SYS_getpid,
        libc::SYS_tgkill,
        libc::SYS_exit,
        libc::SYS_exit_group,
    ];
    let rules = allowed.iter().map(|nr| (*nr, Vec::new())).collect();
    let arch: TargetArch = std::env::consts::ARCH.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    let filter = SeccompFilter::new(rules, SeccompAction::Errno(libc::EPERM as u32), SeccompAction::Allow, arch)
        .map_err(|e| format!("seccomp: {e}"))?;
    let program: seccompiler::BpfProgram = filter.try_into().map_err(|e| format!("seccomp: {e:?}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))
}

/// The document's pages and the text of those wanted.
fn read_pdf(bytes: &[u8], want: Want) -> Extracted {
    let fail = |why: String| Extracted { error: Some(why), ..Extracted::default() };
    if !bytes.starts_with(b"%PDF-") && !bytes[..bytes.len().min(1024)].windows(5).any(|w| w == b"%PDF-") {
        return fail("the file is not a valid PDF (missing %PDF- header)".into());
    }
    let options = lopdf::LoadOptions::with_max_decompressed_size(STREAM_BYTES);
    let doc = match lopdf::Document::load_mem_with_options(bytes, options) {
        Ok(doc) => doc,
        Err(lopdf::Error::InvalidPassword) => return Extracted { encrypted: true, ..Extracted::default() },
        Err(e) => return fail(format!("the PDF file is corrupted or invalid ({e})")),
    };
    if doc.is_encrypted() {
        return Extracted { encrypted: true, ..Extracted::default() };
    }
    let numbers: Vec<u32> = doc.get_pages().keys().copied().collect();
    let pages = numbers.len() as u32;
    let (first, last) = match want {
        Want::Whole(max) if pages > max => return Extracted { pages, ..Extracted::default() },
        Want::Whole(_) => (1, pages),
        Want::Range(first, _) if first > pages => return Extracted { pages, ..Extracted::default() },
        Want::Range(first, last) => (first, last.min(pages)),
    };
    let mut out = Extracted { pages, ..Extracted::default() };
    let mut total = 0;
    for page in first..=last {
        let text = match doc.extract_text_with_limit(&[page], PAGE_CONTENT_BYTES) {
            // Control characters (a crafted font's) would grow sixfold as
            // JSON: spaces instead, but for lines and tabs.
            Ok(text) => text.chars().map(|c| if c.is_control() && c != '\n' && c != '\t' { ' ' } else { c }).collect(),
            Err(e) => format!("[the text of this page could not be extracted: {e}]"),
        };
        let room = MAX_TEXT_BYTES - total;
        if text.len() > room {
            // The page as far as it fits, cut on a character boundary.
            let mut cut = room;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            out.text.push((page, text[..cut].to_owned()));
            out.cut = true;
            break;
        }
        total += text.len();
        out.text.push((page, text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_one_page_or_one_range_of_at_most_twenty() {
        assert_eq!(parse_pages("3"), Ok((3, 3)));
        assert_eq!(parse_pages(" 1 - 5 "), Ok((1, 5)));
        assert_eq!(parse_pages("10-29"), Ok((10, 29)));
        for bad in ["", "0", "5-3", "1,3", "1-3,5", "a", "-2", "1--2", "1234567890", "2.5"] {
            assert!(parse_pages(bad).unwrap_err().contains("Invalid pages parameter"), "{bad:?}");
        }
        for long in ["1-21", "5-", "1-999999999"] {
            assert!(parse_pages(long).unwrap_err().contains("exceeds maximum of 20 pages"), "{long:?}");
        }
    }
}
