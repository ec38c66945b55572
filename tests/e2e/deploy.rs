//! The Kubernetes manifests in `deploy/kubernetes/` pass
//! `scripts/validate-manifests.sh` (kubernetes-validate in strict mode, the
//! Sandbox's fields, and what the sandbox needs of every pod), and the check
//! is not vacuous: a copy with a misspelled field, an unknown apiVersion, a
//! misspelled field in the Sandbox or its pod, or a container of another uid
//! fails it. Every `AGENTD_*` variable they set is one that agentd or
//! agentctl reads.
//!
//! `.ci/run` installs kubernetes-validate and sets
//! `AGENTD_TEST_KUBE_VALIDATE` (its executable, in a venv whose Python has
//! PyYAML). Without it the validator's tests say so and pass, except under
//! CI, where a missing validator is a failure.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use agentd_tests::bin_path;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn manifests() -> PathBuf {
    repo().join("deploy/kubernetes")
}

fn validator() -> Option<PathBuf> {
    match std::env::var_os("AGENTD_TEST_KUBE_VALIDATE").map(PathBuf::from).filter(|p| p.exists()) {
        Some(p) => Some(p),
        None if std::env::var_os("CI").is_some() => {
            panic!("AGENTD_TEST_KUBE_VALIDATE is not set under CI (.ci/run sets it)")
        }
        None => {
            eprintln!("skipped: AGENTD_TEST_KUBE_VALIDATE is not set (see .ci/run)");
            None
        }
    }
}

