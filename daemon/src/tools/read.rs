//! Read: a file's lines, numbered (`1\t…`, as Claude Code 2.1.332 does), paged; images as image
//! blocks. Records what it saw in the session's file-state cache, which
//! Edit and Write check before they change the file.

use std::io::{BufRead, BufReader, Read as _};
use std::path::PathBuf;

use agentd_protocol::tools::{ContentBlock, ImageSource};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::fs::{self, FileState};
use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};

/// Lines shown when no limit is given.
const DEFAULT_LIMIT: usize = 2000;
/// Characters of one line shown before it is cut.
const MAX_LINE_CHARS: usize = 2000;
/// Largest image returned as an image block.
const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// Files up to this size are read on the caller's thread.
const INLINE_READ_BYTES: u64 = 256 * 1024;

/// The Read tool.
#[derive(Debug, Clone, Copy)]
pub struct Read;

/// Input of Read.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadInput {
    /// The file to read: absolute, or relative to the workspace.
    pub file_path: String,
    /// First line to show, counting from 1 (default 1; 0 is 1). Use it to
    /// read the rest of a long file.
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub offset: Option<usize>,
    /// How many lines to show (default 2000).
    #[serde(default, deserialize_with = "crate::tool::input::opt_usize")]
    pub limit: Option<usize>,
    /// Page range for PDF files (e.g., "1-5", "3", "10-20"). Only
    /// applicable to PDF files. Maximum 20 pages per request.
    #[serde(default)]
    pub pages: Option<String>,
    /// Set to true to read a text file, or a line range of one, past the
    /// usual 2000 lines (up to 1 MiB of text). Only when you genuinely need
    /// all of it or the user asked for the whole file; otherwise read it in
    /// parts with offset and limit, or search it.
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub allow_large: bool,
}

/// Lines shown with `allow_large` stop at this much text.
const LARGE_TEXT_BYTES: usize = 1024 * 1024;

/// What Read found.
#[derive(Debug, Clone, Serialize)]
pub struct ReadOutput {
    /// The file.
    pub path: PathBuf,
    /// Numbered lines (or empty for an image).
    pub text: String,
    /// First and last line shown.
    pub first_line: usize,
    /// Last line shown.
    pub last_line: usize,
    /// Lines in the file, when known (files too large to scan say `None`).
    pub total_lines: Option<usize>,
    /// Lines that were cut at the line limit.
    pub cut_lines: usize,
    /// An image (media type and base64 data), for image files.
    #[serde(skip)]
    pub image: Option<(String, String)>,
}

impl ReadOutput {
    /// A file shown as text of Read's own making (a notebook's cells, a
    /// PDF's pages), not as numbered lines.
    fn rendered(path: PathBuf, text: String) -> Self {
        ReadOutput { path, text, first_line: 1, last_line: 0, total_lines: None, cut_lines: 0, image: None }
    }
}

impl Tool for Read {
    type Input = ReadInput;
    type Output = ReadOutput;

    const NAME: &'static str = "Read";
    const CONCURRENCY_SAFE: bool = true;
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::ReadsFile;

    const HINTS: agentd_protocol::tools::ToolHints = agentd_protocol::tools::ToolHints::READ_ONLY;

    fn description(&self) -> String {
        "Reads a file from the workspace. Lines are numbered (`1\t…`); by default up to 2000 lines \
         from the start, very long lines are cut. For longer files, read on with offset and limit \
         (allow_large: true reads past 2000 lines, up to 1 MiB of text). PNG, JPEG, GIF and WebP files are \
         returned as images. PDF files are returned as their text, page by page: a PDF of more than 10 \
         pages needs `pages` (\"1-5\"; at most 20 pages a call). Directories cannot be read: use Glob. \
         You must Read a file before you Edit or overwrite it."
            .to_owned()
    }

