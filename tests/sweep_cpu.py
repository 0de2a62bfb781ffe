"""Run the hostile goodput sweep of issue 9 once and print, as JSON, the CPU time it cost this
process and every process it started (run as a script by tests/test_sweep_budget.py, which also
imports the points `spin` and `fail_first` from here: worker processes import them by name).

    python tests/sweep_cpu.py fork|forkserver MAX_SECONDS [JOBS]

`forkserver` keeps a second thread alive, as a Streamlit server has, so the workers come from
the fork server (sim/runs/parallel.py); its CPU and that of the workers it reaped are read from
/proc, the rest from getrusage (this process, and the forked workers it reaped).
"""

import json
import os
import resource
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.runs.budget import Budget, BudgetExceeded, sweep_within  # noqa: E402
from sim.workloads.workload import WorkloadConfig  # noqa: E402

# /playground?n=1000&rate=40.0&prompt=chat%2Blongdoc&p0=chunked&s0=max_num_batched_tokens%3D1,
# swept over 10 rates: ~4 s of CPU per point, where the budget is 10 s for the whole sweep.
WORKLOAD = WorkloadConfig(rate_per_s=40.0, num_requests=1000, prompt="chat+longdoc", seed=0)
CONFIG = with_overrides(SimConfig(policy="chunked"), {"max_num_batched_tokens": 1})
RATES = [round(2.0 + i * 2.0, 3) for i in range(10)]


def spin(seconds: float) -> float:
    """A point that burns CPU and never looks at a budget."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass
    return seconds


def fail_first(i: int) -> float:
    """Point 0 fails at once, the others spin 5 s."""
    if i == 0:
        raise ValueError("point 0 failed")
    return spin(5.0)


def forkserver_cpu() -> float:
    """CPU of the fork server and of the workers it has reaped (0 when there is none)."""
    from multiprocessing import forkserver

    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # u, s, cu, cs


def cpu() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime + forkserver_cpu()


def main() -> None:
    method, max_seconds = sys.argv[1], float(sys.argv[2])
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    if method == "forkserver":
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    warm = WorkloadConfig(rate_per_s=2.0, num_requests=5, seed=0)  # starts the fork server
    sweep_within(warm, SimConfig(), [1.0, 2.0], Budget(), jobs=jobs)
    budget = Budget(max_seconds=max_seconds)
    before, start = cpu(), time.perf_counter()
    try:
        sweep_within(WORKLOAD, CONFIG, RATES, budget, jobs=jobs)
        limit = message = None
    except BudgetExceeded as err:
        limit, message = err.limit, str(err)
    used, wall = cpu() - before, time.perf_counter() - start
    print(
        json.dumps(
            {
                "method": "fork" if threading.active_count() == 1 else "forkserver",
                "limit": limit,
                "message": message,
                "cpu_s": used,
                "wall_s": wall,
            }
        )
    )


if __name__ == "__main__":
    main()
