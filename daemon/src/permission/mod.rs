//! Permission decisions. The rule engine and modes come in
//! the permissions issue; this module defines the decision every layer
//! returns, so tools can already say what they think of a call.

/// The tool whose rules say which files may be read (`Read(path)`): what
/// an MCP resource read is judged as.
pub const READ_TOOL: &str = "Read";

pub mod ask;
pub mod policy;
mod program_options;
pub mod rules;
pub mod sandbox_settings;

use serde::Serialize;

/// What rules look at in a call: its command or its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionTarget {
    /// Nothing but the tool's name.
    None,
    /// A shell command (Bash).
    Command(String),
    /// A path as the model wrote it (file and search tools).
    Path(String),
    /// A URL's host, lower case (WebFetch): `WebFetch(domain:…)` rules.
    Domain(String),
    /// What the call names (Task's agent type): `Task(Explore)` rules.
    Name(String),
}

/// Names of files and directories that configure agentd or run code
/// later (`.git` hooks and config, agentd's and Claude Code's settings,
/// MCP servers, an editor's tasks and launch configurations, what git
/// clones), at any depth and in any case: a file tool's write to one asks
/// in every mode but `bypass`, whatever a rule or `accept_edits` says; a
/// command's change to one is not applied (`sandbox::layer`, which judges
/// `.git` by what git obeys in it: [`SETTINGS_NAMES`]).
pub const PROTECTED_NAMES: &[&str] = &[".git", ".agentd", ".claude", ".mcp.json", ".vscode", ".idea", ".gitmodules"];

/// [`PROTECTED_NAMES`] but `.git`: what a command's change never reaches.
pub const SETTINGS_NAMES: &[&str] = PROTECTED_NAMES.split_at(1).1;

/// Whether writing `path` (relative to the workspace, or absolute) would
/// change such a file: any component of it is one of [`PROTECTED_NAMES`],
/// in any case (`.Claude` is `.claude` on a case-insensitive directory).
pub fn is_protected(path: &std::path::Path) -> bool {
    path.components().any(|c| PROTECTED_NAMES.iter().any(|n| c.as_os_str().eq_ignore_ascii_case(n)))
}

/// [`std::path::Path::starts_with`], ignoring ASCII case: what a
/// case-insensitive directory would take for `prefix`.
pub fn starts_with_any_case(path: &std::path::Path, prefix: &std::path::Path) -> bool {
    let mut path = path.components();
    prefix.components().all(|p| path.next().is_some_and(|c| c.as_os_str().eq_ignore_ascii_case(p.as_os_str())))
}

/// Whether `real` (a real path) in the workspace `root` is a file no tool
/// writes unasked: a protected one (see [`is_protected`]), a link to one,
/// the user's own (see [`is_user_protected`]), or in the repository's git
/// directory wherever a `.git` file points.
pub fn names_protected(root: &std::path::Path, real: &std::path::Path) -> bool {
    let git_dir = || git_dir(root).and_then(|g| std::fs::canonicalize(g).ok());
    is_protected(real.strip_prefix(root).unwrap_or(real))
        || is_protected_target(root, real)
        || is_user_protected(real)
        || git_dir().is_some_and(|g| real.starts_with(g))
}

/// Whether `real` (a canonical path) is, or is inside, what one of the
/// workspace's protected names (`.mcp.json`, `.claude`, …) at its top
/// links to: writing through the link's target changes the protected file
/// as surely as writing it by name.
pub fn is_protected_target(root: &std::path::Path, real: &std::path::Path) -> bool {
    PROTECTED_NAMES.iter().any(|name| {
        let link = root.join(name);
        std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink())
            && std::fs::canonicalize(&link).is_ok_and(|target| real.starts_with(target))
    })
}

