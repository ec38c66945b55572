//! Permission rules in Claude Code's settings syntax: `Tool`,
//! `Tool(specifier)`. `Bash(npm test)` is exact; `*` is a wildcard anywhere
//! (`Bash(npm run test *)`, `Bash(git * main)`, `Bash(* --version)`,
//! `Bash(ls*)`, `Bash(*)`), a trailing ` *` also matching the bare command;
//! the legacy `Bash(npm run test:*)` is `Bash(npm run test *)`; a quoted
//! specifier (`Bash("echo *")`) is exact. Bash rules match the programs a
//! command really runs (`shell::effective`: `/bin/rm`, `command rm`,
//! `timeout 5 rm`, `bash -c 'rm'` are all `rm`); `Read(src/**)`, `Edit(./docs/*.md)`, `Read(~/.ssh/**)`,
//! `Read(//abs/**)` are gitignore-style globs relative to the rule's origin;
//! `WebFetch(domain:example.com)`; `mcp__server__tool` and `mcp__server`.
//!
//! **Invariant:** a rule that cannot be judged never allows. A Bash allow
//! rule must match every sub-command of the parsed command (one rule per
//! part is enough); substitutions, expansions, assignments that change what
//! runs, subshells, functions and what the parser does not understand are
//! never allowed by a rule. A deny or ask rule applies when any sub-command
//! matches — or could, unseen: a computed program, arguments filled in at
//! run time for the program the rule names, or a command that cannot be
//! parsed (deny and ask rules fail closed).

use std::path::{Path, PathBuf};

pub(crate) use super::program_options::program_option;
mod from_settings;
use crate::shell;

/// Whose settings file a file is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettingsOwner {
    /// The user's own.
    User,
    /// The workspace's, and whether the user trusts its present content.
    Workspace {
        /// Approved (`crate::trust`).
        trusted: bool,
    },
}

/// What a rule says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleKind {
    /// Run without asking.
    Allow,
    /// Refuse.
    Deny,
    /// Ask first.
    Ask,
}

/// Where a rule came from, and so where its paths start (Claude Code's
/// anchors): `//path` at `/`, `~/path` at the home directory, `/path` at
/// `root`, `path` and `./path` at `cwd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// `session`, or the settings file.
    pub source: String,
    /// Where `/path` starts: the workspace for a session's and a
    /// workspace's own rules, the settings file's directory for the
    /// user's (`~/.claude` for `~/.claude/settings.json`).
    pub root: PathBuf,
    /// Where `path` and `./path` start: the session's workspace, whatever
    /// file the rule is in.
    pub cwd: PathBuf,
}

impl Origin {
    /// Rules given with a session (`session/create`, `allow_always`):
    /// every relative path starts at its workspace `cwd`.
    pub fn session(source: impl Into<String>, cwd: &Path) -> Origin {
        Origin { source: source.into(), root: cwd.to_owned(), cwd: cwd.to_owned() }
    }
}

/// A parsed rule.
#[derive(Debug, Clone)]
pub struct Rule {
    /// Allow, deny or ask.
    pub kind: RuleKind,
    /// The rule as written.
    pub text: String,
    /// The tool (or `mcp__server` prefix) it names.
    pub tool: String,
    spec: Spec,
    /// Where it came from.
    pub origin: Origin,
    /// It came from a workspace's own settings file (what a repository
    /// says about itself).
    pub workspace: bool,
}

impl Rule {
    /// Whether it names domains (`WebFetch(domain:…)`) rather than the
    /// whole tool.
    pub fn names_domain(&self) -> bool {
        matches!(self.spec, Spec::Domain(_))
    }
}

#[derive(Debug, Clone)]
enum Spec {
    /// No specifier: the whole tool.
    Any,
    /// `Bash(cmd)`: exactly this command.
    BashExact(String),
    /// `Bash(pat)` with `*` wildcards (the legacy `cmd:*` is `cmd *`).
    BashWildcard(String),
    /// A path glob (already absolute).
    Path(globset::GlobMatcher),
    /// `WebFetch(domain:x)`: parsed and kept; nothing matches it until the
    /// WebFetch tool exists.
    #[allow(dead_code)]
    Domain(String),
    /// `Task(Explore)`: calls that name exactly this (an agent type).
    Name(String),
    /// `Tool(param:value)` (Claude Code 2.1.332, e.g. `Agent(model:opus)`):
    /// calls whose input field `param` is `value` (`*` a wildcard; a
    /// number or a flag as its text).
    Param { key: String, pattern: String },
}

