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
SWEEP_KEYS = ("gpu", "model", "engine", "parallel", "isl", "osl")


def sweeps(rows: list[dict]) -> dict[tuple, list[tuple[int, float, float]]]:
    """Closed-loop rows grouped by deployment: sorted (clients, measured E2E, simulated E2E)."""
    out: dict[tuple, list] = defaultdict(list)
    for r in rows:
        if r.get("kind") != "closed-loop":
            continue
        try:
            point = (int(r["concurrency"]), float(r["e2e_measured_mean"]))
            simulated = float(r["e2e_predicted_mean"])
        except (KeyError, ValueError):
            continue
        if all(math.isfinite(x) and x > 0 for x in (*point, simulated)):
            out[tuple(r[k] for k in SWEEP_KEYS)].append((*point, simulated))
    return {k: sorted(v) for k, v in out.items() if len({c for c, _, _ in v}) >= 3}


def rates(points: list[tuple[int, float, float]]) -> list[tuple[int, float, float]]:
    """(clients, measured, simulated requests/s) per client count, in order; repeated
    measurements at one count averaged."""
    by_clients: dict[int, list[tuple[float, float]]] = defaultdict(list)
    for c, e2e, sim in points:
        by_clients[c].append((c / e2e, c / sim))
    return [
        (c, sum(m for m, _ in v) / len(v), sum(s for _, s in v) / len(v))
        for c, v in sorted(by_clients.items())
    ]


def knee(points: list[tuple[int, float, float]]) -> dict:
    """Sustainable rates (requests/s) of one sweep; `decided` False where the measured curve
    is still rising at its largest client count."""
    curve = rates(points)
    measured = [m for _, m, _ in curve]
    simulated = [s for _, _, s in curve]
    last, before = measured[-1], measured[-2]
    decided = abs(last - before) <= PLATEAU * max(last, before)
    m, s = max(measured), max(simulated)
    return {
        "clients": [c for c, _, _ in curve],
        "measured_rps": m,
        "simulated_rps": s,
        "error": (s - m) / m,
        "decided": decided,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", nargs="+", help="per-run CSVs of bench_fidelity_real.py --csv")
    args = ap.parse_args(argv)
    for path in args.csv:
        with Path(path).open(newline="") as f:
            found = sweeps(list(csv.DictReader(f)))
        print(f"\n{path}: {len(found)} sweeps of 3 or more client counts")
        print(f"{'deployment':62s} {'clients':>12s} {'measured':>9s} {'simulated':>9s}  error")
        decided = within = 0
        for key, points in sorted(found.items()):
            k = knee(points)
            name = " ".join(str(x) for x in key)
            span = f"{k['clients'][0]}-{k['clients'][-1]}"
            verdict = f"{100 * k['error']:+5.0f}%" if k["decided"] else "  still rising: undecided"
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
