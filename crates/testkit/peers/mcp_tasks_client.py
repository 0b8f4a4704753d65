"""An MCP client over streamable HTTP (protocol 2025-11-25, sessions) that speaks the
MCP tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), which PyPI's `mcp`
client does not: it declares the extension at `initialize`, so a server may answer a
`tools/call` with a task, then reads it back with `tasks/get`. Also fires many calls at
once over one session (`burst`). Built on httpx2 (installed with `mcp`); prints ONE JSON
document on stdout.

    call  --url URL --key KEY --tool NAME --arguments JSON   -> {"response": {...}}
    get   --url URL --key KEY --task ID                      -> {"response": {...}}
    burst --url URL --key KEY --tool NAME --arguments JSON --count N
                                                             -> {"responses": [...]}

A JSON-RPC error lands in the response's "error"; a failure to connect exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx2 as httpx

PROTOCOL = "2025-11-25"
TASKS = "io.modelcontextprotocol/tasks"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["call", "get", "burst"])
    parser.add_argument("--url", required=True)
    parser.add_argument("--key", help="an agentplane key, sent as a bearer token")
    parser.add_argument("--tool")
    parser.add_argument("--arguments", default="{}")
    parser.add_argument("--task")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--no-tasks", action="store_true", help="do not declare the tasks extension")
    parser.add_argument("--timeout", type=float, default=60.0)
    return parser.parse_args()


def decode(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response: a JSON body, or the last `data:` of an SSE one."""
    kind = response.headers.get("content-type", "")
    if "text/event-stream" in kind:
        message: dict[str, Any] | None = None
        for line in response.text.splitlines():
            if line.startswith("data:") and line[5:].strip():
                candidate = json.loads(line[5:].strip())
                if "id" in candidate and ("result" in candidate or "error" in candidate):
                    message = candidate
        if message is None:
            raise RuntimeError(f"no JSON-RPC answer in the event stream: {response.text[:300]}")
        return message
    return response.json()


class Session:
    def __init__(self, client: httpx.AsyncClient, url: str, key: str | None, tasks: bool) -> None:
        self.client = client
        self.url = url
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        self.tasks = tasks
        self.next_id = 1

    async def open(self) -> None:
        capabilities: dict[str, Any] = {}
        if self.tasks:
            capabilities["extensions"] = {TASKS: {}}
        answer = await self.post(
            "initialize",
            {
                "protocolVersion": PROTOCOL,
                "capabilities": capabilities,
                "clientInfo": {"name": "agentplane-tasks-test", "version": "1"},
            },
        )
        if "error" in answer:
            raise RuntimeError(f"initialize failed: {answer['error']}")
        self.headers["MCP-Protocol-Version"] = answer["result"]["protocolVersion"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self.client.post(self.url, headers=self.headers, content=json.dumps(note))

    async def post(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id = self.next_id
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self.client.post(self.url, headers=self.headers, content=json.dumps(body))
        if response.status_code >= 400 and "application/json" not in response.headers.get("content-type", ""):
            return {"error": {"httpStatus": response.status_code, "body": response.text[:500]}}
        session = response.headers.get("mcp-session-id")
        if session:
            self.headers["Mcp-Session-Id"] = session
        return decode(response)

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return await self.post("tools/call", {"name": tool, "arguments": arguments})


async def run(args: argparse.Namespace) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=args.timeout) as client:
        session = Session(client, args.url, args.key, not args.no_tasks)
        await session.open()
        arguments = json.loads(args.arguments)
        if args.command == "call":
            return {"response": await session.call(args.tool, arguments)}
        if args.command == "get":
            return {"response": await session.post("tasks/get", {"taskId": args.task})}
        calls = [session.call(args.tool, arguments) for _ in range(args.count)]
        return {"responses": await asyncio.gather(*calls)}


if __name__ == "__main__":
    parsed = parse_args()
    try:
        document = asyncio.run(asyncio.wait_for(run(parsed), parsed.timeout))
    except Exception as e:  # noqa: BLE001 - report every failure as JSON
        print(json.dumps({"connectError": f"{type(e).__name__}: {e}"}))
        sys.exit(2)
    print(json.dumps(document))
    sys.exit(0)
