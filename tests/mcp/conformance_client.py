"""The MCP conformance suite's client under test: agentd's MCP client.

    conformance client --command "python3 tests/mcp/conformance_client.py" --scenario NAME

The suite (@modelcontextprotocol/conformance) starts a test server for
the scenario, runs this with the server's URL as the last argument and
the scenario's name in $MCP_CONFORMANCE_SCENARIO, and then judges what
the server saw. This script is only the harness around agentd: it
connects to the daemon at $AGENTD_SOCKET, creates a session with the URL
as an http MCP server (agentd initializes it and lists its tools then),
and does what the scenario expects of a client through agentd's own
protocol: list the tools, call the scenario's tool, answer elicitations
as a user would. Everything the test server sees comes from agentd.

Exits non-zero when agentd could not use the server or a call failed,
printing why (the suite keeps stdout and stderr with its results).

CONFORMANCE_ELICIT=schema-defaults (the default) accepts an elicitation
with the values a form pre-filled from the schema's defaults would send;
CONFORMANCE_ELICIT=empty accepts with no values at all, to see whether
agentd itself fills in the defaults (SEP-1034's "client applies defaults").
"""

import json
import os
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "client", "python"))

from agentd_client import Agentd, AgentdError  # noqa: E402

SERVER = "conf"  # the entry's name: its tools are mcp__conf__<tool>
PREFIX = f"mcp__{SERVER}__"


def log(*parts):
    print("[conformance_client]", *parts, file=sys.stderr, flush=True)


def text_of(result):
    return "".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict))


class Failed(Exception):
    pass


def server_tools(d, sid):
    """The server's tools, by their own names, as agentd lists them (deferred,
    as MCP tools are by default), loaded through ToolSearch as a model would."""
    listed = d.list_tools(sid)
    loaded = [t["name"] for t in listed.get("tools", []) if t["name"].startswith(PREFIX)]
    deferred = [n for n in listed.get("deferred", []) if isinstance(n, str) and n.startswith(PREFIX)]
    if deferred:
        found = d.tool(sid, "ToolSearch", query="select:" + ",".join(deferred))
        if found.get("is_error"):
            raise Failed(f"ToolSearch could not load {deferred}: {text_of(found)[:500]}")
        log(f"loaded {deferred}")
    return sorted(n[len(PREFIX):] for n in loaded + deferred)


LOGINS = {"left": 2}  # a server that keeps asking for more scope is not followed forever


def call(d, sid, tool, **arguments):
    log(f"calling {tool} {json.dumps(arguments)}")
    result = d.tool(sid, PREFIX + tool, **arguments)
    while result.get("is_error") and "needs an OAuth login" in text_of(result) and LOGINS["left"] > 0:
        # More scope asked for (403): the user logs in again; the call is
        # made again.
        LOGINS["left"] -= 1
        login(d, sid, os.environ.get("MCP_CONFORMANCE_SCENARIO", ""))
        result = d.tool(sid, PREFIX + tool, **arguments)
    log(f"{tool} -> is_error={result.get('is_error')} {text_of(result)[:500]!r}")
    if result.get("is_error"):
        raise Failed(f"{tool} failed: {text_of(result)[:1000]}")
    return result


def form_defaults(schema):
    """What a form pre-filled from the schema sends when the user accepts it as it is."""
    properties = schema.get("properties") or {}
    return {name: p["default"] for name, p in properties.items() if isinstance(p, dict) and "default" in p}


def elicitation_handler(asked):
    mode = os.environ.get("CONFORMANCE_ELICIT", "schema-defaults")

    def handler(event):
        schema = event.get("requested_schema") or {}
        content = {} if mode == "empty" else form_defaults(schema)
        asked.append({"message": event.get("message"), "schema": schema, "answered": content})
        log(f"elicitation {event.get('message')!r}: accept {json.dumps(content)}")
        return ("accept", content)

    return handler


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def browse(address):
    """What a user's browser does at the authorization address: the suite's
    authorization server approves at once and redirects back; where to."""
    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(address, timeout=10)
    except urllib.error.HTTPError as e:
        if e.code in (301, 302, 303, 307) and e.headers.get("Location"):
            return e.headers["Location"]
        raise Failed(f"the authorization address answered {e.code}")
    raise Failed("the authorization address did not redirect back")


def login(d, sid, scenario):
    """The user logs in (agentctl mcp login does this with a real browser
    and a listener on the redirect address)."""
    redirect = "http://127.0.0.1:33418/callback"
    started = d.mcp_login(sid, SERVER, redirect)
    log(f"login: {started['authorization_url']}")
    back = browse(started["authorization_url"])
    if not back.startswith(redirect):
        raise Failed(f"sent back to {back}, not {redirect}")
    if scenario == "auth/metadata-default":
        # A redirect whose state is not the login's is refused (and the
        # login is used up).
        forged = urllib.parse.urlsplit(back)
        query = [(k, "forged" if k == "state" else v) for k, v in urllib.parse.parse_qsl(forged.query)]
        try:
            d.mcp_login_complete(started["login_id"], forged._replace(query=urllib.parse.urlencode(query)).geturl())
            raise Failed("a redirect with a forged state was accepted")
        except AgentdError as e:
            log(f"forged state refused: {e}")
        started = d.mcp_login(sid, SERVER, redirect)
        back = browse(started["authorization_url"])
    done = d.mcp_login_complete(started["login_id"], back)
    log(f"logged in: {json.dumps(done)}")
    # The server may ask again at once (its authorization server moved:
    # agentd registers with the new one): the user logs in once more.
    if done.get("state") != "running" and "needs an OAuth login" in (done.get("last_error") or ""):
        if LOGINS["left"] > 0:
            LOGINS["left"] -= 1
            return login(d, sid, scenario)
    if done.get("state") != "running":
        raise Failed(f"the server did not start after the login: {json.dumps(done)}")


