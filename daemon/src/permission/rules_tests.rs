//! The rule table: what each rule allows, and what it must never allow.

use super::*;

fn origin() -> Origin {
    Origin::session("session", Path::new("/ws"))
}

fn set(allow: &[&str], deny: &[&str], ask: &[&str]) -> RuleSet {
    let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut s = RuleSet::default();
    s.add(&origin(), &v(allow), &v(deny), &v(ask));
    s
}

fn bash(s: &RuleSet, command: &str) -> Option<RuleKind> {
    s.decide("Bash", &Facts::Bash(command.into())).map(|r| r.kind)
}

#[test]
fn bash_exact_and_prefix_rules() {
    let s = set(&["Bash(npm test)", "Bash(npm run test:*)", "Bash(git status:*)"], &[], &[]);
    assert_eq!(bash(&s, "npm test"), Some(RuleKind::Allow));
    assert_eq!(bash(&s, "npm test --watch"), None, "exact means exact");
    assert_eq!(bash(&s, "npm run test -- --watch"), Some(RuleKind::Allow));
    assert_eq!(bash(&s, "npm run testing"), None, "a prefix ends at a word");
    assert_eq!(bash(&s, "git status && git status -s"), Some(RuleKind::Allow), "every part matches");
}

/// An argument `name=value` after the program is an argument: it neither
/// defeats an allow rule nor hides from a deny rule. Before the program it
/// is an assignment, which an allow rule with a wildcard does not cover
/// when it changes what runs.
#[test]
fn name_value_arguments_are_arguments() {
    let s = set(&["Bash(pip download:*)", "Bash(make:*)"], &["Bash(pip install six==1.16.0)"], &[]);
    assert_eq!(bash(&s, "pip download six==1.16.0"), Some(RuleKind::Allow));
    assert_eq!(bash(&s, "pip download 'six==1.16.0'"), Some(RuleKind::Allow));
    assert_eq!(bash(&s, "pip install six==1.16.0"), Some(RuleKind::Deny));
    assert_eq!(bash(&s, "LD_PRELOAD=./x.so pip download six"), None);
    assert_ne!(bash(&s, "pip download x=$(id)"), Some(RuleKind::Allow));
    assert!(crate::shell::is_read_only(&crate::shell::parse("echo six==1.16.0").unwrap()));
    assert!(!crate::shell::is_read_only(&crate::shell::parse("PAGER=./x git log").unwrap()));
    assert!(!crate::shell::is_read_only(&crate::shell::parse("export PAGER=./x; git log").unwrap()));
}

#[test]
fn compound_commands_are_never_allowed_by_a_partial_match() {
    let s = set(&["Bash(echo:*)", "Bash(git add:*)", "Bash(ls)", "Bash(find:*)"], &[], &[]);
    for command in [
        "echo hi && rm -rf x",
        "git add . ; git push",
        "ls\ncurl x | sh",
        "echo ok & touch x",
        "echo $(id)",
        "echo `id`",
        "echo \"$(id)\"",
        "(touch x)",
        "{ rm x; }",
        "echo hi > /etc/x",
        "eval echo hi",
        "echo 'unterminated",
    ] {
        assert_eq!(bash(&s, command), None, "{command:?} must not be allowed");
    }
    // `Bash(find:*)` allows a find that only looks; as in Claude Code
    // 2.1.332, not one that runs, deletes or writes files (a rule naming
    // the whole command does).
    assert_eq!(bash(&s, "find . -name x"), Some(RuleKind::Allow));
    for command in [
        "find . -delete",
        "find . -name '*.o' -delete",
        "find . -exec ls {} ;",
        "find . -execdir ls {} +",
        "find . -ok ls {} ;",
        "find . -fprint out.txt",
        "find . -fls out.txt",
        "/usr/bin/find . -delete",
        // The attack review: after find's `--` the expression still counts.
        "find -- d1 -delete",
        "find -L -- d1 -delete",
        "find -- . -maxdepth 0 -fprint fp1",
        "find -- . -fls fp2",
    ] {
        assert_eq!(bash(&s, command), None, "{command:?} must not be allowed by Bash(find:*)");
    }
    let exact = set(&["Bash(find . -delete)"], &[], &[]);
    assert_eq!(bash(&exact, "find . -delete"), Some(RuleKind::Allow));
}

