"""Fit each GPU's default profile (MFU, MFU_attn, MBU, per-step overhead) to public vLLM runs.

Notable features
- For every GPU with public runs, takes ONLY the runs `fidelity_runs.FIT_RULES` marks fit (one
  model, or one model's shorter outputs; everything else stays held out for the report) and
  searches the profile that makes the simulator reproduce them: the same replay the report
  uses (`fidelity_replay.replay`), so the fit sees scheduling, batching and queueing, not just
  isolated step times.
- Objective: the mean squared log error of each run's measured figures (per-request traces:
  mean, median and p90 TTFT, mean and p90 TPOT, mean E2E; closed-loop points: mean TPOT and
  mean TTFT, plus one client-side latency per GPU), so a 10% miss counts the same at 20 ms as
  at 2 s.
- Five figures per GPU: MFU, MFU_attn, MBU, the per-step overhead and a per-request overhead
  (work for each running request in each step: attention's per-request work in every layer,
  scheduling, input preparation, sampling), which is what makes TPOT grow with the batch at any
  TP degree. Both overheads are per layer (sim/cost/profiles.py): they are searched for the fit
  set's model depth and scale with each run's.
- Search: Nelder-Mead over logit(efficiencies, within plausible BOUNDS) and log(overheads),
  from the generic profile
  (numpy only; ~100 replays of the fit set per GPU).
- Prints the profiles as Python, to paste into `sim/cost/profiles.py` (FITTED), with the fit error.

Run: .venv/bin/python bench/fit_profiles.py [--gpu H100-SXM] [--jobs 2] [--iters 80]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # import fidelity_*

from collections import Counter  # noqa: E402

import numpy as np  # noqa: E402
from fidelity_replay import mean_of, replay  # noqa: E402
from fidelity_runs import (  # noqa: E402
    CLIENT_LATENCY_S,
    FIT_RULES,
    PublicRun,
    load_runs,
    select,
)

from sim.cost.hardware import get_model  # noqa: E402
from sim.cost.profiles import FITTED, FITTED_KERNELS  # noqa: E402

NAMES = ("mfu", "mfu_attn", "mbu", "overhead_ms", "overhead_per_seq_ms")
START = np.array([0.5, 0.4, 0.7, 3.0, 0.02])


# The efficiencies stay in ranges real kernels reach (§5.5 of the reference: large GEMMs 0.4-0.7
# of peak, FlashAttention somewhat less, decode kernels 0.6-0.8 of bandwidth). Unbounded, the
# search trades one figure against another to absorb what the roofline does not model (an
# attention MFU of 0.1 next to an MBU of 0.95 fitted H100 best), and such a profile misleads on
# every other workload.
BOUNDS = np.array([[0.2, 0.8], [0.25, 0.8], [0.5, 0.85]])  # mfu, mfu_attn, mbu


# step_costs=kernels: the second figure is kernel_scale (the measured kernels' compute x it:
# sim/cost/measured_step.py), not the attention MFU (attention is measured too): between the
# tables as measured and 2.5x them.
KERNEL_BOUNDS = np.array([[0.2, 0.8], [1.0, 2.5], [0.5, 0.85]])  # mfu, kernel_scale, mbu


def to_params(x: np.ndarray, kernels: bool = False) -> dict:
    """Search space -> profile knobs: efficiencies through a logistic into BOUNDS, overheads
    through exp."""
    bounds = KERNEL_BOUNDS if kernels else BOUNDS
    lo, hi = bounds[:, 0], bounds[:, 1]
    eff = lo + (hi - lo) / (1 + np.exp(-x[:3]))
    return {
        "profile": "generic",
        "mfu": float(eff[0]),
        ("kernel_scale" if kernels else "mfu_attn"): float(eff[1]),
        "mbu": float(eff[2]),
        "overhead_ms": float(np.clip(np.exp(x[3]), 0.0, 1000.0)),
        "overhead_per_seq_ms": float(np.clip(np.exp(x[4]), 0.0, 100.0)),
    }


def to_x(params: np.ndarray, kernels: bool = False) -> np.ndarray:
    bounds = KERNEL_BOUNDS if kernels else BOUNDS
    lo, hi = bounds[:, 0], bounds[:, 1]
    share = np.clip((params[:3] - lo) / (hi - lo), 1e-3, 1 - 1e-3)
    return np.r_[np.log(share / (1 - share)), np.log(np.maximum(params[3:], 1e-4))]


def start_point(
    gpu: str,
    ref_layers: int,
    kernels: bool,
    from_fitted: bool,
    kernel_scale: float | None = None,
) -> np.ndarray:
    """Where the search starts, in NAMES' order (the second figure is kernel_scale for the
    kernel tables): the generic profile, or with `from_fitted` the profile in use for this cost
    model (FITTED, or FITTED_KERNELS with its kernel_scale: a refit after a change to the
    replay starts where the last fit ended; a GPU's first kernel fit starts from its roofline
    profile, kernel_scale 1.3). `kernel_scale` given: the search starts there."""
    fitted = FITTED_KERNELS if kernels and gpu in FITTED_KERNELS else FITTED
    start = START.copy()
    if from_fitted and gpu in fitted:
        d = fitted[gpu].for_layers(ref_layers)
        start = np.array(
            [d.mfu, d.mfu_attn, d.mbu, d.overhead_s * 1000, d.overhead_per_seq_s * 1000]
        )
    if kernels:  # the kernel profile's, or a little above the tables as measured
        refit = from_fitted and fitted is FITTED_KERNELS
        start[1] = fitted[gpu].profile.kernel_scale if refit else 1.3
    if kernels and kernel_scale is not None:
        start[1] = kernel_scale
    return start


def at_depth(params: dict, run: PublicRun, ref_layers: int) -> dict:
    """The knobs for `run`: the overheads are searched for a `ref_layers`-deep model and scale
    with the run's model depth, as sim/cost/profiles.py scales a fitted profile."""
    k = get_model(run.model).layers / ref_layers
    return {
        **params,
        "overhead_ms": params["overhead_ms"] * k,
        "overhead_per_seq_ms": params["overhead_per_seq_ms"] * k,
    }


