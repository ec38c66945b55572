//! The network gate's decisions: the decision table, what a workspace
//! may not open, the access a profile gets, hosts in every spelling.

use super::*;
use crate::permission::rules::Origin;

fn rules(allow: &[&str], deny: &[&str], ask: &[&str]) -> RuleSet {
    let mut set = RuleSet::default();
    let strings = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let origin = Origin::session("test", &std::env::temp_dir());
    set.add(&origin, &strings(allow), &strings(deny), &strings(ask));
    set
}

fn options(network: serde_json::Value) -> SandboxOptions {
    serde_json::from_value(serde_json::json!({ "network": network })).unwrap()
}

#[test]
fn the_decision_table() {
    use Verdict::*;
    let r = rules(&["WebFetch(domain:good.test)"], &["WebFetch(domain:bad.good.test)"], &["WebFetch(domain:ask.test)"]);
    let open = GatePolicy::default();
    let (closed, errors) = GatePolicy::from_options(
        &options(
            serde_json::json!({"allowed_domains": ["*.only.test", "https://x"], "denied_domains": ["no.only.test"]}),
        ),
        true,
    );
    assert_eq!(errors.len(), 1, "the malformed domain is reported: {errors:?}");
    let bypass = GatePolicy { bypass: true, ..GatePolicy::default() };
    // strictAllowlist: only rules allow, not bypass mode or a grant.
    let strict = GatePolicy { bypass: true, strict: true, ..GatePolicy::default() };
    let is = |v: Verdict, kind: &str| match (v, kind) {
        (Allow(_), "allow") | (Deny(_), "deny") | (Ask(_), "ask") => true,
        (v, _) => panic!("{v:?}, wanted {kind}"),
    };
    // host, policy, granted, verdict
    let rows: &[(&str, &GatePolicy, Option<&str>, &str)] = &[
        ("good.test", &open, None, "allow"),
        ("api.good.test", &open, None, "allow"),
        ("bad.good.test", &open, None, "deny"),
        ("x.bad.good.test", &bypass, None, "deny"),
        ("ask.test", &bypass, None, "ask"),
        ("new.test", &open, None, "ask"),
        ("new.test", &open, Some("WebFetch(domain:new.test)"), "allow"),
        ("new.test", &bypass, None, "allow"),
        ("goodtest", &open, None, "ask"),
        ("good.test.evil", &open, None, "ask"),
        // A closed list: nothing else counts, bypass and grants included.
        ("only.test", &closed, None, "allow"),
        ("a.only.test", &closed, None, "allow"),
        ("no.only.test", &closed, None, "deny"),
        ("good.test", &closed, None, "deny"),
        ("new.test", &closed, Some("WebFetch(domain:new.test)"), "deny"),
        ("bad.good.test", &closed, None, "deny"),
        ("good.test", &strict, None, "allow"),
        ("new.test", &strict, None, "deny"),
        ("ask.test", &strict, None, "deny"),
        ("new.test", &strict, Some("WebFetch(domain:new.test)"), "deny"),
    ];
    for (host, policy, granted, want) in rows {
        assert!(is(decide(host, policy, &r, granted.map(str::to_owned)), want), "{host}");
    }
}

