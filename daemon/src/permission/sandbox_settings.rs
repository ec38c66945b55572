//! Claude Code's `sandbox` settings as agentd reads them: which it obeys,
//! which it turns into rules, and which it cannot honour — each of those
//! reported (in `rule_errors`), never silently ignored.

use serde_json::Value;

/// What agentd does with one `sandbox` setting of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    /// Obeyed as Claude Code 2.1.332 does (by the reader named in the
    /// README's Sandbox section).
    Obeyed,
    /// Not honoured, and why.
    NotHonoured(String),
}

/// A `sandbox.network.allowedDomains`/`deniedDomains` entry with a port
/// (`example.com:8443`): the gate tells hosts apart, not ports.
pub fn has_port(entry: &str) -> bool {
    without_port(entry).is_some()
}

/// The host of an entry with a port (`example.com:8443` → `example.com`).
pub fn without_port(entry: &str) -> Option<&str> {
    let entry = entry.trim();
    let (host, port) = match entry.strip_prefix('[') {
        // `[::1]:8080`
        Some(rest) => {
            let (host, after) = rest.split_once(']')?;
            (host, after.strip_prefix(':')?)
        }
        None => {
            let (host, port) = entry.split_once(':')?;
            if host.contains('/') || port.contains(':') {
                return None;
            }
            (host, port)
        }
    };
    let digits = !port.is_empty() && port.chars().all(|c| c.is_ascii_digit());
    // Only `host:digits`: a URL (`https://x/`) is no host with a port.
    (digits && !host.is_empty() && !host.contains('/')).then_some(host)
}

/// Every `sandbox` setting of `value` (a settings file's JSON) agentd does
/// not honour as written, with why; `project`: the file is a workspace's
/// own (whose settings may only narrow).
pub fn unhonoured(value: &Value, project: bool) -> Vec<(String, String)> {
    let Some(sandbox) = value.get("sandbox").and_then(Value::as_object) else { return Vec::new() };
    let mut out = Vec::new();
    for (key, v) in sandbox {
        let name = format!("sandbox.{key}");
        match key.as_str() {
            "network" => {
                for (nkey, nv) in v.as_object().into_iter().flatten() {
                    let name = format!("sandbox.network.{nkey}");
                    if let Reading::NotHonoured(why) = network(nkey, nv, project) {
                        out.push((name, why));
                    }
                }
            }
            "filesystem" => {
                for (fkey, fv) in v.as_object().into_iter().flatten() {
                    if let Reading::NotHonoured(why) = filesystem(fkey, fv) {
                        out.push((format!("sandbox.filesystem.{fkey}"), why));
                    }
                }
            }
            _ => {
                if let Reading::NotHonoured(why) = top(key, v, project) {
                    out.push((name, why));
                }
            }
        }
    }
    out
}

fn top(key: &str, v: &Value, project: bool) -> Reading {
    let no = |why: &str| Reading::NotHonoured(why.to_owned());
    match key {
        "enabled" if v.as_bool() == Some(false) => no(
            "agentd confines commands whatever this says (a session's sandbox.mode decides, and asks to run one outside)",
        ),
        "enabled" => Reading::Obeyed,
        "autoAllowBashIfSandboxed" if project => no("read from the user's own settings only"),
        "autoAllowBashIfSandboxed" => Reading::Obeyed,
        "failIfUnavailable" if v.as_bool() == Some(true) => {
            no("per file it is not: start agentd with --require-sandbox to refuse to start without the full sandbox")
        }
        "failIfUnavailable" => Reading::Obeyed,
        "excludedCommands" => no("agentd runs no command outside the sandbox unasked; a command that needs it asks \
             (dangerouslyDisableSandbox)"),
        "allowUnsandboxedCommands" if v.as_bool() == Some(false) => {
            no("a command that asks to run outside the sandbox still asks the user; deny Bash rules refuse it")
        }
        "allowUnsandboxedCommands" => Reading::Obeyed,
        "ignoreViolations" | "enableWeakerNestedSandbox" | "enableWeakerNetworkIsolation" => {
            no("agentd's walls are not weakened by settings")
        }
        _ => no("not a sandbox setting agentd knows"),
    }
}

