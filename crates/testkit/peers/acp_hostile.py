"""A hostile ACP agent for agentplane's client tests (standard library only).

Usage: acp_hostile.py MODE, where MODE is one of
  garbage        non-JSON and malformed JSON-RPC lines around every answer
  oversized      a 9 MiB line before the prompt's answer
  wrong-ids      answers with ids that were never asked, before the right ones
  exit-mid-turn  one message chunk, then exits with status 3 in the middle of a prompt
  silent         reads everything, answers nothing (not even `initialize`)
  silent-prompt  a correct handshake, then never answers `session/prompt` nor cancel
  flood          20,000 message chunks as fast as it can write, then the answer
"""

import json
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "garbage"


def send(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def raw(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def answer(msg_id, result):
    if MODE == "wrong-ids":
        send({"jsonrpc": "2.0", "id": 987654, "result": {"bogus": True}})
        send({"jsonrpc": "2.0", "id": "not-a-request", "error": {"code": -1, "message": "x"}})
    if MODE == "garbage":
        raw("this is not json")
        raw("{\"jsonrpc\": \"2.0\", \"id\": ")
        raw("[1, 2, 3]")
        raw("{\"jsonrpc\": \"2.0\"}")
        raw("\x00\x01\x02")
    send({"jsonrpc": "2.0", "id": msg_id, "result": result})


def chunk(session, text):
    send({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": session,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}},
        },
    })


for line in sys.stdin:
    if MODE == "silent":
        continue
    try:
        msg = json.loads(line)
    except ValueError:
        continue
    method = msg.get("method")
    msg_id = msg.get("id")
    if method == "initialize":
        answer(msg_id, {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []})
    elif method == "session/new":
        answer(msg_id, {"sessionId": "hostile-1"})
    elif method == "session/prompt":
        session = msg["params"]["sessionId"]
        if MODE == "silent-prompt":
            continue
        chunk(session, "partial answer")
        if MODE == "exit-mid-turn":
            time.sleep(0.05)
            sys.exit(3)
        if MODE == "flood":
            for _ in range(20000):
                chunk(session, "x" * 100)
        if MODE == "oversized":
            raw("{\"jsonrpc\":\"2.0\",\"method\":\"session/update\",\"params\":{\"pad\":\"" + "x" * (9 * 1024 * 1024) + "\"}}")
        chunk(session, " and the rest")
        # Token usage at the end of a prompt (an unstable part of the schema).
        answer(msg_id, {"stopReason": "end_turn", "usage": {"inputTokens": 1200, "outputTokens": 300, "totalTokens": 1500}})
    elif msg_id is not None and method is not None:
        send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32601, "message": "method not found"}})
