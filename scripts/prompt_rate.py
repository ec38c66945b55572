#!/usr/bin/env python3
"""How many Bash commands agentd runs without a prompt.

Reads commands (one JSON string per line, or plain lines) and runs each
through a running agentd in a scratch workspace (a git repository with a
small Python project), in `default` mode, with `sandbox.auto_allow`, and
with `sandbox.auto_allow: "effects"` (in `default` and `accept_edits`
modes), with nobody attached to approve: a command that needed approval
before it ran comes back "permission required"; under "effects", one
whose changes needed approval comes back "not approved" (nothing of it
applied). Network is off for the auto_allow sessions; what runs unasked
in default mode runs in the read-only sandbox. The workspace is set up
again before each command.

    python3 scripts/prompt_rate.py --socket "$AGENTD_SOCKET" scripts/prompt-rate-commands.txt
"""
import argparse, json, os, socket, sys, tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--socket", default=os.environ.get("AGENTD_SOCKET"))
    ap.add_argument("commands")
    ap.add_argument("--timeout-ms", type=int, default=5000)
    args = ap.parse_args()
    commands = []
    with open(args.commands) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            try:
                commands.append(json.loads(line) if line.startswith('"') else line)
            except json.JSONDecodeError:
                commands.append(line)
    s = socket.socket(socket.AF_UNIX)
    s.connect(args.socket)
    f = s.makefile("rw")
    n = [0]

    def call(method, **params):
        n[0] += 1
        f.write(json.dumps({"jsonrpc": "2.0", "id": n[0], "method": method, "params": params}) + "\n")
        f.flush()
        reply = json.loads(f.readline())
        if "error" in reply:
            raise RuntimeError(reply["error"]["message"])
        return reply["result"]

    def project(ws):
        import shutil, subprocess
        for name in os.listdir(ws):
            p = os.path.join(ws, name)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
        os.makedirs(os.path.join(ws, "src"))
        with open(os.path.join(ws, "README.md"), "w") as f:
            f.write("# demo\nhello\n")
        with open(os.path.join(ws, "src", "app.py"), "w") as f:
            f.write("print('hello')\n")
        with open(os.path.join(ws, "run.sh"), "w") as f:
            f.write("#!/bin/sh\necho run\n")
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git + ["init", "-q"], cwd=ws, check=True)
        subprocess.run(git + ["add", "."], cwd=ws, check=True)
        subprocess.run(git + ["commit", "-qm", "init"], cwd=ws, check=True)

    kinds = [
        ("default", {}, "default"),
        ("auto_allow", {"auto_allow": True, "network": False}, "default"),
        ("effects", {"auto_allow": "effects", "network": False}, "default"),
        ("effects, accept_edits", {"auto_allow": "effects", "network": False}, "accept_edits"),
    ]
    with tempfile.TemporaryDirectory() as ws:
        ws = os.path.realpath(ws)
        for name, sandbox, mode in kinds:
            unasked = effects_asked = 0
            for command in commands:
                project(ws)
                sid = call("session/create", cwd=ws, permission_timeout_ms=10, mode=mode,
                           **({"sandbox": sandbox} if sandbox else {}))["session_id"]
                r = call("tool/call", session_id=sid, name="Bash",
                         input={"command": command, "timeout": args.timeout_ms})
                call("session/close", session_id=sid)
                text = "".join(b.get("text", "") for b in r["content"])
                if "permission required" not in text and "permission denied" not in text:
                    unasked += 1
                    if "not approved" in text:
                        effects_asked += 1
            total = max(1, len(commands))
            line = f"{name}: {unasked}/{len(commands)} ran without a prompt first ({100.0 * unasked / total:.1f}%)"
            if sandbox.get("auto_allow") == "effects":
                line += f"; of those, {effects_asked} had changes that then needed approval ({100.0 * effects_asked / total:.1f}% of all)"
            print(line, flush=True)

if __name__ == "__main__":
    sys.exit(main())
