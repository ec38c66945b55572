//! The permission policy through the socket (issue 12): hostile commands
//! with every permission request answered "deny" leave no trace, deny
//! rules deny what really runs, reads that rules forbid are refused by
//! every tool, protected files ask, and plainly read-only commands run
//! without a prompt.

use std::path::Path;

use agentd_tests::{EventStream, RawConn, TestDaemon, within};
use serde_json::{Value, json};

/// A session whose every permission request is answered `deny` by a
/// client on its stream. Returns the connection and the session id.
async fn denying_session(d: &TestDaemon, params: Value) -> (RawConn, String) {
    let mut c = d.raw().await;
    let mut p = json!({ "cwd": d.dir.path() });
    p.as_object_mut().unwrap().extend(params.as_object().unwrap().clone());
    let id = c.session(p).await;
    let mut events = EventStream::open(&d.socket, &id, None).await.unwrap();
    let mut answer = d.raw().await;
    let sid = id.clone();
    tokio::spawn(async move {
        while let Some(e) = events.next().await {
            if e["type"] == "permission/request" {
                let params = json!({ "session_id": sid, "request_id": e["request_id"], "decision": "deny" });
                answer.ok("permission/respond", params).await;
            }
        }
    });
    (c, id)
}

async fn bash(c: &mut RawConn, id: &str, command: &str) -> Value {
    within(command, c.tool(id, "Bash", json!({ "command": command }))).await
}

fn text(r: &Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn git(dir: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git").args(args).current_dir(dir).output().unwrap().status.success();
    assert!(ok, "git {args:?}");
}

#[tokio::test]
async fn hostile_commands_leave_no_marker() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "S3CRET").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret"), ws.join("link")).unwrap();
    std::fs::write(ws.join("f"), "line\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["config", "core.fsmonitor", "touch pwned-fsmonitor"]);
    std::fs::write(ws.join("evil"), "#!/bin/sh\ntouch pwned-rg\n").unwrap();
    let secret_in = format!("cat < {}/secret", outside.path().display());
    let hostile = [
        "cat <<EOF\n$(touch pwned1)\nEOF",
        "cat <<< \"$(touch pwned2)\"",
        "sed --expr='1e touch pwned3' f",
        "sed -l 5 '1e touch pwned4' f",
        "sed -ni 1p f",
        "sort --o=pwned5 f",
        "git status",
        "git diff",
        "rg --hostname-bin=./evil x",
        "echo ${x=$'a[\\044\\050touch pwned6\\051]'} ${PWD:x}",
        "GIT_CONFIG_PARAMETERS=\"'core.fsmonitor=touch pwned7'\" git status",
        &secret_in,
        "cat link",
        "printenv",
        "sed 's/a/b/w pwned8' f",
        "sed '1!e touch pwned9' f",
        "find . -name f -exec touch pwned10 \\;",
        "sed -n '/l/{p;w pwned11\n}' f",
        "bash -n -c 'touch pwned12'",
        "find . -name f -exec sh -c 'touch pwned13' \\;",
        "sed 's/l/x/e' f",
    ];
    for (session, rules) in [("default", json!([])), ("rules", json!(["Bash(echo:*)", "Bash(git status:*)"]))] {
        let (mut c, id) = denying_session(&d, json!({ "permissions": { "allow": rules } })).await;
        for command in hostile {
            let r = bash(&mut c, &id, command).await;
            assert!(!text(&r).contains("S3CRET"), "{session}: {command}: {r}");
            if command == "printenv" {
                assert!(!text(&r).contains("PATH="), "{session}: the environment was printed: {r}");
            }
        }
        let markers: Vec<String> = std::fs::read_dir(ws)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("pwned"))
            .collect();
        assert!(markers.is_empty(), "{session}: {markers:?}");
        assert_eq!(std::fs::read_to_string(ws.join("f")).unwrap(), "line\n", "{session}: f was edited in place");
    }
}

#[tokio::test]
async fn deny_rules_deny_the_program_however_it_is_spelled() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let (mut c, id) = denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Bash(rm:*)"] } })).await;
    for command in [
        "rm f",
        "/bin/rm f",
        "command rm f",
        "$'rm' f",
        "env rm f",
        "r\"\"m f",
        "timeout 5 rm f",
        "bash -c 'rm f'",
        "find . -name f -exec rm {} \\;",
        "echo f | xargs rm",
    ] {
        std::fs::write(ws.join("f"), "x").unwrap();
        let r = bash(&mut c, &id, command).await;
        assert_eq!(r["is_error"], true, "{command}: {r}");
        assert!(text(&r).contains("denied"), "{command}: {r}");
        assert!(ws.join("f").exists(), "{command} removed the file");
    }
    // Claude Code's wildcard syntax denies too.
    let (mut c, id) =
        denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Bash(touch * x)"] } })).await;
    let r = bash(&mut c, &id, "touch -c x").await;
    assert!(text(&r).contains("denied"), "{r}");
}

