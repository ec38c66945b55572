//! agentctl in a real terminal (tmux): a permission prompt answered by
//! keystrokes.

use std::process::Command;
use std::time::{Duration, Instant};

use agentd_tests::StandaloneDaemon;

/// A tmux server of this test's own, killed when dropped.
struct Tmux {
    server: String,
}

impl Tmux {
    /// `agentctl run <args> <blocks> --cwd <cwd>` in a fresh terminal, then
    /// `EXIT=<code>` once it ends.
    fn agentctl_run(
        tag: &str,
        socket: &std::path::Path,
        args: &[&str],
        blocks: &std::path::Path,
        cwd: &std::path::Path,
    ) -> Tmux {
        Self::agentctl_run_at(tag, socket, args, blocks, cwd, 200)
    }

    /// [`Tmux::agentctl_run`] in a terminal `width` columns wide.
    fn agentctl_run_at(
        tag: &str,
        socket: &std::path::Path,
        args: &[&str],
        blocks: &std::path::Path,
        cwd: &std::path::Path,
        width: u16,
    ) -> Tmux {
        if Command::new("tmux").arg("-V").output().is_err() {
            panic!("tmux is not installed (Debian package tmux; .ci/run installs it)");
        }
        let command = format!(
            "{} --socket {} run {} {} --cwd {}; echo EXIT=$?; sleep 60",
            agentd_tests::bin_path("agentctl").display(),
            socket.display(),
            args.join(" "),
            blocks.display(),
            cwd.display()
        );
        Tmux::shell(tag, &command, width)
    }

    /// `command` in a fresh terminal `width` columns wide.
    fn shell(tag: &str, command: &str, width: u16) -> Tmux {
        let tmux = Tmux { server: format!("agentd-test-{tag}-{}", std::process::id()) };
        let width = width.to_string();
        tmux.run(&["new-session", "-d", "-s", "t", "-x", &width, "-y", "50", command]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let out = Command::new("tmux").arg("-L").arg(&self.server).args(args).output().expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", "t", "-S", "-100"])
    }

    /// Waits until the screen shows `text`.
    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + agentd_tests::STEP;
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(Instant::now() < deadline, "the terminal never showed {text:?}:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux").args(["-L", &self.server, "kill-server"]).output();
    }
}

#[test]
fn a_permission_prompt_is_answered_in_the_terminal() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    std::fs::write(
        &blocks,
        "{\"id\": \"w\", \"name\": \"Bash\", \"input\": {\"command\": \"touch yes.txt\"}}\n\
         {\"id\": \"n\", \"name\": \"Bash\", \"input\": {\"command\": \"touch no.txt\"}}\n",
    )
    .unwrap();
    let tmux = Tmux::agentctl_run("prompt", &d.socket, &[], &blocks, work.path());
    tmux.wait_for("allow? [y]es, [N]o (Enter), [a]lways");
    tmux.run(&["send-keys", "-t", "t", "y", "Enter"]);
    // The second call asks once the first is done.
    let deadline = Instant::now() + agentd_tests::STEP;
    while tmux.screen().matches("allow? [y]es").count() < 2 {
        assert!(Instant::now() < deadline, "no second prompt:\n{}", tmux.screen());
        std::thread::sleep(Duration::from_millis(50));
    }
    tmux.run(&["send-keys", "-t", "t", "n", "Enter"]);
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=4"), "one call was refused: {screen}");
    assert!(screen.contains("✓ w") && screen.contains("✗ n"), "{screen}");
    assert!(work.path().join("yes.txt").exists());
    assert!(!work.path().join("no.txt").exists());
}

#[test]
fn running_calls_show_a_live_spinner_with_their_progress_then_the_result() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    // The command waits for a file the test creates, so the spinner is seen
    // however slow the machine.
    std::fs::write(
        &blocks,
        "{\"id\": \"s\", \"name\": \"Bash\", \"input\": {\"command\": \
         \"echo tick-one; while [ ! -e go ]; do sleep 0.05; done; echo tick-two\"}}\n",
    )
    .unwrap();
    let tmux = Tmux::agentctl_run("live", &d.socket, &["--yes"], &blocks, work.path());
    // `<spinner> <elapsed>s <id>  <last progress line>`
    let screen = tmux.wait_for("s s  tick-one");
    assert!(!screen.contains("✓ s"), "still running: {screen}");
    std::fs::write(work.path().join("go"), "").unwrap();
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0") && screen.contains("✓ s"), "{screen}");
    assert!(screen.contains("    tick-one") && screen.contains("    tick-two"), "{screen}");
}

