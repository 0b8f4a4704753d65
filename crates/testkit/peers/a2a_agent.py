"""A small A2A agent built with the official SDK's server classes (PyPI `a2a-sdk`
1.3.0, protocol 1.0: `AgentExecutor`, `DefaultRequestHandler`, the Starlette routes and
the in-memory task store), for the tests of agentplane's A2A client (agents of
`kind = "a2a"` and the `a2a__NAME` tool).

    python a2a_agent.py [--auth bearer|apikey|none] [--key KEY] [--no-streaming] [--v03]

`--v03` makes it a protocol 0.3 agent: its card is the 0.3 card the SDK's compat layer
writes (`url`, `preferredTransport`, `protocolVersion: 0.3`, `type`-tagged security
schemes) and its JSON-RPC endpoint takes 0.3 requests (`message/stream`,
`tasks/cancel`) through the SDK's own 0.3 compatibility.

What it does is chosen by words in the message text:

- `stream`: three artifact chunks ("alpha ", "beta ", "gamma") and a working status
  between them, then completed.
- `slow`: works until cancelled (about 60 s otherwise); the framework's cancel is
  counted, and `GET /record` shows it.
- `ask`: goes to input-required with the question "May I deploy?"; a follow-up message
  on the same task completes it with "deployed after: <the follow-up's text>".
- `usage`: answers "measured" and reports token usage in the completed status's
  metadata (`usage: {input_tokens: 1200, output_tokens: 300, cost_usd: 0.25}`).
- `priced=X`: works for half a second (so concurrent tasks overlap), answers "priced"
  and reports `usage: {input_tokens: 10, output_tokens: 10, cost_usd: X}`.
- `fail`: the task fails with the message "the remote failed on purpose".
- `leak`: answers a card number, an e-mail address and an `sk-` key (`LEAK`);
  `leakfail`: the task fails with them in its message.
- `context`: answers the context id and how many messages that context has seen.
- anything else: answers "echo: <the text>" as one artifact, then completed.

Requests to the JSON-RPC endpoint (`POST /`) must carry the key (HTTP bearer, or the
`X-Peer-Key` header with `--auth apikey`), as the card declares; a request without it
is refused with 401 and counted. It prints `{"port": N}` once listening. `GET /record`
answers `{"cancels": N, "refused": N, "versions": [...], "methods": [...]}`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import sys

import uvicorn
from a2a.compat.v0_3.conversions import to_compat_agent_card
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

record: dict = {"cancels": 0, "refused": 0, "versions": [], "methods": []}
# What `leak` and `leakfail` give away: a card number, an e-mail address and an `sk-` key.
LEAK = "card 4111 1111 1111 1111, mail victim@example.com, key sk-live-Zx9Qw8Er7Ty6Ui5Op4As3Df"
contexts: dict[str, int] = {}


class PeerExecutor(AgentExecutor):
    """Behaviour by words in the message (see the module comment)."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        contexts[task.context_id] = contexts.get(task.context_id, 0) + 1
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"deployed after: {text}")])
            await updater.complete()
            return
        await updater.start_work()
        priced = re.search(r"priced=([0-9.]+)", text)
        if "leakfail" in text:
            await updater.failed(updater.new_agent_message([new_text_part(f"failed: {LEAK}")]))
        elif "leak" in text:
            await updater.add_artifact([new_text_part(f"the customer: {LEAK}")])
            await updater.complete()
        elif priced:
            await asyncio.sleep(0.5)
            await updater.add_artifact([new_text_part("priced")])
            await updater.update_status(
                TaskState.TASK_STATE_COMPLETED,
                metadata={
                    "usage": {
                        "input_tokens": 10,
                        "output_tokens": 10,
                        "cost_usd": float(priced.group(1)),
                    }
                },
            )
        elif "stream" in text:
            for i, chunk in enumerate(["alpha ", "beta ", "gamma"]):
                await updater.add_artifact(
                    [new_text_part(chunk)],
                    artifact_id="answer",
                    append=i > 0,
                    last_chunk=i == 2,
                )
                await asyncio.sleep(0.05)
            await updater.complete()
        elif "slow" in text:
            await updater.add_artifact([new_text_part("working ")], artifact_id="answer")
            await asyncio.sleep(60)
            await updater.add_artifact([new_text_part("too late")], artifact_id="answer", append=True)
            await updater.complete()
        elif "ask" in text:
            await updater.requires_input(
                updater.new_agent_message([new_text_part("May I deploy?")])
            )
        elif "usage" in text:
            await updater.add_artifact([new_text_part("measured")])
            await updater.update_status(
                TaskState.TASK_STATE_COMPLETED,
                metadata={
                    "usage": {"input_tokens": 1200, "output_tokens": 300, "cost_usd": 0.25}
                },
            )
        elif "fail" in text:
            await updater.failed(
                updater.new_agent_message([new_text_part("the remote failed on purpose")])
            )
        elif "context" in text:
            await updater.add_artifact(
                [new_text_part(f"context {task.context_id} seen {contexts[task.context_id]}")]
            )
            await updater.complete()
        else:
            await updater.add_artifact([new_text_part(f"echo: {text}")])
            await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        record["cancels"] += 1
        task = context.current_task
        if task is not None:
            await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def card(base: str, auth: str, streaming: bool, version: str) -> AgentCard:
    schemes = {}
    requirements = []
    if auth == "bearer":
        schemes["bearer"] = SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer")
        )
        requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    elif auth == "apikey":
        schemes["peerKey"] = SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(location="header", name="X-Peer-Key")
        )
        requirements.append(SecurityRequirement(schemes={"peerKey": StringList()}))
    return AgentCard(
        name="peer",
        description="A test agent of the official A2A SDK.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base}/", protocol_binding="JSONRPC", protocol_version=version)
        ],
        capabilities=AgentCapabilities(streaming=streaming),
        security_schemes=schemes,
        security_requirements=requirements,
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(
                id="echo", name="echo", description="Echoes, streams, asks.", tags=["test"]
            )
        ],
    )


