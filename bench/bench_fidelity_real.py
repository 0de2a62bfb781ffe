"""How far to trust the simulator: scored against every public run of a real server it can read.

Notable features
- Reads the public runs (`bench/fidelity_runs.py`: LLMServingSim's per-request vLLM traces on
  the RTX PRO 6000 and RTX 4090, aiconfigurator's mean TTFT/TPOT of vLLM and SGLang on H100,
  H200 and B200) and replays each with the same arrivals or closed loop, lengths, scheduler
  settings, parallelism and KV capacity, under the GPU's default (fitted) profile.
- Errors are signed: (simulated − measured) / measured, + = the simulator is too slow. Per run:
  mean and p90 of TTFT, TPOT and E2E where the source has requests; the mean only where it
  publishes means (closed-loop points).
- A physics check of the measurements themselves: `prompt_load`, the share of the GPUs' matmul
  peak that a run's measured throughput needs for its prompts' linear layers alone (the table's
  "load" column: the most of any run in the group). Near 1, the measured server cannot have
  prefilled every prompt (prefix-cache hits the source does not state), and no replay that
  prefills them all can match it. Sharper: `kernel_load` (bench/fidelity_load.py), the same
  throughput priced by the measured kernels themselves; a run above 1 needs more GPU time for
  its prompts alone than a second holds; `step_load` adds the decode steps its measured TPOT
  implies (above 1.3, its TPOT is shorter than the kernels can step). Such runs are counted
  ("over") and named, and the
  overall figures are given twice: over every run, and over the runs a cache-free server can
  produce ("feasible").
- Every run is marked fit (its GPU's profile was fitted on it, `bench/fit_profiles.py`) or
  held out; the summary keeps them apart, per GPU, model and engine.
- Writes `assets/fidelity/report.json`, which the app's "How far to trust these numbers"
  section reads: the summary, the fitted profiles, and one point per GPU, model, engine and
  parallelism (geometric means over its runs). Only derived figures: the public measurements
  stay outside the project.

Run: .venv/bin/python bench/bench_fidelity_real.py [--gpu H200] [--max-osl 1024] [--jobs 2]
     [--data DIR] [--json FILE] [--profile generic]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # import fidelity_*

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from fidelity_load import STEP_INFEASIBLE, kernel_load, step_load  # noqa: E402
from fidelity_load import infeasible as too_fast  # noqa: E402
from fidelity_replay import replay, score, score_failed  # noqa: E402
from fidelity_runs import client_latency, load_runs, select  # noqa: E402

from sim.cost.profiles import fitted_profile  # noqa: E402

REPORT = Path(__file__).resolve().parents[1] / "assets" / "fidelity" / "report.json"
METRICS = ("ttft", "tpot", "e2e")


def _score_one(args: tuple) -> dict:
    run, overrides, prompt_pool, start, send_delay_s = args
    started = time.perf_counter()
    costs = (overrides or {}).get("step_costs", "roofline")
    try:
        row = score(run, replay(run, overrides, prompt_pool, start, send_delay_s), costs)
    except ValueError as err:  # a deployment the simulator refuses (e.g. it does not fit)
        row = {**score_failed(run), "error": str(err)}
    row["kernel_load"] = kernel_load(run)  # (NaN without the kernel tables)
    row["step_load"] = step_load(run)  # ... with the decode steps (NaN for traces too)
    row["sim_s"] = time.perf_counter() - started
    return row


def score_runs(
    runs,
    overrides: dict | None = None,
    jobs: int = 1,
    prompt_pool: int = 0,
    start: str | None = None,
    send_delay_s: float = 0.0,
) -> pd.DataFrame:
    """One row per run: measured and predicted means, signed % errors (closed loops drawing
    from `prompt_pool` prompts when > 0: fidelity_closed_loop.AIPERF_PROMPTS; their clients started
    as `start` says, None = as each engine keeps them, and each send `send_delay_s` late on
    average: fidelity_replay.replay)."""
    work = [(r, overrides, prompt_pool, start, send_delay_s) for r in runs]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            rows = list(pool.map(_score_one, work, chunksize=4))
    else:
        rows = [_score_one(w) for w in work]
    return pd.DataFrame(rows)


def summarize(scores: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, model, engine and fit/held-out: how many runs, mean signed error and mean
    absolute error of each metric's mean, and the mean signed p90 error where it exists."""
    rows = []
    keys = ["gpu", "model", "engine_name", "fit"]
    df = scores.assign(engine_name=scores["engine"].str.split(" ").str[0])
    for key, g in df.groupby(keys, sort=False):
        row = dict(zip(keys, key, strict=True))
        row["runs"] = len(g)
        row["source"] = ", ".join(sorted(set(g["source"])))
        row["parallel"] = ", ".join(sorted(set(g["parallel"])))
        # The most compute any of its runs' measurements need for the prompts alone, as a share
        # of peak (fidelity_replay.prompt_load): near 1, a cache-free replay cannot match them.
        row["prompt_load_max"] = float(g["prompt_load"].max()) if "prompt_load" in g else math.nan
        # ... and by the measured kernels (fidelity_load.kernel_load): the runs above 1.
        kload = g["kernel_load"] if "kernel_load" in g else pd.Series(dtype=float)
        row["kernel_load_max"] = float(kload.max()) if kload.notna().any() else math.nan
        row["step_load_max"] = float(g["step_load"].max()) if "step_load" in g else math.nan
        row["over"] = int(over_mask(g).sum())
        for m in METRICS:
            e = g[f"{m}_mean_err"].dropna()
            row[f"{m}_bias"] = float(e.mean()) if len(e) else math.nan
            row[f"{m}_mape"] = float(e.abs().mean()) if len(e) else math.nan
            p90 = g[f"{m}_p90_err"].dropna()
            row[f"{m}_p90_err"] = float(p90.mean()) if len(p90) else math.nan
        rows.append(row)
    out = pd.DataFrame(rows).rename(columns={"engine_name": "engine"})
    return out.sort_values(["gpu", "fit", "model", "engine"], ascending=[True, False, True, True])


