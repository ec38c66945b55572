//! The filter pipeline, deferral and ToolSearch's search, each rule with a
//! test of its own. Fake tools implement `DynTool` directly so any name and
//! flag can be set.

use std::any::Any;
use std::sync::Arc;

use agentd_protocol::tools::{DeferralMode, ToolsListResult};
use serde_json::{Value, json};

use super::*;
use crate::permission::Decision;
use crate::tool::context::ProgressReporter;
use crate::tool::erased::{BoxFuture, InputError};
use crate::tool::{CallOutcome, PreparedCall, ToolContext};

#[derive(Clone)]
struct Fake {
    name: String,
    description: String,
    aliases: &'static [&'static str],
    enabled: bool,
    defer: bool,
    always: bool,
    external: bool,
    schema: Value,
}

fn fake(name: &str) -> Fake {
    Fake {
        name: name.to_owned(),
        description: format!("The {name} tool."),
        aliases: &[],
        enabled: true,
        defer: false,
        always: false,
        external: false,
        schema: json!({"type": "object", "properties": {}}),
    }
}

impl DynTool for Fake {
    fn name(&self) -> &str {
        &self.name
    }
    fn aliases(&self) -> &[&'static str] {
        self.aliases
    }
    fn description(&self) -> String {
        self.description.clone()
    }
    fn input_schema(&self) -> &Value {
        &self.schema
    }
    fn is_enabled(&self) -> bool {
        self.enabled
    }
    fn always_load(&self) -> bool {
        self.always
    }
    fn should_defer(&self) -> bool {
        self.defer
    }
    fn is_external(&self) -> bool {
        self.external
    }
    fn prepare(&self, _input: Value) -> Result<Box<dyn PreparedCall>, InputError> {
        Ok(Box::new(FakeCall))
    }
    fn render_grouped(&self, _calls: &[&dyn PreparedCall]) -> String {
        String::new()
    }
}

struct FakeCall;

impl PreparedCall for FakeCall {
    fn tool_name(&self) -> &str {
        "fake"
    }
    fn input_any(&self) -> &dyn Any {
        &()
    }
    fn check_permissions(&self, _ctx: &ToolContext) -> Decision {
        Decision::ask("fake")
    }
    fn render_use(&self) -> String {
        String::new()
    }
    fn render_rejected(&self, _reason: &str) -> String {
        String::new()
    }
    fn run(self: Box<Self>, _ctx: ToolContext, _p: Option<ProgressReporter>) -> BoxFuture<CallOutcome> {
        Box::pin(async { CallOutcome::error("fake") })
    }
}

struct Source(Vec<Fake>);

impl ExternalToolSource for Source {
    fn source_name(&self) -> &str {
        "srv"
    }
    fn tools(&self) -> Vec<Arc<dyn DynTool>> {
        self.0.iter().map(|t| Arc::new(t.clone()) as Arc<dyn DynTool>).collect()
    }
}

fn mcp(name: &str) -> Fake {
    Fake { external: true, ..fake(&format!("mcp__srv__{name}")) }
}

fn registry(tools: Vec<Fake>) -> Registry {
    let mut r = Registry::default();
    for t in tools {
        r.add_dyn(Arc::new(t));
    }
    r
}

fn core() -> Vec<Fake> {
    vec![fake("Bash"), fake("Read"), fake("Edit"), fake("Glob"), fake(TOOL_SEARCH)]
}

struct Opts {
    simple: bool,
    disabled: Vec<String>,
    deny: Vec<String>,
    only: Option<Vec<String>>,
    deferral: DeferralSettings,
}

fn opts() -> Opts {
    Opts { simple: false, disabled: vec![], deny: vec![], only: None, deferral: DeferralSettings::from(None) }
}

fn build(builtin: Vec<Fake>, external: Vec<Fake>, o: &Opts) -> ToolSet {
    let sources: Vec<Arc<dyn ExternalToolSource>> = vec![Arc::new(Source(external))];
    ToolSet::build(
        &registry(builtin),
        &sources,
        ToolSetOptions {
            simple: o.simple,
            disabled: &o.disabled,
            only: o.only.as_deref(),
            deny_rules: &o.deny,
            deferral: o.deferral,
        },
    )
}

