//! Which hooks a session has: Claude Code's `hooks` entries, read from the
//! settings files and `session/create`, with the workspace's own entries
//! only once the workspace is trusted.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentd_protocol::hooks::{HookEvent, HookInfo};
use serde_json::Value;

/// A command hook's `timeout` when it names none (Claude Code's: ten
/// minutes).
pub const DEFAULT_TIMEOUT_S: u64 = 600;

/// Longest `timeout` a hook may name (a day).
pub const MAX_TIMEOUT_S: u64 = 86_400;

/// Most hook entries kept from all files (the rest are reported).
const MAX_HOOKS: usize = 256;

/// What a hook's `matcher` matches, as Claude Code 2.1 reads it: absent,
/// empty, `*` or `.*` matches everything; letters, digits, `_`, spaces,
/// `-`, `,` and `|` alone are exact, case-sensitive names split on `|` or
/// `,` (`Edit|Write`, `Edit, Write`); anything else is a regular
/// expression, not anchored (`mcp__github__.*`, `Notebook.*`). A tool's
/// other names match too (`Agent` matches `Task`).
#[derive(Clone)]
pub struct Matcher {
    text: String,
    kind: MatchKind,
}

#[derive(Clone)]
enum MatchKind {
    All,
    Names(Vec<String>),
    Pattern(Arc<grep_regex::RegexMatcher>),
}

impl Matcher {
    /// Parses `text`; `Err` says why a pattern cannot be used.
    pub fn parse(text: &str) -> Result<Matcher, String> {
        let kind = if text.is_empty() || text == "*" || text == ".*" {
            MatchKind::All
        } else if text.chars().all(|c| c.is_ascii_alphanumeric() || "_|, -".contains(c)) {
            MatchKind::Names(text.split(['|', ',']).map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
        } else {
            let pattern = grep_regex::RegexMatcherBuilder::new()
                .build(text)
                .map_err(|e| format!("matcher {text:?} is not a regular expression agentd can use: {e}"))?;
            MatchKind::Pattern(Arc::new(pattern))
        };
        Ok(Matcher { text: text.to_owned(), kind })
    }

    /// Whether `subject` (a tool name, a notification type, …) matches.
    pub fn matches(&self, subject: &str) -> bool {
        self.matches_one(subject)
            || family_of(subject).is_some_and(|f| self.matches_one(f))
            || ALIASES
                .iter()
                .any(|(a, b)| (subject == *a && self.matches_one(b)) || (subject == *b && self.matches_one(a)))
    }

    fn matches_one(&self, subject: &str) -> bool {
        match &self.kind {
            MatchKind::All => true,
            MatchKind::Names(names) => names.iter().any(|n| n == subject),
            MatchKind::Pattern(p) => grep_matcher::Matcher::is_match(&**p, subject.as_bytes()).unwrap_or(false),
        }
    }

    /// The matcher as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The files a FileChanged matcher names: its `|`-separated entries,
    /// as written (not a pattern).
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.text.split('|').map(str::trim).filter(|e| !e.is_empty() && *e != "*")
    }

    /// Whether it is for `subject` at `event`: a FileChanged matcher names
    /// its files; another event's matcher chooses among its moments (and
    /// one whose matcher Claude Code ignores matches everything).
    pub fn selects(&self, event: HookEvent, subject: &str) -> bool {
        match event {
            HookEvent::FileChanged => self.files().any(|f| f == subject),
            _ if !event.has_matcher() => true,
            _ => self.matches(subject),
        }
    }
}

/// Files FileChanged hooks may watch in one session, at most.
pub const MAX_WATCHED: usize = 64;

/// Tool names of agentd's and the names Claude Code's current release
/// gives the same tools: a matcher naming either matches.
const ALIASES: &[(&str, &str)] =
    &[("Task", "Agent"), ("TaskStop", "KillShell"), ("TaskStop", "KillBash"), ("Brief", "SendUserMessage")];

/// Tools whose calls are also another tool's (their rule family): a
/// matcher or an `if` naming the family covers them (a Bash guard hook
/// runs for Monitor's commands).
pub const FAMILIES: &[(&str, &str)] = &[("Monitor", "Bash")];

/// The family `tool` belongs to, if any.
pub fn family_of(tool: &str) -> Option<&'static str> {
    FAMILIES.iter().find(|(t, _)| *t == tool).map(|(_, f)| *f)
}