def overall(scores: pd.DataFrame) -> dict:
    """Mean absolute errors over every held-out run and every fitted one; and again over those
    a cache-free server can produce ("_feasible": kernel_load at most INFEASIBLE or unknown)."""
    out = {}
    over = over_mask(scores)
    sets = [(fit, g, "") for fit, g in scores.groupby("fit")]
    sets += [(fit, g, "_feasible") for fit, g in scores[~over].groupby("fit")]
    for fit, g, suffix in sets:
        name = ("fit" if fit else "held_out") + suffix
        out[name] = {"runs": len(g)}
        for m in METRICS:
            e = g[f"{m}_mean_err"].dropna()
            out[name][f"{m}_mape"] = float(e.abs().mean()) if len(e) else math.nan
            out[name][f"{m}_bias"] = float(e.mean()) if len(e) else math.nan
    return out


def over_mask(scores: pd.DataFrame) -> pd.Series:
    """Per run: could no cache-free server have measured it (fidelity_load.infeasible)?"""
    if "kernel_load" not in scores:
        return pd.Series(False, index=scores.index)
    steps = scores["step_load"] if "step_load" in scores else pd.Series(math.nan, scores.index)
    return pd.Series(
        [too_fast(k, s) for k, s in zip(scores["kernel_load"], steps, strict=True)],
        index=scores.index,
    )


def infeasible(scores: pd.DataFrame) -> list[dict]:
    """The runs no cache-free server could have measured (fidelity_load.infeasible), most
    impossible first: key, GPU, model, engine, kernel_load (prompts), step_load (all steps)."""
    if "kernel_load" not in scores:
        return []
    over = scores[over_mask(scores)].copy()
    if "step_load" not in over:
        over["step_load"] = math.nan
    over = over.sort_values(["kernel_load", "step_load"], ascending=False)
    return over[["key", "gpu", "model", "engine", "kernel_load", "step_load"]].to_dict("records")


def _fmt(v: float) -> str:
    return "    -" if v != v else f"{v:+5.0f}"


