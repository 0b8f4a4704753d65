"""An A2A client built on PyPI's official `a2a-sdk` 0.3 (protocol 0.3): the same
commands as `a2a_client.py` (card, send, get, cancel, subscribe), spoken as a 0.3
client (`message/send`, `tasks/get`…, no `A2A-Version` header).

Usage: python a2a_client_v03.py '<json command>'  — prints one JSON document.
"""

import asyncio
import json
import sys
import uuid

import httpx

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskIdParams,
    TaskQueryParams,
    TextPart,
)


def dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def item_of(event):
    # A stream item is (task, update) or a message.
    if isinstance(event, tuple):
        task, update = event
        return {"task": dump(task), "update": dump(update) if update is not None else None}
    return {"message": dump(event)}


async def run(command):
    headers = {}
    if command.get("key"):
        headers["Authorization"] = f"Bearer {command['key']}"
    async with httpx.AsyncClient(headers=headers, timeout=60) as http:
        resolver = A2ACardResolver(http, base_url=command["url"])
        card = await resolver.get_agent_card()
        if command["op"] == "card":
            return {"card": dump(card)}
        config = ClientConfig(
            streaming=bool(command.get("stream")) or command["op"] == "subscribe",
            polling=bool(command.get("return_immediately")),
            httpx_client=http,
        )
        client = ClientFactory(config).create(card)
        op = command["op"]
        if op == "send":
            message = Message(
                message_id=str(uuid.uuid4()),
                role=Role.user,
                parts=[Part(root=TextPart(text=command["text"]))],
                context_id=command.get("context"),
                task_id=command.get("task"),
            )
            events = []
            async for event in client.send_message(message):
                events.append(item_of(event))
            return {"events": events}
        if op == "get":
            task = await client.get_task(TaskQueryParams(id=command["task"]))
            return {"task": dump(task)}
        if op == "cancel":
            task = await client.cancel_task(TaskIdParams(id=command["task"]))
            return {"task": dump(task)}
        if op == "subscribe":
            events = []
            async for event in client.resubscribe(TaskIdParams(id=command["task"])):
                events.append(item_of(event))
            return {"events": events}
        raise ValueError(f"unknown op {op}")


def main():
    command = json.loads(sys.argv[1])
    try:
        result = asyncio.run(run(command))
    except Exception as e:  # noqa: BLE001 - the test reads what the SDK raised
        result = {"error": {"type": type(e).__name__, "message": str(e)}}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
