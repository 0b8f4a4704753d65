"""Reads wrk's output for the gateway benchmark (run.sh) and summarizes it.

    summary.py --parse WRK_OUTPUT RUN CONCURRENCY TARGET   # one TSV line
    summary.py --summarize RESULTS.tsv                     # a Markdown table

The summary takes, per concurrency and target, the median over runs of requests/s, p50
and p99; "added" is the target's median minus the direct upstream's median at the same
concurrency, and the last tables compare agentplane's added p50 with LiteLLM's and
Portkey's.
"""

from __future__ import annotations

import csv
import re
import statistics
import sys
from collections import defaultdict

UNITS = {"us": 1.0, "ms": 1_000.0, "s": 1_000_000.0}


def micros(text: str) -> float:
    match = re.fullmatch(r"([0-9.]+)(us|ms|s)", text.strip())
    if not match:
        raise SystemExit(f"summary.py: not a wrk duration: {text!r}")
    return float(match.group(1)) * UNITS[match.group(2)]


def parse(path: str, run: str, concurrency: str, target: str) -> None:
    text = open(path, encoding="utf-8").read()
    percentiles = dict(re.findall(r"^\s+(50|99)%\s+(\S+)\s*$", text, re.MULTILINE))
    rps = re.search(r"^Requests/sec:\s+([0-9.]+)", text, re.MULTILINE)
    if not rps or "50" not in percentiles or "99" not in percentiles:
        raise SystemExit(f"summary.py: {path} is not wrk --latency output:\n{text}")
    errors = 0
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non_2xx:
        errors += int(non_2xx.group(1))
    sockets = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text)
    if sockets:
        errors += sum(int(n) for n in sockets.groups())
    print(
        f"{run}\t{concurrency}\t{target}\t{float(rps.group(1)):.0f}\t"
        f"{micros(percentiles['50']):.0f}\t{micros(percentiles['99']):.0f}\t{errors}"
    )


def show(us: float) -> str:
    if abs(us) >= 1_000_000:
        return f"{us / 1_000_000:.2f} s"
    if abs(us) >= 1_000:
        return f"{us / 1_000:.2f} ms"
    return f"{us:.0f} µs"


def summarize(path: str) -> None:
    rows = list(csv.DictReader(open(path, encoding="utf-8"), delimiter="\t"))
    runs = len({r["run"] for r in rows})
    by_point: dict[tuple[int, str], list[dict]] = defaultdict(list)
    for row in rows:
        by_point[(int(row["concurrency"]), row["target"])].append(row)

    def median(c: int, target: str, field: str) -> float | None:
        values = [float(r[field]) for r in by_point.get((c, target), [])]
        return statistics.median(values) if values else None

    print(f"Medians of {runs} run(s); added = target − direct at the same concurrency.\n")
    print("| concurrency | target | req/s | p50 | p99 | added p50 | added p99 | errors |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    concurrencies = sorted({c for c, _ in by_point})
    order = ["direct", "agentplane", "litellm", "portkey"]
    for c in concurrencies:
        base50, base99 = median(c, "direct", "p50_us"), median(c, "direct", "p99_us")
        for target in order:
            if (c, target) not in by_point:
                continue
            p50, p99 = median(c, target, "p50_us"), median(c, target, "p99_us")
            rps = median(c, target, "rps")
            errors = sum(int(r["errors"]) for r in by_point[(c, target)])
            added = (
                (show(p50 - base50), show(p99 - base99))
                if target != "direct" and base50 is not None
                else ("–", "–")
            )
            print(
                f"| {c} | {target} | {rps:,.0f} | {show(p50)} | {show(p99)} | "
                f"{added[0]} | {added[1]} | {errors} |"
            )
    for peer, name in (("litellm", "LiteLLM"), ("portkey", "Portkey")):
        lines = []
        for c in concurrencies:
            base = median(c, "direct", "p50_us")
            ours, theirs = median(c, "agentplane", "p50_us"), median(c, peer, "p50_us")
            if None in (base, ours, theirs):
                continue
            a, b = ours - base, theirs - base
            ratio = f"{b / a:.0f}× lower" if a > 0 else "n/a (agentplane added ≤ 0)"
            rps_ratio = median(c, "agentplane", "rps") / max(median(c, peer, "rps"), 1e-9)
            lines.append(f"| {c} | {show(a)} | {show(b)} | {ratio} | {rps_ratio:.1f}× the req/s |")
        if lines:
            print(f"\n| concurrency | agentplane added p50 | {name} added p50 | ratio | throughput ratio |")
            print("| --- | --- | --- | --- | --- |")
            print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--parse":
        parse(*sys.argv[2:])
    elif len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        summarize(sys.argv[2])
    else:
        raise SystemExit(__doc__)
