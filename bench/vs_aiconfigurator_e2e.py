"""The public runs' means from aiconfigurator-core's own end-to-end estimate, beside ours.

Notable features
- A baseline for the report's errors (issue 30, item 3). aiconfigurator-core prices a whole
  aggregated deployment too, not just a step: `BaseBackend.run_agg` (aiconfigurator_core/sdk/
  backends/base_backend.py, 0.12.0) takes a batch size b, prompt and output lengths and the
  prompt tokens per step (`ctx_tokens`), and returns a mean TTFT and TPOT from the same kernel
  tables, by a closed formula: ceil(isl x b / ctx_tokens) mixed steps, then decode-only steps;
  TTFT = one prompt's prefill steps + a per-layer dispatch cost (vLLM: 0.8 ms a layer) times a
  queueing factor of b. No queue forms beyond the batch: b is all running at once.
- Here b is the run's client count (a closed loop keeps that many requests in the server) and
  ctx_tokens one prompt, or the engine's step budget where a prompt is longer (vLLM's
  max_num_batched_tokens, SGLang's chunked_prefill_size, as the replay sets them): the estimator
  prices every mixed step at ctx_tokens prompt tokens, and its vLLM backend assumes one prompt
  per mixed step (vllm_backend.py `_mix_step_gen_tokens`: vLLM's max_num_partial_prefills = 1).
  A whole budget per step (16,384 tokens on an H200) priced 4 clients of 1,024 tokens at
  several times their measured TTFT. The tables, GEMM and KV formats are the
  ones bench/vs_aiconfigurator.py gives its step-by-step check, on each engine's release that
  aiconfigurator-core calls current (vLLM 0.24.0, SGLang 0.5.14): the estimator refuses older.
- Where b requests' KV cache does not fit (`check_kv_cache_oom`) or the weights do not
  (`check_oom`), the estimate does not exist: the closed formula has no queue to send the rest
  to. Those runs are counted, not scored. Both models are scored on the runs the estimator can
  price, so the comparison is like for like; ours on all runs is the report's.
- Not held out for them: aiconfigurator's vLLM TTFT heuristics (the dispatch cost, the queueing
  factor) were calibrated on its silicon corpus (vllm_backend.py comments: 1,928 vLLM agg
  entries), of which these rows are a sample (silicon_sample.csv). Ours fit each GPU's profile
  on the fit runs only.
- `--write` also saves the held-out figures per GPU (and for all GPUs) to
  assets/fidelity/baseline_aiconfigurator.json, which the Prefill vs decode page's trust panel
  quotes beside the kernel-table report.

Run: .venv/bin/python bench/bench_fidelity_real.py --step-costs kernels --csv runs.csv
     .venv/bin/python bench/vs_aiconfigurator_e2e.py runs.csv [--write]
     (needs requirements-kernels.txt)
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import logging
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # import fidelity_*, vs_*

from fidelity_load import infeasible  # noqa: E402
from fidelity_runs import PublicRun, load_runs  # noqa: E402
from vs_aiconfigurator import AIC_MODELS, CURRENT, aic_modes  # noqa: E402

from sim.cost.hardware import get_gpu, get_model  # noqa: E402
from sim.cost.kernel_data import TABLE_GPUS, available  # noqa: E402

METRICS = ("ttft", "tpot", "e2e")
BASELINE_PATH = Path(__file__).resolve().parents[1] / "assets/fidelity/baseline_aiconfigurator.json"
COMMAND = "python bench/vs_aiconfigurator_e2e.py runs.csv --write"
ENGINES = {"vllm": "vllm", "sglang": "sglang"}  # our policy -> aiconfigurator's backend name


@functools.cache
def _estimator(backend: str, system: str, model: str, tensor_parallel: int, whole: bool):
    """(backend, model, database) of aiconfigurator-core for one deployment of one of our
    models (cached), with the settings bench/vs_aiconfigurator.py gives its compiled engine."""
    from aiconfigurator_core.sdk import common
    from aiconfigurator_core.sdk.backends.factory import get_backend
    from aiconfigurator_core.sdk.config import ModelConfig
    from aiconfigurator_core.sdk.models import get_model as aic_model
    from aiconfigurator_core.sdk.perf_database import get_database

    modes = aic_modes(get_model(model), tensor_parallel, whole)
    enums = {  # ModelConfig takes the modes as enums, EngineHandle.compile as names
        "gemm_quant_mode": common.GEMMQuantMode,
        "moe_quant_mode": common.MoEQuantMode,
        "kvcache_quant_mode": common.KVCacheQuantMode,
        "fmha_quant_mode": common.FMHAQuantMode,
    }
    for key, enum in enums.items():
        modes[key] = enum[modes[key]] if modes[key] else None
    built = aic_model(AIC_MODELS[model.split(":")[0]], ModelConfig(**modes), backend)
    return get_backend(backend), built, get_database(system, backend, CURRENT[backend])


def estimate(run: PublicRun) -> dict | None:
    """aiconfigurator-core's mean TTFT, TPOT and E2E (seconds) of a closed-loop run, `fits`
    True; `fits` False where b requests do not fit in memory (`why` "memory") or it refuses the
    deployment or lacks its rows ("refused"); None where the run is not one it could model
    (a trace, a teaching policy, a model or GPU it has no config or tables for)."""
    if run.kind != "closed-loop" or run.policy not in ENGINES:
        return None
    from aiconfigurator_core.sdk.config import RuntimeConfig
    from aiconfigurator_core.sdk.errors import PerfDataNotAvailableError

    config = run.config({"step_costs": "kernels"})
    hw = config.hardware
    if hw.model.split(":")[0] not in AIC_MODELS or hw.gpu not in TABLE_GPUS:
        return None
    gpu = get_gpu(hw.gpu)
    knobs = config.knobs.for_gpu(gpu.name, gpu.mem_gb)
    budget = getattr(knobs, "max_num_batched_tokens", 0) or knobs.chunked_prefill_size
    # (a client that draws its lengths, InferenceX's: the mean ones, as the score takes them)
    isl, osl = round(run.mean_isl), round(run.mean_osl)
    runtime = RuntimeConfig(batch_size=run.concurrency, isl=isl, osl=osl)
    try:
        engine, model, database = _estimator(
            ENGINES[run.policy],
            TABLE_GPUS[hw.gpu],
            hw.model,
            hw.tensor_parallel,
            bool(hw.expert_parallel),
        )
        summary = engine.run_agg(model, database, runtime, ctx_tokens=min(isl, budget))
    except (ValueError, PerfDataNotAvailableError):
        # a deployment it refuses (block-FP8 experts split off the 128 grid) or has no rows for
        # (SGLang 0.5.14's H200 context attention with an FP8 KV cache)
        return {"fits": False, "why": "refused"}
    if summary.check_oom() or summary.check_kv_cache_oom():
        return {"fits": False, "why": "memory"}
    result = summary.get_result_dict()
    ttft, tpot = result["ttft"] / 1e3, result["tpot"] / 1e3
    return {"fits": True, "ttft": ttft, "tpot": tpot, "e2e": ttft + (run.mean_osl - 1) * tpot}


def ours(path: str) -> dict[str, dict]:
    """The report's per-run CSV (bench_fidelity_real.py --csv), by run key."""
    with Path(path).open(newline="") as f:
        return {r["key"]: r for r in csv.DictReader(f)}


