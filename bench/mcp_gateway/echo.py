"""What the MCP gateway adds to a tool call: PyPI's official `mcp` client calls
server-everything's `echo` N times in a row, directly and through agentplane's
`/mcp/gateway` (in front of the same server), alternating rounds in one run. Prints one
JSON document: per target the per-call latencies' p50/p90/p99 in microseconds, and the
agentplane process's CPU time per gateway call (from /proc/PID/stat).

    python echo.py --direct URL --gateway NAME=URL=PID=KEY [--gateway …]
                   [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    return (int(fields[11]) + int(fields[12])) / TICKS


async def calls(url: str, tool: str, headers: dict[str, str], n: int, mode: str) -> list[float]:
    http = create_mcp_http_client(headers=headers)
    try:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            for _ in range(20):  # warm-up
                await client.call_tool(tool, {"message": "ping"})
            out = []
            for _ in range(n):
                start = time.perf_counter_ns()
                result = await client.call_tool(tool, {"message": "ping"})
                out.append((time.perf_counter_ns() - start) / 1000)
                assert not result.is_error, result
            return out
    finally:
        await http.aclose()


def summary(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]  # noqa: E731
    return {"p50_us": round(pick(0.5)), "p90_us": round(pick(0.9)), "p99_us": round(pick(0.99)), "n": len(samples)}


async def main(args: argparse.Namespace) -> dict:
    direct: list[float] = []
    targets = [g.split("=", 3) for g in args.gateway]
    samples: dict[str, list[float]] = {name: [] for name, _, _, _ in targets}
    cpu: dict[str, float] = {name: 0.0 for name, _, _, _ in targets}
    for round_no in range(args.rounds):
        direct += await calls(args.direct, "echo", {}, args.calls, args.mode)
        # Each round reverses the order of the gateways: the one measured first after
        # the direct calls was slower whatever ran in it (an A/A run showed it).
        order = targets if round_no % 2 == 0 else list(reversed(targets))
        for name, url, pid, key in order:
            before = cpu_seconds(int(pid))
            auth = {"Authorization": f"Bearer {key}"}
            samples[name] += await calls(url, "everything__echo", auth, args.calls, args.mode)
            cpu[name] += cpu_seconds(int(pid)) - before
    d = summary(direct)
    out: dict = {"mode": args.mode, "direct": d}
    for name, _, _, _ in targets:
        g = summary(samples[name])
        out[name] = {
            **g,
            "added_p50_us": g["p50_us"] - d["p50_us"],
            "ratio_p50": round(g["p50_us"] / d["p50_us"], 2),
            "agentplane_cpu_us_per_call": round(cpu[name] * 1e6 / ((args.calls + 20) * args.rounds)),
        }
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--direct", required=True)
    parser.add_argument("--gateway", action="append", required=True, metavar="NAME=URL=PID=KEY")
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", default="legacy", help="legacy (2025-11-25 sessions) or auto")
    print(json.dumps(anyio.run(main, parser.parse_args()), indent=2))
