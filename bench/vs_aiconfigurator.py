"""Our measured-kernel step prices against aiconfigurator-core's own step estimator.

Notable features
- PD Lab reads aiconfigurator-core's kernel tables itself (sim/cost/kernel_tables.py and its
  neighbours) and sums a step's operators. The same package ships NVIDIA's estimator built on
  those tables: `aiconfigurator_core.sdk.engine.EngineHandle`, whose `mixed_step_latency` and
  `decode_step_latency` (the Rust `Engine`, aic-core/rust/aiconfigurator-core/src/engine/
  runtime.rs at 095f58a, lines 591-800) price one engine step from the model's full op list.
  This module prices the same steps both ways: a differential check of how we read the tables,
  vLLM's and SGLang's alike (each on the release aiconfigurator calls current: CURRENT).
- The same step, both ways, ms:
  - `mixed`: one prompt of `isl` tokens prefilled whole (offset 0) beside `gen` decodes.
    Theirs: pass 1 the non-attention ops at isl + gen tokens, pass 2 the prompt's context
    attention, pass 3 decode attention for `gen` requests at isl + osl // 2 + 1 tokens. Ours:
    StepCostModel.step_cost([(isl, 0, 1)], gen, gen x (isl + osl // 2 + 1)).
  - `decode`: `gen` decodes alone, each at isl + osl // 2 + 1 cached tokens, both ways.
  Ours at the tables' own speed (kernel_scale 1, no per-step or per-request overhead:
  fidelity_load.bare_cost), so only how each side reads and sums the tables differs.
- What differs on purpose: their op list also prices the norms, activations, rotary and
  quantize kernels from their own tables, which we leave to the fitted kernel_scale; so ours
  should come out a little under theirs, never over (COVERS).
- Both sides take the same GEMM rows: per-tensor FP8 for block-scaled FP8 checkpoints too
  (kernel_tables.table_dtype says why: the fp8_block GEMM rows are timed without CUDA graphs).
  With aiconfigurator's own default for those checkpoints (`--gemm fp8_block`) its decode steps
  of Qwen3-235B-A22B and MiniMax-M2.5 come out 1.2-1.9x ours: that is the host's launches.
- `aic_load(run)`: fidelity_load.kernel_load with THEIR estimator's prompt seconds, for the
  runs the report counts as infeasible: does NVIDIA's own model agree no cache-free server
  could have measured them?

Run: .venv/bin/python bench/vs_aiconfigurator.py   (needs requirements-kernels.txt)
"""

from __future__ import annotations

import logging
import math
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # import fidelity_*

from fidelity_load import PACK_TOKENS, bare_cost  # noqa: E402

from sim.cost.hardware import get_gpu, get_model  # noqa: E402
from sim.cost.kernel_attention import KV_DTYPES  # noqa: E402
from sim.cost.kernel_data import TABLE_GPUS, Tables, available  # noqa: E402
from sim.cost.kernel_moe import moe_dtypes  # noqa: E402
from sim.cost.kernel_tables import table_dtype  # noqa: E402

# Our catalog's models -> the config.json aiconfigurator-core ships (model_configs/).
AIC_MODELS = {
    "Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "Qwen3-32B": "Qwen/Qwen3-32B",
    "Qwen3-235B-A22B": "Qwen/Qwen3-235B-A22B-FP8",
    "MiniMax-M2.5": "MiniMaxAI/MiniMax-M2.5",
}
# ours / theirs, every step: at most 1 + the interpolation slack (we read the same rows; our
# grid envelope and their interpolation differ by a few %), at least what the ops we leave to
# kernel_scale can take (norms, activations, rotary, quantization: measured up to 17% of a
# 1,000-token prefill at TP4).
COVERS = (0.80, 1.05)
# The release of each engine both sides read: the one aiconfigurator-core 0.12.0 calls
# `current` on H100, H200 and B200 (its estimator refuses older ones without
# AIC_ALLOW_UNLISTED_VERSIONS; vLLM 0.24.0 is also the oldest vLLM release it ships GEMMs of, so
# our tables for 0.12-era vLLM runs fall back to it too).
CURRENT = {"vllm": "0.24.0", "sglang": "0.5.14"}