#[test]
fn a_workspace_cannot_open_the_gate_and_bare_rules_do_not_count() {
    let mut r = rules(&["WebFetch"], &[], &[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("settings.json");
    std::fs::write(&file, r#"{"sandbox": {"network": {"allowedDomains": ["repo.test"]}}}"#).unwrap();
    r.add_project_settings_file(&file, dir.path());
    let open = GatePolicy::default();
    assert!(matches!(decide("any.test", &open, &r, None), Verdict::Ask(why) if why.contains("no rule")));
    assert!(matches!(decide("repo.test", &open, &r, None), Verdict::Ask(why) if why.contains("repository")));
    let mut user = r.clone();
    user.add_settings_file(&file, dir.path());
    assert!(matches!(decide("repo.test", &open, &user, None), Verdict::Allow(_)), "the user's own file counts");
    let bypass = GatePolicy { bypass: true, ..GatePolicy::default() };
    assert!(matches!(decide("repo.test", &bypass, &r, None), Verdict::Allow(_)));
}

#[test]
fn network_access_follows_profile_and_settings() {
    use NetworkAccess::*;
    use SandboxProfile as P;
    let mut all = options(serde_json::json!(true));
    all.network_allow_all = true;
    let rows = [
        (P::Off, options(serde_json::json!(false)), true, All),
        (P::ReadOnly, options(serde_json::json!(true)), true, None),
        (P::WorkspaceWrite, options(serde_json::json!(false)), true, None),
        (P::WorkspaceWrite, options(serde_json::json!(true)), true, Gated),
        (P::WorkspaceWrite, options(serde_json::json!(true)), false, None),
        (P::WorkspaceWrite, all.clone(), true, All),
        (P::WorkspaceWrite, options(serde_json::json!({"denied_domains": ["x.test"]})), true, Gated),
    ];
    for (profile, opts, available, want) in rows {
        assert_eq!(network_access(profile, &opts, available), want, "{profile:?} {opts:?} {available}");
    }
    // An explicit list stays gated even with allowAll.
    let mut listed = options(serde_json::json!({"allowed_domains": ["a.test"]}));
    listed.network_allow_all = true;
    assert_eq!(network_access(P::WorkspaceWrite, &listed, true), Gated);
}

#[test]
fn ip_literals_in_every_spelling_are_one_host() {
    for spelled in ["2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "[::ffff:7f00:1]"] {
        assert_eq!(canonical_host(spelled).as_deref(), Some("127.0.0.1"), "{spelled}");
    }
    // Names: one spelling too, and look-alikes are other names.
    let r = rules(&["WebFetch(domain:gate.test)"], &[], &[]);
    let open = GatePolicy::default();
    for same in ["GATE.test.", "gate.TEST", "g%61te.test", "api.gate.test"] {
        let host = canonical_host(same).unwrap();
        assert!(matches!(decide(&host, &open, &r, None), Verdict::Allow(_)), "{same} → {host}");
    }
    for other in ["gаte.test", "gate.test.evil", "gate-test", "xn--gate.test"] {
        let Some(host) = canonical_host(other) else { continue };
        assert!(matches!(decide(&host, &open, &r, None), Verdict::Ask(_)), "{other} → {host}");
    }
    for nonsense in ["", "a b", "exa<mple.com", "[::1"] {
        assert!(canonical_host(nonsense).is_none_or(|h| h.is_empty()), "{nonsense}");
    }
}

#[test]
fn only_granted_domain_rules_open_the_gate() {
    use agentd_protocol::permission::{PermissionDecision, PermissionRespondParams};
    let asks = crate::permission::ask::Asks::new(std::env::temp_dir());
    for rule in ["WebFetch", "WebFetch(domain:ok.test)"] {
        let (id, _rx) = asks.open(vec![], "t", "u");
        let p = PermissionRespondParams {
            session_id: "s".into(),
            request_id: id,
            decision: PermissionDecision::AllowAlways,
            rule: Some(rule.into()),
            message: None,
            answers: None,
            no_user: false,
        };
        asks.respond(&p).unwrap();
    }
    assert!(asks.granted_domain("evil.test").is_none(), "a bare WebFetch grant is about the tool");
    assert!(asks.granted_domain("api.ok.test").is_some());
}

#[test]
fn the_sessions_lists_hold_for_webfetch() {
    let closed = options(serde_json::json!({"allowed_domains": ["gate.test"], "denied_domains": ["no.gate.test"]}));
    assert!(session_refuses("gate.test", &closed).is_none());
    assert!(session_refuses("evil.test", &closed).is_some());
    assert!(session_refuses("no.gate.test", &closed).is_some());
    assert!(session_refuses("anything.test", &options(serde_json::json!(true))).is_none());
}
