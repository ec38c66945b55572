//! What a session takes from the settings files: permission rules, the
//! sandbox's user settings, whether bypass mode is allowed, hooks, and the
//! environment of its commands.
//!
//! The files, in order: the workspace's own (`.agentd/settings.json`,
//! `.claude/settings.json`, `.claude/settings.local.json`), then the
//! user's (`~/.config/agentd/settings.json`, and `~/.claude/settings.json`
//! when the former says `"importClaudeSettings": true`).

use std::path::{Path, PathBuf};

use agentd_protocol::session::SessionInfo;

/// A settings file that applies to a workspace, read once: every reader
/// (rules, hooks, env, bypass) takes this text, so what was judged
/// trusted is what is obeyed.
pub(super) struct SettingsFile {
    pub path: PathBuf,
    /// The workspace's own, not the user's.
    pub project: bool,
    /// Its text (`None`: not there), or why it could not be read.
    pub text: Result<Option<String>, String>,
    /// The user approved this text (`crate::trust`); the user's own files
    /// always are.
    pub trusted: bool,
}

impl SettingsFile {
    /// Its text parsed, when it is there and JSON.
    fn value(&self) -> Option<serde_json::Value> {
        self.text.as_ref().ok()?.as_deref().and_then(|t| serde_json::from_str(t).ok())
    }
}

/// The session's rules: its own, then the workspace's files', then the
/// user's. Rules that cannot be read are reported in `info.rule_errors`
/// and ignored.
pub(super) fn session_rules(info: &mut SessionInfo, files: &[SettingsFile]) -> crate::permission::rules::RuleSet {
    use crate::permission::rules::{Origin, RuleError, RuleSet, SettingsOwner};
    let mut rules = RuleSet::default();
    let p = &info.permissions;
    rules.add(&Origin::session("session", &info.cwd), &p.allow, &p.deny, &p.ask);
    // The workspace's own are its own even when the workspace is the home
    // directory and so holds the user's file too.
    for file in files {
        let owner = if file.project { SettingsOwner::Workspace { trusted: file.trusted } } else { SettingsOwner::User };
        match &file.text {
            Ok(Some(text)) => rules.add_settings_text(&file.path, text, &info.cwd, owner),
            Ok(None) => {}
            Err(e) => rules.errors.push(RuleError {
                origin: file.path.display().to_string(),
                index: 0,
                text: String::new(),
                message: e.clone(),
            }),
        }
    }
    info.rule_errors = rules.errors.iter().map(|e| e.to_string()).collect();
    info.rules_in_force = rules_in_force(&rules, files);
    info.settings_notes = claude_settings_not_imported().into_iter().collect();
    // The session's own domain lists for the network gate: a domain that
    // does not parse is reported (and left out) here too.
    let (_, domain_errors) = crate::sandbox::gate::GatePolicy::from_options(&info.sandbox, false);
    info.rule_errors.extend(domain_errors);
    rules
}

/// Each rule of `rules` with where it comes from (issue 49 #10: rules from
/// settings files were in force but nowhere to be seen).
fn rules_in_force(
    rules: &crate::permission::rules::RuleSet,
    files: &[SettingsFile],
) -> Vec<agentd_protocol::session::RuleInForce> {
    use crate::permission::rules::RuleKind as Kind;
    use agentd_protocol::session::{RuleInForce, RuleKind, RuleSource};
    let claude = user_settings_file().map(|(_, home)| home.join(".claude/settings.json"));
    rules
        .rules
        .iter()
        .map(|r| {
            let file = files.iter().find(|f| f.path.display().to_string() == r.origin.source);
            let source = match file {
                None => RuleSource::Session,
                Some(f) if f.project => RuleSource::Project,
                Some(f) if Some(&f.path) == claude.as_ref() => RuleSource::ClaudeImport,
                Some(_) => RuleSource::User,
            };
            RuleInForce {
                kind: match r.kind {
                    Kind::Allow => RuleKind::Allow,
                    Kind::Deny => RuleKind::Deny,
                    Kind::Ask => RuleKind::Ask,
                },
                rule: r.text.clone(),
                source,
                file: file.map(|f| f.path.clone()),
            }
        })
        .collect()
}

/// A note when the user has Claude Code settings (`~/.claude/settings.json`)
/// that agentd does not read as theirs, because agentd's own settings file
/// does not say `"importClaudeSettings": true`: their rules and hooks are
/// then silently not in force.
pub(crate) fn claude_settings_not_imported() -> Option<String> {
    let (file, home) = user_settings_file()?;
    let claude = home.join(".claude/settings.json");
    let imported = read(&file).is_some_and(|v| v["importClaudeSettings"].as_bool() == Some(true));
    (!imported && claude.is_file()).then(|| {
        format!(
            "{} exists but is not read: its permission rules, hooks and env are not in force; to use them, put \
             \"importClaudeSettings\": true in {}",
            claude.display(),
            file.display()
        )
    })
}

