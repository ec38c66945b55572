"""An MCP client (the official Python SDK's) driving `agentctl mcp`, for the
end-to-end tests. Prints one JSON object per line of what it saw.

    bridge_client.py AGENTCTL SOCKET WORKSPACE SCENARIO [ARGS...]

Scenarios:
    basic                 list tools; call Read, Grep and Bash (with progress)
    cancel TAG            start `sleep TAG` through Bash and cancel it
    elicit ANSWER FILE    write FILE in default mode; the elicitation is
                          answered ANSWER (accept or decline)
    no-elicit FILE        write FILE from a client without elicitation
    attach SESSION        serve an existing session; call Read
    server-elicit SESSION serve an existing session; call its MCP server's
                          `ask` tool, whose elicitation this client answers
    server-sample SESSION the same with its `sample` tool, whose sampling
                          request this client answers; then a client
                          without sampling, and a structured result
    server-grow SESSION   serve an existing session; call its MCP server's
                          `grow` tool, and wait to be told the tools changed
    readme ARGS           start `agentctl ARGS` (a JSON list, as README's
                          mcpServers entry has them); call Read
    bench FILE N          read FILE N times; print per-call latencies
    bench-fs FS FILE N    the same through the reference filesystem server
                          FS (its read_text_file), for comparison
    bench-floor BIN FILE N  the same through `BIN mcp-floor`, a server that
                          only reads the file (the client's own cost)
"""

import asyncio
import json
import sys
import time

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

agentctl, socket, workspace, scenario, *rest = sys.argv[1:]


def say(**kw):
    print(json.dumps(kw), flush=True)


def text_of(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def server(extra):
    args = ["--socket", socket, "mcp"] + extra
    return StdioServerParameters(command=agentctl, args=args)


async def basic():
    async with stdio_client(server(["--cwd", workspace, "--mode", "bypass"])) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            tools = (await s.list_tools()).tools
            say(tools=sorted(t.name for t in tools),
                read_only={t.name: bool(t.annotations and t.annotations.read_only_hint) for t in tools})
            res = await s.call_tool("Read", {"file_path": f"{workspace}/hello.txt"})
            say(tool="Read", is_error=res.is_error, text=text_of(res))
            res = await s.call_tool("Grep", {"pattern": "needle", "path": workspace, "output_mode": "content"})
            say(tool="Grep", is_error=res.is_error, text=text_of(res))
            seen = []

            async def progress(value, total, message):
                seen.append(message)

            res = await s.call_tool(
                "Bash", {"command": "for i in 1 2 3; do echo step$i; sleep 0.2; done"}, progress_callback=progress
            )
            say(tool="Bash", is_error=res.is_error, text=text_of(res), progress=seen)
            try:
                await s.call_tool("NoSuchTool", {})
                say(tool="NoSuchTool", error=None)
            except Exception as e:
                say(tool="NoSuchTool", error=getattr(getattr(e, "error", None), "code", None), text=str(e))


async def cancel(tag):
    async with stdio_client(server(["--cwd", workspace, "--mode", "bypass"])) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            started = time.monotonic()
            with anyio.move_on_after(1.5):
                await s.call_tool("Bash", {"command": f"sleep {tag}"})
            say(cancelled_after=time.monotonic() - started)
            # The bridge still serves after a cancellation.
            res = await s.call_tool("Bash", {"command": "echo alive"})
            say(after=text_of(res))


async def elicit(answer, path):
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        if answer == "accept":
            return types.ElicitResult(action="accept", content={"allow": True})
        return types.ElicitResult(action="decline")

    async with stdio_client(server(["--cwd", workspace])) as (r, w):
        async with ClientSession(r, w, elicitation_callback=on_elicit) as s:
            await s.initialize()
            res = await s.call_tool("Write", {"file_path": path, "content": "written through MCP\n"})
            say(is_error=res.is_error, text=text_of(res), asked=asked)


async def no_elicit(path):
    async with stdio_client(server(["--cwd", workspace])) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("Write", {"file_path": path, "content": "never\n"})
            say(is_error=res.is_error, text=text_of(res))


async def attach(session):
    async with stdio_client(server(["--session", session])) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("Read", {"file_path": f"{workspace}/hello.txt"})
            say(is_error=res.is_error, text=text_of(res))


async def server_elicit(session):
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": "Bridge", "count": 5})

    async with stdio_client(server(["--session", session])) as (r, w):
        async with ClientSession(r, w, elicitation_callback=on_elicit) as s:
            await s.initialize()
            res = await s.call_tool("mcp__t__ask", {"question": "through the bridge?"})
            say(is_error=res.is_error, text=text_of(res), asked=asked)


async def server_sample(session):
    asked = []

    async def on_sample(context, params):
        asked.append(params.messages[0].content.text)
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="from the bridge's client"), model="bridge-model"
        )

    async with stdio_client(server(["--session", session])) as (r, w):
        async with ClientSession(r, w, sampling_callback=on_sample) as s:
            await s.initialize()
            res = await s.call_tool("mcp__t__sample", {"prompt": "through the bridge?"})
            say(is_error=res.is_error, text=text_of(res), asked=asked)
    async with stdio_client(server(["--session", session])) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("mcp__t__sample", {"prompt": "no sampling here"})
            say(is_error=res.is_error, text=text_of(res))
            res = await s.call_tool("mcp__t__weather", {"city": "Bergen"})
            say(is_error=res.is_error, structured=res.structured_content)
            # What the server described beyond the text: annotations, a
            # link, an embedded resource; the tool's title and icons.
            res = await s.call_tool("mcp__t__linked", {})
            tool = next(t for t in (await s.list_tools()).tools if t.name == "mcp__t__linked")
            say(
                content=[c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in res.content],
                title=tool.title,
                icons=[i.model_dump(mode="json", by_alias=True, exclude_none=True) for i in tool.icons or []],
            )


