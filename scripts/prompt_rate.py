#!/usr/bin/env python3
"""How many Bash commands agentd runs without a prompt.

Reads commands (one JSON string per line, or plain lines) and runs each
through a running agentd in a scratch workspace, in `default` mode and
with `sandbox.auto_allow`, with nobody attached to approve: a command
that needed approval comes back "permission required". Network is off
for the auto_allow session; what runs unasked in default mode runs in
the read-only sandbox.

    python3 scripts/prompt_rate.py --socket "$AGENTD_SOCKET" commands.txt
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

    with tempfile.TemporaryDirectory() as ws:
        sessions = {
            "default": call("session/create", cwd=ws, permission_timeout_ms=10)["session_id"],
            "auto_allow": call("session/create", cwd=ws, permission_timeout_ms=10,
                               sandbox={"auto_allow": True, "network": False})["session_id"],
        }
        for name, sid in sessions.items():
            unasked = 0
            for command in commands:
                r = call("tool/call", session_id=sid, name="Bash",
                         input={"command": command, "timeout": args.timeout_ms})
                text = "".join(b.get("text", "") for b in r["content"])
                if "permission required" not in text and "permission denied" not in text:
                    unasked += 1
            print(f"{name}: {unasked}/{len(commands)} ran without a prompt ({100.0 * unasked / max(1, len(commands)):.1f}%)")
            call("session/close", session_id=sid)


if __name__ == "__main__":
    sys.exit(main())