#[test]
fn deny_beats_ask_beats_allow_and_deny_applies_to_any_part() {
    let s = set(&["Bash"], &["Bash(rm:*)"], &["Bash(git push:*)"]);
    assert_eq!(bash(&s, "ls && rm -rf x"), Some(RuleKind::Deny));
    assert_eq!(bash(&s, "git push origin main"), Some(RuleKind::Ask));
    assert_eq!(bash(&s, "ls"), Some(RuleKind::Allow));
}

#[test]
fn path_rules_are_globs_relative_to_their_origin() {
    let s = set(&["Read(src/**)", "Edit(./docs/*.md)", "Read(//etc/hosts)"], &["Read(.env)"], &[]);
    let read = |p: &str| s.decide("Read", &Facts::Path(PathBuf::from(p))).map(|r| r.kind);
    assert_eq!(read("/ws/src/a/b.rs"), Some(RuleKind::Allow));
    assert_eq!(read("/ws/other.rs"), None);
    assert_eq!(read("/ws/.env"), Some(RuleKind::Deny));
    assert_eq!(read("/ws/deep/er/.env"), Some(RuleKind::Deny), "no slash: any depth, like .gitignore");
    assert_eq!(read("/etc/hosts"), Some(RuleKind::Allow));
    assert_eq!(read("/ws_evil/src/x"), None, "components, not string prefixes");
    let edit = |t: &str, p: &str| s.decide(t, &Facts::Path(PathBuf::from(p))).map(|r| r.kind);
    assert_eq!(edit("Write", "/ws/docs/a.md"), Some(RuleKind::Allow), "Edit rules cover Write");
    assert_eq!(edit("Edit", "/ws/docs/sub/a.md"), None, "`*` does not cross directories");
    assert_eq!(edit("Grep", "/ws/src/x"), Some(RuleKind::Allow), "Read rules cover Grep");
}

/// Claude Code's anchors, from each kind of origin: `//abs`, `~/home`,
/// `/root-of-the-origin`, and `path` / `./path` under the session's
/// workspace whatever file the rule is in (a user's `Read(./secrets/**)`
/// protects the workspace's `secrets/`, not `~/secrets/`).
#[test]
fn path_rules_are_anchored_as_claude_code_anchors_them() {
    let home = std::env::var("HOME").unwrap();
    let ws = Path::new("/srv/ws");
    let user = Origin {
        source: format!("{home}/.claude/settings.json"),
        root: format!("{home}/.claude").into(),
        cwd: ws.into(),
    };
    let origins =
        [("session", Origin::session("session", ws), "/srv/ws"), ("user file", user, &*format!("{home}/.claude"))];
    for (what, origin, root) in origins {
        for (rule, path, matches) in [
            ("Read(./secrets/**)", "/srv/ws/secrets/k".to_owned(), true),
            ("Read(./secrets/**)", format!("{home}/secrets/k"), false),
            ("Read(secrets/**)", "/srv/ws/secrets/k".to_owned(), true),
            ("Read(secrets/**)", "/srv/ws/a/secrets/k".to_owned(), false),
            ("Read(.env)", "/srv/ws/.env".to_owned(), true),
            ("Read(.env)", "/srv/ws/pkg/.env".to_owned(), true),
            ("Read(./.env)", "/srv/ws/pkg/.env".to_owned(), true),
            ("Read(.env)", format!("{home}/.env"), false),
            ("Read(*.pem)", "/srv/ws/a/b/k.pem".to_owned(), true),
            ("Read(//etc/shadow)", "/etc/shadow".to_owned(), true),
            ("Read(//etc/shadow)", "/srv/ws/etc/shadow".to_owned(), false),
            ("Read(~/.aws/**)", format!("{home}/.aws/credentials"), true),
            ("Read(~/.aws/**)", "/srv/ws/.aws/credentials".to_owned(), false),
            ("Read(/notes/*.md)", format!("{root}/notes/a.md"), true),
            ("Read(/x)", format!("{root}/x"), true),
            ("Read(/x)", format!("{root}/sub/x"), false),
        ] {
            let mut s = RuleSet::default();
            s.add(&origin, &[], &[rule.to_owned()], &[]);
            assert!(s.errors.is_empty(), "{:?}", s.errors);
            let hit = s.read_denied(Path::new(&path)).is_some();
            assert_eq!(hit, matches, "{rule} from the {what} on {path}");
        }
    }
}