#[tokio::test]
async fn read_deny_rules_cover_every_tool() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::write(ws.join(".env"), "API_KEY=s3cret\n").unwrap();
    std::fs::write(ws.join("notes.txt"), "s3cret mentioned here\n").unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    std::fs::write(ws.join("sub/.env"), "API_KEY=s3cret-sub\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["add", "-A"]);
    git(ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]);
    let (mut c, id) =
        denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Read(./.env)"] } })).await;
    let r = bash(&mut c, &id, "cat .env").await;
    assert!(!text(&r).contains("API_KEY=s3cret\n"), "{r}");
    // Computed names the engine cannot judge: the sandbox hides the file.
    let r = bash(&mut c, &id, "f=.e; cat ${f}nv; cat .en?").await;
    assert!(!text(&r).contains("API_KEY=s3cret\n"), "{r}");
    let r = bash(&mut c, &id, "grep -r s3cret .").await;
    assert!(!text(&r).contains("API_KEY=s3cret\n"), "{r}");
    let call = |name: &str, input: Value| json!({ "session_id": id, "name": name, "input": input });
    // At any depth, and in git's history.
    let (mut c2, id2) =
        denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Read(.env)"] } })).await;
    for command in ["cat sub/.en?", "grep -r s3cret .", "git show HEAD:.env", "git log -p -1", "git grep s3cret"] {
        let r = bash(&mut c2, &id2, command).await;
        assert!(!text(&r).contains("API_KEY"), "{command}: {r}");
    }
    let r =
        c.ok("tool/call", call("Grep", json!({ "pattern": "s3cret", "output_mode": "content", "-n": false }))).await;
    assert!(!text(&r).contains("API_KEY=s3cret\n"), "{r}");
    assert!(text(&r).contains("mentioned"), "other files are still searched: {r}");
    let r = c.ok("tool/call", call("Glob", json!({ "pattern": "**/*env*", "include_hidden": true }))).await;
    let top = format!("{}/.env", std::fs::canonicalize(ws).unwrap().display());
    assert!(!text(&r).lines().any(|l| l == top), "{r}");
    assert!(!text(&r).contains("sub/.env"), "`./.env` is `.env`, at any depth, as in Claude Code: {r}");
    // Under `.env` (any depth) neither is listed.
    let call2 = |name: &str, input: Value| json!({ "session_id": id2, "name": name, "input": input });
    let r = c2.ok("tool/call", call2("Glob", json!({ "pattern": "**/*env*", "include_hidden": true }))).await;
    assert!(!text(&r).contains(".env"), "{r}");
}

#[tokio::test]
async fn protected_files_ask_even_in_accept_edits() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir_all(ws.join(".git/hooks")).unwrap();
    let (mut c, id) = denying_session(&d, json!({ "mode": "accept_edits" })).await;
    // In any case too: a case-insensitive directory takes `.CLAUDE` for `.claude`.
    for path in [
        ".claude/settings.json",
        ".agentd/settings.json",
        ".git/config",
        ".git/hooks/pre-commit",
        ".mcp.json",
        ".CLAUDE/settings.json",
        ".Mcp.json",
        ".GIT/config",
    ] {
        let input = json!({ "file_path": path, "content": "{\"permissions\":{\"allow\":[\"Bash\"]}}" });
        let r = c.tool(&id, "Write", input).await;
        assert_eq!(r["is_error"], true, "{path}: {r}");
        assert!(!ws.join(path).exists(), "{path} was written");
    }
    let r = bash(&mut c, &id, "echo '{}' > .mcp.json").await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(!ws.join(".mcp.json").exists());
    // An ordinary file still needs no prompt in accept_edits.
    let input = json!({ "file_path": "ok.txt", "content": "fine" });
    let r = c.tool(&id, "Write", input).await;
    assert_eq!(r["is_error"], false, "{r}");
}