def pairs(run: PublicRun, params: dict) -> list[tuple[str, float, float]]:
    """(metric, simulated, measured) for each figure the run publishes; None when it fails."""
    try:
        pred = replay(run, params)
    except ValueError:
        return []
    if run.specs:
        meas = run.measured
        return [
            ("ttft", pred.ttft_s.mean(), meas.ttft_s.mean()),
            ("ttft", pred.ttft_s.median(), meas.ttft_s.median()),
            ("ttft", np.percentile(pred.ttft_s.dropna(), 90), np.percentile(meas.ttft_s, 90)),
            ("tpot", pred.tpot_s.mean(), meas.tpot_s.mean()),
            (
                "tpot",
                np.percentile(pred.tpot_s.dropna(), 90),
                np.percentile(meas.tpot_s.dropna(), 90),
            ),
            ("e2e", pred.e2e_s.mean(), meas.e2e_s.mean()),
        ]
    return [
        ("ttft", mean_of(pred, "ttft_s"), run.measured_means["ttft_s"]),
        ("tpot", mean_of(pred, "tpot_s"), run.measured_means["tpot_s"]),
    ]


def _pairs(args):
    return pairs(*args)


METRICS = ("ttft", "tpot", "e2e")
# `--metrics tpot`: fit the profile on the runs' TPOT alone, then the client-side latency on the
# TTFT of the runs where the engine adds least to it (`intercept_runs`: the shortest prompts at
# the fewest clients: one prefill, no queue). Each figure is fitted where the measurements
# isolate it. A closed loop's mean TPOT is set by the work each step carries (how many prefill
# tokens ride with the decodes, over the whole run), so it tests the step costs; its mean TTFT
# also depends on WHEN the clients' prefills meet, which the replay can only assume (clients at
# random phases: fidelity_closed_loop.CLOSED_LOOP_DEFAULT), and on the client. Fitted on both, the
# kernel path's kernel_scale carried TTFT's part: 1.73 on H100 where the fit runs' TPOT alone wants
# 1.14, a sustained-clock factor; the knee (bench_knee.py), a steady-state rate, then came out
# 14-25% low on the H100 sweeps. Fitted on every TTFT, the latency took what the replay misses
# in long prompts' TTFT at low load too: H100's fit runs (Qwen3-32B, vLLM 0.12) take 0.19 ms a
# prompt token at TP2 going from 1024 to 4096 tokens in at 8 clients, twice the 0.10 ms of the
# 70B FP8 runs on the same GPU (which the tables reproduce), and every TTFT fitted at once set
# H100's latency to 140 ms, above the 91-93 ms that its own 1024-token runs at TP8 and 8
# clients measure for the whole TTFT.
METRICS_TPOT = ("tpot",)