/// Where a `type: "http"` hook posts the moment's JSON.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpTarget {
    /// The URL (http or https).
    pub url: String,
    /// Headers to send; `$VAR` and `${VAR}` in a value are replaced by the
    /// variable when `allowedEnvVars` names it (and it is no credential),
    /// by nothing otherwise.
    pub headers: Vec<(String, String)>,
    /// `allowedEnvVars`.
    pub allowed_env: Vec<String>,
}

/// One hook: `type: "command"` (a program) or `type: "http"` (a POST).
#[derive(Clone)]
pub struct CommandHook {
    /// The shell command line (with `args`: the program; an http hook's
    /// URL, for the events that name it).
    pub command: String,
    /// `type: "http"`: where it posts instead of running a program.
    pub http: Option<HttpTarget>,
    /// `type: "mcp_tool"`: the MCP tool it calls instead.
    pub mcp: Option<McpToolTarget>,
    /// It comes from a workspace's own settings file: its http headers
    /// take variables from the session's environment only, never the
    /// daemon's.
    pub workspace: bool,
    /// `args`: the program is run with these, no shell.
    pub args: Option<Vec<String>>,
    /// `shell: "bash"`: `bash -c` instead of `sh -c`.
    pub bash: bool,
    /// How long it may run.
    pub timeout: Duration,
    /// The entry named its timeout (SessionEnd hooks that do not get 1.5 s,
    /// as in Claude Code).
    pub timeout_set: bool,
    /// `onFailure: "block"`: a hook that fails, times out or prints
    /// invalid JSON blocks, as exit code 2 would.
    pub fail_closed: bool,
    /// `async: true`: started and not waited for.
    pub background: bool,
    /// `once: true`: runs the first time it matches only.
    pub once: bool,
    /// `if`: a permission rule (`Bash(git *)`) the call must match for the
    /// hook to run — on tool events only; on others the hook is skipped,
    /// as in Claude Code 2.1.332.
    pub condition: Option<String>,
    /// Where it was read from (a file's path, or `session`).
    pub source: Arc<str>,
}

impl CommandHook {
    /// Whether `other` runs the same thing the same way (Claude Code runs
    /// such duplicates once): the command, its arguments, its shell, and
    /// what its answer counts for. A copy that would change how a hook
    /// counts (a workspace's `async` copy of the user's guard) is not a
    /// duplicate: both run.
    pub fn same_as(&self, other: &CommandHook) -> bool {
        self.key() == other.key()
    }

    /// [`CommandHook::same_as`]'s key.
    pub fn key(&self) -> String {
        format!(
            "{}\0{:?}\0{}\0{}\0{}\0{}\0{:?}\0{:?}",
            self.command, self.args, self.bash, self.background, self.fail_closed, self.once, self.condition, self.http
        ) + &format!("\0{:?}", self.mcp)
    }
}

/// An `mcp_tool` hook's tool: one of the session's MCP servers' (as its
/// entry names the server), called with `input`, whose strings may name
/// `${path}` in the moment's JSON (`${tool_input.file_path}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpToolTarget {
    /// The server's entry name.
    pub server: String,
    /// The tool, as the server names it.
    pub tool: String,
    /// Its arguments, before `${…}` are filled in.
    pub input: serde_json::Map<String, Value>,
}

impl McpToolTarget {
    /// The arguments for the moment `hook_input`: each `${a.b}` in a
    /// string replaced by that value of the moment's JSON (a string as
    /// it is, anything else as JSON, nothing for what is missing or null),
    /// in strings at any depth.
    pub fn arguments(&self, hook_input: &Value) -> serde_json::Map<String, Value> {
        fn fill(v: &Value, from: &Value) -> Value {
            match v {
                Value::String(s) => Value::String(interpolate(s, from)),
                Value::Array(a) => Value::Array(a.iter().map(|x| fill(x, from)).collect()),
                Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), fill(x, from))).collect()),
                other => other.clone(),
            }
        }
        self.input.iter().map(|(k, v)| (k.clone(), fill(v, hook_input))).collect()
    }
}

