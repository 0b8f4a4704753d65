#!/usr/bin/env python3
"""Checks an `agentplane audit export` (JSON Lines on stdin or in a file) with the
algorithm of docs/audit.md alone: Python's standard library, no agentplane code.

For each line with a hash:
    hash == SHA-256(prev || field("agentplane/event/1") || field(thread_id)
                    || field(str(seq)) || field(turn_id) || field(kind) || field(ts)
                    || field(payload))
where prev is the 32 bytes of the line's `prev` (hex) and field(s) is the 8-byte
big-endian length of s's UTF-8 bytes followed by those bytes. Consecutive lines of a
thread must also link: a line's `prev` is the hash of the line before it, its seq the
one after; a thread's first chained line links to 32 zero bytes unless the export
starts mid-chain (`--since`). Lines without a hash predate the chain and are counted.

Lines with a `chain` (`model_calls`, `mcp_calls`, and `audit_ledger`, the ledger of
what no event holds) are records, one chain per table by `pos` (1, 2, 3… gapless):
    hash == SHA-256(prev || field(TAG[chain]) || field(str(pos)) || value(v1) || ...)
with the `values` in the line's `columns` order, value(v) = field(v) and, for null,
the 8 bytes FF..FF with nothing after them. Anchor one with --anchor CHAIN=HASH.

Usage: audit_verify.py [EXPORT.jsonl] [--anchor THREAD_ID=HASH ...]
Exit 0 when every link holds (and every anchor is a hash of its thread's chain),
1 naming the first broken link otherwise.
"""

import hashlib
import json
import struct
import sys

TAG = "agentplane/event/1"
GENESIS = "0" * 64
RECORD_TAGS = {
    "model_calls": "agentplane/model_call/1",
    "mcp_calls": "agentplane/mcp_call/1",
    "audit_ledger": "agentplane/ledger/1",
}
NULL = b"\xff" * 8


def field(text):
    data = text.encode("utf-8")
    return struct.pack(">Q", len(data)) + data


def event_hash(prev_hex, e):
    h = hashlib.sha256(bytes.fromhex(prev_hex))
    for f in (TAG, e["thread_id"], str(e["seq"]), e["turn_id"], e["kind"], e["ts"], e["payload"]):
        h.update(field(f))
    return h.hexdigest()


def record_hash(prev_hex, r):
    h = hashlib.sha256(bytes.fromhex(prev_hex))
    h.update(field(RECORD_TAGS[r["chain"]]))
    h.update(field(str(r["pos"])))
    for value in r["values"]:
        h.update(NULL if value is None else field(value))
    return h.hexdigest()


def check_record(r, number, last, seen):
    """None when the record links; else why not."""
    chain = r["chain"]
    where = f"chain {chain} record {r['pos']} (line {number})"
    if chain not in RECORD_TAGS:
        return f"{where}: unknown chain"
    previous = last.get("chain:" + chain)
    if previous is not None and r["pos"] != previous[0] + 1:
        return f"{where}: follows record {previous[0]}; positions are gapless"
    if previous is None and r["pos"] == 1 and r["prev"] != GENESIS:
        return f"{where}: the chain's first record must link to {GENESIS}"
    if previous is not None and r["prev"] != previous[1]:
        return f"{where}: prev {r['prev']} is not the previous hash {previous[1]}"
    if r["hash"] is None:
        return f"{where}: no hash"
    computed = record_hash(r["prev"], r)
    if computed != r["hash"]:
        return f"{where}: hash {r['hash']} but the record hashes to {computed}"
    last["chain:" + chain] = (r["pos"], r["hash"])
    seen.setdefault(chain, set()).add(r["hash"])
    return None


def main(argv):
    anchors = {}
    paths = []
    args = iter(argv)
    for arg in args:
        if arg == "--anchor":
            thread, _, value = next(args).partition("=")
            anchors.setdefault(thread, set()).add(value.lower())
        else:
            paths.append(arg)
    source = open(paths[0], encoding="utf-8") if paths else sys.stdin
    last = {}  # thread_id -> (seq, hash) of its previous line
    seen = {}  # thread_id -> every hash of its chain in the export
    chained = unchained = records = ledger = 0
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        e = json.loads(line)
        if "chain" in e:
            why = check_record(e, number, last, seen)
            if why is not None:
                return broken(why)
            if e["chain"] == "audit_ledger":
                ledger += 1
            else:
                records += 1
            continue
        where = f"thread {e['thread_id']} event {e['seq']} (line {number})"
        previous = last.get(e["thread_id"])
        if previous is not None and e["seq"] != previous[0] + 1:
            return broken(f"{where}: follows event {previous[0]}; seqs are gapless")
        if e["hash"] is None:
            if previous is not None and previous[1] is not None:
                return broken(f"{where}: no hash after a chained event")
            last[e["thread_id"]] = (e["seq"], None)
            unchained += 1
            continue
        prev = e["prev"]
        if previous is not None and previous[1] is not None and prev != previous[1]:
            return broken(f"{where}: prev {prev} is not the previous hash {previous[1]}")
        if previous is not None and previous[1] is None and prev != GENESIS:
            return broken(f"{where}: the chain's first event must link to {GENESIS}")
        computed = event_hash(prev, e)
        if computed != e["hash"]:
            return broken(f"{where}: hash {e['hash']} but the event hashes to {computed}")
        last[e["thread_id"]] = (e["seq"], e["hash"])
        seen.setdefault(e["thread_id"], set()).add(e["hash"])
        chained += 1
    for thread, wanted in anchors.items():
        missing = wanted - seen.get(thread, set())
        if missing:
            return broken(f"{thread}: anchored hash {sorted(missing)[0]} is not in its chain")
    threads = sum(1 for key in last if not key.startswith("chain:"))
    print(f"ok: {threads} threads, {chained} events chained, {unchained} not chained, "
          f"{records} gateway records chained, {ledger} ledger records chained")
    return 0


def broken(message):
    print(f"BROKEN {message}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
