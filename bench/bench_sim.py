"""Simulator speed per policy and topology, event speed vs step by step, in a fresh process each.

    python bench/bench_sim.py [--requests 10000] [--rate 5]       # generated chat requests
    python bench/bench_sim.py --workload ../shared/data/traces/AzureLLMInferenceTrace_conv.csv \
        --requests 10000                                          # the first N of a trace
    python bench/bench_sim.py --modes fast                        # skip the slow step-by-step
    python bench/bench_sim.py --cli --workload /tmp/az10k.csv --pairs 5   # whole processes

For each configuration and mode (`fast`: runs of decode-only steps taken at once, the default of
`simulate`; `step`: `simulate(step_by_step=True)`, one engine step at a time) it prints the
simulated requests and engine steps per second of CPU time spent in `simulate` (the workload is
made outside the timing; the run's tables come out of `simulate` as numpy columns and become
DataFrames on first use, after the timing), the process's peak memory and the mean number of
running requests. This machine is shared and noisy: every time is also given as a ratio to a
BASELINE measured in the same run (a fixed pure-Python loop, in its own fresh process just
before each measurement), and `speed-up` is step/fast of those ratios.

`--cli` times whole processes instead (imports, loading the trace, the summary, the JSON):
`python -m sim run --workload FILE --json` against the same with `--step-by-step`, in turn,
`--pairs` times; it prints each one's median CPU (user + system of the finished child, from
getrusage), wall time and peak RSS, and the median of the pairwise CPU ratios.
"""

from __future__ import annotations

import argparse
import json
import os
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
    from sim.cluster.topologies import simulate
    from sim.config import SimConfig, with_overrides
    from sim.workloads.workload import WorkloadConfig, generate, load_workload

    if args.workload:
        requests = load_workload(args.workload)[: args.requests]
    else:
        requests = generate(
            WorkloadConfig(rate_per_s=args.rate, num_requests=args.requests, seed=1)
        )
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


def cli_pairs(workload: str, pairs: int) -> None:
    """Whole `python -m sim run --json` processes, event speed and step by step in turn."""
    import statistics

    # As a user's Python runs it: with the bytecode cache (a sandbox that sets
    # PYTHONDONTWRITEBYTECODE recompiles every sim/ module in every process, ~0.1 s each time;
    # the warm-up below writes the cache).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def timed(extra: list[str]) -> dict:
        start = time.perf_counter()
        command = [sys.executable, "-m", "sim", "run", "--workload", workload, "--json", *extra]
        child = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, env=env)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
        if status:
            raise SystemExit(f"python -m sim run failed ({status})")
        return {
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "wall_s": wall,
            "peak_mb": usage.ru_maxrss / 1024,
        }

    rows: dict[str, list[dict]] = {"fast": [], "step": []}
    timed([])  # a warm-up (file and bytecode caches), not counted
    for _ in range(pairs):
        rows["fast"].append(timed([]))
        rows["step"].append(timed(["--step-by-step"]))
    print(f"python -m sim run --workload {workload} --json  ({pairs} pairs, medians)")
    for mode, runs in rows.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        spread = f"{min(r['cpu_s'] for r in runs):.2f}-{max(r['cpu_s'] for r in runs):.2f}"
        print(
            f"  {mode:5s} cpu {med['cpu_s']:6.2f} s ({spread})  wall {med['wall_s']:6.2f} s"
            f"  peak {med['peak_mb']:5.0f} MB"
        )
    ratios = [s["cpu_s"] / f["cpu_s"] for f, s in zip(rows["fast"], rows["step"], strict=True)]
    print(
        f"  step / fast CPU, pair by pair: median {statistics.median(ratios):.2f}x "
        f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)"
    )


def in_subprocess(args: list[str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, *args], capture_output=True, text=True, check=True
    )
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
    parser.add_argument(
        "--cli",
        action="store_true",
        help="time whole `python -m sim run --json` processes (needs --workload)",
    )
    parser.add_argument("--pairs", type=int, default=5, help="--cli: pairs of processes")
    args = parser.parse_args()
    if args.cli:
        if not args.workload:
            raise SystemExit("--cli needs --workload FILE (all its rows are simulated)")
        cli_pairs(args.workload, args.pairs)
        return
    if args.baseline:
        print(json.dumps(baseline()))
        return
    if args.one:
        policy, topology, knobs = args.one
        print(json.dumps(one(policy, topology, json.loads(knobs), args)))
        return
    what = args.workload or f"chat requests at {args.rate:g} req/s"
    print(f"{args.requests} {what}, Llama-3.1-8B on H100-SXM; CPU time in simulate()")
    print(
        f"{'policy':14s} {'topology':14s} {'mode':5s} {'cpu s':>7s} {'x base':>7s} "
        f"{'req/s':>8s} {'steps/s':>9s} {'steps':>8s} {'running':>7s} {'peak MB':>8s} "
        f"{'speed-up':>8s}"
    )
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
            r = in_subprocess(
                [*common, "--mode", mode, "--one", policy, topology, json.dumps(knobs)]
            )
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