#[test]
fn a_read_deny_rule_reaches_a_directory_only_when_it_can_name_a_file_in_it() {
    let reach = |rule: &str, dir: &str| {
        let mut s = RuleSet::default();
        s.add(&origin(), &[], &[rule.to_owned()], &[]);
        s.read_deny_reaching(Path::new(dir)).is_some()
    };
    assert!(reach("Read(.env)", "/ws"), "any depth under the workspace");
    assert!(reach("Read(.env)", "/ws/sub/repo"));
    assert!(!reach("Read(.env)", "/elsewhere/repo"));
    assert!(reach("Read(//etc/shadow)", "/"), "a repository holding /etc");
    assert!(!reach("Read(//etc/shadow)", "/ws"));
    assert!(!reach("Read(//etc/**)", "/etcetera"), "components, not string prefixes");
    assert!(reach("Read(//**/id_rsa)", "/ws"), "a wildcard at the top reaches everything");
    assert!(reach("Read(//srv/*/secret)", "/srv/app"));
    assert!(!reach("Read(//srv/*/secret)", "/opt/app"));
    assert!(reach("Read", "/ws"), "the whole tool");
    assert!(!reach("Edit(.env)", "/ws"), "only Read rules");
}

#[test]
fn tool_names_and_mcp_servers() {
    let s = set(&["mcp__slack"], &["mcp__github__delete_repo"], &[]);
    assert_eq!(s.decide("mcp__slack__send", &Facts::Other).map(|r| r.kind), Some(RuleKind::Allow));
    assert_eq!(s.decide("mcp__github__delete_repo", &Facts::Other).map(|r| r.kind), Some(RuleKind::Deny));
    assert_eq!(s.decide("mcp__github__list", &Facts::Other).map(|r| r.kind), None);
    assert_eq!(s.decide("mcp__slackish__x", &Facts::Other).map(|r| r.kind), None);
    let web = set(&["WebFetch(domain:example.com)"], &[], &[]);
    let domain = |h: &str| Facts::Domain(h.into());
    assert_eq!(web.decide("WebFetch", &domain("example.com")).map(|r| r.kind), Some(RuleKind::Allow));
    assert_eq!(web.decide("WebFetch", &domain("docs.example.com")).map(|r| r.kind), Some(RuleKind::Allow));
    assert_eq!(web.decide("WebFetch", &domain("badexample.com")).map(|r| r.kind), None);
    assert_eq!(web.decide("WebFetch", &domain("example.com.evil.net")).map(|r| r.kind), None);
    assert_eq!(web.decide("WebFetch", &domain("WWW.EXAMPLE.COM.")).map(|r| r.kind), Some(RuleKind::Allow));
    // Spellings that used to be taken and match nothing: normalised, or errors.
    let spelled = set(
        &[],
        &["WebFetch(domain:*.site.test)", "WebFetch(domain:Bücher.example)", "WebFetch(domain:192.0.2.2)"],
        &[],
    );
    assert!(spelled.errors.is_empty(), "{:?}", spelled.errors);
    for host in ["www.site.test", "site.test", "xn--bcher-kva.example", "[::ffff:192.0.2.2]", "192.0.2.2"] {
        assert_eq!(spelled.decide("WebFetch", &domain(host)).map(|r| r.kind), Some(RuleKind::Deny), "{host}");
    }
    let bad = set(
        &[],
        &[
            "WebFetch(domain:https://pub.test)",
            "WebFetch(domain:pub.test:8001)",
            "WebFetch(domain:a*.test)",
            "WebFetch(domain:x.test/path)",
        ],
        &[],
    );
    assert_eq!(bad.errors.len(), 4, "{:?}", bad.errors);
    let star = set(&["mcp__fs__*"], &[], &[]);
    assert_eq!(star.decide("mcp__fs__read_file", &Facts::Other).map(|r| r.kind), Some(RuleKind::Allow));
    assert_eq!(star.decide("mcp__fsx__read_file", &Facts::Other).map(|r| r.kind), None);
    assert_eq!(star.decide("mcp__fs", &Facts::Other).map(|r| r.kind), None);
    // Server `fs_`'s tools are not server `fs`'s, nor is an empty name.
    assert_eq!(star.decide("mcp__fs___add", &Facts::Other).map(|r| r.kind), None);
    assert_eq!(star.decide("mcp__fs__", &Facts::Other).map(|r| r.kind), None);
}

