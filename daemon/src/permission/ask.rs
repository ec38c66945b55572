//! Asking the client: open `permission/request`s waiting
//! for `permission/respond`, and the rules `allow_always` answers added.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agentd_protocol::permission::{PermissionDecision, PermissionRespondParams};
use tokio::sync::oneshot;

use super::PermissionTarget;

/// Answers to AskUserQuestion's questions: question text → answer.
pub type Answers = std::collections::BTreeMap<String, String>;
use super::rules::{Facts, Origin, Rule, RuleKind, RuleSet, parse};

use crate::sync::MutexExt;

/// A client's answer, as the waiting call sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Run it (with the user's answers, for AskUserQuestion).
    Allow(Option<Answers>),
    /// Refuse it, with the client's message if any; `no_user`: the client
    /// refused on its own, no person was asked.
    Deny { message: Option<String>, no_user: bool },
    /// The call was cancelled while it waited.
    Cancelled,
}

struct Pending {
    answer: oneshot::Sender<Answer>,
    suggestions: Vec<String>,
    turn_id: String,
    tool_use_id: String,
}

/// Why a `permission/respond` was refused (nothing was changed).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RespondError {
    /// No open request has this id (never asked, already answered, timed out).
    #[error("no open permission request {0:?} in this session (already answered, timed out, or cancelled)")]
    UnknownRequest(String),
    /// `allow_always` without a rule, and the request suggested none.
    #[error("allow_always needs a rule: this request has no suggestion, so pass one in `rule`")]
    NoRule,
    /// The rule does not parse.
    #[error("{0}")]
    BadRule(String),
}

/// A session's open permission requests and granted rules.
pub struct Asks {
    pending: Mutex<HashMap<String, Pending>>,
    granted: Mutex<RuleSet>,
    base: PathBuf,
}

impl Asks {
    /// Nothing asked or granted yet; relative rules start at `base` (the
    /// session's cwd).
    pub fn new(base: PathBuf) -> Asks {
        Asks { pending: Mutex::new(HashMap::new()), granted: Mutex::new(RuleSet::default()), base }
    }

    /// Opens a request for a call; the receiver gets the answer.
    pub fn open(
        &self,
        suggestions: Vec<String>,
        turn_id: &str,
        tool_use_id: &str,
    ) -> (String, oneshot::Receiver<Answer>) {
        let id = format!("perm_{}", uuid::Uuid::new_v4().simple());
        let (tx, rx) = oneshot::channel();
        let pending =
            Pending { answer: tx, suggestions, turn_id: turn_id.to_owned(), tool_use_id: tool_use_id.to_owned() };
        lock(&self.pending).insert(id.clone(), pending);
        (id, rx)
    }

    /// Denies the open requests of the calls `which` picks (by turn id and
    /// tool_use id): they were cancelled while waiting. Returns their
    /// tool_use ids.
    pub fn cancel_where(&self, which: impl Fn(&str, &str) -> bool) -> Vec<String> {
        let mut pending = lock(&self.pending);
        let ids: Vec<String> =
            pending.iter().filter(|(_, p)| which(&p.turn_id, &p.tool_use_id)).map(|(id, _)| id.clone()).collect();
        let mut cancelled = Vec::new();
        for id in ids {
            if let Some(p) = pending.remove(&id) {
                let _ = p.answer.send(Answer::Cancelled);
                cancelled.push(p.tool_use_id);
            }
        }
        cancelled
    }

    /// Closes a request nobody answered; false when an answer came first.
    pub fn forget(&self, request_id: &str) -> bool {
        lock(&self.pending).remove(request_id).is_some()
    }