/// Whether `s` is a `param:value` naming one of Monitor's own fields
/// (`Monitor(description:deploy*)`): a param rule, not a command.
/// (`command:` is not one: `Monitor(command:rm *)` is `Monitor(rm *)`,
/// a command parsed as Bash's are, not the raw text compared.)
fn names_a_monitor_field(tool: &str, s: &str) -> bool {
    tool == "Monitor"
        && s.split_once(':').is_some_and(|(field, _)| ["description", "timeout_ms", "ws"].contains(&field.trim()))
}

/// A command rule's specifier: a Monitor's `command:` prefix dropped.
fn command_spec<'a>(tool: &str, s: &'a str) -> &'a str {
    let s = s.trim();
    match s.strip_prefix("command:") {
        Some(rest) if tool == "Monitor" => rest.trim(),
        _ => s,
    }
}

/// Whether `tool`'s rules name shell commands (`Tool(npm test:*)`).
fn takes_commands(tool: &str) -> bool {
    tool == "Bash" || tool == "Monitor"
}

/// `param:value` of a `Tool(param:value)` rule, when `s` is one.
fn param_spec(s: &str) -> Option<Spec> {
    let (key, value) = s.trim().split_once(':')?;
    let mut chars = key.chars();
    let identifier = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    (identifier && !value.trim().is_empty())
        .then(|| Spec::Param { key: key.to_owned(), pattern: value.trim().to_owned() })
}

/// A rule that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: rule {index} {text:?}: {message} (ignored)")]
pub struct RuleError {
    /// The file (or `session`).
    pub origin: String,
    /// Position in its list, from 0.
    pub index: usize,
    /// The rule.
    pub text: String,
    /// What is wrong.
    pub message: String,
}

/// Other names tools answer to in rules, as Claude Code's releases wrote
/// them: a rule on one is a rule on the tool (`Agent(Explore)` is
/// `Task(Explore)`). Each tool's own aliases are checked against this.
pub const TOOL_ALIASES: &[(&str, &str)] = &[
    ("Agent", "Task"),
    // TaskStop was KillShell in agentd until Claude Code 2.1.332 (and
    // KillBash before): a rule written for either still applies.
    ("KillBash", "TaskStop"),
    ("KillShell", "TaskStop"),
    ("ListPeers", "ListAgents"),
    ("SlashCommand", "Skill"),
    ("exit_plan_mode", "ExitPlanMode"),
];

/// The tool a rule's name means.
fn canonical_tool(name: &str) -> &str {
    TOOL_ALIASES.iter().find(|(alias, _)| *alias == name).map_or(name, |(_, tool)| tool)
}

/// Tools whose rules name what the call names (`Task(Explore)`).
const NAMED_TOOLS: &[&str] = &["Task"];

/// Tools whose path rules are `Read(...)` rules.
const READ_TOOLS: &[&str] = &["Read", "Glob", "Grep", "LS"];
/// Tools whose path rules are `Edit(...)` rules.
const EDIT_TOOLS: &[&str] = &["Edit", "Write", "NotebookEdit", "MultiEdit"];

/// Parses one rule.
pub fn parse(text: &str, kind: RuleKind, origin: &Origin, index: usize) -> Result<Rule, RuleError> {
    let err = |message: String| RuleError { origin: origin.source.clone(), index, text: text.to_owned(), message };
    let trimmed = text.trim();
    let (tool, spec) = match trimmed.find('(') {
        None => (trimmed, None),
        Some(open) => {
            let Some(inner) = trimmed[open + 1..].strip_suffix(')') else {
                return Err(err("a specifier must end with `)`".into()));
            };
            (&trimmed[..open], Some(inner))
        }
    };
    // `mcp__server__*`: every tool of one MCP server, as `mcp__server`.
    let name = match tool.strip_suffix("__*") {
        Some(server) if server.starts_with("mcp__") && server.matches("__").count() == 1 => server,
        _ => tool,
    };
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
        return Err(err("the tool name must be letters, digits, `_` or `-` (or `mcp__server__*`)".into()));
    }
    let tool = canonical_tool(tool);
    let spec = match spec {
        None => Spec::Any,
        Some(s) if s.trim().is_empty() => return Err(err("an empty specifier; write the tool name alone".into())),
        // `Bash(*)` is every command: the tool itself. A Monitor's command
        // is a shell command too: `Monitor(tail -f:*)` names it as Bash does.
        Some(s) if takes_commands(tool) && s.trim() == "*" => Spec::Any,
        Some(s) if takes_commands(tool) && !names_a_monitor_field(tool, s) => {
            bash_spec(command_spec(tool, s)).map_err(err)?
        }
        // The model writes a Monitor's description: it approves nothing.
        Some(s) if kind == RuleKind::Allow && names_a_monitor_field(tool, s) && s.trim().starts_with("description") => {
            return Err(err("an allow rule cannot name Monitor's description, which the model writes".into()));
        }
        // `Tool(param:value)` for tools whose specifier is not a command,
        // a path or a domain.
        Some(s)
            if tool != "WebFetch"
                && !READ_TOOLS.contains(&tool)
                && !EDIT_TOOLS.contains(&tool)
                && param_spec(s).is_some() =>
        {
            param_spec(s).ok_or_else(|| err("not param:value".into()))?
        }
        Some(s) if NAMED_TOOLS.contains(&tool) => {
            let name = s.trim();
            if name.contains(['(', ')', '*']) {
                return Err(err(format!("{tool} rules name one agent type exactly, as `{tool}(Explore)`")));
            }
            Spec::Name(name.to_owned())
        }
        Some(s) if tool == "WebFetch" => match s.strip_prefix("domain:") {
            Some(d) => Spec::Domain(domain_rule(d).map_err(err)?),
            None => return Err(err("WebFetch rules are `WebFetch(domain:example.com)`".into())),
        },
        Some(s) if READ_TOOLS.contains(&tool) || EDIT_TOOLS.contains(&tool) => {
            let pattern = absolute_pattern(s.trim(), origin);
            let glob = globset::GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| err(format!("not a glob: {e}")))?;
            Spec::Path(glob.compile_matcher())
        }
        Some(_) => {
            return Err(err(format!("{tool} takes no specifier here but param:value (as `{tool}(model:opus)`)")));
        }
    };
    Ok(Rule { kind, text: trimmed.to_owned(), tool: tool.to_owned(), spec, origin: origin.clone(), workspace: false })
}

