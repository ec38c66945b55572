"""agentd_client: a small client for the agentd daemon, standard library only.

    import os
    from agentd_client import Agentd
    with Agentd() as d:                      # $AGENTD_SOCKET or the default socket
        sid = d.create_session(os.getcwd())
        print([t["name"] for t in d.list_tools(sid)["tools"]])
        turn = d.submit(sid, [{"id": "t1", "name": "Read", "input": {"file_path": "README.md"}}], end=True)
        for event in d.events(sid, until_turn=turn):
            print(event["type"], event.get("tool_use_id", ""))
            if event["type"] == "permission/request":
                d.respond(sid, event["request_id"], "allow")   # or "deny", "allow_always"
        d.close_session(sid)

Requests and the event stream use separate connections, so a script can
submit while it reads events. `register_hook` puts a guard of the
script's own in front of the session's calls (Claude Code's hook contract,
answered over the socket: a round trip, no process per call). Errors from the daemon raise AgentdError
(with .code, .message, .data); a daemon that is not there raises
AgentdUnavailable (a ConnectionError naming the socket).

A daemon on another machine is reached through its TLS face (agentd
--listen-tls; mutual TLS): Agentd("tls://devbox:7443", cert=..., key=...,
ca=...), or AGENTD_CLIENT_CERT, AGENTD_CLIENT_KEY and AGENTD_CA. Workspaces
are then paths on the daemon's machine.
"""

import json
import os
import socket
import ssl
import threading

__all__ = ["Agentd", "AgentdError", "AgentdUnavailable", "default_socket"]


class AgentdError(Exception):
    """A JSON-RPC error from the daemon."""

    def __init__(self, error):
        self.code = error.get("code")
        self.message = error.get("message", "")
        self.data = error.get("data")
        super().__init__(f"{self.message} ({self.code})")


class AgentdUnavailable(ConnectionError):
    """No daemon answers on the socket."""


def default_socket():
    """$AGENTD_SOCKET, else $XDG_RUNTIME_DIR/agentd/agentd.sock, else /tmp/agentd-$UID/agentd.sock."""
    if os.environ.get("AGENTD_SOCKET"):
        return os.environ["AGENTD_SOCKET"]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "agentd", "agentd.sock")
    return f"/tmp/agentd-{os.getuid()}/agentd.sock"


