//! Grep: searches file contents in-process with ripgrep's crates
//! (`grep-regex`, `grep-searcher`, the `ignore` parallel walker), configured
//! like ripgrep (no mmap while walking, `\n` as the line terminator, one
//! searcher per thread). Results are sorted by path; a deadline returns
//! what was found so far, saying so.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::permission::Decision;
use crate::sync::MutexExt;
use crate::tool::memo::Memo;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Default time a search may take before it returns partial results.
const DEFAULT_TIMEOUT_MS: u64 = 20_000;
/// Characters of content output kept.
const MAX_CONTENT_CHARS: usize = 30_000;
/// Lines collected at most (content mode), whatever head_limit says.
const MAX_COLLECTED_LINES: usize = 100_000;
/// Entries returned when the call gives no `head_limit` (Claude Code's default).
const DEFAULT_HEAD_LIMIT: usize = 250;
/// Longest line shown, in bytes; a longer one is replaced by a note, as
/// Claude Code's `rg --max-columns 500` does.
const MAX_COLUMNS: usize = 500;

/// The Grep tool.
#[derive(Debug, Clone, Copy)]
pub struct Grep;

/// What Grep returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Paths of files with a match (the default).
    #[default]
    FilesWithMatches,
    /// Matching lines (with context if asked).
    Content,
    /// Matches per file.
    Count,
}

/// Input of Grep.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepInput {
    /// A regular expression (Rust regex syntax, like ripgrep's).
    pub pattern: String,
    /// File or directory to search (default the workspace).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files matching this glob (rg --glob), e.g. `*.rs` or
    /// `**/*.{ts,tsx}`; several separated by commas or spaces; `!` excludes.
    #[serde(default)]
    pub glob: Option<String>,
    /// Only files of this type, as ripgrep names them (`rust`, `py`, `js`, …).
    #[serde(default, rename = "type")]
    pub file_type: Option<String>,
    /// Case-insensitive search.
    #[serde(default, deserialize_with = "crate::tool::input::flag", rename = "-i")]
    pub case_insensitive: bool,
    /// Show line numbers in content mode (default true).
    #[serde(default, deserialize_with = "crate::tool::input::opt_flag", rename = "-n")]
    pub line_numbers: Option<bool>,
    /// Lines of context after each match (content mode).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize", rename = "-A")]
    pub after: Option<usize>,
    /// Lines of context before each match (content mode).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize", rename = "-B")]
    pub before: Option<usize>,
    /// Lines of context before and after each match (content mode).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize", rename = "-C", alias = "context")]
    #[schemars(extend("x-aliases" = ["context"]))]
    pub context: Option<usize>,
    /// Let the pattern span lines (`.` matches newlines).
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub multiline: bool,
    /// Only the matched parts, each on its own line (content mode).
    #[serde(default, deserialize_with = "crate::tool::input::flag", rename = "-o")]
    pub only_matching: bool,
    /// `files_with_matches` (default), `content` or `count`.
    #[serde(default)]
    pub output_mode: OutputMode,
    /// Return at most this many entries (files, lines or counts); default
    /// 250, 0 for all.
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub head_limit: Option<usize>,
    /// Skip this many entries first (default 0).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub offset: Option<usize>,
    /// Stop after this many milliseconds and return what was found (default 20000).
    #[serde(default, deserialize_with = "crate::tool::input::opt_u64")]
    pub timeout_ms: Option<u64>,
}

