"""One per-request overhead for every GPU's kernel profile: the joint fit behind FITTED_KERNELS.

Notable features
- The per-request overhead (work for each running request in each step: scheduling, input
  preparation, sampling, output processing, per request and per layer) is the ENGINE's CPU and
  launch work, not the GPU's. Fitted per GPU on one model's runs each (bench/fit_profiles.py),
  it came out 2.6 us a request on H200 (80 layers), 32 us on B200 (80 layers) and 48 us on
  H100 (64 layers): a fit set of 4-128 clients barely tells it from kernel_scale, and H200's
  held-out runs at 512 clients (Llama-3.1-8B on SGLang) came out 11% short in TPOT.
- So it is fitted once for all three, per layer: for each value on `--grid` (us per request per
  layer), every GPU's kernel_scale and per-step overhead are refitted on its fit runs' TPOT
  with that value held (`fit_profiles.Objective`, the same replay and loss; MFU and MBU held at
  the fitted ones), and the values are scored by the summed squared log error over all fit runs
  (each run weighs the same). The best one's profiles print as Python for
  `sim/cost/profiles.py` FITTED_KERNELS, with each GPU's client latency refitted on its
  shortest prompts at the fewest clients (`Objective.fit_latency`).
- The RTX PRO 6000's profile is fitted on its one per-request trace, every figure
  (fit_profiles.py), and is not part of the joint fit: its own fit lands at 0.55 us a request
  per layer.

Run: PDLAB_FIDELITY_DATA=... .venv/bin/python bench/fit_shared_overhead.py [--grid 0.4,0.5,0.6]
     [--iters 20] [--jobs 2]   (about 2 minutes a value on 2 cores)
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # import fidelity_*, fit_profiles

from fidelity_runs import load_runs, select  # noqa: E402
from fit_profiles import NAMES, Objective, nelder_mead, start_point, to_params, to_x  # noqa: E402

from sim.cost.hardware import get_model  # noqa: E402

GPUS = ("H100-SXM", "H200", "B200")  # the kernel profiles fitted on closed-loop TPOT
FREE = ("mfu_attn", "overhead_ms")  # searched: kernel_scale (NAMES' 2nd slot) and the step's
PER_SEQ = NAMES.index("overhead_per_seq_ms")


def refit(objective: Objective, gpu: str, ref_layers: int, per_layer_us: float, iters: int):
    """(sum of squared log errors over the fit runs, profile knobs, client latency s) with the
    per-request overhead held at `per_layer_us` x the fit model's layers."""
    start = start_point(gpu, ref_layers, kernels=True, from_fitted=True)
    start[PER_SEQ] = per_layer_us * ref_layers / 1000  # ms a request, at the fit model's depth
    x0 = to_x(start, kernels=True)
    free = [NAMES.index(n) for n in FREE]

    def full(xf):
        x = x0.copy()
        x[free] = xf
        return x

    objective.best = (math.inf, x0, 0.0)
    xf, value = nelder_mead(lambda xf: objective(full(xf)), x0[free], iters, step=0.2)
    x = full(xf)
    latency, _ = objective.fit_latency(x)
    return value * len(objective.runs), to_params(x, kernels=True), latency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder of the public runs (see bench/fidelity_runs.py)")
    parser.add_argument("--grid", default="0.4,0.5,0.6", help="us a request per layer")
    parser.add_argument("--iters", type=int, default=20, help="Nelder-Mead iterations per fit")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    try:
        grid = [float(v) for v in args.grid.split(",")]
    except ValueError:
        parser.error(f"--grid takes numbers separated by commas, got {args.grid!r}")
    runs, _ = load_runs(args.data)
    scored = []
    objectives = {}
    for gpu in GPUS:
        fit = select(runs, gpu=gpu, fit=True)
        depth = Counter(get_model(r.model).layers for r in fit).most_common(1)[0][0]
        objectives[gpu] = (
            Objective(fit, args.jobs, depth, {"step_costs": "kernels"}, None, ("tpot",)),
            depth,
        )
    for value in grid:
        started = time.perf_counter()
        total, fitted = 0.0, {}
        for gpu, (objective, depth) in objectives.items():
            sse, params, latency = refit(objective, gpu, depth, value, args.iters)
            total += sse
            fitted[gpu] = (params, latency, depth, math.sqrt(sse / len(objective.runs)))
        scored.append((total, value, fitted))
        rms = ", ".join(f"{g} {f[3]:.4f}" for g, f in fitted.items())
        print(
            f"{value:.2f} us/layer: summed squared log error {total:.4f} (RMS TPOT {rms}); "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
    for objective, _ in objectives.values():
        if objective.pool:
            objective.pool.shutdown()
    total, value, fitted = min(scored, key=lambda s: s[0])
    print(f"# best: {value:.2f} us a request per layer (summed squared log error {total:.4f})")
    for gpu, (p, latency, depth, _) in fitted.items():
        print(
            f'"{gpu}": ({p["kernel_scale"]:.3f}, {p["overhead_ms"] / 1000:.5f}, '
            f"{value * depth / 1e6:.7f}),  # {depth} layers, client latency {latency * 1000:.0f} ms"
        )


if __name__ == "__main__":
    main()