fn listed(set: &ToolSet) -> Vec<String> {
    set.listed_names()
}

#[test]
fn mode_filter_simple_mode_keeps_bash_read_edit_only() {
    let o = Opts { simple: true, ..opts() };
    let set = build(core(), vec![mcp("send")], &o);
    assert_eq!(listed(&set), ["Bash", "Edit", "Read"]);
    assert!(set.deferred_names().is_empty());
}

#[test]
fn blanket_deny_removes_a_tool_but_a_pattern_rule_does_not() {
    let o = Opts { deny: vec!["Glob".into(), "Bash(rm:*)".into()], ..opts() };
    let set = build(core(), vec![], &o);
    assert_eq!(listed(&set), ["Bash", "Edit", "Read"]);
}

#[test]
fn bash_star_is_the_whole_tool() {
    let o = Opts { deny: vec!["Bash( * )".into(), "Read(*)".into()], ..opts() };
    assert_eq!(listed(&build(core(), vec![], &o)), ["Edit", "Glob", "Read"], "Read(*) is a path pattern");
}

#[test]
fn blanket_deny_by_alias_and_by_mcp_server() {
    let renamed = Fake { aliases: &["OldGlob"], ..fake("Glob") };
    let o = Opts { deny: vec!["OldGlob".into(), "mcp__srv".into()], deferral: never(), ..opts() };
    let set = build(vec![fake("Read"), renamed], vec![mcp("a"), mcp("b")], &o);
    assert_eq!(listed(&set), ["Read"]);
    let o = Opts { deny: vec!["mcp__srv__a".into()], deferral: never(), ..opts() };
    let set = build(vec![fake("Read")], vec![mcp("a"), mcp("b")], &o);
    assert_eq!(listed(&set), ["Read", "mcp__srv__b"]);
}

#[test]
fn disabled_list_removes_tools() {
    let o = Opts { disabled: vec!["Edit".into()], ..opts() };
    assert_eq!(listed(&build(core(), vec![], &o)), ["Bash", "Glob", "Read"]);
}

#[test]
fn enabled_check_removes_tools_that_are_not_enabled() {
    let off = Fake { enabled: false, ..fake("Glob") };
    assert_eq!(listed(&build(vec![fake("Read"), off], vec![], &opts())), ["Read"]);
}

#[test]
fn merge_sorts_by_name_and_builtins_win_a_name_clash() {
    let clash = Fake { external: true, description: "impostor".into(), ..fake("Read") };
    let o = Opts { deferral: never(), ..opts() };
    let set = build(vec![fake("Read"), fake("Bash")], vec![mcp("z"), clash, mcp("a")], &o);
    assert_eq!(listed(&set), ["Bash", "Read", "mcp__srv__a", "mcp__srv__z"]);
    assert_eq!(set.find("Read").unwrap().description(), "The Read tool.");
}

#[test]
fn filter_order_a_builtin_filtered_out_before_the_merge_does_not_shadow() {
    // The enabled check runs before the merge, so a built-in that is off
    // leaves its name free for an external tool.
    let off = Fake { enabled: false, ..fake("Read") };
    let external = Fake { external: true, description: "external Read".into(), ..fake("Read") };
    let o = Opts { deferral: never(), ..opts() };
    let set = build(vec![off], vec![external], &o);
    assert_eq!(set.find("Read").unwrap().description(), "external Read");
}

fn never() -> DeferralSettings {
    DeferralSettings { mode: DeferralMode::Never, ..DeferralSettings::from(None) }
}

fn auto(max_tools: u32, max_tokens: u32) -> DeferralSettings {
    DeferralSettings { mode: DeferralMode::Auto, max_tools, max_tokens }
}