#[tokio::test]
async fn plainly_read_only_commands_run_without_a_prompt() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.py"), "x = 1\n").unwrap();
    std::fs::write(ws.join("src/b.py"), "y = 2\n").unwrap();
    std::fs::write(ws.join("README.md"), "# hi\nthere\n").unwrap();
    std::fs::write(ws.join("f"), "one two\n").unwrap();
    git(ws, &["init", "-q", "-b", "main"]);
    // No client on the stream: anything that asked would be refused.
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    for command in [
        "ls *.md | tail -1 | xargs head -n 30",
        "grep -r x src | head -10",
        "python3 --version",
        "git branch --show-current",
        "git worktree list",
        "awk '{print $1}' f",
        "for f in src/*.py; do wc -l $f; done",
        "timeout 5 cat f",
        // Scripts and commands with a letter or an -exec that writes nothing.
        "sed -n '/error/p' README.md",
        "sed 's/## Session: //' README.md",
        "sed -e 's/we/We/g' -e '/west/d' f",
        "find . -name '*.py' -exec cat {} +",
        "find src -type f -exec wc -l {} \\;",
        "bash -n src/a.py",
        "pgrep -c -f no-such-process-anywhere; true",
        "cd src && ls -la",
        // A variable of the script's own, from a read-only substitution.
        "NOW=$(date +%s); echo \"at $NOW\"",
    ] {
        let r = bash(&mut c, &id, command).await;
        assert!(!text(&r).contains("permission"), "{command} asked: {r}");
        assert_eq!(r["is_error"], false, "{command}: {r}");
        assert_eq!(r["sandbox"], "read_only", "{command}: {r}");
    }
    // ...and commands known to change things still ask.
    for command in ["rm f", "touch g", "git commit -m x", "npm install", "echo x > g"] {
        let r = bash(&mut c, &id, command).await;
        assert!(text(&r).contains("permission"), "{command}: {r}");
    }
    assert!(ws.join("f").exists() && !ws.join("g").exists());
}

#[tokio::test]
async fn the_second_attack_reviews_findings_stay_closed() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    use std::os::unix::fs::PermissionsExt;
    // The workspace's own executables are not the programs they are named after.
    for (path, marker) in [("echo", "pwned-echo"), ("tools/git", "pwned-git")] {
        let file = ws.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, format!("#!/bin/sh\ntouch {marker}\n")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // A repository whose config runs code, written on one line, found from
    // a subdirectory.
    git(ws, &["init", "-q"]);
    std::fs::write(ws.join(".git/config"), "[core] fsmonitor = \"touch pwned-fsmonitor; echo\"\n").unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    let mut c = d.raw().await;
    let params = json!({ "cwd": ws.join("sub"), "add_dirs": [ws],
        "permissions": { "allow": ["Bash(echo:*)", "Bash(git status:*)"] }, "permission_timeout_ms": 100 });
    let id = c.session(params).await;
    for command in
        ["../echo hi", "../tools/git status", "git status", "git -C .. status", "for x in /etc/shadow; do cat $x; done"]
    {
        let r = bash(&mut c, &id, command).await;
        assert!(text(&r).contains("permission required"), "{command}: {r}");
    }
    let markers: Vec<_> = std::fs::read_dir(ws)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("pwned"))
        .map(|e| e.file_name())
        .collect();
    assert!(markers.is_empty(), "{markers:?}");
}

#[tokio::test]
async fn a_git_directory_elsewhere_is_protected() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    git(ws, &["init", "-q", "--separate-git-dir", "meta"]);
    assert!(ws.join(".git").is_file());
    let (mut c, id) = denying_session(&d, json!({ "mode": "accept_edits" })).await;
    let read = json!({ "session_id": id, "name": "Read", "input": { "file_path": "meta/config" } });
    c.ok("tool/call", read).await;
    let before = std::fs::read_to_string(ws.join("meta/config")).unwrap();
    let input = json!({ "file_path": "meta/config", "content": "[core]\n\tfsmonitor = touch pwned\n" });
    let r = c.tool(&id, "Write", input).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(std::fs::read_to_string(ws.join("meta/config")).unwrap(), before);
}

