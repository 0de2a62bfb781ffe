"""Length distributions: how many prompt tokens a request sends and how many output tokens it wants.

Notable features
- Four frozen (hashable) specs: `Fixed`, `Uniform`, `LogNormal` (clipped to [lo, hi]) and
  `Mixture` (weighted, may nest). Each has `sample(n, rng) -> np.ndarray` of integers >= 1.
- Named presets fitted to real traces: `chat` and `code` (Azure LLM inference trace 2023) and
  `chat+longdoc` (chat plus ~5% long documents of 8k-32k prompt tokens).
- The fitted parameters are plain constants below; `python -m bench.fit_lengths` refits them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

import numpy as np

MAX_TOKENS = 1_048_576  # 1 Mi tokens: anything longer is a typo, not a request


def _check_tokens(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be a whole number of tokens, got {value!r}")
    if not 1 <= value <= MAX_TOKENS:
        raise ValueError(f"{name} must be between 1 and {MAX_TOKENS:,} tokens, got {value}")


@dataclass(frozen=True)
class Fixed:
    """Every request has exactly `tokens` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        _check_tokens("Fixed.tokens", self.tokens)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n lengths (tokens)."""
        return np.full(n, self.tokens, dtype=np.int64)


@dataclass(frozen=True)
class Uniform:
    """Whole numbers of tokens drawn uniformly from lo..hi (both included)."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        _check_tokens("Uniform.lo", self.lo)
        _check_tokens("Uniform.hi", self.hi)
        if self.lo > self.hi:
            raise ValueError(f"Uniform.lo ({self.lo}) must be <= Uniform.hi ({self.hi})")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n lengths (tokens)."""
        return rng.integers(self.lo, self.hi, size=n, endpoint=True, dtype=np.int64)


@dataclass(frozen=True)
class LogNormal:
    """exp(Normal(log median, sigma)), rounded to whole tokens and clipped to [lo, hi]."""

    median: float  # tokens
    sigma: float  # spread of log(length); 0 = always the median, 1 = p90 is ~3.6x the median
    lo: int = 1
    hi: int = MAX_TOKENS

    def __post_init__(self) -> None:
        if not (math.isfinite(self.median) and 0 < self.median <= MAX_TOKENS):
            raise ValueError(f"LogNormal.median must be in (0, {MAX_TOKENS:,}], got {self.median}")
        if not (math.isfinite(self.sigma) and 0 <= self.sigma <= 5):
            raise ValueError(f"LogNormal.sigma must be between 0 and 5, got {self.sigma}")
        _check_tokens("LogNormal.lo", self.lo)
        _check_tokens("LogNormal.hi", self.hi)
        if self.lo > self.hi:
            raise ValueError(f"LogNormal.lo ({self.lo}) must be <= LogNormal.hi ({self.hi})")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n lengths (tokens)."""
        x = self.median * np.exp(self.sigma * rng.standard_normal(n))
        return np.clip(np.rint(x), self.lo, self.hi).astype(np.int64)


