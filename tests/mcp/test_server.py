"""An MCP server for agentd's tests, written with the official Python SDK.

It behaves well by default and misbehaves on purpose when asked (a tool
that crashes the server mid-call, one that hangs, one that answers with
garbage), so the tests exercise a real server, not a mock.

    test_server.py                  stdio
    test_server.py --http PORT      streamable HTTP on 127.0.0.1:PORT
    test_server.py --fail-start     exits at once with a message on stderr
    test_server.py --bad-schema     one tool's input schema is not an object
    test_server.py --bad-name       one tool's name is not [A-Za-z0-9_-]
    test_server.py --no-logging     declares no logging capability
    test_server.py --legacy         speaks MCP 2025-11-25 only (refuses
                                    `server/discover`, as a server of that
                                    revision does)

By default it speaks MCP 2026-07-28 to a client that opens with
`server/discover` (asking for the user, the model and the roots in its
results, `input_required`; saying its lists changed on a
`subscriptions/listen` stream) and 2025-11-25 to one that opens with
`initialize` (asking with requests of its own).

It declares logging (each `logging/setLevel` it is sent is appended to
$MCP_TEST_LEVELS when set), offers prompts, and has tools that log, flood
the log, list the client's roots, ask the user (an elicitation) and ask
the client's model (sampling), and tools that add and remove tools at run
time (each says the tool list changed).

Every start appends a line "<pid>" to $MCP_TEST_STARTS when it is set, so
tests can count how many processes a pool started.
"""

import asyncio
import os
import sys

from typing import Annotated

from mcp.server.mcpserver import (
    AcceptedElicitation,
    Context,
    Elicit,
    ElicitationResult,
    ListRoots,
    MCPServer,
    Resolve,
    Sample,
)
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CreateMessageResult, EmptyResult, Icon, ListRootsResult, SetLevelRequestParams, ToolAnnotations
from pydantic import BaseModel

args = sys.argv[1:]
if "--fail-start" in args:
    print("test server: refusing to start (--fail-start)", file=sys.stderr)
    sys.exit(3)

if os.environ.get("MCP_TEST_NOISY"):
    # Bytes that are not UTF-8, and a long line without an end.
    sys.stderr.buffer.write(b"\xff\xfe not utf-8\n" + b"x" * 200_000)
    sys.stderr.flush()

starts = os.environ.get("MCP_TEST_STARTS")
if starts:
    with open(starts, "a") as f:
        f.write(f"{os.getpid()}\n")

server = MCPServer("agentd-test")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(text: str) -> str:
    """Returns the text it was given."""
    return text


@server.tool()
def add(a: int, b: int) -> str:
    """Adds two integers."""
    return str(a + b)


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def env(name: str) -> str:
    """Returns an environment variable of the server, or <unset>."""
    return os.environ.get(name, "<unset>")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def whoami() -> str:
    """Returns the server's pid and working directory."""
    return f"{os.getpid()} {os.getcwd()}"


@server.tool()
async def slow(steps: int, delay_ms: int, ctx: Context) -> str:
    """Reports progress `steps` times, `delay_ms` apart, then returns."""
    for i in range(steps):
        await ctx.report_progress(i + 1, steps, f"step {i + 1} of {steps}")
        await asyncio.sleep(delay_ms / 1000)
    return f"done after {steps} steps"


@server.tool()
async def hang(tag: str) -> str:
    """Never returns (until cancelled). `tag` marks it in the process list."""
    marker = os.environ.get("MCP_TEST_HANGING")
    if marker:
        with open(marker, "a") as f:
            f.write(f"{tag}\n")
    await asyncio.sleep(3600)
    return "woke up"


@server.tool()
async def crash(delay_ms: int = 0) -> str:
    """Kills the server process mid-call."""
    await asyncio.sleep(delay_ms / 1000)
    os._exit(7)


@server.tool()
def garbage() -> str:
    """Writes a line that is not JSON-RPC to stdout, then answers."""
    sys.stdout.write("this is not JSON\n")
    sys.stdout.flush()
    return "answered after the garbage"


@server.tool(annotations=ToolAnnotations(destructiveHint=False, idempotentHint=True, openWorldHint=False))
def hinted() -> str:
    """Changes something, harmlessly, on this machine only: its hints say so."""
    return "hinted"


@server.tool()
def fails() -> str:
    """Raises: the result is an MCP error result."""
    raise ToolError("the tool failed on purpose")


@server.resource("note://hello", name="hello", description="A greeting", mime_type="text/plain")
def hello() -> str:
    return "hello from the test server"