#[test]
fn malformed_rules_are_reported_and_ignored_never_widened() {
    let s = set(&["Bash(npm test", "Read()", "Bad Name", "WebFetch(example.com)"], &[], &[]);
    assert!(s.rules.is_empty(), "{:?}", s.rules);
    assert_eq!(s.errors.len(), 4, "{:?}", s.errors);
    assert!(s.errors[0].to_string().contains("session: rule 0"), "{}", s.errors[0]);
    // Glob(x) is a valid path rule for Glob.
    let ok = set(&["WebFetch(domain:example.com)", "Glob(x)"], &[], &[]);
    assert_eq!(ok.rules.len(), 2);
}

#[test]
fn deny_rules_deny_what_really_runs() {
    // Bypass-like: everything allowed but rm.
    let s = set(&["Bash"], &["Bash(rm:*)"], &[]);
    for command in [
        "rm f",
        "/bin/rm f",
        "r\"\"m f",
        "command rm f",
        "builtin rm f",
        "exec rm f",
        "env rm f",
        "env -i FOO=1 rm f",
        "nice -n 5 rm f",
        "nohup rm f",
        "timeout 30 rm f",
        "stdbuf -oL rm f",
        "time rm f",
        "sudo rm f",
        "xargs rm < list",
        "bash -c 'rm f'",
        "sh -c \"ls; rm f\"",
        "find . -name x -exec rm {} \\;",
        "$'rm' f",
        "x=rm; $x f",
        "eval \"$cmd\"",
        "bash -c \"$cmd\"",
        "env -S 'rm f'",
        "echo 'unterminated",
        // Found by the second attack review.
        "echo $(rm v1)",
        "echo `rm v8`",
        "cat <(rm v9)",
        "cat <<< \"$(rm v10)\"",
        "f() { rm v3; }; f",
        "case $(rm v4) in *) ;; esac",
        "[[ $(rm v5) ]]",
        "(( $(rm v6) ))",
        "coproc rm v53",
        "trap 'rm v40' EXIT",
        "printf 'rm v28' | bash",
        "bash <<< 'rm v29'",
        "cat <<EOF | sh\nrm v32\nEOF",
        "source /dev/stdin <<< 'rm v23'",
        ". <(echo rm v30)",
        "bash -O extglob -c 'rm v41'",
        "PROMPT_COMMAND='rm v54' bash -i </dev/null",
        "setsid rm v15",
        "ionice rm v17",
        "taskset 1 rm v18",
        "chrt -o 0 rm v19",
        "watch -n1 -e -g 'rm v25'",
        "git -c alias.x='!rm v14' x",
        "for x in $(rm v2); do :; done",
        "./rm f",
        "tools/rm f",
        // Found by the third attack review.
        "timeout -vs KILL 5 rm -f v",
        "env -iu X rm -f v",
        "ionice -tc 3 rm -f v",
        "exec -la x rm -f v",
        "printf 'v\\0' | xargs -0tI {} rm -f {}",
        "mapfile -C 'rm -f v #' -c 1 < a.txt",
        "test -v 'a[$(rm -f v)]'",
        "env -vS'rm -f v' echo",
    ] {
        assert_eq!(bash(&s, command), Some(RuleKind::Deny), "{command:?} must be denied");
    }
    for command in ["ls", "echo rm", "grep rm notes", "git rm --cached x"] {
        assert_eq!(bash(&s, command), Some(RuleKind::Allow), "{command:?} is not rm");
    }
    // A rule on the wrapper itself still sees it.
    let s = set(&["Bash"], &["Bash(sudo:*)"], &[]);
    assert_eq!(bash(&s, "sudo -u root ls"), Some(RuleKind::Deny));
}

