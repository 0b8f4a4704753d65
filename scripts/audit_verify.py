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

The ledger (`audit_ledger`) is replayed too: its first record must be the genesis,
and the `row` lines a whole export ends with (threads, turns, approvals, keys) must
agree with it and with the events — a thread's owner, workspace and deletion with its
`thread_created`/`thread_deleted` record, a thread claiming events from before the
chain with the genesis, a turn's input and result with its `turn_started` and
`turn_completed` events, an approval's decision and decider with `approval_decided`,
a key's roles and revocation with its `key_created`/`key_revoked` record, and a
decision's policy set with a `policy_set_loaded` record.

With --anchors FILE --public-key HEX, each line of FILE (`agentplane audit anchor`) must
carry an Ed25519 signature by that key over its text (docs/audit.md), and every head
it names must still be in the export with that hash: a chain rewritten or cut back
behind an anchor is named.

Usage: audit_verify.py [EXPORT.jsonl] [--anchor THREAD_ID=HASH ...]
                       [--anchors FILE --public-key HEX]
Exit 0 when every link holds and every row agrees, 1 naming each problem otherwise.
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


# Ed25519 verification (RFC 8032, section 6), for the anchors' signatures.
P = 2**255 - 19
L = 2**252 + 27742317777372353535851937790883648493
D = -121665 * pow(121666, P - 2, P) % P
SQRT_M1 = pow(2, (P - 1) // 4, P)


def recover_x(y, sign):
    if y >= P:
        return None
    x2 = (y * y - 1) * pow(D * y * y + 1, P - 2, P) % P
    if x2 == 0:
        return None if sign else 0
    x = pow(x2, (P + 3) // 8, P)
    if (x * x - x2) % P != 0:
        x = x * SQRT_M1 % P
    if (x * x - x2) % P != 0:
        return None
    if (x & 1) != sign:
        x = P - x
    return x


def point_add(a, b):
    pa = (a[1] - a[0]) * (b[1] - b[0]) % P
    pb = (a[1] + a[0]) * (b[1] + b[0]) % P
    pc = 2 * a[3] * b[3] * D % P
    pd = 2 * a[2] * b[2] % P
    e, f, g, h = pb - pa, pd - pc, pd + pc, pb + pa
    return (e * f % P, g * h % P, f * g % P, e * h % P)


def point_mul(s, point):
    q = (0, 1, 1, 0)
    while s > 0:
        if s & 1:
            q = point_add(q, point)
        point = point_add(point, point)
        s >>= 1
    return q


def point_equal(a, b):
    return (a[0] * b[2] - b[0] * a[2]) % P == 0 and (a[1] * b[2] - b[1] * a[2]) % P == 0


def decompress(data):
    if len(data) != 32:
        return None
    y = int.from_bytes(data, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    x = recover_x(y, sign)
    return None if x is None else (x, y, 1, x * y % P)


G_Y = 4 * pow(5, P - 2, P) % P
G_X = recover_x(G_Y, 0)
BASE = (G_X, G_Y, 1, G_X * G_Y % P)


def ed25519_verify(public, message, signature):
    if len(public) != 32 or len(signature) != 64:
        return False
    a = decompress(public)
    r = decompress(signature[:32])
    s = int.from_bytes(signature[32:], "little")
    if a is None or r is None or s >= L:
        return False
    h = int.from_bytes(hashlib.sha512(signature[:32] + public + message).digest(), "little") % L
    return point_equal(point_mul(s, BASE), point_add(r, point_mul(h, a)))


def anchor_message(a):
    text = f"agentplane/anchor/1\nts {a['ts']}\n"
    for head in a["threads"]:
        text += f"thread {head['name']} {head['index']} {head['hash']}\n"
    for head in a["chains"]:
        text += f"chain {head['name']} {head['index']} {head['hash']}\n"
    return text.encode("utf-8")


def check_anchors(path, public_hex, at, ends, problems):
    """Each anchor signed by the key, each head still where it was anchored."""
    public = bytes.fromhex(public_hex)
    count = 0
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip():
            continue
        a = json.loads(line)
        where = f"anchor line {number} ({a.get('ts')})"
        try:
            signature = bytes.fromhex(a["signature"])
        except ValueError:
            signature = b""
        if a.get("anchor") != "agentplane/anchor/1" or not ed25519_verify(
            public, anchor_message(a), signature
        ):
            problems.append(f"{where}: its signature does not verify with the key")
            continue
        count += 1
        for kind, heads in (("thread", a["threads"]), ("chain", a["chains"])):
            for head in heads:
                key = (kind, head["name"], head["index"])
                if key not in at:
                    end = ends.get((kind, head["name"]), 0)
                    problems.append(
                        f"{kind} {head['name']}: {where} holds position {head['index']}, "
                        f"but the chain ends at {end}: cut back behind the anchor"
                    )
                elif at[key] != head["hash"]:
                    problems.append(
                        f"{kind} {head['name']}: position {head['index']} has hash {at[key]}, "
                        f"{where} holds {head['hash']}: rewritten after it was anchored"
                    )
    return count


def replay_ledger(records, problems):
    """The ledger's records (values: kind, ts, subject, detail), replayed."""
    state = {"genesis": None, "threads": {}, "keys": {}, "policy_sets": set(), "since": ""}
    for pos, values in records:
        kind, ts, subject, detail = values
        detail = json.loads(detail)
        where = f"ledger record {pos}"
        if state["genesis"] is None and kind != "genesis":
            problems.append(f"ledger: {where}: the ledger does not begin with its genesis")
            return None
        if kind == "genesis":
            if state["genesis"] is not None:
                problems.append(f"ledger: {where}: a second genesis")
                return None
            state["genesis"] = detail
        elif kind == "thread_created":
            state["threads"][subject] = dict(detail, deleted_at=None, pos=pos)
        elif kind == "thread_deleted" and subject in state["threads"]:
            state["threads"][subject].update(deleted_at=detail["deleted_at"], pos=pos)
        elif kind == "key_created":
            state["keys"][subject] = dict(detail, revoked_at=None, pos=pos)
        elif kind == "key_revoked" and subject in state["keys"]:
            state["keys"][subject].update(revoked_at=detail["revoked_at"], pos=pos)
        elif kind == "policy_set_loaded":
            state["policy_sets"].add(subject)
        if kind == "genesis":
            state["since"] = ts
    if state["genesis"] is None:
        problems.append("ledger: the ledger has no genesis record")
        return None
    return state


def compare(problems, subject, against, fields):
    for name, stored, recorded in fields:
        if stored != recorded:
            problems.append(f"{subject}: its {name} is {stored!r} but {against} says {recorded!r}")


def check_rows(rows, ledger, facts, problems):
    """The tables' rows against the ledger and the events."""
    genesis = ledger["genesis"].get("threads_chained_since", {})
    stored_threads = set()
    for row in rows:
        kind = row["row"]
        if kind == "thread":
            subject = f"thread {row['id']}"
            stored_threads.add(row["id"])
            if row["chained_since"] > 1 and genesis.get(row["id"]) != row["chained_since"]:
                problems.append(f"{subject}: it claims events before the chain, "
                                "which the genesis does not")
            recorded = ledger["threads"].get(row["id"])
            if recorded is None:
                problems.append(f"{subject}: no ledger record created it")
                continue
            compare(problems, subject, f"ledger record {recorded['pos']}", [
                (f, row[f], recorded[f])
                for f in ("client_id", "agent", "cwd", "created_at", "deleted_at")
            ])
        elif kind == "key":
            subject = f"key {row['id']}"
            recorded = ledger["keys"].get(row["id"])
            if recorded is None:
                problems.append(f"{subject}: no ledger record created it")
                continue
            compare(problems, subject, f"ledger record {recorded['pos']}", [
                (f, row[f], recorded[f])
                for f in ("client_id", "digest", "roles", "created_at", "expires_at", "revoked_at")
            ])
        elif kind == "turn":
            subject = f"turn {row['id']}"
            started = facts["started"].get(row["id"])
            if started is None:
                if row["thread_id"] not in genesis:
                    problems.append(f"{subject}: no turn_started event begins it")
                continue
            compare(problems, subject, f"event {started[0]} (turn_started)",
                    [("input", row["input"], started[1])])
            done = facts["completed"].get(row["id"])
            if done is not None:
                stored = None if row["result"] is None else json.loads(row["result"])
                compare(problems, subject, f"event {done[0]} (turn_completed)",
                        [("status", row["status"], done[1]), ("result", stored, done[2])])
            elif row["status"] != "running":
                problems.append(f"{subject}: it ended but no turn_completed event ends it")
        elif kind == "approval":
            subject = f"approval {row['id']}"
            if row["id"] not in facts["requested"]:
                if row["thread_id"] not in genesis:
                    problems.append(f"{subject}: no approval_requested event asked for it")
                continue
            decided = facts["decided"].get(row["id"])
            if decided is not None:
                compare(problems, subject, f"event {decided[0]} (approval_decided)", [
                    ("decision", row["status"], decided[1]),
                    ("decider", row["decided_by"], decided[2]),
                ])
            elif row["status"] != "pending":
                problems.append(f"{subject}: it is decided but no approval_decided event says so")
    for thread, seq, ts, policy_set in facts["decided_under"]:
        if ts >= ledger["since"] and policy_set not in ledger["policy_sets"]:
            problems.append(f"thread {thread}: event {seq} was decided under policy set "
                            f"{policy_set}, which the ledger never recorded as loaded")
    for thread, recorded in ledger["threads"].items():
        if rows and thread not in stored_threads:
            problems.append(f"thread {thread}: ledger record {recorded['pos']} records it but "
                            "the store no longer has it: deleted outright")


def note_event(e, facts):
    if e["kind"] not in ("turn_started", "turn_completed", "approval_requested",
                         "approval_decided", "policy_denied", "policy_audited"):
        return
    payload = json.loads(e["payload"])
    policy_set = payload.get("policy_set") or (payload.get("explanation") or {}).get("policy_set")
    if policy_set:
        facts["decided_under"].append((e["thread_id"], e["seq"], e["ts"], policy_set))
    if e["kind"] == "turn_started":
        facts["started"].setdefault(e["turn_id"], (e["seq"], payload["input"]))
    elif e["kind"] == "turn_completed":
        facts["completed"][e["turn_id"]] = (e["seq"], payload["stop_reason"], payload["result"])
    elif e["kind"] in ("policy_denied", "policy_audited"):
        return
    elif e["kind"] == "approval_requested":
        facts["requested"][payload["approval_id"]] = e["seq"]
    else:
        facts["decided"][payload["approval_id"]] = (e["seq"], payload["outcome"], payload["by"])


def main(argv):
    anchors = {}
    paths = []
    anchor_file = public_key = None
    args = iter(argv)
    for arg in args:
        if arg == "--anchor":
            thread, _, value = next(args).partition("=")
            anchors.setdefault(thread, set()).add(value.lower())
        elif arg == "--anchors":
            anchor_file = next(args)
        elif arg == "--public-key":
            public_key = next(args)
        else:
            paths.append(arg)
    if anchor_file is not None and public_key is None:
        print("--anchors needs --public-key: an anchor's own key proves nothing")
        return 2
    source = open(paths[0], encoding="utf-8") if paths else sys.stdin
    last = {}  # thread_id -> (seq, hash) of its previous line
    seen = {}  # thread_id -> every hash of its chain in the export
    chained = unchained = records = ledger = 0
    rows, ledger_records, problems = [], [], []
    at, ends = {}, {}  # (kind, name, position) -> hash; (kind, name) -> last position
    facts = {"started": {}, "completed": {}, "requested": {}, "decided": {}, "decided_under": []}
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        e = json.loads(line)
        if "row" in e:
            rows.append(e)
            continue
        if "chain" in e:
            why = check_record(e, number, last, seen)
            if why is not None:
                return broken(why)
            at[("chain", e["chain"], e["pos"])] = e["hash"]
            ends[("chain", e["chain"])] = e["pos"]
            if e["chain"] == "audit_ledger":
                ledger += 1
                ledger_records.append((e["pos"], e["values"]))
            else:
                records += 1
            continue
        note_event(e, facts)
        ends[("thread", e["thread_id"])] = e["seq"]
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
        at[("thread", e["thread_id"], e["seq"])] = e["hash"]
        chained += 1
    for thread, wanted in anchors.items():
        missing = wanted - seen.get(thread, set())
        if missing:
            return broken(f"{thread}: anchored hash {sorted(missing)[0]} is not in its chain")
    if ledger_records:
        state = replay_ledger(ledger_records, problems)
        if state is not None and rows:
            check_rows(rows, state, facts, problems)
    checked = None
    if anchor_file is not None:
        checked = check_anchors(anchor_file, public_key, at, ends, problems)
    if problems:
        for problem in problems:
            print(f"BROKEN {problem}")
        return 1
    threads = sum(1 for key in last if not key.startswith("chain:"))
    print(f"ok: {threads} threads, {chained} events chained, {unchained} not chained, "
          f"{records} gateway records chained, {ledger} ledger records chained, "
          f"{len(rows)} rows agree" + ("" if checked is None else f", {checked} anchors hold"))
    return 0


def broken(message):
    print(f"BROKEN {message}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