/// `text` with each `${a.b}` replaced from `from` (see [`McpToolTarget::arguments`]).
fn interpolate(text: &str, from: &Value) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        let Some(end) = rest[at..].find('}') else { break };
        out.push_str(&rest[..at]);
        let path = &rest[at + 2..at + end];
        let found = path.split('.').try_fold(from, |v, key| v.get(key));
        match found {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) => out.push_str(s),
            Some(other) => out.push_str(&other.to_string()),
        }
        rest = &rest[at + end + 1..];
    }
    out.push_str(rest);
    out
}

/// Command hooks for one event and matcher.
#[derive(Clone)]
pub struct Group {
    /// When they run.
    pub event: HookEvent,
    /// What they match.
    pub matcher: Matcher,
    /// What they run.
    pub hooks: Vec<CommandHook>,
}

/// Every command hook of a session, and what could not be used.
#[derive(Clone, Default)]
pub struct HookSet {
    /// In the order read: the session's, the user's, the workspace's.
    pub groups: Vec<Group>,
    /// Entries that cannot be used, with where they are.
    pub errors: Vec<String>,
    /// The session's command environment (`SessionInfo::env`), which
    /// command hooks get too.
    pub env: std::collections::BTreeMap<String, String>,
    /// The session's settings files and their ConfigChange `source`.
    pub config_files: Vec<(PathBuf, &'static str)>,
    count: usize,
}

impl HookSet {
    /// Adds the entries of a `hooks` value (Claude Code's shape) read from
    /// `source`; what does not fit the shape goes to `errors`.
    pub fn add(&mut self, source: &str, hooks: &Value) {
        let source: Arc<str> = Arc::from(source);
        let Some(events) = hooks.as_object() else {
            self.errors.push(format!(
                "{source}: hooks: must be an object of event names, got {}",
                agentd_protocol::json_kind(hooks)
            ));
            return;
        };
        for (name, groups) in events {
            let at = format!("{source}: hooks.{name}");
            let Some(event) = HookEvent::parse(name) else {
                self.errors.push(format!("{at}: not an event agentd runs (see the README's Hooks section)"));
                continue;
            };
            let Some(groups) = groups.as_array() else {
                self.errors.push(format!(
                    "{at}: must be an array of matcher groups, got {}",
                    agentd_protocol::json_kind(groups)
                ));
                continue;
            };
            for (g, group) in groups.iter().enumerate() {
                let at = format!("{at}[{g}]");
                let matcher = match group.get("matcher") {
                    None | Some(Value::Null) => Matcher::parse(""),
                    Some(Value::String(m)) => Matcher::parse(m),
                    Some(other) => Err(format!("matcher must be a string, got {}", agentd_protocol::json_kind(other))),
                };
                let matcher = match matcher {
                    Ok(m) => m,
                    Err(e) => {
                        self.errors.push(format!("{at}: {e}"));
                        continue;
                    }
                };
                let Some(entries) = group.get("hooks").and_then(Value::as_array) else {
                    self.errors.push(format!("{at}: hooks must be an array of hooks"));
                    continue;
                };
                let mut kept = Vec::new();
                for (h, entry) in entries.iter().enumerate() {
                    let at = format!("{at}.hooks[{h}]");
                    match command_hook(entry, &source) {
                        Ok(_) if self.count >= MAX_HOOKS => {
                            self.errors.push(format!("{at}: more than {MAX_HOOKS} hooks; left out"));
                        }
                        Ok(hook) => {
                            self.count += 1;
                            kept.push(hook);
                        }
                        Err(e) => self.errors.push(format!("{at}: {e}")),
                    }
                }
                if !kept.is_empty() {
                    self.groups.push(Group { event, matcher, hooks: kept });
                }
            }
        }
    }

    /// Whether any hook would run for `event` on `subject`.
    pub fn wants(&self, event: HookEvent, subject: &str) -> bool {
        self.groups.iter().any(|g| g.event == event && g.matcher.selects(event, subject))
    }

    /// The files FileChanged hooks watch, each once (at most
    /// [`MAX_WATCHED`]).
    pub fn watched_files(&self) -> Vec<String> {
        let mut files: Vec<String> = Vec::new();
        for g in self.groups.iter().filter(|g| g.event == HookEvent::FileChanged) {
            for f in g.matcher.files() {
                if files.len() < MAX_WATCHED && !files.iter().any(|w| w == f) {
                    files.push(f.to_owned());
                }
            }
        }
        files
    }

