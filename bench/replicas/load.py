#!/usr/bin/env python3
"""Runs TURNS turns from CLIENTS concurrent clients against one or more replicas
(round-robin: turn i goes to replica i mod n), each on a thread of its own: create the
thread, POST the turn, read its SSE stream to `turn_completed`. Prints
`turns,seconds,turns_per_s`. Standard library only; one keep-alive connection per
client and replica."""

import argparse
import http.client
import json
import threading
import time
import urllib.parse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=400)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("bases", nargs="+")
    args = parser.parse_args()
    hosts = [urllib.parse.urlsplit(b).netloc for b in args.bases]
    counter = iter(range(args.turns))
    lock = threading.Lock()
    failures = []

    def next_turn():
        with lock:
            return next(counter, None)

    def client():
        conns = {}
        while True:
            i = next_turn()
            if i is None:
                return
            host = hosts[i % len(hosts)]
            conn = conns.get(host) or http.client.HTTPConnection(host, timeout=60)
            conns[host] = conn
            try:
                run_turn(conn, i)
            except Exception as e:  # noqa: BLE001 - a failed turn is reported, not fatal
                failures.append(repr(e))
                conn.close()
                conns.pop(host, None)

    def run_turn(conn, i):
        headers = {"Content-Type": "application/json", "X-Client-ID": "bench"}
        conn.request("POST", "/v1/threads",
                     json.dumps({"agent": "chat", "cwd": "/tmp", "title": f"t{i}"}), headers)
        response = conn.getresponse()
        body = response.read()
        if response.status != 201:
            raise RuntimeError(f"thread: {response.status} {body[:200]!r}")
        thread = json.loads(body)["id"]
        conn.request("POST", f"/v1/threads/{thread}/turns", json.dumps({"input": "hi"}), headers)
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"turn: {response.status} {response.read()[:200]!r}")
        completed = False
        while True:
            line = response.readline()
            if not line:
                break
            if line.startswith(b"event: turn_completed"):
                completed = True
        if not completed:
            raise RuntimeError("the stream ended without turn_completed")

    workers = [threading.Thread(target=client) for _ in range(args.clients)]
    start = time.monotonic()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    seconds = time.monotonic() - start
    done = args.turns - len(failures)
    if failures:
        import sys
        print(f"{len(failures)} failed, e.g. {failures[0]}", file=sys.stderr)
    print(f"{done},{seconds:.2f},{done / seconds:.1f}")


if __name__ == "__main__":
    main()