/// The session's command hooks: its own, the user's, and the workspace's
/// once it is trusted (`info.enable_project_hooks`); what cannot be used
/// goes to `info.hook_errors`.
pub(super) fn session_hooks(info: &mut SessionInfo, files: &[SettingsFile]) -> crate::hooks::HookSet {
    let sources: Vec<crate::hooks::config::SettingsSource<'_>> = files
        .iter()
        .map(|f| crate::hooks::config::SettingsSource {
            path: &f.path,
            project: f.project,
            text: f.text.as_ref().map(|t| t.as_deref()).map_err(String::as_str),
            approved: f.trusted,
        })
        .collect();
    let mut set = crate::hooks::config::resolve(info.session_hooks.as_ref(), &sources, info.enable_project_hooks);
    info.hook_errors = set.errors.clone();
    set.env = info.env.clone();
    set.config_files = files
        .iter()
        .map(|f| {
            let source = match (f.project, f.path.ends_with(".claude/settings.local.json")) {
                (false, _) => "user_settings",
                (true, true) => "local_settings",
                (true, false) => "project_settings",
            };
            (f.path.clone(), source)
        })
        .collect();
    set
}

/// The session's command environment (`info.env`): the user's settings'
/// `env` (agentd's file, then the imported Claude Code file), then the
/// session's own. A workspace's file cannot set it — a repository that
/// put `PATH` or `LD_PRELOAD` there would choose what the user's allowed
/// commands run — and saying so goes to `info.rule_errors`, as does an
/// entry that is not a usable variable. Call after [`session_rules`].
pub(super) fn session_env(info: &mut SessionInfo, files: &[SettingsFile]) {
    let mut env = std::collections::BTreeMap::new();
    // The user's in the order they override each other: the imported
    // Claude Code file first, agentd's own after it.
    for file in files.iter().rev() {
        let Some(value) = file.value() else { continue };
        let Some(entries) = value.get("env") else { continue };
        if file.project {
            info.rule_errors.push(format!(
                "{}: env: not applied; a workspace's settings cannot set the environment of commands (set it in \
                 your own settings file or in session/create)",
                file.path.display()
            ));
            continue;
        }
        let Some(entries) = entries.as_object() else {
            info.rule_errors.push(format!("{}: env: must be an object of names and strings", file.path.display()));
            continue;
        };
        for (name, value) in entries {
            let value = match value {
                serde_json::Value::String(s) => s.clone(),
                // Claude Code takes numbers and booleans as their text.
                serde_json::Value::Number(n) => n.to_string(),
                serde_json::Value::Bool(b) => b.to_string(),
                _ => {
                    info.rule_errors.push(format!("{}: env.{name}: must be a string", file.path.display()));
                    continue;
                }
            };
            match check_env(name, &value) {
                Ok(()) => {
                    env.insert(name.clone(), value);
                }
                Err(why) => info.rule_errors.push(format!("{}: env.{name}: {why}", file.path.display())),
            }
        }
    }
    env.extend(info.session_env.iter().flatten().map(|(k, v)| (k.clone(), v.clone())));
    info.env = env;
}

/// Why `name=value` cannot be given to a command, if it cannot.
pub(crate) fn check_env(name: &str, value: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let well_formed = chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !well_formed {
        return Err("not a variable name ([A-Za-z_][A-Za-z0-9_]*)".into());
    }
    if name.starts_with("AGENTD_") || name == "TMPDIR" {
        return Err(format!("{name} is the daemon's own"));
    }
    if value.contains('\0') {
        return Err("the value holds a NUL byte".into());
    }
    if value.len() > 64 * 1024 {
        return Err("the value is longer than 64 KiB".into());
    }
    Ok(())
}

/// Whether the user's settings trust the workspace `cwd` with its own
/// hooks (`projects.<cwd>.enableProjectHooks: true`, as project MCP
/// servers are enabled). Never read from the workspace's own files.
pub(super) fn user_trusts_project_hooks(cwd: &Path) -> bool {
    user_settings()
        .is_some_and(|u| u["projects"][cwd.to_string_lossy().as_ref()]["enableProjectHooks"].as_bool() == Some(true))
}