/// A Bash rule's specifier.
fn bash_spec(s: &str) -> Result<Spec, String> {
    if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        let inner = s[1..s.len() - 1].replace("\\\"", "\"");
        if inner.trim().is_empty() {
            return Err("an empty quoted command".into());
        }
        return Ok(Spec::BashExact(normalize_words(&inner)));
    }
    if let Some(prefix) = s.strip_suffix(":*") {
        if prefix.trim().is_empty() || prefix.contains(":*") {
            return Err("`:*` must follow a command, at the end".into());
        }
        return Ok(Spec::BashWildcard(format!("{} *", normalize_words(prefix))));
    }
    if s.contains(":*") {
        return Err("`:*` may only end a rule (or write `*` where anything may follow)".into());
    }
    if s.contains('"') || s.contains('\'') {
        // A quote inside a pattern: quoting is not part of the command a
        // rule sees, so the rule would never match what the user meant.
        let unquoted = crate::shell::unquote(s);
        if unquoted.contains('*') {
            return Err("quote the whole rule for an exact command with `*` in it".into());
        }
        return Ok(Spec::BashExact(normalize_words(&unquoted)));
    }
    if s.contains('*') { Ok(Spec::BashWildcard(normalize_words(s))) } else { Ok(Spec::BashExact(normalize_words(s))) }
}