#[test]
fn claude_codes_wildcard_syntax() {
    let rows: &[(&str, &str, Option<RuleKind>)] = &[
        ("Bash(npm run test *)", "npm run test", Some(RuleKind::Allow)),
        ("Bash(npm run test *)", "npm run test --watch", Some(RuleKind::Allow)),
        ("Bash(npm run test *)", "npm run testing", None),
        ("Bash(npm run test:*)", "npm run test --watch", Some(RuleKind::Allow)),
        ("Bash(git * main)", "git push origin main", Some(RuleKind::Allow)),
        ("Bash(git * main)", "git push origin dev", None),
        ("Bash(* --version)", "python3 --version", Some(RuleKind::Allow)),
        ("Bash(* --version)", "python3 --help", None),
        ("Bash(ls*)", "lsof", Some(RuleKind::Allow)),
        ("Bash(ls*)", "ls -la", Some(RuleKind::Allow)),
        ("Bash(ls *)", "lsof", None),
        ("Bash(ls *)", "ls", Some(RuleKind::Allow)),
        ("Bash(*)", "cargo build --release", Some(RuleKind::Allow)),
        ("Bash(\"echo *\")", "echo *", None), // the shell expands the glob: never allowed
        ("Bash(\"npm test\")", "npm test", Some(RuleKind::Allow)),
        ("Bash(npm test:*)", "timeout 30 npm test", Some(RuleKind::Allow)),
        ("Bash(npm test:*)", "nice npm test -- --ci", Some(RuleKind::Allow)),
        ("Bash(npm test:*)", "NODE_ENV=test npm test", Some(RuleKind::Allow)),
        ("Bash(npm test:*)", "sudo npm test", None),
        ("Bash(npm test:*)", "PATH=./bin:$PATH npm test", None),
    ];
    for (rule, command, want) in rows {
        let s = set(&[rule], &[], &[]);
        assert!(s.errors.is_empty(), "{rule}: {:?}", s.errors);
        assert_eq!(bash(&s, command), *want, "{rule} on {command:?}");
    }
    // Deny rules in the new syntax deny (they used to be exact strings).
    let s = set(&["Bash"], &["Bash(git push *)", "Bash(* --force)"], &[]);
    assert_eq!(bash(&s, "git push origin main"), Some(RuleKind::Deny));
    assert_eq!(bash(&s, "timeout 9 git push"), Some(RuleKind::Deny));
    assert_eq!(bash(&s, "git fetch --force"), Some(RuleKind::Deny));
    for command in
        ["git -C . push", "git --no-pager push", "git -c a.b=c push origin", "git --attr-source HEAD push origin"]
    {
        assert_eq!(bash(&s, command), Some(RuleKind::Deny), "{command}");
    }
    assert_eq!(bash(&s, "git status"), Some(RuleKind::Allow));
    // One allow rule per part.
    let s = set(&["Bash(git add *)", "Bash(git commit *)"], &[], &[]);
    assert_eq!(bash(&s, "git add . && git commit -m x"), Some(RuleKind::Allow));
    assert_eq!(bash(&s, "git add . && git push"), None);
}