def run(d, sid, scenario):
    tools = server_tools(d, sid)
    log(f"tools: {tools}")
    if scenario == "initialize":
        return  # initialize and tools/list happened at session/create
    if scenario == "json-schema-ref-no-deref":
        return  # listing is the test: agentd must not fetch the $ref's URL
    if scenario == "json-schema-2020-12-preservation":
        # The schema as agentd keeps (and offers a model) it, sent back for
        # the suite to compare with the one it served.
        listed = d.list_tools(sid)
        schema = next(
            (t.get("input_schema") for t in listed.get("tools", []) if t["name"] == PREFIX + "json_schema_2020_12_tool"),
            None,
        )
        if schema is None:
            raise Failed("agentd offers no json_schema_2020_12_tool with its schema")
        call(d, sid, "json_schema_echo", schema=schema)
        return
    if scenario == "http-custom-headers":
        # Parameters marked x-mcp-header go as Mcp-Param-* headers (plain,
        # or Base64 where a header could not carry them as they are).
        call(
            d, sid, "test_custom_headers", region="us-west1", priority=5, verbose=False, debug=True, empty_val="",
            method_val="post", float_val=1.5, non_ascii_val="Grüße", whitespace_val=" padded ",
            leading_space_val=" lead", trailing_space_val="trail ", internal_space_val="a b c",
            control_char_val="a\x01b", crlf_val="a\r\nb", tab_val="\tx", query="not mirrored",
        )
        call(d, sid, "test_custom_headers_null", region="eu", priority=1, query="verbose omitted")
        return
    if scenario == "tools_call":
        if "add_numbers" not in tools:
            raise Failed(f"no add_numbers among {tools}")
        result = call(d, sid, "add_numbers", a=5, b=3)
        if "8" not in text_of(result):
            raise Failed(f"add_numbers(5, 3) answered {text_of(result)!r}")
        return
    # elicitation*, sse-retry, auth/* and anything newer: call the server's
    # tools with no arguments (the scenarios' tools take none), elicitations
    # answered.
    asked = call_each_answering(d, sid, tools)
    if scenario.startswith("elicitation") and not asked:
        raise Failed("no elicitation reached the session")


def call_each_answering(d, sid, tools):
    """Calls each tool with no arguments while the session's elicitations
    are answered; returns the elicitations asked."""
    asked = []
    served = d.serve_elicitations(sid, elicitation_handler(asked))
    try:
        for tool in tools:
            call(d, sid, tool)
    finally:
        served.close()
    return asked


def main():
    url = sys.argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    log(f"scenario {scenario}, server {url}")
    status = 0
    with tempfile.TemporaryDirectory(prefix="agentd-conformance-") as work, Agentd(os.environ.get("AGENTD_SOCKET")) as d:
        entry = {"type": "http", "url": url}
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        if scenario == "auth/pre-registration":
            entry["oauth"] = {"clientId": context.get("client_id"), "clientSecret": context.get("client_secret")}
        if scenario == "auth/basic-cimd":
            # The suite's document address (a user hosts agentd's own).
            entry["oauth"] = {"clientMetadataUrl": "https://conformance-test.local/client-metadata.json"}
        created = d.call("session/create", cwd=work, mode="bypass", mcp_servers={SERVER: entry})
        sid = created["session_id"]
        mcp = created.get("session", {}).get("mcp", [])
        log(f"session {sid}: mcp {json.dumps(mcp)} errors {json.dumps(created.get('session', {}).get('mcp_errors', []))}")
        try:
            state = next((s for s in mcp if s.get("name") == SERVER), {})
            if state.get("auth") == "required":
                login(d, sid, scenario)
                state = next((s for s in d.call("session/get", session_id=sid)["mcp"] if s.get("name") == SERVER), {})
            if state.get("state") != "running":
                raise Failed(f"agentd could not use the server: {json.dumps(state)}")
            run(d, sid, scenario)
            log("done")
        except (Failed, AgentdError) as e:
            log(f"FAILED: {e}")
            status = 1
        finally:
            # Closing gives the pooled server back: agentd ends its HTTP
            # session (DELETE) before the suite stops the test server.
            done = threading.Event()

            def close():
                try:
                    d.close_session(sid)
                except AgentdError as e:
                    log(f"session/close: {e}")
                done.set()

            threading.Thread(target=close, daemon=True).start()
            done.wait(10)
    return status


if __name__ == "__main__":
    sys.exit(main())
