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
    listed
        .extend([agentd_protocol::methods::TURN_STREAM.to_owned(), agentd_protocol::methods::TURN_UNSTREAM.to_owned()]);
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