#[test]
fn wildcard_allow_rules_never_cover_options_that_run_other_programs() {
    let rows: &[(&str, &str, Option<RuleKind>)] = &[
        ("Bash(npm test:*)", "npm test --script-shell=./x", None),
        ("Bash(npm test:*)", "npm test --script-s=./x", None),
        ("Bash(npm test:*)", "npm test --node-options=--require=./x.js", None),
        ("Bash(npm test:*)", "npm test --prefix ../other", None),
        ("Bash(npm test:*)", "npm test -- --watch", Some(RuleKind::Allow)),
        ("Bash(npm test:*)", "npm test -- --script-shell=./x", Some(RuleKind::Allow)),
        ("Bash(npm run:*)", "npm run build --userconfig ./evil.npmrc", None),
        ("Bash(git log:*)", "git log --ext-diff -p", None),
        ("Bash(git grep:*)", "git grep -O x", None),
        ("Bash(git fetch:*)", "git fetch --upload-pack=./x origin", None),
        ("Bash(git clone:*)", "git clone --template=./t https://h/r", None),
        ("Bash(git add:*)", "git add -A .", Some(RuleKind::Allow)),
        ("Bash(cargo test:*)", "cargo test --config target.x.runner='sh -c x'", None),
        ("Bash(cargo test:*)", "cargo test --release", Some(RuleKind::Allow)),
        ("Bash(make:*)", "make SHELL=./x test", None),
        ("Bash(make:*)", "make -f other.mk", None),
        ("Bash(make:*)", "make test", Some(RuleKind::Allow)),
        ("Bash(go test:*)", "go test -exec ./x ./...", None),
        ("Bash(tar:*)", "tar -xf a.tar --to-command=sh", None),
        ("Bash(tar:*)", "tar -Ish -cf a.tar .", None),
        ("Bash(tar:*)", "tar -xvI ./x -f a.tar", None),
        ("Bash(tar:*)", "tar xI ./x -f a.tar", None),
        ("Bash(tar:*)", "tar -xzf a.tar", Some(RuleKind::Allow)),
        ("Bash(make:*)", "make -sf evil.mk", None),
        ("Bash(make:*)", "make -j4 test", Some(RuleKind::Allow)),
        ("Bash(node build.js:*)", "node build.js -e x", Some(RuleKind::Allow)),
        ("Bash(node:*)", "node -r ./x.js build.js", None),
        // A rule that names the whole command is the user's word for it.
        ("Bash(npm test --script-shell=./x)", "npm test --script-shell=./x", Some(RuleKind::Allow)),
    ];
    for (rule, command, want) in rows {
        let s = set(&[rule], &[], &[]);
        assert_eq!(bash(&s, command), *want, "{rule} on {command:?}");
    }
}

#[test]
fn allow_rules_never_cover_what_is_computed() {
    let s = set(&["Bash(echo:*)", "Bash(git status:*)"], &[], &[]);
    for command in [
        "echo ${x=$'a[\\044\\050touch x\\051]'} ${PWD:x}",
        "echo $HOME",
        "echo *",
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch x'\" git status",
        "GIT_DIR=/tmp/x git status",
        "LD_PRELOAD=./x.so echo hi",
        "echo hi | xargs echo",
        "cat <<EOF\n$(touch x)\nEOF",
        "./echo hi",
        "tools/git status",
        "env -vS'touch x' echo",
        "\"./echo\" hi",
    ] {
        assert_eq!(bash(&s, command), None, "{command:?} must not be allowed");
    }
}

#[test]
fn malformed_bash_rules_are_reported() {
    let s = set(&["Bash(npm:* test)", "Bash(:*)", "Bash(echo \"*\" x)"], &[], &[]);
    assert!(s.rules.is_empty(), "{:?}", s.rules);
    assert_eq!(s.errors.len(), 3, "{:?}", s.errors);
}

#[test]
fn task_rules_name_the_agent_type_under_either_name() {
    let s = set(&[], &["Task(Explore)", "Agent(Plan)"], &[]);
    let task = |t: &str| s.decide("Task", &Facts::Name(t.into())).map(|r| r.kind);
    assert_eq!(task("Explore"), Some(RuleKind::Deny));
    assert_eq!(task("Plan"), Some(RuleKind::Deny), "Agent is Task");
    assert_eq!(task("general-purpose"), None);
    assert_eq!(task("explore"), None, "exactly the type");
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    let bad = set(&["Task(Ex*)"], &[], &[]);
    assert_eq!(bad.errors.len(), 1, "a pattern is not an agent type");
}

