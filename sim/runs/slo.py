"""Service-level objectives (SLOs): how fast the first token and every later token must come.

An SLO here is a pair of latency targets for one request:
- TTFT (time to first token, s): from arrival until the first output token is visible;
- TPOT (time per output token, s): the mean gap between the later output tokens,
  (finish - first token) / (output tokens - 1).
A request meets the SLO only if it meets BOTH targets (`slo_met`).

Notable features
- `SLO` is a small frozen dataclass; it checks that both targets are positive, finite seconds.
- `SLO_PRESETS` holds published targets, each with a one-line note on where it comes from:
  the TNG blog's interactive target and the five rows of DistServe's Table 1.
- `get_slo` looks a preset up by name, ignoring case, and lists the known names when it fails.
- Scoring a run: `slo_met` per request, `attainment` (met / ALL requests, so rejecting a request
  can never raise it), and over a rate sweep `goodput` (DistServe's measure: the highest rate at
  which the attainment target holds, there and at every lower rate) and `goodput_per_gpu`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True, slots=True)
class SLO:
    """A latency target: TTFT and TPOT in seconds, with a note on where the numbers come from."""

    name: str
    ttft_s: float  # time to first token target, seconds
    tpot_s: float  # time per output token target, seconds
    source: str = ""  # one line: where the numbers come from

    def __post_init__(self) -> None:
        for label, value in (("ttft_s", self.ttft_s), ("tpot_s", self.tpot_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(
                    f"SLO {self.name!r}: {label} must be a positive number of "
                    f"seconds, got {value!r}"
                )


_TNG_BLOG = (
    "TNG Technology Consulting, 'Prefill and Decode for Concurrent Requests' "
    "(Hugging Face blog, 2025)"
)
_DISTSERVE = "DistServe (Zhong et al., OSDI 2024), Table 1"

# Read-only view, so no caller can change a preset for everyone else.
SLO_PRESETS: MappingProxyType[str, SLO] = MappingProxyType(
    {
        slo.name: slo
        for slo in (
            SLO(
                "tng-interactive",
                3.0,
                0.3,
                f"{_TNG_BLOG}: interactive use wants TTFT <= 3 s and 100-300 ms per output token "
                "(upper end)",
            ),
            SLO(
                "tng-interactive-strict",
                3.0,
                0.1,
                f"{_TNG_BLOG}: TTFT <= 3 s with the fast end of 100-300 ms per output token",
            ),
            SLO("distserve-chatbot-13b", 0.25, 0.10, f"{_DISTSERVE}: chatbot, OPT-13B on ShareGPT"),
            SLO("distserve-chatbot-66b", 2.5, 0.15, f"{_DISTSERVE}: chatbot, OPT-66B on ShareGPT"),
            SLO(
                "distserve-chatbot-175b", 4.0, 0.20, f"{_DISTSERVE}: chatbot, OPT-175B on ShareGPT"
            ),
            SLO(
                "distserve-code",
                0.125,
                0.20,
                f"{_DISTSERVE}: code completion, OPT-66B on HumanEval",
            ),
            SLO(
                "distserve-summarization",
                15.0,
                0.15,
                f"{_DISTSERVE}: summarization, OPT-66B on LongBench",
            ),
        )
    }
)


def get_slo(name: str) -> SLO:
    """Return the preset called `name` (case-insensitive); ValueError lists the known names."""
    slo = SLO_PRESETS.get(name.strip().lower())
    if slo is None:
        known = ", ".join(SLO_PRESETS)
        raise ValueError(f"unknown SLO preset {name!r}; known presets: {known}")
    return slo


def slo_met(requests: pd.DataFrame, ttft_s: float, tpot_s: float) -> pd.Series:
    """Per request: finished AND ttft_s <= TTFT target AND (tpot_s <= TPOT target or NaN).

    A NaN tpot_s (a 1-token answer has no later tokens) counts as meeting TPOT. Rejected or
    otherwise unfinished requests never meet the SLO. Targets are in seconds.
    """
    finished = requests["status"] == "finished"
    ttft_ok = requests["ttft_s"] <= ttft_s  # NaN <= x is False
    tpot = requests["tpot_s"]
    tpot_ok = tpot.isna() | (tpot <= tpot_s)
    return (finished & ttft_ok & tpot_ok).astype(bool).rename("slo_met")


def attainment(requests: pd.DataFrame, ttft_s: float, tpot_s: float) -> float:
    """SLO attainment = requests meeting the SLO / ALL requests (rejected included); NaN if none."""
    if len(requests) == 0:
        return math.nan
    return float(slo_met(requests, ttft_s, tpot_s).mean())


def goodput(
    rates: Sequence[float] | np.ndarray,
    attainments: Sequence[float] | np.ndarray,
    target: float = 0.9,
) -> float:
    """Highest swept rate (req/s) with attainment >= target at it AND at every lower rate.

    We walk the sweep from the lowest rate up and stop at the first rate that misses the target
    (NaN counts as a miss). A lucky pass above a failing rate does not count: goodput is the
    load the system sustains, not a point where noise happened to be kind. 0.0 if even the
    lowest rate misses. A rate swept several times (e.g. several seeds) passes only if every
    run at it passes. DistServe reports goodput with a 90 % attainment target.
    """
    rates_arr = np.asarray(rates, dtype=float).ravel()
    att_arr = np.asarray(attainments, dtype=float).ravel()
    if rates_arr.shape != att_arr.shape:
        raise ValueError(
            f"rates and attainments differ in length: {rates_arr.size} vs {att_arr.size}"
        )
    passed = att_arr >= target  # NaN >= x is False
    order = np.lexsort((passed, rates_arr))  # by rate; at a repeated rate, misses come first
    ok = passed[order]
    num_ok = ok.size if ok.all() else int(np.argmin(ok))  # length of the leading run of passes
    return float(rates_arr[order][num_ok - 1]) if num_ok else 0.0


def goodput_per_gpu(goodput: float, num_gpus: int) -> float:
    """Goodput per GPU = goodput (req/s) / number of GPUs (req/s/GPU)."""
    if num_gpus <= 0:
        raise ValueError(f"num_gpus must be positive, got {num_gpus}")
    return float(goodput) / num_gpus