def _tls_target(url):
    """tls://HOST:PORT (tls://[::1]:7443) as (host, port)."""
    rest = url[len("tls://"):].rstrip("/")
    host, sep, port = rest.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"{url!r} is not tls://HOST:PORT")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class _Conn:
    """One NDJSON JSON-RPC connection."""

    def __init__(self, path, tls=None):
        if path.startswith("tls://"):
            self.sock = self._tls(path, tls)
        else:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                self.sock.connect(path)
            except OSError as e:
                self.sock.close()
                raise AgentdUnavailable(
                    f"agentd is not running at {path} ({e.strerror}); start it with `agentd &` or "
                    "`systemctl --user start agentd.socket`, or set AGENTD_SOCKET"
                ) from e
        self.file = self.sock.makefile("rw", encoding="utf-8", newline="\n")
        self.next_id = 0

    @staticmethod
    def _tls(url, files):
        host, port = _tls_target(url)
        cert, key, ca = files or (None, None, None)
        if not (cert and key and ca):
            raise ValueError(f"{url} needs cert, key and ca (or AGENTD_CLIENT_CERT, AGENTD_CLIENT_KEY, AGENTD_CA)")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        context.load_verify_locations(cafile=ca)
        context.load_cert_chain(cert, key)
        try:
            raw = socket.create_connection((host, port), timeout=30)
        except OSError as e:
            raise AgentdUnavailable(f"cannot reach agentd at {url} ({e})") from e
        try:
            sock = context.wrap_socket(raw, server_hostname=host)
        except (OSError, ssl.SSLError) as e:
            raw.close()
            raise AgentdUnavailable(f"TLS with agentd at {url} failed ({e})") from e
        sock.settimeout(None)
        return sock

    def send(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        self.file.write(line + "\n")
        self.file.flush()
        return self.next_id

    def receive(self):
        try:
            line = self.file.readline()
        except ssl.SSLError as e:
            # TLS 1.3: a refused client certificate is an alert on the first read.
            raise AgentdUnavailable(f"agentd refused this client ({e.reason or e})") from e
        if not line:
            raise ConnectionError("agentd closed the connection")
        return json.loads(line)

    def request(self, method, params):
        wanted = self.send(method, params)
        while True:
            reply = self.receive()
            if reply.get("id") == wanted:
                if "error" in reply:
                    raise AgentdError(reply["error"])
                return reply["result"]

    def close(self):
        try:
            self.file.close()
        finally:
            self.sock.close()


class Agentd:
    """A connection to agentd."""

    def __init__(self, path=None, cert=None, key=None, ca=None):
        self.path = path or os.environ.get("AGENTD_CONNECT") or default_socket()
        env = os.environ.get
        self._tls = (cert or env("AGENTD_CLIENT_CERT"), key or env("AGENTD_CLIENT_KEY"), ca or env("AGENTD_CA"))
        self._conn = self._open()

    def _open(self):
        """Another connection to the same daemon (event streams, hooks and agents each hold one)."""
        return _Conn(self.path, self._tls)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self._conn.close()

    def call(self, method, **params):
        """Any method, params by name."""
        return self._conn.request(method, params)

    def info(self):
        return self.call("daemon/info")

    def create_session(self, cwd, **options):
        """Opens a session on `cwd`; options as session/create takes them (mode, permissions, tools, ...)."""
        cwd = cwd if self.path.startswith("tls://") else os.path.abspath(cwd)
        return self.call("session/create", cwd=cwd, **options)["session_id"]

    def close_session(self, session_id):
        return self.call("session/close", session_id=session_id)

    def list_tools(self, session_id):
        """{tools: [{name, description, input_schema}], deferred: [...], ...}, ready for a model API."""
        return self.call("tools/list", session_id=session_id)

    def tool(self, session_id, name, **tool_input):
        """Runs one tool call and returns its result ({content, is_error, render, ...})."""
        return self.call("tool/call", session_id=session_id, name=name, input=tool_input)

    def submit(self, session_id, tool_uses, turn_id=None, end=False):
        """Adds tool_use blocks ({id, name, input}) to a turn; returns the turn id."""
        params = {"session_id": session_id, "tool_uses": tool_uses, "end": end}
        if turn_id is not None:
            params["turn_id"] = turn_id
        return self.call("turn/submit", **params)["turn_id"]

    def cancel(self, session_id, turn_id=None, tool_use_id=None):
        params = {"session_id": session_id}
        if turn_id is not None:
            params["turn_id"] = turn_id
        if tool_use_id is not None:
            params["tool_use_id"] = tool_use_id
        return self.call("turn/cancel", **params)["cancelled"]

    def respond(self, session_id, request_id, decision, rule=None, message=None, answers=None):
        """Answers a permission/request event: decision is "allow", "deny" or "allow_always".

        `rule` (allow_always) overrides the suggested rule, `message` (deny) goes to
        the model, `answers` ({question: answer}) answers AskUserQuestion.
        """
        params = {"session_id": session_id, "request_id": request_id, "decision": decision}
        for key, value in (("rule", rule), ("message", message), ("answers", answers)):
            if value is not None:
                params[key] = value
        return self.call("permission/respond", **params)

    def respond_agent(self, session_id, request_id, result, is_error=False):
        """Answers an agent/request event (a Task call) with the sub-agent's result."""
        params = {"session_id": session_id, "request_id": request_id, "result": result}
        if is_error:
            params["is_error"] = True
        return self.call("agent/respond", **params)

    def mcp_login(self, session_id, server, redirect_uri):
        """Starts the OAuth login of an HTTP MCP server: {login_id, authorization_url}.

        Open `authorization_url` in the user's browser and listen on
        `redirect_uri` (http on the loopback interface, with a port); give the
        address the browser is sent back to to `mcp_login_complete`.
        """
        return self.call("mcp/login", session_id=session_id, server=server, redirect_uri=redirect_uri)

    def mcp_login_complete(self, login_id, callback_url):
        """Completes a login with the browser's redirect: {server, scopes, state, last_error?}."""
        return self.call("mcp/login_complete", login_id=login_id, callback_url=callback_url)

    def mcp_logout(self, session_id, server):
        """Forgets an HTTP MCP server's OAuth tokens: {forgotten}."""
        return self.call("mcp/logout", session_id=session_id, server=server)

    def activity(self):
        """What every session on the daemon is doing now (daemon/activity)."""
        return self.call("daemon/activity")

    def schedules(self, session_id):
        """The session's schedules (cron/list): its CronCreate calls'."""
        return self.call("cron/list", session_id=session_id)["jobs"]

    def delete_schedule(self, session_id, cron_id):
        """Removes one of the session's schedules (cron/delete)."""
        return self.call("cron/delete", session_id=session_id, cron_id=cron_id)["job"]

    def messages(self, session_id, after_seq=0):
        """The session's incoming traffic, as it comes: messages from other
        sessions (message/received), schedule firings (cron/fired), what
        its watches saw (monitor/event: `text` is for the model), background
        tasks that ended (task/notification) and idle notices
        (session/idle), replayed from after_seq first."""
        wanted = ("message/received", "cron/fired", "monitor/event", "task/notification", "session/idle")
        for event in self.events(session_id, after_seq=after_seq):
            if event["type"] in wanted:
                yield event

    def _run_agent(self, session_id, event, handler):
        with Agentd(self.path, *self._tls) as d:
            try:
                result, failed = str(handler(d, event)), False
            except Exception as e:  # the sub-agent failed: the Task call says so
                result, failed = f"{type(e).__name__}: {e}", True
            try:
                d.respond_agent(session_id, event["request_id"], result, is_error=failed)
            except AgentdError:
                pass  # the Task call ended meanwhile (cancelled)

    def serve_agents(self, session_id, handler):
        """Runs the session's sub-agents from now on: returns once subscribed.

        The session then offers the Task tool; each agent/request event calls
        `handler(d, event)` on a thread of its own with a fresh Agentd `d`
        (drive the child session `event["child_session_id"]` with it,
        running your model); what it returns is the Task call's result, an
        exception its error. Call `.close()` on the returned object to stop.
        """
        return _AgentServer(self, session_id, handler)

    def serve_elicitations(self, session_id, handler):
        """Answers the session's MCP servers' elicitations from now on: returns once subscribed.

        Each mcp/elicitation event calls `handler(event)` on a thread of its
        own (`event["message"]`, `event["requested_schema"]`); it returns
        `("accept", {values})`, `"decline"` or `"cancel"` (an exception
        declines). Call `.close()` on the returned object to stop.
        """
        return _ElicitationServer(self, session_id, handler)

    def serve_sampling(self, session_id, handler):
        """Answers the session's MCP servers' sampling requests from now on: returns once subscribed.

        agentd has no model: a server's `sampling/createMessage` becomes an
        mcp/sampling event, and `handler(event)` is called on a thread of
        its own (`event["server"]`, `event["request"]` with MCP's
        `messages`, `maxTokens`, `systemPrompt`…, and
        `event["needs_approval"]`, false once the user allowed the server
        always). It asks the user when needed, calls the harness's model and
        returns `("allow", result)` or `("allow_always", result)`, result
        being MCP's CreateMessageResult (`{"role": "assistant", "content":
        {"type": "text", "text": ...}, "model": ...}`), or `"deny"`; an
        exception tells the server the model failed. Call `.close()` on the
        returned object to stop.
        """
        params = {"kinds": ["mcp/sampling"], "capabilities": ["sampling"]}
        return _StreamServer(
            self, session_id, params, "mcp/sampling", lambda e: self._answer_sampling(session_id, e, handler)
        )

    def _answer_sampling(self, session_id, event, handler):
        params = {"session_id": session_id, "request_id": event["request_id"]}
        try:
            answer = handler(event)
            decision, result = (answer[0], answer[1]) if isinstance(answer, tuple) else (answer, None)
            params["decision"] = decision
            if result is not None:
                params["result"] = result
        except Exception as e:  # the model failed: the server is told why
            params.update(decision="allow", error=str(e) or type(e).__name__)
        try:
            with Agentd(self.path, *self._tls) as d:
                d.call("mcp/sampling_respond", **params)
        except AgentdError:
            pass  # timed out meanwhile, or the result was not a completion

    def _answer_elicitation(self, session_id, event, handler):
        try:
            answer = handler(event)
        except Exception:  # the handler failed: the server is told no
            answer = "decline"
        action, content = (answer[0], answer[1]) if isinstance(answer, tuple) else (answer, None)
        params = {"session_id": session_id, "request_id": event["request_id"], "action": action}
        if content is not None:
            params["content"] = content
        try:
            with Agentd(self.path, *self._tls) as d:
                d.call("mcp/elicitation_respond", **params)
        except AgentdError:
            pass  # timed out meanwhile, or the values did not fit

    def register_hook(self, session_id, event, matcher, fn, timeout=None):
        """Registers a hook of this script's on the session: returns once it is in force.

        `event` is a hook event (`"PreToolUse"`, `"PostToolUse"`, ...), `matcher`
        what it matches (a tool name, `"Edit|Write"`, a regular expression,
        `None` for everything). Each matching moment calls `fn(input)` on a
        thread of its own, `input` being the JSON a command hook gets on
        stdin; it returns the hook's JSON output as a dict (for example
        `{"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": "..."}}`),
        or None to let the call go on; an exception lets it go on too. The
        returned object has `.hook_id`; `.close()` removes the hook.
        """
        return _HookServer(self, session_id, event, matcher, fn, timeout)

    def events(self, session_id, after_seq=None, until_turn=None):
        """Yields the session's events (dicts with seq and type) from a connection of their own.

        Stops after turn/completed or turn/discarded of `until_turn` when given,
        and always after session/closed. Pass the last seq seen as `after_seq`
        to resume after a disconnect. With `until_turn` and no `after_seq` the
        stream starts at the session's first kept event, so none of that turn
        is missed however fast it ran (without either, it starts now).
        """
        if after_seq is None and until_turn is not None:
            after_seq = 0
        conn = self._open()
        try:
            params = {"session_id": session_id}
            if after_seq is not None:
                params["after_seq"] = after_seq
            subscription = conn.request("turn/stream", params)
            while True:
                note = conn.receive()
                if note.get("method") != "turn/event" or note["params"].get("subscription") != subscription:
                    continue
                event = note["params"]["result"]
                yield event
                if event["type"] == "session/closed":
                    return
                if until_turn is not None and event.get("turn_id") == until_turn and event["type"] in (
                    "turn/completed",
                    "turn/discarded",
                ):
                    return
        finally:
            conn.close()


class _Serving:
    """A connection of its own (`self._conn`) whose thread answers the
    session's events that `wanted` picks, each on a thread of its own,
    until the session closes or `.close()`."""

    def _serve(self, wanted, answer, early=()):
        """Starts the thread; it reads the notes in `early` first."""
        self._thread = threading.Thread(target=self._loop, args=(list(early), wanted, answer), daemon=True)
        self._thread.start()

    def _loop(self, early, wanted, answer):
        try:
            while True:
                note = early.pop(0) if early else self._conn.receive()
                if note.get("method") != "turn/event":
                    continue
                event = note["params"]["result"]
                if wanted(event):
                    threading.Thread(target=answer, args=(event,), daemon=True).start()
                if event["type"] == "session/closed":
                    return
        except (ConnectionError, OSError, ValueError):
            return

    def close(self):
        # Wakes the reading thread first (closing a file another thread
        # reads would wait for it).
        try:
            self._conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(timeout=5)
        self._conn.close()


class _HookServer(_Serving):
    """A connection that holds a hook (it goes when the connection closes) and answers its requests."""

    def __init__(self, agentd, session_id, event, matcher, fn, timeout):
        self._path, self._session_id, self._fn = agentd.path, session_id, fn
        self._conn = agentd._open()
        try:
            self._conn.request("turn/stream", {"session_id": session_id, "kinds": ["hook/request"]})
            params = {"session_id": session_id, "event": event}
            if matcher is not None:
                params["matcher"] = matcher
            if timeout is not None:
                params["timeout"] = timeout
            wanted = self._conn.send("hooks/register", params)
            early = []
            while True:
                reply = self._conn.receive()
                if reply.get("id") == wanted:
                    if "error" in reply:
                        raise AgentdError(reply["error"])
                    self.hook_id = reply["result"]["hook_id"]
                    break
                early.append(reply)
        except BaseException:
            self._conn.close()
            raise
        self._serve(lambda e: e["type"] == "hook/request" and e.get("hook_id") == self.hook_id, self._answer, early)

    def _answer(self, event):
        try:
            output = self._fn(event["input"])
        except Exception:  # a failing hook is a non-blocking error: the call goes on
            output = None
        try:
            with Agentd(self._path) as d:
                d.call("hook/respond", session_id=self._session_id, request_id=event["request_id"], output=output or {})
        except (AgentdError, ConnectionError, OSError):
            pass  # the call ended meanwhile


class _StreamServer(_Serving):
    """A stream that declares a capability and answers events of one type,
    each on a thread of its own, until the session closes or `.close()`."""

    def __init__(self, agentd, session_id, params, event_type, answer):
        self._conn = agentd._open()
        self._conn.request("turn/stream", dict(params, session_id=session_id))
        self._serve(lambda e: e["type"] == event_type, answer)


def _ElicitationServer(agentd, session_id, handler):
    """Declares it answers elicitations and answers mcp/elicitation events."""
    params = {"kinds": ["mcp/elicitation"], "capabilities": ["elicitation"]}
    return _StreamServer(
        agentd, session_id, params, "mcp/elicitation", lambda e: agentd._answer_elicitation(session_id, e, handler)
    )


def _AgentServer(agentd, session_id, handler):
    """Declares it runs agents and answers agent/request events."""
    return _StreamServer(
        agentd, session_id, {"capabilities": ["agents"]}, "agent/request", lambda e: agentd._run_agent(session_id, e, handler)
    )