@dataclass(frozen=True)
class Deployment:
    gpu: str  # catalog GPU
    model: str  # catalog model, e.g. "Llama-3.1-8B:fp8" (":kv-fp8" for an FP8 KV cache)
    tensor_parallel: int = 1
    whole_experts: bool = False  # --enable-expert-parallel: ranks hold whole experts
    engine: str = "vllm"  # whose kernels: "vllm" or "sglang" (sim/cost/kernel_data.ENGINES)


def aic_engine(d: Deployment):
    """aiconfigurator-core's compiled estimator for this deployment on its engine's CURRENT
    tables, with the GEMM rows we take."""
    from aiconfigurator_core.sdk.engine import EngineHandle

    # Its tables' provenance notes ("low-fidelity fallback rows" of ops no step here runs).
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)

    return EngineHandle.compile(
        AIC_MODELS[d.model.split(":")[0]],
        TABLE_GPUS[d.gpu],
        d.engine,
        backend_version=CURRENT[d.engine],
        **aic_modes(get_model(d.model), d.tensor_parallel, d.whole_experts),
    )


def aic_modes(model, tensor_parallel: int, whole_experts: bool = False) -> dict:
    """aiconfigurator's parallel and quantization settings for one of our models (mode names
    as strings): the GEMM rows we take, its experts' format, the KV cache's, and the experts
    split over the ranks (moe_tp) or whole on each (moe_ep, vLLM's --enable-expert-parallel)."""
    tp = tensor_parallel
    whole = whole_experts and model.moe is not None
    moe = moe_dtypes(model)
    return dict(
        tp_size=tp,
        gemm_quant_mode=table_dtype(model),
        moe_quant_mode=moe[0] if moe and model.moe is not None else None,
        kvcache_quant_mode=KV_DTYPES[model.bytes_per_kv],
        fmha_quant_mode="bfloat16",
        moe_tp_size=1 if whole else tp,
        moe_ep_size=tp if whole else 1,
    )


def our_cost(d: Deployment):
    """Our StepCostModel for this deployment at the tables' own speed, on its engine's
    CURRENT tables (each operator the nearest release measured)."""
    model = get_model(d.model)
    tables = Tables(d.engine, CURRENT[d.engine])
    return bare_cost(get_gpu(d.gpu).name, model, d.tensor_parallel, tables, d.whole_experts)