    fn validate_input(&self, input: &ReadInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        // Outside the workspace is a question for the permission check.
        ctx.validate_path(&input.file_path).map_err(|e| ValidationError::new(e.to_string()))?;
        if input.limit == Some(0) {
            return Err(ValidationError::new("limit must be at least 1"));
        }
        if let Some(pages) = input.pages.as_deref().filter(|p| !p.trim().is_empty()) {
            crate::sandbox::pdf::parse_pages(pages).map_err(ValidationError::new)?;
        }
        Ok(())
    }

    fn permission_target(&self, input: &ReadInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.file_path.clone())
    }

    fn check_permissions(&self, input: &ReadInput, ctx: &ToolContext) -> Decision {
        // Reads inside the workspace run; anything else asks (and, once
        // allowed, opens exactly the file that was approved).
        let real = match ctx.resolve(&input.file_path) {
            Ok(p) => match fs::canonical(&p.abs()) {
                Ok(real) if !ctx.inside(&real) => Some(real),
                _ => return Decision::Allow,
            },
            Err(_) => fs::canonical(&ctx.cwd.join(&input.file_path)).ok(),
        };
        match real {
            Some(real) if real.as_os_str() != input.file_path.as_str() => {
                Decision::ask(format!("read {} ({}), outside the workspace", input.file_path, real.display()))
            }
            _ => Decision::ask(format!("read {}, outside the workspace", input.file_path)),
        }
    }

    async fn call(
        &self,
        input: ReadInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<ReadOutput>, ToolError> {
        let path = ctx.target_path(&input.file_path).map_err(|e| ToolError::new(e.to_string()))?;
        // `offset: 0` is the start, as Claude Code takes it.
        let lines = Lines { offset: input.offset.map(|o| o.max(1)), limit: input.limit, large: input.allow_large };
        let check = recheck(&ctx);
        // Opened here; a small file is read here too (tens of
        // microseconds), a large one on the blocking pool, so the
        // runtime's threads are not held.
        let opened = open_checked(&path, &*check)?;
        let read = if opened.1.len() <= INLINE_READ_BYTES {
            read(&path, opened, lines)?
        } else {
            tokio::task::spawn_blocking(move || read(&path, opened, lines))
                .await
                .map_err(|e| ToolError::new(format!("read failed: {e}")))??
        };
        // The file-state entry is keyed by where the file really is.
        let (output, state, key) = match read {
            Read_::Done(output, state, real) => (output, state, real),
            Read_::Pdf(path, bytes, meta, real) => {
                let pages = input.pages.as_deref().filter(|p| !p.trim().is_empty());
                let (output, state) = pdf_text(&path, bytes, &meta, pages, &ctx).await?;
                (output, state, real)
            }
        };
        Ok(ToolOutput::with_modifier(
            output,
            Box::new(move |s| {
                s.files.insert(key, state);
            }),
        ))
    }

    fn result_content(&self, out: &ReadOutput) -> Vec<ContentBlock> {
        if let Some((media_type, data)) = &out.image {
            return vec![ContentBlock::Image {
                source: ImageSource { kind: "base64".into(), media_type: media_type.clone(), data: data.clone() },
            }];
        }
        let mut text = out.text.clone();
        match out.total_lines {
            Some(0) => text.push_str("[the file is empty]\n"),
            Some(total) if out.last_line < total => text.push_str(&format!(
                "[lines {}-{} of {total}; read on with offset={}]\n",
                out.first_line,
                out.last_line,
                out.last_line + 1
            )),
            None if out.last_line >= out.first_line => text.push_str(&format!(
                "[lines {}-{}; the file may go on: read on with offset={}]\n",
                out.first_line,
                out.last_line,
                out.last_line + 1
            )),
            _ => {}
        }
        if out.cut_lines > 0 {
            text.push_str(&format!("[{} long lines were cut at {MAX_LINE_CHARS} characters]\n", out.cut_lines));
        }
        vec![ContentBlock::text(text)]
    }

    fn render_use(&self, input: &ReadInput) -> String {
        format!("Reading {}", input.file_path)
    }

    fn render_result(&self, out: &ReadOutput) -> String {
        match (&out.image, out.total_lines) {
            (Some((media, _)), _) => format!("Read image {} ({media})", out.path.display()),
            (None, Some(total)) => {
                let read = out.last_line + 1 - out.first_line.min(out.last_line + 1);
                format!("Read {} of {total}", crate::tools::counted(read, "line", "lines"))
            }
            (None, None) => format!("Read lines {}-{}", out.first_line, out.last_line),
        }
    }

    fn render_grouped(&self, inputs: &[&ReadInput]) -> String {
        match inputs {
            [one] => self.render_use(one),
            many => format!("Reading {} files", many.len()),
        }
    }
}