/// What Grep found.
#[derive(Debug, Clone, Serialize)]
pub struct GrepOutput {
    /// Entries: paths, `path:line:text` lines, or `path:count`.
    pub entries: Vec<String>,
    /// Entries left out by head_limit/offset.
    pub omitted: usize,
    /// All entries found (files, lines or counts), before any limit.
    pub total: usize,
    /// Files searched.
    pub files_searched: usize,
    /// Files skipped because a line (in multiline mode, the file) is over
    /// [`MAX_LINE_BYTES`] or they could not be read.
    pub skipped_long_lines: usize,
    /// Set when the deadline cut the search: where it was.
    pub cut: Option<String>,
    /// The content was cut at the output limit.
    pub truncated: bool,
    /// Files were asked for (`files_with_matches`), not lines or counts.
    #[serde(skip)]
    pub files_mode: bool,
    /// The head_limit and offset that applied.
    #[serde(skip)]
    pub limit: usize,
    #[serde(skip)]
    pub offset: usize,
}

impl Tool for Grep {
    type Input = GrepInput;
    type Output = GrepOutput;

    const NAME: &'static str = "Grep";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::Searches;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Searches file contents with a regular expression (ripgrep's engine, in-process). Respects \
         .gitignore. output_mode: files_with_matches (default, paths), content (matching lines; -A/-B/-C \
         for context, -n for line numbers) or count. Narrow with glob or type; -i ignores case; \
         multiline lets a pattern span lines. Use it instead of grep or rg in Bash."
            .to_owned()
    }

    fn validate_input(&self, input: &GrepInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        if let Some(p) = &input.path {
            // Outside the workspace is a question for the permission check.
            ctx.validate_path(p).map_err(|e| ValidationError::new(e.to_string()))?;
        }
        matcher(input).map_err(|e| ValidationError::new(e.to_string()))?;
        Ok(())
    }

    fn permission_target(&self, input: &GrepInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.path.clone().unwrap_or_else(|| ".".into()))
    }

    fn check_permissions(&self, input: &GrepInput, ctx: &ToolContext) -> Decision {
        match &input.path {
            Some(p) if !ctx.outside_note(p).is_empty() => Decision::ask(format!("search {p}, outside the workspace")),
            _ => Decision::Allow,
        }
    }

    async fn call(
        &self,
        input: GrepInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<GrepOutput>, ToolError> {
        let target = match &input.path {
            Some(p) => ctx.target_path(p).map_err(|e| ToolError::new(e.to_string()))?.abs(),
            None => ctx.cwd.to_path_buf(),
        };
        let canonical =
            crate::fs::canonical(&target).map_err(|e| ToolError::new(format!("{}: {e}", target.display())))?;
        if !ctx.inside(&canonical) && ctx.grant.approved_outside.as_deref() != Some(&canonical) {
            return Err(ToolError::new(format!("{} is outside the workspace", target.display())));
        }
        let cancel = ctx.cancel.clone();
        let rules = ctx.rules.clone();
        let cwd = ctx.cwd.clone();
        // A small tree is searched here, with no thread started; a larger
        // one on the blocking pool by the parallel walker.
        if let Some(found) = search_small(&canonical, &cwd, &input, rules.clone())? {
            return Ok(ToolOutput::new(found));
        }
        tokio::task::spawn_blocking(move || search(&canonical, &cwd, &input, &cancel, rules))
            .await
            .map_err(|e| ToolError::new(format!("search failed: {e}")))?
            .map(ToolOutput::new)
    }

    fn result_content(&self, out: &GrepOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        let mut text = String::new();
        for e in &out.entries {
            text.push_str(e);
            text.push('\n');
        }
        // Claude Code 2.1.332's words for nothing found and for a page.
        if out.entries.is_empty() && out.cut.is_none() {
            text.push_str(match (out.offset > 0 && out.total > 0, out.files_mode) {
                (true, _) => "No entries at this offset\n",
                (false, true) => "No files found\n",
                (false, false) => "No matches found\n",
            });
        }
        if out.truncated {
            text.push_str(&format!(
                "[output cut at 30000 characters after {} of {} entries; narrow the search or use head_limit/offset]\n",
                out.entries.len(),
                out.total
            ));
        }
        if out.omitted > 0 || (out.offset > 0 && !out.entries.is_empty()) {
            let limit = if out.limit == usize::MAX { "none".to_owned() } else { out.limit.to_string() };
            text.push_str(&format!(
                "[Showing results with pagination = limit: {limit}, offset: {}; {} more entries: use offset to see \
                 them]\n",
                out.offset, out.omitted
            ));
        }
        if out.skipped_long_lines > 0 {
            text.push_str(&format!(
                "[{} files were not searched: they could not be read, or hold a line over {} MiB]\n",
                out.skipped_long_lines,
                MAX_LINE_BYTES / (1024 * 1024)
            ));
        }
        if let Some(cut) = &out.cut {
            text.push_str(&format!(
                "[the search stopped early (its deadline, or 100000 lines collected) after {} files ({cut}); these results are partial]\n",
                out.files_searched
            ));
        }
        vec![agentd_protocol::tools::ContentBlock::text(text)]
    }

    fn render_use(&self, input: &GrepInput) -> String {
        format!("Searching for {:?}", input.pattern)
    }

    fn render_result(&self, out: &GrepOutput) -> String {
        format!(
            "{} in {} searched",
            crate::tools::counted(out.total, "result", "results"),
            crate::tools::counted(out.files_searched, "file", "files")
        )
    }
}