def print_summary(summary: pd.DataFrame) -> None:
    print(
        f"{'GPU':13s} {'model':20s} {'engine':7s} {'set':8s} {'runs':>4s} | "
        f"{'TTFT bias':>9s} {'|err|':>5s} {'p90':>5s} | {'TPOT bias':>9s} {'|err|':>5s} "
        f"{'p90':>5s} | {'E2E bias':>8s} {'|err|':>5s} | {'load':>4s} {'kload':>5s} {'sload':>5s} "
        f"{'over':>4s}"
    )
    for _, r in summary.iterrows():
        print(
            f"{r.gpu:13s} {r.model:20s} {r.engine:7s} {'fit' if r.fit else 'held-out':8s} "
            f"{r.runs:4d} | {_fmt(r.ttft_bias):>9s} {r.ttft_mape:5.0f} {_fmt(r.ttft_p90_err)} | "
            f"{_fmt(r.tpot_bias):>9s} {r.tpot_mape:5.0f} {_fmt(r.tpot_p90_err)} | "
            f"{_fmt(r.e2e_bias):>8s} {r.e2e_mape:5.0f} | {r.prompt_load_max:4.2f} "
            f"{r.kernel_load_max:5.2f} {r.step_load_max:5.2f} {r.over:4d}"
        )