/// Directories of the user's (relative to the home directory) that
/// configure agentd, git, the shell or a desktop, hold keys a login trusts,
/// or hold programs the user runs later.
pub const USER_PROTECTED_DIRS: &[&str] = &[
    ".config/agentd",
    ".claude",
    ".config/git",
    ".ssh",
    ".config/systemd",
    ".config/autostart",
    ".config/environment.d",
    ".local/bin",
    ".local/lib",
    ".local/share/bash-completion",
    ".local/share/applications",
    ".vim",
    ".config/nvim",
    ".config/fish",
    ".config/tmux",
    ".config/Code/User",
    ".ipython",
    ".cargo/bin",
    ".rustup/toolchains",
    ".pyenv/versions",
    ".pyenv/shims",
    ".nvm",
    ".docker",
    ".kube",
    ".aws",
    ".gnupg",
    ".gradle",
    ".config/pip",
    ".pip",
    ".bashrc.d",
    ".zshrc.d",
    ".local/share/systemd",
    ".local/share/dbus-1",
    ".local/share/nvim",
    ".local/share/fish",
    ".oh-my-zsh",
    ".emacs.d",
    ".config/emacs",
    ".config/VSCodium/User",
    ".config/Code - OSS/User",
    ".config/direnv",
    ".config/kitty",
    ".config/alacritty",
    ".config/wezterm",
    ".config/starship.toml",
    ".sdkman",
    ".rvm",
    ".rbenv",
    ".asdf",
    ".volta",
];

/// Files of the user's, likewise: shell and tool start-up files, tool
/// configuration that names programs, credentials.
pub const USER_PROTECTED_FILES: &[&str] = &[
    ".claude.json",
    ".gitconfig",
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    ".bash_logout",
    ".bash_aliases",
    ".bash_completion",
    ".pam_environment",
    ".inputrc",
    ".vimrc",
    ".xprofile",
    ".xinitrc",
    ".xsession",
    ".xsessionrc",
    ".gdbinit",
    ".hgrc",
    ".tmux.conf",
    ".config/go/env",
    ".cargo/env",
    ".cargo/config",
    ".cargo/config.toml",
    ".npmrc",
    ".yarnrc",
    ".condarc",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".m2/settings.xml",
    ".Rprofile",
    ".irbrc",
    ".pryrc",
    ".sqliterc",
    ".psqlrc",
    ".p10k.zsh",
    ".fzf.bash",
    ".fzf.zsh",
    ".emacs",
    ".envrc",
    ".wezterm.lua",
    ".pythonrc",
];

/// Files of the user's that configure agentd, git or the shell, or hold
/// keys a login trusts ([`USER_PROTECTED_DIRS`], [`USER_PROTECTED_FILES`]): protected like a workspace's settings when a
/// workspace holds them (a session on `$HOME`).
pub fn user_protected_paths() -> Vec<std::path::PathBuf> {
    let Some(home) = std::env::var_os("HOME").map(std::path::PathBuf::from) else { return Vec::new() };
    let mut out: Vec<std::path::PathBuf> =
        USER_PROTECTED_DIRS.iter().chain(USER_PROTECTED_FILES).map(|rel| home.join(rel)).collect();
    // Every directory on PATH under home: a program planted there shadows
    // the real one.
    if let Some(path) = std::env::var_os("PATH") {
        out.extend(std::env::split_paths(&path).filter(|d| d.starts_with(&home) && d != &home));
    }
    if let Some(config) = std::env::var_os("XDG_CONFIG_HOME") {
        out.push(std::path::PathBuf::from(config).join("agentd"));
    }
    out
}

/// Whether `path` (absolute) is or is inside one of [`user_protected_paths`]
/// (in any case, as for [`is_protected`]).
pub fn is_user_protected(path: &std::path::Path) -> bool {
    user_protected_paths().iter().any(|p| starts_with_any_case(path, p))
}

/// The git directory of the repository `start` is in, found as git finds
/// it: the nearest `.git` up the tree, a directory or a `gitdir:` file.
pub fn git_dir(start: &std::path::Path) -> Option<std::path::PathBuf> {
    for dir in start.ancestors() {
        let dot = dir.join(".git");
        let Ok(meta) = std::fs::metadata(&dot) else { continue };
        if meta.is_dir() {
            return Some(dot);
        }
        // Read as git reads it (a name with a newline or a trailing space,
        // a long file); else as before, naming what is not there yet; never
        // a FIFO's wait.
        if let Some(named) = git_dir_of(&dot) {
            return Some(named);
        }
        if !meta.is_file() {
            return None;
        }
        let text = std::fs::read_to_string(&dot).ok()?;
        let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
        return Some(dir.join(target));
    }
    None
}

