"""Workloads: the list of requests a run serves, generated from a config or imported from a CSV.

Notable features
- `WorkloadConfig` is a frozen, validated, hashable description (a cache key); `generate(config)`
  turns it into `list[RequestSpec]`, sorted by arrival and numbered 0..n-1. Same config = same list.
- Arrivals, prompt lengths and output lengths use three independent random streams spawned from
  the seed, so `with_rate(config, r)` replays the SAME requests, only closer together or further
  apart (a Poisson or Gamma trace's times scale by old_rate / r exactly): a fair rate sweep.
- Trace helpers work on any list of requests, generated or imported: `scale_to_rate` (for goodput
  sweeps over a real trace), `head`, `time_window`, `mean_rate`.
- The building blocks live in `sim.workloads.arrivals`, `sim.workloads.lengths` and
  `sim.workloads.trace_import` and are
  re-exported here, so `from sim.workloads.workload import ...` is all a caller needs.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

from sim.core.request import RequestSpec
from sim.workloads.arrivals import (
    build_requests,
    burst_arrivals,
    fixed_arrivals,
    gamma_arrivals,
    poisson_arrivals,
)
from sim.workloads.lengths import (
    PRESETS,
    Fixed,
    LengthDist,
    LogNormal,
    Mixture,
    Uniform,
    resolve_length,
)
from sim.workloads.trace_import import (
    WorkloadError,
    load_csv,
    load_mooncake,
    load_workload,
    save_csv,
    to_csv_text,
)

__all__ = [
    "PRESETS",
    "Fixed",
    "LengthDist",
    "LogNormal",
    "Mixture",
    "Uniform",
    "WorkloadConfig",
    "WorkloadError",
    "build_requests",
    "burst_arrivals",
    "fixed_arrivals",
    "gamma_arrivals",
    "generate",
    "head",
    "load_csv",
    "load_mooncake",
    "load_workload",
    "mean_rate",
    "poisson_arrivals",
    "save_csv",
    "scale_to_rate",
    "time_window",
    "to_csv_text",
    "with_rate",
]

Arrival = Literal["poisson", "gamma", "burst", "fixed"]
ARRIVALS: tuple[Arrival, ...] = get_args(Arrival)
MAX_REQUESTS = 1_000_000


def _is_whole(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


@dataclass(frozen=True)
class WorkloadConfig:
    """What to generate: how requests arrive, how long they are, how many, and the seed."""

    arrival: Arrival = "poisson"  # "burst" = all at t=0; "fixed" = the times in arrival_times
    rate_per_s: float = 2.0  # mean arrival rate, requests per second (poisson, gamma)
    cv: float = 1.0  # gamma only: coefficient of variation of the gaps; 1 = Poisson, >1 bursty
    num_requests: int = 100
    prompt: str | LengthDist = "chat"  # preset name (see PRESETS) or a length distribution
    output: str | LengthDist = "chat"
    seed: int = 0
    duration_s: float | None = None  # drop requests arriving after this many seconds
    arrival_times: tuple[float, ...] = ()  # "fixed" only: the arrival times (s)

    def __post_init__(self) -> None:
        if self.arrival not in ARRIVALS:
            raise ValueError(f"arrival must be one of {ARRIVALS}, got {self.arrival!r}")
        if not (_is_number(self.rate_per_s) and 0 < self.rate_per_s < math.inf):
            raise ValueError(f"rate_per_s must be a number > 0 (req/s), got {self.rate_per_s!r}")
        if not (_is_number(self.cv) and 0 < self.cv <= 10):
            raise ValueError(f"cv must be in (0, 10] (1 = Poisson), got {self.cv!r}")
        if not (_is_whole(self.num_requests) and 1 <= self.num_requests <= MAX_REQUESTS):
            raise ValueError(
                f"num_requests must be a whole number in 1..{MAX_REQUESTS:,}, "
                f"got {self.num_requests!r}"
            )
        resolve_length(self.prompt, "prompt")  # raises ValueError naming the field
        resolve_length(self.output, "output")
        if not (_is_whole(self.seed) and self.seed >= 0):
            raise ValueError(f"seed must be a whole number >= 0, got {self.seed!r}")
        if self.duration_s is not None and not (
            _is_number(self.duration_s) and 0 < self.duration_s < math.inf
        ):
            raise ValueError(f"duration_s must be None or seconds > 0, got {self.duration_s!r}")
        times = tuple(float(t) for t in self.arrival_times)
        object.__setattr__(self, "arrival_times", times)  # a list becomes a (hashable) tuple
        if self.arrival == "fixed":
            fixed_arrivals(times)  # raises if a time is negative or not finite
            if len(times) != self.num_requests:
                raise ValueError(
                    f"num_requests must equal len(arrival_times) = {len(times)} for "
                    f"arrival='fixed', got {self.num_requests}"
                )
        elif times:
            raise ValueError(
                f"arrival_times is only used with arrival='fixed', not {self.arrival!r}"
            )


def generate(config: WorkloadConfig) -> list[RequestSpec]:
    """The requests `config` describes, sorted by arrival and numbered 0..n-1."""
    arrival_seed, prompt_seed, output_seed = np.random.SeedSequence(config.seed).spawn(3)
    n = config.num_requests
    match config.arrival:
        case "poisson":
            arrivals = poisson_arrivals(n, config.rate_per_s, np.random.default_rng(arrival_seed))
        case "gamma":
            rng = np.random.default_rng(arrival_seed)
            arrivals = gamma_arrivals(n, config.rate_per_s, config.cv, rng)
        case "burst":
            arrivals = burst_arrivals(n)
        case _:
            arrivals = fixed_arrivals(config.arrival_times)
    prompts = resolve_length(config.prompt, "prompt").sample(n, np.random.default_rng(prompt_seed))
    outputs = resolve_length(config.output, "output").sample(n, np.random.default_rng(output_seed))
    if config.duration_s is not None:
        keep = arrivals <= config.duration_s
        arrivals, prompts, outputs = arrivals[keep], prompts[keep], outputs[keep]
    return build_requests(arrivals, prompts, outputs)


def with_rate(config: WorkloadConfig, rate_per_s: float) -> WorkloadConfig:
    """The same config at another arrival rate (req/s): one point of a rate sweep."""
    return dataclasses.replace(config, rate_per_s=rate_per_s)


def mean_rate(requests: Sequence[RequestSpec]) -> float:
    """Mean arrival rate (req/s) = (n - 1) / (last - first arrival); NaN if n < 2 or span is 0."""
    if len(requests) < 2:
        return math.nan
    span = max(r.arrival_s for r in requests) - min(r.arrival_s for r in requests)
    return (len(requests) - 1) / span if span > 0 else math.nan


def scale_to_rate(requests: Sequence[RequestSpec], rate_per_s: float) -> list[RequestSpec]:
    """Stretch or squeeze arrival times (s) so `mean_rate` becomes `rate_per_s`; lengths kept."""
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise ValueError(f"rate_per_s must be a number > 0 (req/s), got {rate_per_s}")
    current = mean_rate(requests)
    if math.isnan(current):
        raise ValueError("scale_to_rate needs at least 2 requests with different arrival times")
    factor = current / rate_per_s  # > 1 spreads requests out (lower rate)
    return [dataclasses.replace(r, arrival_s=r.arrival_s * factor) for r in requests]


def head(requests: Sequence[RequestSpec], n: int) -> list[RequestSpec]:
    """The first n requests by arrival, numbered 0..n-1."""
    if n < 0:
        raise ValueError(f"head needs n >= 0, got {n}")
    first = sorted(requests, key=lambda r: (r.arrival_s, r.request_id))[:n]
    return [dataclasses.replace(r, request_id=i) for i, r in enumerate(first)]


def time_window(requests: Sequence[RequestSpec], start_s: float, end_s: float) -> list[RequestSpec]:
    """Requests arriving in [start_s, end_s), shifted so start_s becomes 0 s, renumbered 0..n-1."""
    if not start_s < end_s:
        raise ValueError(f"time_window needs start_s < end_s, got {start_s} and {end_s}")
    inside = [
        dataclasses.replace(r, arrival_s=r.arrival_s - start_s)
        for r in requests
        if start_s <= r.arrival_s < end_s
    ]
    return head(inside, len(inside))
