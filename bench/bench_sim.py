"""Simulator speed: 10,000 chat requests per policy and topology, in a fresh process each.

    python bench/bench_sim.py [--requests 10000] [--rate 20]

For each configuration it prints simulated requests and engine steps per wall second, the wall
time, the process's peak memory (max RSS) and the mean number of running requests (the rate is
chosen so that about 64 run at once on one H100 with Llama-3.1-8B). This machine is shared and
noisy, so every wall time is also given as a ratio to a BASELINE measured in the same run: a fixed
pure-Python loop timed in its own fresh process just before each configuration.

Target on a 2-core machine: each run under 5 s and under 500 MB.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = [  # (policy, topology, extra knobs)
    ("static", "colocated", {"batch_size": "64"}),
    ("prefill-first", "colocated", {}),
    ("chunked", "colocated", {}),
    ("chunked", "colocated", {"max_num_partial_prefills": "0"}),  # vLLM V1
    ("short-first", "colocated", {"aging_s": "5"}),
    ("chunked", "router", {"router": "length", "num_instances": "2"}),
    ("chunked", "disaggregated", {}),
]


def baseline() -> dict:
    """A fixed amount of pure-Python work (the yardstick for this machine's speed right now)."""
    start = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i % 7
    return {"wall_s": time.perf_counter() - start}


def one(policy: str, topology: str, knobs: dict, n: int, rate: float) -> dict:
    """Run one configuration in this process and measure it."""
    sys.path.insert(0, str(ROOT))
    from sim.cluster import simulate
    from sim.config import SimConfig, with_overrides
    from sim.workload import WorkloadConfig, generate

    requests = generate(WorkloadConfig(rate_per_s=rate, num_requests=n, seed=1))
    config = with_overrides(SimConfig(policy=policy), {"topology": topology, **knobs})
    start = time.perf_counter()
    run = simulate(requests, config)
    wall = time.perf_counter() - start
    steps = run.steps
    busy = (steps.end_s - steps.start_s) * steps.batch_size
    return {
        "wall_s": wall,
        "requests": len(run.requests),
        "steps": len(steps),
        "segments": len(run.segments),
        "mean_running": float(busy.sum() / run.meta["duration_s"]),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def in_subprocess(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=20.0, help="arrivals per second")
    parser.add_argument("--one", nargs=3, metavar=("POLICY", "TOPOLOGY", "KNOBS_JSON"))
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    if args.baseline:
        print(json.dumps(baseline()))
        return
    if args.one:
        policy, topology, knobs = args.one
        print(json.dumps(one(policy, topology, json.loads(knobs), args.requests, args.rate)))
        return
    print(f"{args.requests} chat requests at {args.rate:g} req/s, Llama-3.1-8B on H100-SXM")
    header = (
        f"{'policy':14s} {'topology':14s} {'knobs':28s} {'wall s':>7s} {'x base':>7s} "
        f"{'req/s':>8s} {'steps/s':>8s} {'steps':>7s} {'running':>7s} {'peak MB':>8s}"
    )
    print(header)
    for policy, topology, knobs in CONFIGS:
        base = in_subprocess(["--baseline"])["wall_s"]
        r = in_subprocess(["--requests", str(args.requests), "--rate", str(args.rate),
                           "--one", policy, topology, json.dumps(knobs)])  # fmt: skip
        label = ",".join(f"{k}={v}" for k, v in knobs.items()) or "-"
        print(
            f"{policy:14s} {topology:14s} {label:28s} {r['wall_s']:7.2f} "
            f"{r['wall_s'] / base:7.1f} {r['requests'] / r['wall_s']:8.0f} "
            f"{r['steps'] / r['wall_s']:8.0f} {r['steps']:7d} {r['mean_running']:7.1f} "
            f"{r['peak_mb']:8.0f}"
        )
    print("x base = wall time / a fixed pure-Python loop timed just before, in a fresh process")


if __name__ == "__main__":
    main()
