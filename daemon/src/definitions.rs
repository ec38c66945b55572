//! Definition files: Markdown with YAML front matter that define skills
//! (`SKILL.md`) and sub-agents (`.claude/agents/*.md`), read only from
//! where they belong and only when the session's rules let them be read.

use std::path::{Path, PathBuf};

/// A front matter's `key: value` pairs, in order.
pub type FrontMatter = Vec<(String, String)>;

/// Splits `text` into its YAML front matter's `key: value` pairs (plain or
/// quoted scalars; what else YAML allows is ignored) and the body.
pub fn front_matter(text: &str) -> Result<(FrontMatter, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text.strip_prefix("---").and_then(|r| r.strip_prefix('\n').or_else(|| r.strip_prefix("\r\n")))
    else {
        return Err("no front matter (the file must start with ---)".into());
    };
    let end = rest
        .match_indices("\n---")
        .map(|(i, _)| i)
        .find(|i| rest[i + 4..].starts_with('\n') || rest[i + 4..].starts_with("\r\n") || rest.len() == i + 4)
        .ok_or("the front matter is not closed by ---")?;
    let (head, body) = (&rest[..end], &rest[end + 4..]);
    let body = body.trim_start_matches(['\r', '\n']);
    let mut pairs = Vec::new();
    for line in head.lines() {
        let line = line.trim_end();
        if line.trim().is_empty() || line.trim_start().starts_with('#') || line.starts_with([' ', '\t', '-']) {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            return Err(format!("front matter line {line:?} is not key: value"));
        };
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        pairs.push((key.trim().to_owned(), value.to_owned()));
    }
    Ok((pairs, body))
}

/// Whether `name` may name a skill (no path separators, no dot-dot).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && !name.contains("..")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

/// `path`'s real path when it lies inside `root`'s real path: a symlink
/// out of a skills or agents directory is not followed there.
pub fn contained(root: &Path, path: &Path) -> Option<PathBuf> {
    let root = std::fs::canonicalize(root).ok()?;
    let real = std::fs::canonicalize(path).ok()?;
    real.starts_with(&root).then_some(real)
}

/// Whether a session may read `path` as a skill or agent file: not in
/// agentd's state directory, not under a `Read` deny rule.
pub fn readable(rules: &crate::permission::rules::RuleSet, path: &Path) -> Result<(), String> {
    if crate::fs::in_state_dir(path) {
        return Err("it is in agentd's state directory".into());
    }
    if crate::fs::is_secret(path) {
        return Err(crate::fs::SECRET_REFUSAL.into());
    }
    if let Some(rule) = rules.read_denied(path) {
        return Err(format!("the rule {} ({}) denies reading it", rule.text, rule.origin.source));
    }
    Ok(())
}

/// A definition file read: its front matter, body, and the SHA-256 of its
/// whole text (what the user approved, for a workspace's file).
pub struct Definition {
    /// The front matter's pairs.
    pub pairs: FrontMatter,
    /// What follows the front matter.
    pub body: String,
    /// The SHA-256 of the file's text.
    pub sha256: String,
}

/// A definition file (SKILL.md, `.claude/agents/*.md`) of `root`, read
/// and split. `Err` says why it is left out: it leads outside `root`,
/// `rules` deny reading it, it is larger than `max_bytes`, it has no front
/// matter, or — a workspace's file, `trust` given — the user has not
/// approved this content.
pub fn read_definition(
    root: &Path,
    file: &Path,
    rules: &crate::permission::rules::RuleSet,
    max_bytes: u64,
    trust: Option<&crate::trust::TrustStore>,
) -> Result<Definition, String> {
    let real = contained(root, file).ok_or_else(|| format!("leads outside {}; left out", root.display()))?;
    readable(rules, &real).map_err(|why| format!("{why}; left out"))?;
    if std::fs::metadata(&real).map_or(true, |m| !m.is_file() || m.len() > max_bytes) {
        return Err(format!("not a file of at most {max_bytes} bytes"));
    }
    let text = std::fs::read_to_string(&real).map_err(|e| e.to_string())?;
    if let Some(trust) = trust
        && !trust.trusted(file, text.as_bytes())
    {
        return Err(NOT_TRUSTED.into());
    }
    let (pairs, body) = front_matter(&text)?;
    Ok(Definition { pairs, body: body.to_owned(), sha256: crate::trust::sha256(text.as_bytes()) })
}

/// Why a workspace's definition the user has not approved is left out.
pub const NOT_TRUSTED: &str = "its content is not trusted yet (approve it with `agentctl trust`); left out";