#[tokio::test]
async fn the_third_attack_reviews_findings_stay_closed() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::write(ws.join(".env"), "SECRET=envsecret123\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["add", ".env"]);
    git(ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]);
    // A textconv driver in a quoted subsection holding `]`.
    let mut config = std::fs::read_to_string(ws.join(".git/config")).unwrap();
    config.push_str("[diff \"a]b\"] textconv = touch pwned-textconv\n");
    std::fs::write(ws.join(".git/config"), config).unwrap();
    // A nested repository whose config runs code.
    std::fs::create_dir(ws.join("sub")).unwrap();
    git(&ws.join("sub"), &["init", "-q"]);
    git(&ws.join("sub"), &["config", "core.fsmonitor", "touch pwned-nested"]);
    let params =
        json!({ "permissions": { "allow": ["Bash(echo:*)", "Bash(git status:*)"], "deny": ["Read(./.env)"] } });
    let (mut c, id) = denying_session(&d, params).await;
    for command in [
        "env -vS'touch pwned-envS' echo",
        "git diff",
        "cd sub && git status",
        "cat ${PWD:0:1}etc/shadow",
        "cd $HOME && ls",
        "git reflog show -p",
    ] {
        let r = bash(&mut c, &id, command).await;
        assert_eq!(r["is_error"], true, "{command}: {r}");
        assert!(!text(&r).contains("envsecret123"), "{command}: {r}");
    }
    // What reads a sensitive file through a variable reads nothing.
    if std::fs::metadata("/etc/shadow").is_ok() {
        let r = bash(&mut c, &id, "x=/etc/shadow; cat $x | head -1").await;
        assert!(!text(&r).contains("root:"), "{r}");
    }
    let markers: Vec<_> = std::fs::read_dir(ws)
        .unwrap()
        .flatten()
        .chain(std::fs::read_dir(ws.join("sub")).unwrap().flatten())
        .filter(|e| e.file_name().to_string_lossy().starts_with("pwned"))
        .map(|e| e.file_name())
        .collect();
    assert!(markers.is_empty(), "{markers:?}");
    // A commondir in the repository's own .git: its git commands ask.
    std::fs::write(ws.join(".git/commondir"), "../evil\n").unwrap();
    let (mut c2, id2) = denying_session(&d, json!({ "permissions": { "allow": ["Bash(git status:*)"] } })).await;
    let r = bash(&mut c2, &id2, "git status").await;
    assert!(text(&r).contains("refused"), "asked (and refused), although a rule allows git status: {r}");
    std::fs::remove_file(ws.join(".git/commondir")).unwrap();
    // A quoted-closer command that once overflowed a worker's stack.
    let crash = "(')';".repeat(128) + "true";
    let _ = bash(&mut c2, &id2, &crash).await;
    let info = c2.ok("daemon/info", json!({})).await;
    assert!(info["pid"].is_u64(), "the daemon is alive: {info}");
}

#[tokio::test]
async fn settings_a_background_job_creates_are_moved_aside() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let (mut c, id) = denying_session(&d, json!({ "permissions": { "allow": ["Bash(mkdir:*)"] } })).await;
    // Not empty (an empty one holds no settings, and stays).
    let input = json!({ "command": "mkdir -p sub/.claude/agents", "run_in_background": true });
    let r = c.tool(&id, "Bash", input).await;
    assert_eq!(r["is_error"], false, "{r}");
    let job = text(&r).split("running in background with ID: ").nth(1).unwrap().split('.').next().unwrap().to_owned();
    agentd_tests::eventually("the job ended and its settings moved aside", || {
        !ws.join("sub/.claude").exists()
            && std::fs::read_dir(ws.join("sub"))
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| e.file_name().to_string_lossy().contains("quarantine"))
    })
    .await;
    let out = c.tool(&id, "BashOutput", json!({ "job_id": job })).await;
    assert!(text(&out).contains("moved aside"), "{out}");
}

#[tokio::test]
async fn the_fourth_attack_reviews_findings_stay_closed() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir(outside.path().join("deep")).unwrap();
    std::fs::write(outside.path().join("id_rsa"), "PRIVATE-KEY").unwrap();
    std::os::unix::fs::symlink(outside.path().join("deep"), ws.join("docs")).unwrap();
    std::fs::write(ws.join("hello.txt"), "hello\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["add", "hello.txt"]);
    for sandbox in ["auto", "workspace_write", "off"] {
        let (mut c, id) = denying_session(&d, json!({ "sandbox": { "mode": sandbox } })).await;
        // A link, then `..`: judged where the kernel will go.
        let r = bash(&mut c, &id, "cat docs/../id_rsa").await;
        assert!(!text(&r).contains("PRIVATE-KEY"), "{sandbox}: {r}");
        // An abbreviated option that runs a program.
        let r = bash(&mut c, &id, "git grep --open-files-in-p='touch pwned-pager;true' -e hello").await;
        assert_eq!(r["is_error"], true, "{sandbox}: {r}");
        assert!(!ws.join("pwned-pager").exists(), "{sandbox}");
        // What runs unasked gets no secrets, whatever the sandbox mode.
        if let Ok(dir) = std::env::var("CARGO_MANIFEST_DIR") {
            let r = bash(&mut c, &id, "echo \"[$CARGO_MANIFEST_DIR]\"").await;
            assert!(!text(&r).contains(&dir), "{sandbox}: {r}");
        }
        // And unasked commands never write, even in workspace_write mode.
        let r = bash(&mut c, &id, "awk 'BEGIN{system(\"touch pwned-awk\")}'").await;
        let _ = r;
        if sandbox != "off" {
            assert!(!ws.join("pwned-awk").exists(), "{sandbox}");
        }
        let _ = std::fs::remove_file(ws.join("pwned-awk"));
    }
}

