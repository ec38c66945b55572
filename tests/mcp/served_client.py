"""An MCP client (the official Python SDK's) using what `agentctl mcp` serves
beside tools: resources, prompts, logging, completion; over stdio or over
streamable HTTP. Prints one JSON object per line of what it saw.

    served_client.py AGENTCTL SOCKET WORKSPACE TRANSPORT [BRIDGE ARGS...]

TRANSPORT is `stdio` (the client starts `agentctl mcp BRIDGE ARGS`) or
`http:URL:TOKEN_FILE` (a bridge already serving at URL).
"""

import asyncio
import json
import os
import sys
from contextlib import asynccontextmanager

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

agentctl, socket, workspace, transport, *bridge_args = sys.argv[1:]


def say(**kw):
    print(json.dumps(kw), flush=True)


@asynccontextmanager
async def connect(**callbacks):
    if transport == "stdio":
        params = StdioServerParameters(command=agentctl, args=["--socket", socket, "mcp", *bridge_args])
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w, **callbacks) as s:
                yield s
    else:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        url, token_file = transport[len("http:"):].rsplit(":", 1)
        token = open(token_file).read().strip()
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        async with http:
            async with streamable_http_client(url, http_client=http) as (r, w):
                async with ClientSession(r, w, **callbacks) as s:
                    yield s


async def main():
    logs, updated = [], []
    got_update = anyio.Event()

    async def on_log(params):
        logs.append({"level": params.level, "data": params.data})

    async def on_message(message):
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))
            got_update.set()

    async with connect(logging_callback=on_log, message_handler=on_message) as s:
        init = await s.initialize()
        caps = init.capabilities
        say(capabilities={
            "resources": caps.resources is not None and bool(caps.resources.subscribe),
            "prompts": caps.prompts is not None,
            "logging": caps.logging is not None,
            "completions": caps.completions is not None,
        })

        # Every page of resources.
        names, pages, cursor = [], 0, None
        while True:
            page = await s.list_resources(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            pages += 1
            names += [r.name for r in page.resources]
            uris = {r.name: str(r.uri) for r in page.resources}
            cursor = page.next_cursor
            if not cursor:
                break
        say(resources=names, pages=pages)

        hello = f"file://{workspace}/hello.txt"
        res = await s.read_resource(hello)
        say(read=hello, text=res.contents[0].text, mime=res.contents[0].mime_type)
        blob = await s.read_resource(f"file://{workspace}/bin.dat")
        say(read="bin.dat", blob=getattr(blob.contents[0], "blob", None))
        for uri in [f"file://{workspace}/secret.env", f"file://{workspace}/private/key.txt",
                    "file:///etc/hostname", f"file://{workspace}/../outside.txt", "https://example.com/"]:
            try:
                await s.read_resource(uri)
                say(refused=uri, ok=False)
            except Exception as e:
                say(refused=uri, ok=True, error=str(e))

        templates = await s.list_resource_templates()
        tpl = templates.resource_templates[0].uri_template
        done = await s.complete(types.ResourceTemplateReference(type="ref/resource", uri=tpl),
                                {"name": "path", "value": f"{workspace}/sub/"})
        say(template=tpl, completions=done.completion.values)

        prompts = await s.list_prompts()
        say(prompts=[(p.name, p.description, [a.name for a in (p.arguments or [])]) for p in prompts.prompts])
        got = await s.get_prompt("greet", {"args": "Ada"})
        say(prompt=[m.content.text for m in got.messages])
        try:
            await s.get_prompt("nope")
            say(bad_prompt=False)
        except Exception as e:
            say(bad_prompt=True, error=str(e))

        # Logging: the session's events at the level set.
        await s.set_logging_level("info")
        res = await s.call_tool("Read", {"file_path": f"{workspace}/hello.txt"})
        for _ in range(50):
            if any("Read" in json.dumps(l["data"]) for l in logs):
                break
            await asyncio.sleep(0.1)
        say(logs=logs)

        # A subscription says when the file changes.
        await s.subscribe_resource(hello)
        await asyncio.sleep(1.5)
        with open(f"{workspace}/hello.txt", "a") as f:
            f.write("more\n")
        with anyio.move_on_after(15):
            await got_update.wait()
        say(updated=updated)
        await s.unsubscribe_resource(hello)


asyncio.run(main())
