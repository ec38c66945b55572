//! The Python client (client/python/agentd_client.py) drives a real daemon.

use std::process::{Command, Stdio};

use agentd_tests::{StandaloneDaemon, client_stdout};

const SCRIPT: &str = r#"
import os, sys, json
sys.path.insert(0, os.environ["CLIENT_DIR"])
from agentd_client import Agentd, AgentdError

with Agentd() as d:
    assert d.info()["protocol_version"] == 1
    sid = d.create_session(os.getcwd(), mode="bypass")
    names = [t["name"] for t in d.list_tools(sid)["tools"]]
    assert "Read" in names and "Bash" in names, names
    r = d.tool(sid, "Bash", command="echo from python")
    assert r["content"][0]["text"] == "from python\n", r
    turn = d.submit(sid, [{"id": "a", "name": "Bash", "input": {"command": "echo one"}}])
    d.submit(sid, [{"id": "b", "name": "Read", "input": {"file_path": "hello.txt"}}], turn_id=turn, end=True)
    results = {}
    last_seq = 0
    for event in d.events(sid, after_seq=0, until_turn=turn):
        last_seq = event["seq"]
        if event["type"] == "tool/result" and event["turn_id"] == turn:
            results[event["tool_use_id"]] = event["content"][0]["text"]
    assert results == {"a": "one\n", "b": "1\thello\n"}, results
    try:
        d.call("session/get", session_id="nope")
        raise SystemExit("expected an error")
    except AgentdError as e:
        assert e.code == -32001, e.code
    d.close_session(sid)
    # A default-mode session asks before writing; the script answers.
    sid = d.create_session(os.getcwd())
    turn = d.submit(sid, [{"id": "w", "name": "Bash", "input": {"command": "touch asked.txt"}}], end=True)
    asked = []
    for event in d.events(sid, after_seq=0, until_turn=turn):
        if event["type"] == "permission/request":
            asked.append(event["tool_use_id"])
            d.respond(sid, event["request_id"], "allow")
        if event["type"] == "tool/result":
            assert not event["is_error"], event
    assert asked == ["w"] and os.path.exists("asked.txt"), asked
    # Sub-agents: the handler runs each one in its child session.
    def sub_agent(d2, event):
        if "fail" in event["prompt"]:
            raise RuntimeError("could not")
        r = d2.tool(event["child_session_id"], "Read", file_path="hello.txt")
        return "read: " + r["content"][0]["text"].split("\t")[1].strip()
    uses = [
        {"id": "s1", "name": "Task", "input": {"description": "read", "prompt": "read hello", "subagent_type": "general-purpose", "run_in_background": False}},
        {"id": "s2", "name": "Task", "input": {"description": "fail", "prompt": "fail please", "subagent_type": "general-purpose", "run_in_background": False}},
    ]
    results = {}
    agents = d.serve_agents(sid, sub_agent)
    assert "Task" in [t["name"] for t in d.list_tools(sid)["tools"]]
    turn = d.submit(sid, uses, end=True)
    for event in d.events(sid, after_seq=0, until_turn=turn):
        if event["type"] == "tool/result" and event["turn_id"] == turn:
            results[event["tool_use_id"]] = (event["is_error"], event["content"][0]["text"])
    agents.close()
    assert results == {"s1": (False, "read: hello"), "s2": (True, "RuntimeError: could not")}, results
    # A guard of the script's own: a socket hook that refuses rm.
    seen = []
    def guard(hook_input):
        seen.append(hook_input["tool_input"]["command"])
        if hook_input["tool_input"]["command"].startswith("rm "):
            return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny",
                                           "permissionDecisionReason": "rm is off limits"}}
        return None
    hook = d.register_hook(sid, "PreToolUse", "Bash", guard)
    open("victim.txt", "w").close()
    turn = d.submit(sid, [{"id": "rm", "name": "Bash", "input": {"command": "rm victim.txt"}},
                          {"id": "ok", "name": "Bash", "input": {"command": "echo fine"}}], end=True)
    results = {}
    for event in d.events(sid, after_seq=0, until_turn=turn):
        if event["type"] == "permission/request" and event["turn_id"] == turn:
            d.respond(sid, event["request_id"], "allow")
        if event["type"] == "tool/result" and event["turn_id"] == turn:
            results[event["tool_use_id"]] = (event["is_error"], event["content"][0]["text"])
    assert results["rm"][0] and "rm is off limits" in results["rm"][1], results
    assert results["ok"] == (False, "fine\n"), results
    assert os.path.exists("victim.txt") and seen == ["rm victim.txt", "echo fine"], seen
    hooks = d.call("session/get", session_id=sid)["hooks"]
    assert [h["hook_id"] for h in hooks] == [hook.hook_id], hooks
    hook.close()
    for _ in range(100):
        if not d.call("session/get", session_id=sid)["hooks"]:
            break
        import time; time.sleep(0.05)
    assert not d.call("session/get", session_id=sid)["hooks"], "closed: the hook is gone"
    # Sessions that talk, schedules, one view of all work.
    peer = d.create_session(os.getcwd(), name="py-peer", mode="bypass")
    d.tool(sid, "SendMessage", to="py-peer", message="hello from python")
    d.tool(peer, "CronCreate", cron="0 9 * * *", prompt="standup")
    got = next(d.messages(peer))
    assert got["type"] == "message/received" and got["message"] == "hello from python", got
    jobs = d.schedules(peer)
    assert [j["prompt"] for j in jobs] == ["standup"], jobs
    names = [s.get("name") for s in d.activity()["sessions"]]
    assert "py-peer" in names, names
    assert d.delete_schedule(peer, jobs[0]["cron_id"])["prompt"] == "standup"
    assert d.schedules(peer) == []
    # A watch's events come with the rest of the session's traffic.
    d.tool(peer, "ToolSearch", query="select:Monitor")
    started = d.tool(peer, "Monitor", description="ticks", command="echo tick")
    assert not started["is_error"], started
    seen = []
    for event in d.messages(peer):
        if event["type"] == "monitor/event":
            seen.append(event)
            if event.get("ended"):
                break
    assert "<event>tick</event>" in seen[0]["text"] and seen[-1]["ended"] == "exited", seen
    print("ok", last_seq)
