//! Edit: replaces an exact string in a file the session has read and that
//! has not changed since (by content). Keeps CRLF line endings, a BOM, the
//! trailing newline and the file's mode; returns a short unified diff.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::fs;
use crate::permission::Decision;
use crate::tool::{ProgressSink, Tool, ToolContext, ToolError, ToolOutput, ValidationError};
use crate::tools::write::check_unchanged;

/// Hunks shown in the result's diff.
const MAX_HUNKS: usize = 5;
/// Lines of context around a change.
const CONTEXT: usize = 3;

/// The Edit tool.
#[derive(Debug, Clone, Copy)]
pub struct Edit;

/// Input of Edit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditInput {
    /// The file to change: absolute, or relative to the workspace. Read it first.
    pub file_path: String,
    /// The exact text to replace, including whitespace and indentation. It
    /// must occur exactly once unless replace_all is set; include more
    /// surrounding lines to make it unique.
    pub old_string: String,
    /// The text to put in its place (must differ from old_string).
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub replace_all: bool,
}

/// What Edit did.
#[derive(Debug, Clone, Serialize)]
pub struct EditOutput {
    /// The file.
    pub path: PathBuf,
    /// Occurrences replaced.
    pub replacements: usize,
    /// A unified diff of the change (the first hunks).
    pub diff: String,
}

impl Tool for Edit {
    type Input = EditInput;
    type Output = EditOutput;

    const NAME: &'static str = "Edit";
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::EditsFile;

    const HINTS: agentd_protocol::tools::ToolHints =
        agentd_protocol::tools::ToolHints { idempotent: true, ..agentd_protocol::tools::ToolHints::FAIL_CLOSED };

    fn description(&self) -> String {
        "Replaces text in a file: old_string must match the file exactly (whitespace included) and \
         occur once, or set replace_all. You must Read the file first; if it changed since, Read it \
         again. Line endings (CRLF), a byte-order mark and the file's permissions are kept."
            .to_owned()
    }

    fn validate_input(&self, input: &EditInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        // Outside the workspace is a question for the permission check.
        ctx.validate_path(&input.file_path).map_err(|e| ValidationError::new(e.to_string()))?;
        if input.old_string.is_empty() {
            return Err(ValidationError::new("old_string is empty; use Write to create a file"));
        }
        if input.old_string == input.new_string {
            return Err(ValidationError::new("old_string and new_string are the same; nothing would change"));
        }
        Ok(())
    }

    fn permission_target(&self, input: &EditInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.file_path.clone())
    }

    fn check_permissions(&self, input: &EditInput, ctx: &ToolContext) -> Decision {
        Decision::ask(format!("edit {}{}", input.file_path, ctx.outside_note(&input.file_path)))
    }

    fn is_destructive(&self, input: &EditInput) -> bool {
        let removed = input.old_string.lines().count().saturating_sub(input.new_string.lines().count());
        removed >= 20 || (input.new_string.trim().is_empty() && input.old_string.lines().count() >= 5)
    }

    async fn call(
        &self,
        input: EditInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<EditOutput>, ToolError> {
        let file_path = input.file_path.clone();
        apply(&file_path, ctx, move |text| edit(text, &input)).await
    }

    fn result_content(&self, out: &EditOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        edited_content(out)
    }

    fn render_use(&self, input: &EditInput) -> String {
        format!("Editing {}", input.file_path)
    }

    fn render_result(&self, out: &EditOutput) -> String {
        render_edited(out)
    }
}

