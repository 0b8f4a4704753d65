"""An upstream MCP server over streamable HTTP, built on PyPI's `mcp` (2.3.0), for the
tests of agentplane's MCP client: which protocol generation it speaks is chosen, and
it can require OAuth access tokens that its own token endpoint issues.

    python mcp_upstream.py --era modern|legacy|both [--oauth LIFETIME_SECS]

`--era modern` serves only 2026-07-28 (`server/discover`, no `initialize`): every
request goes to the SDK's modern entry, which refuses the `initialize` handshake.
`--era legacy` serves only the session-based generations (2024-11-05 … 2025-11-25):
every request goes to the SDK's session path, which knows no `server/discover`.
`--era both` is the SDK as shipped.

`--oauth N` adds `POST /token` (RFC 6749 client credentials; the client `agentplane`
with the secret `s3cret:client/secret`, by HTTP Basic or in the form) issuing opaque
tokens that live N seconds, and makes `/mcp` accept only a token it issued that has
not expired (401 with a `WWW-Authenticate` challenge otherwise).

It prints `{"port": N}` once listening. `GET /record` answers what happened: tokens
issued (with the form each request sent), tokens refused, and the protocol version
and `traceparent` header of every MCP request. One tool, `stamp`, answers `stamp N` (never a token).
"""

from __future__ import annotations

import argparse
import base64
import json
import secrets
import socket
import sys
import time
from urllib.parse import parse_qs, unquote_plus

import uvicorn
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

CLIENT_ID = "agentplane"
CLIENT_SECRET = "s3cret:client/secret"
MODERN = "2026-07-28"

record: dict = {"issued": [], "refused": 0, "accepted": 0, "requests": []}
live_tokens: dict[str, float] = {}


class IssuedTokens:
    """Accepts a token this server issued, until it expires."""

    async def verify_token(self, token: str) -> AccessToken | None:
        expires = live_tokens.get(token)
        if expires is None or time.monotonic() >= expires:
            record["refused"] += 1
            return None
        record["accepted"] += 1
        return AccessToken(token=token, client_id=CLIENT_ID, scopes=[], expires_at=int(time.time() + 60))


def token_endpoint(lifetime: int):
    async def issue(request: Request) -> JSONResponse:
        form = parse_qs((await request.body()).decode())
        field = {k: v[0] for k, v in form.items()}
        client_id, secret, how = field.get("client_id"), field.get("client_secret"), "post"
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            pair = base64.b64decode(header[6:]).decode()
            user, _, password = pair.partition(":")
            client_id, secret, how = unquote_plus(user), unquote_plus(password), "basic"
        if field.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if client_id != CLIENT_ID or secret != CLIENT_SECRET:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        token = "tok-" + secrets.token_urlsafe(24)
        live_tokens[token] = time.monotonic() + lifetime
        record["issued"].append(
            {
                "token": token,
                "auth": how,
                "scope": field.get("scope"),
                "resource": field.get("resource"),
                "audience": field.get("audience"),
            }
        )
        return JSONResponse({"access_token": token, "token_type": "Bearer", "expires_in": lifetime})

    return issue


async def show_record(_: Request) -> JSONResponse:
    return JSONResponse(record)


def era_gate(app, era: str):
    """Routes every request to one generation's entry by its protocol-version header."""

    async def gated(scope, receive, send):
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            headers = [(k, v) for k, v in scope["headers"] if k != b"mcp-protocol-version"]
            sent = next((v.decode() for k, v in scope["headers"] if k == b"mcp-protocol-version"), None)
            traceparent = next((v.decode() for k, v in scope["headers"] if k == b"traceparent"), None)
            record["requests"].append(
                {"method": scope["method"], "header": sent, "traceparent": traceparent}
            )
            if era == "modern":
                headers.append((b"mcp-protocol-version", MODERN.encode()))
            elif era == "legacy" and sent is not None and sent in HANDSHAKE_PROTOCOL_VERSIONS:
                headers.append((b"mcp-protocol-version", sent.encode()))
            elif era == "both" and sent is not None:
                headers.append((b"mcp-protocol-version", sent.encode()))
            scope = dict(scope, headers=headers)
        await app(scope, receive, send)

    return gated


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--era", choices=["modern", "legacy", "both"], default="both")
    parser.add_argument("--oauth", type=int, metavar="LIFETIME_SECS")
    args = parser.parse_args()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    base = f"http://127.0.0.1:{port}"

    extra = {}
    if args.oauth is not None:
        extra = {
            "auth": AuthSettings(
                issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False
            ),
            "token_verifier": IssuedTokens(),
        }
    server = MCPServer("upstream", **extra)
    calls = {"n": 0}

    @server.tool()
    def stamp() -> str:
        """Answers `stamp N`, N counting the calls."""
        calls["n"] += 1
        return f"stamp {calls['n']}"

    routes = [Route("/record", show_record, methods=["GET"])]
    if args.oauth is not None:
        routes.append(Route("/token", token_endpoint(args.oauth), methods=["POST"]))
    server._custom_starlette_routes.extend(routes)
    app = era_gate(server.streamable_http_app(), args.era)

    print(json.dumps({"port": port}), flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
