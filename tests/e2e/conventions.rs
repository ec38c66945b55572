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
    for crate_dir in ["protocol", "daemon", "client", "tests"] {
        rust_files(&root.join(crate_dir), &mut files);
    }
    assert!(files.len() > 10, "found only {} files", files.len());
    let missing: Vec<_> =
        files.iter().filter(|f| !std::fs::read_to_string(f).unwrap().trim_start().starts_with("//!")).collect();
    assert!(missing.is_empty(), "files without a //! header: {missing:?}");
}