/// What a call's opened file must pass: no `Read` deny rule names it, no
/// `Read` ask rule either unless the user approved the call (or the session
/// is in bypass mode, where ask rules do not ask), and it is inside the
/// workspace or the one file approved outside it.
fn recheck(ctx: &ToolContext) -> std::sync::Arc<Recheck> {
    let (rules, approved) = (ctx.rules.clone(), ctx.grant.approved_outside.clone());
    let (cwd, add_dirs) = (ctx.cwd.clone(), ctx.info.add_dirs.clone());
    let asked = ctx.grant.may_write_protected;
    std::sync::Arc::new(move |real: &std::path::Path| {
        rules.read_denied(real).is_none()
            && (asked || rules.read_asked(real).is_none())
            && (fs::is_inside(&cwd, &add_dirs, real) || approved.as_deref().is_some_and(|a| a.as_path() == real))
    })
}

fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// Which lines a read shows.
#[derive(Debug, Clone, Copy)]
struct Lines {
    offset: Option<usize>,
    limit: Option<usize>,
    /// `allow_large`: past the default limit, up to [`LARGE_TEXT_BYTES`].
    large: bool,
}

/// What the synchronous part of a read gave.
enum Read_ {
    /// The output, and the file's state as read.
    Done(ReadOutput, FileState, PathBuf),
    /// A PDF, read whole, for its text (and where it really is).
    Pdf(PathBuf, Vec<u8>, std::fs::Metadata, PathBuf),
}

/// A size as people write it (`12.3 KB`).
fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} bytes"),
        b if b < 1024 * 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// A PDF's text, page by page: `pages` or, for a PDF of at most