/// Words joined by single spaces, as commands are compared.
fn normalize_words(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `text` matches `pattern`, where `*` is any run of characters
/// and a trailing ` *` also matches nothing at all (`ls *` matches `ls`).
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    if let Some(bare) = pattern.strip_suffix(" *")
        && !bare.contains('*')
        && text == bare
    {
        return true;
    }
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match rest.find(middle) {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

/// A rule's path as an absolute glob, anchored as Claude Code anchors it:
/// `//abs` is absolute, `~/x` is in the home directory, `/x` is under
/// the origin's root, and `x` or `./x` (the same) under the session's
/// workspace. As in .gitignore, a relative pattern without a `/` but at
/// its end matches at any depth (`.env`, `./.env`, `*.pem`).
fn absolute_pattern(spec: &str, origin: &Origin) -> String {
    let pattern = anchored_pattern(spec, origin);
    // `secrets/` is the directory and what is in it, as in .gitignore.
    if spec.ends_with('/') { format!("{}/**", pattern.trim_end_matches('/')) } else { pattern }
}

fn anchored_pattern(spec: &str, origin: &Origin) -> String {
    if let Some(abs) = spec.strip_prefix("//") {
        return format!("/{}", abs.trim_start_matches('/'));
    }
    if let Some(rest) = spec.strip_prefix("~/") {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"));
        return home.join(rest).display().to_string();
    }
    if let Some(rest) = spec.strip_prefix('/') {
        return origin.root.join(rest).display().to_string();
    }
    let mut rel = spec;
    while let Some(rest) = rel.strip_prefix("./") {
        rel = rest;
    }
    if !rel.trim_end_matches('/').contains('/') {
        return origin.cwd.join("**").join(rel).display().to_string();
    }
    origin.cwd.join(rel).display().to_string()
}

/// What a call is, as far as rules are concerned.
#[derive(Debug, Clone)]
pub enum Facts {
    /// A Bash command (its text).
    Bash(String),
    /// A file tool's target, resolved (symlinks followed).
    Path(PathBuf),
    /// A URL's host, lower case.
    Domain(String),
    /// What the call names (Task's agent type).
    Name(String),
    /// Anything else.
    Other,
}

/// How a rule relates to a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// It covers the whole call.
    All,
    /// It covers a part (one sub-command): enough for deny and ask.
    Part,
    /// It does not apply.
    No,
}

impl Rule {
    /// Does this rule name `tool`?
    pub fn names(&self, tool: &str) -> bool {
        if self.tool == tool {
            return true;
        }
        let applies_by_kind = match &self.spec {
            Spec::Path(_) => {
                (self.tool == "Read" && READ_TOOLS.contains(&tool))
                    || (self.tool == "Edit" && EDIT_TOOLS.contains(&tool))
            }
            _ => false,
        };
        applies_by_kind || mcp_server_rule_names(&self.tool, tool)
    }

    /// How this rule matches a call of `tool` with `facts`.
    pub fn matches(&self, tool: &str, facts: &Facts) -> Match {
        self.matches_call(tool, facts, None)
    }

    /// [`Rule::matches`] with the call's `input` (what `Tool(param:value)`
    /// rules look at; without it they match nothing).
    pub fn matches_call(&self, tool: &str, facts: &Facts, input: Option<&serde_json::Value>) -> Match {
        if !self.names(tool) {
            return Match::No;
        }
        match (&self.spec, facts) {
            (Spec::Any, _) => Match::All,
            (Spec::Param { key, pattern }, _) => {
                let value = match input.and_then(|i| i.get(key)) {
                    // As tools read them: surrounding blanks do not count.
                    Some(serde_json::Value::String(s)) => s.trim().to_owned(),
                    Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => v.to_string(),
                    _ => return Match::No,
                };
                if wildcard_match(pattern, &value) { Match::All } else { Match::No }
            }
            (Spec::BashExact(_) | Spec::BashWildcard(_), Facts::Bash(command)) => self.match_bash(command, false),
            (Spec::Path(glob), Facts::Path(path)) => {
                if glob.is_match(path) {
                    Match::All
                } else {
                    Match::No
                }
            }
            // `domain:example.com` covers it and its subdomains.
            (Spec::Domain(domain), Facts::Domain(host)) => {
                let Some(host) = canonical_host(host) else { return Match::No };
                if domain_covers(domain, &host) { Match::All } else { Match::No }
            }
            (Spec::Name(name), Facts::Name(named)) => {
                if name == named {
                    Match::All
                } else {
                    Match::No
                }
            }
            _ => Match::No,
        }
    }

    /// Whether this rule covers a call of `tool` whose input, as the model
    /// sent it, is `input` (a hook's `if`): its command, the path it names
    /// (relative to the rule's `cwd`), its URL's host or its agent type,
    /// by what the rule's specifier is about. A rule that covers a part of
    /// a compound command covers the call (a guard runs for it).
    pub fn covers_input(&self, tool: &str, input: &serde_json::Value) -> bool {
        let text = |keys: &[&str]| keys.iter().find_map(|k| input.get(*k).and_then(serde_json::Value::as_str));
        let facts = match &self.spec {
            Spec::BashExact(_) | Spec::BashWildcard(_) => text(&["command"]).map(|c| Facts::Bash(c.to_owned())),
            Spec::Path(_) => text(&["file_path", "notebook_path", "path"]).map(|p| {
                let p = Path::new(p);
                Facts::Path(followed(&lexical(&if p.is_absolute() { p.to_owned() } else { self.origin.cwd.join(p) })))
            }),
            Spec::Domain(_) => text(&["url"])
                .and_then(|u| url::Url::parse(u.trim()).ok())
                .and_then(|u| u.host_str().map(|h| Facts::Domain(h.to_owned()))),
            Spec::Name(_) => text(&["subagent_type", "skill"]).map(|n| Facts::Name(n.trim().to_owned())),
            Spec::Any | Spec::Param { .. } => Some(Facts::Other),
        };
        facts.is_some_and(|f| self.matches_call(tool, &f, Some(input)) != Match::No)
    }

    /// Whether this Bash rule matches one command text.
    fn covers(&self, text: &str) -> bool {
        match &self.spec {
            Spec::BashExact(exact) => text == exact,
            Spec::BashWildcard(pattern) => wildcard_match(pattern, text),
            _ => false,
        }
    }

    /// The first word of this Bash rule's command (`rm` for `Bash(rm -rf *)`),
    /// `None` when it starts with a wildcard.
    fn first_word(&self) -> Option<&str> {
        let text = match &self.spec {
            Spec::BashExact(t) | Spec::BashWildcard(t) => t,
            _ => return None,
        };
        let word = text.split(' ').next()?;
        (!word.contains('*')).then_some(word)
    }

    /// How this rule matches `command`; with `redirects_ok`, output
    /// redirections do not keep an allow rule from covering it all.
    fn match_bash(&self, command: &str, redirects_ok: bool) -> Match {
        let Ok(script) = shell::parse(command) else {
            // Not understood: a deny/ask rule applies (fail closed); an
            // allow rule never does.
            return Match::Part;
        };
        let parts = shell::effective(&script);
        // What the text says before wrappers come off (`sudo rm x` for a
        // rule on sudo).
        let raw: Vec<String> = script
            .commands
            .iter()
            .filter_map(|c| {
                let program = c.program.as_deref()?;
                let program = program.rsplit('/').next().unwrap_or(program);
                Some(std::iter::once(program).chain(c.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" "))
            })
            .collect();
        let seen = |e: &shell::Effective| e.text().is_some_and(|t| self.covers(&t));
        // Could the rule match what runs, unseen?
        let unseen = |e: &shell::Effective| match (&e.program, self.first_word()) {
            (None, _) => true,
            (Some(p), Some(first)) => {
                let name = p.rsplit('/').next().unwrap_or(p);
                (e.opaque_args && p == first) || (p.contains('/') && name == first)
            }
            (Some(_), None) => e.opaque_args,
        };
        // git's global options (`git -C . push`) before its subcommand;
        // `None` when one is not known (it may take the subcommand as its
        // value): then a rule on git fails closed.
        let git_plain = |e: &shell::Effective| -> Option<Option<String>> {
            if e.program.as_deref() != Some("git") {
                return None;
            }
            const FLAGS: &[&str] = &[
                "--no-pager",
                "-p",
                "--paginate",
                "-P",
                "--bare",
                "--no-replace-objects",
                "--literal-pathspecs",
                "--glob-pathspecs",
                "--noglob-pathspecs",
                "--icase-pathspecs",
                "--no-optional-locks",
                "--no-advice",
                "--no-lazy-fetch",
            ];
            let mut i = 0;
            while i < e.args.len() {
                let a = e.args[i].as_str();
                if !a.starts_with('-') {
                    let words: Vec<&str> =
                        std::iter::once("git").chain(e.args[i..].iter().map(String::as_str)).collect();
                    return Some(Some(words.join(" ")));
                }
                let name = a.split('=').next().unwrap_or(a);
                if GIT_OPTIONS_WITH_VALUE.contains(&name) {
                    i += if a.contains('=') { 1 } else { 2 };
                } else if FLAGS.contains(&a) {
                    i += 1;
                } else {
                    return Some(None);
                }
            }
            Some(Some("git".to_owned()))
        };
        let git_hit = |e: &shell::Effective| match git_plain(e) {
            Some(Some(text)) => self.covers(&text),
            Some(None) => self.first_word().is_none_or(|w| w == "git"),
            None => false,
        };
        let any = script.opaque
            || parts.iter().any(|e| seen(e) || unseen(e) || git_hit(e))
            || raw.iter().any(|t| self.covers(t));
        if !any {
            return Match::No;
        }
        let wildcard = matches!(self.spec, Spec::BashWildcard(_));
        let runs_other = |e: &shell::Effective| {
            wildcard && e.program.as_deref().is_some_and(|p| program_option(p, &e.args).is_some())
        };
        let allowable = |e: &shell::Effective| {
            e.runs_inner
                || (seen(e)
                    && !runs_other(e)
                    && !e.opaque_args
                    && e.wrappers.iter().all(|w| ALLOW_THROUGH.contains(&w.as_str()))
                    && !e.assigns.iter().any(|a| shell::dangerous_assignment(a)))
        };
        let clean = !script.has_compound && (redirects_ok || script.commands.iter().all(|c| c.writes_files.is_empty()));
        if clean && parts.iter().all(allowable) { Match::All } else { Match::Part }
    }
}

/// git's global options that take a value as the next word (`git -C dir
/// show`): the subcommand comes after it.
pub(crate) const GIT_OPTIONS_WITH_VALUE: &[&str] = &[
    "-C",
    "-c",
    "--git-dir",
    "--work-tree",
    "--namespace",
    "--exec-path",
    "--super-prefix",
    "--config-env",
    "--attr-source",
    "--list-cmds",
];

/// Wrappers an allow rule sees through: they change nothing about what
/// the program may do (`sudo` does; `xargs` and `find -exec` fill in
/// arguments, which makes them opaque anyway).
const ALLOW_THROUGH: &[&str] =
    &["command", "builtin", "nice", "nohup", "time", "timeout", "stdbuf", "env", "bash", "sh"];

/// For an allow decision, every part must be matched by some allow rule:
/// one rule per part is enough (`git add . && git commit` under
/// `Bash(git add *)` and `Bash(git commit *)`).
fn bash_allowed_by_parts<'a>(rules: &'a [Rule], tool: &str, command: &str, redirects_ok: bool) -> Option<&'a Rule> {
    if tool != "Bash" {
        return None;
    }
    let script = shell::parse(command).ok()?;
    if script.has_compound || (!redirects_ok && script.commands.iter().any(|c| !c.writes_files.is_empty())) {
        return None;
    }
    let allows: Vec<&Rule> =
        rules.iter().filter(|r| r.kind == RuleKind::Allow && r.names(tool) && r.tool == "Bash").collect();
    let mut first = None;
    for e in shell::effective(&script) {
        if e.runs_inner {
            continue;
        }
        let text = e.text()?;
        if e.opaque_args
            || !e.wrappers.iter().all(|w| ALLOW_THROUGH.contains(&w.as_str()))
            || e.assigns.iter().any(|a| shell::dangerous_assignment(a))
        {
            return None;
        }
        let runs_other = e.program.as_deref().is_some_and(|p| program_option(p, &e.args).is_some());
        let rule = allows.iter().find(|r| {
            matches!(r.spec, Spec::Any) || (r.covers(&text) && !(runs_other && matches!(r.spec, Spec::BashWildcard(_))))
        })?;
        first.get_or_insert(*rule);
    }
    first
}

