"""A budget for one run that a visitor of a hosted app cannot exceed, and the runs that keep to it.

Notable features
- `Budget`: at most `max_requests` simulated requests per run, `max_workers` instances (P and D
  workers count), `max_kv_blocks` KV blocks over all workers (a block costs ~64 bytes of
  bookkeeping: 1M blocks are ~64 MB before the first step), `max_steps` engine steps (all
  workers together; a step costs ~10 us, and its trace rows stay in memory) and `max_seconds`
  of CPU time of the thread that runs it (CPU, not wall time: 30 visitors sharing two cores must
  not fail each other's runs, and a run's own work is what is bounded). The defaults suit a
  shared 2-core host with 30 visitors; `Budget.from_env()` lets a local install raise them
  (PDLAB_MAX_STEPS=2000000 ...).
- `check(config, num_requests, budget)` refuses a run before it starts, when its size alone is
  over budget; `simulate_within` also stops a run that takes too many steps or too long: its
  clock counts the steps (a `SimulatedClock`, so the step times are the cost model's, unchanged).
- `BudgetExceeded` is a ValueError whose `limit` names which bound was hit and whose message says
  what to change, in one line.
- `sweep_within` is `sim.runs.sweep.sweep_rates` under one budget for the whole sweep: every point
  within `max_steps` (each point is one run), all of them together within `max_seconds` of CPU,
  in this thread or in `sweep_jobs` worker processes. There the points add their CPU time to one
  shared counter and stop when it is spent; this process also watches the workers' own CPU time
  (/proc) and terminates them past the budget. The first point over budget stops the sweep: the
  points not started are cancelled, the error is the serial one.
- The live_* fields bound the Live page (app_pages/live.py), where a run holds the real model;
  the serve_* fields the Serve page's replays against a real server (app_pages/serve.py).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from sim.cluster.topologies import simulate
from sim.cluster.worker import SimulatedClock
from sim.config import SimConfig
from sim.core.request import RequestSpec
from sim.core.trace import RunResult
from sim.runs.memory import kv_blocks, num_workers  # (here too: the app imports them from here)
from sim.runs.parallel import cpu_jobs, map_points, pool_context, process_cpu_seconds
from sim.runs.sweep import requests_at_rate, sweep_row

ENV_PREFIX = "PDLAB_"  # PDLAB_MAX_REQUESTS, PDLAB_MAX_STEPS, ...


@dataclass(frozen=True)
class Budget:
    """The most one run may use. Field names double as the environment/secrets keys."""

    max_requests: int = 1_000  # simulated requests per run
    max_steps: int = 150_000  # engine steps per run, all workers together (~2 s here)
    max_seconds: float = 10.0  # CPU seconds per run (a sweep: for all its runs together)
    max_workers: int = 16  # instances, or P + D workers
    max_kv_blocks: int = 2_000_000  # KV blocks over all workers (~128 MB of bookkeeping)
    sweep_jobs: int = 2  # processes one goodput sweep may use at once (its points in parallel)
    # The Live page, where one run at a time holds the real model (and a lock) for everyone:
    live_steps: int = 400  # engine steps per policy (its workloads take <= 170; 1,326 with a
    #                        token budget of 1 token per step)
    live_seconds: float = 90.0  # wall time of one click, all its runs (a run takes 5-20 s)
    live_prompt_tokens: int = 128  # tokens kept of each typed prompt line
    live_kv_tokens: int = 16_384  # KV rows preallocated, all workers (SmolLM2: ~46 KB each)
    # The Serve page's replays (app_pages/serve.py), which hold a session's thread in real time:
    serve_requests: int = 32  # requests per replay (an upload is read up to one more row)
    serve_seconds: float = 120.0  # the arrivals' span, and the replay's wall time, at most
    serve_tokens: int = 16_384  # prompt + output tokens of one replayed request (the prompts
    #                             are built in the app's memory before the clock starts)

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not (isinstance(value, int | float) and value > 0):
                raise ValueError(f"budget {f.name} must be > 0, got {value!r}")

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, extra: Mapping[str, object] | None = None
    ) -> Budget:
        """The defaults, raised or lowered by PDLAB_MAX_* variables, then by `extra` (e.g. the
        [limits] table of .streamlit/secrets.toml). A value that is not a number is an error."""
        environ = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(ENV_PREFIX + f.name.upper())
            if extra is not None and f.name in extra:
                raw = extra[f.name]
            if raw is None or raw == "":
                continue
            kind = int if f.type in ("int", int) else float
            try:
                values[f.name] = kind(float(raw))
            except (TypeError, ValueError):
                raise ValueError(
                    f"{ENV_PREFIX}{f.name.upper()} must be a number, got {raw!r}"
                ) from None
        return cls(**values)


class BudgetExceeded(ValueError):
    """A run over budget. `limit` is the Budget field that was hit; `value` its value."""

    def __init__(self, limit: str, value, message: str) -> None:
        super().__init__(limit, value, message)  # all three: simpy re-raises type(e)(*e.args)
        self.limit, self.value, self.message = limit, value, message

    def __str__(self) -> str:
        return self.message


def check(config: SimConfig, num_requests: int, budget: Budget) -> None:
    """Raise BudgetExceeded if a run of this size is over budget before it starts."""
    if num_requests > budget.max_requests:
        raise BudgetExceeded(
            "max_requests",
            budget.max_requests,
            f"{num_requests:,} requests are more than the {budget.max_requests:,}"
            " one run may simulate here: use fewer requests",
        )
    workers = num_workers(config)
    if workers > budget.max_workers:
        raise BudgetExceeded(
            "max_workers",
            budget.max_workers,
            f"{workers} instances are more than the {budget.max_workers} one run"
            " may simulate here: lower num_instances, num_prefill or num_decode",
        )
    blocks = kv_blocks(config)
    if blocks > budget.max_kv_blocks:
        raise BudgetExceeded(
            "max_kv_blocks",
            budget.max_kv_blocks,
            f"{blocks:,} KV blocks over {workers} instance(s) are more than the "
            f"{budget.max_kv_blocks:,} one run may hold here: set "
            "kv_capacity_tokens, or lower tensor_parallel or the instances",
        )


class BudgetClock(SimulatedClock):
    """The simulator's clock, counting steps: over `max_steps` or `deadline` (this thread's CPU
    time), or with the CPU seconds of a `SharedSeconds` spent, it raises."""

    def __init__(
        self, budget: Budget, deadline: float | None = None, shared: SharedSeconds | None = None
    ) -> None:
        self.budget = budget
        self.steps = 0
        self.shared = shared
        start = time.thread_time()
        self.deadline = deadline if deadline is not None else start + budget.max_seconds

    def step_timing(self, worker, batch):
        self._count(1)
        return super().step_timing(worker, batch)

    def decode_run(self, worker, steps: int) -> None:
        """A run of decode steps taken at once (sim/fastforward/steps.py) counts as that many steps
        (counted when it ends and each time it goes on: it may pass max_steps by one plan,
        at most 512 steps, before this raises)."""
        self._count(steps)

    def _count(self, steps: int) -> None:
        before = self.steps
        self.steps += steps
        if self.steps > self.budget.max_steps:
            raise BudgetExceeded(
                "max_steps",
                self.budget.max_steps,
                f"the run passed {self.budget.max_steps:,} engine steps, the most "
                "one run may take here: use fewer requests, a lower rate or a "
                "larger token budget per step (max_num_batched_tokens)",
            )
        if before >> 10 != self.steps >> 10:
            if self.shared is not None:
                self.shared.check()
            elif time.thread_time() > self.deadline:
                raise over_seconds(self.budget)


def over_seconds(budget: Budget) -> BudgetExceeded:
    return BudgetExceeded(
        "max_seconds",
        budget.max_seconds,
        f"the run took more than {budget.max_seconds:g} s, the most "
        "one run may take here: use fewer requests or a lower rate",
    )


class SharedSeconds:
    """The CPU seconds a sweep's points have used together, over worker processes: `value` is a
    shared multiprocessing.Value("d"); `check()` adds this thread's CPU time since the last call
    and raises BudgetExceeded("max_seconds") once the total is over the budget."""

    def __init__(self, value, budget: Budget) -> None:
        self.value, self.budget, self.mark = value, budget, time.thread_time()

    def add(self) -> float:
        """Add this thread's CPU time since the last call; the total so far."""
        now = time.thread_time()
        with self.value.get_lock():
            self.value.value += now - self.mark
            total = self.value.value
        self.mark = now
        return total

    def check(self) -> None:
        if self.add() > self.budget.max_seconds:
            raise over_seconds(self.budget)


