"""Public measurements of real LLM servers, read into runs the simulator can replay.

Notable features
- Two public sources, read from a data folder outside the project (default
  `../shared/data/fidelity/` beside the checkout, or $PDLAB_FIDELITY_DATA); nothing of them is
  copied into the project. `data_dir()` says where to get them when they are missing.
  1. casys-kaist/LLMServingSim (MIT), `bench/examples/<GPU>/<model>/vllm/{meta.json,
     requests.jsonl}`: vLLM 0.19 serving 300 ShareGPT requests at 10 req/s, with each
     request's lengths and timestamps (queued, first token, last token). Replayed request by
     request: same arrivals, lengths, max_num_seqs, max_num_batched_tokens, parallelism and (where
     meta.json states it) KV capacity. Copy each example's `vllm/` folder to
     `<data>/llmservingsim/<GPU>/<model>/`.
  2. ai-dynamo/aiconfigurator (Apache-2.0), `aic-core/src/aiconfigurator_core/systems/
     silicon_sample.csv` (copy it to `<data>/aiconfigurator/`): mean TTFT and TPOT of vLLM and
     SGLang on H100/H200/B200 at a fixed input/output length and a fixed number of requests in
     flight (concurrency). Replayed as a closed loop (`bench/fidelity_replay.py`:
     `concurrency` clients, each sending its next request when the last one finishes).
- Each run carries `fit`: True for the runs `bench/fit_profiles.py` fits a GPU's profile on
  (`FIT_RULES`), False for the held-out runs the report validates on. A run is never both.
- Rows the simulator cannot represent are skipped with the reason counted (models outside the
  catalog such as DeepSeek-R1 or gpt-oss, GB200/B300 systems, TensorRT-LLM, disaggregated or
  attention-data-parallel deployments).
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import fidelity_inferencex as inferencex
import pandas as pd

from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.cost.engine_memory import release_tuple, vllm_profile_reserve_gb
from sim.cost.hardware import get_gpu, get_model
from sim.policies.sglang_knobs import sglang_chunk_default, sglang_mem_fraction_static

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "fidelity"
HOW_TO_GET = """\
The public runs are not part of PD Lab. Put them in {path} (or set PDLAB_FIDELITY_DATA):
  git clone https://github.com/casys-kaist/LLMServingSim   (MIT; tested at commit 5daddb2)
    for each bench/examples/<GPU>/<model>/ with a vllm/ folder (RTXPRO6000/Llama-3.1-8B,
    RTXPRO6000/Qwen3-32B, RTXPRO6000/Qwen3-30B-A3B-Instruct-2507, RTX4090/Llama-3.1-8B):
      mkdir -p {path}/llmservingsim/<GPU>/<model>
      cp bench/examples/<GPU>/<model>/vllm/{{meta.json,requests.jsonl}} \\
         {path}/llmservingsim/<GPU>/<model>/
  git clone https://github.com/ai-dynamo/aiconfigurator   (Apache-2.0; tested at commit 095f58a)
      mkdir -p {path}/aiconfigurator
      cp aic-core/src/aiconfigurator_core/systems/silicon_sample.csv {path}/aiconfigurator/