/// Every rule of a session, and the ones that could not be read.
#[derive(Debug, Clone, Default)]
pub struct RuleSet {
    /// The rules.
    pub rules: Vec<Rule>,
    /// Rules reported and ignored.
    pub errors: Vec<RuleError>,
}

impl RuleSet {
    /// Adds the `allow`, `deny` and `ask` lists from `origin`.
    pub fn add(&mut self, origin: &Origin, allow: &[String], deny: &[String], ask: &[String]) {
        for (kind, list) in [(RuleKind::Allow, allow), (RuleKind::Deny, deny), (RuleKind::Ask, ask)] {
            for (i, text) in list.iter().enumerate() {
                match parse(text, kind, origin, i) {
                    Ok(rule) => self.rules.push(rule),
                    Err(e) => {
                        tracing::warn!("{e}");
                        self.errors.push(e);
                    }
                }
            }
        }
    }

    /// Adds the `permissions` of a user's settings file, if it exists:
    /// its `/path` rules start at the file's directory, its relative ones
    /// at the session's workspace `cwd`.
    pub fn add_settings_file(&mut self, path: &Path, cwd: &Path) {
        if let Some(text) = self.read_settings_file(path) {
            self.add_settings_text(path, &text, cwd, SettingsOwner::User);
        }
    }

