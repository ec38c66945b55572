"""tools/list tokens with and without deferral, with real MCP servers.

    AGENTD_TEST_MCP_FS=... AGENTD_TEST_MCP_PYTHON=... python3 tests/mcp/tokens.py

(after `cargo build --release`; AGENTD=path/to/agentd to use another build).
"""
import json, os, socket, subprocess, sys, tempfile, time

WORK = os.path.realpath(tempfile.mkdtemp(prefix="agentd-tokens-"))
sock = os.path.join(WORK, "a.sock")
d = subprocess.Popen([os.environ.get("AGENTD", "target/release/agentd"), "--socket", sock, "--state-dir", os.path.join(WORK, "state"), "--ephemeral"], stderr=open(os.path.join(WORK, "log"), "w"))
for _ in range(200):
    if os.path.exists(sock): break
    time.sleep(0.05)
s = socket.socket(socket.AF_UNIX); s.connect(sock); f = s.makefile("rw")
n = 0
def rpc(m, p):
    global n; n += 1
    f.write(json.dumps({"jsonrpc":"2.0","id":n,"method":m,"params":p})+"\n"); f.flush()
    while True:
        r = json.loads(f.readline())
        if r.get("id") == n: return r["result"]
servers = {"fs": {"command": os.environ["AGENTD_TEST_MCP_FS"], "args": [WORK]},
           "t": {"command": os.environ["AGENTD_TEST_MCP_PYTHON"], "args": [os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_server.py")]}}
res = {}
for label, ms in [("none", {}), ("fs", {"fs": servers["fs"]}), ("both", servers)]:
    for mode in ["never", "auto"]:
        sid = rpc("session/create", {"cwd": WORK, "mcp_servers": ms, "tools": {"defer": {"mode": mode}}})["session_id"]
        l = rpc("tools/list", {"session_id": sid})
        res[(label, mode)] = (len(l["tools"]), len(l["deferred"]), l["estimated_tokens"], l["deferred_tokens_saved"])
for k, v in res.items(): print(k, "listed=%d deferred=%d tokens=%d saved=%d" % v)
d.terminate(); d.wait()