    /// Answers a request. `allow_always` adds its rule first (and fails,
    /// answering nothing, when there is none or it does not parse).
    /// Returns the rule added.
    pub fn respond(&self, p: &PermissionRespondParams) -> Result<Option<String>, RespondError> {
        let mut pending = lock(&self.pending);
        let Some(open) = pending.get(&p.request_id) else {
            return Err(RespondError::UnknownRequest(p.request_id.clone()));
        };
        let mut added = None;
        if p.decision == PermissionDecision::AllowAlways {
            let text = p.rule.clone().or_else(|| open.suggestions.first().cloned()).ok_or(RespondError::NoRule)?;
            let origin = Origin::session("session (allow_always)", &self.base);
            let mut granted = lock(&self.granted);
            let index = granted.rules.len();
            let rule =
                parse(&text, RuleKind::Allow, &origin, index).map_err(|e| RespondError::BadRule(e.to_string()))?;
            // Granting what is already granted adds nothing (a second
            // `allow_always` of one rule lists it once).
            if !granted.rules.iter().any(|r| r.text == rule.text) {
                granted.rules.push(rule);
            }
            added = Some(text);
        }
        let answer = match p.decision {
            PermissionDecision::Allow | PermissionDecision::AllowAlways => Answer::Allow(p.answers.clone()),
            PermissionDecision::Deny => Answer::Deny { message: p.message.clone(), no_user: p.no_user },
        };
        if let Some(open) = pending.remove(&p.request_id) {
            // The waiting call may have just been cancelled; then nobody listens.
            let _ = open.answer.send(answer);
        }
        Ok(added)
    }

    /// Grants `texts` again (a session restored after a restart); rules
    /// that no longer parse are skipped.
    pub fn restore_granted(&self, texts: &[String]) {
        let origin = Origin::session("session (allow_always)", &self.base);
        let mut granted = lock(&self.granted);
        for text in texts {
            let index = granted.rules.len();
            match parse(text, RuleKind::Allow, &origin, index) {
                Ok(rule) => granted.rules.push(rule),
                Err(e) => tracing::warn!("a granted rule of a restored session is dropped: {e}"),
            }
        }
    }

    /// The granted rule that allows this call, if any.
    pub fn granted(&self, tool: &str, facts: &Facts) -> Option<Rule> {
        lock(&self.granted).decide(tool, facts).cloned()
    }

    /// The granted `WebFetch(domain:…)` rule that covers `host`, if any (a
    /// bare `WebFetch` grant is about the tool, not the network gate).
    pub fn granted_domain(&self, host: &str) -> Option<Rule> {
        let facts = Facts::Domain(host.to_owned());
        lock(&self.granted)
            .rules
            .iter()
            .find(|r| {
                r.kind == super::rules::RuleKind::Allow
                    && r.names_domain()
                    && r.matches("WebFetch", &facts) == super::rules::Match::All
            })
            .cloned()
    }

    /// The rules granted so far, in order.
    pub fn granted_texts(&self) -> Vec<String> {
        lock(&self.granted).rules.iter().map(|r| r.text.clone()).collect()
    }

    /// The ids of the open requests, sorted.
    pub fn open_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.pending).keys().cloned().collect();
        ids.sort();
        ids
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.locked()
}

