//! What the permission policy needs to know about a Bash command, from one
//! parse of it: whether it writes files, whether git would run code from a
//! repository's configuration, which deny rules its arguments and
//! redirections run into, and whether its redirections are edits
//! `accept_edits` allows.

use std::path::{Path, PathBuf};

use crate::permission::policy::BashFacts;
use crate::permission::rules::{Facts, RuleKind};
use crate::shell;
use crate::tool::ToolContext;

use super::{BashInput, one_line};

/// Git subcommands that never print a file's contents from the
/// repository's history (where no path of the workspace is opened, so a
/// `Read` deny rule cannot be checked).
const GIT_NO_CONTENT: &[&str] = &[
    "status",
    "branch",
    "rev-parse",
    "ls-files",
    "worktree",
    "remote",
    "tag",
    "describe",
    "merge-base",
    "name-rev",
    "rev-list",
    "count-objects",
    "add",
    "commit",
    "push",
    "fetch",
    "pull",
    "checkout",
    "switch",
    "restore",
    "reset",
    "init",
    "clone",
    "config",
    "rm",
    "mv",
    "version",
    "help",
];

/// Programs that write the files their arguments name (in-place editors,
/// copies, moves): an Edit deny rule applies to those too.
const WRITES_ARGS: &[&str] = &[
    "sed", "perl", "tee", "cp", "mv", "ln", "install", "truncate", "touch", "rm", "dd", "chmod", "chown", "sort",
    "patch", "rsync", "tar", "unzip", "git", "ex", "vi", "vim", "nvim", "ed", "nano", "emacs",
];

/// The facts of one call, from one parse of its command.
pub(super) fn permission_facts(input: &BashInput, ctx: &ToolContext) -> BashFacts {
    let parsed = shell::parse(&input.command).ok();
    let here = ctx.session.shell_cwd.clone().unwrap_or_else(|| ctx.cwd.to_path_buf());
    BashFacts {
        command: one_line(&input.command, 120),
        disable_sandbox: input.dangerously_disable_sandbox,
        writes_files: parsed.as_ref().is_none_or(|s| s.commands.iter().any(|c| !c.writes_files.is_empty())),
        git_runs_code: git_runs_code(parsed.as_ref(), &here),
        redirect_denied: redirect_denied(parsed.as_ref(), ctx, &here),
        read_denied: parsed.as_ref().and_then(|s| read_denied(s, ctx, &here)),
        exposes: super::secret_exposure(&ctx.info, ctx.sandbox(), &ctx.cwd).map(str::to_owned),
        redirects_edit_inside: parsed.as_ref().is_some_and(|s| redirects_edit_inside(s, ctx)),
    }
}

/// What in a repository's git configuration would run a program, when the
/// command runs git there (or a repository not checked: `-C`, a computed
/// `cd`).
fn git_runs_code(parsed: Option<&shell::Script>, here: &Path) -> Option<String> {
    let parts = parsed.map(shell::effective).unwrap_or_default();
    let gits: Vec<&shell::Effective> = parts.iter().filter(|e| e.program.as_deref() == Some("git")).collect();
    if gits.is_empty() {
        return None;
    }
    let elsewhere = gits
        .iter()
        .any(|e| e.args.iter().any(|a| a == "-C" || a.starts_with("--git-dir") || a.starts_with("--work-tree")));
    // Where the command's `cd`s take git (a nested repository).
    let mut dirs = vec![here.to_path_buf()];
    // A `cd` behind a wrapper (`builtin cd`) goes where the walk below
    // does not look.
    let mut computed_cd = parsed.is_some_and(shell::wrapped_cd);
    for c in parsed.iter().flat_map(|s| &s.commands) {
        if matches!(c.program.as_deref(), Some("cd" | "pushd" | "popd")) {
            match c.args.iter().find(|a| !a.starts_with('-')) {
                Some(t) if !shell::target_is_computed(t) && c.program.as_deref() != Some("popd") => {
                    dirs.push(here.join(t))
                }
                // `cd` alone goes home, `cd -` back, `popd` anywhere.
                _ => computed_cd = true,
            }
        }
    }
    if elsewhere || computed_cd {
        return Some(
            "-C, --git-dir, --work-tree or a computed cd name a repository whose configuration is not checked"
                .to_owned(),
        );
    }
    dirs.iter().find_map(|d| crate::permission::git_config_runs_code(d))
}