/// Runs `scripts/validate-manifests.sh` on `dir`: whether it passed, and
/// what it printed.
fn validate(kv: &Path, dir: &Path) -> (bool, String) {
    let out = Command::new("bash")
        .arg(repo().join("scripts/validate-manifests.sh"))
        .arg(dir)
        .env("AGENTD_TEST_KUBE_VALIDATE", kv)
        .output()
        .expect("bash runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// A copy of the manifests in a temp dir, each `(file, from, to)` replacing
/// `from`, which must occur once in `file`, by `to`.
fn broken_copy(edits: &[(&str, &str, &str)]) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(manifests()).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    for (file, from, to) in edits {
        let path = tmp.path().join(file);
        let text = std::fs::read_to_string(&path).unwrap();
        let count = text.matches(from).count();
        assert_eq!(count, 1, "{file} has {from:?} {count} times, not once: update this test");
        std::fs::write(path, text.replace(from, to)).unwrap();
    }
    tmp
}

/// Asserts the broken copy fails the check, saying `why`.
fn fails_saying(edits: &[(&str, &str, &str)], why: &str) {
    let Some(kv) = validator() else { return };
    let copy = broken_copy(edits);
    let (ok, text) = validate(&kv, copy.path());
    assert!(!ok, "the check passed a broken copy ({edits:?}):\n{text}");
    assert!(text.contains(why), "the check failed, but not saying {why:?}:\n{text}");
}

#[test]
fn manifests_pass_kubernetes_validate_strict() {
    let Some(kv) = validator() else { return };
    let (ok, text) = validate(&kv, &manifests());
    assert!(ok, "scripts/validate-manifests.sh failed:\n{text}");
    // Each workload was really validated, for the oldest and the newest
    // Kubernetes checked, the Sandbox through the pod its controller makes.
    let resources = ["job/agentd-run", "statefulset/agentd", "service/agentd", "networkpolicy/agentd", "pod/agentd"];
    for version in ["1.30", "1.37"] {
        for resource in resources {
            let line = format!("passed for resource {resource} against version {version}");
            assert!(text.contains(&line), "no {line:?} in:\n{text}");
        }
    }
    // The warm pool's template is checked as its Sandboxes' pods are, and
    // its network policy as the NetworkPolicy the controller makes.
    assert!(text.contains("sandbox-warmpool.yaml.pod.yaml passed for resource networkpolicy/agentd"), "{text}");
    assert!(text.contains("4 pod specs: every container runs as 10001"), "{text}");
}

/// agent-sandbox's SandboxTemplate, SandboxWarmPool and SandboxClaim are
/// held to their v1beta1 fields; what a pool or a claim names must be
/// there; the template's pod meets what the sandbox needs.
#[test]
fn the_warm_pool_its_template_and_a_claim_are_checked() {
    // (file, text, changed to, what the check says)
    let broken = [
        ("sandbox-warmpool.yaml", "  replicas: 2", "  replica: 2", "unknown field 'replica'"),
        (
            "sandbox-warmpool.yaml",
            "  envVarsInjectionPolicy: Disallowed",
            "  envVarsInjectionPolicy: Never",
            "spec.envVarsInjectionPolicy must be one of Allowed, Overrides, Disallowed",
        ),
        (
            "sandbox-claim.yaml",
            "  warmPoolRef:\n    name: agentd",
            "  warmPoolRef:\n    name: agentd-gpu",
            "SandboxClaim names SandboxWarmPool 'agentd-gpu', which is not here",
        ),
        (
            "sandbox-claim.yaml",
            "    shutdownPolicy: Delete",
            "    shutdownPolicy: Remove",
            "spec.lifecycle.shutdownPolicy must be one of Delete, DeleteForeground, Retain",
        ),
        ("sandbox-warmpool.yaml", "              type: Localhost", "              type: RuntimeDefault", "Localhost"),
    ];
    for (file, text, changed, says) in broken {
        fails_saying(&[(file, text, changed)], says);
    }
}

#[test]
fn a_misspelled_field_fails_kubernetes_validate() {
    fails_saying(
        &[("statefulset.yaml", "            procMount: Unmasked", "            procMonut: Unmasked")],
        "Additional properties are not allowed ('procMonut' was unexpected)",
    );
}

#[test]
fn an_unknown_api_version_fails_validation() {
    // kubernetes-validate only warns about a kind it has no schema for: the
    // script makes that an error.
    fails_saying(
        &[("job-sidecar.yaml", "apiVersion: batch/v1", "apiVersion: batch/v9")],
        "Couldn't find schema for kind Job with api version batch/v9",
    );
}

#[test]
fn a_misspelled_field_in_the_sandbox_or_its_pod_fails_validation() {
    fails_saying(
        &[("sandbox.yaml", "  operatingMode: Running", "  operatingMod: Running")],
        "unknown field 'operatingMod'",
    );
    fails_saying(
        &[("sandbox.yaml", "      hostUsers: false", "      hostUser: false")],
        "Additional properties are not allowed ('hostUser' was unexpected)",
    );
}

#[test]
fn a_container_of_another_uid_fails_validation() {
    fails_saying(
        &[(
            "job-sidecar.yaml",
            "            # The harness needs no privilege at all.\n",
            "            # The harness needs no privilege at all.\n            runAsUser: 1000\n",
        )],
        "container harness: runAsUser must be 10001",
    );
}

/// The `AGENTD_*` names in `text`, outside YAML comments.
fn agentd_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        // A comment starts at a `#` that begins the line or follows a blank.
        let comment = line.char_indices().find(|&(i, c)| c == '#' && (i == 0 || line[..i].ends_with([' ', '\t'])));
        let code = comment.map_or(line, |(i, _)| &line[..i]);
        let mut rest = code;
        while let Some(at) = rest.find("AGENTD_") {
            let word = &rest[at..];
            let end = word.find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
            let end = end.unwrap_or(word.len());
            names.insert(word[..end].to_owned());
            rest = &word[end..];
        }
    }
    names
}

/// The environment variables a binary's `--help` lists (`[env: NAME=...]`).
fn env_in_help(binary: &str) -> BTreeSet<String> {
    let out = Command::new(bin_path(binary)).arg("--help").output().unwrap();
    assert!(out.status.success(), "{binary} --help failed");
    // clap may wrap a line after `[env:`: read the text with its blanks
    // collapsed.
    let help = String::from_utf8_lossy(&out.stdout).split_whitespace().collect::<Vec<_>>().join(" ");
    help.split("[env: ").skip(1).map(|s| s[..s.find(['=', ']']).unwrap_or(s.len())].to_owned()).collect()
}

