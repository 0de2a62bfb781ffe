"""Goodput sweeps side by side: the same sweep with 1, 2, ... worker processes
(sim/runs/parallel.py).

    python bench/bench_sweep.py [--jobs 1,2] [--requests 2000] [--rates 1:12:1] [--backend ray]

Each setting runs `python -m sim sweep --workload FILE --rate A:B:STEP --jobs N` as a whole
process (imports and the workers' start included), on a chat workload written to a temporary
CSV; `--backend ray` adds a run on the Ray cluster `ray start --head` runs here (or
$RAY_ADDRESS's; joining it and starting its workers included). It prints the wall time, the
speed-up against --jobs 1 measured in the same run (the median of --repeats alternating runs),
and checks that every setting printed the same table.
The speed-up is bounded by the cores this process may use (`os.sched_getaffinity`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rates", default="1:12:1", help="the sweep's A:B:STEP (req/s)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--backend",
        choices=("processes", "ray"),
        default="processes",
        help="ray: also sweep on the Ray cluster here",
    )
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from sim.workloads.trace_import import save_csv
    from sim.workloads.workload import WorkloadConfig, generate

    settings = {f"--jobs {int(j)}": ["--jobs", str(int(j))] for j in args.jobs.split(",")}
    if args.backend == "ray":
        settings["--backend ray"] = ["--backend", "ray"]
    first = next(iter(settings))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "chat.csv"
        save_csv(generate(WorkloadConfig(num_requests=args.requests, rate_per_s=4.0, seed=7)), path)
        command = [
            sys.executable,
            "-m",
            "sim",
            "sweep",
            "--workload",
            str(path),
            "--rate",
            args.rates,
            "--slo",
            "distserve-chatbot-66b",
        ]
        walls: dict[str, list[float]] = {label: [] for label in settings}
        tables = {}
        for _ in range(args.repeats):
            for label, extra in settings.items():
                start = time.perf_counter()
                out = subprocess.run(
                    [*command, *extra], cwd=ROOT, check=True, capture_output=True, text=True
                ).stdout
                walls[label].append(time.perf_counter() - start)
                tables.setdefault(label, out)
                assert out == tables[first], f"{label} printed another table"
    cores = len(os.sched_getaffinity(0))
    print(f"sweep of {args.requests} chat requests at rates {args.rates}, {cores} cores here")
    base = statistics.median(walls[first])
    for label, runs in walls.items():
        wall = statistics.median(runs)
        print(
            f"{label}: {wall:6.2f} s wall (median of {args.repeats}), "
            f"speed-up {base / wall:4.2f}x vs {first}"
        )
    print("every setting printed the same table")


if __name__ == "__main__":
    main()