    /// The hooks to run for `event` on `subject`: each command once (the
    /// same command line in two places runs once, as in Claude Code).
    pub fn matching(&self, event: HookEvent, subject: &str) -> Vec<CommandHook> {
        let mut out: Vec<CommandHook> = Vec::new();
        for group in self.groups.iter().filter(|g| g.event == event && g.matcher.selects(event, subject)) {
            for hook in &group.hooks {
                if !out.iter().any(|h| h.same_as(hook)) {
                    out.push(hook.clone());
                }
            }
        }
        out
    }

    /// Whether there are no hooks at all.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The hooks as `session/get` lists them.
    pub fn info(&self) -> Vec<HookInfo> {
        self.groups
            .iter()
            .flat_map(|g| {
                g.hooks.iter().map(|h| HookInfo {
                    event: g.event,
                    matcher: g.matcher.text().to_owned(),
                    command: Some(h.command.clone()),
                    hook_id: None,
                    source: h.source.to_string(),
                    timeout: h.timeout.as_secs(),
                })
            })
            .collect()
    }
}

fn command_hook(entry: &Value, source: &Arc<str>) -> Result<CommandHook, String> {
    let Some(map) = entry.as_object() else {
        return Err(format!("must be an object, got {}", agentd_protocol::json_kind(entry)));
    };
    let (http, mcp) = match map.get("type").and_then(Value::as_str) {
        Some("command") => (None, None),
        Some("http") => (Some(http_target(map)?), None),
        Some("mcp_tool") => (None, Some(mcp_target(map)?)),
        Some(other) => {
            return Err(format!(
                "type {other:?} is not run by agentd (\"command\", \"http\" and \"mcp_tool\" hooks run: a prompt or \
                 agent hook needs a model)"
            ));
        }
        None => return Err("type must be \"command\", \"http\" or \"mcp_tool\"".into()),
    };
    let command = match (&http, &mcp, map.get("command")) {
        (Some(target), _, _) => target.url.clone(),
        (_, Some(target), _) => format!("mcp_tool {} {}", target.server, target.tool),
        (None, None, Some(Value::String(c))) if !c.trim().is_empty() => c.clone(),
        _ => return Err("command must be a non-empty string".into()),
    };
    let (timeout, timeout_set) = match map.get("timeout") {
        None | Some(Value::Null) => (DEFAULT_TIMEOUT_S, false),
        Some(v) => match v.as_f64() {
            Some(t) if t > 0.0 && t <= MAX_TIMEOUT_S as f64 => (t.ceil() as u64, true),
            _ => return Err(format!("timeout must be a number of seconds from 1 to {MAX_TIMEOUT_S}, got {v}")),
        },
    };
    let args = match map.get("args") {
        None | Some(Value::Null) => None,
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            Some(a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        }
        Some(other) => {
            return Err(format!("args must be an array of strings, got {}", agentd_protocol::json_kind(other)));
        }
    };
    let bash = match map.get("shell").and_then(Value::as_str) {
        None => false,
        Some("bash") => true,
        Some(other) => return Err(format!("shell {other:?} is not run by agentd (only bash and sh)")),
    };
    let condition = match map.get("if") {
        None | Some(Value::Null) => None,
        Some(Value::String(rule)) => {
            // Checked now (an error is reported, the hook not run), read
            // again where the session's workspace is known.
            let origin = crate::permission::rules::Origin::session("hook if", Path::new("/"));
            crate::permission::rules::parse(rule, crate::permission::rules::RuleKind::Allow, &origin, 0)
                .map_err(|e| format!("if {rule:?} is not a permission rule: {}", e.message))?;
            Some(rule.clone())
        }
        Some(other) => return Err(format!("if must be a permission rule, got {}", agentd_protocol::json_kind(other))),
    };
    let flag = |key: &str| map.get(key).and_then(Value::as_bool) == Some(true);
    let fail_closed = match map.get("onFailure").and_then(Value::as_str) {
        None | Some("continue") => false,
        Some("block") => true,
        Some(other) => return Err(format!("onFailure must be \"continue\" or \"block\", got {other:?}")),
    };
    Ok(CommandHook {
        command,
        http,
        mcp,
        workspace: false,
        args,
        bash,
        timeout: Duration::from_secs(timeout),
        timeout_set,
        fail_closed,
        background: flag("async") || flag("asyncRewake"),
        once: flag("once"),
        condition,
        source: source.clone(),
    })
}

/// An mcp_tool hook's target, from its entry.
fn mcp_target(map: &serde_json::Map<String, Value>) -> Result<McpToolTarget, String> {
    let text = |key: &str| match map.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.trim().to_owned()),
        _ => Err(format!("an mcp_tool hook needs {key} (a non-empty string)")),
    };
    let input = match map.get("input") {
        None | Some(Value::Null) => serde_json::Map::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(other) => return Err(format!("input must be an object, got {}", agentd_protocol::json_kind(other))),
    };
    Ok(McpToolTarget { server: text("server")?, tool: text("tool")?, input })
}

