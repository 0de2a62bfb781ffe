"""Service-level objectives (SLOs): how fast the first token and every later token must come.

An SLO here is a pair of latency targets for one request:
- TTFT (time to first token, s): from arrival until the first output token is visible;
- TPOT (time per output token, s): the mean gap between the later output tokens,
  (finish - first token) / (output tokens - 1).
A request meets the SLO only if it meets BOTH targets (see `sim.runs.metrics.slo_met`).

Notable features
- `SLO` is a small frozen dataclass; it checks that both targets are positive, finite seconds.
- `SLO_PRESETS` holds published targets, each with a one-line note on where it comes from:
  the TNG blog's interactive target and the five rows of DistServe's Table 1.
- `get_slo` looks a preset up by name, ignoring case, and lists the known names when it fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType


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
