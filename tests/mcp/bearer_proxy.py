"""A loopback proxy that adds `Authorization: Bearer TOKEN` to every HTTP/1.1
request it passes on, and changes nothing else (Host and Origin go through
as the client sent them, so the server's own checks are what is tested).
For clients that cannot send a header, such as the MCP conformance suite.

    bearer_proxy.py UPSTREAM_PORT TOKEN_FILE

Listens on 127.0.0.1 at a free port, prints it on its first line, and
serves until killed.
"""

import asyncio
import sys

upstream_port = int(sys.argv[1])
token = open(sys.argv[2]).read().strip().encode()


async def requests(reader, writer):
    """Client to server: each request's head gets the header; its body
    (Content-Length or chunked) goes through as it is."""
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            break
        lines = [l for l in head.split(b"\r\n") if l]
        fields = [l for l in lines[1:] if not l.lower().startswith(b"authorization:")]
        length, chunked = 0, False
        for l in fields:
            name, _, value = l.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value.strip())
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        writer.write(b"\r\n".join([lines[0], b"Authorization: Bearer " + token, *fields]) + b"\r\n\r\n")
        if chunked:
            while True:
                size_line = await reader.readuntil(b"\r\n")
                writer.write(size_line)
                size = int(size_line.split(b";")[0].strip(), 16)
                writer.write(await reader.readexactly(size + 2))
                if size == 0:
                    break
        elif length:
            writer.write(await reader.readexactly(length))
        await writer.drain()
    writer.close()


async def copy(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    writer.close()


async def handle(client_reader, client_writer):
    try:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(requests(client_reader, server_writer), copy(server_reader, client_writer))


async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main())
