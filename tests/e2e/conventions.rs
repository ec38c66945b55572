//! Conventions the code base keeps, checked so they stay kept.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// STYLE.md: every file opens with `//!` saying what lives there and why.
#[test]
fn every_rust_file_opens_with_a_module_doc_comment() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    // (client/ holds agentctl's crate too.)
    for crate_dir in ["protocol", "daemon", "client", "tests"] {
        rust_files(&root.join(crate_dir), &mut files);
    }
    assert!(files.len() > 10, "found only {} files", files.len());
    let missing: Vec<_> =
        files.iter().filter(|f| !std::fs::read_to_string(f).unwrap().trim_start().starts_with("//!")).collect();
    assert!(missing.is_empty(), "files without a //! header: {missing:?}");
}

/// The protocol's one method list is what the daemon serves and what the
/// committed schema and `docs/protocol.md` describe: nothing served is
/// missing from them, nothing described is not served.
#[test]
fn the_daemon_serves_exactly_the_documented_methods() {
    let dir = tempfile::tempdir().unwrap();
    let config =
        agentd::Config::new(agentd::config::SocketConfig::Path(dir.path().join("s.sock")), dir.path().join("state"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let served = rt.block_on(async { agentd::Daemon::bind(config).unwrap().method_names() });
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root.join(agentd_protocol::schema::SCHEMA_PATH)).unwrap())
            .unwrap();
    let mut documented: Vec<String> = Vec::new();
    for (name, entry) in schema["methods"].as_object().unwrap() {
        documented.push(name.clone());
        if let Some(unsubscribe) = entry["unsubscribe"].as_str() {
            documented.push(unsubscribe.to_owned());
        }
    }
    documented.sort();
    assert_eq!(served, documented, "served vs in {}", agentd_protocol::schema::SCHEMA_PATH);
    let mut listed: Vec<String> = agentd_protocol::methods::METHOD_NAMES.iter().map(|s| (*s).to_owned()).collect();
    listed.extend(
        [
            agentd_protocol::methods::TURN_STREAM,
            agentd_protocol::methods::TURN_UNSTREAM,
            agentd_protocol::methods::DAEMON_WATCH,
            agentd_protocol::methods::DAEMON_UNWATCH,
        ]
        .map(str::to_owned),
    );
    listed.sort();
    assert_eq!(served, listed, "served vs the protocol crate's method list");
    let docs = std::fs::read_to_string(root.join(agentd_protocol::docs::DOCS_PATH)).unwrap();
    for name in &served {
        assert!(docs.contains(&format!("`{name}`")), "{name} is not in docs/protocol.md");
    }
}

/// The client library editors and scripts link carries no terminal or MCP
/// server dependencies (those are agentctl's), and the test tools stay in
/// their own module behind the test-tools feature.
#[test]
fn the_client_library_stays_lean_and_test_tools_stay_apart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("client/Cargo.toml")).unwrap();
    let normal = manifest.split("[dev-dependencies]").next().unwrap();
    for heavy in ["clap", "indicatif", "rmcp"] {
        assert!(!normal.lines().any(|l| l.trim_start().starts_with(heavy)), "agentd-client depends on {heavy}");
    }
    let tools = std::fs::read_dir(root.join("daemon/src/tools")).unwrap();
    let strays: Vec<String> = tools
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("test_"))
        .collect();
    assert!(strays.is_empty(), "test tools outside tools/testing/: {strays:?}");
}

/// The server is transport only: it reaches sessions through `Session`'s
/// methods, never the executor or the tools below them.
#[test]
fn the_server_calls_nothing_below_the_session() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../daemon/src/server");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 5, "found only {} files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for needle in ["crate::executor", "crate::tools", ".executor"] {
            assert!(!text.contains(needle), "{} mentions {needle}", file.display());
        }
    }
}

/// What a call sees (`tool/context.rs`) depends on nothing of the tool set
/// above it: ToolSearch reaches the tools through the `ToolCatalogue` trait.
#[test]
fn the_call_context_does_not_import_the_tool_set() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../daemon/src/tool/context.rs");
    let text = std::fs::read_to_string(file).unwrap();
    assert!(!text.contains("toolset"), "tool/context.rs imports the tool set again");
}

