"""Arrival processes: when requests reach the server (times in seconds from the start of the run).

Notable features
- Poisson (independent arrivals at a mean rate), Gamma renewal (same mean rate, but the gaps have
  coefficient of variation `cv`: cv = 1 is Poisson, cv > 1 bursty, cv < 1 more regular),
  a burst (everything at t = 0) and a fixed list of times.
- Every random process takes a `numpy.random.Generator` or an integer seed, never global state.
- `build_requests` turns arrays of times and lengths into `RequestSpec`s numbered 0..n-1 in
  arrival order, the form every generator and importer returns.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np

from sim.core.request import RequestSpec

if TYPE_CHECKING:  # (numpy.random is imported when a generator first needs it: a replayed
    # trace never does)
    Seed = int | np.random.Generator


def _rng(seed: Seed) -> np.random.Generator:
    return np.random.default_rng(seed)  # returns a Generator unchanged, seeds a new one from an int


def poisson_arrivals(n: int, rate_per_s: float, seed: Seed) -> np.ndarray:
    """n arrival times (s) of a Poisson process: exponential gaps with mean 1 / rate_per_s."""
    if not rate_per_s > 0:
        raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
    return np.cumsum(_rng(seed).exponential(1.0 / rate_per_s, size=n))


def gamma_arrivals(n: int, rate_per_s: float, cv: float, seed: Seed) -> np.ndarray:
    """n arrival times (s) whose gaps are Gamma with mean 1 / rate_per_s and the given cv."""
    if not rate_per_s > 0:
        raise ValueError(f"rate_per_s must be > 0, got {rate_per_s}")
    if not cv > 0:
        raise ValueError(f"cv must be > 0, got {cv}")
    shape = 1.0 / cv**2  # a Gamma(shape k) gap has cv = 1 / sqrt(k)
    scale = 1.0 / (rate_per_s * shape)  # mean gap = shape * scale = 1 / rate_per_s
    return np.cumsum(_rng(seed).gamma(shape, scale, size=n))


def burst_arrivals(n: int) -> np.ndarray:
    """n arrival times that are all 0 s: every request is waiting when the server starts."""
    return np.zeros(n)


def fixed_arrivals(times_s: Iterable[float]) -> np.ndarray:
    """The given arrival times (s), checked (finite, >= 0) and sorted."""
    times = np.asarray(list(times_s), dtype=float)
    if not np.all(np.isfinite(times)) or np.any(times < 0):
        raise ValueError("arrival times must be finite numbers of seconds >= 0")
    return np.sort(times, kind="stable")


def build_requests(
    arrival_s: Iterable[float],
    prompt_tokens: Iterable[int],
    output_tokens: Iterable[int],
    priority: Iterable[int] | None = None,
    prefixes: Iterable[tuple] | None = None,
) -> list[RequestSpec]:
    """RequestSpecs sorted by arrival (ties keep input order), numbered 0..n-1 in that order.

    `prefixes` gives each request's (prefix_group, prefix_tokens, hash_ids), if any.
    """
    arrivals = [float(t) for t in arrival_s]
    prompts = [int(p) for p in prompt_tokens]
    outputs = [int(o) for o in output_tokens]
    priorities = [0] * len(arrivals) if priority is None else [int(p) for p in priority]
    shared = [("", 0, ())] * len(arrivals) if prefixes is None else list(prefixes)
    if not len(arrivals) == len(prompts) == len(outputs) == len(priorities) == len(shared):
        raise ValueError(
            "arrival_s, prompt_tokens, output_tokens, priority and prefixes differ in length"
        )
    order = sorted(range(len(arrivals)), key=arrivals.__getitem__)  # sorted() is stable
    return [
        RequestSpec(new_id, arrivals[i], prompts[i], outputs[i], priorities[i], *shared[i])
        for new_id, i in enumerate(order)
    ]