/// Reads the file (unchanged since the session read it), changes its text
/// with `change`, and writes it back atomically.
async fn apply<F>(file_path: &str, ctx: ToolContext, change: F) -> Result<ToolOutput<EditOutput>, ToolError>
where
    F: FnOnce(&str) -> Result<(String, usize, String), String> + Send + 'static,
{
    let path = ctx.target_path(file_path).map_err(|e| ToolError::new(e.to_string()))?;
    let session = ctx.session.clone();
    let (output, state, key) = tokio::task::spawn_blocking(move || {
        // One read: the bytes checked are the bytes edited.
        let bytes = check_unchanged(&path, &session)?;
        let abs = path.abs();
        let text = String::from_utf8(bytes)
            .map_err(|_| ToolError::new(format!("{} is not UTF-8 text; Edit changes text files", abs.display())))?;
        let (new_text, replacements, diff) =
            change(&text).map_err(|e| ToolError::new(format!("{}: {e}", abs.display())))?;
        if new_text.len() as u64 > fs::MAX_EDIT_BYTES {
            return Err(ToolError::new(format!(
                "{}: the edit would make the file larger than {} bytes",
                abs.display(),
                fs::MAX_EDIT_BYTES
            )));
        }
        let written = ctx.write_file(&path, new_text.as_bytes()).map_err(|e| ToolError::new(e.to_string()))?;
        let key = std::fs::canonicalize(&abs).unwrap_or_else(|_| abs.clone());
        Ok((EditOutput { path: abs, replacements, diff }, written.state, key))
    })
    .await
    .map_err(|e| ToolError::new(format!("edit failed: {e}")))??;
    Ok(ToolOutput::with_modifier(
        output,
        Box::new(move |s| {
            s.files.insert(key, state);
        }),
    ))
}

fn edited_content(out: &EditOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
    // Claude Code 2.1.332's words, then the diff (richer than its text:
    // the model sees what changed around the edit).
    let said = if out.replacements > 1 {
        format!(
            "The file {} has been updated. All {} occurrences were successfully replaced.",
            out.path.display(),
            out.replacements
        )
    } else {
        format!("The file {} has been updated successfully.", out.path.display())
    };
    vec![agentd_protocol::tools::ContentBlock::text(format!("{said} {}\n{}", crate::tools::write::CURRENT, out.diff))]
}

fn render_edited(out: &EditOutput) -> String {
    let added = out.diff.lines().filter(|l| l.starts_with('+')).count();
    let removed = out.diff.lines().filter(|l| l.starts_with('-')).count();
    format!("Edited {} (+{added} -{removed})", out.path.display())
}

/// MultiEdit: several Edits of one file, applied in order, all or none.
/// A tool of earlier Claude Code versions: never offered (Edit is), run
/// when a model calls it.
#[derive(Debug, Clone, Copy)]
pub struct MultiEdit;

/// Input of MultiEdit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MultiEditInput {
    /// The file to change: absolute, or relative to the workspace. Read it first.
    pub file_path: String,
    /// The edits, applied in order, each to the result of the one before.
    pub edits: Vec<EditStep>,
}

/// One edit of a MultiEdit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditStep {
    /// The exact text to replace.
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of exactly one.
    #[serde(default, deserialize_with = "crate::tool::input::flag")]
    pub replace_all: bool,
}

/// Most edits one MultiEdit call may carry.
const MAX_STEPS: usize = 100;

impl Tool for MultiEdit {
    type Input = MultiEditInput;
    type Output = EditOutput;

    const NAME: &'static str = "MultiEdit";
    const KIND: crate::tool::ToolKind = crate::tool::ToolKind::EditsFile;

    fn description(&self) -> String {
        "Makes several exact-string replacements in one file, in order, all or none (as Edit does one).".to_owned()
    }

    fn is_legacy(&self) -> bool {
        true
    }

    fn validate_input(&self, input: &MultiEditInput, ctx: &ToolContext) -> Result<(), ValidationError> {
        ctx.validate_path(&input.file_path).map_err(|e| ValidationError::new(e.to_string()))?;
        if input.edits.is_empty() {
            return Err(ValidationError::new("edits is empty"));
        }
        if input.edits.len() > MAX_STEPS {
            return Err(ValidationError::new(format!("at most {MAX_STEPS} edits in one call")));
        }
        for (i, e) in input.edits.iter().enumerate() {
            if e.old_string.is_empty() {
                return Err(ValidationError::new(format!(
                    "edits[{i}].old_string is empty; use Write to create a file"
                )));
            }
            if e.old_string == e.new_string {
                return Err(ValidationError::new(format!("edits[{i}]: old_string and new_string are the same")));
            }
        }
        Ok(())
    }