#[test]
fn manifests_set_only_variables_agentd_reads() {
    let mut used = BTreeSet::new();
    for entry in std::fs::read_dir(manifests()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            used.extend(agentd_names(&std::fs::read_to_string(path).unwrap()));
        }
    }
    // The image's own settings too (the Containerfile's ENV).
    let image = std::fs::read_to_string(repo().join("Containerfile")).unwrap();
    let image_names = agentd_names(&image);
    for name in ["AGENTD_SOCKET", "AGENTD_STATE_DIR", "AGENTD_REQUIRE_SANDBOX"] {
        assert!(image_names.contains(name), "the Containerfile no longer sets {name}");
    }
    used.extend(image_names);
    for name in ["AGENTD_SOCKET", "AGENTD_STATE_DIR", "AGENTD_REQUIRE_SANDBOX", "AGENTD_SHUTDOWN_GRACE"] {
        assert!(used.contains(name), "the manifests no longer set {name}: {used:?}");
    }
    let mut known = env_in_help("agentd");
    known.extend(env_in_help("agentctl"));
    assert!(known.contains("AGENTD_SOCKET"), "no [env: ...] read from --help: {known:?}");
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "the manifests set {unknown:?}, which neither agentd nor agentctl reads ({known:?})");
}

#[test]
fn the_probe_is_a_command_agentctl_has() {
    for file in ["job-sidecar.yaml", "statefulset.yaml", "sandbox.yaml"] {
        let manifest = std::fs::read_to_string(manifests().join(file)).unwrap();
        let probe = r#"command: ["agentctl", "status", "--require-sandbox"]"#;
        assert!(manifest.contains(probe), "{file} does not probe with {probe}");
    }
    let out = Command::new(bin_path("agentctl")).args(["status", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && help.contains("--require-sandbox"), "agentctl status --help:\n{help}");
}

/// The Job's stand-in harness (the `sh -ec` script of its `harness`
/// container), as written in the manifest.
fn harness_script() -> String {
    let text = std::fs::read_to_string(manifests().join("job-sidecar.yaml")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.iter().position(|l| l.trim() == "- -ec").expect("the harness runs sh -ec") + 1;
    assert_eq!(lines[start].trim(), "- |", "the script is a literal block");
    let indent = lines[start + 1].len() - lines[start + 1].trim_start().len();
    let mut script = String::new();
    for line in &lines[start + 1..] {
        if !line.trim().is_empty() && line.len() - line.trim_start().len() < indent {
            break;
        }
        script.push_str(line.get(indent..).unwrap_or(""));
        script.push('\n');
    }
    script
}

#[test]
fn the_jobs_harness_script_runs_against_a_real_agentd() {
    let script = harness_script();
    assert!(script.contains("agentctl status --require-sandbox"), "{script}");
    let d = agentd_tests::StandaloneDaemon::start(&[], &[]);
    let ws = tempfile::tempdir().unwrap();
    let repo_dir = ws.path().join("repo");
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).current_dir(ws.path()).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    git(&["init", "-q", "repo"]);
    git(&["-C", "repo", "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-q", "--allow-empty", "-m", "first"]);
    // agentctl as the pod has it (on PATH), the workspace where the test made it.
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(bin_path("agentctl"), bin.path().join("agentctl")).unwrap();
    let path = format!("{}:{}", bin.path().display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new("sh")
        .args(["-ec", &script.replace("/workspace/repo", &repo_dir.display().to_string())])
        .env("AGENTD_SOCKET", &d.socket)
        .env("PATH", path)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the harness failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("first") && stdout.contains("?? AGENT_NOTES.md"), "{stdout}");
    assert!(repo_dir.join("AGENT_NOTES.md").exists());
}

#[test]
fn the_seccomp_profile_is_what_its_generator_writes() {
    // deploy/seccomp/agentd.json is made by scripts/make-seccomp-profile.py
    // from its rule lists: an edit of one without the other fails here.
    let out = Command::new("python3")
        .arg(repo().join("scripts/make-seccomp-profile.py"))
        .arg("--check")
        .output()
        .expect("python3 runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    // And it lets through what the nested sandbox needs, where the
    // runtime's default does not.
    let profile: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(repo().join("deploy/seccomp/agentd.json")).unwrap()).unwrap();
    let allowed: BTreeSet<&str> = profile["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "SCMP_ACT_ALLOW")
        .flat_map(|r| r["names"].as_array().unwrap().iter().filter_map(|n| n.as_str()))
        .collect();
    for call in [
        "unshare",
        "mount",
        "mount_setattr",
        "pidfd_getfd",
        "seccomp",
        "landlock_create_ruleset",
        "landlock_restrict_self",
    ] {
        assert!(allowed.contains(call), "the profile does not allow {call}");
    }
    assert_eq!(profile["defaultAction"], "SCMP_ACT_ERRNO", "{}", profile["defaultAction"]);
}
