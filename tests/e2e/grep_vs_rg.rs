//! Grep against the real ripgrep: the same search through the daemon and
//! through `rg` run in the session's directory with the flags Claude Code
//! passes it (`--max-columns 500`, the path absolute), compared line by
//! line. Uses `$AGENTD_TEST_RG`, else `rg` on PATH; skipped, saying so,
//! where neither is there (CI installs ripgrep 15.1).

use std::path::{Path, PathBuf};
use std::process::Command;

use agentd_tests::TestDaemon;
use serde_json::{Value, json};

fn rg() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AGENTD_TEST_RG") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("rg")).find(|p| p.is_file())
}

/// The fixture: CRLF lines, binary files (a NUL at once, and one after
/// 5,000 lines), nested ignore files, hidden files, multi-line matches,
/// a long line, non-ASCII text.
fn tree(ws: &Path) {
    let late: String = (1..=5000)
        .map(|i| if i == 10 { "alpha early\n".to_owned() } else { format!("{i} line padding padding padding\n") })
        .collect();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("crlf.txt", b"alpha one\r\nbeta\r\nalpha two\r\n".to_vec()),
        ("ctx.txt", b"1 alpha\n2\n3\n4\n5\n6 alpha\n7\n8 alpha\n9\n".to_vec()),
        ("src/bin.dat", b"x alpha\n\0\0binary\nalpha\n".to_vec()),
        ("src/late.dat", [late.as_bytes(), b"\0\nalpha end\n"].concat()),
        ("src/mid.dat", [late.as_bytes(), b"xx\0yy alpha\nzz\nalpha end\n"].concat()),
        ("src/both.dat", [late.as_bytes(), b"xx\0yy alpha\nzz\nalpha end\n"].concat()),
        ("src/small.dat", b"alpha 1\nxx\0 alpha\nalpha 3\n".to_vec()),
        ("src/m.rs", b"fn a() {\n}\nfn b() {\n}\n\nfn main() {}\n".to_vec()),
        ("src/lib.py", b"ALPHA = 1\nalpha = 2\n".to_vec()),
        ("src/.gitignore", b"ignored.txt\n".to_vec()),
        ("src/ignored.txt", b"alpha ignored\n".to_vec()),
        ("src/sub/s.txt", b"alpha sub\n".to_vec()),
        ("src/sub/.ignore", b"*.tmp\n".to_vec()),
        ("src/sub/x.tmp", b"alpha tmp\n".to_vec()),
        (".hidden/h.txt", b"alpha hidden\n".to_vec()),
        ("long.txt", [vec![b'x'; 600], b" alpha\nshort alpha\n".to_vec()].concat()),
        ("uni.txt", "été ÉTÉ\nnaïve\n".as_bytes().to_vec()),
        ("toml.toml", b"alpha = true\n".to_vec()),
    ];
    for (path, body) in files {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    // Enough files that a search of the whole tree takes the parallel
    // walker, while one of `src` stays on the small-tree path: both are
    // compared.
    for i in 0..300 {
        let p = ws.join(format!("many/d{}/f{i}.txt", i % 7));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, if i % 50 == 0 { format!("alpha in many {i}\n") } else { format!("nothing {i}\n") }).unwrap();
    }
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(ws.join("x.log"), "alpha log\n").unwrap();
}