# Client-side latency a closed-loop benchmark adds to every TTFT (HTTP, tokenization, the
# serving frontend): searched on this grid for each profile, seconds.
LATENCY_GRID = np.linspace(0.0, 0.3, 61)
# Closed-loop TTFTs are fitted at every concurrency. Until the replay weighed in the burst
# that starts the benchmark's measured phase (fidelity_closed_loop.burst_wave) they were fitted only
# up to 8 clients: above that the measured TTFT grew far faster than the simulated queueing,
# and fitting it dragged MFU to implausible values. The burst is most of that growth.


def loss(
    results: list[list],
    runs: list[PublicRun],
    latency: float,
    metrics: tuple[str, ...] = METRICS,
) -> float:
    """Mean over runs of the mean squared log error of `metrics`; closed-loop TTFTs get
    `latency` added."""
    per_run = []
    for run, res in zip(runs, results, strict=True):
        res = [x for x in res if x[0] in metrics] if res else res
        if not res:
            per_run.append(9.0)
            continue
        errs = []
        for metric, p, m in res:
            if not run.specs and metric == "ttft":
                p = p + latency
            errs.append(math.log(p / m) if p == p and p > 0 and m > 0 else 3.0)
        per_run.append(float(np.mean(np.square(errs))))
    return float(np.mean(per_run))


def intercept_runs(runs: list[PublicRun]) -> list[PublicRun]:
    """The closed-loop runs at the shortest prompt length, and among those at the fewest
    clients: where a TTFT is mostly the client's latency (METRICS_TPOT)."""
    closed = [r for r in runs if not r.specs]
    if not closed:
        return []
    isl = min(r.isl for r in closed)
    fewest = min(r.concurrency for r in closed if r.isl == isl)
    return [r for r in closed if r.isl == isl and r.concurrency == fewest]


