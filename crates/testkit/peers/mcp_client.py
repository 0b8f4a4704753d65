"""An MCP client the project did not write: the `mcp` PyPI package (2.3.0), driven from
the command line so Rust tests can check agentplane's MCP server against it.

It connects (streamable HTTP with --http URL, or stdio with --stdio COMMAND ARGS...),
lists the tools, optionally calls one with a task (reporting progress), and prints ONE
JSON object on stdout:

    {"protocol": "...", "tools": [{name, description, inputSchema, outputSchema}],
     "result": {CallToolResult as JSON} | null, "isError": bool | null,
     "progress": N, "progressMessages": [...], "error": {code, message} | null,
     "cancelled": bool (with --cancel-after)}

A JSON-RPC error of the listing or the call lands in "error" (exit 0); a failure to connect at all is
printed as {"connectError": "..."} with exit code 2. Logs go to stderr only.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--http", metavar="URL", help="the streamable HTTP endpoint")
    target.add_argument("--stdio", metavar="COMMAND", help="the server program to start")
    parser.add_argument("--header", action="append", default=[], metavar="NAME:VALUE", help="HTTP header (repeatable)")
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="an environment variable of the --stdio program, as a desktop client's `env` block sets it (repeatable)",
    )
    parser.add_argument("--mode", default="auto", help="auto (discover, else initialize), legacy, or a version")
    parser.add_argument("--tool", help="the tool to call")
    parser.add_argument("--task", help="the task argument")
    parser.add_argument("--workspace", help="the workspace argument")
    parser.add_argument("--arguments", help="raw JSON arguments instead of --task/--workspace")
    parser.add_argument("--cancel-after", type=float, metavar="SECONDS", help="abandon the call after this long")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole session")
    parser.add_argument("server_args", nargs=argparse.REMAINDER, help="arguments of the --stdio program (after --)")
    return parser.parse_args()


def tool_json(tool: Any) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
    }


async def session(args: argparse.Namespace) -> dict[str, Any]:
    if args.http:
        headers = {}
        for header in args.header:
            name, _, value = header.partition(":")
            headers[name.strip()] = value.strip()
        http = create_mcp_http_client(headers=headers)
        server: Any = streamable_http_client(args.http, http_client=http)
    else:
        server_args = [a for a in args.server_args if a != "--"] if args.server_args else []
        env = None
        if args.env:
            # The SDK starts the program with a safe subset of our environment; the
            # variables named here are added to that subset, as desktop clients do.
            from mcp.client.stdio import get_default_environment

            env = get_default_environment()
            for pair in args.env:
                name, _, value = pair.partition("=")
                env[name] = value
        server = StdioServerParameters(command=args.stdio, args=server_args, env=env)
        http = None

    out: dict[str, Any] = {
        "protocol": None,
        "tools": [],
        "result": None,
        "isError": None,
        "progress": 0,
        "progressMessages": [],
        "progressValues": [],
        "error": None,
    }

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        out["progress"] += 1
        out["progressValues"].append(progress)
        out["progressMessages"].append(message)

    try:
        async with Client(server, mode=args.mode) as client:
            out["protocol"] = client.protocol_version
            try:
                listed = await client.list_tools()
            except MCPError as e:
                out["error"] = {"code": e.code, "message": e.message}
                return out
            out["tools"] = [tool_json(t) for t in listed.tools]
            if args.tool:
                if args.arguments is not None:
                    arguments = json.loads(args.arguments)
                else:
                    arguments = {}
                    if args.task is not None:
                        arguments["task"] = args.task
                    if args.workspace is not None:
                        arguments["workspace"] = args.workspace
                try:
                    if args.cancel_after is not None:
                        # Leaving the scope cancels the request the way the SDK does it:
                        # notifications/cancelled, or closing the request's HTTP stream.
                        with anyio.move_on_after(args.cancel_after) as scope:
                            result = await client.call_tool(args.tool, arguments, progress_callback=on_progress)
                        out["cancelled"] = scope.cancelled_caught
                        if scope.cancelled_caught:
                            # Give the cancellation a moment to reach the server.
                            await anyio.sleep(0.5)
                            return out
                    else:
                        result = await client.call_tool(args.tool, arguments, progress_callback=on_progress)
                    out["result"] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
                    out["isError"] = bool(result.is_error)
                except MCPError as e:
                    out["error"] = {"code": e.code, "message": e.message}
    finally:
        if http is not None:
            await http.aclose()
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with anyio.fail_after(args.timeout):
        return await session(args)


if __name__ == "__main__":
    arguments = parse_args()
    try:
        document = anyio.run(run, arguments)
    except BaseException as e:  # noqa: BLE001 - report every failure as JSON
        if isinstance(e, KeyboardInterrupt):
            raise
        while isinstance(e, BaseExceptionGroup) and len(e.exceptions) == 1:
            e = e.exceptions[0]
        print(json.dumps({"connectError": f"{type(e).__name__}: {e}"}))
        sys.exit(2)
    print(json.dumps(document))
    sys.exit(0)
