"""Sequential turns against several `serve` processes, rounds alternating: for each
NAME=BASE=PID=CWD, TURNS turns per round (create a thread, POST a turn, read its SSE stream
to the end); prints turns/s and the process's CPU per turn (utime + stime from
/proc/PID/stat). Standard library only."""

import argparse
import http.client
import json
import os
import time
import urllib.parse

TICKS = os.sysconf("SC_CLK_TCK")


def cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def turn(conn: http.client.HTTPConnection, cwd: str) -> None:
    headers = {"content-type": "application/json", "x-client-id": "bench"}
    conn.request("POST", "/v1/threads", json.dumps({"agent": "chat", "cwd": cwd}), headers)
    created = json.loads(conn.getresponse().read())
    assert "id" in created, created
    thread = created["id"]
    conn.request("POST", f"/v1/threads/{thread}/turns", json.dumps({"input": "hi"}), headers)
    body = conn.getresponse().read()
    assert b"turn_completed" in body, body[:300]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("targets", nargs="+")
    args = parser.parse_args()
    targets = [t.split("=", 3) for t in args.targets]
    totals = {name: [0.0, 0.0] for name, _, _, _ in targets}
    for _ in range(args.rounds):
        for name, base, pid, cwd in targets:
            conn = http.client.HTTPConnection(urllib.parse.urlsplit(base).netloc, timeout=60)
            for _ in range(10):
                turn(conn, cwd)
            before, started = cpu(int(pid)), time.perf_counter()
            for _ in range(args.turns):
                turn(conn, cwd)
            totals[name][0] += time.perf_counter() - started
            totals[name][1] += cpu(int(pid)) - before
            conn.close()
    n = args.turns * args.rounds
    for name, (seconds, cpu_seconds) in totals.items():
        print(f"{name:15} {n / seconds:7.1f} turns/s   {cpu_seconds * 1e6 / n:7.0f} µs CPU per turn")


if __name__ == "__main__":
    main()