#[tokio::test]
async fn edit_deny_rules_cover_in_place_editors() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::write(ws.join(".env"), "A=1\n").unwrap();
    std::fs::write(ws.join("x"), "B=2\n").unwrap();
    let (mut c, id) =
        denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Edit(./.env)"] } })).await;
    for command in [
        "sed -i s/1/9/ .env",
        "sed -ni p .env",
        "sort -o .env x",
        "cp x .env",
        "tee .env < x",
        "perl -pi -e s/1/9/ .env",
        "mv x .env",
        "echo B=3 > .env",
        "sed -i s/1/9/ *env",
    ] {
        let r = bash(&mut c, &id, command).await;
        assert!(text(&r).contains("denied"), "{command}: {r}");
        assert_eq!(std::fs::read_to_string(ws.join(".env")).unwrap(), "A=1\n", "{command}");
    }
    // Reading it is not editing it.
    let r = bash(&mut c, &id, "sed -n p .env").await;
    assert_eq!(text(&r), "A=1\n", "{r}");
}

#[tokio::test]
async fn the_fifth_reviews_everyday_commands_run_and_its_findings_stay_closed() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/main.rs"), "// TODO: /api/ here\nfn main() {}\n").unwrap();
    std::fs::write(ws.join("names.txt"), "b\na\nb\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["add", "-A"]);
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    for command in [
        "sed -n '/TODO/p' src/main.rs",
        "awk '/b/ {print NR}' names.txt",
        "grep -rn \"/api/\" src",
        "echo $(ls src)",
        "wc -l $(git ls-files)",
        "echo $((1+2))",
        "sed -e 's/a/b/' names.txt",
        "git config core.bare",
        "git branch --list 'f*'",
        "command -v git",
        "cd src; ls; cd ..",
        "sort names.txt | uniq -c",
    ] {
        let r = bash(&mut c, &id, command).await;
        assert!(!text(&r).contains("permission"), "{command} asked: {r}");
        assert_eq!(r["sandbox"], "read_only", "{command}: {r}");
    }
    // A bare cd leaves the workspace: what follows is not judged from it.
    for command in ["cd; cat .gitconfig", "cd -; ls", "cd ~; ls"] {
        let r = bash(&mut c, &id, command).await;
        assert!(text(&r).contains("permission"), "{command}: {r}");
    }
    // Edit deny rules hold against any program that would write the file.
    let (mut b, bid) =
        denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Edit(./names.txt)"] } })).await;
    for command in [
        "dd if=/dev/zero of=names.txt count=1",
        "python3 -c \"open('names.txt','w').write('Z')\"",
        "sh -c ': > names.txt'",
        "git stash",
    ] {
        let _ = bash(&mut b, &bid, command).await;
        assert_eq!(std::fs::read_to_string(ws.join("names.txt")).unwrap(), "b\na\nb\n", "{command}");
    }
}