def points(scores: pd.DataFrame) -> pd.DataFrame:
    """The plot's points: one per GPU, model, engine, parallelism and fit/held-out, the
    geometric mean of its runs' measured and simulated means (derived figures only: the public
    measurements themselves stay outside the project)."""
    keys = ["source", "gpu", "model", "engine", "parallel", "kind", "fit"]
    rows = []
    for key, g in scores.groupby(keys, sort=True):
        row = dict(zip(keys, key, strict=True))
        row["n"] = len(g)
        for m in METRICS:
            for side in ("measured", "predicted"):
                v = g[f"{m}_{side}_mean"].dropna()
                v = v[v > 0]
                row[f"{m}_{side}_mean"] = float(np.exp(np.log(v).mean())) if len(v) else math.nan
            e = g[f"{m}_mean_err"].dropna()
            row[f"{m}_mean_err"] = float(e.mean()) if len(e) else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def report_json(
    scores: pd.DataFrame,
    summary: pd.DataFrame,
    skipped,
    elapsed: float,
    step_costs: str = "roofline",
) -> dict:
    """What the app shows: the summary, the plot's points, the profiles and the sources."""
    profiles = {}
    kernels = step_costs == "kernels"
    for g in sorted(set(scores["gpu"])):
        p, note = fitted_profile(g, kernels=kernels)
        profiles[g] = {
            "note": note,
            "mfu": p.mfu,
            "mfu_attn": p.mfu_attn,
            "mbu": p.mbu,
            "overhead_ms": p.overhead_s * 1000,
            "overhead_per_seq_us": p.overhead_per_seq_s * 1e6,
            "client_latency_ms": client_latency(g, step_costs) * 1000,
        }
        if kernels:
            profiles[g]["kernel_scale"] = p.kernel_scale

    def clean(records):
        return [
            {k: (None if isinstance(v, float) and v != v else v) for k, v in r.items()}
            for r in records
        ]

    return {
        "about": "Simulator vs public measurements of real vLLM/SGLang servers; errors are "
        "signed % (simulated - measured) / measured. Sources: casys-kaist/LLMServingSim "
        "bench/examples (MIT), ai-dynamo/aiconfigurator silicon_sample.csv (Apache-2.0).",
        "command": "python bench/bench_fidelity_real.py"
        + (f" --step-costs {step_costs}" if step_costs != "roofline" else ""),
        "elapsed_s": round(elapsed, 1),
        "profiles": profiles,
        "overall": overall(scores),
        "infeasible": infeasible(scores),
        "summary": clean(summary.to_dict("records")),
        "runs": clean(points(scores).to_dict("records")),
        "skipped": dict(skipped),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", help="folder of the public runs (see bench/fidelity_runs.py)")
    parser.add_argument("--gpu", help="only this GPU (catalog name)")
    parser.add_argument("--max-osl", type=int, help="skip closed-loop runs with longer outputs")
    parser.add_argument("--jobs", type=int, default=1, help="processes")
    parser.add_argument("--profile", default="fitted", help="fitted (default) or generic")
    parser.add_argument(
        "--step-costs",
        default="roofline",
        help="roofline (default) or kernels: linear layers, attention, MoE and all-reduces from "
        "measured tables (requirements-kernels.txt) with the kernel profiles; writes "
        "assets/fidelity/report_kernels.json",
    )
    parser.add_argument("--json", default=str(REPORT), help="where to write the report ('' = no)")
    parser.add_argument("--csv", help="also write one row per run here")
    parser.add_argument(
        "--prompt-pool",
        type=int,
        default=0,
        help="what-if: closed-loop requests draw from this many prompts, as "
        "aiperf's 100 synthetic ones (prefix-cache hits); the app's report "
        "is not overwritten",
    )
    parser.add_argument(
        "--closed-loop-start",
        choices=("together", "random", "even", "aiperf"),
        help="what-if: every closed loop's clients start this way "
        "(fidelity_closed_loop.closed_loop) instead of as their engine keeps them, or "
        "'aiperf': the benchmark's whole measured phase (fidelity_closed_loop.AIPERF_PHASE); "
        "the app's report is not overwritten",
    )
    parser.add_argument(
        "--send-delay-ms",
        type=float,
        default=0.0,
        help="what-if: each closed-loop client sends its next request this many ms after its "
        "last one finished, on average (exponential); the app's report is not overwritten",
    )
    args = parser.parse_args()
    if not (args.send_delay_ms >= 0 and math.isfinite(args.send_delay_ms)):
        parser.error("--send-delay-ms must be 0 or more")
    if (args.closed_loop_start or args.send_delay_ms) and args.json == str(REPORT):
        args.json = ""  # (the app shows the report of the replay as scored)
    if args.prompt_pool < 0:
        parser.error("--prompt-pool must be 0 (every prompt its own) or more")
    if args.prompt_pool and args.json == str(REPORT):
        args.json = ""  # (the app shows the report of the replay as scored: no pool)
    started = time.perf_counter()
    runs, skipped = load_runs(args.data)
    runs = select(runs, gpu=args.gpu, max_osl=args.max_osl)
    print(
        f"{len(runs)} public runs ({sum(r.fit for r in runs)} fit, "
        f"{sum(not r.fit for r in runs)} held out); skipped: "
        f"{', '.join(f'{v} {k}' for k, v in skipped.most_common())}",
        flush=True,
    )
    overrides = {"profile": args.profile} if args.profile != "fitted" else {}
    if args.step_costs != "roofline":
        overrides["step_costs"] = args.step_costs
        if args.json == str(REPORT):  # shown beside the roofline's on Prefill vs decode
            args.json = str(REPORT.with_name(f"report_{args.step_costs}.json"))
    overrides = overrides or None
    scores = score_runs(
        runs,
        overrides,
        args.jobs,
        args.prompt_pool,
        args.closed_loop_start,
        args.send_delay_ms / 1000,
    )
    summary = summarize(scores)
    print_summary(summary)
    for name, o in overall(scores).items():
        print(
            f"{name:17s} {o['runs']:4d} runs: mean |error| TTFT {o['ttft_mape']:.0f}%, "
            f"TPOT {o['tpot_mape']:.0f}%, E2E {o['e2e_mape']:.0f}%"
        )
    over = infeasible(scores)
    print(
        f"{len(over)} runs need more of the measured kernels than a second holds (prompts > 1 s "
        f"a second, or prompts and decode steps > {STEP_INFEASIBLE} s): kernel_load, step_load"
    )
    for r in over:
        print(f"  {r['kernel_load']:.2f} {r['step_load']:5.2f}  {r['key']}")
    elapsed = time.perf_counter() - started
    print(f"({elapsed:.0f} s)")
    if args.csv:
        scores.to_csv(args.csv, index=False)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        report = report_json(scores, summary, skipped, elapsed, args.step_costs)
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