/// Rules that would allow calls like this one, best first: a command
/// prefix for Bash (`Bash(npm test:*)`), the file's directory for file
/// tools, the tool itself otherwise. A compound or unusual command gets
/// none: no single rule could be trusted to cover it.
pub fn suggestions(tool: &str, target: &PermissionTarget, facts: &Facts, cwd: &Path) -> Vec<String> {
    match (target, facts) {
        (PermissionTarget::Command(command), _) => {
            let plain = |w: &&str| w.chars().all(|c| c.is_ascii_alphanumeric() || "-_./:=@+,".contains(c));
            let words: Vec<&str> = command.split_whitespace().collect();
            if words.is_empty() || !words.iter().all(plain) {
                return Vec::new();
            }
            let mut out = Vec::new();
            // A sub-command (`npm test`, `git add`), not a file or a flag.
            let sub = |w: &&&str| w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-_:".contains(c));
            if let Some(second) = words.get(1).filter(|w| !w.starts_with('-')).filter(sub) {
                out.push(format!("{tool}({} {second}:*)", words[0]));
            }
            out.push(format!("{tool}({})", words.join(" ")));
            out
        }
        (PermissionTarget::Path(_), Facts::Path(path)) => {
            let dir = if path.is_dir() { path.as_path() } else { path.parent().unwrap_or(path) };
            let safe = |s: &str| !s.contains(['(', ')', '*', '?', '[', ']', '{', '}']);
            match dir.strip_prefix(cwd) {
                Ok(rel) if rel.as_os_str().is_empty() => vec![format!("{tool}(./**)")],
                Ok(rel) if safe(&rel.to_string_lossy()) => vec![format!("{tool}(./{}/**)", rel.display())],
                Ok(_) => Vec::new(),
                Err(_) if safe(&dir.to_string_lossy()) => vec![format!("{tool}(/{}/**)", dir.display())],
                Err(_) => Vec::new(),
            }
        }
        (PermissionTarget::Domain(domain), _) => vec![format!("{tool}(domain:{domain})")],
        (PermissionTarget::Name(name), _) if plain_name(name) => vec![format!("{tool}({name})"), tool.to_owned()],
        _ => vec![tool.to_owned()],
    }
}

/// A name a rule can hold as it is (no parentheses, no blanks).
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(c: &str) -> Vec<String> {
        suggestions("Bash", &PermissionTarget::Command(c.into()), &Facts::Bash(c.into()), Path::new("/ws"))
    }

    #[test]
    fn bash_suggestions_are_a_prefix_then_the_exact_command_and_none_for_compound_commands() {
        assert_eq!(cmd("npm test --watch"), ["Bash(npm test:*)", "Bash(npm test --watch)"]);
        assert_eq!(cmd("ls -la"), ["Bash(ls -la)"]);
        assert_eq!(cmd("touch a.txt"), ["Bash(touch a.txt)"]);
        assert!(cmd("echo hi && rm -rf x").is_empty());
        assert!(cmd("echo $(id)").is_empty());
        assert!(cmd("ls\ncurl x | sh").is_empty());
    }

    #[test]
    fn path_suggestions_name_the_directory_relative_to_the_workspace_or_absolute() {
        let s = |p: &str| {
            suggestions("Write", &PermissionTarget::Path(p.into()), &Facts::Path(PathBuf::from(p)), Path::new("/ws"))
        };
        assert_eq!(s("/ws/src/a.rs"), ["Write(./src/**)"]);
        assert_eq!(s("/ws/a.rs"), ["Write(./**)"]);
        assert_eq!(s("/tmp/x/a.rs"), ["Write(//tmp/x/**)"]);
        assert!(s("/ws/we*rd/a.rs").is_empty());
    }

    #[test]
    fn allow_always_adds_the_rule_and_a_bad_rule_answers_nothing() {
        let asks = Asks::new(PathBuf::from("/ws"));
        let (id, mut rx) = asks.open(vec!["Bash(npm test:*)".into()], "t", "c");
        let respond = |decision, rule: Option<&str>| PermissionRespondParams {
            session_id: "s".into(),
            request_id: id.clone(),
            decision,
            rule: rule.map(str::to_owned),
            message: None,
            answers: None,
            no_user: false,
        };
        assert!(matches!(
            asks.respond(&respond(PermissionDecision::AllowAlways, Some("Bash("))),
            Err(RespondError::BadRule(_))
        ));
        assert!(rx.try_recv().is_err(), "a refused answer leaves the request open");
        assert_eq!(asks.respond(&respond(PermissionDecision::AllowAlways, None)), Ok(Some("Bash(npm test:*)".into())));
        assert_eq!(rx.try_recv(), Ok(Answer::Allow(None)));
        assert!(asks.granted("Bash", &Facts::Bash("npm test -- x".into())).is_some());
        assert!(asks.granted("Bash", &Facts::Bash("npm test; rm x".into())).is_none());
        assert!(matches!(
            asks.respond(&respond(PermissionDecision::Allow, None)),
            Err(RespondError::UnknownRequest(_))
        ));
    }
}