/// Compiled patterns, by pattern and flags.
static MATCHERS: std::sync::LazyLock<Memo<(String, bool, bool), grep_regex::RegexMatcher>> =
    std::sync::LazyLock::new(|| Memo::new(64));
/// File-type sets, by name.
static TYPES: std::sync::LazyLock<Memo<String, ignore::types::Types>> = std::sync::LazyLock::new(|| Memo::new(32));

fn matcher(input: &GrepInput) -> Result<grep_regex::RegexMatcher, grep_regex::Error> {
    let key = (input.pattern.clone(), input.case_insensitive, input.multiline);
    MATCHERS.get_or_try(key, || {
        let mut b = RegexMatcherBuilder::new();
        b.case_insensitive(input.case_insensitive);
        if input.multiline {
            b.multi_line(true).dot_matches_new_line(true);
        } else {
            // Without it, patterns like `\s+` take a slow path.
            b.line_terminator(Some(b'\n'));
        }
        b.build(&input.pattern)
    })
}

/// One file's findings.
struct FileHits {
    path: PathBuf,
    lines: Vec<String>,
    count: usize,
}

struct Collect<'a> {
    mode: OutputMode,
    numbers: bool,
    multiline: bool,
    /// `-o`: the matched parts only.
    only: bool,
    matcher: &'a grep_regex::RegexMatcher,
    path: &'a Path,
    hits: FileHits,
    deadline: Instant,
    /// Lines collected by every thread so far.
    collected: &'a std::sync::atomic::AtomicUsize,
    /// Where binary data (a NUL) was found, if it was.
    binary_at: Option<u64>,
    /// The file was named by the call (rg then searches binary data).
    explicit: bool,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, searcher: &Searcher, m: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        // A huge file must not outlast the deadline or fill memory.
        if Instant::now() > self.deadline
            || self.collected.load(std::sync::atomic::Ordering::Relaxed) > MAX_COLLECTED_LINES
        {
            return Ok(false);
        }
        // Multi-line matches are counted one by one (the searcher joins
        // adjacent ones), as rg counts them; lines otherwise — also with
        // `multiline` when the pattern cannot match a newline, where the
        // searcher (and rg) search line by line.
        let spans = self.multiline && searcher.multi_line_with_matcher(self.matcher);
        self.hits.count += if spans { self.matches_in(m.bytes()).max(1) } else { 1 };
        match self.mode {
            OutputMode::FilesWithMatches => return Ok(false),
            OutputMode::Count => {}
            OutputMode::Content => {
                if let (Some(at), true) = (self.binary_at, self.hits.lines.is_empty()) {
                    // A named binary file: rg says it matches, shows nothing.
                    self.hits.lines.push(format!(
                        "{}: binary file matches (found \"\\0\" byte around offset {at})",
                        self.path.display()
                    ));
                    return Ok(false);
                }
                if self.only {
                    self.matched_parts(m);
                } else {
                    self.line(':', m.line_number(), m.bytes(), "matching")
                }
            }
        }
        Ok(true)
    }

    fn context(&mut self, _s: &Searcher, c: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        if self.mode == OutputMode::Content {
            self.line('-', c.line_number(), c.bytes(), "context");
        }
        Ok(true)
    }

    fn context_break(&mut self, _s: &Searcher) -> Result<bool, std::io::Error> {
        if self.mode == OutputMode::Content && !self.hits.lines.is_empty() {
            self.hits.lines.push("--".to_owned());
        }
        Ok(true)
    }

    /// A walked file stops here (rg's quit). A named one is searched on,
    /// as rg does: a count counts every match; shown lines stop at the first
    /// match on a line with binary data, which says so instead (before any
    /// line was shown: at the first match, in `matched`).
    fn binary_data(&mut self, _s: &Searcher, offset: u64) -> Result<bool, std::io::Error> {
        self.binary_at = Some(offset);
        if !self.explicit {
            return Ok(false);
        }
        if self.mode == OutputMode::Content && !self.hits.lines.is_empty() {
            self.hits.lines.push(format!(
                "{}: binary file matches (found \"\\0\" byte around offset {offset})",
                self.path.display()
            ));
            return Ok(false);
        }
        Ok(true)
    }
}