#[tokio::test]
async fn in_accept_edits_a_rule_for_a_command_covers_its_redirection_into_the_workspace() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    let tests = ws.join("run-tests");
    std::fs::write(&tests, "#!/bin/sh\necho all 3 tests passed\n").unwrap();
    std::fs::set_permissions(&tests, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir(ws.join("sub")).unwrap();
    git(ws, &["init", "-q"]);
    let rules = json!({ "allow": ["Bash(./run-tests:*)"], "deny": ["Bash(./run-tests --forbidden:*)"] });
    // No client on the stream: whatever asks is refused.
    let mut c = d.raw().await;
    let edits = c
        .session(json!({ "cwd": ws, "mode": "accept_edits", "permissions": rules, "permission_timeout_ms": 50 }))
        .await;
    // `npm test > out.txt` under `Bash(npm test:*)`: the redirection is an
    // edit inside the workspace, which accept_edits allows.
    for (command, file) in
        [("./run-tests > out.txt", "out.txt"), ("./run-tests --fast >> sub/log.txt 2>&1", "sub/log.txt")]
    {
        let r = bash(&mut c, &edits, command).await;
        assert_eq!(r["is_error"], false, "{command}: {r}");
        assert!(std::fs::read_to_string(ws.join(file)).unwrap().contains("all 3 tests passed"), "{command}");
    }
    // What the rule or the mode does not cover still asks (and is refused here).
    let outside = d.dir.path().parent().unwrap().join(format!("agentd-outside-{}", std::process::id()));
    for command in [
        format!("./run-tests > {}", outside.display()),
        "./run-tests > ../escaped.txt".to_owned(),
        "./run-tests > .claude/settings.json".to_owned(),
        "./run-tests > .git/hooks/pre-commit".to_owned(),
        "./run-tests > .git/config".to_owned(),
        "./run-tests > $OUT".to_owned(),
        "cd sub && ./run-tests > out2.txt".to_owned(),
        "cd /tmp; ./run-tests > out2.txt".to_owned(),
        "./run-tests > out2.txt; touch pwned".to_owned(),
        "./run-tests --forbidden > out2.txt".to_owned(),
        "(./run-tests) > out2.txt".to_owned(),
    ] {
        let r = bash(&mut c, &edits, &command).await;
        assert_eq!(r["is_error"], true, "{command} ran: {r}");
    }
    assert!(!outside.exists() && !ws.join("out2.txt").exists() && !ws.join("pwned").exists());
    assert!(!ws.join(".claude/settings.json").exists() && !ws.join(".git/hooks/pre-commit").exists());
    assert!(!ws.parent().unwrap().join("escaped.txt").exists());
    // The attack review's, with the sandbox off so that the judgement
    // alone decides: a `cd` behind a wrapper, a chain of dangling links
    // longer than the daemon follows, an ask rule on the file.
    for i in 0..10 {
        std::os::unix::fs::symlink(format!("l{}", i + 1), ws.join(format!("l{i}"))).unwrap();
    }
    let escaped = outside.with_extension("chained");
    std::os::unix::fs::symlink(&escaped, ws.join("l10")).unwrap();
    std::fs::write(ws.join("important.txt"), "keep\n").unwrap();
    let rules =
        json!({ "allow": ["Bash(./run-tests:*)", "Bash(cd:*)", "Bash(echo:*)"], "ask": ["Edit(./important.txt)"] });
    let off = c
        .session(json!({ "cwd": ws, "mode": "accept_edits", "permissions": rules, "permission_timeout_ms": 50,
                    "sandbox": { "mode": "off" } }))
        .await;
    for command in [
        "builtin cd sub && ./run-tests > out2.txt",
        "command cd sub && echo x > out2.txt",
        "builtin cd .git && echo '[core] fsmonitor = touch pwned' > config",
        "./run-tests > l0",
        "echo x > l0",
        "echo x > important.txt",
        "./run-tests > important.txt",
    ] {
        let r = bash(&mut c, &off, command).await;
        assert_eq!(r["is_error"], true, "{command} ran: {r}");
    }
    assert!(!escaped.exists() && !ws.join("sub/out2.txt").exists() && !ws.join("pwned").exists());
    assert_eq!(std::fs::read_to_string(ws.join("important.txt")).unwrap(), "keep\n");
    assert!(!std::fs::read_to_string(ws.join(".git/config")).unwrap().contains("fsmonitor"));
    let r = c.tool(&off, "Read", json!({ "file_path": "important.txt" })).await;
    assert_eq!(r["is_error"], false);
    let write = json!({ "file_path": "important.txt", "content": "changed\n" });
    let r = c.tool(&off, "Write", write).await;
    assert_eq!(r["is_error"], true, "an ask rule asks even in accept_edits: {r}");
    assert_eq!(std::fs::read_to_string(ws.join("important.txt")).unwrap(), "keep\n");
    // ...and what they allow still runs there.
    let r = bash(&mut c, &off, "./run-tests > sub/ok.txt").await;
    assert_eq!(r["is_error"], false, "{r}");

    // In default mode the same redirection asks.
    let default = c.session(json!({ "cwd": ws, "permissions": rules, "permission_timeout_ms": 50 })).await;
    let r = bash(&mut c, &default, "./run-tests > out3.txt").await;
    assert_eq!(r["is_error"], true, "default mode asks: {r}");
    assert!(!ws.join("out3.txt").exists());
    // ...and the rule alone still runs the command.
    let r = bash(&mut c, &default, "./run-tests").await;
    assert!(text(&r).contains("all 3 tests passed"), "{r}");
}

