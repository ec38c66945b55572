//! `e2e-seccomp-exec PROFILE PROGRAM [ARG...]`: runs PROGRAM under an OCI
//! seccomp profile (the format of `deploy/seccomp/agentd.json`), as a
//! container runtime would, without a container engine: the profile's rules
//! become BPF filters (seccompiler, which names calls the way the profile
//! does), installed with `no_new_privs`, then PROGRAM is executed and
//! inherits them, as do all its children (the sandbox helper, the zygote,
//! each call's processes).
//!
//! Why: agentd's image runs under that profile, and a call the sandbox makes
//! that the profile refuses leaves every pod unready (issue 49). The tests
//! run the real daemon through this program, so a change to the sandbox's
//! system calls breaks a test rather than a user's pods.
//!
//! Semantics kept from the runtime: a call no rule names gets the
//! `defaultAction` (`SCMP_ACT_ERRNO` with `defaultErrnoRet`, EPERM when
//! absent); a rule's `args` all hold together; several rules for one call
//! are alternatives. Names this architecture lacks are skipped, as the
//! runtime skips them. Rules are grouped by action into one filter each:
//! the `SCMP_ACT_ALLOW` rules with the default action, installed first, then
//! one filter per other action (e.g. `clone3`'s ENOSYS) that allows
//! everything else; the kernel runs every filter and keeps the most
//! restrictive answer, and of equal ones the latest installed, so a call
//! gets its rule's errno as under the runtime's single filter.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::CommandExt;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

const EPERM: u64 = 1;

fn main() -> std::process::ExitCode {
    match run() {
        // `run` returns only when exec failed or the profile is wrong.
        Ok(never) => match never {},
        Err(e) => {
            eprintln!("e2e-seccomp-exec: {e:#}");
            std::process::ExitCode::from(125)
        }
    }
}

fn run() -> Result<std::convert::Infallible> {
    let mut args = std::env::args_os().skip(1);
    let (Some(profile), Some(program)) = (args.next(), args.next()) else {
        bail!("usage: e2e-seccomp-exec PROFILE PROGRAM [ARG...]");
    };
    let text = std::fs::read_to_string(&profile).with_context(|| format!("read {}", profile.to_string_lossy()))?;
    let profile: Value = serde_json::from_str(&text).context("parse the profile")?;
    let filters = filters(&profile)?;
    for filter in &filters {
        seccompiler::apply_filter(filter).context("install a filter")?;
    }
    let err = std::process::Command::new(&program).args(args).exec();
    Err(err).with_context(|| format!("exec {}", program.to_string_lossy()))
}

fn native() -> Result<(seccompiler::TargetArch, &'static str)> {
    match std::env::consts::ARCH {
        "x86_64" => Ok((seccompiler::TargetArch::x86_64, "SCMP_ARCH_X86_64")),
        "aarch64" => Ok((seccompiler::TargetArch::aarch64, "SCMP_ARCH_AARCH64")),
        "riscv64" => Ok((seccompiler::TargetArch::riscv64, "SCMP_ARCH_RISCV64")),
        other => bail!("no seccompiler target for {other}"),
    }
}

/// The action in seccompiler's JSON form.
fn action(name: &str, errno: Option<&Value>) -> Result<Value> {
    Ok(match name {
        "SCMP_ACT_ALLOW" => json!("allow"),
        "SCMP_ACT_ERRNO" => json!({"errno": errno.and_then(Value::as_u64).unwrap_or(EPERM)}),
        "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => json!("kill_thread"),
        "SCMP_ACT_KILL_PROCESS" => json!("kill_process"),
        "SCMP_ACT_TRAP" => json!("trap"),
        "SCMP_ACT_LOG" => json!("log"),
        other => bail!("action {other} is not supported here"),
    })
}

