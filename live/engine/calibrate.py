"""Calibrate the simulator on this machine, then measure how well it predicts the live engine.

Notable features
- `calibrate()` runs a small calibration workload live (prefill-first, vllm and static, so
  it sees whole prefills up to 1024 tokens, several prompts in one step, chunks over a cached
  prefix, decode batches of 1..10 and mixed steps), and fits the simulator's device profile
  (MFU, attention MFU, MBU, per-step and per-request overhead) to the measured steps with
  `sim.cost.calibrate.fit_profile`, dropping only steps a busy machine stalled.
- `sim_model()` names the catalog model with the live model's shape: the simulator prices the
  same FLOPs and bytes per step.
- Efficiencies are relative to a nominal device spec: for a CPU, `REFERENCE_CPU` (a round
  0.5 TFLOP/s and 50 GB/s, above what this class of CPU reaches, so efficiencies stay below 1);
  for a GPU, the catalog entry of that GPU when it has one.
- `fidelity()` compares, request by request, the live run with the calibrated simulation of the
  same workload and policy: TTFT and TPOT errors in %, and their medians.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.core.trace import RunResult
from sim.cost.calibrate import fit_profile, fit_report
from sim.cost.hardware import GPUS, MODELS, GpuSpec, custom_gpu, get_model
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile

REFERENCE_CPU = custom_gpu(bf16_tflops=0.5, mem_bw_gb_s=50.0, mem_gb=24.0, name="this CPU")
# The simulator's catalog model with the same shape as each live model: its cost twin.
SIM_MODEL = {
    "smollm2-135m": "SmolLM2-135M",
    "smollm2-135m-shape": "SmolLM2-135M",
    "1b-like": "Llama-3.2-1B",
    "8b-like": "Llama-3.1-8B",
}


def sim_model(live_model: str) -> str:
    """The catalog model shaped like `live_model` (a name above or a checkpoint folder).

    ValueError when the catalog has none: such a run can be measured but not predicted.
    """
    if live_model.lower() in SIM_MODEL:
        return SIM_MODEL[live_model.lower()]
    config = Path(live_model) / "config.json"
    if config.is_file():
        c = json.loads(config.read_text())
        heads = c.get("num_attention_heads", 0)
        shape = (
            c.get("num_hidden_layers"),
            c.get("hidden_size"),
            heads,
            c.get("num_key_value_heads", heads),
            c.get("head_dim") or c.get("hidden_size", 0) // max(heads, 1),
            c.get("intermediate_size"),
            c.get("vocab_size"),
            bool(c.get("tie_word_embeddings", False)),
        )
        for m in MODELS.values():
            if (
                m.layers,
                m.hidden,
                m.heads,
                m.kv_heads,
                m.head_dim,
                m.intermediate,
                m.vocab,
                m.tied_embeddings,
            ) == shape:
                return m.name
    raise ValueError(
        f"the simulator's catalog has no model shaped like {live_model!r} "
        f"({', '.join(MODELS)}): its live run can be measured, not predicted"
    )


def device_spec(device_info: dict) -> GpuSpec:
    """The nominal spec the efficiencies are relative to, for the device the live run used."""
    name = str(device_info.get("gpu", "")).lower()
    # The whole catalog name first, longest first ("RTX PRO 6000" before any "RTX"), then its
    # first word as a whole word ("H100" in "NVIDIA H100 80GB HBM3"; "L4" is not "L40S").
    for key in sorted(GPUS, key=len, reverse=True):
        if key.lower().replace("-", " ") in name.replace("-", " "):
            return GPUS[key]
    for key, spec in GPUS.items():
        if re.search(rf"\b{re.escape(key.split('-')[0].lower())}\b", name):
            return spec
    return REFERENCE_CPU


def calibration_workload(max_len: int = 8192) -> list[RequestSpec]:
    """Prompts of 32..1024 tokens arriving close together: varied prefills, decodes and mixes.

    Ten requests, so decode batches range from 1 to 10. The 1024-token prompt matters: attention
    is quadratic, so only a long prefill pins down its efficiency (without one, long prompts
    were predicted 10-20% too fast). Prompts are cut to fit a model that holds fewer than
    `max_len` tokens per request.
    """
    rows = [
        (0.0, 96, 16),
        (0.05, 384, 12),
        (0.1, 32, 24),
        (0.3, 1024, 8),
        (0.35, 192, 16),
        (0.4, 48, 20),
        (0.45, 64, 24),
        (0.5, 128, 20),
        (0.55, 32, 28),
        (0.6, 256, 16),
    ]
    return [RequestSpec(i, t, min(p, max_len - o), o) for i, (t, p, o) in enumerate(rows)]


# Policies the calibration workload runs under: whole prompts (alone and several in one step),
# chunks over a cached prefix mixed with decodes, and static batches (decode batches that shrink).
CALIBRATION_RUNS = (
    ("prefill-first", {}),
    ("vllm", {"max_num_batched_tokens": 160}),
    ("static", {}),
)


def calibration_samples(options) -> tuple[list, dict]:
    """Measured steps of the calibration workload under CALIBRATION_RUNS, and device info."""
    from live.engine.run import load, run_live

    max_len = load(options.model, options.device)[0].shape.max_len
    samples, info = [], {}
    for policy, knobs in CALIBRATION_RUNS:
        config = with_overrides(SimConfig(policy=policy), knobs)
        run, extra = run_live(calibration_workload(max_len), config, options)
        samples += [s[1:] for s in extra["samples"]]
        info = run.meta.get("device", {})
    return samples, info


def fit(samples, info: dict, model_name: str) -> tuple[DeviceProfile, GpuSpec, dict]:
    """Fit the profile to measured steps, robustly (see below); returns it with a fit report."""
    gpu = device_spec(info)
    model = get_model(sim_model(model_name))
    profile = fit_profile(samples, gpu, model)
    # A shared machine sometimes stalls a step (another process took the core): drop the steps
    # the first fit explains far worse than the rest (beyond 3 robust standard deviations of the
    # relative error, at most 10% of them), then fit again. A fixed "worst 10%" would also drop
    # the few long prefills, the very steps that pin down attention's cost.
    cost = StepCostModel(gpu, model, 1, profile)
    errors = np.array([cost.step_cost(*s[:3]).seconds / s[3] - 1 for s in samples])
    spread = 1.4826 * np.median(np.abs(errors - np.median(errors)))  # MAD -> sigma
    limit = max(3 * spread, np.quantile(np.abs(errors), 0.9))
    keep = [s for s, e in zip(samples, errors, strict=True) if abs(e) <= limit]
    profile = fit_profile(keep, gpu, model)
    report = fit_report(keep, profile, gpu, model)
    return profile, gpu, {"device": info, "fit": report, "samples": len(samples), "kept": len(keep)}


def calibrate(options, model_name: str | None = None) -> tuple[DeviceProfile, GpuSpec, dict]:
    """Fit the device profile to live steps of the calibration workload on this device."""
    samples, info = calibration_samples(options)
    return fit(samples, info, model_name or options.model)


def calibrated_config(
    config: SimConfig, profile: DeviceProfile, gpu: GpuSpec, model_name: str = "SmolLM2-135M"
) -> SimConfig:
    """`config` with the device replaced by the calibrated one (what the simulator predicts)."""
    return with_overrides(
        config,
        {
            "gpu": "custom",
            "gpu_tflops": gpu.bf16_tflops,
            "gpu_bw_gb_s": gpu.mem_bw_gb_s,
            "gpu_mem_gb": gpu.mem_gb,
            "model": sim_model(model_name),
            "mfu": profile.mfu,
            "mfu_attn": profile.mfu_attn,
            "mbu": profile.mbu,
            "overhead_ms": profile.overhead_s * 1000,
            "overhead_per_seq_ms": profile.overhead_per_seq_s * 1000,
        },
    )


def predict(
    requests: list[RequestSpec],
    config: SimConfig,
    profile: DeviceProfile,
    gpu: GpuSpec,
    live_run: RunResult,
) -> RunResult:
    """The calibrated simulation of the live run's workload (same KV capacity as the live run)."""
    from live.engine.run import without_prefix_cache

    cfg = calibrated_config(
        without_prefix_cache(config), profile, gpu, live_run.meta.get("live_model", "SmolLM2-135M")
    )
    capacity = live_run.meta["config"]["kv_capacity_tokens"]
    return simulate(requests, with_overrides(cfg, {"kv_capacity_tokens": capacity}))