def _err(predicted: float, measured: float) -> float:
    return 100 * (predicted - measured) / measured


def compare(runs: list[PublicRun], report: dict[str, dict]) -> list[dict]:
    """One row per closed-loop run both models price: split, group and signed % errors."""
    rows = []
    for run in runs:
        ours_row = report.get(run.key)
        if ours_row is None or (aic := estimate(run)) is None:
            continue
        row = {
            "key": run.key,
            "group": run.group,
            "gpu": run.gpu,
            "split": "fit" if run.fit else "held out",
            "feasible": not infeasible(
                float(ours_row["kernel_load"] or "nan"), float(ours_row["step_load"] or "nan")
            ),
            "fits": aic["fits"],
            "why": aic.get("why", ""),
        }
        m = run.measured_means
        measured = {"ttft": m["ttft_s"], "tpot": m["tpot_s"]}
        measured["e2e"] = m["ttft_s"] + (run.mean_osl - 1) * m["tpot_s"]
        for metric in METRICS:
            row[f"ours_{metric}"] = float(ours_row[f"{metric}_mean_err"])
            row[f"aic_{metric}"] = _err(aic[metric], measured[metric]) if aic["fits"] else math.nan
        rows.append(row)
    return rows


def _mean_abs(values: list[float]) -> float:
    return sum(abs(v) for v in values) / len(values) if values else math.nan