impl Collect<'_> {
    fn matches_in(&self, bytes: &[u8]) -> usize {
        use grep_matcher::Matcher;
        let mut n = 0;
        let _ = self.matcher.find_iter(bytes, |_| {
            n += 1;
            true
        });
        n
    }

    /// `-o`: each match of `m` (empty ones too), on the line it starts on
    /// (the lines of a multi-line one each numbered), as rg prints them.
    fn matched_parts(&mut self, m: &SinkMatch<'_>) {
        use grep_matcher::Matcher;
        // Searched without the last line end, as rg does (an empty match
        // there is none).
        let bytes = m.bytes().strip_suffix(b"\n").unwrap_or(m.bytes());
        let mut parts = Vec::new();
        let _ = self.matcher.find_iter(bytes, |r| {
            parts.push((r.start(), r.end()));
            true
        });
        for (start, end) in parts {
            let before = bytes[..start].iter().filter(|&&b| b == b'\n').count() as u64;
            // A match ending in line ends is shown without them.
            let mut part = &bytes[start..end];
            while let Some(rest) = part.strip_suffix(b"\n") {
                part = rest;
            }
            self.line(':', m.line_number().map(|n| n + before), part, "matching");
        }
    }

    /// Adds the lines of `bytes` (one line, or several for a multi-line
    /// match), each as rg prints it: `\r` kept, a line over
    /// [`MAX_COLUMNS`] bytes replaced by a note.
    fn line(&mut self, sep: char, number: Option<u64>, bytes: &[u8], kind: &str) {
        let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
        for (i, l) in body.split(|&b| b == b'\n').enumerate() {
            let text = if l.len() > MAX_COLUMNS {
                format!("[Omitted long {kind} line]").into()
            } else {
                String::from_utf8_lossy(l)
            };
            let line = match (self.numbers, number) {
                (true, Some(n)) => format!("{}{sep}{}{sep}{text}", self.path.display(), n + i as u64),
                _ => format!("{}{sep}{text}", self.path.display()),
            };
            self.hits.lines.push(line);
            self.collected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// The `glob` field as Claude Code reads it: split on whitespace, then on
/// commas unless the piece has braces (`*.{ts,tsx}` is one glob).
fn glob_patterns(glob: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for piece in glob.split_whitespace() {
        if piece.contains('{') && piece.contains('}') {
            out.push(piece);
        } else {
            out.extend(piece.split(',').filter(|p| !p.is_empty()));
        }
    }
    out
}

/// What every file of one search is searched with.
struct Plan<'a> {
    input: &'a GrepInput,
    matcher: grep_regex::RegexMatcher,
    /// The call named a file (rg then searches it even when binary).
    explicit: bool,
    before: usize,
    after: usize,
    numbers: bool,
    deadline: Instant,
    /// The directory searched (the named file's, for a file), held open
    /// from the start: each file is opened beneath it, so a directory
    /// swapped for a link during the walk cannot lead a read elsewhere.
    root: Option<(PathBuf, std::os::fd::OwnedFd)>,
}

impl Plan<'_> {
    fn searcher(&self) -> Searcher {
        SearcherBuilder::new()
            .line_number(true)
            .before_context(self.before)
            .after_context(self.after)
            .multi_line(self.input.multiline)
            .heap_limit(Some(MAX_LINE_BYTES))
            .binary_detection(if self.explicit {
                BinaryDetection::convert(b'\0')
            } else {
                BinaryDetection::quit(b'\0')
            })
            .build()
    }

    /// Opens one file beneath the searched directory (no secret file,
    /// nothing but a regular file): it and its size.
    fn open(&self, path: &Path) -> Result<(std::fs::File, u64), std::io::Error> {
        let Some((root, root_fd)) = &self.root else {
            return Err(std::io::Error::other("the searched directory could not be opened"));
        };
        let rel = path.strip_prefix(root).map_err(|_| std::io::Error::other("outside the searched directory"))?;
        crate::fs::open_read_beneath(root_fd, rel)
    }

    /// Searches one file [`Plan::open`] opened. `Err` when it has a line
    /// over [`MAX_LINE_BYTES`] (or cannot be read).
    fn file(
        &self,
        searcher: &mut Searcher,
        path: &Path,
        (mut file, size): (std::fs::File, u64),
        collected: &std::sync::atomic::AtomicUsize,
    ) -> Result<Option<FileHits>, std::io::Error> {
        let mut sink = Collect {
            mode: self.input.output_mode,
            numbers: self.numbers,
            multiline: self.input.multiline,
            only: self.input.only_matching,
            matcher: &self.matcher,
            path,
            hits: FileHits { path: path.to_owned(), lines: Vec::new(), count: 0 },
            deadline: self.deadline,
            collected,
            binary_at: None,
            explicit: self.explicit,
        };
        // A named file is searched whole, as rg searches it (mapped): binary
        // data then hides only the matches on its own lines ("binary file
        // matches"), and line numbers count the file's own lines.
        let size = if self.explicit { size } else { u64::MAX };
        if size <= MAX_LINE_BYTES as u64 {
            let mut bytes = Vec::new();
            std::io::Read::read_to_end(&mut file, &mut bytes)?;
            searcher.search_slice(&self.matcher, &bytes, &mut sink)?;
        } else {
            searcher.search_file(&self.matcher, &file, &mut sink)?;
        }
        if sink.hits.count == 0 {
            return Ok(None);
        }
        if let (Some(at), false) = (sink.binary_at, self.explicit) {
            // rg stops at binary data in a file it walked to: the count is
            // dropped, shown lines get a warning.
            match self.input.output_mode {
                OutputMode::Count => return Ok(None),
                OutputMode::Content => sink.hits.lines.push(format!(
                    "{}: WARNING: stopped searching binary file after match (found \"\\0\" byte around offset {at})",
                    path.display()
                )),
                OutputMode::FilesWithMatches => {}
            }
        }
        Ok(Some(sink.hits))
    }
}

