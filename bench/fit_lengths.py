"""Refit the `chat` and `code` length presets to the Azure LLM inference trace (2023).

Run from the repo root:  .venv/bin/python -m bench.fit_lengths [TRACES_DIR]
(default TRACES_DIR: ../shared/data/traces next to the repo).

Notable features
- For each preset and field (prompt, output) it fits a mixture of K lognormals by maximum
  likelihood on log(tokens): EM from STARTS seeded starts, each ending at a local maximum. It keeps
  the smallest K (1, 2, 3) with an optimum whose p10/p50/p90 are all within TOLERANCE of the data,
  and of those the most likely. The real lengths are spiky (fixed system prompts, prompts cut at a
  context limit), so the likeliest optimum sometimes fits a spike that barely moves a quantile.
- Quantiles of a fit come from sampling it with sim.workloads.lengths (rounding and clipping
  included), so the table checks the code path the simulator uses.
- Prints the parameters, a quantile table (data / refit / constants in sim/workloads/lengths.py)
  and the constants as Python, ready to paste between the FITTED-CONSTANTS markers.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from sim.workloads.lengths import PRESETS, LengthDist, LogNormal, Mixture
from sim.workloads.trace_import import load_csv

TRACES = Path(__file__).resolve().parents[1].parent / "shared/data/traces"
FILES = {"chat": "AzureLLMInferenceTrace_conv.csv", "code": "AzureLLMInferenceTrace_code.csv"}
QUANTILES = (10, 50, 90, 99)  # percent
TOLERANCE = 0.10  # relative error allowed on p10, p50, p90 when choosing K
MAX_K = 3
STARTS = 12  # EM restarts per K
SIGMA_FLOOR = 0.01  # narrowest component (log space): a spike of identical lengths
SAMPLES = 200_000


def em(
    y: np.ndarray, k: int, rng: np.random.Generator
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """One EM run for a k-component Gaussian mixture on y = log(tokens): (loglik, w, mu, sd)."""
    w = np.full(k, 1.0 / k)
    mu = np.sort(rng.choice(y, size=k, replace=False))
    sd = y.std() * rng.uniform(0.05, 1.0, size=k)  # some narrow starts, to find spikes
    loglik = -np.inf
    for _ in range(3000):
        z = (y[:, None] - mu) / sd
        log_p = np.log(w) - np.log(sd) - 0.5 * np.log(2 * np.pi) - 0.5 * z**2
        top = log_p.max(axis=1, keepdims=True)
        log_total = top[:, 0] + np.log(np.exp(log_p - top).sum(axis=1))
        resp = np.exp(log_p - log_total[:, None])  # responsibilities
        weight = resp.sum(axis=0) + 1e-12
        w, mu = weight / len(y), (resp * y[:, None]).sum(axis=0) / weight
        sd = np.maximum(np.sqrt((resp * (y[:, None] - mu) ** 2).sum(axis=0) / weight), SIGMA_FLOOR)
        new = float(log_total.sum())
        if new - loglik < 1e-7 * len(y):
            break
        loglik = new
    return new, w, mu, sd


def to_dist(w: np.ndarray, mu: np.ndarray, sd: np.ndarray, lo: int, hi: int) -> LengthDist:
    """The fitted mixture as a sim.workloads.lengths spec, rounded like the code's constants."""
    parts = [
        (round(float(wi), 3), LogNormal(round(float(np.exp(m)), 1), round(float(s), 3), lo, hi))
        for wi, m, s in sorted(zip(w, mu, sd, strict=True), key=lambda c: -c[0])
        if round(float(wi), 3) > 0  # drop components too small to matter
    ]
    return parts[0][1] if len(parts) == 1 else Mixture(tuple(parts))


def quantiles(dist: LengthDist) -> np.ndarray:
    """QUANTILES of `dist`, estimated from SAMPLES seeded draws (tokens)."""
    return np.percentile(dist.sample(SAMPLES, np.random.default_rng(0)), QUANTILES)


def fit(x: np.ndarray) -> tuple[int, LengthDist]:
    """Smallest K with a good fit; of its EM optima, the most likely that matches x's quantiles."""
    y, data_q = np.log(x), np.percentile(x, QUANTILES)
    lo, hi = int(x.min()), int(x.max())
    fallback: tuple[float, int, LengthDist] | None = None  # smallest worst error seen
    for k in range(1, MAX_K + 1):
        rng = np.random.default_rng(k)
        runs = sorted((em(y, k, rng) for _ in range(STARTS if k > 1 else 1)), key=lambda r: -r[0])
        for _, w, mu, sd in runs:  # most likely first
            dist = to_dist(w, mu, sd, lo, hi)
            worst = float(np.max(np.abs(quantiles(dist)[:3] / data_q[:3] - 1)))
            if worst <= TOLERANCE:
                return k, dist
            if fallback is None or worst < fallback[0]:
                fallback = (worst, k, dist)
    return fallback[1], fallback[2]


def main(traces: Path) -> None:
    """Fit every preset field and print the parameters and quantile tables."""
    heads = "".join(f"{'p' + str(q):>9}" for q in QUANTILES)
    snippet = []
    for preset, file in FILES.items():
        requests = load_csv(traces / file)
        print(f"\n== {preset}: {file}, {len(requests):,} rows")
        for i, field in enumerate(("prompt", "output")):
            x = np.array([r.prompt_tokens if i == 0 else r.output_tokens for r in requests], float)
            k, dist = fit(x)
            print(f"-- {field}: K={k}  {dist}")
            print(f"{'':12}{heads}")
            y = np.log(x)  # one lognormal, for comparison: its MLE is the mean and sd of log(x)
            single = LogNormal(float(np.exp(y.mean())), float(y.std()), int(x.min()), int(x.max()))
            rows = {"data": np.percentile(x, QUANTILES), "refit": quantiles(dist)}
            rows["in code"] = quantiles(PRESETS[preset][i])
            rows["1 lognormal"] = quantiles(single)
            for name, q in rows.items():
                print(f"{name:12}" + "".join(f"{v:9.0f}" for v in q))
            for name in ("refit", "in code", "1 lognormal"):
                err = rows[name] / rows["data"] - 1
                print(f"{name[:8] + ' err':12}" + "".join(f"{e:+9.1%}" for e in err))
            snippet.append(f"{preset.upper()}_{field.upper()} = {dist!r}")
    print("\n# constants for sim/workloads/lengths.py\n" + "\n".join(snippet))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else TRACES)