"""


def data_dir(path: str | Path | None = None) -> Path:
    """The folder holding the public runs; SystemExit with instructions when it is missing."""
    d = Path(path or os.environ.get("PDLAB_FIDELITY_DATA") or DEFAULT_DATA)
    if not ((d / "llmservingsim").is_dir() or (d / "aiconfigurator").is_dir()):
        raise SystemExit(f"no public runs found at {d}\n" + HOW_TO_GET.format(path=d))
    return d


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
    campaign: str = ""  # aiconfigurator's measurement campaign (`aic_campaign`)
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


# ---- which runs fit each GPU's profile --------------------------------------------------------
# Everything else is held out. One rule per GPU with public runs; the RTX 4090 has none (it
# borrows the RTX PRO 6000's profile, so all its runs test that borrowing).
FIT_RULES: dict[str, Callable[[PublicRun], bool]] = {
    "RTX-PRO-6000": lambda r: r.model == "Llama-3.1-8B",
    "H100-SXM": lambda r: r.model == "Qwen3-32B" and r.engine.startswith("vLLM"),
    "H200": lambda r: (
        r.model == "Llama-3.1-70B:fp8" and r.engine.startswith("vLLM") and r.osl <= 1024
    ),
    "B200": lambda r: r.model == "Llama-3.1-70B:fp8" and r.osl <= 1024,
}


# Client-side latency of the aiconfigurator benchmark's closed loop (HTTP, tokenization, the
# serving frontend): the simulator models the engine only, so this is added to the simulated
# TTFT (and E2E) of that GPU's closed-loop runs. Fitted with each GPU's profile, on its fit runs
# only (bench/fit_profiles.py). LLMServingSim's traces time TTFT from the engine's queue: 0.
# Refitted alone (the roofline profiles as they are, the latency on the same grid and loss)
# when the replay started weighing the benchmark's opening burst as 1 of 10 rounds instead of
# 1 of 20 (fidelity_replay.MEASURED_ROUNDS): 85, 50 and 90 ms -> 40, 20 and 65 ms.
CLIENT_LATENCY_S: dict[str, float] = {"H100-SXM": 0.040, "H200": 0.020, "B200": 0.065}
# The same, fitted with each GPU's step_costs=kernels profile (sim/cost/profiles.py
# FITTED_KERNELS) on the same fit runs. Held at the roofline's figures instead, that fit's RMS
# log error on H200 goes from 0.126 to 0.151 (B200's barely moves): the latency is a fitted
# figure like the others, not a measurement of the client. Refitted at the kernel profiles
# fitted on the fit runs' TPOT, on the TTFT of their shortest prompts at the fewest clients
# (fit_profiles.py METRICS_TPOT, intercept_runs): H100 Qwen3-32B 1024 tokens in at 8 clients,
# H200 and B200 Llama-3.1-70B FP8 1024 in at 4. On all their TTFTs: 140, 35 and 90 ms. Refitted
# the same way once the vLLM replays started their clients at random phases
# (fidelity_replay.CLOSED_LOOP_DEFAULT): H100 65 -> 60 ms, H200 and B200 unchanged. Refitted
# with the kernel profiles' shared per-request overhead (bench/fit_shared_overhead.py): H200
# 10 -> 15 ms, H100 and B200 unchanged; and with the burst as 1 of 10 rounds
# (fidelity_replay.MEASURED_ROUNDS): 50, 5 and 55 ms; and with InferenceMAX's 70B fit runs
# drawing their lengths (fidelity_inferencex.RANGE_RATIO): H200 20 ms, B200 60 ms; and once
# the replays admitted as async scheduling does (VLLM_ASYNC_DEFAULT_FROM, the 2025 recipes'
# --async-scheduling): H200 10 ms, B200 50 ms (the loss of their fit runs 0.0034 -> 0.0028 and
# 0.0255 -> 0.0253); H100's fit runs, vLLM 0.12 without it, unchanged.
CLIENT_LATENCY_KERNELS_S: dict[str, float] = {"H100-SXM": 0.050, "H200": 0.010, "B200": 0.050}

# The latency is the measurement's, not the GPU's: the benchmark client, the serving frontend
# (vLLM's own API server or Dynamo's) and the builds of one campaign. The silicon rows come from
# three campaigns (`aic_campaign`), and each GPU's latency was fitted on ONE campaign's runs: its
# fit runs' (FIT_CAMPAIGN). So a run takes the latency fitted on a GPU of its own campaign and
# generation where there is one (H100 and H200 are both Hopper: same client, frontend and
# build), else its own GPU's. At 4-8 clients of 1024 tokens, eight GPUs, the 2025-10 Llama-3.1-70B
# FP8 rows measure 70 ms of TTFT on H100 and 73 ms on H200, priced 43 and 39 ms a prefill; the
# 2026-01 Qwen3-32B rows on H100 91 ms, priced 24 ms: two campaigns, ~50 ms apart, on one GPU.
FIT_CAMPAIGN = {
    "H100-SXM": "gap-analysis",
    "H200": "inferencemax-2025",
    "B200": "inferencemax-2025",
}
# The vLLM release of a campaign whose rows name none: InferenceMAX served its 2025 Llama 70B
# runs with vllm/vllm-openai:v0.10.2 (fidelity_inferencex.RELEASE_2025). Used for the start-up
# memory (`PublicRun.config`) and to find the launch script, not for the kernel tables (none is
# older than 0.14: those runs take the newest, as every run without a release does).
CAMPAIGN_RELEASE = {"inferencemax-2025": inferencex.RELEASE_2025}
GENERATION = {"H100-SXM": "Hopper", "H200": "Hopper", "B200": "Blackwell"}


def aic_campaign(source: dict[str, str]) -> str:
    """Which measurement campaign a silicon row comes from, by its silicon_data_source fields:
    "gap-analysis" (aic-auto-gap-analysis files: vLLM 0.12 and SGLang 0.5 through Dynamo,
    2026-01), "inferencemax-2025" (measured in 2025: InferenceMAX's Llama 70B rows, 2025-10-29)
    or "inferencex" (InferenceX's MiniMax-M2.5 rows of 2026-03 and 2026-04; both InferenceX's
    results database: `fidelity_inferencex`)."""
    if "aic-auto-gap-analysis" in source.get("source_file", ""):
        return "gap-analysis"
    if source.get("measured", "").startswith("2025"):
        return "inferencemax-2025"
    return "inferencex"


def client_latency(gpu: str, step_costs: str = "roofline", campaign: str = "") -> float:
    """Seconds added to a closed-loop run's simulated TTFT, for the cost model it replays with:
    the latency fitted on a GPU of the run's campaign and generation (FIT_CAMPAIGN); for a
    campaign no GPU was fitted on (inferencex), the mean of the fitted ones: nothing says
    which of the known campaigns its client and frontend resemble; else the run's GPU's."""
    table = CLIENT_LATENCY_KERNELS_S if step_costs == "kernels" else CLIENT_LATENCY_S
    for fitted, fit_campaign in FIT_CAMPAIGN.items():
        same = campaign == fit_campaign and GENERATION[fitted] == GENERATION.get(gpu)
        if same and fitted in table:
            return table[fitted]
    if campaign and campaign not in FIT_CAMPAIGN.values():
        return sum(table[g] for g in FIT_CAMPAIGN) / len(FIT_CAMPAIGN)
    return table.get(gpu, 0.0)


def _mark(runs: list[PublicRun]) -> list[PublicRun]:
    for r in runs:
        rule = FIT_RULES.get(r.gpu)
        r.fit = bool(rule and rule(r))
    return runs


# ---- LLMServingSim: per-request traces ---------------------------------------------------------

LSS_GPUS = {"RTXPRO6000": "RTX-PRO-6000", "RTX4090": "RTX-4090"}
LSS_MODELS = {
    "meta-llama/Llama-3.1-8B": "Llama-3.1-8B",
    "Qwen/Qwen3-32B": "Qwen3-32B",
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "Qwen3-30B-A3B",
}


def load_llmservingsim(root: Path, skipped: Counter) -> list[PublicRun]:
    """Every <GPU>/<model>/ folder holding meta.json and requests.jsonl."""
    runs = []
    for meta_path in sorted((root / "llmservingsim").glob("*/*/meta.json")):
        folder = meta_path.parent
        meta = json.loads(meta_path.read_text())
        kw = meta["engine_kwargs"]
        gpu = LSS_GPUS.get(folder.parent.name)
        model = LSS_MODELS.get(meta["model"])
        if gpu is None or model is None or kw.get("dtype", "bfloat16") != "bfloat16":
            skipped[f"LLMServingSim {folder.parent.name}/{folder.name}: not in the catalog"] += 1
            continue
        rows = [
            json.loads(line)
            for line in (folder / "requests.jsonl").read_text().splitlines()
            if line.strip()
        ]
        # Timestamps share one monotonic clock; arrivals are the server's queued_ts (the source's
        # own validator anchors TTFT there too: bench/core/validate.py).
        t0 = min(r["queued_ts"] for r in rows)
        specs, measured = [], []
        for i, r in enumerate(sorted(rows, key=lambda r: r["queued_ts"])):
            specs.append(
                RequestSpec(i, r["queued_ts"] - t0, int(r["input_toks"]), int(r["output_toks"]))
            )
            out = int(r["output_toks"])
            tpot = (r["last_token_ts"] - r["first_token_ts"]) / (out - 1) if out > 1 else math.nan
            measured.append(
                (i, r["first_token_ts"] - r["queued_ts"], tpot, r["last_token_ts"] - r["queued_ts"])
            )
        tp, dp = int(kw.get("tensor_parallel_size") or 1), int(kw.get("data_parallel_size") or 1)
        settings = {
            "tensor_parallel": tp,
            "max_num_seqs": int(kw["max_num_seqs"]),
            "max_num_batched_tokens": int(kw["max_num_batched_tokens"]),
        }
        parallel = f"TP{tp}"
        if dp > 1:  # vLLM data parallel: one engine per rank behind a least-loaded balancer
            settings.update(topology="router", router="least-loaded", num_instances=dp)
            parallel = f"DP{dp}"
            if kw.get("enable_expert_parallel"):
                settings["expert_parallel"] = True
                parallel += "+EP"
        kv = (meta.get("kv_cache") or {}).get("num_kv_tokens")
        if kv:  # the server's own count, when meta.json records it
            settings["kv_capacity_tokens"] = int(kv)
        runs.append(
            PublicRun(
                key=f"lss/{folder.parent.name}/{folder.name}",
                source="LLMServingSim",
                gpu=gpu,
                model=model,
                engine=f"vLLM {meta.get('vllm_version', '?')}",
                policy="vllm",
                settings=settings,
                parallel=parallel,
                specs=specs,
                measured=pd.DataFrame(
                    measured, columns=["request_id", "ttft_s", "tpot_s", "e2e_s"]
                ).set_index("request_id"),
            )
        )
    return runs


# ---- aiconfigurator: closed-loop means ---------------------------------------------------------

AIC_GPUS = {"h100_sxm": "H100-SXM", "h200_sxm": "H200", "b200_sxm": "B200"}
AIC_MODELS = {
    "Qwen/Qwen3-32B": "Qwen3-32B",
    "meta-llama/Llama-3.1-70B": "Llama-3.1-70B",
    "meta-llama/Llama-3.1-8B-Instruct": "Llama-3.1-8B",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "Llama-3.1-8B",
    "Qwen/Qwen3-235B-A22B-FP8": "Qwen3-235B-A22B",
    "MiniMaxAI/MiniMax-M2.5": "MiniMax-M2.5",
}
AIC_ENGINES = {"vllm": ("vLLM", "vllm"), "sglang": ("SGLang", "sglang")}
# aiconfigurator deploys an FP8 or FP4 model with an FP8 KV cache: its quantization presets pair
# gemm fp8/fp8_static/nvfp4 with kvcache_quant_mode fp8 (src/aiconfigurator/sdk/
# task_v1_compat.py, _PROFILE_TO_QUANT), and a checkpoint quantized to fp8, fp8_block or nvfp4
# gets kvcache fp8 (aic-core/.../sdk/models/helpers.py, _infer_quant_modes_from_raw_config).
# BF16 models keep a BF16 cache. The CSV has no KV column, so the replay follows that rule.
# The knees agree on H200 and B200, not on H100 (bench_knee.py, kernel tables): Llama-3.1-70B FP8
# on two H100s queues at 32 clients of 8192 tokens (TTFT 6.5 s, 1.3 s at 16), which an FP8 cache
# of ~500k tokens would not (a BF16 one holds ~250k: its knee error goes from +29% to -4%); but
# with a BF16 cache that group's mean |E2E error| goes from 9% to 10% (its TPOT at up to 16
# clients from +8% to +10%), and the H200 and B200 knees on one GPU go from -1% and +11% to -25%
# and -17% (their held-out TTFT errors from 21% and 17% to 153% and 202%). So the rule stays
# for the gap analysis's rows. InferenceX's rows take the KV dtype their launch script gives
# (fidelity_inferencex.py): FP8 for the 2025 Llama 70B ones, H100 included (so a BF16 cache is
# not why that H100 sweep queues), BF16 for MiniMax-M2.5 where the script gives none.
AIC_FP8_KV = ("fp8", "fp4")

# How aiconfigurator's generator deploys SGLang aggregated (src/aiconfigurator/generator/
# rule_plugin/sglang.rule, as of commit 5e0243eb1, 2026-01-24): `agg_prefill_decode
# max_prefill_tokens = SlaConfig.isl + 1500` and `agg enable_mixed_chunk = true`, passed as
# --max-prefill-tokens and --enable-mixed-chunk (backend_templates/sglang/cli_args.0.5.6.post2.j2);
# the flag's name was fixed on 2026-01-19 (commit 07a377923, "fix sglang enable mixed chunk";
# before it the template emitted --enable-mix-chunk). Its --max-running-requests is the config's
# batch size, the concurrency of these rows: it binds nothing in their closed loop.
# The silicon rows of SGLang 0.5.6.post2 and later come from that tool's deployments: the
# 0.5.6.post2 rows name image=nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.8.0 measured 2026-01-23
# to 25, the week the generator gained its Dynamo 0.8.0 templates (commit c46a56b02,
# 2026-01-23), and their concurrencies are the tool's estimated batch sizes (240, 352, 448...),
# which bench_run.sh.j2 adds to its list. The 0.5.1.post1 rows state no date nor image; their
# concurrencies are the script's fixed ones (16, 64, 128), and nothing says those servers had
# more than SGLang's defaults: they replay with the defaults (mixed chunk off, 16384 tokens).
AIC_SGLANG_GENERATED_FROM = (0, 5, 6)
# SGLang's default --mem-fraction-static: the activation-and-graph formula of
# sim/policies/sglang_knobs.py from 0.5.3 on (server_args.py `_handle_gpu_memory_settings`, 0.5.3
# 542-661); before it (0.5.1.post1 server_args.py 352-393) a table by GPU memory, reading
# nvidia-smi's memory.total in MiB: reserved = 9.5 + tp x pp / 2 GiB under 90 GiB (H100, A100),
# 12 + tp x pp / 2 under 160 GiB (H200), 32 GiB above (B200); fraction = (total - reserved) /
# total, rounded to 3 places.
SGLANG_MEMORY_HOOK_FROM = (0, 5, 3)
NVIDIA_SMI_MIB = {"H100-SXM": 81559, "H200": 143771, "B200": 183359}  # memory.total


def sglang_051_mem_fraction_static(gpu: str, tensor_parallel: int) -> float:
    """SGLang 0.5.1's default --mem-fraction-static on `gpu` (see SGLANG_MEMORY_HOOK_FROM)."""
    total = NVIDIA_SMI_MIB[gpu]
    if total < 90 * 1024:
        reserved = (9.5 + tensor_parallel / 2) * 1024
    elif total < 160 * 1024:
        reserved = (12 + tensor_parallel / 2) * 1024
    else:
        reserved = 32 * 1024
    return round((total - reserved) / total, 3)


# The first SGLang release checked that reserves a running fixed-length request's output in
# full (0.5.23; 0.5.1.post1, 0.5.6.post2 and 0.5.8.post1 scale it by new_token_ratio).
SGLANG_RESERVES_FIXED_OUTPUT = (0, 5, 23)
# Every SGLang row keeps SGLang's own KV pool: its release's default --mem-fraction-static
# instead of the simulator's 0.9 (vLLM's gpu_memory_utilization): from 0.5.3 on
# sim/policies/sglang_knobs.py sglang_mem_fraction_static (0.82-0.84 on an H100), before it
# sglang_051_mem_fraction_static (0.83-0.87). The 0.5.1.post1 rows run at TP 2 to 8, where
# either pool holds more than their clients need (their mean |error| moved by 0.2 points).


# The sample gathers several exports: a run measured once can appear in two of them (MiniMax-M2.5
# on H200: a db-dump row and a 2026-04-06.csv row, same date, same means), and a rerun of the
# same deployment on another day is a second measurement (2026-03-25.csv). A row whose
# deployment, workload and measured means all equal an earlier one's is that earlier run.
AIC_SAME_RUN = (
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "tp_size",
    "moe_tp_size",
    "moe_ep_size",
    "attention_dp_size",
    "batch_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
)


def _num(value: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def load_aiconfigurator(root: Path, skipped: Counter) -> list[PublicRun]:
    """The silicon sample's aggregated vLLM/SGLang rows on H100, H200 and B200."""
    path = root / "aiconfigurator" / "silicon_sample.csv"
    if not path.is_file():
        return []
    runs = []
    seen = set()  # one measurement reached the sample from several files (see AIC_SAME_RUN)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            why = None
            moe_gpus = (_num(row["moe_tp_size"]) or 0) * (_num(row["moe_ep_size"]) or 0)
            same = tuple(row[k] for k in AIC_SAME_RUN)
            if "wip=True" in row["silicon_data_source"]:
                why = "a row its source marks work in progress"
            elif same in seen:
                why = "the same measurement as an earlier row"
            elif row["mode"] != "agg":
                why = "disaggregated deployment"
            elif row["backend"] not in AIC_ENGINES:
                why = f"engine {row['backend']}"
            elif row["system"] not in AIC_GPUS:
                why = f"GPU {row['system']}"
            elif row["model_path"] not in AIC_MODELS:
                why = f"model {row['model_path']}"
            elif (
                _num(row["attention_dp_size"]) > 1
                or _num(row["pp_size"]) > 1
                or moe_gpus > max(1, _num(row["tp_size"]))
            ):  # more GPUs for the MoE layers than for attention: attention data parallel
                why = "attention-DP or pipeline parallel"
            if why:
                skipped[f"aiconfigurator: {why}"] += 1
                continue
            seen.add(same)
            precision = (row["precision"] or "bf16").lower()
            model = AIC_MODELS[row["model_path"]]
            model += "" if precision == "bf16" else f":{precision}"
            source = dict(
                p.split("=", 1) for p in row["silicon_data_source"].split("; ") if "=" in p
            )
            conc = int(
                _num(source.get("silicon_concurrency"))
                if "silicon_concurrency" in source
                else _num(row["batch_size"])
            )
            tp = int(_num(row["tp_size"]) or 1)
            name, policy = AIC_ENGINES[row["backend"]]
            version = row["backend_version"] or "?"
            gpu = AIC_GPUS[row["system"]]
            kv_dtype = "fp8" if precision in AIC_FP8_KV else ""
            range_ratio = 1.0
            if inferencex.is_inferencex(row["silicon_data_source"]):
                try:  # its launch script's flags and its client's lengths
                    served, kv_dtype = inferencex.settings(
                        gpu,
                        precision,
                        CAMPAIGN_RELEASE.get(aic_campaign(source), version),
                        int(row["isl"]),
                        conc,
                    )
                except KeyError:
                    skipped["aiconfigurator: an InferenceX deployment not read yet"] += 1
                    continue
                range_ratio = inferencex.RANGE_RATIO
            else:
                served = {}
            ep = _num(row["moe_ep_size"])
            settings = {"tensor_parallel": tp, **served}
            if ep > 1:  # --enable-expert-parallel on one instance: its ranks hold whole experts
                settings["expert_parallel"] = True
            if policy == "sglang":
                # The overlap event loop, on unless --disable-overlap-schedule (SglangKnobs):
                # nothing in these rows says it was turned off.
                settings["overlap_schedule"] = True
                # SGLang's KV pool: its own default memory fraction, not vLLM's 0.9.
                mem = get_gpu(AIC_GPUS[row["system"]]).mem_gb
                release = release_tuple(version)
                settings["mem_utilization"] = (
                    sglang_mem_fraction_static(mem, tp, sglang_chunk_default(mem))
                    if release >= SGLANG_MEMORY_HOOK_FROM
                    else sglang_051_mem_fraction_static(AIC_GPUS[row["system"]], tp)
                )
                if release < SGLANG_RESERVES_FIXED_OUTPUT:
                    settings["reserve_fixed_output"] = False  # (see SglangKnobs)
                if release >= AIC_SGLANG_GENERATED_FROM:
                    settings.update(
                        enable_mixed_chunk=True, max_prefill_tokens=int(row["isl"]) + 1500
                    )
            runs.append(
                PublicRun(
                    key=row["id"],
                    source="aiconfigurator",
                    gpu=gpu,
                    model=model,
                    engine=f"{name} {version}",
                    policy=policy,
                    settings=settings,
                    kv_dtype=kv_dtype,
                    campaign=aic_campaign(source),
                    range_ratio=range_ratio,
                    parallel=f"TP{tp}" + (f"+EP{int(ep)}" if ep > 1 else ""),
                    isl=int(row["isl"]),
                    osl=int(row["osl"]),
                    concurrency=conc,
                    measured_means={
                        "ttft_s": float(row["silicon_ttft_ms"]) / 1000,
                        "tpot_s": float(row["silicon_tpot_ms"]) / 1000,
                    },
                )
            )
    return runs


def load_runs(path: str | Path | None = None) -> tuple[list[PublicRun], Counter]:
    """Every public run found, marked fit or held out, and the count of rows skipped (why)."""
    root = data_dir(path)
    skipped: Counter = Counter()
    runs = load_llmservingsim(root, skipped) + load_aiconfigurator(root, skipped)
    return _mark(runs), skipped


def select(
    runs: Iterable[PublicRun],
    gpu: str | None = None,
    fit: bool | None = None,
    max_osl: int | None = None,
) -> list[PublicRun]:
    """Filter runs by GPU, fit/held-out and output length (long outputs cost the most)."""
    return [
        r
        for r in runs
        if (gpu is None or r.gpu == gpu)
        and (fit is None or r.fit == fit)
        and (max_osl is None or r.osl <= max_osl)
    ]