#[tokio::test]
async fn builtins_that_assign_path_do_not_run_unasked() {
    use std::os::unix::fs::PermissionsExt;
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir(ws.join("tools")).unwrap();
    std::fs::write(ws.join("tools/ls"), "#!/bin/sh\ntouch pwned-ls\n").unwrap();
    std::fs::set_permissions(ws.join("tools/ls"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut c = d.raw().await;
    for sandbox in ["off", "auto"] {
        let params = json!({ "cwd": ws, "permission_timeout_ms": 50, "sandbox": { "mode": sandbox } });
        let id = c.session(params).await;
        for command in [
            "printf -v PATH %s tools; ls",
            "read -r PATH <<< tools; ls",
            "hash -p tools/ls ls; ls",
            ": ${CDPATH:=tools}; ls",
            "C=tools/ls; X=1 $C",
        ] {
            let r = bash(&mut c, &id, command).await;
            assert_eq!(r["is_error"], true, "{sandbox}: {command} ran: {r}");
        }
    }
    assert!(!ws.join("pwned-ls").exists());
}

/// Claude Code's anchors, for rules from every source (issue 49): `path`
/// and `./path` start at the session's workspace even in the user's files
/// (a workspace outside `$HOME` too), `/path` at the file's own root,
/// `~/path` at home, `//path` at `/`.
#[tokio::test]
async fn path_rules_are_anchored_where_claude_code_anchors_them_from_every_source() {
    let home_dir = tempfile::tempdir().unwrap();
    let home = std::fs::canonicalize(home_dir.path()).unwrap();
    let ws_dir = tempfile::tempdir().unwrap();
    let ws = std::fs::canonicalize(ws_dir.path()).unwrap();
    let put = |path: &Path| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, format!("SECRET {}\n", path.display())).unwrap();
    };
    let write = |path: &Path, v: Value| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, v.to_string()).unwrap();
    };
    let deny = |rules: &[&str]| json!({ "permissions": { "deny": rules } });
    let mut agentd_file = deny(&["Read(agentd-user/**)", "Read(~/.aws/**)"]);
    agentd_file["importClaudeSettings"] = json!(true);
    write(&home.join(".config/agentd/settings.json"), agentd_file);
    write(&home.join(".claude/settings.json"), deny(&["Read(./secrets/**)", "Read(.env)", "Read(/notes/**)"]));
    write(&ws.join(".claude/settings.json"), deny(&["Read(/project/**)", "Read(./pkg/*.key)"]));
    let denied = [
        ws.join("secrets/k"),
        ws.join(".env"),
        ws.join("deep/er/.env"),
        ws.join("agentd-user/k"),
        home.join(".aws/credentials"),
        home.join(".claude/notes/n"),
        ws.join("project/k"),
        ws.join("pkg/a.key"),
        ws.join("session/k"),
        std::path::PathBuf::from("/etc/hostname"),
    ];
    let allowed = [home.join("secrets/k"), home.join(".env"), ws.join("notes/n"), ws.join("deep/pkg/a.key")];
    for path in denied.iter().chain(&allowed).filter(|p| p.starts_with(&home) || p.starts_with(&ws)) {
        put(path);
    }
    let d = agentd_tests::StandaloneDaemon::start(
        &[],
        &[("HOME", home.to_str().unwrap()), ("XDG_CONFIG_HOME", home.join(".config").to_str().unwrap())],
    );
    let mut c = RawConn::connect(&d.socket).await;
    let created = c
        .ok(
            "session/create",
            json!({ "cwd": ws, "mode": "bypass",
                    "permissions": { "deny": ["Read(./session/**)", "Read(//etc/hostname)"] } }),
        )
        .await;
    assert_eq!(created["session"]["rule_errors"], json!([]), "{created}");
    let id = created["session"]["session_id"].as_str().unwrap().to_owned();
    for path in &denied {
        let r = c.tool(&id, "Read", json!({ "file_path": path })).await;
        assert_eq!(r["is_error"], true, "Read {}: {r}", path.display());
        let r = bash(&mut c, &id, &format!("cat {}", path.display())).await;
        let secret = std::fs::read_to_string(path).unwrap();
        assert!(!text(&r).contains(secret.trim()), "cat {}: {r}", path.display());
    }
    for path in &allowed {
        let r = c.tool(&id, "Read", json!({ "file_path": path })).await;
        assert!(text(&r).contains("SECRET"), "Read {}: {r}", path.display());
    }
}

/// A `Read` deny rule that can name no file of the repository leaves git's
/// history readable there (issue 49); one that can still refuses.
#[tokio::test]
async fn git_history_is_refused_only_where_a_read_rule_reaches_the_repository() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::write(ws.join("a.txt"), "history line\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["add", "-A"]);
    git(ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]);
    let elsewhere = tempfile::tempdir().unwrap();
    let elsewhere = format!("Read(/{}/**)", std::fs::canonicalize(elsewhere.path()).unwrap().display());
    let unrelated =
        json!({ "mode": "bypass", "permissions": { "deny": ["Read(~/.aws/**)", "Read(//etc/shadow)", elsewhere] } });
    let (mut c, id) = denying_session(&d, unrelated).await;
    for command in ["git log -p -1", "git show HEAD:a.txt", "git diff HEAD~0 --stat && git log -p"] {
        let r = bash(&mut c, &id, command).await;
        assert!(text(&r).contains("history line"), "{command}: {r}");
    }
    // Git pointed elsewhere is not judged: refused as before.
    for command in ["git -C . show HEAD:a.txt", "cd . && git show HEAD:a.txt", "GIT_DIR=.git git show HEAD:a.txt"] {
        let r = bash(&mut c, &id, command).await;
        assert!(!text(&r).contains("history line"), "{command}: {r}");
    }
    let (mut c, id) =
        denying_session(&d, json!({ "mode": "bypass", "permissions": { "deny": ["Read(*.secret)"] } })).await;
    let r = bash(&mut c, &id, "git show HEAD:a.txt").await;
    assert!(text(&r).contains("cannot be checked") && !text(&r).contains("history line"), "{r}");
}