/// An http hook's target, from its entry.
fn http_target(map: &serde_json::Map<String, Value>) -> Result<HttpTarget, String> {
    let url = match map.get("url") {
        Some(Value::String(u)) => u.trim().to_owned(),
        _ => return Err("an http hook needs a url".into()),
    };
    match url::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => {}
        _ => return Err(format!("url {url:?} is not an http(s) URL")),
    }
    let headers = match map.get("headers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Object(h)) => h
            .iter()
            .map(|(k, v)| match v {
                Value::String(v)
                    if http::HeaderName::try_from(k.as_str()).is_ok() && !v.contains(['\r', '\n', '\0']) =>
                {
                    Ok((k.clone(), v.clone()))
                }
                _ => Err(format!("header {k:?} must be a header name with a one-line string value")),
            })
            .collect::<Result<_, _>>()?,
        Some(other) => return Err(format!("headers must be an object, got {}", agentd_protocol::json_kind(other))),
    };
    let allowed_env = match map.get("allowedEnvVars") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            a.iter().filter_map(Value::as_str).map(str::to_owned).collect()
        }
        Some(other) => {
            return Err(format!("allowedEnvVars must be an array of names, got {}", agentd_protocol::json_kind(other)));
        }
    };
    Ok(HttpTarget { url, headers, allowed_env })
}

/// A settings file, read by the caller, and whether it is the workspace's
/// own.
pub struct SettingsSource<'a> {
    /// The file.
    pub path: &'a Path,
    /// The workspace's (project or local settings), not the user's.
    pub project: bool,
    /// Its text (`None`: not there), or why it could not be read.
    pub text: Result<Option<&'a str>, &'a str>,
    /// The user approved this text (`crate::trust`; the user's own files
    /// always are): a workspace's file's hooks run only then.
    pub approved: bool,
}

