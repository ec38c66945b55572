"""An MCP server behind OAuth 2.1, with its own authorization server, for
agentd's tests: everything MCP's authorization specification asks of a
server, on one loopback port, in the standard library only.

    oauth_server.py PORTFILE [EXPIRES_IN]

Writes its port to PORTFILE once it listens. `/mcp` answers 401 with a
`WWW-Authenticate` challenge naming its protected-resource metadata until
a valid bearer token comes; the authorization server registers clients
(`/register`), approves at once at `/authorize` (as a user clicking "allow"
would) and checks PKCE (S256) at `/token`, which also refreshes. Tokens
live EXPIRES_IN seconds (default 3600). $OAUTH_TOKEN_ENDPOINT and
$OAUTH_REGISTRATION_ENDPOINT replace those endpoints in its metadata (to
point them where a client must not go). Each token grant is appended to
$OAUTH_LOG ("authorization_code" or "refresh_token") when it is set.

The MCP side is the least a streamable HTTP server must do: JSON answers
to `initialize`, `tools/list` (one tool, `secret`) and `tools/call`.
"""

import base64
import hashlib
import json
import os
import secrets
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port_file = sys.argv[1]
expires_in = int(sys.argv[2]) if len(sys.argv) > 2 else 3600
codes = {}  # code -> (challenge, redirect_uri)
tokens = {}  # access token -> expiry
refresh = set()


def log_grant(kind):
    path = os.environ.get("OAUTH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(kind + "\n")


def issue():
    access, again = "at-" + secrets.token_hex(8), "rt-" + secrets.token_hex(8)
    tokens[access] = time.time() + expires_in
    refresh.add(again)
    return {"access_token": access, "token_type": "Bearer", "expires_in": expires_in, "refresh_token": again}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def send(self, code, body=None, headers=()):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def form(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode()
        if self.headers.get("Content-Type", "").startswith("application/json"):
            return json.loads(raw or "{}")
        return dict(urllib.parse.parse_qsl(raw))

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        base = self.base()
        if url.path.startswith("/.well-known/oauth-protected-resource"):
            return self.send(200, {"resource": f"{base}/mcp", "authorization_servers": [base]})
        if url.path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
            return self.send(200, {
                "issuer": base,
                "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": os.environ.get("OAUTH_TOKEN_ENDPOINT", f"{base}/token"),
                "registration_endpoint": os.environ.get("OAUTH_REGISTRATION_ENDPOINT", f"{base}/register"),
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
            })
        if url.path == "/authorize":
            q = dict(urllib.parse.parse_qsl(url.query))
            if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
                return self.send(400, {"error": "invalid_request", "error_description": "PKCE S256 required"})
            code = secrets.token_hex(8)
            codes[code] = (q["code_challenge"], q["redirect_uri"])
            back = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q.get("state", "")})
            return self.send(302, None, [("Location", back)])
        if url.path == "/mcp":
            return self.send(405)
        self.send(404)

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/register":
            body = self.form()
            return self.send(201, {"client_id": "agentd-test-client", "redirect_uris": body.get("redirect_uris", []),
                                   "token_endpoint_auth_method": "none"})
        if url.path == "/token":
            body = self.form()
            if body.get("grant_type") == "authorization_code":
                challenge, redirect = codes.pop(body.get("code"), (None, None))
                verifier = body.get("code_verifier", "").encode()
                computed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
                if challenge is None or computed != challenge or body.get("redirect_uri") != redirect:
                    return self.send(400, {"error": "invalid_grant"})
                log_grant("authorization_code")
                return self.send(200, issue())
            if body.get("grant_type") == "refresh_token" and body.get("refresh_token") in refresh:
                refresh.discard(body["refresh_token"])
                log_grant("refresh_token")
                return self.send(200, issue())
            return self.send(400, {"error": "invalid_grant"})
        if url.path == "/mcp":
            return self.mcp()
        self.send(404)

    def do_DELETE(self):
        self.send(200 if self.path == "/mcp" else 404)

    def mcp(self):
        auth = self.headers.get("Authorization", "")
        token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        if tokens.get(token, 0) < time.time():
            challenge = f'Bearer resource_metadata="{self.base()}/.well-known/oauth-protected-resource/mcp"'
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            return self.send(401, {"error": "invalid_token"}, [("WWW-Authenticate", challenge)])
        message = self.form()
        if "id" not in message:
            return self.send(202)
        method, rid = message.get("method"), message["id"]
        if method == "initialize":
            result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "oauth-test", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "secret", "description": "Says the secret.",
                                 "inputSchema": {"type": "object", "properties": {}},
                                 "annotations": {"readOnlyHint": True}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "the secret is 42"}], "isError": False}
        else:
            return self.send(200, {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no such method"}})
        self.send(200, {"jsonrpc": "2.0", "id": rid, "result": result})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