fn network(key: &str, v: &Value, project: bool) -> Reading {
    let no = |why: String| Reading::NotHonoured(why);
    match key {
        // A denied entry with a port denies its host on every port.
        "deniedDomains" => Reading::Obeyed,
        "allowedDomains" => {
            let ported: Vec<&str> =
                v.as_array().into_iter().flatten().filter_map(Value::as_str).filter(|d| has_port(d)).collect();
            if ported.is_empty() {
                Reading::Obeyed
            } else {
                no(format!(
                    "{} left out: the network gate tells hosts apart, not ports (write the host alone)",
                    ported.join(", ")
                ))
            }
        }
        // The workspace's allowAll is reported where it is refused.
        "allowAll" => Reading::Obeyed,
        "strictAllowlist" | "allowUnixSockets" | "allowAllUnixSockets" if project => {
            no("read from the user's own settings only".to_owned())
        }
        "strictAllowlist" | "allowUnixSockets" | "allowAllUnixSockets" => Reading::Obeyed,
        "allowLocalBinding" => no("commands in the sandbox may not listen on the host's network".to_owned()),
        "httpProxyPort" | "socksProxyPort" => {
            no("agentd's own network gate is the proxy; another one is not used".to_owned())
        }
        "allowManagedDomainsOnly" => no("agentd has no managed settings".to_owned()),
        _ => no("not a network setting agentd knows".to_owned()),
    }
}

fn filesystem(key: &str, _v: &Value) -> Reading {
    let no = |why: &str| Reading::NotHonoured(why.to_owned());
    match key {
        // Kept as Edit deny rules (see `rules.rs`): the file tools obey
        // them, and a command's writes there are refused when its changes
        // are judged.
        "denyWrite" => Reading::Obeyed,
        // Kept as Read deny rules: the file tools obey them.
        "denyRead" => {
            no("kept as Read deny rules: Read, Glob and Grep obey them, but a command in the sandbox is not kept from \
             reading there")
        }
        "allowWrite" | "allowRead" => {
            no("agentd does not widen what a command may read or write by settings (add_dirs does, per session)")
        }
        _ => no("not a filesystem setting agentd knows"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_are_told_from_hosts() {
        assert_eq!(without_port("evil.example:443"), Some("evil.example"));
        assert_eq!(without_port("[::1]:8080"), Some("::1"));
        for with in ["example.com:8443", "[::1]:8080", "10.0.0.1:22"] {
            assert!(has_port(with), "{with}");
        }
        for without in ["example.com", "*.example.com", "[::1]", "::1", "https://bad/", "a.com:", "a.com:x1"] {
            assert!(!has_port(without), "{without}");
        }
    }

    #[test]
    fn what_is_not_honoured_is_said() {
        let value = json!({ "sandbox": {
            "enabled": true,
            "failIfUnavailable": true,
            "excludedCommands": ["docker"],
            "network": { "allowedDomains": ["a.com", "b.com:8443"], "strictAllowlist": true, "socksProxyPort": 1 },
            "filesystem": { "allowWrite": ["/opt"], "denyWrite": ["secrets/"], "denyRead": ["~/.aws"] },
            "somethingNew": 1
        }});
        let mut said: Vec<String> = unhonoured(&value, false).into_iter().map(|(k, _)| k).collect();
        said.sort();
        let mut want = vec![
            "sandbox.failIfUnavailable",
            "sandbox.excludedCommands",
            "sandbox.network.allowedDomains",
            "sandbox.network.socksProxyPort",
            "sandbox.filesystem.allowWrite",
            "sandbox.filesystem.denyRead",
            "sandbox.somethingNew",
        ];
        want.sort();
        assert_eq!(said, want);
        let project: Vec<String> = unhonoured(&value, true).into_iter().map(|(k, _)| k).collect();
        assert!(project.contains(&"sandbox.network.strictAllowlist".to_owned()), "{project:?}");
    }
}