def fidelity(live: RunResult, predicted: RunResult) -> pd.DataFrame:
    """Per request: TTFT and TPOT measured vs predicted, and the absolute error in %."""
    a = live.requests.set_index("request_id")
    b = predicted.requests.set_index("request_id")
    out = pd.DataFrame(
        {
            "ttft_live_s": a.ttft_s,
            "ttft_sim_s": b.ttft_s,
            "tpot_live_s": a.tpot_s,
            "tpot_sim_s": b.tpot_s,
        }
    )
    out["ttft_err_pct"] = (out.ttft_sim_s - out.ttft_live_s).abs() / out.ttft_live_s * 100
    out["tpot_err_pct"] = (out.tpot_sim_s - out.tpot_live_s).abs() / out.tpot_live_s * 100
    return out


def medians(table: pd.DataFrame) -> dict[str, float]:
    """Median absolute % errors of TTFT and TPOT (NaN-tolerant)."""
    return {
        "ttft_median_err_pct": float(np.nanmedian(table.ttft_err_pct)),
        "tpot_median_err_pct": float(np.nanmedian(table.tpot_err_pct)),
    }


def save_profile(path: Path, profile: DeviceProfile, gpu: GpuSpec, info: dict) -> None:
    """Write the fitted profile (and what it is relative to) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(
            {
                "profile": {
                    "mfu": profile.mfu,
                    "mfu_attn": profile.mfu_attn,
                    "mbu": profile.mbu,
                    "overhead_s": profile.overhead_s,
                    "overhead_per_seq_s": profile.overhead_per_seq_s,
                },
                "device_spec": {
                    "name": gpu.name,
                    "bf16_tflops": gpu.bf16_tflops,
                    "mem_bw_gb_s": gpu.mem_bw_gb_s,
                    "mem_gb": gpu.mem_gb,
                },
                "info": info,
            },
            indent=1,
            default=str,
        )
    )


def load_profile(path: Path) -> tuple[DeviceProfile, GpuSpec]:
    data = json.loads(path.read_text())
    d = data["device_spec"]
    gpu = custom_gpu(d["bf16_tflops"], d["mem_bw_gb_s"], d["mem_gb"], name=d["name"])
    return DeviceProfile(**data["profile"]), gpu