@server.resource("note://numbers", name="numbers", mime_type="application/json")
def numbers() -> str:
    return "[1, 2, 3]"


@server.resource("note://logo", name="logo", mime_type="image/png")
def logo() -> bytes:
    return b"\x89PNG-test-logo"


@server.tool()
async def log(message: str, ctx: Context) -> str:
    """Logs `message` at debug, info, warning and error, then returns."""
    await ctx.debug(f"debug: {message}")
    await ctx.info(f"info: {message}", logger_name="test")
    await ctx.warning(f"warning: {message}")
    await ctx.error({"error": message, "detail": [1, 2]})
    return "logged"


@server.tool()
async def flood(count: int, ctx: Context) -> str:
    """Logs `count` error messages as fast as it can."""
    for i in range(count):
        await ctx.error(f"flood {i}")
    return f"flooded {count}"


class Answer(BaseModel):
    name: str
    count: int = 1


@server.tool()
async def visit(url: str, ctx: Context) -> str:
    """Sends the user to `url` (a URL-mode elicitation); says what came back."""
    try:
        result = await ctx.elicit_url(message="Sign in to the test service", url=url, elicitation_id="visit-1")
    except Exception as e:
        return f"visit failed: {e}"
    return f"answer: {result.action}"


if "--legacy" in args:

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def roots(ctx: Context) -> str:
        """The roots the client lists (`roots/list`), one URI a line."""
        listed = await ctx.session.list_roots()
        return "\n".join(str(r.uri) for r in listed.roots)

    @server.tool()
    async def ask(question: str, ctx: Context) -> str:
        """Asks the user (an elicitation) for a name and a count; says what came back."""
        result = await ctx.elicit(message=question, schema=Answer)
        if result.action == "accept" and result.data is not None:
            return f"accepted: {result.data.name} x{result.data.count}"
        return f"answer: {result.action}"

else:
    # Resolvers: the SDK asks in the result (2026-07-28) or with a request
    # of its own (2025-11-25), whichever the client speaks.

    def client_roots() -> ListRoots:
        return ListRoots()

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def roots(listed: Annotated[ListRootsResult, Resolve(client_roots)]) -> str:
        """The roots the client lists (`roots/list`), one URI a line."""
        return "\n".join(str(r.uri) for r in listed.roots)

    def ask_user(question: str) -> Elicit[Answer]:
        return Elicit(question, Answer)

    @server.tool()
    async def ask(question: str, answer: Annotated[ElicitationResult[Answer], Resolve(ask_user)]) -> str:
        """Asks the user (an elicitation) for a name and a count; says what came back."""
        if isinstance(answer, AcceptedElicitation):
            return f"accepted: {answer.data.name} x{answer.data.count}"
        return f"answer: {answer.action}"

    async def ask_model(prompt: str, delay_ms: int = 0) -> Sample:
        from mcp.types import SamplingMessage, TextContent

        await asyncio.sleep(delay_ms / 1000)
        message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
        return Sample([message], max_tokens=50, system_prompt="Be brief.")

    @server.tool()
    async def sample(prompt: str, result: Annotated[CreateMessageResult, Resolve(ask_model)], delay_ms: int = 0) -> str:
        """Asks the client's model for a completion (sampling), after `delay_ms`; says what came back."""
        return f"model {result.model} said: {getattr(result.content, 'text', '')}"