/// rg's arguments for a Grep input, as Claude Code builds them.
fn rg_args(input: &Value, ws: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["--sort".into(), "path".into(), "--max-columns".into(), "500".into(), "-H".into()];
    let mode = input["output_mode"].as_str().unwrap_or("files_with_matches");
    match mode {
        "files_with_matches" => args.push("-l".into()),
        "count" => args.push("-c".into()),
        _ => {
            if input["-n"] != json!(false) {
                args.push("-n".into());
            }
            // `-C` when set (and not 0) alone; else `-A`/`-B`.
            match input["-C"].as_u64().filter(|c| *c > 0) {
                Some(c) => args.extend(["-C".to_owned(), c.to_string()]),
                None => {
                    for flag in ["-A", "-B"] {
                        if let Some(n) = input[flag].as_u64() {
                            args.extend([flag.to_owned(), n.to_string()]);
                        }
                    }
                }
            }
        }
    }
    if input["-o"] == json!(true) && mode == "content" {
        args.push("-o".into());
    }
    if input["-i"] == json!(true) {
        args.push("-i".into());
    }
    if input["multiline"] == json!(true) {
        args.extend(["-U".into(), "--multiline-dotall".into()]);
    }
    if let Some(t) = input["type"].as_str() {
        args.extend(["--type".into(), t.into()]);
    }
    if let Some(g) = input["glob"].as_str() {
        for piece in g.split_whitespace() {
            let parts: Vec<&str> =
                if piece.contains('{') { vec![piece] } else { piece.split(',').filter(|p| !p.is_empty()).collect() };
            for p in parts {
                args.extend(["--glob".into(), p.into()]);
            }
        }
    }
    args.extend(["-e".into(), input["pattern"].as_str().unwrap().into()]);
    let path = input["path"].as_str().map(|p| ws.join(p)).unwrap_or_else(|| ws.to_path_buf());
    args.push(path.display().to_string());
    args
}