class Objective:
    """Mean squared log error over the fit runs (each run weighs the same), at the best
    client-side latency for closed-loop runs (none for per-request traces)."""

    def __init__(
        self,
        runs: list[PublicRun],
        jobs: int,
        ref_layers: int,
        extra: dict | None = None,
        latency: float | None = None,
        metrics: tuple[str, ...] = METRICS,
    ) -> None:
        self.runs, self.jobs, self.ref_layers = runs, jobs, ref_layers
        self.metrics = metrics
        self.extra = extra or {}  # knobs held fixed during the search (e.g. step_costs)
        self.kernels = self.extra.get("step_costs") == "kernels"
        self.pool = ProcessPoolExecutor(jobs) if jobs > 1 else None
        self.calls = 0
        self.closed = any(not r.specs for r in runs)
        # the client-side latency searched on LATENCY_GRID, or held at `latency`
        self.grid = LATENCY_GRID if latency is None else [latency]
        self.best: tuple[float, np.ndarray, float] = (math.inf, np.zeros(len(NAMES)), 0.0)

    def evaluate(self, x: np.ndarray) -> tuple[float, float]:
        params = {**to_params(x, self.kernels), **self.extra}
        work = [(r, at_depth(params, r, self.ref_layers)) for r in self.runs]
        results = list(self.pool.map(_pairs, work)) if self.pool else [_pairs(w) for w in work]
        if "ttft" not in self.metrics:  # the latency is fitted afterwards (fit_latency)
            return loss(results, self.runs, 0.0, self.metrics), 0.0
        grid = self.grid if self.closed else [0.0]
        value, latency = min((loss(results, self.runs, lat, self.metrics), lat) for lat in grid)
        return value, latency

    def fit_latency(self, x: np.ndarray) -> tuple[float, float]:
        """(client latency on LATENCY_GRID that fits the TTFT of `intercept_runs` at profile
        x, the loss over every metric of every run there)."""
        params = {**to_params(x, self.kernels), **self.extra}
        work = [(r, at_depth(params, r, self.ref_layers)) for r in self.runs]
        results = list(self.pool.map(_pairs, work)) if self.pool else [_pairs(w) for w in work]
        grid = self.grid if self.closed else [0.0]
        keep = {id(r) for r in intercept_runs(self.runs)}
        pick = [i for i, r in enumerate(self.runs) if id(r) in keep]
        runs, res = [self.runs[i] for i in pick], [results[i] for i in pick]
        latency = min(grid, key=lambda lat: loss(res, runs, lat, ("ttft",)))
        return latency, loss(results, self.runs, latency)

    def __call__(self, x: np.ndarray) -> float:
        self.calls += 1
        value, latency = self.evaluate(x)
        if value < self.best[0]:
            self.best = (value, x, latency)
            p = to_params(x, self.kernels)
            second = "kernel_scale" if self.kernels else "mfu_attn"
            print(
                f"  [{self.calls}] {math.sqrt(value):.3f}: mfu {p['mfu']:.3f} {second} "
                f"{p[second]:.3f} mbu {p['mbu']:.3f} overhead {p['overhead_ms']:.2f} ms"
                f" + {p['overhead_per_seq_ms'] * 1000:.0f} us/seq, latency "
                f"{latency * 1000:.0f} ms",
                flush=True,
            )
        return value


