"""Serve one workload live under several policies and predict each with the calibrated simulator.

Notable features
- `run_and_predict` is what the Live page does with a click: for each policy, a live run on the
  real model, then the calibrated simulation of the same workload, and the per-request errors.
- The runs happen one after another on the same model, so they never compete for the device.
- `longest_stall_s` is the number a user looks for in C5: the longest wait between two tokens of
  any request (a decode stalled behind someone else's prefill), measured or predicted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pandas as pd

from live.engine.calibrate import fidelity, medians, predict
from sim.config import SimConfig
from sim.core.request import RequestSpec
from sim.core.trace import RunResult
from sim.cost.hardware import GpuSpec
from sim.cost.step_terms import DeviceProfile


@dataclass(frozen=True)
class PolicyRun:
    """One policy's live run beside its calibrated prediction."""

    policy: str
    live: RunResult
    predicted: RunResult
    errors: pd.DataFrame  # per request: TTFT/TPOT live, simulated, |error| %
    medians: dict[str, float]  # ttft_median_err_pct, tpot_median_err_pct
    texts: dict[int, str]  # request id -> what the model wrote (real weights only)
    prompt_text: dict[int, str]


def longest_stall_s(run: RunResult) -> float:
    """The longest gap between two consecutive tokens of any request, seconds (0 if none)."""
    gaps = run.requests["max_itl_s"].dropna()
    return float(gaps.max()) if len(gaps) else 0.0


def run_and_predict(
    requests: list[RequestSpec],
    configs: Sequence[SimConfig],
    options,
    profile: DeviceProfile,
    gpu: GpuSpec,
    typed: dict[int, list[int]] | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[PolicyRun]:
    """Each config live (one after another), then simulated with the calibrated profile.

    progress(steps) is called after every measured step, counting over all runs.
    """
    from live.engine.run import run_live

    done, out = 0, []
    for config in configs:
        before = done

        def on_step(_worker: str, steps: int, before: int = before) -> None:
            nonlocal done
            done = before + steps
            if progress is not None:
                progress(done)

        live, extra = run_live(requests, config, options, typed=typed, progress=on_step)
        predicted = predict(requests, config, profile, gpu, live)
        errors = fidelity(live, predicted)
        out.append(
            PolicyRun(
                config.policy,
                live,
                predicted,
                errors,
                medians(errors),
                extra["texts"],
                extra["prompt_text"],
            )
        )
    return out