/// The crates live under `daemon`, `protocol`, `client` and `tests`, and
/// the sandbox helper's crate (`daemon/sandbox`) depends on no part of the
/// daemon: the daemon depends on it.
#[test]
fn crates_live_under_four_directories_and_the_sandbox_stands_apart() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut top: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    top.sort();
    assert_eq!(top, ["client", "daemon", "protocol", "tests"]);
    let manifest = std::fs::read_to_string(root.join("daemon/sandbox/Cargo.toml")).unwrap();
    assert!(manifest.contains("name = \"agentd-sandbox\""), "{manifest}");
    let deps = manifest.split("[dependencies]").nth(1).unwrap_or_default();
    assert!(!deps.lines().any(|l| l.trim_start().starts_with("agentd ") || l.trim_start().starts_with("agentd.")));
    let mut files = Vec::new();
    rust_files(&root.join("daemon/sandbox"), &mut files);
    assert!(files.len() >= 5, "{files:?}");
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(!text.contains("agentd::"), "{} names the daemon's crate", f.display());
    }
}

/// The shipped code of a file: its lines without comments, and without
/// test code (files named `tests.rs` or `*_tests.rs`, and the item after
/// `#[cfg(test)]` up to its closing brace).
fn shipped_lines(path: &Path) -> Vec<String> {
    if path.file_name().is_some_and(|n| n == "tests.rs" || n.to_string_lossy().ends_with("_tests.rs")) {
        return Vec::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut skipping: Option<usize> = None;
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let indent = line.len() - line.trim_start().len();
        if let Some(at) = skipping {
            if line.trim_start().starts_with('}') && indent == at {
                skipping = None;
            }
            continue;
        }
        if line.trim() == "#[cfg(test)]" {
            let next = lines.peek().copied().unwrap_or_default();
            if next.trim_end().ends_with('{') {
                skipping = Some(indent);
            } else {
                lines.next();
            }
            continue;
        }
        let code = line.split("//").next().unwrap_or_default();
        out.push(code.to_owned());
    }
    out
}

/// The daemon's top-level modules and the others each one's shipped code
/// names (`crate::other`).
fn module_graph() -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../daemon/src");
    let mut modules = std::collections::BTreeMap::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if ["lib", "main", "bin"].contains(&name.as_str()) {
            continue;
        }
        let mut files = Vec::new();
        if path.is_dir() {
            rust_files(&path, &mut files);
        } else {
            files.push(path);
        }
        modules.insert(name, files);
    }
    let mut graph = std::collections::BTreeMap::new();
    for (name, files) in &modules {
        let mut uses = std::collections::BTreeSet::new();
        for line in files.iter().flat_map(|f| shipped_lines(f)) {
            for part in line.split("crate::").skip(1) {
                let other: String = part.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if other != *name && modules.contains_key(&other) {
                    uses.insert(other);
                }
            }
        }
        graph.insert(name.clone(), uses);
    }
    graph
}

/// No top-level module of the daemon reaches itself through the modules
/// it names: the layers stay layers (fs, permission, web, process,
/// sandbox, tool, tools, hooks, events, store, agents, executor, session,
/// server — each names only what lies below it).
#[test]
fn no_import_cycle_between_the_daemons_modules() {
    let graph = module_graph();
    assert!(graph.len() > 15, "{graph:?}");
    assert!(graph["tools"].contains("tool"), "the scan finds nothing: {graph:?}");
    // A depth-first walk from each module: a path back to it is a cycle.
    let mut cycles = Vec::new();
    for start in graph.keys() {
        let mut stack = vec![(start.clone(), vec![start.clone()])];
        let mut seen = std::collections::BTreeSet::new();
        while let Some((at, path)) = stack.pop() {
            for next in &graph[&at] {
                if next == start {
                    cycles.push(format!("{} -> {start}", path.join(" -> ")));
                } else if seen.insert(next.clone()) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push((next.clone(), longer));
                }
            }
        }
    }
    assert!(cycles.is_empty(), "import cycles between the daemon's modules:\n{}", cycles.join("\n"));
}

