"""One public measurement as the simulator replays it: `PublicRun`, a deployment (GPU, model,
engine, parallelism, the engine's settings) and a workload (a per-request trace, or a closed
loop's lengths and clients), with what was measured.

Notable features
- `PublicRun.config()` is the simulator's configuration for the run: the GPU's fitted profile,
  the kernel tables nearest the run's engine release, that release's async-scheduling default,
  and (vLLM) the memory its start-up keeps off the KV cache (sim/cost/engine_memory.py).
- The readers that make these runs, one per public source, are bench/fidelity_llmservingsim.py
  and bench/fidelity_aiconfigurator.py (which reads InferenceX's launch scripts through
  bench/fidelity_inferencex.py); bench/fidelity_runs.py gathers them and marks each fit or held
  out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import fidelity_inferencex as inferencex
import pandas as pd

from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.cost.engine_memory import release_tuple, vllm_profile_reserve_gb
from sim.cost.hardware import get_gpu, get_model


@dataclass
class PublicRun:
    """One measured deployment and workload, ready to replay in the simulator."""

    key: str  # unique, readable id
    source: str  # "LLMServingSim" or "aiconfigurator"
    gpu: str  # catalog GPU
    model: str  # catalog model (":fp8"/":fp4" for quantized weights)
    engine: str  # e.g. "vLLM 0.19"
    policy: str  # the simulator's policy mirroring that engine: vllm or sglang
    settings: dict  # SimConfig overrides: parallelism, scheduler knobs, KV capacity
    parallel: str  # e.g. "TP2", "DP2+EP"
    fit: bool = False  # True: used to fit the GPU's profile; False: held out
    kv_dtype: str = ""  # the server's --kv-cache-dtype when not the weights' 16 bits ("fp8")
    # aiconfigurator's measurement campaign (fidelity_aiconfigurator.aic_campaign)
    campaign: str = ""
    # Closed loops whose client draws each length from [int(L x ratio), L] (InferenceX's 0.8);
    # 1 = every request exactly isl in, osl out.
    range_ratio: float = 1.0
    # Trace runs: the requests as they arrived, and measured per-request seconds.
    specs: list[RequestSpec] = field(default_factory=list)
    measured: pd.DataFrame | None = None  # columns ttft_s, tpot_s, e2e_s (index request_id)
    # Closed-loop runs: fixed lengths, requests in flight, and the measured means (seconds).
    isl: int = 0
    osl: int = 0
    concurrency: int = 0
    measured_means: dict = field(default_factory=dict)  # ttft_s, tpot_s

    @property
    def kind(self) -> str:
        return "trace" if self.specs else "closed-loop"

    @property
    def mean_isl(self) -> float:
        """A closed loop's mean prompt tokens (its client's draws, see `range_ratio`)."""
        return inferencex.mean_length(self.isl, self.range_ratio)

    @property
    def mean_osl(self) -> float:
        """A closed loop's mean output tokens."""
        return inferencex.mean_length(self.osl, self.range_ratio)

    @property
    def group(self) -> str:
        """GPU / model / engine: the rows of the report's summary."""
        return f"{self.gpu} | {self.model} | {self.engine.split(' ')[0]}"

    def config(self, profile_overrides: dict | None = None) -> SimConfig:
        """The simulator's configuration for this run (the GPU's fitted profile by default)."""
        base = SimConfig(policy=self.policy)
        model = self.model + (f":kv-{self.kv_dtype}" if self.kv_dtype else "")
        sets = {"gpu": self.gpu, "model": model, **self.settings}
        release = self.engine.split(" ")[-1]
        if release[:1].isdigit():  # step_costs=kernels: the tables nearest the run's release
            sets["kernel_version"] = release
            if self.policy == "vllm" and release_tuple(release) >= VLLM_ASYNC_DEFAULT_FROM:
                sets.setdefault("async_scheduling", True)  # the release's default
        config = with_overrides(base, {**sets, **(profile_overrides or {})})
        if self.policy != "vllm" or config.engine.kv_capacity_tokens:
            return config
        # vLLM's start-up keeps its profile run's peak off the KV cache, as the run's release
        # ran it (sim/cost/engine_memory.py); a run without one, by its measurement date.
        gpu = get_gpu(self.gpu)
        knobs = config.knobs.for_gpu(gpu.name, gpu.mem_gb)
        reserve = vllm_profile_reserve_gb(
            get_model(model),
            config.hardware.tensor_parallel,
            min(knobs.max_num_seqs, knobs.max_num_batched_tokens),
            release if release[:1].isdigit() else CAMPAIGN_RELEASE.get(self.campaign, ""),
        )
        return with_overrides(config, {"activation_reserve_gb": reserve})


# vLLM schedules asynchronously by default from 0.14.0 (vllm/config/scheduler.py: 0.13.0
# `async_scheduling: bool = False`, 0.14.0 `Field(default=None)`, which vllm/config/vllm.py
# turns on unless pipeline parallel or an incompatible speculative method is set). Older runs
# take it where their launch script passed --async-scheduling (fidelity_inferencex.RECIPES).
VLLM_ASYNC_DEFAULT_FROM = (0, 14)

# The vLLM release of a campaign whose rows name none: InferenceMAX served its 2025 Llama 70B
# runs with vllm/vllm-openai:v0.10.2 (fidelity_inferencex.RELEASE_2025). Used for the start-up
# memory (`PublicRun.config`) and to find the launch script, not for the kernel tables (none is
# older than 0.14: those runs take the newest, as every run without a release does).
CAMPAIGN_RELEASE = {"inferencemax-2025": inferencex.RELEASE_2025}
