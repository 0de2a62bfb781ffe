"""Goodput: the highest arrival rate at which enough requests meet their latency targets.

Notable features
- `sweep_rates` replays the SAME requests at several arrival rates (a generated workload is
  regenerated at each rate with the same seed; an imported trace has its arrival times scaled),
  so only the load changes between points.
- Goodput is DistServe's: the highest swept rate whose SLO attainment (share of requests meeting
  BOTH the TTFT and the TPOT target) is at least 90%, with every lower rate passing too; per GPU
  it is divided by the GPUs the topology uses.
- `progress(done, total)` is called after each point, for a progress bar.
- Points run side by side with `jobs` (local processes) or on a Ray cluster (sim/runs/parallel.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from sim.cluster.topologies import simulate
from sim.config import SimConfig
from sim.core.request import RequestSpec
from sim.runs.latency import percentiles
from sim.runs.parallel import map_points
from sim.runs.slo import attainment, goodput, goodput_per_gpu
from sim.workloads.workload import WorkloadConfig, generate, scale_to_rate, with_rate

Workload = WorkloadConfig | Sequence[RequestSpec]


def parse_rates(text: str) -> list[float]:
    """'A:B:STEP' -> [A, A+STEP, ..., B] (requests per second); ValueError says what is wrong."""
    parts = text.split(":")
    try:
        start, stop, step = (float(p) for p in parts)
    except ValueError:
        raise ValueError(f"--rate must look like A:B:STEP, e.g. 1:10:1; got {text!r}") from None
    if not all(np.isfinite((start, stop, step))):
        raise ValueError(f"--rate needs finite numbers A:B:STEP, e.g. 1:10:1; got {text!r}")
    if not (0 < start <= stop and step > 0):
        raise ValueError(f"--rate needs 0 < A <= B and STEP > 0; got {text!r}")
    # Counted as a float first: (B - A) / STEP can overflow to infinity (1:1e308:1e-300), and
    # int(inf) would be an OverflowError, not a sentence.
    points = np.floor((stop - start) / step + 1e-9) + 1
    if not (np.isfinite(points) and points <= 200):
        raise ValueError(f"--rate {text!r} gives {points:.3g} points; use at most 200")
    count = int(points)
    return [round(start + i * step, 10) for i in range(count)]


def requests_at_rate(workload: Workload, rate_per_s: float) -> list[RequestSpec]:
    """The workload's requests arriving at `rate_per_s` on average."""
    if isinstance(workload, WorkloadConfig):
        return generate(with_rate(workload, rate_per_s))
    return scale_to_rate(list(workload), rate_per_s)


def sweep_point(workload: Workload, config: SimConfig, rate: float, target: float) -> dict:
    """One row of a sweep: attainment and latency percentiles at one arrival rate."""
    return sweep_row(simulate(requests_at_rate(workload, rate), config), config, rate, target)


def sweep_row(run, config: SimConfig, rate: float, target: float) -> dict:
    """The sweep table's row for `run`, the workload replayed at `rate`."""
    ttft, tpot = config.slo.ttft_slo_s, config.slo.tpot_slo_s
    q = run.requests
    return {
        "rate_per_s": rate,
        "attainment": attainment(q, ttft, tpot),
        "ttft_p90_s": percentiles(q.ttft_s, (90,))["p90"],
        "tpot_p90_s": percentiles(q.tpot_s, (90,))["p90"],
        "num_gpus": run.meta["num_gpus"],
        "meets_target": attainment(q, ttft, tpot) >= target,
    }


def sweep_rates(
    workload: Workload,
    config: SimConfig,
    rates: Sequence[float],
    target: float = 0.9,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
    backend: str = "processes",
    address: str | None = None,
) -> pd.DataFrame:
    """One row per rate: attainment and latency percentiles at that arrival rate.

    The points are independent: `jobs` > 1 runs them in that many processes (0: one per core),
    `backend="ray"` on a Ray cluster (sim/runs/parallel.py); the table is the same as one by one.
    """
    items = [(workload, config, rate, target) for rate in rates]
    rows = map_points(sweep_point, items, jobs, backend, address, progress)
    return pd.DataFrame(rows)


def goodput_of(sweep: pd.DataFrame, target: float = 0.9) -> dict:
    """Goodput (req/s) and goodput per GPU from a sweep table. `all_rates_met`: every swept
    rate met the target, so the goodput is only a lower bound (the top of the range tried)."""
    g = goodput(sweep.rate_per_s.tolist(), sweep.attainment.tolist(), target)
    gpus = int(sweep.num_gpus.iloc[0]) if len(sweep) else 1
    met = bool(len(sweep)) and bool((sweep.attainment >= target).all())
    return {
        "goodput_per_s": g,
        "num_gpus": gpus,
        "goodput_per_gpu_per_s": goodput_per_gpu(g, gpus),
        "all_rates_met": met,
    }