#[test]
fn below_the_threshold_only_external_tools_are_deferred() {
    let rare = Fake { defer: true, ..fake("NotebookEdit") };
    let mut builtin = core();
    builtin.push(rare.clone());
    let o = Opts { deferral: auto(10, 100_000), ..opts() };
    let set = build(builtin, vec![mcp("a"), mcp("b")], &o);
    assert_eq!(set.deferred_names(), ["mcp__srv__a", "mcp__srv__b"], "MCP tools are deferred whatever their number");
    assert_eq!(listed(&set), ["Bash", "Edit", "Glob", "NotebookEdit", "Read", TOOL_SEARCH]);
    // Without external tools below the threshold: nothing deferred, no
    // ToolSearch.
    let mut builtin = core();
    builtin.push(rare);
    let set = build(builtin, vec![], &o);
    assert!(set.deferred_names().is_empty());
    assert_eq!(listed(&set), ["Bash", "Edit", "Glob", "NotebookEdit", "Read"]);
}

#[test]
fn above_the_count_threshold_external_and_should_defer_tools_are_deferred() {
    let rare = Fake { defer: true, ..fake("NotebookEdit") };
    let pinned = Fake { defer: true, always: true, ..fake("Agent") };
    let mut builtin = core();
    builtin.extend([rare, pinned]);
    let o = Opts { deferral: auto(5, 100_000), ..opts() };
    let set = build(builtin, vec![mcp("a"), mcp("b")], &o);
    assert_eq!(set.deferred_names(), ["NotebookEdit", "mcp__srv__a", "mcp__srv__b"]);
    assert_eq!(listed(&set), ["Agent", "Bash", "Edit", "Glob", "Read", TOOL_SEARCH], "always_load stays");
}

#[test]
fn above_the_token_threshold_tools_are_deferred() {
    let big = Fake { description: "x".repeat(4000), ..mcp("big") };
    let o = Opts { deferral: auto(1000, 500), ..opts() };
    let set = build(core(), vec![big], &o);
    assert_eq!(set.deferred_names(), ["mcp__srv__big"]);
}

#[test]
fn modes_always_and_never() {
    let o = Opts { deferral: DeferralSettings { mode: DeferralMode::Always, ..auto(1000, 1_000_000) }, ..opts() };
    assert_eq!(build(core(), vec![mcp("a")], &o).deferred_names(), ["mcp__srv__a"]);
    let o = Opts { deferral: never(), ..opts() };
    let many: Vec<Fake> = (0..100).map(|i| mcp(&format!("t{i:03}"))).collect();
    let set = build(core(), many, &o);
    assert!(set.deferred_names().is_empty());
    assert!(!listed(&set).contains(&TOOL_SEARCH.to_owned()));
}

#[test]
fn without_tool_search_nothing_is_deferred() {
    let o = Opts { deny: vec![TOOL_SEARCH.into()], deferral: auto(1, 1), ..opts() };
    let set = build(core(), vec![mcp("a")], &o);
    assert!(set.deferred_names().is_empty());
    assert!(listed(&set).contains(&"mcp__srv__a".to_owned()));
}

fn loaded(names: &[&str]) -> SessionContext {
    SessionContext { loaded_tools: names.iter().map(|s| s.to_string()).collect(), ..Default::default() }
}

#[test]
fn calling_a_deferred_tool_before_loading_it_says_to_use_tool_search() {
    let o = Opts { deferral: auto(1, 1), ..opts() };
    let set = build(core(), vec![mcp("a")], &o);
    let err = set.resolve_for_call("mcp__srv__a", &SessionContext::default()).err().unwrap();
    assert!(matches!(err, LookupError::NotLoaded { .. }));
    let msg = err.to_string();
    assert!(msg.contains(TOOL_SEARCH) && msg.contains("select:mcp__srv__a"), "{msg}");
    assert!(set.resolve_for_call("mcp__srv__a", &loaded(&["mcp__srv__a"])).is_ok());
    assert!(set.resolve_for_call("Read", &SessionContext::default()).is_ok());
    let err = set.resolve_for_call("Nope", &SessionContext::default()).err().unwrap();
    assert!(err.to_string().contains("Read"), "lists what is available: {err}");
}