/// Longest line (or, in multiline mode, file) a search holds in memory; a
/// file with a longer one is skipped and the result says so.
pub const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// Files a search on the caller's thread may meet before it leaves the tree
/// to the parallel walker on the blocking pool.
const SMALL_TREE_ENTRIES: usize = 256;
/// Bytes of files a search on the caller's thread may read.
const SMALL_TREE_BYTES: u64 = 1024 * 1024;

fn walk_builder(
    target: &Path,
    cwd: &Path,
    input: &GrepInput,
    rules: std::sync::Arc<crate::permission::rules::RuleSet>,
) -> Result<ignore::WalkBuilder, ToolError> {
    let mut walk = ignore::WalkBuilder::new(target);
    walk.git_global(super::global_gitignore_exists());
    // What a Read deny rule forbids is never searched (nor named).
    let secrets = crate::fs::secret_ids();
    let in_state = crate::fs::state_dir_filter();
    walk.filter_entry(move |e| {
        rules.read_denied(e.path()).is_none() && !in_state(e.path()) && !crate::fs::secret_entry(&secrets, e)
    });
    if let Some(t) = &input.file_type {
        let types = TYPES.get_or_try(t.clone(), || {
            let mut types = ignore::types::TypesBuilder::new();
            types.add_defaults();
            types.select(t);
            types.build().map_err(|e| ToolError::new(format!("unknown file type {t:?}: {e}")))
        })?;
        walk.types(types);
    }
    if let Some(g) = &input.glob {
        // Matched relative to the working directory, as rg run there does.
        let mut o = ignore::overrides::OverrideBuilder::new(cwd);
        for pattern in glob_patterns(g) {
            o.add(pattern).map_err(|e| ToolError::new(format!("invalid glob {pattern:?}: {e}")))?;
        }
        walk.overrides(o.build().map_err(|e| ToolError::new(format!("invalid glob: {e}")))?);
    }
    Ok(walk)
}