@dataclass(frozen=True)
class Mixture:
    """Each draw picks a component with probability proportional to its weight."""

    components: tuple[tuple[float, LengthDist], ...]  # ((weight, distribution), ...)

    def __post_init__(self) -> None:
        # Accept lists too, but store tuples so the spec stays hashable.
        object.__setattr__(self, "components", tuple(tuple(c) for c in self.components))
        if not self.components:
            raise ValueError("Mixture.components must hold at least one (weight, dist) pair")
        for weight, dist in self.components:
            if not (math.isfinite(weight) and weight > 0):
                raise ValueError(f"Mixture weights must be > 0, got {weight}")
            if not isinstance(dist, Fixed | Uniform | LogNormal | Mixture):
                raise ValueError(f"Mixture component must be a length distribution, got {dist!r}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n lengths (tokens)."""
        weights = np.array([w for w, _ in self.components], dtype=float)
        which = rng.choice(len(weights), size=n, p=weights / weights.sum())
        out = np.empty(n, dtype=np.int64)
        for i, (_, dist) in enumerate(self.components):
            chosen = which == i
            out[chosen] = dist.sample(int(chosen.sum()), rng)
        return out


LengthDist = Fixed | Uniform | LogNormal | Mixture

# --- Presets fitted to the Azure LLM inference trace -------------------------------------------
# Source: Azure/AzurePublicDataset, AzureLLMInferenceTrace_{conv,code}.csv (one hour on
# 2023-11-16; conv 19,366 rows, code 8,819 rows; CC-BY 4.0, Patel et al., Splitwise, ISCA 2024).
# Fit: `.venv/bin/python -m bench.fit_lengths` - maximum likelihood (EM) of a K-component
# lognormal mixture on log(tokens); K = 1, 2, 3, the smallest with an optimum whose p10/p50/p90
# are all within 10% of the data (one lognormal misses the median by 17-26% on every field).
# lo/hi = smallest/largest value in the trace. The real lengths cluster (fixed system prompts,
# prompts cut at a context limit); the narrow components (small sigma) are those clusters.
# Sampled vs trace quantiles (p10 / p50 / p90 / p99, tokens):
#   chat prompt  193 / 1000 / 3056 / 4642  vs  207 / 1020 / 2734 / 4142
#   chat output   56 /  129 /  419 /  722  vs   54 /  129 /  424 /  601
#   code prompt  136 / 1481 / 4887 / 7437  vs  147 / 1469 / 5188 / 7436
#   code output    7 /   13 /   60 /  199  vs    7 /   13 /   55 /  251
# FITTED-CONSTANTS-START
# chat = conv file. Prompt: a broad body + spikes at ~1,070 and ~4,090 tokens (cut at a 4k limit).
CHAT_PROMPT = Mixture(
    (
        (0.634, LogNormal(median=531.2, sigma=1.005, lo=2, hi=14050)),
        (0.291, LogNormal(median=1072.0, sigma=0.058, lo=2, hi=14050)),
        (0.075, LogNormal(median=4088.9, sigma=0.01, lo=2, hi=14050)),
    )
)
# Output: short answers + a cluster at ~400 tokens; the service capped outputs at 1,000.
CHAT_OUTPUT = Mixture(
    (
        (0.424, LogNormal(median=96.8, sigma=0.356, lo=7, hi=1000)),
        (0.297, LogNormal(median=113.1, sigma=1.008, lo=7, hi=1000)),
        (0.279, LogNormal(median=405.9, sigma=0.049, lo=7, hi=1000)),
    )
)
# code = code file. Prompt: long contexts; ~5% cut at the 7,437-token limit (the narrow spike).
CODE_PROMPT = Mixture(
    (
        (0.635, LogNormal(median=1948.5, sigma=0.639, lo=3, hi=7437)),
        (0.315, LogNormal(median=254.1, sigma=1.291, lo=3, hi=7437)),
        (0.049, LogNormal(median=7427.5, sigma=0.01, lo=3, hi=7437)),
    )
)
# Output: mostly very short completions (median 13 tokens).
CODE_OUTPUT = Mixture(
    (
        (0.658, LogNormal(median=10.6, sigma=0.383, lo=6, hi=1899)),
        (0.342, LogNormal(median=36.7, sigma=0.899, lo=6, hi=1899)),
    )
)
# FITTED-CONSTANTS-END

LONGDOC_PROMPT = Uniform(8_192, 32_768)  # long documents: 8k-32k prompt tokens
LONGDOC_SHARE = 0.05  # share of chat+longdoc requests that carry a long document

# name -> (prompt distribution, output distribution); read-only
PRESETS: Mapping[str, tuple[LengthDist, LengthDist]] = MappingProxyType(
    {
        "chat": (CHAT_PROMPT, CHAT_OUTPUT),
        "code": (CODE_PROMPT, CODE_OUTPUT),
        "chat+longdoc": (
            Mixture(((1 - LONGDOC_SHARE, CHAT_PROMPT), (LONGDOC_SHARE, LONGDOC_PROMPT))),
            CHAT_OUTPUT,  # long documents get chat-like answers
        ),
    }
)


def resolve_length(spec: str | LengthDist, field: Literal["prompt", "output"]) -> LengthDist:
    """Turn a preset name or a distribution into the distribution for `field`."""
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise ValueError(f"{field} preset must be one of {sorted(PRESETS)}, got {spec!r}")
        return PRESETS[spec][0 if field == "prompt" else 1]
    if not isinstance(spec, Fixed | Uniform | LogNormal | Mixture):
        raise ValueError(f"{field} must be a preset name or a length distribution, got {spec!r}")
    return spec