fn cases() -> Vec<Value> {
    vec![
        json!({"pattern": "alpha"}),
        json!({"pattern": "alpha", "output_mode": "content"}),
        json!({"pattern": "alpha", "output_mode": "content", "-n": false}),
        json!({"pattern": "alpha", "output_mode": "content", "-C": 1}),
        json!({"pattern": "alpha", "output_mode": "content", "-A": 2, "-B": 1, "path": "ctx.txt"}),
        json!({"pattern": "alpha", "output_mode": "content", "-n": false, "-C": 1, "path": "ctx.txt"}),
        json!({"pattern": "alpha", "output_mode": "content", "-C": 1, "-A": 3, "path": "ctx.txt"}),
        json!({"pattern": "alpha", "output_mode": "content", "-C": 0, "-B": 2, "path": "ctx.txt"}),
        json!({"pattern": "al[a-z]+", "output_mode": "content", "-o": true}),
        json!({"pattern": "alpha", "output_mode": "content", "-o": true, "-C": 1, "path": "ctx.txt"}),
        json!({"pattern": "fn \\w+|\\}\\n\\n", "multiline": true, "output_mode": "content", "-o": true, "path": "src/m.rs"}),
        json!({"pattern": "a*", "output_mode": "content", "-o": true, "path": "ctx.txt"}),
        json!({"pattern": "alpha", "output_mode": "count", "-o": true}),
        json!({"pattern": "alpha", "output_mode": "count"}),
        json!({"pattern": "alpha", "-i": true, "output_mode": "count"}),
        json!({"pattern": "été", "-i": true, "output_mode": "content"}),
        json!({"pattern": "alpha", "glob": "src/**/*.txt", "path": "src"}),
        json!({"pattern": "alpha", "glob": "*.py,*.toml"}),
        json!({"pattern": "alpha", "glob": "*.txt *.toml", "output_mode": "count"}),
        json!({"pattern": "alpha", "glob": "*.{py,toml}"}),
        json!({"pattern": "alpha", "glob": "!*.txt"}),
        json!({"pattern": "alpha", "type": "rust"}),
        json!({"pattern": "alpha", "type": "py", "-i": true, "output_mode": "content"}),
        json!({"pattern": "fn \\w+\\(\\) \\{\\n\\}\\n", "multiline": true, "output_mode": "content"}),
        json!({"pattern": "fn \\w+\\(\\) \\{\\n\\}\\n", "multiline": true, "output_mode": "count"}),
        json!({"pattern": "\\}\\n\\n", "multiline": true, "output_mode": "content"}),
        // Multiline with a pattern that cannot span lines: lines counted.
        json!({"pattern": "alpha", "multiline": true, "output_mode": "count"}),
        json!({"pattern": "a", "multiline": true, "output_mode": "count", "path": "ctx.txt"}),
        json!({"pattern": "fn", "multiline": true, "output_mode": "content", "path": "src/m.rs"}),
        // A named binary file whose NUL comes after a match.
        json!({"pattern": "alpha", "path": "src/late.dat", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src/late.dat", "output_mode": "count"}),
        json!({"pattern": "alpha", "path": "src/late.dat"}),
        json!({"pattern": "alpha", "path": "src/mid.dat", "output_mode": "content"}),
        json!({"pattern": "end", "path": "src/mid.dat", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src/both.dat", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src/both.dat", "output_mode": "count"}),
        json!({"pattern": "alpha", "path": "src/small.dat", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src/small.dat", "output_mode": "count"}),
        json!({"pattern": "nothing", "path": "src/small.dat", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src/bin.dat", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src/bin.dat", "output_mode": "count"}),
        json!({"pattern": "alpha", "path": "src/bin.dat"}),
        json!({"pattern": "alpha|4999 line", "path": "src", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "src", "output_mode": "count"}),
        json!({"pattern": "alpha", "path": "src"}),
        json!({"pattern": "alpha", "path": "src/ignored.txt", "output_mode": "content"}),
        json!({"pattern": "two$", "output_mode": "content"}),
        json!({"pattern": "alpha", "path": "long.txt", "output_mode": "content"}),
        json!({"pattern": "nothing matches this", "output_mode": "content"}),
    ]
}

#[tokio::test]
async fn grep_gives_what_rg_gives() {
    let Some(rg) = rg() else {
        eprintln!("skipping grep_gives_what_rg_gives: no rg (set AGENTD_TEST_RG or put rg on PATH)");
        return;
    };
    let d = TestDaemon::start().await;
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    tree(&ws);
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    let mut differ = Vec::new();
    for case in cases() {
        let mut input = case.clone();
        input["head_limit"] = json!(0);
        let r = c.tool(&id, "Grep", input).await;
        assert_eq!(r["is_error"], false, "{case}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap().to_owned();
        let ours: Vec<&str> = text.lines().filter(|l| !["No matches found", "No files found"].contains(l)).collect();
        let out = Command::new(&rg).args(rg_args(&case, &ws)).current_dir(&ws).output().unwrap();
        assert!(out.status.code().unwrap_or(2) < 2, "{case}: rg failed: {}", String::from_utf8_lossy(&out.stderr));
        let theirs = String::from_utf8_lossy(&out.stdout).into_owned();
        let theirs: Vec<&str> = theirs.lines().collect();
        if ours != theirs {
            let at = ours.iter().zip(&theirs).position(|(a, b)| a != b).unwrap_or(ours.len().min(theirs.len()));
            let window = |v: &[&str]| {
                v.iter().skip(at).take(3).map(|l| l.replace(&ws.display().to_string(), "WS")).collect::<Vec<_>>()
            };
            differ.push(format!(
                "{case}: {} vs {} lines, first difference at line {at}\n  agentd: {:?}\n  rg:     {:?}",
                ours.len(),
                theirs.len(),
                window(&ours),
                window(&theirs)
            ));
        }
    }
    assert!(differ.is_empty(), "{} of {} cases differ:\n{}", differ.len(), cases().len(), differ.join("\n"));
}

/// Claude Code's own rules over rg's: `head_limit` defaults to 250 and 0
/// means all; `offset` skips; a glob list splits on commas and spaces.
#[tokio::test]
async fn head_limit_and_offset_are_claude_codes() {
    let d = TestDaemon::start().await;
    let ws = std::fs::canonicalize(d.dir.path()).unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let body: String = (0..300).map(|i| format!("hit {i}\n")).collect();
    std::fs::write(ws.join("many.txt"), body).unwrap();
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    let mut grep = async |input: Value| -> String {
        let r = c.tool(&id, "Grep", input).await;
        r["content"][0]["text"].as_str().unwrap().to_owned()
    };
    let t = grep(json!({"pattern": "hit", "output_mode": "content"})).await;
    assert_eq!(t.lines().filter(|l| l.contains(":hit ")).count(), 250, "{t}");
    assert!(t.contains("[Showing results with pagination = limit: 250, offset: 0; 50 more entries"), "{t}");
    let t = grep(json!({"pattern": "hit", "output_mode": "content", "head_limit": 0})).await;
    assert_eq!(t.lines().filter(|l| l.contains(":hit ")).count(), 300);
    assert!(!t.contains("more entries"), "{t}");
    let t = grep(json!({"pattern": "hit", "output_mode": "content", "head_limit": 2, "offset": 10})).await;
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].ends_with(":11:hit 10") && lines[1].ends_with(":12:hit 11"), "{t}");
}
