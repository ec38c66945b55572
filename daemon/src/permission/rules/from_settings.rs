//! Rules read from a settings file: its `permissions`, and what its
//! `sandbox` settings add (domain lists, filesystem deny paths) or cannot
//! honour (reported).

use std::path::Path;

use super::{Origin, RuleError, RuleSet, SettingsOwner, names_mcp};

impl RuleSet {
    /// Adds the `permissions` of the settings file `path` whose text is
    /// `text`. A user's file: its `/path` rules start at the file's
    /// directory, its relative ones at the session's workspace `cwd`. A
    /// workspace's own: its paths start at `cwd`, and its allow rules for
    /// MCP tools (`mcp__…`, the resource tools) are ignored, with a note in
    /// `errors` — a repository must not pre-approve what the user's MCP
    /// servers do, outside any sandbox; while the user has not trusted its
    /// content, only its deny and ask rules count (they can only take away).
    pub fn add_settings_text(&mut self, path: &Path, text: &str, cwd: &Path, owner: SettingsOwner) {
        let source = path.display().to_string();
        let (origin, project) = match owner {
            SettingsOwner::User => {
                let root = path.parent().unwrap_or(cwd).to_owned();
                (Origin { source, root, cwd: cwd.to_owned() }, false)
            }
            SettingsOwner::Workspace { .. } => (Origin::session(source, cwd), true),
        };
        let untrusted = owner == SettingsOwner::Workspace { trusted: false };
        let value: serde_json::Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                self.errors.push(RuleError {
                    origin: origin.source,
                    index: 0,
                    text: String::new(),
                    message: format!("not JSON: {e}"),
                });
                return;
            }
        };
        let list = |key: &str| -> Vec<String> {
            value["permissions"][key]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_str().unwrap_or("").to_owned()).collect())
                .unwrap_or_default()
        };
        let mut allow = list("allow");
        if project {
            let (mcp, rest): (Vec<String>, Vec<String>) = allow.into_iter().partition(|r| names_mcp(r));
            for (index, text) in mcp.into_iter().enumerate() {
                self.errors.push(RuleError {
                    origin: origin.source.clone(),
                    index,
                    text,
                    message: "ignored: a workspace's settings cannot allow MCP tools (put the rule in the user's \
                              settings or the session's)"
                        .into(),
                });
            }
            allow = rest;
            if value["sandbox"]["network"]["allowAll"].as_bool() == Some(true) {
                self.errors.push(RuleError {
                    origin: origin.source.clone(),
                    index: 0,
                    text: "sandbox.network.allowAll".into(),
                    message: "ignored: a workspace's settings cannot give commands the whole network (only the \
                              user's own settings can)"
                        .into(),
                });
            }
        }
        let mut deny = list("deny");
        // The sandbox's domain lists (Claude Code's
        // `sandbox.network.allowedDomains` / `deniedDomains`) are the same
        // rules as `WebFetch(domain:…)`: one list decides WebFetch and the
        // network gate.
        // An entry with a port is left out (reported below): the gate
        // tells hosts apart, not ports, and allowing the host would widen it.
        // A denied entry with a port denies its host on every port (the
        // narrower reading).
        let domains = |key: &str, ported: bool| -> Vec<String> {
            value["sandbox"]["network"][key]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or(""))
                        .filter_map(|d| match crate::permission::sandbox_settings::has_port(d) {
                            false => Some(d),
                            true if ported => crate::permission::sandbox_settings::without_port(d),
                            true => None,
                        })
                        .map(|d| format!("WebFetch(domain:{d})"))
                        .collect()
                })
                .unwrap_or_default()
        };
        allow.extend(domains("allowedDomains", false));
        deny.extend(domains("deniedDomains", true));
        // `sandbox.filesystem.denyWrite`/`denyRead` are Edit and Read deny
        // rules (a place and everything under it); `/path` there is a path
        // from the root, as the sandbox's settings mean it (a rule's own
        // `/path` would start at the settings file's directory).
        let paths = |key: &str, tool: &str| -> Vec<String> {
            let under = |p: &str| if p.ends_with('/') { format!("{p}**") } else { format!("{p}/**") };
            let rooted =
                |p: &str| if p.starts_with('/') && !p.starts_with("//") { format!("/{p}") } else { p.to_owned() };
            value["sandbox"]["filesystem"][key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().filter(|p| !p.trim().is_empty()).map(rooted))
                .flat_map(|p| [format!("{tool}({})", p.trim_end_matches('/')), format!("{tool}({})", under(&p))])
                .collect()
        };
        deny.extend(paths("denyWrite", "Edit"));
        deny.extend(paths("denyRead", "Read"));
        for (index, (key, why)) in
            crate::permission::sandbox_settings::unhonoured(&value, project).into_iter().enumerate()
        {
            self.errors.push(RuleError {
                origin: origin.source.clone(),
                index,
                text: key,
                message: format!("not honoured: {why}"),
            });
        }
        if untrusted && !allow.is_empty() {
            self.errors.push(RuleError {
                origin: origin.source.clone(),
                index: 0,
                text: String::new(),
                message: format!(
                    "{} allow rule(s) not in force: the file's content is not trusted yet (approve it with \
                     `agentctl trust`; its deny and ask rules are in force)",
                    allow.len()
                ),
            });
            allow.clear();
        }
        let first = self.rules.len();
        self.add(&origin, &allow, &deny, &list("ask"));
        for rule in &mut self.rules[first..] {
            rule.workspace = project;
        }
    }
}