/// The git directory a `.git` entry is or names (`gitdir: …`), read as
/// git reads it (attack on issue 48): through a symbolic link (git follows
/// one to a directory or to a file), a file of up to 4 × PATH_MAX bytes,
/// the path the whole rest of the file after `gitdir: ` but its trailing
/// newlines (a name may hold a newline or end in a space).
pub fn git_dir_of(entry: &std::path::Path) -> Option<std::path::PathBuf> {
    if std::fs::symlink_metadata(entry).ok()?.is_dir() {
        return Some(entry.to_path_buf());
    }
    let meta = std::fs::metadata(entry).ok()?;
    if meta.is_dir() {
        return std::fs::canonicalize(entry).ok();
    }
    if !meta.is_file() || meta.len() > GIT_FILE_MAX {
        return None;
    }
    let text = crate::fs::read_regular(entry, GIT_FILE_MAX).ok()?;
    let rest = text.strip_prefix(b"gitdir: ")?;
    let end = rest.iter().rposition(|&b| b != b'\n' && b != b'\r').map_or(0, |i| i + 1);
    let target = <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&rest[..end]);
    std::fs::canonicalize(entry.parent()?.join(target)).ok()
}

/// The largest `.git` file git reads (`read_gitfile_gently`: 4 × PATH_MAX).
const GIT_FILE_MAX: u64 = 4 * 4096;

/// A git file's text (a config, `commondir`): a regular file (a link to
/// one is fine) of at most 4 MiB, opened without waiting on a FIFO — a
/// repository's `config` that is a pipe must not stall the daemon.
fn read_git_file(path: &std::path::Path) -> std::io::Result<String> {
    let mut bytes = crate::fs::read_regular(path, 4 << 20)?;
    bytes.truncate(4 << 20);
    String::from_utf8(bytes).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// The first setting in the configuration of the repository `start` is in
/// (`config`, `config.worktree`, and the common directory's `config`) that
/// makes git run a program of the repository's choosing
/// (`core.fsmonitor`, `diff.external`, a textconv or filter driver, a
/// pager, hooks elsewhere, includes that could hold any of these). Git
/// commands in such a repository are neither read-only nor allowed by
/// rules: they ask.
pub fn git_config_runs_code(start: &std::path::Path) -> Option<String> {
    let dir = git_dir(start)?;
    let mut files = vec![dir.join("config"), dir.join("config.worktree")];
    let mut common = dir.clone();
    if let Ok(text) = read_git_file(&dir.join("commondir")) {
        // A repository's own `.git` has no commondir (worktrees' git
        // directories do): one there sends git to another's hooks.
        if dir.file_name().is_some_and(|n| n == ".git") {
            return Some(format!("{}: commondir", dir.display()));
        }
        common = dir.join(text.trim());
        files.push(common.join("config"));
    }
    // `git status` refreshes the index, which runs this hook.
    let hook = common.join("hooks/post-index-change");
    if std::fs::metadata(&hook).is_ok_and(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0) {
        return Some(format!("{}", hook.display()));
    }
    for file in files {
        let text = match read_git_file(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // A configuration git may read and the daemon cannot (a FIFO,
            // no permission): what it says is not known, so it may run code.
            Err(e) => return Some(format!("{}: cannot be examined: {e}", file.display())),
        };
        if let Some(what) = config_text_runs_code(&text) {
            return Some(format!("{}: {what}", file.display()));
        }
    }
    None
}

/// Keys of a git configuration whose value is a program git runs (in any
/// section: `core.fsmonitor`, `diff.<driver>.textconv`, …).
const GIT_CODE_KEYS: &[&str] = &[
    "fsmonitor",
    "hookspath",
    "textconv",
    "external",
    "command",
    "pager",
    "sshcommand",
    "askpass",
    "editor",
    "process",
    "clean",
    "smudge",
    "gpgprogram",
    "program",
    "helper",
    "cmd",
    "tool",
    "driver",
    "uploadpack",
    "receivepack",
    "gitproxy",
    "difffilter",
    "alternaterefscommand",
];

/// The first line of a git configuration's `text` that makes git run a
/// program of the configuration's choosing (see [`git_config_runs_code`]).
pub fn config_text_runs_code(text: &str) -> Option<String> {
    // `[pager] status = …`: every key of the section names a program.
    let mut pager = false;
    for raw in text.lines() {
        let mut line = raw.trim().to_ascii_lowercase();
        if line.starts_with('[') {
            if line.starts_with("[include") || line.starts_with("[filter") || line.starts_with("[alias") {
                return Some(raw.trim().to_owned());
            }
            pager = line.starts_with("[pager");
            // `[core] fsmonitor = …` on one line; the header ends at the
            // first `]` outside quotes (`[diff "a]b"]`, `[diff "x\"]y"]`).
            let (mut quoted, mut escaped) = (false, false);
            let end = line.char_indices().find(|&(_, c)| {
                let was_escaped = escaped;
                escaped = c == '\\' && !escaped;
                if c == '"' && !was_escaped {
                    quoted = !quoted;
                }
                c == ']' && !quoted
            });
            line = end.map(|(i, _)| line[i + 1..].trim().to_owned()).unwrap_or_default();
        }
        let key = line.split('=').next().unwrap_or("").trim();
        if !key.is_empty() && !key.starts_with(['#', ';']) && pager {
            return Some(format!("pager.{key}"));
        }
        let named = GIT_CODE_KEYS.contains(&key) || key.ends_with("cmd") || key.ends_with("command");
        if line.contains('=') && named {
            return Some(key.to_owned());
        }
    }
    None
}

/// What a permission layer says about one call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Run it.
    Allow,
    /// Refuse it; the model sees the reason.
    Deny {
        /// Why, in words the model and the user can act on.
        reason: String,
    },
    /// Ask the client (the user) first.
    Ask {
        /// What the user is asked to approve.
        reason: String,
        /// A rule that would allow calls like this one from now on, e.g.
        /// `Bash(npm test:*)`, offered as "always allow".
        suggestion: Option<String>,
    },
}