    fn permission_target(&self, input: &MultiEditInput) -> crate::permission::PermissionTarget {
        crate::permission::PermissionTarget::Path(input.file_path.clone())
    }

    fn check_permissions(&self, input: &MultiEditInput, ctx: &ToolContext) -> Decision {
        Decision::ask(format!("edit {}{}", input.file_path, ctx.outside_note(&input.file_path)))
    }

    fn is_destructive(&self, input: &MultiEditInput) -> bool {
        input.edits.iter().any(|e| {
            Edit.is_destructive(&EditInput {
                file_path: String::new(),
                old_string: e.old_string.clone(),
                new_string: e.new_string.clone(),
                replace_all: e.replace_all,
            })
        })
    }

    async fn call(
        &self,
        input: MultiEditInput,
        ctx: ToolContext,
        _p: ProgressSink,
    ) -> Result<ToolOutput<EditOutput>, ToolError> {
        apply(&input.file_path, ctx, move |text| {
            let mut text = text.to_owned();
            let mut total = 0;
            let mut diffs = String::new();
            for (i, e) in input.edits.iter().enumerate() {
                let (next, n, diff) = replace(&text, &e.old_string, &e.new_string, e.replace_all)
                    .map_err(|why| format!("edits[{i}]: {why}; no edit was made"))?;
                text = next;
                total += n;
                diffs.push_str(&diff);
            }
            Ok((text, total, diffs))
        })
        .await
    }

    fn result_content(&self, out: &EditOutput) -> Vec<agentd_protocol::tools::ContentBlock> {
        edited_content(out)
    }

    fn render_use(&self, input: &MultiEditInput) -> String {
        format!("Editing {} ({} edits)", input.file_path, input.edits.len())
    }

    fn render_result(&self, out: &EditOutput) -> String {
        render_edited(out)
    }
}

/// Applies the edit to `text`: the new text, the number of replacements
/// and a diff. CRLF files get CRLF in the replacement; a BOM stays.
fn edit(text: &str, input: &EditInput) -> Result<(String, usize, String), String> {
    replace(text, &input.old_string, &input.new_string, input.replace_all)
}

/// Replaces `old` by `new` in `text` (once, or every time with `all`).
fn replace(text: &str, old: &str, new: &str, all: bool) -> Result<(String, usize, String), String> {
    let (bom, body) = match text.strip_prefix('\u{feff}') {
        Some(rest) => ("\u{feff}", rest),
        None => ("", text),
    };
    let crlf = body.contains("\r\n");
    let adapt = |s: &str| if crlf && !s.contains("\r\n") { s.replace('\n', "\r\n") } else { s.to_owned() };
    let (old, new) = (adapt(old), adapt(new));
    let positions: Vec<usize> = body.match_indices(old.as_str()).map(|(i, _)| i).collect();
    match positions.len() {
        0 => return Err("old_string was not found; it must match exactly, including whitespace and indentation (Read the file again to copy it)".into()),
        n if n > 1 && !all => {
            let lines: Vec<String> = positions.iter().take(10).map(|p| (body[..*p].matches('\n').count() + 1).to_string()).collect();
            return Err(format!(
                "old_string occurs {n} times (at lines {}); add surrounding lines to make it unique, or set replace_all",
                lines.join(", ")
            ));
        }
        _ => {}
    }
    let targets: &[usize] = if all { &positions } else { &positions[..1] };
    let mut out = String::with_capacity(body.len() + targets.len() * new.len());
    let mut diff = String::new();
    let mut last = 0;
    let mut shift: isize = 0;
    for (n, &pos) in targets.iter().enumerate() {
        out.push_str(&body[last..pos]);
        out.push_str(&new);
        last = pos + old.len();
        if n < MAX_HUNKS {
            diff.push_str(&hunk(body, pos, old.len(), &new, shift));
        }
        shift += new.matches('\n').count() as isize - old.matches('\n').count() as isize;
    }
    out.push_str(&body[last..]);
    if targets.len() > MAX_HUNKS {
        diff.push_str(&format!("… {} more hunks\n", targets.len() - MAX_HUNKS));
    }
    Ok((format!("{bom}{out}"), targets.len(), diff))
}