/// The executor names no tool: tools declare their kind and build their
/// own permission facts; its files and functions stay small.
#[test]
fn the_executor_names_no_tool_and_stays_small() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut names = Vec::new();
    let mut tool_files = Vec::new();
    rust_files(&root.join("daemon/src/tools"), &mut tool_files);
    for f in &tool_files {
        let text = std::fs::read_to_string(f).unwrap();
        for line in text.lines() {
            let line = line.trim();
            if (line.starts_with("const NAME: &'static str = \"") || line.starts_with("pub const NAME: &str = \""))
                && let Some(name) = line.split('"').nth(1)
            {
                names.push(name.to_owned());
            }
        }
    }
    assert!(names.len() > 20 && names.iter().any(|n| n == "Bash"), "{names:?}");
    let mut files = Vec::new();
    rust_files(&root.join("daemon/src/executor"), &mut files);
    assert!(files.len() > 5);
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let shown = f.display();
        assert!(text.lines().count() <= 700, "{shown} has {} lines", text.lines().count());
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            assert!(!code.contains("crate::tools::"), "{shown}:{} names a tool's module", i + 1);
            assert!(!code.contains("shell::"), "{shown}:{} parses shell", i + 1);
            for name in &names {
                assert!(!code.contains(&format!("\"{name}\"")), "{shown}:{} names the tool {name}", i + 1);
            }
        }
        // Functions: from `fn` to the closing brace at its indentation.
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let is_fn = ["fn ", "pub fn ", "pub(super) fn ", "pub(crate) fn ", "async fn ", "pub(super) async fn "]
                .iter()
                .any(|p| t.starts_with(p));
            if !is_fn || t.ends_with(';') {
                continue;
            }
            let indent = line.len() - t.len();
            let end = lines[i..]
                .iter()
                .position(|l| l.len() - l.trim_start().len() == indent && l.trim_start().starts_with('}'))
                .unwrap_or(0);
            assert!(end < 80, "{shown}:{}: a function of {} lines", i + 1, end + 1);
        }
    }
}

/// What a call sees stays small, and names neither sub-agents nor
/// processes: those are services a tool asks for.
#[test]
fn the_tool_context_has_at_most_ten_fields() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../daemon/src/tool/context.rs");
    let text = std::fs::read_to_string(path).unwrap();
    let body = text.split("pub struct ToolContext {").nth(1).unwrap().split("\n}").next().unwrap();
    let fields: Vec<&str> = body.lines().map(str::trim).filter(|l| l.starts_with("pub ")).collect();
    assert!(!fields.is_empty() && fields.len() <= 10, "{fields:?}");
    for field in fields {
        assert!(!field.contains("agents") && !field.contains("process"), "{field}");
    }
}

/// Issue 53: every member crate takes the workspace's minimum Rust version
/// (one place says it), and every `unsafe` block must say why it is sound
/// (`clippy::undocumented_unsafe_blocks` denied for the whole workspace).
#[test]
fn members_take_the_workspaces_rust_version_and_unsafe_says_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let workspace = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = workspace.lines().find_map(|l| l.strip_prefix("members = ")).expect("a members line");
    for member in members.trim_matches(['[', ']']).split(',').map(|m| m.trim().trim_matches('"')) {
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        assert!(manifest.lines().any(|l| l.trim() == "rust-version.workspace = true"), "{member}/Cargo.toml");
        assert!(!manifest.contains("[lints.clippy]"), "{member} must not override the workspace's lints");
        assert!(manifest.lines().any(|l| l.trim() == "workspace = true"), "{member}/Cargo.toml: [lints] workspace");
    }
    let clippy = workspace.split("[workspace.lints.clippy]").nth(1).unwrap_or_default();
    assert!(clippy.lines().any(|l| l.trim() == "undocumented_unsafe_blocks = \"deny\""), "{clippy}");
    // Bash's temp directory goes with its guard (`CallTmp`), not by hand at
    // each way out: its drop, and the removal after the result is out.
    let bash = std::fs::read_to_string(root.join("daemon/src/tools/bash/mod.rs")).unwrap();
    assert_eq!(bash.matches("remove_dir_all").count(), 2, "Bash's temp directory is removed by hand again");
}

/// Issue 53: a poisoned lock is taken over in one place per crate (the
/// daemon's `sync.rs`, the client's `lock` (agentctl's too), the sandbox helper's
/// one static), not written out at each lock: at most 5 sites in product
/// code.
#[test]
fn a_poisoned_lock_is_taken_over_in_one_place() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for crate_dir in ["protocol", "daemon", "client"] {
        rust_files(&root.join(crate_dir), &mut files);
    }
    let sites: Vec<String> = files
        .iter()
        .filter(|f| !f.to_string_lossy().contains("/examples/"))
        .flat_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            // The daemon's helper counts once.
            let helper = f.ends_with("daemon/src/sync.rs");
            let n = text.matches("e.into_inner())").count() + text.matches("PoisonError::into_inner").count();
            let n = if helper { n.min(1) } else { n };
            std::iter::repeat_n(f.display().to_string(), n)
        })
        .collect();
    assert!(sites.len() <= 5, "{} sites: {sites:#?}", sites.len());
}