def mixed_ms(engine, cost, isl: int, gen: int, osl: int) -> tuple[float, float]:
    """(ours, theirs) ms: one whole prompt of `isl` tokens beside `gen` decodes."""
    ours = cost.step_cost([(isl, 0, 1)], gen, gen * (isl + osl // 2 + 1)).seconds * 1e3
    return ours, engine.mixed_step_latency(isl, gen, isl, osl)


def decode_ms(engine, cost, gen: int, isl: int, osl: int) -> tuple[float, float]:
    """(ours, theirs) ms: `gen` decodes alone at isl + osl // 2 + 1 cached tokens each."""
    ours = cost.step_cost([], gen, gen * (isl + osl // 2 + 1)).seconds * 1e3
    return ours, engine.decode_step_latency(gen, isl, osl)


# The steps compared: (kind, isl, gen, osl). Prompts up to one vLLM step (PACK_TOKENS).
STEPS = (
    ("mixed", 1000, 0, 100),
    ("mixed", 4000, 0, 100),
    ("mixed", 8000, 0, 100),
    ("mixed", 2000, 64, 500),
    ("decode", 1000, 16, 100),
    ("decode", 4000, 64, 1000),
    ("decode", 2000, 256, 1000),
)
DEPLOYMENTS = (
    Deployment("H200", "Llama-3.1-8B:fp8", 1),
    Deployment("H200", "Llama-3.1-8B:fp8", 4),
    Deployment("H200", "Llama-3.1-70B:fp8", 8),
    Deployment("H100-SXM", "Qwen3-32B", 2),
    Deployment("B200", "Llama-3.1-70B:fp8", 2),
    Deployment("H200", "Qwen3-235B-A22B:fp8:kv-fp8", 2),
    Deployment("H200", "MiniMax-M2.5:fp8:kv-fp8", 4, whole_experts=True),
    Deployment("H100-SXM", "Qwen3-32B", 2, engine="sglang"),
    Deployment("H200", "Llama-3.1-8B:fp8", 1, engine="sglang"),
)


def compare(d: Deployment, steps=STEPS) -> list[dict]:
    """Each step of `steps` priced both ways for one deployment."""
    engine, cost = aic_engine(d), our_cost(d)
    rows = []
    for kind, isl, gen, osl in steps:
        if kind == "mixed":
            ours, theirs = mixed_ms(engine, cost, isl, gen, osl)
        else:
            ours, theirs = decode_ms(engine, cost, gen, isl, osl)
        rows.append(dict(step=kind, isl=isl, gen=gen, osl=osl, ours_ms=ours, aic_ms=theirs))
    return rows


def aic_prompt_seconds(run) -> float:
    """fidelity_load.prompt_seconds by their estimator: one prompt's share of a step packed
    with PACK_TOKENS of prompts, on vLLM's CURRENT tables; NaN where they have no model or
    tables for the run, or it ran on another engine."""
    config = run.config({"step_costs": "kernels"})
    hw = config.hardware
    d = Deployment(hw.gpu, hw.model, hw.tensor_parallel)
    known = d.model.split(":")[0] in AIC_MODELS and d.gpu in TABLE_GPUS
    if not known or config.policy != "vllm":
        return math.nan
    engine = aic_engine(d)
    per_step = max(1, PACK_TOKENS // run.isl)
    return engine.mixed_step_latency(run.isl * per_step, 0, run.isl, run.osl) / 1e3 / per_step


def aic_load(run) -> float:
    """Their estimator's seconds of prompts per second of a closed-loop run, on each GPU."""
    m = run.measured_means
    e2e = m["ttft_s"] + (run.osl - 1) * m["tpot_s"]
    rate = run.concurrency / e2e / int(run.settings.get("num_instances", 1))
    return rate * aic_prompt_seconds(run)


def main() -> None:
    if not available():
        print(
            "vs_aiconfigurator: install requirements-kernels.txt (aiconfigurator-core)",
            file=sys.stderr,
        )
        sys.exit(2)
    print("step prices, ms: ours (tables at their own speed) vs aiconfigurator-core's estimator")
    worst = [math.inf, -math.inf]
    for d in DEPLOYMENTS:
        ep = " whole experts" if d.whole_experts else ""
        print(f"\n{d.engine} {CURRENT[d.engine]}: {d.gpu} {d.model} TP{d.tensor_parallel}{ep}")
        for r in compare(d):
            ratio = r["ours_ms"] / r["aic_ms"]
            worst = [min(worst[0], ratio), max(worst[1], ratio)]
            print(
                f"  {r['step']:6s} isl {r['isl']:5d} decodes {r['gen']:4d} osl {r['osl']:5d}: "
                f"ours {r['ours_ms']:8.2f}  aic {r['aic_ms']:8.2f}  ratio {ratio:.2f}"
            )
    print(f"\nours / aic over every step: {worst[0]:.2f} .. {worst[1]:.2f} (expected {COVERS})")
    from fidelity_load import infeasible, kernel_load, step_load
    from fidelity_runs import load_runs

    try:
        runs, _ = load_runs()
    except SystemExit as e:  # the public runs are not here
        print(f"\n(no feasibility check: {str(e).splitlines()[0]})")
        return
    print("\nruns the report counts infeasible: prompt seconds a second, ours vs their estimator")
    for r in runs:
        if r.specs:
            continue
        ours = kernel_load(r)
        if infeasible(ours, step_load(r)):
            print(f"  ours {ours:5.2f}  aic {aic_load(r):5.2f}  {r.key}")


if __name__ == "__main__":
    main()