/// The session's hooks: its own (`session/create`), then each settings
/// file's; the workspace's files only when `trusted` (otherwise their
/// hooks are reported as not run). `disableAllHooks: true` in a user's
/// file turns every hook off; in a workspace's file, the workspace's.
pub fn resolve(session: Option<&Value>, files: &[SettingsSource<'_>], trusted: bool) -> HookSet {
    let mut set = HookSet::default();
    let mut read: Vec<(bool, bool, String, Value)> = Vec::new();
    for file in files {
        let text = match file.text {
            Ok(Some(t)) => t,
            Ok(None) => continue,
            Err(e) => {
                set.errors.push(format!("{}: {e}", file.path.display()));
                continue;
            }
        };
        match serde_json::from_str::<Value>(text) {
            Ok(v) => read.push((file.project, file.approved, file.path.display().to_string(), v)),
            // The permission rules report it too; hooks say they are off.
            Err(e) => set.errors.push(format!("{}: not JSON ({e}); its hooks do not run", file.path.display())),
        }
    }
    let off = |v: &Value| v.get("disableAllHooks").and_then(Value::as_bool) == Some(true);
    if read.iter().any(|(project, _, _, v)| !project && off(v)) {
        return set;
    }
    let project_off = read.iter().any(|(project, _, _, v)| *project && off(v));
    if let Some(hooks) = session {
        set.add("session", hooks);
    }
    // The user's before the workspace's: where both name a hook, the
    // user's entry is the one that runs.
    read.sort_by_key(|(project, _, _, _)| *project);
    for (project, approved, source, value) in &read {
        let Some(hooks) = value.get("hooks") else { continue };
        if *project && project_off {
            continue;
        }
        let n: usize =
            hooks.as_object().map(|o| o.values().filter_map(Value::as_array).map(Vec::len).sum()).unwrap_or(0);
        if *project && !approved {
            set.errors.push(format!(
                "{source}: {n} hook group(s) not run: the file's content is not trusted yet (approve it with \
                 `agentctl trust`)"
            ));
            continue;
        }
        if *project && !trusted {
            set.errors.push(format!(
                "{source}: {n} hook group(s) not run: the workspace is not trusted (session/create \
                 enable_project_hooks, agentctl session create --enable-project-hooks, or \
                 projects.<workspace>.enableProjectHooks in the user's settings)"
            ));
            continue;
        }
        let first = set.groups.len();
        set.add(source, hooks);
        for group in &mut set.groups[first..] {
            for hook in &mut group.hooks {
                hook.workspace = *project;
            }
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_mcp_tool_hooks_input_is_filled_from_the_moment() {
        let target = McpToolTarget {
            server: "s".into(),
            tool: "t".into(),
            input: json!({ "path": "${tool_input.file_path}", "all": ["${tool_input}", "${nope.x}!", 3],
                "deep": { "e": "${hook_event_name}:${tool_input.n}" }, "open": "${unclosed" })
            .as_object()
            .unwrap()
            .clone(),
        };
        let moment =
            json!({ "hook_event_name": "PreToolUse", "tool_input": { "file_path": "/w/a.rs", "n": 2, "z": null } });
        let args = Value::Object(target.arguments(&moment));
        assert_eq!(args["path"], "/w/a.rs");
        assert_eq!(args["all"], json!([r#"{"file_path":"/w/a.rs","n":2,"z":null}"#, "!", 3]));
        assert_eq!(args["deep"]["e"], "PreToolUse:2");
        assert_eq!(args["open"], "${unclosed", "an unclosed ${{ stays as written");
    }

    #[test]
    fn matchers_read_as_claude_code_reads_them() {
        let m = |t: &str| Matcher::parse(t).unwrap();
        for all in ["", "*"] {
            assert!(m(all).matches("Bash") && m(all).matches("mcp__x__y"));
        }
        assert!(m("Bash").matches("Bash"));
        assert!(!m("Bash").matches("bash"), "names are case-sensitive");
        assert!(!m("Edit").matches("NotebookEdit"), "a plain name is exact");
        assert!(m("Edit|Write").matches("Write") && !m("Edit|Write").matches("Read"));
        assert!(m("Edit | Write").matches("Write"), "spaces around | are trimmed");
        assert!(m("Edit, Write").matches("Write"), "commas separate names too");
        assert!(m(".*").matches("anything"));
        assert!(m("Agent").matches("Task") && m("Task").matches("Task"), "Claude Code's newer names match");
        for old in ["KillShell", "KillBash", "TaskStop"] {
            assert!(m(old).matches("TaskStop"), "{old}: a matcher written for an earlier name still matches");
        }
        assert!(!m("mcp__memory").matches("mcp__memory__x"), "a plain name is a whole name");
        assert!(m("mcp__github__.*").matches("mcp__github__create_issue"));
        assert!(!m("mcp__github__.*").matches("mcp__gitlab__x"));
        assert!(m("Notebook.*").matches("NotebookEdit"));
        assert!(m("Edit.*").matches("NotebookEdit"), "a pattern is not anchored");
        assert!(m("^Edit$").matches("Edit") && !m("^Edit$").matches("NotebookEdit"));
        assert!(Matcher::parse("(unclosed").is_err());
    }

    #[test]
    fn bad_entries_are_reported_and_the_rest_kept() {
        let mut set = HookSet::default();
        set.add(
            "f.json",
            &json!({
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [
                        {"type": "command", "command": "guard"},
                        {"type": "prompt", "prompt": "is this ok?"},
                        {"type": "command", "command": ""},
                        {"type": "command", "command": "slow", "timeout": 5},
                        {"type": "command", "command": "x", "timeout": -1},
                        7
                    ]},
                    {"matcher": 3, "hooks": []},
                    {"matcher": "(", "hooks": [{"type": "command", "command": "y"}]},
                    {"hooks": "no"}
                ],
                "UserPromptSubmit": [],
                "PostToolUse": {"not": "an array"}
            }),
        );
        assert_eq!(set.groups.len(), 1);
        let hooks = set.matching(HookEvent::PreToolUse, "Bash");
        assert_eq!(hooks.iter().map(|h| h.command.as_str()).collect::<Vec<_>>(), ["guard", "slow"]);
        assert_eq!(hooks[0].timeout, Duration::from_secs(DEFAULT_TIMEOUT_S));
        assert_eq!(hooks[1].timeout, Duration::from_secs(5));
        let errors = set.errors.join("\n");
        for needle in [
            "f.json: hooks.PreToolUse[0].hooks[1]: type \"prompt\"",
            "hooks[2]: command must be a non-empty string",
            "hooks[4]: timeout must be",
            "hooks[5]: must be an object",
            "PreToolUse[1]: matcher must be a string",
            "PreToolUse[2]: matcher \"(\"",
            "PreToolUse[3]: hooks must be an array",
            "hooks.UserPromptSubmit: not an event agentd runs",
            "hooks.PostToolUse: must be an array",
        ] {
            assert!(errors.contains(needle), "{needle} not in:\n{errors}");
        }
        let mut bad = HookSet::default();
        bad.add("g", &json!(["x"]));
        assert!(bad.errors[0].contains("must be an object"), "{:?}", bad.errors);
    }

    #[test]
    fn the_same_command_runs_once() {
        let mut set = HookSet::default();
        let entry = json!({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "g"}]},
                                           {"matcher": "*", "hooks": [{"type": "command", "command": "g"}]}]});
        set.add("a", &entry);
        set.add("b", &entry);
        assert_eq!(set.matching(HookEvent::PreToolUse, "Bash").len(), 1);
        assert_eq!(set.info().len(), 4, "all are listed");
        // One program, two scripts: two hooks; a copy that changes how it
        // counts is another hook too.
        let mut set = HookSet::default();
        set.add(
            "c",
            &json!({"PreToolUse": [{"hooks": [
                {"type": "command", "command": "python3", "args": ["g1.py"]},
                {"type": "command", "command": "python3", "args": ["g2.py"]},
                {"type": "command", "command": "python3", "args": ["g2.py"], "async": true}
            ]}]}),
        );
        assert_eq!(set.matching(HookEvent::PreToolUse, "Bash").len(), 3);
    }

    #[test]
    fn the_workspace_hooks_run_only_when_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let user = dir.path().join("user.json");
        let project = dir.path().join("project.json");
        let entry = |c: &str| json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": c}]}]}});
        let src =
            |path, project, text: &'static str| SettingsSource { path, project, text: Ok(Some(text)), approved: true };
        let (mine, theirs) = (entry("mine").to_string().leak() as &str, entry("theirs").to_string().leak() as &str);
        let files = [src(&user, false, mine), src(&project, true, theirs)];
        let commands = |set: &HookSet| {
            set.matching(HookEvent::PreToolUse, "Read").into_iter().map(|h| h.command).collect::<Vec<_>>()
        };
        let untrusted = resolve(None, &files, false);
        assert_eq!(commands(&untrusted), ["mine"]);
        assert!(untrusted.errors[0].contains("not trusted"), "{:?}", untrusted.errors);
        assert_eq!(commands(&resolve(Some(&entry("own")["hooks"]), &files, true)), ["own", "mine", "theirs"]);
        // Read in any order, the user's come before the workspace's.
        let reversed = [src(&project, true, theirs), src(&user, false, mine)];
        assert_eq!(commands(&resolve(None, &reversed, true)), ["mine", "theirs"]);
        // Content the user has not approved does not run, trusted workspace or not.
        let unapproved = [src(&user, false, mine), SettingsSource { approved: false, ..src(&project, true, theirs) }];
        let set = resolve(None, &unapproved, true);
        assert_eq!(commands(&set), ["mine"]);
        assert!(set.errors[0].contains("not trusted yet"), "{:?}", set.errors);
        // A workspace cannot turn the user's hooks off; the user can.
        let off = json!({"disableAllHooks": true}).to_string().leak() as &str;
        assert_eq!(commands(&resolve(None, &[src(&user, false, mine), src(&project, true, off)], true)), ["mine"]);
        let user_off = json!({"disableAllHooks": true, "hooks": entry("mine")["hooks"]}).to_string().leak() as &str;
        assert!(commands(&resolve(None, &[src(&user, false, user_off), src(&project, true, theirs)], true)).is_empty());
        let bad = resolve(None, &[src(&user, false, "{}"), src(&project, true, "{not json")], true);
        assert!(bad.errors[0].contains("not JSON"));
    }
}