    /// Adds the `permissions` of a workspace's own settings file the user
    /// trusts (see [`RuleSet::add_settings_text`]).
    pub fn add_project_settings_file(&mut self, path: &Path, cwd: &Path) {
        if let Some(text) = self.read_settings_file(path) {
            self.add_settings_text(path, &text, cwd, SettingsOwner::Workspace { trusted: true });
        }
    }

    /// A settings file's text; `None` when it is not there, or (noted in
    /// `errors`) cannot be read.
    fn read_settings_file(&mut self, path: &Path) -> Option<String> {
        match crate::fs::read_settings(path) {
            Ok(text) => Some(text),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory) => None,
            Err(e) => {
                let source = path.display().to_string();
                self.errors.push(RuleError { origin: source, index: 0, text: String::new(), message: e.to_string() });
                None
            }
        }
    }

    /// The deny rule that forbids reading `path` (a `Read(...)` rule, which
    /// covers Read, Glob and Grep), if any.
    pub fn read_denied(&self, path: &Path) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.kind == RuleKind::Deny && r.tool == "Read" && matches!(&r.spec, Spec::Path(glob) if glob.is_match(path))
        })
    }

    /// The ask rule that keeps reading `path` for the user (a `Read(...)`
    /// rule), if any.
    pub fn read_asked(&self, path: &Path) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.kind == RuleKind::Ask && r.tool == "Read" && matches!(&r.spec, Spec::Path(glob) if glob.is_match(path))
        })
    }

    /// Whether a `Read` allow rule covers `path` or what is inside it (the
    /// sandbox then shows a credential file or directory it would hide).
    pub fn read_allowed(&self, path: &Path) -> bool {
        let inside = path.join("x");
        self.rules.iter().any(|r| {
            r.kind == RuleKind::Allow
                && r.tool == "Read"
                && matches!(&r.spec, Spec::Path(glob) if glob.is_match(path) || glob.is_match(&inside))
        })
    }

    /// The files and directories `Read` deny rules name literally (no
    /// wildcard), absolute: the sandbox hides them from commands.
    pub fn denied_read_paths(&self) -> Vec<PathBuf> {
        self.literal_denies(&["Read"])
    }

    /// The files and directories `Edit`/`Write` deny rules name literally:
    /// the sandbox binds them read-only, so no program — an interpreter,
    /// git, `dd` — writes them however it is spelled.
    pub fn denied_edit_paths(&self) -> Vec<PathBuf> {
        self.literal_denies(&["Edit", "Write"])
    }

    /// The paths deny rules on `tools` name without a wildcard (a name at
    /// any depth, `**/.env`, counts for the one at the top).
    fn literal_denies(&self, tools: &[&str]) -> Vec<PathBuf> {
        self.rules
            .iter()
            .filter(|r| r.kind == RuleKind::Deny && tools.contains(&r.tool.as_str()))
            .filter_map(|r| match &r.spec {
                Spec::Path(glob) => {
                    let p = glob.glob().glob();
                    let p = match p.rsplit_once("/**/") {
                        Some((base, name)) if !base.contains(['*', '?', '[', '{']) => format!("{base}/{name}"),
                        _ => p.to_owned(),
                    };
                    (!p.contains(['*', '?', '[', '{'])).then(|| PathBuf::from(p))
                }
                _ => None,
            })
            .collect()
    }

    /// The first `Read` deny rule that can match a path inside `dir` (or
    /// `dir` itself): its pattern's literal part before any wildcard lies
    /// inside `dir`, or `dir` inside it. `Read(~/.aws/**)` cannot reach a
    /// repository in `/srv/ws`; `Read(**/.env)` reaches every directory.
    pub fn read_deny_reaching(&self, dir: &Path) -> Option<&Rule> {
        self.rules.iter().find(|r| {
            r.kind == RuleKind::Deny
                && r.tool == "Read"
                && match &r.spec {
                    Spec::Path(glob) => {
                        let literal: PathBuf = Path::new(glob.glob().glob())
                            .components()
                            .take_while(|c| !c.as_os_str().to_string_lossy().contains(['*', '?', '[', '{', '\\']))
                            .collect();
                        literal.starts_with(dir) || dir.starts_with(&literal)
                    }
                    _ => true,
                }
        })
    }

    /// Whether some `Read` deny rule is a pattern (not one path).
    pub fn has_read_deny_patterns(&self) -> bool {
        self.rules.iter().any(|r| {
            r.kind == RuleKind::Deny
                && r.tool == "Read"
                && matches!(&r.spec, Spec::Path(glob) if glob.glob().glob().contains(['*', '?', '[', '{']))
        })
    }

    /// The strongest rule for a call: deny beats ask beats allow. An allow
    /// rule must cover the whole call; deny and ask rules any part of it.
    pub fn decide(&self, tool: &str, facts: &Facts) -> Option<&Rule> {
        self.decide_call(tool, facts, None)
    }

    /// [`RuleSet::decide`] for a call whose input is `input`
    /// (`Tool(param:value)` rules look at it).
    pub fn decide_call(&self, tool: &str, facts: &Facts, input: Option<&serde_json::Value>) -> Option<&Rule> {
        let find = |kind: RuleKind, need_all: bool| {
            self.rules.iter().find(|r| {
                r.kind == kind && {
                    let m = r.matches_call(tool, facts, input);
                    if need_all { m == Match::All } else { m != Match::No }
                }
            })
        };
        find(RuleKind::Deny, false)
            .or_else(|| find(RuleKind::Ask, false))
            .or_else(|| find(RuleKind::Allow, true))
            .or_else(|| match facts {
                Facts::Bash(command) => bash_allowed_by_parts(&self.rules, tool, command, false),
                _ => None,
            })
    }

    /// The allow rule that covers a Bash `command` but for its output
    /// redirections (`Bash(npm test:*)` for `npm test > out.txt`): in
    /// `accept_edits` a redirection into the workspace is an edit, which
    /// the mode allows. Only when no deny or ask rule matches any part.
    pub fn allow_but_for_redirects(&self, command: &str) -> Option<&Rule> {
        let facts = Facts::Bash(command.to_owned());
        let hit = |kind: RuleKind| self.rules.iter().any(|r| r.kind == kind && r.matches("Bash", &facts) != Match::No);
        if hit(RuleKind::Deny) || hit(RuleKind::Ask) {
            return None;
        }
        self.rules
            .iter()
            .find(|r| {
                r.kind == RuleKind::Allow
                    && r.names("Bash")
                    && match (&r.spec, &facts) {
                        (Spec::Any, _) => true,
                        (Spec::BashExact(_) | Spec::BashWildcard(_), Facts::Bash(c)) => {
                            r.match_bash(c, true) == Match::All
                        }
                        _ => false,
                    }
            })
            .or_else(|| bash_allowed_by_parts(&self.rules, "Bash", command, true))
    }
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;

