//! The rule table: what each rule allows, and what it must never allow.

use super::*;

fn origin() -> Origin {
    Origin { source: "session".into(), base: PathBuf::from("/ws") }
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
    // A rule is the user's word: `Bash(find:*)` allows every find, with
    // -exec and -delete too (as in Claude Code); rules say `find . -name:*`
    // to be narrower.
    assert_eq!(bash(&s, "find . -name x"), Some(RuleKind::Allow));
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

#[test]
fn tool_names_and_mcp_servers() {
    let s = set(&["mcp__slack"], &["mcp__github__delete_repo"], &[]);
    assert_eq!(s.decide("mcp__slack__send", &Facts::Other).map(|r| r.kind), Some(RuleKind::Allow));
    assert_eq!(s.decide("mcp__github__delete_repo", &Facts::Other).map(|r| r.kind), Some(RuleKind::Deny));
    assert_eq!(s.decide("mcp__github__list", &Facts::Other).map(|r| r.kind), None);
    assert_eq!(s.decide("mcp__slackish__x", &Facts::Other).map(|r| r.kind), None);
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
