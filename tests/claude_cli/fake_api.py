#!/usr/bin/env python3
"""A scripted, deterministic stand-in for the Anthropic Messages API.

Stdlib only.  Serves POST /v1/messages (streaming SSE when the request says
"stream": true, plain JSON otherwise).  Everything else gets a harmless answer
and is logged.  It also answers CONNECT (when used as HTTPS_PROXY) with 403 and
logs the host, so attempted outside traffic shows up in the log.

Usage:
  fake_api.py --port 0 --port-file F --log-dir DIR [--script script.json]

The script is a JSON list of steps:
  {"tool": "Read", "input": {...}}   -> a tool_use of mcp__agentd__Read (or
                                        mcp__<"server">__Read with "server")
  {"text": "done"}                   -> a final text answer (end_turn)

The next step is chosen from the conversation: every tool_use block in the
request's assistant messages that has a tool_result in a user message is walked
in order; each one whose tool matches the next scripted step advances the
script (ToolSearch calls are skipped).  How the step's tool is reached is in
next_step(): called directly when offered (in `tools`, or deferred and already
loaded by a tool_reference), else loaded first with Claude Code's ToolSearch
("select:mcp__agentd__X") when the name is in its deferred-tools list, else
with the server's own ToolSearch ("select:X").

Requests that are not the scripted conversation (bodies that never name a
scripted mcp__agentd__* tool: e.g. title / topic / summary side-queries) get a
short text answer "ok".

Files written in --log-dir:
  requests.jsonl   every POST body to /v1/messages (+ path, headers, step)
  other.jsonl      every other request (method, path, headers, body)
"""
import argparse
import json
import os
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_SCRIPT = [
    {"tool": "Read", "input": {"file_path": "hello.txt"}},
    {"tool": "Edit", "input": {"file_path": "hello.txt", "old_string": "world", "new_string": "there"}},
    {"tool": "Bash", "input": {"command": "echo from-bash", "description": "Print a marker"}},
    {"tool": "Monitor", "input": {"description": "ticks", "command": "echo tick; sleep 1; echo tock", "timeout_ms": 5000}},
    {"text": "done"},
]

LOCK = threading.Lock()
ARGS = None
SCRIPT = None
T0 = time.time()


def log_line(name, obj):
    obj = dict(obj)
    obj["t"] = round(time.time() - T0, 3)
    with LOCK:
        with open(os.path.join(ARGS.log_dir, name), "a") as f:
            f.write(json.dumps(obj) + "\n")


def referenced_tools(body):
    """Tool names loaded by ToolSearch: tool_reference blocks in tool_results."""
    out = set()
    for m in body.get("messages") or []:
        for b in blocks(m):
            if isinstance(b, dict) and b.get("type") == "tool_result" and isinstance(b.get("content"), list):
                for c in b["content"]:
                    if isinstance(c, dict) and c.get("type") == "tool_reference":
                        out.add(c.get("tool_name"))
    return out


def tool_names(body):
    """Names of the tools the model may call: offered in full, or deferred
    (defer_loading) and already loaded by a ToolSearch tool_reference."""
    refs = referenced_tools(body)
    return [t.get("name", "") for t in body.get("tools") or []
            if isinstance(t, dict) and (not t.get("defer_loading") or t.get("name") in refs)]


def resolve_tool(names, short):
    """The request's name for scripted tool `short` (mcp__<server>__Short preferred)."""
    for n in names:
        if n.startswith("mcp__") and n.endswith("__" + short):
            return n
    return None


def blocks(msg):
    c = msg.get("content")
    if isinstance(c, str):
        return [{"type": "text", "text": c}]
    return c or []


def history(body):
    """[(tool_use_name, input, result_block_or_None)] in order."""
    uses, results = [], {}
    for m in body.get("messages") or []:
        for b in blocks(m):
            if not isinstance(b, dict):
                continue
            if m.get("role") == "assistant" and b.get("type") == "tool_use":
                uses.append(b)
            elif m.get("role") == "user" and b.get("type") == "tool_result":
                results[b.get("tool_use_id")] = b
    return [(u.get("name"), u.get("input"), results.get(u.get("id"))) for u in uses]


def is_toolsearch(name):
    return bool(name) and (name == "ToolSearch" or name.endswith("__ToolSearch"))


def next_step(body, raw_text):
    """Return (kind, payload, step_index, n_results) for a scripted request.

    How a scripted tool X is reached, in order of preference:
      1. mcp__<server>__X is in the request's tools array: call it;
      2. mcp__<server>__X is named in the request (Claude Code's deferred-tools
         list) and Claude Code's ToolSearch is offered: ToolSearch
         {"query": "select:mcp__<server>__X"} first;
      3. the server's own ToolSearch (mcp__<server>__ToolSearch) is offered:
         call it with "select:X" first (agentd defers tools when it has many);
      4. otherwise call mcp__agentd__X anyway (the tool_result will say why
         it failed, which the checks then report).
    """
    names = tool_names(body)
    hist = history(body)
    n_results = sum(1 for h in hist if h[2] is not None)
    ptr = 0
    searched = set()
    for name, inp, res in hist:
        if res is None:
            continue
        if is_toolsearch(name):
            searched.add((name, (inp or {}).get("query", "")))
            continue
        if ptr < len(SCRIPT) and "tool" in SCRIPT[ptr] and name and (
            name == SCRIPT[ptr]["tool"] or name.endswith("__" + SCRIPT[ptr]["tool"])
        ):
            ptr += 1
    if ptr >= len(SCRIPT):
        return ("text", "done", ptr, n_results)
    step = SCRIPT[ptr]
    if "text" in step:
        return ("text", step["text"], ptr, n_results)
    short = step["tool"]
    full = "mcp__%s__%s" % (step.get("server", "agentd"), short)
    real = resolve_tool(names, short)
    if real is None:
        if "ToolSearch" in names and full in raw_text and ("ToolSearch", "select:" + full) not in searched:
            return ("tool", ("ToolSearch", {"query": "select:" + full}), ptr, n_results)
        srv_ts = "mcp__%s__ToolSearch" % step.get("server", "agentd")
        if srv_ts in names and (srv_ts, "select:" + short) not in searched:
            return ("tool", (srv_ts, {"query": "select:" + short}), ptr, n_results)
        real = full
    return ("tool", (real, step["input"]), ptr, n_results)