/// Does `rule` (a rule's tool part) name every tool of one MCP server —
/// `mcp__server` or `mcp__server__*` — and is `tool` one of them?
pub fn mcp_server_rule_names(rule: &str, tool: &str) -> bool {
    let server = rule.strip_suffix("__*").unwrap_or(rule);
    server.starts_with("mcp__")
        && server.matches("__").count() == 1
        && server.len() > "mcp__".len()
        && tool
            .strip_prefix(server)
            .and_then(|rest| rest.strip_prefix("__"))
            .is_some_and(|name| !name.is_empty() && !name.starts_with('_'))
}

/// Does a rule (as written) name MCP tools: `mcp__…`, or the MCP resource
/// tools?
fn names_mcp(rule: &str) -> bool {
    let tool = rule.trim().split('(').next().unwrap_or("");
    tool.starts_with("mcp__")
        || ["ListMcpResources", "ReadMcpResource", "ListMcpResourcesTool", "ReadMcpResourceTool"].contains(&tool)
}

/// A host as rules compare it: lower case, no trailing dot, IDNA to
/// ASCII, an IP address in its one spelling (IPv4 inside IPv6 as IPv4).
/// `None` for what is no host.
pub fn canonical_host(host: &str) -> Option<String> {
    let host = host.trim().trim_end_matches('.');
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
    if let Ok(ip) = bare.parse::<std::net::IpAddr>() {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(std::net::IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        return Some(ip.to_string());
    }
    match url::Host::parse(host).ok()? {
        url::Host::Domain(d) => Some(d.to_ascii_lowercase()),
        url::Host::Ipv4(v4) => Some(v4.to_string()),
        url::Host::Ipv6(v6) => Some(v6.to_ipv4_mapped().map(|v4| v4.to_string()).unwrap_or_else(|| v6.to_string())),
    }
}

/// Whether the (checked) rule domain `domain` covers the canonical `host`:
/// the same, or a subdomain of it.
pub fn domain_covers(domain: &str, host: &str) -> bool {
    host == domain || host.strip_suffix(domain).is_some_and(|rest| rest.ends_with('.'))
}

/// The domain of a `WebFetch(domain:…)` rule, checked: a host name (a
/// leading `*.` is the same as none: subdomains are always covered) or an
/// IP address; a scheme, port, path or other wildcard is an error rather
/// than a rule that never matches.
pub fn domain_rule(raw: &str) -> Result<String, String> {
    let d = raw.trim();
    let d = d.strip_prefix("*.").unwrap_or(d);
    if d.is_empty() {
        return Err("an empty domain".into());
    }
    if d.contains("://") || d.contains('/') || d.contains('@') || d.contains('*') || d.contains(char::is_whitespace) {
        return Err(format!("{raw:?} is not a domain: write the host alone, e.g. domain:example.com"));
    }
    let bracketed = d.starts_with('[');
    if !bracketed && d.contains(':') && d.parse::<std::net::IpAddr>().is_err() {
        return Err(format!("{raw:?} is not a domain: rules name hosts, not ports"));
    }
    canonical_host(d).ok_or_else(|| format!("{raw:?} is not a valid domain"))
}

/// The stricter of two rules' answers about one call: deny before ask
/// before allow; either when only one answers.
pub fn stricter<'a>(a: Option<&'a Rule>, b: Option<&'a Rule>) -> Option<&'a Rule> {
    let rank = |r: &Rule| match r.kind {
        RuleKind::Deny => 0,
        RuleKind::Ask => 1,
        RuleKind::Allow => 2,
    };
    match (a, b) {
        (Some(a), Some(b)) => Some(if rank(b) < rank(a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Where `path` leads: its links followed (for a path not there yet, its
/// directory's), as a call's own path is judged.
fn followed(path: &Path) -> PathBuf {
    if let Ok(real) = std::fs::canonicalize(path) {
        return real;
    }
    match (path.parent().map(std::fs::canonicalize), path.file_name()) {
        (Some(Ok(dir)), Some(name)) => dir.join(name),
        _ => path.to_owned(),
    }
}

/// `path` with `.` and `..` taken out, without touching the file system.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