/// The `Read` deny rule an argument or input redirection of the command
/// names (after symlinks), if any. Arguments computed at run time are not
/// judged here: the sandbox hides the files such rules name.
fn read_denied(script: &shell::Script, ctx: &ToolContext, here: &Path) -> Option<String> {
    let rules = &ctx.rules;
    rules.rules.iter().find(|r| r.kind == RuleKind::Deny && r.tool == "Read")?;
    // Git prints files' contents from its own objects, where no path is
    // opened: a subcommand that may print contents runs only when no rule
    // can name a file of the repository it reads.
    let effective = shell::effective(script);
    let mut repository = None;
    for e in &effective {
        // git by another path (`/usr/lib/git-core/git`, `git-show`), or a
        // program computed at run time, which may be git.
        let computed = e.program.is_none()
            && (!e.wrappers.is_empty() || script.commands.get(e.from).is_some_and(|c| c.has_program_word));
        let name = e.program.as_deref().map(|p| p.rsplit('/').next().unwrap_or(p));
        let sub = match name {
            Some("git") => git_subcommand(&e.args).filter(|sub| git_prints_contents(sub, &e.args)),
            Some(n) => n.strip_prefix("git-").filter(|sub| git_prints_contents(sub, &e.args)),
            None if computed => Some("(a computed program)"),
            None => None,
        };
        if let Some(sub) = sub {
            let dirs = repository.get_or_insert_with(|| git_history_dirs(script, &effective, ctx, here));
            let rule = match dirs {
                Some(dirs) => dirs.iter().find_map(|d| rules.read_deny_reaching(d)),
                None => rules.rules.iter().find(|r| r.kind == RuleKind::Deny && r.tool == "Read"),
            };
            if let Some(rule) = rule {
                return Some(format!(
                    "git {sub} prints files from the repository's history, which the rule {} ({}) cannot be checked \
                     against",
                    rule.text, rule.origin.source
                ));
            }
        }
    }
    for word in script.commands.iter().flat_map(|c| c.args.iter().chain(&c.reads_files)) {
        let value = word.split_once('=').map(|(_, v)| v).unwrap_or(word);
        if value.is_empty() || value.starts_with('-') || shell::target_is_computed(value) {
            continue;
        }
        let path = crate::fs::judged_path(&absolute(here, value));
        if let Some(r) = rules.read_denied(&path) {
            return Some(format!("the rule {} ({}) denies reading {value}", r.text, r.origin.source));
        }
    }
    None
}