def guarded(app, auth: str, key: str):
    """Refuses a JSON-RPC request without the key; records versions and methods."""

    async def wrapper(scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            ok = (
                auth == "none"
                or (auth == "bearer" and headers.get("authorization") == f"Bearer {key}")
                or (auth == "apikey" and headers.get("x-peer-key") == key)
            )
            if not ok:
                record["refused"] += 1
                await JSONResponse({"error": "unauthorized"}, status_code=401)(
                    scope, receive, send
                )
                return
            record["versions"].append(headers.get("a2a-version", ""))
            body = b""
            more = True
            while more:
                message = await receive()
                body += message.get("body", b"")
                more = message.get("more_body", False)
            try:
                record["methods"].append(json.loads(body).get("method"))
            except Exception:  # noqa: BLE001 - a test peer records what it can
                record["methods"].append(None)
            sent = False

            async def replay():
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            await app(scope, replay, send)
            return
        await app(scope, receive, send)

    return wrapper


async def get_record(_request: Request) -> JSONResponse:
    return JSONResponse(record)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--auth", choices=["bearer", "apikey", "none"], default="bearer")
    parser.add_argument("--key", default="peer-key")
    parser.add_argument("--no-streaming", action="store_true")
    parser.add_argument("--v03", action="store_true")
    args = parser.parse_args()

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    version = "0.3" if args.v03 else "1.0"
    agent_card = card(f"http://127.0.0.1:{port}", args.auth, not args.no_streaming, version)
    handler = DefaultRequestHandler(
        agent_executor=PeerExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=agent_card,
    )
    if args.v03:
        legacy = to_compat_agent_card(agent_card).model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
        card_routes = [
            Route(
                "/.well-known/agent-card.json",
                lambda _request: JSONResponse(legacy),
                methods=["GET"],
            )
        ]
    else:
        card_routes = create_agent_card_routes(agent_card)
    routes = [
        *card_routes,
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=args.v03),
        Route("/record", get_record, methods=["GET"]),
    ]
    app = guarded(Starlette(routes=routes), args.auth, args.key)

    print(json.dumps({"port": port}), flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