async def server_grow(session):
    changed = asyncio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    async with stdio_client(server(["--session", session])) as (r, w):
        async with ClientSession(r, w, message_handler=on_message) as s:
            await s.initialize()
            before = sorted(t.name for t in (await s.list_tools()).tools)
            res = await s.call_tool("mcp__t__grow", {"name": "bridged"})
            await asyncio.wait_for(changed.wait(), 30)
            after = sorted(t.name for t in (await s.list_tools()).tools)
            say(text=text_of(res), before="mcp__t__bridged" in before, after="mcp__t__bridged" in after)


async def readme(args):
    params = StdioServerParameters(command=agentctl, args=["--socket", socket] + json.loads(args), cwd=workspace)
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            res = await s.call_tool("Read", {"file_path": f"{workspace}/hello.txt"})
            say(is_error=res.is_error, text=text_of(res))


async def timed(params, tool, args, n):
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            first = await s.call_tool(tool, args)
            assert not first.is_error, text_of(first)
            lat = []
            for _ in range(n):
                t = time.perf_counter()
                await s.call_tool(tool, args)
                lat.append(time.perf_counter() - t)
            say(latencies=lat)


async def bench(path, n):
    await timed(server(["--cwd", workspace, "--mode", "bypass"]), "Read", {"file_path": path}, n)


async def bench_fs(fs, path, n):
    await timed(StdioServerParameters(command=fs, args=[workspace]), "read_text_file", {"path": path}, n)


async def bench_floor(server_bin, path, n):
    # A server that answers at once (the bench binary's `mcp-floor`): what
    # this client costs by itself.
    params = StdioServerParameters(command=server_bin, args=["mcp-floor"])
    await timed(params, "read_text_file", {"path": path}, n)


scenarios = {
    "basic": basic,
    "cancel": cancel,
    "elicit": elicit,
    "no-elicit": no_elicit,
    "attach": attach,
    "server-elicit": server_elicit,
    "server-sample": server_sample,
    "server-grow": server_grow,
    "readme": readme,
    "bench": lambda path, n: bench(path, int(n)),
    "bench-fs": lambda fs, path, n: bench_fs(fs, path, int(n)),
    "bench-floor": lambda server_bin, path, n: bench_floor(server_bin, path, int(n)),
}
asyncio.run(scenarios[scenario](*rest))