/// One OCI argument filter in seccompiler's JSON form (64-bit compares, as
/// libseccomp makes them).
fn condition(arg: &Value) -> Result<Value> {
    let value = arg["value"].as_u64().context("an argument filter without value")?;
    let two = arg["valueTwo"].as_u64().unwrap_or(0);
    let (op, val) = match arg["op"].as_str().unwrap_or_default() {
        "SCMP_CMP_EQ" => (json!("eq"), value),
        "SCMP_CMP_NE" => (json!("ne"), value),
        "SCMP_CMP_LT" => (json!("lt"), value),
        "SCMP_CMP_LE" => (json!("le"), value),
        "SCMP_CMP_GT" => (json!("gt"), value),
        "SCMP_CMP_GE" => (json!("ge"), value),
        "SCMP_CMP_MASKED_EQ" => (json!({"masked_eq": value}), two),
        other => bail!("comparison {other} is not supported here"),
    };
    Ok(json!({"index": arg["index"], "type": "qword", "op": op, "val": val}))
}

/// Whether seccompiler knows `name` on `arch` (the runtime skips a name the
/// architecture lacks: the 32-bit variants on x86_64, another's own calls).
fn known(name: &str, arch: seccompiler::TargetArch) -> bool {
    let probe = json!({"probe": {"mismatch_action": "allow", "match_action": "log", "filter": [{"syscall": name}]}});
    seccompiler::compile_from_json(probe.to_string().as_bytes(), arch).is_ok()
}

/// The profile's filters for this architecture, in the order to install.
fn filters(profile: &Value) -> Result<Vec<seccompiler::BpfProgram>> {
    let (arch, arch_name) = native()?;
    let archs = profile["architectures"].as_array().context("no architectures")?;
    if !archs.iter().any(|a| a == arch_name) {
        bail!("the profile does not name {arch_name}");
    }
    let default =
        action(profile["defaultAction"].as_str().context("no defaultAction")?, profile.get("defaultErrnoRet"))?;
    // Action → name → argument filters (None: the call whatever its
    // arguments, which makes any conditional rule for it moot).
    let mut groups: BTreeMap<String, BTreeMap<String, Option<Vec<Value>>>> = BTreeMap::new();
    let mut unknown = BTreeSet::new();
    for rule in profile["syscalls"].as_array().context("no syscalls")? {
        let act = action(rule["action"].as_str().context("a rule without action")?, rule.get("errnoRet"))?;
        let args = match rule.get("args").and_then(Value::as_array) {
            Some(args) if !args.is_empty() => Some(args.iter().map(condition).collect::<Result<Vec<_>>>()?),
            _ => None,
        };
        for name in rule["names"].as_array().context("a rule without names")?.iter().filter_map(Value::as_str) {
            if unknown.contains(name) || !known(name, arch) {
                unknown.insert(name.to_owned());
                continue;
            }
            let entry = groups.entry(act.to_string()).or_default().entry(name.to_owned());
            match (entry, &args) {
                (std::collections::btree_map::Entry::Vacant(v), args) => {
                    v.insert(args.clone().map(|a| vec![json!({"syscall": name, "args": a})]));
                }
                (std::collections::btree_map::Entry::Occupied(mut o), Some(args)) => {
                    if let Some(rules) = o.get_mut() {
                        rules.push(json!({"syscall": name, "args": args}));
                    }
                }
                (std::collections::btree_map::Entry::Occupied(mut o), None) => {
                    o.insert(None);
                }
            }
        }
    }
    let allow = json!("allow").to_string();
    let mut order: Vec<&String> = groups.keys().filter(|k| **k == allow).collect();
    order.extend(groups.keys().filter(|k| **k != allow));
    let mut out = Vec::new();
    for key in order {
        let rules: Vec<Value> = groups[key]
            .iter()
            .flat_map(|(name, rules)| rules.clone().unwrap_or_else(|| vec![json!({"syscall": name})]))
            .collect();
        let match_action: Value = serde_json::from_str(key)?;
        let mismatch = if *key == allow { default.clone() } else { json!("allow") };
        let spec = json!({"f": {"mismatch_action": mismatch, "match_action": match_action, "filter": rules}});
        let mut compiled = seccompiler::compile_from_json(spec.to_string().as_bytes(), arch)
            .map_err(|e| anyhow::anyhow!("compile the {key} filter: {e}"))?;
        out.push(compiled.remove("f").context("the compiled filter")?);
    }
    // Without any allow rule the default still applies to everything.
    if !groups.contains_key(&allow) {
        bail!("the profile allows nothing");
    }
    Ok(out)
}