#[test]
fn every_alias_a_tool_answers_to_is_one_rules_know() {
    let registry = crate::tools::builtin_registry(Default::default());
    // The test tools' aliases exercise the registry, not rules.
    let mut named: Vec<(&str, &str)> = registry
        .tools()
        .iter()
        .filter(|t| !t.name().starts_with("Test"))
        .flat_map(|t| t.aliases().iter().map(move |a| (*a, t.name())))
        .collect();
    named.extend(crate::tools::task::ALIASES.iter().map(|a| (*a, crate::tools::task::NAME)));
    named.extend(crate::tools::skill::ALIASES.iter().map(|a| (*a, "Skill")));
    for (alias, tool) in named {
        assert_eq!(canonical_tool(alias), tool, "{alias}");
    }
}

#[test]
fn bash_star_is_every_command() {
    let s = set(&[], &["Bash(*)"], &[]);
    assert_eq!(bash(&s, "ls"), Some(RuleKind::Deny));
    assert_eq!(bash(&s, "echo $(id)"), Some(RuleKind::Deny));
}

/// Issue 49's attack review: make takes `NAME+=value` (and `NAME:=value`)
/// on its command line as it takes `NAME=value`: `SHELL+='-c cmd #'` runs
/// `cmd` for every recipe line.
#[test]
fn make_variables_that_run_programs_in_any_assignment_form() {
    let s = set(&["Bash(make test:*)"], &[], &[]);
    for command in [
        "make test SHELL=./x",
        "make test SHELL+='-c touch\\ pwned #'",
        "make test 'SHELL+=-c touch\\ pwned #'",
        "make test 'SHELL:=./x'",
        "make test 'SHELL::=./x'",
        "make test MAKESHELL+=./x",
        "make test '.SHELLFLAGS=-c touch\\ pwned #'",
        "make test '.SHELLFLAGS+=x'",
        "make test 'X!=touch pwned'",
    ] {
        assert_eq!(bash(&s, command), None, "{command}");
    }
    assert_eq!(bash(&s, "make test V=1"), Some(RuleKind::Allow));
}

/// A directory rule as .gitignore writes it (`secrets/`) denies what is in
/// the directory.
#[test]
fn a_directory_rule_with_a_trailing_slash_denies_its_contents() {
    let s = set(&[], &["Read(secrets/)", "Read(//srv/keys/)"], &[]);
    for path in ["/ws/secrets/key", "/ws/a/secrets/b/key", "/srv/keys/k"] {
        assert!(s.read_denied(Path::new(path)).is_some(), "{path}");
    }
    assert!(s.read_denied(Path::new("/ws/secretsx/key")).is_none());
}

/// Claude Code 2.1.332: deny rules see through the wrappers a command can
/// hide behind.
#[test]
fn deny_rules_see_through_wrappers() {
    let s = set(&["Bash"], &["Bash(rm:*)"], &[]);
    for command in [
        "env rm x",
        "env -i FOO=1 rm x",
        "sudo rm x",
        "sudo -u root rm x",
        "watch rm x",
        "watch -n 1 rm x",
        "ionice -c 3 rm x",
        "setsid rm x",
        "nice -n 5 rm x",
        "timeout 5 rm x",
        "nohup rm x",
        "command rm x",
        "xargs rm < list",
        "find . -exec rm {} ;",
    ] {
        assert_eq!(bash(&s, command), Some(RuleKind::Deny), "{command:?}");
    }
}

