"""The capacity knee (issue 30, item 4): does the simulator saturate where the real server does?

Notable features
- Input: the per-run CSV of `bench/bench_fidelity_real.py --csv FILE` (one row per public run,
  with its measured and simulated mean TTFT, TPOT and E2E). No new simulation here.
- A SWEEP is one deployment (GPU, model, engine, parallelism, prompt and output lengths)
  measured as a closed loop at several client counts. A closed loop of c clients that each wait
  E2E seconds per request serves c / E2E requests per second (Little's law), measured and
  simulated alike.
- Some deployments were measured more than once at one client count (the silicon sample holds
  one campaign from two source files): those rates are averaged first, so each client count is
  ONE point of the curve. (Scored as separate points, two repeats at the largest count made a
  curve look flat whatever it did between its two largest counts.)
- The sustainable rate is the highest of those rates over the sweep: past it, more clients only
  queue. It is decided only where the measured curve has flattened: its two largest client
  counts within PLATEAU of each other. A curve still rising at its last point never reached
  its knee, and the script says so instead of scoring it.
- Prints, per sweep, the measured and simulated sustainable rates and the signed error (+ = the
  simulator sustains more), then how many decided sweeps fall within TARGET (10%).
- And WHY a knee is where it is. At the largest client count, Little's law on the part of a
  request after its first token (rate c / E2E, time E2E - TTFT) gives how many requests are
  decoding at once: c x (E2E - TTFT) / E2E, measured and simulated. A saturated server's rate
  is that batch over its time per output token, so a missed knee is either the batch (how
  many requests the KV cache keeps: the two counts differ by more than BATCH_GAP) or the step
  time at that batch (they agree). The script names which.

Run: .venv/bin/python bench/bench_fidelity_real.py --data DIR --csv runs.csv [--step-costs ...]
     .venv/bin/python bench/bench_knee.py runs.csv [runs_kernels.csv ...]
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

PLATEAU = 0.10  # the last two points' measured rates within 10%: the knee was reached
TARGET = 0.10  # issue 30: the simulated sustainable rate within 10% of the measured one
# Decoding batches at the top of a sweep further apart than this: the knee is the KV cache's
# (how many requests it keeps), not the step time's. 15%: on 10 of the 13 decided public sweeps
# (kernel tables) the two counts are within 0-9% of each other; the two H100 misses it names
# KV-bound are +57% and +70% apart. (H200 Llama-3.1-70B FP8 TP1 is -17% apart and its knee -1%
# off: a smaller simulated batch and a faster simulated step cancel there.)
BATCH_GAP = 0.15
SWEEP_KEYS = ("gpu", "model", "engine", "parallel", "isl", "osl")


Point = tuple  # (clients, measured E2E s, simulated E2E s, measured TTFT s, simulated TTFT s)


def _seconds(r: dict, key: str) -> float:
    """A CSV cell as seconds; NaN where it is missing or not a number."""
    try:
        return float(r[key])
    except (KeyError, ValueError):
        return math.nan


def sweeps(rows: list[dict]) -> dict[tuple, list[Point]]:
    """Closed-loop rows grouped by deployment: sorted (clients, measured E2E, simulated E2E,
    measured TTFT, simulated TTFT); the TTFTs NaN where the CSV has none."""
    out: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if r.get("kind") != "closed-loop":
            continue
        try:
            clients = int(r["concurrency"])
        except (KeyError, ValueError):
            continue
        e2e = (_seconds(r, "e2e_measured_mean"), _seconds(r, "e2e_predicted_mean"))
        ttft = (_seconds(r, "ttft_measured_mean"), _seconds(r, "ttft_predicted_mean"))
        if clients > 0 and all(math.isfinite(x) and x > 0 for x in e2e):
            out[tuple(r[k] for k in SWEEP_KEYS)].append((clients, *e2e, *ttft))
    return {k: sorted(v) for k, v in out.items() if len({p[0] for p in v}) >= 3}


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def rates(points: list[Point]) -> list[tuple[int, float, float]]:
    """(clients, measured, simulated requests/s) per client count, in order; repeated
    measurements at one count averaged."""
    by_clients: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for c, e2e, sim, *_ in points:
        by_clients[c].append((c / e2e, c / sim))
    return [
        (c, _mean([m for m, _ in v]), _mean([s for _, s in v]))
        for c, v in sorted(by_clients.items())
    ]


def decoding_at_top(points: list[Point]) -> tuple[float, float]:
    """Requests past their first token at the largest client count, measured and simulated:
    Little's law, c / E2E requests a second each spending E2E - TTFT there (repeats averaged;
    NaN without TTFTs)."""
    top = max(p[0] for p in points)
    at_top = [p for p in points if p[0] == top]

    def batch(e2e: float, ttft: float) -> float:
        return top * (e2e - ttft) / e2e

    return (
        _mean([batch(p[1], p[3]) for p in at_top]),
        _mean([batch(p[2], p[4]) for p in at_top]),
    )


def knee(points: list[Point]) -> dict:
    """Sustainable rates (requests/s) of one sweep; `decided` False where the measured curve
    is still rising at its largest client count."""
    curve = rates(points)
    measured = [m for _, m, _ in curve]
    simulated = [s for _, _, s in curve]
    last, before = measured[-1], measured[-2]
    decided = abs(last - before) <= PLATEAU * max(last, before)
    m, s = max(measured), max(simulated)
    batch_measured, batch_simulated = decoding_at_top(points)
    # (one output token: nothing decodes after the first, no batch to compare)
    batch_gap = (
        (batch_simulated - batch_measured) / batch_measured if batch_measured > 0 else math.nan
    )
    return {
        "clients": [c for c, _, _ in curve],
        "measured_rps": m,
        "simulated_rps": s,
        "error": (s - m) / m,
        "decided": decided,
        "batch_measured": batch_measured,
        "batch_simulated": batch_simulated,
        # what sets a missed knee apart: the batch the KV cache keeps, or the step at that batch
        "cause": (
            "unknown (no TTFTs)"
            if not math.isfinite(batch_gap)
            else "KV cache (batch)"
            if abs(batch_gap) > BATCH_GAP
            else "step time"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="per-run CSVs of bench_fidelity_real.py --csv")
    args = ap.parse_args(argv)
    for path in args.csv:
        with Path(path).open(newline="") as f:
            found = sweeps(list(csv.DictReader(f)))
        print(f"\n{path}: {len(found)} sweeps of 3 or more client counts")
        print(
            f"{'deployment':62s} {'clients':>12s} {'measured':>9s} {'simulated':>9s}  error"
            "   decoding at the top (measured/simulated): the miss is in"
        )
        decided = within = 0
        for key, points in sorted(found.items()):
            k = knee(points)
            name = " ".join(str(x) for x in key)
            span = f"{k['clients'][0]}-{k['clients'][-1]}"
            verdict = f"{100 * k['error']:+5.0f}%" if k["decided"] else "  still rising: undecided"
            if k["decided"]:
                verdict += f"   {k['batch_measured']:5.1f} / {k['batch_simulated']:5.1f}"
                if abs(k["error"]) > TARGET:
                    verdict += f": {k['cause']}"
            print(
                f"{name[:62]:62s} {span:>12s} {k['measured_rps']:9.2f} {k['simulated_rps']:9.2f}"
                f"  {verdict}"
            )
            if k["decided"]:
                decided += 1
                within += abs(k["error"]) <= TARGET
        print(
            f"sustainable rate within {100 * TARGET:.0f}%: {within} of {decided} decided sweeps "
            f"({len(found) - decided} undecided)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