#[test]
fn aliases_resolve_to_the_renamed_tool() {
    let renamed = Fake { aliases: &["SearchTool"], ..fake("Grep") };
    let set = build(vec![renamed], vec![], &opts());
    assert_eq!(set.resolve_for_call("SearchTool", &SessionContext::default()).unwrap().name(), "Grep");
}

#[test]
fn loaded_tools_are_appended_in_load_order_and_leave_the_deferred_list() {
    let o = Opts { deferral: auto(1, 1), ..opts() };
    let set = build(core(), vec![mcp("a"), mcp("b"), mcp("c")], &o);
    let before: ToolsListResult = set.list(&SessionContext::default());
    let after = set.list(&loaded(&["mcp__srv__c", "mcp__srv__a"]));
    let names = |r: &ToolsListResult| r.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&after)[..names(&before).len()], names(&before)[..], "the cached prefix is unchanged");
    assert_eq!(names(&after)[names(&before).len()..], ["mcp__srv__c", "mcp__srv__a"]);
    assert_eq!(after.deferred, ["mcp__srv__b"]);
    assert!(after.estimated_tokens > before.estimated_tokens);
    assert_eq!(
        before.estimated_tokens + before.deferred_tokens_saved,
        after.estimated_tokens + after.deferred_tokens_saved
    );
}

#[test]
fn the_list_is_byte_identical_across_calls() {
    let o = Opts { deferral: auto(3, 1_000_000), ..opts() };
    let set = build(core(), (0..20).map(|i| mcp(&format!("t{i}"))).collect(), &o);
    let a = serde_json::to_string(&set.list(&SessionContext::default())).unwrap();
    let b = serde_json::to_string(&set.list(&SessionContext::default())).unwrap();
    assert_eq!(a, b);
}

#[test]
fn search_select_returns_exactly_those_and_names_unknown_ones() {
    let o = Opts { deferral: auto(1, 1), ..opts() };
    let set = build(core(), vec![mcp("a"), mcp("b"), mcp("c")], &o);
    let (found, unknown) = set.search("select: mcp__srv__c ,mcp__srv__a,nope,mcp__srv__a", 5);
    let names: Vec<_> = found.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mcp__srv__c", "mcp__srv__a"]);
    assert_eq!(unknown, ["nope"]);
}

#[test]
fn search_keywords_rank_name_over_description_and_plus_requires() {
    let o = Opts { deferral: auto(1, 1), ..opts() };
    let send = Fake { description: "Posts to a channel.".into(), ..mcp("send_message") };
    let read = Fake { description: "Reads a message from a channel.".into(), ..mcp("read_history") };
    let other = Fake { description: "Lists users.".into(), ..mcp("list_users") };
    let set = build(core(), vec![send, read, other], &o);
    let (found, _) = set.search("message", 5);
    let names: Vec<_> = found.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mcp__srv__send_message", "mcp__srv__read_history"]);
    let (found, _) = set.search("channel +history", 5);
    let names: Vec<_> = found.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["mcp__srv__read_history"]);
    let (found, _) = set.search("message", 1);
    assert_eq!(found.len(), 1);
    assert!(set.search("zebra", 5).0.is_empty());
}

#[test]
fn name_parts_split_snake_and_camel_case() {
    assert_eq!(name_parts("mcp__slack__send_message"), ["mcp", "slack", "send", "message"]);
    assert_eq!(name_parts("NotebookEdit"), ["notebook", "edit"]);
}

#[test]
fn only_the_names_a_session_keeps_are_offered_even_tools_added_later() {
    let o = Opts { only: Some(vec!["Read".into(), "mcp__srv__x".into()]), ..opts() };
    let set = build(vec![fake("Read"), fake("Edit")], vec![mcp("x")], &o);
    let mut all = listed(&set);
    all.extend(set.deferred_names());
    all.sort();
    assert_eq!(all, ["Read", "mcp__srv__x"]);
    // A tool the source adds later is not among them.
    let later = build(vec![fake("Read"), fake("Edit")], vec![mcp("x"), mcp("sneaky")], &o);
    assert!(later.find("mcp__srv__sneaky").is_none());
    assert!(later.find("mcp__srv__x").is_some());
}