/// The deny rule an output redirection of the command (or a file a
/// writing program names) runs into, if any; a command that cannot be
/// parsed cannot be checked, so it runs into the first Edit/Write deny
/// rule.
fn redirect_denied(parsed: Option<&shell::Script>, ctx: &ToolContext, here: &Path) -> Option<String> {
    let rules = &ctx.rules;
    let edit_deny =
        rules.rules.iter().find(|r| r.kind == RuleKind::Deny && matches!(r.tool.as_str(), "Edit" | "Write"))?;
    let Some(script) = parsed else {
        return Some(format!("the command cannot be parsed, so the rule {} cannot be checked", edit_deny.text));
    };
    // Where a target lands is only known when it is written out and the
    // command does not change directory first.
    let moves = shell::changes_directory(script);
    let writers: Vec<String> = shell::effective(script)
        .iter()
        .filter(|e| e.program.as_deref().is_some_and(|p| WRITES_ARGS.contains(&p)))
        // `sed` without -i only reads.
        .filter(|e| {
            let args: Vec<&str> = e.args.iter().map(String::as_str).collect();
            !(e.program.as_deref() == Some("sed") && shell::program_reads("sed", &args))
        })
        .flat_map(|e| {
            e.args
                .iter()
                .filter(|a| !a.starts_with('-'))
                .map(|a| a.split_once('=').map_or(a.as_str(), |(_, v)| v).to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    let redirects = script.commands.iter().flat_map(|c| c.writes_files.iter().cloned());
    for target in redirects.chain(writers) {
        if target.is_empty() {
            continue;
        }
        if moves || shell::target_is_computed(&target) {
            return Some(format!(
                "the redirection to {target} cannot be checked against the rule {} ({})",
                edit_deny.text, edit_deny.origin.source
            ));
        }
        let facts = Facts::Path(crate::fs::judged_path(&absolute(here, &target)));
        for tool in ["Edit", "Write"] {
            if let Some(r) = rules.decide(tool, &facts).filter(|r| r.kind == RuleKind::Deny) {
                return Some(format!("the rule {} ({}) denies writing {target}", r.text, r.origin.source));
            }
        }
    }
    None
}

/// Whether `script` has output redirections and every one is an edit
/// `accept_edits` allows: a literal target inside the workspace (a symlink
/// counts where it points; a new file where its directory is) that is not
/// a protected file (hooks, settings: those ask).
pub(super) fn redirects_edit_inside(script: &shell::Script, ctx: &ToolContext) -> bool {
    let targets: Vec<&String> = script.commands.iter().flat_map(|c| &c.writes_files).collect();
    if targets.is_empty() {
        return false;
    }
    // A `cd` (`builtin cd` too) would take a relative target elsewhere.
    let moves = shell::changes_directory(script);
    let workspace: &Path = &ctx.cwd;
    let here = ctx.session.shell_cwd.clone().unwrap_or_else(|| workspace.to_owned());
    targets.iter().all(|target| {
        if target.is_empty()
            || target.contains(['$', '`', '~', '*', '?', '[', '{'])
            || (moves && !target.starts_with('/'))
        {
            return false;
        }
        let real = crate::fs::real_path(&absolute(&here, target));
        // Never a protected file (hooks, settings): that asks.
        real.is_some_and(|r| {
            ctx.inside(&r)
                && !crate::fs::in_state_dir(&r)
                // An ask or deny rule on the file keeps it for the user.
                && ["Edit", "Write"].iter().all(|tool| {
                    ctx.rules
                        .decide(tool, &Facts::Path(r.clone()))
                        .is_none_or(|rule| rule.kind == RuleKind::Allow)
                })
                && !crate::permission::names_protected(&ctx.cwd, &r)
        })
    })
}

/// git's subcommand: the first word after its global options and their
/// values (`git -C config show` runs `show`, not `config`).
fn git_subcommand(args: &[String]) -> Option<&str> {
    let mut i = 0;
    while let Some(a) = args.get(i) {
        if !a.starts_with('-') {
            return Some(a);
        }
        i += if crate::permission::rules::GIT_OPTIONS_WITH_VALUE.contains(&a.as_str()) { 2 } else { 1 };
    }
    None
}

/// Whether git `sub` with `args` may print a file's contents from the
/// repository: any subcommand but [`GIT_NO_CONTENT`], and those too with
/// a flag that shows a diff (`status -v`, `add -p`, `commit --verbose`).
fn git_prints_contents(sub: &str, args: &[String]) -> bool {
    if !GIT_NO_CONTENT.contains(&sub) {
        return true;
    }
    let shows_diff = |a: &String| {
        let short = |c: char| a.starts_with('-') && !a.starts_with("--") && a.contains(c);
        match sub {
            "status" | "commit" => short('v') || a.starts_with("--verb") || (sub == "commit" && short('p')),
            "add" | "checkout" | "restore" | "reset" => {
                short('p') || short('i') || a.starts_with("--pat") || a.starts_with("--int")
            }
            // `git worktree add` checks the history out anywhere.
            "worktree" => a == "add",
            _ => false,
        }
    };
    args.iter().any(shows_diff)
}

/// `value` as an absolute path, relative ones from `here`.
/// The directories whose files the history git reads in this command can
/// hold: the repository's work tree (and, for a linked worktree, the main
/// one's), canonical. `None` when that cannot be known: git pointed
/// elsewhere (`-C`, `--git-dir`, `--work-tree`, a `GIT_*` variable, a
/// `cd`), or no repository found.
fn git_history_dirs(
    script: &shell::Script,
    effective: &[shell::Effective],
    ctx: &ToolContext,
    here: &Path,
) -> Option<Vec<PathBuf>> {
    // `--remote` (archive, abbreviated too) reads another repository.
    let elsewhere = |a: &String| {
        a == "-C"
            || a.starts_with("--git-dir")
            || a.starts_with("--work-tree")
            || a.starts_with("--namespace")
            || a.starts_with("--rem")
    };
    // Subcommands that bring another repository's objects into this one
    // (what they fetched is then shown from here).
    const IMPORTS: &[&str] = &["fetch", "pull", "clone", "submodule", "bundle", "remote", "subtree"];
    let imports = |e: &shell::Effective| {
        e.program.as_deref() == Some("git") && e.args.iter().any(|a| IMPORTS.contains(&a.as_str()))
    };
    let git_variable = |name: &String| name.starts_with("GIT_");
    // A `GIT_*` word anywhere: assigned through a wrapper (`command export
    // GIT_DIR=…`, `sudo GIT_DIR=… git`) or exported after `read GIT_DIR`.
    let names_git_variable = |w: &String| w.contains("GIT_");
    if shell::changes_directory(script)
        || effective.iter().any(|e| {
            e.assigns.iter().any(git_variable)
                || e.args.iter().chain(e.program.iter()).any(names_git_variable)
                || imports(e)
                || (e.program.as_deref() == Some("git") && e.args.iter().any(elsewhere))
        })
        || script.commands.iter().any(|c| {
            c.assigns.iter().any(git_variable) || c.args.iter().chain(c.program.iter()).any(names_git_variable)
        })
        || ctx.info.env.keys().any(git_variable)
    {
        return None;
    }
    let here = std::fs::canonicalize(here).ok()?;
    // As git finds its repository: a `.git`, or a directory that is a git
    // directory itself (a bare repository, whose history is not judged).
    let bare = |d: &Path| d.join("HEAD").is_file() && d.join("objects").is_dir() && d.join("refs").is_dir();
    let top = here.ancestors().find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok() || bare(d))?.to_path_buf();
    let dot_git = top.join(".git");
    if std::fs::symlink_metadata(&dot_git).is_err() {
        return None;
    }
    if std::fs::symlink_metadata(&dot_git).ok()?.is_dir() {
        // Objects or refs kept elsewhere (`commondir`, alternates) are
        // another repository's history.
        let elsewhere = ["commondir", "objects/info/alternates", "objects/info/http-alternates"];
        if elsewhere.iter().any(|f| std::fs::symlink_metadata(dot_git.join(f)).is_ok()) {
            return None;
        }
        return Some(vec![top]);
    }
    // A linked worktree or a submodule: `.git` names the git directory; a
    // worktree's shares the main repository's objects (`commondir`).
    let text = std::fs::read_to_string(&dot_git).ok()?;
    let git_dir = top.join(text.trim().strip_prefix("gitdir:")?.trim());
    let git_dir = std::fs::canonicalize(git_dir).ok()?;
    let mut dirs = vec![top.clone(), git_dir.clone()];
    if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
        let common = std::fs::canonicalize(git_dir.join(common.trim())).ok()?;
        dirs.push(common.parent()?.to_path_buf());
    } else if let Some(superproject) = top.ancestors().skip(1).find(|a| git_dir.starts_with(a.join(".git/modules"))) {
        // A submodule's git directory, in its superproject's.
        dirs.push(superproject.to_path_buf());
    } else {
        // Another repository's git directory (`gitdir: /other/.git`), whose
        // work tree is not known here.
        return None;
    }
    Some(dirs)
}

fn absolute(here: &Path, value: &str) -> PathBuf {
    let raw = PathBuf::from(value);
    if raw.is_absolute() { raw } else { here.join(raw) }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::permission::rules::{Origin, RuleSet};
    use crate::tool::context::NoTools;

    fn facts(input: serde_json::Value, deny: &[&str]) -> BashFacts {
        let mut ctx = ToolContext::for_test(Arc::new(NoTools));
        let mut rules = RuleSet::default();
        let origin = Origin::session("session", &ctx.cwd);
        rules.add(&origin, &[], &deny.iter().map(|s| s.to_string()).collect::<Vec<_>>(), &[]);
        ctx.rules = Arc::new(rules);
        let input: BashInput = serde_json::from_value(input).unwrap();
        permission_facts(&input, &ctx)
    }

    /// Each row: the input, the deny rules, then what the facts say:
    /// writes files, git runs configured code, a redirect runs into a deny
    /// rule, an argument names a denied file, leaves the sandbox, every
    /// redirect is an edit inside the workspace.
    #[test]
    fn the_facts_of_a_command_from_one_parse() {
        use serde_json::json;
        type Row = (serde_json::Value, &'static [&'static str], [bool; 6]);
        let rows: &[Row] = &[
            (json!({"command": "ls -la"}), &[], [false, false, false, false, false, false]),
            (json!({"command": "echo hi > out.txt"}), &[], [true, false, false, false, false, true]),
            (json!({"command": "echo hi > $OUT"}), &[], [true, false, false, false, false, false]),
            (json!({"command": "echo hi > /etc/out.txt"}), &[], [true, false, false, false, false, false]),
            (json!({"command": "git -C /elsewhere status"}), &[], [false, true, false, false, false, false]),
            (json!({"command": "cd \"$D\" && git log"}), &[], [false, true, false, false, false, false]),
            (json!({"command": "git status"}), &[], [false, false, false, false, false, false]),
            (
                json!({"command": "echo x > secret.txt"}),
                &["Edit(secret.txt)"],
                [true, false, true, false, false, false],
            ),
            (
                json!({"command": "sed -i s/a/b/ secret.txt"}),
                &["Edit(secret.txt)"],
                [false, false, true, false, false, false],
            ),
            (
                json!({"command": "sed s/a/b/ secret.txt"}),
                &["Edit(secret.txt)"],
                [false, false, false, false, false, false],
            ),
            (json!({"command": "echo ((("}), &["Write(x)"], [true, false, true, false, false, false]),
            (json!({"command": "cat secret.txt"}), &["Read(secret.txt)"], [false, false, false, true, false, false]),
            (
                json!({"command": "git show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (json!({"command": "git status"}), &["Read(secret.txt)"], [false, false, false, false, false, false]),
            // git's global options' values are no subcommand; flags that
            // show a diff print contents (attack review).
            (
                json!({"command": "git -C config show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, true, false, true, false, false],
            ),
            (
                json!({"command": "git --namespace status show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (
                json!({"command": "git --work-tree config show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, true, false, true, false, false],
            ),
            (json!({"command": "git status -vv"}), &["Read(secret.txt)"], [false, false, false, true, false, false]),
            (json!({"command": "git add -p"}), &["Read(secret.txt)"], [false, false, false, true, false, false]),
            (
                json!({"command": "git worktree add /tmp/wt HEAD"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (
                json!({"command": "git worktree list"}),
                &["Read(secret.txt)"],
                [false, false, false, false, false, false],
            ),
            (json!({"command": "git status -s"}), &["Read(secret.txt)"], [false, false, false, false, false, false]),
            (
                json!({"command": "/usr/lib/git-core/git show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (
                json!({"command": "/usr/lib/git-core/git-show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (
                json!({"command": "$(command -v git) show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (
                json!({"command": "g=git; $g show HEAD:secret.txt"}),
                &["Read(secret.txt)"],
                [false, false, false, true, false, false],
            ),
            (json!({"command": "NOW=$(date); ls"}), &["Read(secret.txt)"], [false, false, false, false, false, false]),
            (
                json!({"command": "ls", "dangerouslyDisableSandbox": true}),
                &[],
                [false, false, false, false, true, false],
            ),
            // Only the JSON literal leaves the sandbox (a string keeps it).
            (
                json!({"command": "ls", "dangerouslyDisableSandbox": "true"}),
                &[],
                [false, false, false, false, false, false],
            ),
        ];
        for (input, deny, want) in rows {
            let f = facts(input.clone(), deny);
            let got = [
                f.writes_files,
                f.git_runs_code.is_some(),
                f.redirect_denied.is_some(),
                f.read_denied.is_some(),
                f.disable_sandbox,
                f.redirects_edit_inside,
            ];
            assert_eq!(&got, want, "{input} with {deny:?}: {f:?}");
        }
    }

    /// A workspace repository `ws` and another repository `other` beside
    /// it whose `.env` a deny rule names: git must not be pointed at
    /// `other`'s history (issue 49's attack review).
    fn other_repository() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(root.path()).unwrap();
        let (ws, other) = (base.join("ws"), base.join("other"));
        for repo in [&ws, &other] {
            std::fs::create_dir_all(repo.join(".git")).unwrap();
        }
        (root, ws, other)
    }

    fn read_denied_in(ws: &Path, here: &Path, command: &str, deny: &str) -> Option<String> {
        let mut ctx = ToolContext::for_test(Arc::new(NoTools));
        ctx.cwd = Arc::new(ws.to_owned());
        ctx.session = Arc::new(crate::tool::SessionContext { shell_cwd: Some(here.to_owned()), ..Default::default() });
        let mut rules = RuleSet::default();
        rules.add(&Origin::session("session", ws), &[], &[deny.to_owned()], &[]);
        ctx.rules = Arc::new(rules);
        let script = shell::parse(command).unwrap();
        read_denied(&script, &ctx, here)
    }

    #[test]
    fn git_pointed_at_another_repository_stays_refused() {
        let (_root, ws, other) = other_repository();
        let deny = format!("Read(/{}/.env)", other.display());
        let o = other.display();
        assert!(read_denied_in(&ws, &ws, "git show HEAD:a.txt", &deny).is_none(), "the workspace's own history");
        for command in [
            format!("GIT_DIR={o}/.git git show HEAD:.env"),
            // `export` behind a wrapper, or of a variable set otherwise.
            format!("command export GIT_DIR={o}/.git; git show HEAD:.env"),
            format!("builtin export GIT_DIR={o}/.git; git show HEAD:.env"),
            format!("read GIT_DIR <<< {o}/.git; export GIT_DIR; git show HEAD:.env"),
            format!("printf -v GIT_DIR %s {o}/.git; export GIT_DIR; git show HEAD:.env"),
            format!("sudo GIT_DIR={o}/.git git show HEAD:.env"),
            format!("env -- GIT_DIR={o}/.git git show HEAD:.env"),
            format!("env -i -- GIT_DIR={o}/.git git show HEAD:.env"),
            format!("time GIT_DIR={o}/.git git show HEAD:.env"),
            format!("! GIT_DIR={o}/.git git show HEAD:.env"),
            // Another repository's archive.
            format!("git archive --remote={o} HEAD .env"),
            format!("git archive --remote {o} HEAD .env"),
            // Its objects fetched into this one.
            format!("git fetch -q {o} HEAD && git show FETCH_HEAD:.env"),
        ] {
            assert!(read_denied_in(&ws, &ws, &command, &deny).is_some(), "{command}");
        }
    }

    /// A `.git` file naming another repository's git directory, a bare
    /// repository (a clone of another) or a `.git` borrowing another's
    /// objects: git reads that repository's history.
    #[test]
    fn a_git_file_naming_another_repository_reaches_it() {
        let (_root, ws, other) = other_repository();
        let bare = ws.join("b.git");
        for d in ["objects/info", "refs"] {
            std::fs::create_dir_all(bare.join(d)).unwrap();
        }
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        let deny = format!("Read(/{}/.env)", other.display());
        assert!(read_denied_in(&ws, &bare, "git show HEAD:.env", &deny).is_some(), "a bare repository");
        std::fs::create_dir_all(ws.join(".git/objects/info")).unwrap();
        std::fs::write(ws.join(".git/objects/info/alternates"), format!("{}/.git/objects\n", other.display())).unwrap();
        assert!(read_denied_in(&ws, &ws, "git show HEAD:.env", &deny).is_some(), "alternates");
        std::fs::remove_file(ws.join(".git/objects/info/alternates")).unwrap();
        let sub = ws.join("sub");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join(".git"), format!("gitdir: {}/.git\n", other.display())).unwrap();
        let deny = format!("Read(/{}/.env)", other.display());
        assert!(read_denied_in(&ws, &sub, "git show HEAD:.env", &deny).is_some());
    }

    /// Globs, braces and loops that reach outside the workspace: a
    /// read-only command with them asks (issue 49's attack review).
    #[test]
    fn globs_braces_and_loops_reaching_outside_are_outside() {
        let root = tempfile::tempdir().unwrap();
        let ws = std::fs::canonicalize(root.path()).unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        std::fs::write(ws.join("src/a.rs"), "").unwrap();
        let mut ctx = ToolContext::for_test(Arc::new(NoTools));
        ctx.cwd = Arc::new(ws.clone());
        // What runs unasked in the read-only sandbox.
        let inside = |command: &str| {
            let script = shell::parse(command).unwrap();
            shell::is_inspection(&script) && super::super::paths_inside(&script, &ctx)
        };
        for command in ["cat src/*.rs", "cat {src,src}/a.rs", "ls *.{rs,toml}"] {
            assert!(inside(command), "{command}");
        }
        for command in [
            "cat /e*/hostname",
            "for f in /e*/hostname; do cat $f; done",
            "cat {,}/etc/hostname",
            "cat {x,}/etc/hostname",
            "cat {.,}{.,}/{.,}{.,}/{.,}{.,}/{.,}{.,}/{.,}{.,}/etc/hostname",
            "cat {~,x}/.bashrc",
            "cat {{,},x}/etc/hostname",
            "shopt -s extglob\ncat /@(etc)/hostname",
            "shopt -s extglob\ncat /+(etc)/host+(name)",
            "shopt -u globskipdots; cat .?/.?/.?/.?/.?/.?/etc/hostnam?",
            "x=globskipdots; shopt -u $x; cat .?/.?/.?/.?/.?/.?/etc/hostnam?",
        ] {
            assert!(!inside(command), "{command}");
        }
    }

    /// The review's fail-closed case: a call granted a sandbox profile
    /// where no helper can run it is refused, and nothing of it runs
    /// (never run unconfined instead).
    #[tokio::test]
    async fn a_call_granted_a_sandbox_without_a_helper_is_refused_not_run_unconfined() {
        use crate::tool::{ProgressSink, Tool};
        let dir = tempfile::tempdir().unwrap();
        let ran = dir.path().join("ran");
        for profile in [
            agentd_protocol::session::SandboxProfile::ReadOnly,
            agentd_protocol::session::SandboxProfile::WorkspaceWrite,
        ] {
            let mut ctx = ToolContext::for_test(Arc::new(NoTools));
            ctx.grant.sandbox_profile = profile;
            let input: BashInput =
                serde_json::from_value(serde_json::json!({ "command": format!("touch {}", ran.display()) })).unwrap();
            let out = super::super::Bash(Default::default()).call(input, ctx, ProgressSink::discard()).await;
            let Err(e) = out else { panic!("{profile:?}: it ran") };
            assert!(e.message.contains("not available"), "{profile:?}: {e}");
            assert!(!ran.exists(), "{profile:?}: the command ran");
        }
    }
}