def nelder_mead(f, x0: np.ndarray, iters: int, step: float = 0.4) -> tuple[np.ndarray, float]:
    """Plain Nelder-Mead (reflection 1, expansion 2, contraction 0.5, shrink 0.5)."""
    n = len(x0)
    simplex = [x0] + [x0 + step * np.eye(n)[i] for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iters):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        xr = centroid + (centroid - simplex[-1])
        fr = f(xr)
        if fr < values[0]:
            xe = centroid + 2 * (centroid - simplex[-1])
            fe = f(xe)
            simplex[-1], values[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = xr, fr
        else:
            xc = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(xc)
            if fc < values[-1]:
                simplex[-1], values[-1] = xc, fc
            else:
                simplex = [simplex[0]] + [simplex[0] + 0.5 * (s - simplex[0]) for s in simplex[1:]]
                values = [values[0]] + [f(s) for s in simplex[1:]]
        if max(values) - min(values) < 1e-5:
            break
    best = int(np.argmin(values))
    return simplex[best], values[best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder of the public runs (see bench/fidelity_runs.py)")
    parser.add_argument("--gpu", help="fit only this GPU")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--iters", type=int, default=80, help="Nelder-Mead iterations")
    parser.add_argument("--max-runs", type=int, default=0, help="subsample the fit set (0 = all)")
    parser.add_argument(
        "--from-fitted",
        action="store_true",
        help="start from the GPU's profile in sim/cost/profiles.py (a refit after a "
        "change to the replay), not from the generic one",
    )
    parser.add_argument(
        "--keep-latency",
        action="store_true",
        help="hold the client-side latency at fidelity_runs.CLIENT_LATENCY_S (the benchmark "
        "client's, fitted with the roofline profile) instead of searching it",
    )
    parser.add_argument(
        "--kernel-scale",
        type=float,
        default=None,
        help="--step-costs kernels: kernel_scale to start from (default 1.3, or the fitted one "
        "with --from-fitted; 1.0 with --hold kernel_scale: the tables' compute as measured, "
        "only the overheads fitted)",
    )
    parser.add_argument(
        "--hold",
        default="",
        help="comma-separated figures kept at their starting values (with --from-fitted: the "
        "GPU's fitted profile), e.g. mfu,mbu for --step-costs kernels, where they price only "
        "what no table covers (lm_head, sampling, KV writes)",
    )
    parser.add_argument(
        "--step-costs",
        default="roofline",
        help="kernels: fit the profile for runs priced from the measured kernel tables "
        "(requirements-kernels.txt); MFU and MBU then price only what no table covers",
    )
    parser.add_argument(
        "--metrics",
        default=",".join(METRICS),
        help="the figures the profile is fitted on (ttft, tpot, e2e); without ttft the client "
        "latency is then fitted on TTFT alone (see METRICS_TPOT)",
    )
    args = parser.parse_args()
    metrics = tuple(m for m in args.metrics.split(",") if m)
    if not metrics or set(metrics) - set(METRICS):
        parser.error(f"--metrics takes some of {', '.join(METRICS)}")
    extra = {"step_costs": args.step_costs} if args.step_costs != "roofline" else {}
    runs, _ = load_runs(args.data)
    for gpu in FIT_RULES:
        if args.gpu and gpu != args.gpu:
            continue
        fit = select(runs, gpu=gpu, fit=True)
        if args.max_runs and len(fit) > args.max_runs:
            fit = fit[:: math.ceil(len(fit) / args.max_runs)]
        if not fit:
            print(f"{gpu}: no fit runs found")
            continue
        started = time.perf_counter()
        # Overheads are per layer (sim/cost/profiles.py): searched for the fit set's commonest
        # depth.
        depths = Counter(get_model(r.model).layers for r in fit)
        ref_layers = depths.most_common(1)[0][0]
        latency = CLIENT_LATENCY_S.get(gpu, 0.0) if args.keep_latency else None
        f = Objective(fit, args.jobs, ref_layers, extra, latency, metrics)
        start = start_point(gpu, ref_layers, f.kernels, args.from_fitted, args.kernel_scale)
        kx = f.kernels
        x0 = to_x(start, kx)
        names = [("kernel_scale" if kx and n == "mfu_attn" else n) for n in NAMES]
        held = [i for i, n in enumerate(names) if n in args.hold.split(",")]
        free = [i for i in range(len(NAMES)) if i not in held]

        def full(xf: np.ndarray, x0=x0, free=free) -> np.ndarray:
            x = x0.copy()
            x[free] = xf
            return x

        before = f(x0)
        step = 0.2 if args.from_fitted else 0.4
        xf, value = nelder_mead(lambda xf, f=f: f(full(xf)), x0[free], args.iters, step=step)
        x = full(xf)
        latency, overall = f.best[2], value
        if "ttft" not in metrics:
            latency, overall = f.fit_latency(x)
        if f.pool:
            f.pool.shutdown()
        p = to_params(x, kx)
        second = "kernel_scale" if kx else "mfu_attn"
        print(
            f"# {gpu}: {len(fit)} fit runs, {f.calls} replays of them, "
            f"{time.perf_counter() - started:.0f} s; RMS log error of {','.join(metrics)} "
            f"{math.sqrt(before):.3f} (start) -> {math.sqrt(value):.3f}, of every figure "
            f"{math.sqrt(overall):.3f}; client latency {latency * 1000:.0f} ms"
        )
        print(
            f'"{gpu}": DeviceProfile(mfu={p["mfu"]:.3f}, {second}={p[second]:.3f}, '
            f"mbu={p['mbu']:.3f}, overhead_s={p['overhead_ms'] / 1000:.5f}, "
            f"overhead_per_seq_s={p['overhead_per_seq_ms'] / 1000:.7f}),  "
            f"# layers {ref_layers}, client latency {latency:.3f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