fn plan<'a>(target: &Path, input: &'a GrepInput) -> Result<Plan<'a>, ToolError> {
    // As Claude Code passes them: `-C` (when not 0) alone, else `-A`/`-B`.
    let (before, after) = match input.context.filter(|c| *c > 0) {
        Some(c) => (c, c),
        None => (input.before.unwrap_or(0), input.after.unwrap_or(0)),
    };
    Ok(Plan {
        input,
        matcher: matcher(input).map_err(|e| ToolError::new(format!("invalid pattern: {e}")))?,
        explicit: target.is_file(),
        before,
        after,
        numbers: input.line_numbers.unwrap_or(true),
        deadline: Instant::now() + Duration::from_millis(input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)),
        // The directory judged (`target` is its real name), held: every
        // file is opened beneath it, whatever is swapped on the way.
        root: {
            let dir = if target.is_file() { target.parent().unwrap_or(target) } else { target };
            let fd = crate::fs::open_dir_as(dir).map_err(|e| ToolError::new(e.to_string()))?;
            Some((dir.to_owned(), fd))
        },
    })
}

/// What a search found, before sorting and limits.
#[derive(Default)]
struct Found {
    hits: Vec<FileHits>,
    searched: usize,
    /// Files skipped for a line over [`MAX_LINE_BYTES`].
    too_long: usize,
    cut: Option<String>,
}