def simulate_within(
    requests: Sequence[RequestSpec],
    config: SimConfig,
    budget: Budget,
    clock: BudgetClock | None = None,
) -> RunResult:
    """`sim.cluster.topologies.simulate`, refused or stopped (BudgetExceeded) when over budget."""
    check(config, len(requests), budget)
    return simulate(list(requests), config, clock=clock or BudgetClock(budget))


# A worker process's CPU time may pass the points' own (thread) time by this much before the
# watch terminates it: starting, unpickling, the check every 1,024 steps (~10-50 ms of steps).
WATCH_GRACE_S = 0.25


def sweep_within(
    workload,
    config: SimConfig,
    rates: Sequence[float],
    budget: Budget,
    target: float = 0.9,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
) -> pd.DataFrame:
    """`sim.runs.sweep.sweep_rates` (same table) with every run under `budget`, and the whole sweep
    within `budget.max_seconds` of CPU time. With `jobs` > 1 the rates run in that many
    processes (sim/runs/parallel.py), all of them within the same `budget.max_seconds`."""
    if min(cpu_jobs(jobs), len(rates)) > 1:
        context = pool_context()
        spent = context.Value("d", 0.0)  # CPU seconds of all the points, from every worker
        items = [(workload, config, rate, target, budget) for rate in rates]
        return pd.DataFrame(
            map_points(
                _point_in_worker,
                items,
                jobs,
                progress=progress,
                context=context,
                initializer=_share,
                initargs=(spent,),
                watch=cpu_watch(budget),
            )
        )
    deadline = time.thread_time() + budget.max_seconds
    rows = []
    for i, rate in enumerate(rates):
        rows.append(_point_within(workload, config, rate, target, budget, deadline))
        if progress is not None:
            progress(i + 1, len(rates))
    return pd.DataFrame(rows)