impl Decision {
    /// An `ask` without a suggested rule.
    pub fn ask(reason: impl Into<String>) -> Self {
        Decision::Ask { reason: reason.into(), suggestion: None }
    }

    /// A `deny`.
    pub fn deny(reason: impl Into<String>) -> Self {
        Decision::Deny { reason: reason.into() }
    }
}

/// One setting of a git configuration file: `section.subsection.key`
/// (section and key lower case, as git compares them), its value, and the
/// file it is in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitConfigEntry {
    /// `section.subsection.key`.
    pub key: String,
    /// The value as written (quotes and a trailing comment taken off).
    pub value: String,
    /// The file that sets it.
    pub file: std::path::PathBuf,
}

/// Every setting of the git configuration `file`, and of every file it
/// includes (`include.path`, `includeIf.*.path`) whatever the include's
/// condition: what git could obey there in some worktree, on some branch.
pub fn git_config_entries(file: &std::path::Path) -> Vec<GitConfigEntry> {
    let mut out = Vec::new();
    config_entries(file, 0, &mut out);
    out
}

fn config_entries(file: &std::path::Path, depth: usize, out: &mut Vec<GitConfigEntry>) {
    if depth > 10 {
        return;
    }
    let Ok(text) = read_git_file(file) else { return };
    let mut section = String::new();
    for raw in text.lines() {
        let mut line = raw.trim();
        if line.starts_with('[') {
            let mut quoted = false;
            let Some(end) = line.char_indices().find(|&(_, c)| {
                if c == '"' {
                    quoted = !quoted;
                }
                c == ']' && !quoted
            }) else {
                continue;
            };
            let header = &line[1..end.0];
            section = match header.split_once('"') {
                Some((name, sub)) => {
                    let sub = sub.strip_suffix('"').unwrap_or(sub).replace("\\\"", "\"").replace("\\\\", "\\");
                    format!("{}.{sub}", name.trim().to_ascii_lowercase())
                }
                None => header.trim().to_ascii_lowercase(),
            };
            line = line[end.0 + 1..].trim();
        }
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let key = key.trim().to_ascii_lowercase();
        let value = value.split(['#', ';']).next().unwrap_or("").trim().trim_matches('"').to_owned();
        let is_include = (section == "include" || section.starts_with("includeif.")) && key == "path";
        out.push(GitConfigEntry { key: format!("{section}.{key}"), value: value.clone(), file: file.to_path_buf() });
        if is_include && let Some(target) = git_config_path(&value, file) {
            config_entries(&target, depth + 1, out);
        }
    }
}

/// A path as a git configuration `file` names it: `~/` in the home
/// directory, relative to the file's directory otherwise.
pub fn git_config_path(value: &str, file: &std::path::Path) -> Option<std::path::PathBuf> {
    if value.is_empty() {
        return None;
    }
    match value.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(rest)),
        None => Some(file.parent().map(|p| p.join(value)).unwrap_or_else(|| std::path::PathBuf::from(value))),
    }
}

