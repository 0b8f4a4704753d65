"""A client the project did not write: the official `openai` PyPI package (pinned in
scripts/test-peers.sh), pointed at agentplane's OpenAI-compatible gateway, driven from
the command line so Rust tests can check the gateway against it.

    openai_client.py --base-url http://127.0.0.1:PORT/openai/v1 --client-id alice \
        --model MODEL|auto [--api-key TOKEN] [--skip-tools] [--max-tokens N]

`--model auto` takes the first listed model. It runs, in order: a model listing, a plain completion, a streamed completion (with
`stream_options.include_usage`), and unless --skip-tools, a completion offering a tool
(plain and streamed) followed by the tool's result. It prints ONE JSON object:

    {"models": [...], "plain": {...}, "streamed": {...}, "tool": {...} | null,
     "tool_streamed": {...} | null, "after_tool": {...} | null}

An API error is printed as {"apiError": {"status", "code", "message"}} with exit code 3,
so a test can check refusals as the client library sees them. Logs go to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys

import openai

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def completion(result) -> dict:
    choice = result.choices[0]
    calls = [
        {"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
        for c in (choice.message.tool_calls or [])
    ]
    return {
        "id": result.id,
        "model": result.model,
        "content": choice.message.content,
        "finish_reason": choice.finish_reason,
        "tool_calls": calls,
        "usage": result.usage.model_dump() if result.usage else None,
    }


def streamed(stream) -> dict:
    text, finish, usage, chunks, calls = [], None, None, 0, {}
    for chunk in stream:
        chunks += 1
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices:
            if choice.delta.content:
                text.append(choice.delta.content)
            for call in choice.delta.tool_calls or []:
                entry = calls.setdefault(call.index, {"id": None, "name": "", "arguments": ""})
                if call.id:
                    entry["id"] = call.id
                if call.function and call.function.name:
                    entry["name"] += call.function.name
                if call.function and call.function.arguments:
                    entry["arguments"] += call.function.arguments
            if choice.finish_reason:
                finish = choice.finish_reason
    return {
        "content": "".join(text),
        "deltas": len([t for t in text if t]),
        "chunks": chunks,
        "finish_reason": finish,
        "usage": usage,
        "tool_calls": [calls[i] for i in sorted(calls)],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--api-key", default="no-token-configured")
    parser.add_argument("--skip-tools", action="store_true")
    parser.add_argument("--max-tokens", type=int, default=None)
    args = parser.parse_args()

    client = openai.OpenAI(
        base_url=args.base_url,
        api_key=args.api_key,
        default_headers={"X-Client-ID": args.client_id},
        max_retries=0,
        timeout=120,
    )
    extra = {} if args.max_tokens is None else {"max_tokens": args.max_tokens}
    messages = [
        {"role": "system", "content": "You are a helpful assistant. Answer briefly."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    out: dict = {"tool": None, "tool_streamed": None, "after_tool": None}
    try:
        out["models"] = [m.id for m in client.models.list()]
        if args.model == "auto":
            args.model = out["models"][0]
        out["plain"] = completion(
            client.chat.completions.create(model=args.model, messages=messages, temperature=0, **extra)
        )
        out["streamed"] = streamed(
            client.chat.completions.create(
                model=args.model,
                messages=messages,
                stream=True,
                stream_options={"include_usage": True},
                **extra,
            )
        )
        if not args.skip_tools:
            ask = [{"role": "user", "content": "What is the weather in Paris?"}]
            out["tool"] = completion(
                client.chat.completions.create(model=args.model, messages=ask, tools=[WEATHER_TOOL])
            )
            out["tool_streamed"] = streamed(
                client.chat.completions.create(
                    model=args.model, messages=ask, tools=[WEATHER_TOOL], stream=True
                )
            )
            call = out["tool"]["tool_calls"][0] if out["tool"]["tool_calls"] else None
            if call:
                follow = ask + [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["name"], "arguments": call["arguments"]},
                            }
                        ],
                    },
                    {"role": "tool", "tool_call_id": call["id"], "content": "sunny, 21 C"},
                ]
                out["after_tool"] = completion(
                    client.chat.completions.create(model=args.model, messages=follow, tools=[WEATHER_TOOL])
                )
    except openai.APIStatusError as e:
        body = e.body if isinstance(e.body, dict) else {}
        print(
            json.dumps(
                {
                    "apiError": {
                        "status": e.status_code,
                        "code": body.get("code") if body else None,
                        "message": e.message,
                    }
                }
            )
        )
        return 3
    except openai.APIError as e:
        # An error inside a stream (no HTTP status): the envelope's message and code.
        print(json.dumps({"apiError": {"status": None, "code": getattr(e, "code", None), "message": e.message}}))
        return 3
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