#[test]
fn read_output_keeps_the_terminal_in_line_at_any_width() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let long = "x".repeat(300);
    std::fs::write(work.path().join("f.txt"), format!("a\tTAB-ONE\n日本語 WIDE-TWO\nLONG-THREE {long}\nend FOUR\n"))
        .unwrap();
    let blocks = work.path().join("turn.jsonl");
    std::fs::write(
        &blocks,
        "{\"name\": \"Read\", \"input\": {\"file_path\": \"f.txt\"}}\n{\"name\": \"Bash\", \"input\": {\"command\": \"echo AFTER-$((1+1))\"}}\n",
    )
    .unwrap();
    for width in [80u16, 200] {
        let tmux = Tmux::agentctl_run_at(
            &format!("read{width}"),
            &d.socket,
            &["--mode", "bypass"],
            &blocks,
            work.path(),
            width,
        );
        let screen = tmux.wait_for("EXIT=");
        assert!(screen.contains("EXIT=0"), "{screen}");
        let lines: Vec<&str> = screen.lines().collect();
        let row = |needle: &str| {
            lines
                .iter()
                .position(|l| l.contains(needle))
                .unwrap_or_else(|| panic!("{needle} missing at {width}:\n{screen}"))
        };
        // In order, each on a row of its own, none pushed right by padding.
        let rows = ["TAB-ONE", "WIDE-TWO", "LONG-THREE", "FOUR", "AFTER-2", "EXIT=0"].map(row);
        assert!(rows.windows(2).all(|w| w[0] < w[1]), "{rows:?} at {width}:\n{screen}");
        for needle in ["FOUR", "EXIT=0"] {
            let line = lines[row(needle)];
            assert!(
                line.len() - line.trim_start().len() <= 12,
                "{needle} is pushed right at {width}: {line:?}\n{screen}"
            );
        }
        assert!(lines[row("EXIT=0")].starts_with("EXIT=0"), "{screen}");
    }
}

#[test]
fn a_long_call_shows_its_progress_on_the_terminal() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let command = format!(
        "{} --socket {} call Bash --mode bypass --cwd {} --arg command='for i in 1 2 3; do echo tick-$i; sleep 0.5; done; echo done-ticking' >{}/out.txt; echo EXIT=$?; sleep 60",
        agentd_tests::bin_path("agentctl").display(),
        d.socket.display(),
        work.path().display(),
        work.path().display(),
    );
    let tmux = Tmux::shell("progress", &command, 120);
    // While it runs (its result goes to the file), its output shows.
    let screen = tmux.wait_for("… tick-1");
    assert!(!screen.contains("EXIT="), "shown before the end: {screen}");
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    let out = std::fs::read_to_string(work.path().join("out.txt")).unwrap();
    assert!(out.contains("done-ticking") && !out.contains('…'), "stdout keeps the result only: {out}");
}