def _point_within(
    workload,
    config: SimConfig,
    rate: float,
    target: float,
    budget: Budget,
    deadline: float | None = None,
    shared: SharedSeconds | None = None,
) -> dict:
    run = simulate_within(
        requests_at_rate(workload, rate), config, budget, BudgetClock(budget, deadline, shared)
    )
    return sweep_row(run, config, rate, target)


_SPENT = None  # in a sweep's worker process: the sweep's shared CPU seconds (a Value)


def _share(spent) -> None:
    global _SPENT
    _SPENT = spent


def _point_in_worker(
    workload, config: SimConfig, rate: float, target: float, budget: Budget
) -> dict:
    """One point of a parallel sweep: all its CPU time (building the requests and the row too)
    goes to the sweep's shared count; a point that starts with the budget spent stops at once."""
    shared = SharedSeconds(_SPENT, budget)
    shared.check()
    row = _point_within(workload, config, rate, target, budget, shared=shared)
    shared.add()  # the row's work too (over budget now, the next point stops, as in serial)
    return row


def cpu_watch(budget: Budget) -> Callable[[list[int]], None]:
    """For map_points: raise BudgetExceeded("max_seconds") once the worker processes together
    have used more CPU time than the budget (plus WATCH_GRACE_S each), whatever they run."""
    seen: dict[int, float] = {}  # pid -> its CPU seconds when last read

    def watch(pids: list[int]) -> None:
        for pid in pids:
            seconds = process_cpu_seconds(pid)
            if seconds is not None:
                seen[pid] = max(seconds, seen.get(pid, 0.0))
        if sum(seen.values()) > budget.max_seconds + WATCH_GRACE_S * len(seen):
            raise over_seconds(budget)

    return watch