/// The settings files that apply to a workspace, each read once: the
/// workspace's (trusted or not, by `trust`), then the user's.
pub(super) fn settings_files(cwd: &Path, trust: &crate::trust::TrustStore) -> Vec<SettingsFile> {
    let file = |path: PathBuf, project: bool| {
        let text = match crate::fs::read_settings(&path) {
            Ok(text) => Ok(Some(text)),
            // A directory is a sandbox's placeholder for a file that is not there.
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::IsADirectory) => Ok(None),
            Err(e) => Err(format!("cannot be read: {e}")),
        };
        let trusted = match &text {
            Ok(Some(t)) if project => trust.trusted(&path, t.as_bytes()),
            _ => true,
        };
        SettingsFile { path, project, text, trusted }
    };
    let mut files: Vec<SettingsFile> =
        crate::trust::SETTINGS_FILES.iter().map(|rel| file(cwd.join(rel), true)).collect();
    if let Some((user, home)) = user_settings_file() {
        let user = file(user, false);
        let import = user.value().is_some_and(|v| v["importClaudeSettings"].as_bool() == Some(true));
        files.push(user);
        let claude = home.join(".claude/settings.json");
        // The user's own Claude Code settings. In a session on the home
        // directory they are also the workspace's file: imported, they are
        // the user's there too (their hooks run untrusted as the user's do).
        match files.iter_mut().find(|f| f.path == claude) {
            Some(f) if import => {
                f.project = false;
                f.trusted = true;
            }
            Some(_) => {}
            None if import => files.push(file(claude, false)),
            None => {}
        }
    }
    files
}

/// The user's agentd settings file and the home directory.
fn user_settings_file() -> Option<(PathBuf, PathBuf)> {
    let abs = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let home = abs(std::env::var_os("HOME"))?;
    let config = abs(std::env::var_os("XDG_CONFIG_HOME")).unwrap_or_else(|| home.join(".config"));
    Some((config.join("agentd/settings.json"), home))
}

fn read(file: &Path) -> Option<serde_json::Value> {
    crate::fs::read_settings(file).ok().and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
}

/// A session's sandbox options: what `session/create` named, else the
/// defaults with Claude Code's `sandbox.autoAllowBashIfSandboxed`; in both
/// cases plus the Unix sockets the user's settings open
/// (`sandbox.network.allowUnixSockets`, `allowAllUnixSockets`). Read from
/// the user's settings file only: a repository must not grant its own
/// commands more.
pub(super) fn user_sandbox_settings(
    asked: Option<agentd_protocol::session::SandboxOptions>,
) -> agentd_protocol::session::SandboxOptions {
    let named = asked.is_some();
    let mut options = asked.unwrap_or_default();
    // Only the user's own settings give the whole network.
    options.network_allow_all = false;
    let value = user_settings();
    if let Some(sandbox) = value.as_ref().and_then(|v| v.get("sandbox")) {
        options.network_allow_all = sandbox["network"]["allowAll"].as_bool() == Some(true);
        if !named {
            options.auto_allow =
                sandbox.get("autoAllowBashIfSandboxed").and_then(|v| v.as_bool()).unwrap_or(false).into();
        }
        let network = &sandbox["network"];
        if network["strictAllowlist"].as_bool() == Some(true) {
            options.strict_allowlist = true;
        }
        if network["allowAllUnixSockets"].as_bool() == Some(true) {
            options.allow_all_unix_sockets = true;
        }
        for path in network["allowUnixSockets"].as_array().into_iter().flatten().filter_map(|p| p.as_str()) {
            if !options.allow_unix_sockets.iter().any(|p2| p2 == path) {
                options.allow_unix_sockets.push(path.to_owned());
            }
        }
    }
    options
}

/// The user's agentd settings file, parsed (`None` when absent or not
/// JSON).
fn user_settings() -> Option<serde_json::Value> {
    read(&user_settings_file()?.0)
}

/// Whether the user's settings give confined commands the whole network
/// (`sandbox.network.allowAll: true`), for `daemon/info`.
pub fn user_network_allow_all() -> bool {
    user_settings().is_some_and(|v| v["sandbox"]["network"]["allowAll"].as_bool() == Some(true))
}

/// What forbids `bypass` mode, if anything: `AGENTD_DISABLE_BYPASS=1` in
/// the daemon's environment, or `"disableBypassPermissionsMode": "disable"`
/// under `permissions` in a settings file (Claude Code's key).
/// (A workspace's file need not be trusted to take bypass away.)
pub(super) fn bypass_disabled_by(files: &[SettingsFile]) -> Option<String> {
    if std::env::var("AGENTD_DISABLE_BYPASS").is_ok_and(|v| !v.is_empty() && v != "0") {
        return Some("AGENTD_DISABLE_BYPASS in the daemon's environment".to_owned());
    }
    files.iter().find_map(|file| {
        let value = file.value()?;
        (value["permissions"]["disableBypassPermissionsMode"] == "disable").then(|| file.path.display().to_string())
    })
}