/// [`crate::sandbox::pdf::WHOLE_PAGES`] pages, all of it. The helper
/// extracts it, in a process of its own.
async fn pdf_text(
    path: &std::path::Path,
    bytes: Vec<u8>,
    meta: &std::fs::Metadata,
    pages: Option<&str>,
    ctx: &ToolContext,
) -> Result<(ReadOutput, FileState), ToolError> {
    use crate::sandbox::pdf::{self, MAX_PAGES, WHOLE_PAGES, Want};
    let Some(helper) = ctx.sandbox().helper.as_deref() else {
        return Err(ToolError::new(format!(
            "{} is a PDF: reading its text needs the helper {} installed beside agentd, which was not found",
            path.display(),
            crate::sandbox::HELPER_NAME
        )));
    };
    let state = fs::state_of(meta, Some(fs::hash_bytes(&bytes)));
    let want = match pages {
        Some(p) => {
            let (first, last) = pdf::parse_pages(p).map_err(ToolError::new)?;
            Want::Range(first, last)
        }
        None => Want::Whole(WHOLE_PAGES),
    };
    let got = pdf::extract(helper, bytes, want, &ctx.cancel)
        .await
        .map_err(|e| ToolError::new(format!("{}: {e}", path.display())))?;
    if let Some(why) = got.error {
        return Err(ToolError::new(format!("{}: {why}", path.display())));
    }
    if got.encrypted {
        return Err(ToolError::new(format!(
            "{} is password-protected. Please provide an unprotected version.",
            path.display()
        )));
    }
    let size = human_size(meta.len());
    let mut text = match (want, got.text.is_empty()) {
        (Want::Whole(_), true) if got.pages > WHOLE_PAGES => {
            return Err(ToolError::new(format!(
                "This PDF has {} pages, which is too many to read at once. Use the pages parameter to read \
                 specific page ranges (e.g., pages: \"1-5\"). Maximum {MAX_PAGES} pages per request.",
                got.pages
            )));
        }
        (Want::Range(first, last), true) if got.pages > 0 && first > got.pages => {
            return Err(ToolError::new(format!(
                "Requested pages {first}-{last} is outside the document (PDF has {n} pages). Use a range within \
                 1-{n}, maximum {MAX_PAGES} pages per request (e.g. pages: \"1-{example}\").",
                n = got.pages,
                example = got.pages.min(MAX_PAGES),
            )));
        }
        (_, true) => format!("PDF file read: {} ({size}): it has no pages\n", path.display()),
        (Want::Whole(_), false) => {
            format!("PDF file read: {} ({size}), {} page(s), as text\n", path.display(), got.pages)
        }
        (Want::Range(..), false) => format!(
            "PDF pages extracted: {} page(s) from {} ({size}; the PDF has {} pages), as text\n",
            got.text.len(),
            path.display(),
            got.pages
        ),
    };
    for (page, body) in &got.text {
        text.push_str(&format!("\n--- Page {page} ---\n"));
        if body.trim().is_empty() {
            text.push_str("[no text on this page: it may be a scanned image]\n");
        } else {
            text.push_str(body.trim_end());
            text.push('\n');
        }
    }
    if got.cut {
        // The last page listed was cut: the rest of the document is read
        // from the page after it (a page over 2 MiB of text is read only
        // that far).
        let last = got.text.last().map_or(1, |(p, _)| *p);
        let after = if last < got.pages { format!("; read on with pages: \"{}\"", last + 1) } else { String::new() };
        text.push_str(&format!("\n[the text was cut at 2 MiB, within page {last}{after}]\n"));
    }
    Ok((ReadOutput::rendered(path.to_path_buf(), text), state))
}

/// Whether an opened file (its real path) may be read: what admission
/// checked of the path, checked again of what was opened (a link swapped
/// in between the two is refused).
type Recheck = dyn Fn(&std::path::Path) -> bool + Send + Sync;

/// `fs::open_file`, then the recheck of what was opened.
fn open_checked(path: &fs::WsPath, check: &Recheck) -> Result<Opened, ToolError> {
    let (file, meta, opened) = fs::open_file_seen(path).map_err(|e| ToolError::new(e.to_string()))?;
    if !check(&opened) {
        return Err(ToolError::new(format!(
            "{} changed while it was checked: it now leads to a file this call may not read",
            path.abs().display()
        )));
    }
    Ok((file, meta, opened))
}

/// A file [`open_checked`] opened: it, its metadata, where it really is.
type Opened = (std::fs::File, std::fs::Metadata, PathBuf);