/// Issue 49: a glob in a directory's name reads where its matches are
/// (`cat /e*/hostname` is outside the workspace), and a version query of
/// the workspace's own executable runs it: both ask in default mode. Globs
/// inside the workspace and `name=value` arguments still run unasked.
#[tokio::test]
async fn globs_reaching_outside_and_workspace_executables_ask() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.rs"), "fn a() {}\n").unwrap();
    let marker = ws.join("ran.marker");
    std::fs::write(ws.join("x"), format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::process::Command::new("chmod").args(["+x"]).arg(ws.join("x")).status().unwrap();
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    for command in [
        "cat /e*/hostname",
        "cat /etc/host?ame",
        "cat \"/etc\"/host*",
        "ls {/etc,src}",
        "cat src/../../*",
        "cat < /e*/hostname",
        "ls ~/*",
        "./x --version",
        "./x -V",
        "src/../x --help",
    ] {
        let r = bash(&mut c, &id, command).await;
        assert!(text(&r).contains("permission"), "{command} ran unasked: {r}");
    }
    assert!(!marker.exists(), "the workspace's executable ran");
    for command in ["cat src/*.rs", "ls */", "cat {src,src}/a.rs", "echo six==1.16.0", "git --version"] {
        let r = bash(&mut c, &id, command).await;
        assert!(!text(&r).contains("permission"), "{command} asked: {r}");
    }
}

/// Issue 49's attack review: git pointed at another repository's history
/// (whose `.env` a rule denies) however it is pointed there, in bypass
/// mode, where only the refusal stands between the command and the file.
#[tokio::test]
async fn git_pointed_at_a_denied_repository_stays_refused() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::write(ws.join("a.txt"), "history line\n").unwrap();
    git(ws, &["init", "-q"]);
    git(ws, &["add", "-A"]);
    git(ws, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]);
    let other = tempfile::tempdir().unwrap();
    let other = std::fs::canonicalize(other.path()).unwrap();
    std::fs::write(other.join(".env"), "SECRET=othersecret123\n").unwrap();
    git(&other, &["init", "-q"]);
    git(&other, &["add", "-A"]);
    git(&other, &["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]);
    let o = other.display();
    let params = json!({ "mode": "bypass", "permissions": { "deny": [format!("Read(/{o}/.env)")] } });
    let (mut c, id) = denying_session(&d, params).await;
    let mut leaked = Vec::new();
    for command in [
        format!("command export GIT_DIR={o}/.git; git show HEAD:.env"),
        format!("read GIT_DIR <<< {o}/.git; export GIT_DIR; git show HEAD:.env"),
        format!("git archive --remote={o} HEAD .env | tar -xO"),
        format!("git fetch -q {o} HEAD && git show FETCH_HEAD:.env"),
        format!("mkdir -p sub && echo 'gitdir: {o}/.git' > sub/.git && cd sub && git show HEAD:.env"),
    ] {
        let r = bash(&mut c, &id, &command).await;
        if text(&r).contains("othersecret123") {
            leaked.push(command);
        }
    }
    // The same in two calls: the `.git` file, then git where it is.
    bash(&mut c, &id, &format!("mkdir -p sub2 && echo 'gitdir: {o}/.git' > sub2/.git && cd sub2")).await;
    let r = bash(&mut c, &id, "git show HEAD:.env").await;
    if text(&r).contains("othersecret123") {
        leaked.push("cd sub2 (a .git file), then git show HEAD:.env".to_owned());
    }
    assert!(leaked.is_empty(), "printed the denied file: {leaked:#?}");
}

/// Issue 49's attack review: braces, loops, extglob and `..` matched by a
/// glob take a read-only command outside the workspace as `/e*` does.
#[tokio::test]
async fn braces_loops_and_dot_globs_reaching_outside_ask() {
    let d = TestDaemon::start().await;
    let ws = d.dir.path();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/a.rs"), "fn a() {}\n").unwrap();
    let mut c = d.raw().await;
    let id = c.session(json!({ "cwd": ws })).await;
    let up = ".?/".repeat(12);
    let mut unasked = Vec::new();
    for command in [
        "for f in /e*/hostname; do cat $f; done".to_owned(),
        "cat {,}/etc/hostname".to_owned(),
        "cat {x,}/etc/hostname".to_owned(),
        "cat {~,x}/.bashrc".to_owned(),
        "shopt -s extglob\ncat /@(etc)/hostname".to_owned(),
        format!("shopt -u globskipdots; cat {up}etc/hostnam?"),
    ] {
        let r = bash(&mut c, &id, &command).await;
        if !text(&r).contains("permission") {
            unasked.push(format!("{command}: {}", text(&r)));
        }
    }
    assert!(unasked.is_empty(), "ran unasked: {unasked:#?}");
    for command in ["cat src/*.rs", "cat {src,src}/a.rs"] {
        let r = bash(&mut c, &id, command).await;
        assert!(!text(&r).contains("permission"), "{command} asked: {r}");
    }
}