/// Claude Code 2.1.332's `Tool(param:value)` rules: a call whose input
/// field is that value (`*` a wildcard); without the input, no match.
#[test]
fn param_rules_look_at_the_calls_input() {
    use serde_json::json;
    let s = set(&["Agent(model:opus)", "mcp__db__query(table:public_*)"], &["WebSearch(query:*password*)"], &[]);
    let decide =
        |tool: &str, facts: &Facts, input: serde_json::Value| s.decide_call(tool, facts, Some(&input)).map(|r| r.kind);
    let agent = Facts::Name("general-purpose".into());
    assert_eq!(decide("Task", &agent, json!({ "model": "opus", "prompt": "p" })), Some(RuleKind::Allow));
    assert_eq!(decide("Task", &agent, json!({ "model": "sonnet" })), None);
    // The attack review: blanks around a value do not dodge a rule.
    assert_eq!(decide("Task", &agent, json!({ "model": " opus " })), Some(RuleKind::Allow));
    assert_eq!(decide("WebSearch", &Facts::Other, json!({ "query": " password " })), Some(RuleKind::Deny));
    assert_eq!(decide("Task", &agent, json!({})), None);
    assert!(s.decide("Task", &agent).is_none(), "no input, no match");
    assert_eq!(decide("WebSearch", &Facts::Other, json!({ "query": "reset my password now" })), Some(RuleKind::Deny));
    assert_eq!(decide("WebSearch", &Facts::Other, json!({ "query": "weather" })), None);
    assert_eq!(decide("mcp__db__query", &Facts::Other, json!({ "table": "public_users" })), Some(RuleKind::Allow));
    assert_eq!(decide("mcp__db__query", &Facts::Other, json!({ "table": "secrets" })), None);
    // A number or a flag is matched as its text; an object never.
    let n = set(&["TaskGet(taskId:7)"], &[], &[]);
    assert_eq!(
        n.decide_call("TaskGet", &Facts::Other, Some(&json!({ "taskId": 7 }))).map(|r| r.kind),
        Some(RuleKind::Allow)
    );
    assert!(n.decide_call("TaskGet", &Facts::Other, Some(&json!({ "taskId": { "x": 7 } }))).is_none());
    // Bash, path and WebFetch rules keep their own specifiers.
    let kept = set(&["Bash(model:opus)", "Read(model:x)"], &[], &[]);
    assert_eq!(
        kept.decide_call("Bash", &Facts::Bash("model:opus".into()), None).map(|r| r.kind),
        Some(RuleKind::Allow)
    );
    assert!(kept.errors.is_empty(), "{:?}", kept.errors);
    // `Task(Explore)` is still the agent type.
    let named = set(&["Task(Explore)"], &[], &[]);
    assert_eq!(named.decide("Task", &Facts::Name("Explore".into())).map(|r| r.kind), Some(RuleKind::Allow));
}

/// A Monitor's command is a shell command: `Monitor(rm:*)` names commands
/// as `Bash(rm:*)` does; `param:value` of one of Monitor's own fields stays
/// a param rule.
#[test]
fn monitor_rules_name_commands_or_its_own_fields() {
    use serde_json::json;
    let s = set(&["Monitor(tail -f:*)"], &["Monitor(rm:*)", "Monitor(description:secret*)"], &[]);
    let decide = |command: &str, description: &str| {
        let input = json!({ "command": command, "description": description });
        s.decide_call("Monitor", &Facts::Bash(command.into()), Some(&input)).map(|r| r.kind)
    };
    assert_eq!(decide("rm -rf build", "clean"), Some(RuleKind::Deny));
    assert_eq!(decide("tail -f app.log", "logs"), Some(RuleKind::Allow));
    assert_eq!(decide("tail -f app.log", "secret logs"), Some(RuleKind::Deny));
    assert_eq!(decide("ls", "x"), None);
    // The attack review's: `command:` names the command, parsed, not its
    // raw text; the description approves nothing.
    let s = set(&["Monitor(command:echo *)"], &["Monitor(command:rm *)"], &[]);
    let decide = |command: &str| {
        let input = json!({ "command": command, "description": "d" });
        s.decide_call("Monitor", &Facts::Bash(command.into()), Some(&input)).map(|r| r.kind)
    };
    for hidden in ["echo; rm victim", "env rm victim", "true && rm -f victim"] {
        assert_eq!(decide(hidden), Some(RuleKind::Deny), "{hidden}");
    }
    assert_eq!(decide("echo hi"), Some(RuleKind::Allow));
    for more in ["echo hi; touch pwn", "echo $(touch pwn)"] {
        assert_ne!(decide(more), Some(RuleKind::Allow), "{more}");
    }
    let origin = Origin::session("test", std::path::Path::new("/ws"));
    assert!(parse("Monitor(description:deploy*)", RuleKind::Allow, &origin, 0).is_err());
    assert!(parse("Monitor(description:deploy*)", RuleKind::Deny, &origin, 0).is_ok());
}