def summarize(rows: list[dict], by: str) -> dict[str, dict]:
    """Per `by` value: runs, how many the estimator could not price (b requests do not fit in
    memory; a deployment it refuses or has no tables for), and mean |error| % of each model on
    the runs it could."""
    out: dict[str, dict] = {}
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r[by]].append(r)
    for name, members in sorted(groups.items()):
        priced = [r for r in members if r["fits"]]
        stats = {
            "runs": len(members),
            "priced": len(priced),
            "memory": sum(r["why"] == "memory" for r in members),
            "refused": sum(r["why"] == "refused" for r in members),
        }
        for who in ("aic", "ours"):
            for metric in METRICS:
                stats[f"{who}_{metric}"] = _mean_abs([r[f"{who}_{metric}"] for r in priced])
        out[name] = stats
    return out


def baseline_report(rows: list[dict]) -> dict:
    """The held-out runs' figures, all GPUs and per GPU, as the app reads them (rounded)."""
    held_out = [r for r in rows if r["split"] == "held out"]

    def figures(members: list[dict]) -> dict:
        (stats,) = summarize([dict(r, scope="") for r in members], "scope").values()
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in stats.items()}

    gpus = sorted({r["gpu"] for r in held_out})
    return {
        "about": (
            "Mean |error| % of aiconfigurator-core's closed-form end-to-end estimate (run_agg) "
            "and of the kernel-table simulator, on the same held-out public runs: those the "
            "estimator can price (`priced`); `memory`: runs whose clients do not all fit at "
            "once, which it cannot price; `refused`: deployments it has no model or tables for."
        ),
        "command": COMMAND,
        "all": figures(held_out),
        "by_gpu": {g: figures([r for r in held_out if r["gpu"] == g]) for g in gpus},
    }


def _line(name: str, s: dict) -> str:
    both = "  ".join(f"{s[f'aic_{m}']:6.1f} {s[f'ours_{m}']:6.1f}" for m in METRICS)
    return f"{name[:46]:46s} {s['runs']:5d} {s['memory']:6d} {s['refused']:7d}   {both}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv", help="per-run CSV of bench_fidelity_real.py --step-costs kernels --csv")
    ap.add_argument("--data", help="folder of the public runs (see bench/fidelity_runs.py)")
    ap.add_argument("--write", action="store_true", help=f"save the app's figures: {BASELINE_PATH}")
    args = ap.parse_args(argv)
    if not available():
        print("vs_aiconfigurator_e2e: install requirements-kernels.txt", file=sys.stderr)
        return 2
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    runs, _ = load_runs(args.data)
    rows = compare(runs, ours(args.csv))
    header = (
        f"{'':46s} {'runs':>5s} {'no estimate: ':>14s}   "
        + "  ".join(f"{m.upper():>6s} {'':6s}" for m in METRICS)
        + f"\n{'mean |error| %, aiconfigurator / ours':46s} {'':5s}"
        + f" {'memory':>6s} {'refused':>7s}   "
        + "  ".join(f"{'aic':>6s} {'ours':>6s}" for _ in METRICS)
    )
    for title, by, subset in (
        ("by split", "split", rows),
        ("held out, feasible", "split", [r for r in rows if r["feasible"]]),
        ("by group (held out and fit)", "group", rows),
    ):
        print(f"\n{title}\n{header}")
        for name, stats in summarize(subset, by).items():
            print(_line(name, stats))
    if args.write:
        text = json.dumps(baseline_report(rows), indent=1, ensure_ascii=False) + "\n"
        BASELINE_PATH.write_text(text, encoding="utf-8")
        print(f"\nwrote {BASELINE_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
