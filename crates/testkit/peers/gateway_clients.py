"""Clients the project did not write, against the gateway's other routes: the official
`anthropic` package on `/anthropic/v1/messages`, the official `openai` package's
`responses.create` on `/openai/v1/responses`, and the OpenAI Agents SDK (`openai-agents`)
in its default Responses mode with a function tool, and `openai`'s `embeddings.create`
on `/openai/v1/embeddings`. All pinned in scripts/test-peers.sh.

    gateway_clients.py anthropic|responses|chained|agents|embeddings --base-url http://127.0.0.1:PORT \
        --client-id alice --model MODEL [--api-key TOKEN]

Each mode makes, in order: a whole call offering a `get_weather` tool, the same call
streamed, then (answering the whole call's tool call with "sunny, 21 C") a whole call
for the final text; `agents` runs one agent to its final output; `chained` follows a
kept answer with `previous_response_id` (sending only the tool's output), then tries
it as another client and after `store=False`. It prints ONE JSON
object. An API error is printed as {"apiError": {"status", "type", "message"}} with
exit code 3. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
ASK = "What is the weather in Paris?"


def anthropic_mode(args) -> dict:
    import anthropic

    client = anthropic.Anthropic(
        base_url=args.base_url + "/anthropic",
        api_key=args.api_key,
        default_headers={"X-Client-ID": args.client_id},
        max_retries=0,
        timeout=120,
    )
    tools = [{"name": WEATHER["name"], "description": WEATHER["description"], "input_schema": WEATHER["schema"]}]
    messages = [{"role": "user", "content": ASK}]

    def shape(message) -> dict:
        return {
            "id": message.id,
            "model": message.model,
            "stop_reason": message.stop_reason,
            "text": "".join(b.text for b in message.content if b.type == "text"),
            "tool_uses": [
                {"id": b.id, "name": b.name, "input": b.input} for b in message.content if b.type == "tool_use"
            ],
            "usage": {"input_tokens": message.usage.input_tokens, "output_tokens": message.usage.output_tokens},
        }

    out = {}
    whole = client.messages.create(
        model=args.model, max_tokens=500, system="Answer briefly.", messages=messages, tools=tools
    )
    out["whole"] = shape(whole)
    events = []
    with client.messages.stream(model=args.model, max_tokens=500, messages=messages, tools=tools) as stream:
        text = []
        for event in stream:
            events.append(event.type)
            if event.type == "text":
                text.append(event.text)
        final = stream.get_final_message()
    out["streamed"] = shape(final) | {"events": events, "text_events": len(text)}
    use = out["whole"]["tool_uses"][0] if out["whole"]["tool_uses"] else None
    if use:
        follow = messages + [
            {"role": "assistant", "content": [{"type": "tool_use", "id": use["id"], "name": use["name"], "input": use["input"]}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "sunny, 21 C"}]},
        ]
        out["after_tool"] = shape(client.messages.create(model=args.model, max_tokens=500, messages=follow, tools=tools))
        out["count"] = client.messages.count_tokens(model=args.model, messages=follow, tools=tools).input_tokens
    return out


def responses_mode(args) -> dict:
    import openai

    client = openai.OpenAI(
        base_url=args.base_url + "/openai/v1",
        api_key=args.api_key,
        default_headers={"X-Client-ID": args.client_id},
        max_retries=0,
        timeout=120,
    )
    tools = [{"type": "function", "name": WEATHER["name"], "description": WEATHER["description"],
              "parameters": WEATHER["schema"], "strict": False}]

    def shape(response) -> dict:
        return {
            "id": response.id,
            "status": response.status,
            "model": response.model,
            "text": response.output_text,
            "calls": [
                {"call_id": i.call_id, "name": i.name, "arguments": i.arguments}
                for i in response.output
                if i.type == "function_call"
            ],
            "usage": response.usage.model_dump() if response.usage else None,
        }

    out = {}
    whole = client.responses.create(model=args.model, instructions="Answer briefly.", input=ASK, tools=tools, store=False)
    out["whole"] = shape(whole)
    events, deltas, final = [], [], None
    for event in client.responses.create(model=args.model, input=ASK, tools=tools, stream=True, store=False):
        events.append(event.type)
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        if event.type == "response.completed":
            final = event.response
    out["streamed"] = (shape(final) if final else {}) | {"events": events, "text": "".join(deltas)}
    call = out["whole"]["calls"][0] if out["whole"]["calls"] else None
    if call:
        follow = [
            {"role": "user", "content": ASK},
            {"type": "function_call", "call_id": call["call_id"], "name": call["name"], "arguments": call["arguments"]},
            {"type": "function_call_output", "call_id": call["call_id"], "output": "sunny, 21 C"},
        ]
        out["after_tool"] = shape(client.responses.create(model=args.model, input=follow, tools=tools, store=False))
    return out


def chained_mode(args) -> dict:
    import openai

    def client(client_id):
        return openai.OpenAI(
            base_url=args.base_url + "/openai/v1",
            api_key=args.api_key,
            default_headers={"X-Client-ID": client_id},
            max_retries=0,
            timeout=120,
        )

    mine = client(args.client_id)
    tools = [{"type": "function", "name": WEATHER["name"], "description": WEATHER["description"],
              "parameters": WEATHER["schema"], "strict": False}]
    first = mine.responses.create(model=args.model, instructions="Answer briefly.", input=ASK, tools=tools)
    call = next(i for i in first.output if i.type == "function_call")
    output = [{"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"}]
    second = mine.responses.create(model=args.model, previous_response_id=first.id, input=output, tools=tools)

    def refused(make):
        try:
            make()
            return None
        except openai.APIStatusError as e:
            return {"status": e.status_code, "message": str(e.message)}

    unkept = mine.responses.create(model=args.model, input="no memory", store=False)
    return {
        "first": {"id": first.id, "store": first.store, "call_id": call.call_id},
        "second": {"id": second.id, "text": second.output_text, "previous": second.previous_response_id},
        "as_other_client": refused(lambda: client("mallory").responses.create(
            model=args.model, previous_response_id=second.id, input="and tomorrow?")),
        "unkept": {"store": unkept.store},
        "after_unkept": refused(lambda: mine.responses.create(
            model=args.model, previous_response_id=unkept.id, input="and?")),
    }


def embeddings_mode(args) -> dict:
    import openai

    client = openai.OpenAI(
        base_url=args.base_url + "/openai/v1",
        api_key=args.api_key,
        default_headers={"X-Client-ID": args.client_id},
        max_retries=0,
        timeout=120,
    )
    texts = ["the cat sat", "on the mat", "pay with 4111 1111 1111 1111"]
    # The SDK asks for base64 unless told otherwise, and decodes it.
    default = client.embeddings.create(model=args.model, input=texts)
    floats = client.embeddings.create(model=args.model, input=texts[0], encoding_format="float")
    return {
        "vectors": [list(d.embedding) for d in default.data],
        "indexes": [d.index for d in default.data],
        "usage": default.usage.model_dump(),
        "model": default.model,
        "float": list(floats.data[0].embedding),
    }


def agents_mode(args) -> dict:
    import openai
    from agents import Agent, Runner, function_tool, set_default_openai_client, set_tracing_disabled

    set_tracing_disabled(True)
    set_default_openai_client(
        openai.AsyncOpenAI(
            base_url=args.base_url + "/openai/v1",
            api_key=args.api_key,
            default_headers={"X-Client-ID": args.client_id},
            max_retries=0,
        ),
        use_for_tracing=False,
    )
    called = []

    @function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        called.append(city)
        return "sunny, 21 C"

    agent = Agent(name="weather", instructions="Answer briefly.", model=args.model, tools=[get_weather])
    result = asyncio.run(Runner.run(agent, ASK))
    return {"final_output": result.final_output, "tool_called_with": called,
            "responses": len(result.raw_responses)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["anthropic", "responses", "chained", "agents", "embeddings"])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="no-token-configured")
    args = parser.parse_args()
    run = {"anthropic": anthropic_mode, "responses": responses_mode, "chained": chained_mode, "agents": agents_mode,
           "embeddings": embeddings_mode}[args.mode]
    try:
        out = run(args)
    except Exception as e:  # noqa: BLE001 - the SDKs' error types differ; report any as data
        status = getattr(e, "status_code", None)
        body = getattr(e, "body", None)
        kind = None
        if isinstance(body, dict):
            error = body.get("error") if isinstance(body.get("error"), dict) else body
            kind = error.get("type") or error.get("code")
        print(json.dumps({"apiError": {"status": status, "type": kind, "message": str(e),
                                        "class": type(e).__name__}}))
        return 3
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