/// One unified-diff hunk for replacing `len` bytes at `pos` with `new`:
/// the lines the replacement touches, less those it leaves as they were
/// (replacing `b\n` by `B\n` changes one line, not the one after it), with
/// up to [`CONTEXT`] lines around.
fn hunk(body: &str, pos: usize, len: usize, new: &str, shift: isize) -> String {
    let start = body[..pos].rfind('\n').map(|i| i + 1).unwrap_or(0);
    let end = body[pos + len..].find('\n').map(|i| pos + len + i).unwrap_or(body.len());
    let old_region = &body[start..end];
    let new_region = format!("{}{}{}", &body[start..pos], new, &body[pos + len..end]);
    // A region that reaches the end of a file ending in a newline has no
    // line after that newline.
    let (old_region, new_region) = match (old_region.strip_suffix('\n'), new_region.strip_suffix('\n')) {
        (Some(o), Some(n)) => (o, n.to_owned()),
        _ => (old_region, new_region),
    };
    let old_lines: Vec<&str> = old_region.split('\n').collect();
    let new_lines: Vec<&str> = new_region.split('\n').collect();
    // Lines the replacement left as they were are context, not changes.
    let same_head = old_lines.iter().zip(&new_lines).take_while(|(o, n)| o == n).count();
    let most_tail = old_lines.len().min(new_lines.len()) - same_head;
    let same_tail =
        old_lines.iter().rev().zip(new_lines.iter().rev()).take(most_tail).take_while(|(o, n)| o == n).count();
    let removed = &old_lines[same_head..old_lines.len() - same_tail];
    let added = &new_lines[same_head..new_lines.len() - same_tail];
    let above: Vec<&str> = if start == 0 { Vec::new() } else { body[..start - 1].split('\n').collect() };
    let mut before: Vec<&str> = above.into_iter().chain(old_lines[..same_head].iter().copied()).collect();
    let before = before.split_off(before.len().saturating_sub(CONTEXT));
    let rest = if end >= body.len() { "" } else { &body[end + 1..] };
    let rest = rest.strip_suffix('\n').unwrap_or(rest);
    let below = if rest.is_empty() { Vec::new() } else { rest.split('\n').take(CONTEXT).collect() };
    let after: Vec<&str> =
        old_lines[old_lines.len() - same_tail..].iter().copied().chain(below).take(CONTEXT).collect();
    let first_line = body[..start].matches('\n').count() + 1 + same_head - before.len();
    let mut h = format!(
        "@@ -{},{} +{},{} @@\n",
        first_line,
        before.len() + removed.len() + after.len(),
        (first_line as isize + shift).max(1),
        before.len() + added.len() + after.len()
    );
    let trim = |l: &str| l.trim_end_matches('\r').to_owned();
    for (mark, lines) in [(' ', &before[..]), ('-', removed), ('+', added), (' ', &after[..])] {
        for l in lines {
            h.push_str(&format!("{mark}{}\n", trim(l)));
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(old: &str, new: &str, all: bool) -> EditInput {
        EditInput { file_path: "f".into(), old_string: old.into(), new_string: new.into(), replace_all: all }
    }

    #[test]
    fn replaces_once_and_diffs() {
        let (out, n, diff) = edit("a\nb\nc\nd\n", &input("c", "C", false)).unwrap();
        assert_eq!((out.as_str(), n), ("a\nb\nC\nd\n", 1));
        assert!(diff.contains("@@ -1,4 +1,4 @@") && diff.contains("-c\n+C\n"), "{diff}");
    }

    /// Issue 49: replacing `b\n` by `B\n` changed one line, but the diff
    /// said the line after it was removed and added too.
    #[test]
    fn the_diff_holds_only_the_lines_that_changed() {
        let diff = |text: &str, old: &str, new: &str| edit(text, &input(old, new, false)).unwrap().2;
        assert_eq!(diff("a\nb\nc\nd\n", "b\n", "B\n"), "@@ -1,4 +1,4 @@\n a\n-b\n+B\n c\n d\n");
        assert_eq!(diff("a\nb\nc\nd\n", "b\nc", "b\nC"), "@@ -1,4 +1,4 @@\n a\n b\n-c\n+C\n d\n");
        assert_eq!(diff("a\nb\n", "b\n", "B\n"), "@@ -1,2 +1,2 @@\n a\n-b\n+B\n");
        assert_eq!(diff("a\nb\nc\n", "b\n", ""), "@@ -1,3 +1,2 @@\n a\n-b\n c\n");
        assert_eq!(diff("a\nc\n", "a\n", "a\nb\n"), "@@ -1,2 +1,3 @@\n a\n+b\n c\n");
        assert_eq!(diff("a\nb\nc", "b\n", "B"), "@@ -1,3 +1,2 @@\n a\n-b\n-c\n+Bc\n");
        let long = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        assert_eq!(diff(long, "5", "five"), "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
    }

    #[test]
    fn refuses_no_match_and_ambiguous_matches() {
        assert!(edit("abc", &input("x", "y", false)).unwrap_err().contains("not found"));
        let e = edit("x\nx\n", &input("x", "y", false)).unwrap_err();
        assert!(e.contains("2 times") && e.contains("lines 1, 2"), "{e}");
        assert_eq!(edit("x\nx\n", &input("x", "y", true)).unwrap().0, "y\ny\n");
    }

    #[test]
    fn keeps_crlf_bom_and_trailing_newline() {
        let (out, _, _) = edit("\u{feff}one\r\ntwo\r\n", &input("one\ntwo", "uno\ndos", false)).unwrap();
        assert_eq!(out, "\u{feff}uno\r\ndos\r\n");
        let (out, _, _) = edit("no newline at end", &input("end", "END", false)).unwrap();
        assert_eq!(out, "no newline at END");
    }

    #[test]
    fn destructive_means_deleting_much() {
        let big = "line\n".repeat(30);
        assert!(Edit.is_destructive(&input(&big, "", false)));
        assert!(!Edit.is_destructive(&input("a", "b", false)));
    }
}

#[cfg(test)]
mod small_inputs {
    use super::*;

    #[test]
    fn hunk_never_panics_on_small_inputs() {
        let alphabet = ['a', '\n', 'é', '\r'];
        let mut bodies = vec![String::new()];
        let mut all = vec![String::new()];
        for _ in 0..5 {
            bodies = bodies.iter().flat_map(|b| alphabet.iter().map(move |c| format!("{b}{c}"))).collect();
            all.extend(bodies.iter().cloned());
        }
        let news = ["", "x", "\n", "a\n", "\r\n", "é\n\n"];
        for body in &all {
            let chars: Vec<(usize, char)> = body.char_indices().collect();
            let bounds: Vec<usize> = chars.iter().map(|(i, _)| *i).chain([body.len()]).collect();
            for (si, &s) in bounds.iter().enumerate() {
                for &e in &bounds[si + 1..] {
                    let old = &body[s..e];
                    for new in news {
                        for every in [false, true] {
                            let input = EditInput {
                                file_path: "f".into(),
                                old_string: old.into(),
                                new_string: new.into(),
                                replace_all: every,
                            };
                            let _ = std::panic::catch_unwind(|| edit(body, &input))
                                .unwrap_or_else(|_| panic!("{body:?} {old:?} {new:?} {every}"));
                        }
                    }
                }
            }
        }
    }
}