/// The whole of a file [`open_checked`] opened, from its start again.
fn read_whole(file: &mut std::fs::File, meta: &std::fs::Metadata, abs: &std::path::Path) -> Result<Vec<u8>, ToolError> {
    use std::io::{Read as _, Seek as _};
    if meta.len() > fs::MAX_EDIT_BYTES {
        return Err(ToolError::new(format!(
            "{}: {} bytes, larger than the {} bytes this tool handles",
            abs.display(),
            meta.len(),
            fs::MAX_EDIT_BYTES
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // No more than the limit, however the file grew since it was opened.
    file.rewind()
        .and_then(|()| file.by_ref().take(fs::MAX_EDIT_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| ToolError::new(format!("read {}: {e}", abs.display())))?;
    if bytes.len() as u64 > fs::MAX_EDIT_BYTES {
        return Err(ToolError::new(format!(
            "{}: it grew past the {} bytes this tool handles while it was read",
            abs.display(),
            fs::MAX_EDIT_BYTES
        )));
    }
    Ok(bytes)
}

fn read(path: &fs::WsPath, opened: Opened, lines: Lines) -> Result<Read_, ToolError> {
    let (mut file, meta, real) = opened;
    let abs = path.abs();
    let mut head = vec![0u8; 8192];
    let n = read_up_to(&mut file, &mut head).map_err(|e| ToolError::new(format!("read {}: {e}", abs.display())))?;
    head.truncate(n);
    // A PDF: by its name (as Claude Code tells), or by its header at the
    // very start (a text file that mentions `%PDF-` is text).
    let named_pdf = abs.extension().is_some_and(|e| e.eq_ignore_ascii_case("pdf"));
    if named_pdf || head.starts_with(b"%PDF-") {
        use std::io::Read as _;
        let max = crate::sandbox::pdf::MAX_PDF_BYTES;
        if meta.len() > max {
            return Err(ToolError::new(format!(
                "{} is a PDF of {}, more than the {} Read takes",
                abs.display(),
                human_size(meta.len()),
                human_size(max)
            )));
        }
        let mut bytes = head;
        file.take(max + 1 - n as u64)
            .read_to_end(&mut bytes)
            .map_err(|e| ToolError::new(format!("read {}: {e}", abs.display())))?;
        return Ok(Read_::Pdf(abs, bytes, meta, real));
    }
    let (offset, limit) = (lines.offset, lines.limit);
    if let Some(media) = image_type(&head) {
        if meta.len() > MAX_IMAGE_BYTES {
            return Err(ToolError::new(format!(
                "{} is an image of {} bytes, more than {MAX_IMAGE_BYTES}",
                abs.display(),
                meta.len()
            )));
        }
        let bytes = read_whole(&mut file, &meta, &abs)?;
        let state = fs::state_of(&meta, Some(fs::hash_bytes(&bytes)));
        let out = ReadOutput {
            path: abs,
            text: String::new(),
            first_line: 0,
            last_line: 0,
            total_lines: None,
            cut_lines: 0,
            image: Some((media.to_owned(), base64(&bytes))),
        };
        return Ok(Read_::Done(out, state, real));
    }
    if head.contains(&0) {
        return Err(ToolError::new(format!(
            "{} is a binary file ({} bytes); Read shows text and PNG/JPEG/GIF/WebP images",
            abs.display(),
            meta.len()
        )));
    }
    if abs.extension().is_some_and(|e| e == "ipynb") && meta.len() <= fs::MAX_EDIT_BYTES {
        let bytes = read_whole(&mut file, &meta, &abs)?;
        if let Some(text) = render_notebook(&bytes) {
            let state = fs::state_of(&meta, Some(fs::hash_bytes(&bytes)));
            return Ok(Read_::Done(ReadOutput::rendered(abs, text), state, real));
        }
    }
    let first = offset.unwrap_or(1);
    let limit = limit.unwrap_or(if lines.large { usize::MAX } else { DEFAULT_LIMIT });
    // With allow_large, whole lines until the text is that long.
    let room = if lines.large { LARGE_TEXT_BYTES } else { usize::MAX };
    let mut text = String::new();
    let mut cut_lines = 0;
    let mut shown_last = first.saturating_sub(1);
    let mut push_line = |number: usize, line: &str| {
        let line = line.strip_suffix('\r').unwrap_or(line);
        let mut chars = line.char_indices();
        match chars.nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                cut_lines += 1;
                let rest = line[cut..].chars().count();
                text.push_str(&format!("{number}\t{}… [{rest} more characters]\n", &line[..cut]));
            }
            // `1\t…`, unpadded, as Claude Code 2.1.332 numbers lines
            // (earlier releases padded to six columns, as `cat -n`).
            None => text.push_str(&format!("{number}\t{line}\n")),
        }
        shown_last = number;
        // Room for another line?
        text.len() < room
    };
    if meta.len() <= fs::MAX_EDIT_BYTES {
        // A file that fit in the first read is not opened again.
        let whole = n < head.capacity() && n as u64 == meta.len();
        let bytes = if whole { std::mem::take(&mut head) } else { read_whole(&mut file, &meta, &abs)? };
        let state = fs::state_of(&meta, Some(fs::hash_bytes(&bytes)));
        let content = String::from_utf8_lossy(&bytes);
        let body = content.strip_suffix('\n').unwrap_or(&content);
        let total = if content.is_empty() { 0 } else { body.split('\n').count() };
        for (i, line) in body.split('\n').enumerate().skip(first - 1).take(limit) {
            if content.is_empty() {
                break;
            }
            if !push_line(i + 1, line) {
                break;
            }
        }
        let out = ReadOutput {
            path: abs,
            text,
            first_line: first,
            last_line: shown_last,
            total_lines: Some(total),
            cut_lines,
            image: None,
        };
        return Ok(Read_::Done(out, state, real));
    }
    // Too large to hash: stream just the lines asked for, keeping at most a
    // displayable prefix of each line (a 10 GB line must not fill memory).
    std::io::Seek::rewind(&mut file).map_err(|e| ToolError::new(format!("read {}: {e}", abs.display())))?;
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let keep = MAX_LINE_CHARS * 4 + 4;
    let mut line: Vec<u8> = Vec::new();
    let mut number = 0;
    let mut at_end = false;
    while number < first - 1 + limit && !at_end {
        line.clear();
        loop {
            let buf = reader.fill_buf().map_err(|e| ToolError::new(format!("read {}: {e}", abs.display())))?;
            if buf.is_empty() {
                at_end = true;
                break;
            }
            if buf.contains(&0) {
                return Err(ToolError::new(format!("{} is a binary file ({} bytes)", abs.display(), meta.len())));
            }
            let (chunk, done) = match buf.iter().position(|b| *b == b'\n') {
                Some(i) => (&buf[..i], i + 1),
                None => (buf, buf.len()),
            };
            let room = keep.saturating_sub(line.len());
            line.extend_from_slice(&chunk[..chunk.len().min(room)]);
            let newline = done > chunk.len();
            reader.consume(done);
            if newline {
                break;
            }
        }
        if at_end && line.is_empty() {
            break;
        }
        number += 1;
        if number >= first {
            let text_line = String::from_utf8_lossy(&line);
            if !push_line(number, &text_line) {
                break;
            }
        }
    }
    let state = fs::state_of(&meta, None);
    let out = ReadOutput {
        path: abs,
        text,
        first_line: first,
        last_line: shown_last,
        total_lines: None,
        cut_lines,
        image: None,
    };
    Ok(Read_::Done(out, state, real))
}

/// A notebook as its cells: each with its index, type and id, its source,
/// and (for code) its text outputs. `None` when it is not notebook JSON.
fn render_notebook(bytes: &[u8]) -> Option<String> {
    let nb: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let cells = nb.get("cells")?.as_array()?;
    let text_of = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Array(parts) => parts.iter().filter_map(|p| p.as_str()).collect(),
        _ => String::new(),
    };
    let mut out = format!("[notebook with {} cells]\n", cells.len());
    for (i, cell) in cells.iter().enumerate() {
        let kind = cell["cell_type"].as_str().unwrap_or("?");
        match cell["id"].as_str() {
            Some(id) => out.push_str(&format!("\n── cell {i} [{kind}] id={id} ──\n")),
            None => out.push_str(&format!("\n── cell {i} [{kind}] ──\n")),
        }
        let source = text_of(&cell["source"]);
        out.push_str(&source);
        if !source.ends_with('\n') {
            out.push('\n');
        }
        for output in cell["outputs"].as_array().into_iter().flatten() {
            let body = match output["output_type"].as_str() {
                Some("stream") => text_of(&output["text"]),
                Some("execute_result") | Some("display_data") => {
                    let data = &output["data"];
                    let mut t = text_of(&data["text/plain"]);
                    if data.get("image/png").is_some() || data.get("image/jpeg").is_some() {
                        t.push_str("[image output]\n");
                    }
                    t
                }
                Some("error") => format!(
                    "{}: {}\n",
                    output["ename"].as_str().unwrap_or("Error"),
                    output["evalue"].as_str().unwrap_or("")
                ),
                _ => String::new(),
            };
            if !body.is_empty() {
                out.push_str("[output]\n");
                out.push_str(&body);
                if !body.ends_with('\n') {
                    out.push('\n');
                }
            }
        }
    }
    Some(out)
}

fn read_up_to(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// Standard base64 with padding.
pub fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        out.push(ALPHABET[(n >> 18) as usize & 63] as char);
        out.push(ALPHABET[(n >> 12) as usize & 63] as char);
        out.push(if chunk.len() > 1 { ALPHABET[(n >> 6) as usize & 63] as char } else { '=' });
        out.push(if chunk.len() > 2 { ALPHABET[n as usize & 63] as char } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_opened_is_checked_not_the_path_that_was_admitted() {
        let (_dir, root) = crate::fs::real_temp_dir();
        std::fs::write(root.join("a"), "fine\n").unwrap();
        std::fs::write(root.join("secret"), "no\n").unwrap();
        let path = fs::resolve(&root, &root, "a").unwrap();
        let check = |p: &std::path::Path| !p.ends_with("secret");
        let lines = Lines { offset: None, limit: None, large: false };
        let opened = open_checked(&path, &check).unwrap();
        assert!(matches!(read(&path, opened, lines), Ok(Read_::Done(..))));
        // The admitted name now leads to the denied file.
        std::fs::remove_file(root.join("a")).unwrap();
        std::os::unix::fs::symlink("secret", root.join("a")).unwrap();
        let Err(e) = open_checked(&path, &check) else { panic!("the swapped link was read") };
        assert!(e.to_string().contains("changed while it was checked"), "{e}");
    }

    /// An attack review's attempt, kept: a link swapped after admission
    /// to a workspace file an ask rule keeps for the user is not read
    /// unasked; approved (or in bypass mode), it is.
    #[test]
    fn a_file_an_ask_rule_names_is_not_read_unasked_through_a_swapped_link() {
        let (_dir, root) = crate::fs::real_temp_dir();
        std::fs::write(root.join("a"), "fine\n").unwrap();
        std::fs::write(root.join("kept"), "ask first\n").unwrap();
        let mut ctx = ToolContext::for_test(std::sync::Arc::new(crate::tool::context::NoTools));
        ctx.cwd = std::sync::Arc::new(root.clone());
        let mut rules = crate::permission::rules::RuleSet::default();
        let origin = crate::permission::rules::Origin::session("session", &root);
        rules.add(&origin, &[], &[], &["Read(kept)".to_owned()]);
        ctx.rules = std::sync::Arc::new(rules);
        let path = fs::resolve(&root, &root, "a").unwrap();
        ctx.grant.may_write_protected = false;
        assert!(open_checked(&path, &*recheck(&ctx)).is_ok());
        std::fs::remove_file(root.join("a")).unwrap();
        std::os::unix::fs::symlink("kept", root.join("a")).unwrap();
        let Err(e) = open_checked(&path, &*recheck(&ctx)) else { panic!("read unasked") };
        assert!(e.to_string().contains("changed while it was checked"), "{e}");
        ctx.grant.may_write_protected = true;
        assert!(open_checked(&path, &*recheck(&ctx)).is_ok(), "approved");
    }

    #[test]
    fn base64_matches_the_rfc_vectors() {
        for (input, want) in [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foobar", "Zm9vYmFy")] {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }
}
