"""An MCP client of revision 2026-07-28 (the official Python SDK's `Client`
in that mode: no handshake, per-request `_meta`, multi-round-trip answers,
`subscriptions/listen`) using `agentctl mcp`, over stdio or streamable HTTP.
Prints one JSON object per line of what it saw.

    modern_client.py AGENTCTL SOCKET WORKSPACE TRANSPORT [BRIDGE ARGS...]

TRANSPORT is `stdio` (the client starts `agentctl mcp BRIDGE ARGS`) or
`http:URL:TOKEN_FILE` (a bridge already serving at URL).
"""

import asyncio
import json
import os
import sys

import mcp.types as types
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.subscriptions import ResourceUpdated, ToolsListChanged

agentctl, socket, workspace, transport, *bridge_args = sys.argv[1:]


def say(**kw):
    print(json.dumps(kw), flush=True)


def server():
    if transport == "stdio":
        return StdioServerParameters(command=agentctl, args=["--socket", socket, "mcp", *bridge_args])
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    url, token_file = transport[len("http:"):].rsplit(":", 1)
    token = open(token_file).read().strip()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    return streamable_http_client(url, http_client=http)


def text(result):
    return "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))


async def main():
    asked, logs = [], []
    answer = {"allow": True}

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content=dict(answer))

    async def on_log(params):
        logs.append(params.level)

    client = Client(
        server(),
        mode="2026-07-28",
        raise_exceptions=True,
        elicitation_callback=on_elicit,
        logging_callback=on_log,
        log_level="debug",
    )
    async with client as c:
        say(protocol=c.protocol_version)
        tools = await c.list_tools()
        say(tools=sorted(t.name for t in tools.tools))

        hello = os.path.join(workspace, "hello.txt")
        r = await c.call_tool("Read", {"file_path": hello})
        say(read=text(r), read_error=r.is_error)

        # A call that asks: answered through input_required rounds.
        allowed = os.path.join(workspace, "allowed.txt")
        r = await c.call_tool("Write", {"file_path": allowed, "content": "yes\n"})
        say(write_allowed=not r.is_error, exists=os.path.exists(allowed), asked=len(asked),
            asked_text=asked[-1] if asked else "")
        answer["allow"] = False
        refused = os.path.join(workspace, "refused.txt")
        r = await c.call_tool("Write", {"file_path": refused, "content": "no\n"})
        say(write_refused=r.is_error, refused_exists=os.path.exists(refused), refused_text=text(r), asked=len(asked))
        say(logs=sorted(set(logs)))

        resources = await c.list_resources()
        say(resources=sorted(r.name for r in resources.resources))
        prompts = await c.list_prompts()
        say(prompts=sorted(p.name for p in prompts.prompts))
        read = await c.read_resource(f"file://{hello}")
        say(resource_text=read.contents[0].text)

        # Listening: the file named changes; ToolSearch loads a tool.
        async with c.listen(tools_list_changed=True, resource_subscriptions=[f"file://{hello}"]) as sub:
            say(honored_tools=bool(sub.honored.tools_list_changed),
                honored_uris=list(sub.honored.resource_subscriptions or []))
            with open(hello, "a") as f:
                f.write("more\n")
            seen = set()
            async with asyncio.timeout(20):
                async for event in sub:
                    if isinstance(event, ResourceUpdated):
                        seen.add("updated")
                        r = await c.call_tool("ToolSearch", {"query": "select:NotebookEdit"})
                        say(tool_search_error=r.is_error)
                    elif isinstance(event, ToolsListChanged):
                        seen.add("tools")
                    if seen == {"updated", "tools"}:
                        break
            say(seen=sorted(seen))
        tools = await c.list_tools()
        say(after=sorted(t.name for t in tools.tools))


asyncio.run(main())