"#;

#[test]
fn the_python_client_drives_a_session_end_to_end() {
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("hello.txt"), "hello\n").unwrap();
    let mut python = Command::new("python3");
    python.arg("-c").arg(SCRIPT).env("CLIENT_DIR", concat!(env!("CARGO_MANIFEST_DIR"), "/../client/python"));
    let stdout = client_stdout(&mut python, work.path(), &d.socket);
    assert!(stdout.starts_with("ok "), "{stdout}");
}

/// The module's own docstring example runs as written (a default-mode
/// session: Read inside the workspace needs no answer), and a daemon that
/// is not there is named.
#[test]
fn the_python_clients_own_example_runs_and_a_missing_daemon_is_named() {
    let module =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../client/python/agentd_client.py")).unwrap();
    let doc = &module[module.find("\"\"\"").unwrap() + 3..];
    let doc = &doc[..doc.find("\"\"\"").unwrap()];
    let example: String = doc.lines().filter(|l| l.starts_with("    ")).map(|l| format!("{}\n", &l[4..])).collect();
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("README.md"), "# readme\n").unwrap();
    let run = |code: &str, socket: &std::path::Path| {
        // Bounded: the example that once hung must fail, not wait.
        Command::new("timeout")
            .args(["60", "python3", "-c"])
            .arg(format!(
                "import sys; sys.path.insert(0, {:?})\n{code}",
                concat!(env!("CARGO_MANIFEST_DIR"), "/../client/python")
            ))
            .current_dir(work.path())
            .env("AGENTD_SOCKET", socket)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&example, &d.socket);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("tool/result t1"), "{stdout}");
    let nowhere = work.path().join("none.sock");
    let out = run(
        "from agentd_client import Agentd, AgentdUnavailable\ntry:\n    Agentd()\nexcept AgentdUnavailable as e:\n    print(e)\n",
        &nowhere,
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(&nowhere.display().to_string()) && stdout.contains("agentd &"), "{stdout}");
}
