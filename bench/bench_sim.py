"""Simulator speed per policy and topology, event speed vs step by step, in a fresh process each.

    python bench/bench_sim.py [--requests 10000] [--rate 5]       # generated chat requests
    python bench/bench_sim.py --workload ../shared/data/traces/AzureLLMInferenceTrace_conv.csv \
        --requests 10000                                          # the first N of a trace
    python bench/bench_sim.py --modes fast                        # skip the slow step-by-step

For each configuration and mode (`fast`: runs of decode-only steps taken at once, the default of
`simulate`; `step`: `simulate(step_by_step=True)`, one engine step at a time) it prints the
simulated requests and engine steps per second of CPU time spent in `simulate` (the workload is
made and the result tables are built outside the timing), the process's peak memory and the
mean number of running requests. This machine is shared and noisy: every time is also given as
a ratio to a BASELINE measured in the same run (a fixed pure-Python loop, in its own fresh
process just before each measurement), and `speed-up` is step/fast of those ratios.

Whole-process figures (imports, loading the trace, the tables, the JSON) are another matter:
time `python -m sim run --workload FILE --json` against `... --step-by-step` for those.
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
    ("vllm", "colocated", {}),  # the default: vLLM V1 with prefix caching
    ("vllm-v0", "colocated", {}),
    ("prefill-first", "colocated", {}),
    ("static", "colocated", {"batch_size": "64"}),
    ("short-first", "colocated", {"aging_s": "5"}),
    ("sglang", "colocated", {}),
    ("vllm", "router", {"router": "least-loaded", "num_instances": "2"}),
    ("vllm-v0", "router", {"router": "length", "num_instances": "2"}),
    ("vllm", "disaggregated", {}),
]


def baseline() -> dict:
    """A fixed amount of pure-Python work (the yardstick for this machine's speed right now)."""
    start = time.process_time()
    total = 0
    for i in range(3_000_000):
        total += i % 7
    return {"cpu_s": time.process_time() - start}


def one(policy: str, topology: str, knobs: dict, args) -> dict:
    """Run one configuration in this process and measure it."""
    sys.path.insert(0, str(ROOT))
    from sim.cluster import simulate
    from sim.config import SimConfig, with_overrides
    from sim.workload import WorkloadConfig, generate, load_workload

    if args.workload:
        requests = load_workload(args.workload)[: args.requests]
    else:
        requests = generate(WorkloadConfig(rate_per_s=args.rate, num_requests=args.requests,
                                           seed=1))  # fmt: skip
    config = with_overrides(SimConfig(policy=policy), {"topology": topology, **knobs})
    start = time.process_time()
    run = simulate(requests, config, step_by_step=args.mode == "step")
    cpu = time.process_time() - start
    steps = run.steps
    busy = (steps.end_s - steps.start_s) * steps.batch_size
    return {
        "cpu_s": cpu,
        "requests": len(run.requests),
        "steps": len(steps),
        "mean_running": float(busy.sum() / max(run.meta["duration_s"], 1e-9)),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def in_subprocess(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=5.0, help="arrivals per second")
    parser.add_argument("--workload", help="a trace (CSV or .jsonl): its first --requests rows")
    parser.add_argument("--modes", default="fast,step", help="fast, step or fast,step")
    parser.add_argument("--only", help="policy[:topology] to run (default: all)")
    parser.add_argument("--one", nargs=3, metavar=("POLICY", "TOPOLOGY", "KNOBS_JSON"))
    parser.add_argument("--mode", default="fast", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", action="store_true")
    args = parser.parse_args()
    if args.baseline:
        print(json.dumps(baseline()))
        return
    if args.one:
        policy, topology, knobs = args.one
        print(json.dumps(one(policy, topology, json.loads(knobs), args)))
        return
    what = args.workload or f"chat requests at {args.rate:g} req/s"
    print(f"{args.requests} {what}, Llama-3.1-8B on H100-SXM; CPU time in simulate()")
    print(f"{'policy':14s} {'topology':14s} {'mode':5s} {'cpu s':>7s} {'x base':>7s} "
          f"{'req/s':>8s} {'steps/s':>9s} {'steps':>8s} {'running':>7s} {'peak MB':>8s} "
          f"{'speed-up':>8s}")  # fmt: skip
    modes = args.modes.split(",")
    common = ["--requests", str(args.requests), "--rate", str(args.rate)]
    if args.workload:
        common += ["--workload", args.workload]
    for policy, topology, knobs in CONFIGS:
        if args.only and args.only not in (policy, f"{policy}:{topology}"):
            continue
        ratio = {}
        for mode in modes:
            base = in_subprocess(["--baseline"])["cpu_s"]
            r = in_subprocess([*common, "--mode", mode, "--one", policy, topology,
                               json.dumps(knobs)])  # fmt: skip
            ratio[mode] = r["cpu_s"] / base
            speed = f"{ratio['step'] / ratio['fast']:7.1f}x" if len(ratio) == 2 else ""
            print(
                f"{policy:14s} {topology:14s} {mode:5s} {r['cpu_s']:7.2f} {ratio[mode]:7.1f} "
                f"{r['requests'] / r['cpu_s']:8.0f} {r['steps'] / r['cpu_s']:9.0f} "
                f"{r['steps']:8d} {r['mean_running']:7.1f} {r['peak_mb']:8.0f} {speed:>8s}",
                flush=True,
            )
    print("x base = CPU time / a fixed pure-Python loop timed just before, in a fresh process;")
    print("speed-up = step-by-step / event speed, each against its own baseline")


if __name__ == "__main__":
    main()