async def legacy_sample(prompt: str, ctx: Context, delay_ms: int = 0) -> str:
    """Asks the client's model for a completion (sampling), after `delay_ms`; says what came back."""
    import warnings

    await asyncio.sleep(delay_ms / 1000)

    from mcp.types import SamplingMessage, TextContent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = await ctx.session.create_message(
                [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
                max_tokens=50,
                system_prompt="Be brief.",
            )
        except Exception as e:
            return f"sampling failed: {e}"
    text = getattr(result.content, "text", "")
    return f"model {result.model} said: {text}"


if "--legacy" in args:
    server.add_tool(legacy_sample, name="sample")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def weather(city: str) -> dict[str, object]:
    """Structured output: the SDK declares an output schema and sends structuredContent."""
    return {"city": city, "celsius": 21, "sunny": True}


@server.tool()
def record() -> list:
    """Returns binary content: a short sound and a PDF."""
    import base64

    from mcp.types import AudioContent, BlobResourceContents, EmbeddedResource

    sound = AudioContent(type="audio", data=base64.b64encode(b"RIFF-test-WAVE").decode(), mime_type="audio/wav")
    pdf = BlobResourceContents(
        uri="file:///report.pdf", blob=base64.b64encode(b"%PDF-1.4 test").decode(), mime_type="application/pdf"
    )
    return [sound, EmbeddedResource(type="resource", resource=pdf)]


@server.tool(
    title="Linked notes",
    icons=[
        Icon(src="data:image/png;base64,AAAA", mime_type="image/png", sizes=["16x16"]),
        Icon(src="file:///etc/passwd", mime_type="image/png"),
    ],
)
def linked() -> list:
    """Content MCP describes beyond its text: annotations, a resource link, an embedded resource."""
    from mcp.types import Annotations, EmbeddedResource, ResourceLink, TextContent, TextResourceContents

    for_user = Annotations(audience=["user"], priority=0.9)
    notes = TextResourceContents(uri="file:///notes/today.md", text="# Today", mime_type="text/markdown")
    return [
        TextContent(type="text", text="for the user", annotations=for_user),
        TextContent(type="text", text="plain"),
        ResourceLink(type="resource_link", uri="file:///notes/all.md", name="all", title="All notes", mime_type="text/markdown"),
        EmbeddedResource(type="resource", resource=notes, annotations=Annotations(priority=0.2)),
    ]


async def tools_changed(ctx: Context) -> None:
    """Says the tool list changed: on the session to a client of 2025-11-25,
    on its subscriptions/listen stream to one of 2026-07-28."""
    await ctx.session.send_tool_list_changed()
    await ctx.notify_tools_changed()


@server.tool()
async def grow(name: str, ctx: Context, times: int = 1) -> str:
    """Adds a tool `name` (it echoes) and says the tool list changed, `times` times."""

    def added(text: str) -> str:
        return f"{name}: {text}"

    added.__doc__ = f"A tool added at run time ({name})."
    server.add_tool(added, name=name)
    for _ in range(times):
        await tools_changed(ctx)
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Removes the tool `name` and says the tool list changed."""
    server.remove_tool(name)
    await tools_changed(ctx)
    return f"removed {name}"


@server.tool()
async def lists_changed(ctx: Context) -> str:
    """Says its resources and prompts changed (they did not)."""
    # A client of 2025-11-25 hears it on the session; one of 2026-07-28
    # on its subscriptions/listen stream.
    await ctx.session.send_resource_list_changed()
    await ctx.session.send_prompt_list_changed()
    await ctx.notify_resources_changed()
    await ctx.notify_prompts_changed()
    return "told"


@server.prompt(title="Review a file")
def review(file: str, style: str = "short") -> str:
    """Asks for a review of `file`."""
    return f"Review {file} in a {style} style."


@server.prompt()
def greet() -> list:
    """Two messages."""
    from mcp.server.mcpserver.prompts.base import AssistantMessage, UserMessage

    return [UserMessage("hello"), AssistantMessage("hello to you")]


if "--no-logging" not in args:

    async def set_level(ctx, params: SetLevelRequestParams) -> EmptyResult:
        levels = os.environ.get("MCP_TEST_LEVELS")
        if levels:
            with open(levels, "a") as f:
                f.write(f"{params.level}\n")
        return EmptyResult()

    server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)


if "--bad-schema" in args:

    @server.tool()
    def odd(x: int) -> str:
        """A tool whose schema a model API would reject."""
        return str(x)

    server._tool_manager.get_tool("odd").parameters = {"type": "object", "properties": {"x": {"type": "integral"}}}

if "--bad-name" in args:

    @server.tool(name="bad name!")
    def bad() -> str:
        """A tool with a name a model API would reject."""
        return "bad"


async def legacy_stdio():
    """Serves stdio as a server of 2025-11-25 only: `server/discover` is a
    method it does not know (so a client falls back to `initialize`)."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp.types import ErrorData, JSONRPCError, JSONRPCRequest

    low = server._lowlevel_server
    async with stdio_server() as (read, write):
        send, recv = anyio.create_memory_object_stream(64)

        async def refuse_discover():
            async with send:
                async for m in read:
                    message = getattr(m, "message", None)
                    if isinstance(message, JSONRPCRequest) and message.method == "server/discover":
                        error = ErrorData(code=-32601, message="Method not found")
                        await write.send(SessionMessage(JSONRPCError(jsonrpc="2.0", id=message.id, error=error)))
                        continue
                    await send.send(m)

        async with anyio.create_task_group() as tg:
            tg.start_soon(refuse_discover)
            await low.run(recv, write, low.create_initialization_options())


if "--http" in args:
    port = int(args[args.index("--http") + 1])
    server.run("streamable-http", host="127.0.0.1", port=port)
elif "--legacy" in args:
    asyncio.run(legacy_stdio())
else:
    server.run()