/// A search of a small tree on this thread, with no thread started; `None`
/// when the tree has more than [`SMALL_TREE_ENTRIES`] entries or
/// [`SMALL_TREE_BYTES`] of files.
fn search_small(
    target: &Path,
    cwd: &Path,
    input: &GrepInput,
    rules: std::sync::Arc<crate::permission::rules::RuleSet>,
) -> Result<Option<GrepOutput>, ToolError> {
    let plan = plan(target, input)?;
    let walk = walk_builder(target, cwd, input, rules)?;
    let collected = std::sync::atomic::AtomicUsize::new(0);
    let mut searcher = plan.searcher();
    let mut found = Found::default();
    let mut bytes = 0;
    for (seen, entry) in walk.build().enumerate() {
        if seen >= SMALL_TREE_ENTRIES {
            return Ok(None);
        }
        let Ok(entry) = entry else { continue };
        if Instant::now() > plan.deadline {
            found.cut = Some(format!("while walking {}", entry.path().display()));
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        found.searched += 1;
        let opened = plan.open(entry.path());
        if let Ok((_, size)) = &opened {
            bytes += size;
            if bytes > SMALL_TREE_BYTES {
                return Ok(None);
            }
        }
        match opened.and_then(|opened| plan.file(&mut searcher, entry.path(), opened, &collected)) {
            Ok(Some(hits)) => found.hits.push(hits),
            Ok(None) => {}
            Err(_) => found.too_long += 1,
        }
    }
    Ok(Some(finish(found, &plan)))
}

fn search(
    target: &Path,
    cwd: &Path,
    input: &GrepInput,
    cancel: &tokio_util::sync::CancellationToken,
    rules: std::sync::Arc<crate::permission::rules::RuleSet>,
) -> Result<GrepOutput, ToolError> {
    let plan = plan(target, input)?;
    let mut walk = walk_builder(target, cwd, input, rules)?;
    walk.threads(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2));
    let found: Mutex<Found> = Mutex::new(Found::default());
    let collected = std::sync::atomic::AtomicUsize::new(0);
    walk.build_parallel().run(|| {
        let mut searcher = plan.searcher();
        let (found, collected, plan) = (&found, &collected, &plan);
        Box::new(move |entry| {
            let Ok(entry) = entry else { return ignore::WalkState::Continue };
            let full = collected.load(std::sync::atomic::Ordering::Relaxed) > MAX_COLLECTED_LINES;
            if cancel.is_cancelled() || Instant::now() > plan.deadline || full {
                let mut found = found.locked();
                found.cut.get_or_insert_with(|| format!("while walking {}", entry.path().display()));
                return ignore::WalkState::Quit;
            }
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            let result =
                plan.open(entry.path()).and_then(|opened| plan.file(&mut searcher, entry.path(), opened, collected));
            let mut found = found.locked();
            found.searched += 1;
            match result {
                Ok(Some(hits)) => found.hits.push(hits),
                Ok(None) => {}
                Err(_) => found.too_long += 1,
            }
            ignore::WalkState::Continue
        })
    });
    Ok(finish(found.into_held(), &plan))
}

/// Sorts what was found by path, lays it out as entries, and applies
/// `offset`, `head_limit` and the output limit.
fn finish(found: Found, plan: &Plan<'_>) -> GrepOutput {
    let input = plan.input;
    let mut hits = found.hits;
    hits.sort_by(|a, b| a.path.cmp(&b.path));
    let entries: Vec<String> = match input.output_mode {
        OutputMode::FilesWithMatches => hits.iter().map(|h| h.path.display().to_string()).collect(),
        OutputMode::Count => hits.iter().map(|h| format!("{}:{}", h.path.display(), h.count)).collect(),
        OutputMode::Content => {
            // With context, rg puts `--` between groups, across files too.
            let separate = plan.before > 0 || plan.after > 0;
            let mut lines = Vec::new();
            for h in hits {
                if separate && !lines.is_empty() && !h.lines.is_empty() {
                    lines.push("--".to_owned());
                }
                lines.extend(h.lines);
            }
            lines
        }
    };
    let offset = input.offset.unwrap_or(0);
    let limit = match input.head_limit {
        None => DEFAULT_HEAD_LIMIT,
        Some(0) => usize::MAX,
        Some(n) => n,
    };
    let total = entries.len();
    let mut kept: Vec<String> = entries.into_iter().skip(offset).take(limit).collect();
    let omitted = total.saturating_sub(offset).saturating_sub(kept.len());
    let mut chars = 0;
    let mut truncated = false;
    if let Some(i) = kept.iter().position(|e| {
        chars += e.len() + 1;
        chars > MAX_CONTENT_CHARS
    }) {
        kept.truncate(i);
        truncated = true;
    }
    GrepOutput {
        entries: kept,
        omitted,
        total,
        files_searched: found.searched,
        skipped_long_lines: found.too_long,
        cut: found.cut,
        truncated,
        files_mode: input.output_mode == OutputMode::FilesWithMatches,
        limit,
        offset,
    }
}