/// What the git directory `dir` (of the worktree at `top`) obeys outside
/// itself as its configuration names it: the hook directory
/// `core.hooksPath` names (relative to the worktree's top), the files the
/// configuration includes (whatever the condition, and the included files
/// themselves). Paths as written, not normalized.
pub fn git_config_obeys(dir: &std::path::Path, top: &std::path::Path) -> Vec<std::path::PathBuf> {
    let config = dir.join("config");
    let mut out = Vec::new();
    for entry in git_config_entries(&config) {
        let path = match entry.key.as_str() {
            "core.hookspath" => match entry.value.strip_prefix("~/") {
                Some(_) => git_config_path(&entry.value, &entry.file),
                None => Some(top.join(&entry.value)),
            },
            k if k.ends_with(".path") && (k.starts_with("include.") || k.starts_with("includeif.")) => {
                git_config_path(&entry.value, &entry.file)
            }
            _ => None,
        };
        out.extend(path);
        if entry.file != config {
            out.push(entry.file);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::config_text_runs_code;

    /// Attack review of issue 48: a repository whose `config` is a FIFO
    /// stalled whoever read it; it is now a configuration that may run code.
    #[test]
    fn a_fifo_config_is_not_waited_on_and_may_run_code() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        nix::unistd::mkfifo(&dir.path().join(".git/config"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let root = dir.path().to_owned();
        std::thread::spawn(move || tx.send(super::git_config_runs_code(&root)));
        let said = rx.recv_timeout(std::time::Duration::from_secs(20)).expect("git_config_runs_code waited on a FIFO");
        assert!(said.is_some_and(|s| s.contains("cannot be examined")));
        assert!(super::git_config_entries(&dir.path().join(".git/config")).is_empty());
    }

    /// A case-insensitive directory takes `.Claude` for `.claude`: any case
    /// of a protected name is protected; names that merely contain one are
    /// not.
    /// What makes git run a program in a configuration's text: every key
    /// of a `[pager]` section, keys that name commands, a header whose
    /// quotes hold an escaped quote (`[diff "x\"]y"]`), and not what merely
    /// looks alike.
    #[test]
    fn configuration_text_that_runs_programs() {
        for (text, runs) in [
            ("[pager]\n\tstatus = touch x; cat\n", true),
            ("[remote \"o\"]\n\turl = /r\n\tuploadpack = touch x\n", true),
            ("[diff \"x\\\"]y\"]\n\ttextconv = touch x\n", true),
            ("[diff \"x\\\"]y\"] textconv = touch x\n", true),
            ("[sendemail]\n\tsmtpservercmd = x\n", true),
            ("[core] fsmonitor = x\n", true),
            ("[core]\n\trepositoryformatversion = 0\n\tbare = false\n", false),
            ("[remote \"origin\"]\n\turl = https://x\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n", false),
            ("[branch \"pager\"]\n\tremote = origin\n", false),
        ] {
            assert_eq!(config_text_runs_code(text).is_some(), runs, "{text:?}");
        }
    }

    #[test]
    fn protected_names_in_any_case() {
        for p in [
            ".claude/settings.json",
            ".CLAUDE/settings.json",
            "pkg/.Mcp.json",
            ".GIT/hooks/x",
            "a/.AgentD/s",
            ".vscode/tasks.json",
            "a/.IDEA/workspace.xml",
            "sub/.gitmodules",
        ] {
            assert!(super::is_protected(Path::new(p)), "{p}");
        }
        for p in ["claude/settings.json", ".claudex/s", "x.mcp.json", "src/.gitignore"] {
            assert!(!super::is_protected(Path::new(p)), "{p}");
        }
        let any = super::starts_with_any_case;
        assert!(any(Path::new("/home/u/.Config/Agentd/x"), Path::new("/home/u/.config/agentd")));
        assert!(any(Path::new("/home/u/.BASHRC"), Path::new("/home/u/.bashrc")));
        assert!(!any(Path::new("/home/u/.bashrc2"), Path::new("/home/u/.bashrc")));
        assert!(!any(Path::new("/home/u"), Path::new("/home/u/.bashrc")));
    }
}