/// An MCP server's elicitation during `agentctl run`: a form at the
/// terminal, field by field (a wrong integer is asked again).
#[test]
fn an_mcp_servers_elicitation_is_a_form_at_the_terminal() {
    let Some(python) = super::mcp_support::required("AGENTD_TEST_MCP_PYTHON") else { return };
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let server = serde_json::json!({ "t": super::mcp_support::py_entry(&python, &[], serde_json::json!({})) });
    let sid = super::mcp_support::rt().block_on(async {
        let mut c = agentd_tests::RawConn::connect(&d.socket).await;
        let options =
            serde_json::json!({ "mcp_servers": server, "mode": "bypass", "tools": { "defer": { "mode": "never" } } });
        super::mcp_support::session(&mut c, work.path(), options).await["session_id"].as_str().unwrap().to_owned()
    });
    // From a file (asked on stdin), then piped in (asked on /dev/tty:
    // issue 49 #13).
    for (how, id) in [("file", "q1"), ("stdin", "q2")] {
        let blocks = work.path().join(format!("{id}.jsonl"));
        std::fs::write(
            &blocks,
            format!("{{\"id\": \"{id}\", \"name\": \"mcp__t__ask\", \"input\": {{\"question\": \"who are you?\"}}}}\n"),
        )
        .unwrap();
        let agentctl = format!(
            "{} --socket {} run --session {sid}",
            agentd_tests::bin_path("agentctl").display(),
            d.socket.display()
        );
        let command = match how {
            "file" => format!("{agentctl} {}; echo EXIT=$?; sleep 60", blocks.display()),
            _ => format!("cat {} | {agentctl} -; echo EXIT=$?; sleep 60", blocks.display()),
        };
        let tmux = Tmux::shell(&format!("elicit-{how}"), &command, 200);
        tmux.wait_for("t asks: who are you?");
        tmux.run(&["send-keys", "-t", "t", "y", "Enter"]);
        // Fields by name; Pydantic's titles.
        tmux.wait_for("Count (integer; Enter: 1)");
        tmux.run(&["send-keys", "-t", "t", "three", "Enter"]);
        tmux.wait_for("Name (string)");
        tmux.run(&["send-keys", "-t", "t", "Ada", "Enter"]);
        // Refused by the daemon (not an integer): the form again.
        let again = |text: &str| {
            let deadline = Instant::now() + agentd_tests::STEP;
            while tmux.screen().matches(text).count() < 2 {
                assert!(Instant::now() < deadline, "{how}: {text:?} not asked again:\n{}", tmux.screen());
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        again("t asks: who are you?");
        tmux.run(&["send-keys", "-t", "t", "y", "Enter"]);
        again("Count (integer");
        tmux.run(&["send-keys", "-t", "t", "3", "Enter"]);
        again("Name (string)");
        tmux.run(&["send-keys", "-t", "t", "Ada", "Enter"]);
        let screen = tmux.wait_for("EXIT=");
        assert!(screen.contains("accepted: Ada x3"), "{how}: {screen}");
        assert!(screen.contains("EXIT=0"), "{how}: {screen}");
    }
}

/// Issue 49 #13: a turn piped in (`… | agentctl run -`) is asked on the
/// terminal (`/dev/tty`); `a` where "always" is not offered says so and
/// asks again, not a silent refusal.
#[test]
fn a_turn_on_stdin_is_asked_on_the_terminal_and_always_where_not_offered_asks_again() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    // A compound command: the daemon suggests no rule for it.
    std::fs::write(
        &blocks,
        "{\"id\": \"c\", \"name\": \"Bash\", \"input\": {\"command\": \"touch a1 && touch a2\"}}\n",
    )
    .unwrap();
    let command = format!(
        "cat {} | {} --socket {} run - --cwd {}; echo EXIT=$?; sleep 60",
        blocks.display(),
        agentd_tests::bin_path("agentctl").display(),
        d.socket.display(),
        work.path().display()
    );
    let tmux = Tmux::shell("tty", &command, 200);
    let screen = tmux.wait_for("allow? [y]es, [N]o (Enter):");
    assert!(!screen.contains("[a]lways"), "{screen}");
    tmux.run(&["send-keys", "-t", "t", "a", "Enter"]);
    tmux.wait_for("no rule to allow always here");
    tmux.run(&["send-keys", "-t", "t", "y", "Enter"]);
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0") && screen.contains("✓ c"), "{screen}");
    assert!(work.path().join("a1").exists() && work.path().join("a2").exists());
}

/// Issue 49 #13: Ctrl+C at the prompt says what it did before agentctl
/// stops.
#[test]
fn ctrl_c_at_the_prompt_says_so() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    let blocks = work.path().join("turn.jsonl");
    std::fs::write(&blocks, "{\"id\": \"w\", \"name\": \"Bash\", \"input\": {\"command\": \"touch never\"}}\n")
        .unwrap();
    let tmux = Tmux::agentctl_run("ctrlc", &d.socket, &[], &blocks, work.path());
    tmux.wait_for("allow? [y]es");
    tmux.run(&["send-keys", "-t", "t", "C-c"]);
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=130"), "{screen}");
    assert!(screen.contains("interrupted at the prompt") && screen.contains("refused"), "{screen}");
    assert!(!work.path().join("never").exists());
}