def is_scripted(body, raw_text):
    """The main conversation names the scripted MCP tools (offered or deferred)."""
    return any("mcp__%s__%s" % (s.get("server", "agentd"), s["tool"]) in raw_text
               for s in SCRIPT if "tool" in s)


def build_message(body, kind, payload):
    mid = "msg_" + uuid.uuid4().hex[:24]
    model = body.get("model", "claude-fake")
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    if kind == "tool":
        name, inp = payload
        content = [
            {"type": "text", "text": "Calling %s." % name},
            {"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": name, "input": inp},
        ]
        stop = "tool_use"
    else:
        content = [{"type": "text", "text": payload}]
        stop = "end_turn"
    return {
        "id": mid, "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": None, "usage": usage,
    }


def sse_events(msg):
    start = dict(msg)
    start["content"] = []
    start["stop_reason"] = None
    start["usage"] = dict(msg["usage"], output_tokens=1)
    yield "message_start", {"type": "message_start", "message": start}
    for i, b in enumerate(msg["content"]):
        if b["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}
            yield "ping", {"type": "ping"}
            t = b["text"]
            half = max(1, len(t) // 2)
            for part in (t[:half], t[half:]):
                if part:
                    yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": part}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}}
            js = json.dumps(b["input"])
            cut = len(js) // 2
            for part in (js[:cut], js[cut:]):
                if part:
                    yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta", "partial_json": part}}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None}, "usage": {"output_tokens": msg["usage"]["output_tokens"]}}
    yield "message_stop", {"type": "message_stop"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-anthropic/1"

    def log_message(self, fmt, *a):  # quiet stderr; we log to files
        sys.stderr.write("fake_api: %s %s\n" % (self.command, self.path))

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send_json(self, code, obj, extra=None):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _other(self):
        raw = self._body() if self.command in ("POST", "PUT", "PATCH") else b""
        log_line("other.jsonl", {"method": self.command, "path": self.path,
                                 "headers": dict(self.headers), "body": raw.decode("utf-8", "replace")[:4000]})
        if self.path.startswith("/v1/messages/count_tokens"):
            self._send_json(200, {"input_tokens": 100})
        elif self.path.startswith("/v1/models"):
            self._send_json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})
        else:
            self._send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake api: not here"}})

    def do_GET(self):
        self._other()

    def do_HEAD(self):
        log_line("other.jsonl", {"method": "HEAD", "path": self.path, "headers": dict(self.headers)})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_PUT(self):
        self._other()

    def do_DELETE(self):
        self._other()

    def do_CONNECT(self):
        # Used as HTTPS_PROXY: record where the CLI tried to go, refuse it.
        log_line("other.jsonl", {"method": "CONNECT", "path": self.path, "headers": dict(self.headers)})
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def do_POST(self):
        path = self.path.split("?")[0]
        if path != "/v1/messages":
            return self._other()
        raw = self._body()
        try:
            body = json.loads(raw)
        except Exception:
            return self._send_json(400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad json"}})
        raw_text = raw.decode("utf-8", "replace")
        scripted = is_scripted(body, raw_text)
        if scripted:
            kind, payload, ptr, nres = next_step(body, raw_text)
        else:
            kind, payload, ptr, nres = "text", "ok", None, None
        msg = build_message(body, kind, payload)
        log_line("requests.jsonl", {
            "path": self.path, "headers": dict(self.headers), "scripted": scripted,
            "step": ptr, "tool_results_seen": nres,
            "answer": {"kind": kind, "payload": payload if kind == "text" else {"name": payload[0], "input": payload[1]}},
            "body": body,
        })
        if not body.get("stream"):
            return self._send_json(200, msg)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", "req_fake_" + uuid.uuid4().hex[:12])
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for ev, data in sse_events(msg):
            self.wfile.write(("event: %s\ndata: %s\n\n" % (ev, json.dumps(data))).encode())
            self.wfile.flush()


def main():
    global ARGS, SCRIPT
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log-dir", default=".")
    ap.add_argument("--script")
    ARGS = ap.parse_args()
    SCRIPT = json.load(open(ARGS.script)) if ARGS.script else DEFAULT_SCRIPT
    os.makedirs(ARGS.log_dir, exist_ok=True)
    srv = ThreadingHTTPServer((ARGS.host, ARGS.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        tmp = ARGS.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, ARGS.port_file)
    sys.stderr.write("fake_api: listening on %s:%d\n" % (ARGS.host, port))
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
