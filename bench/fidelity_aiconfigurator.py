"""aiconfigurator's silicon sample (ai-dynamo/aiconfigurator, Apache-2.0), read into `PublicRun`s.

`aic-core/src/aiconfigurator_core/systems/silicon_sample.csv`, copied to `<data>/aiconfigurator/`,
holds mean TTFT and TPOT of vLLM and SGLang on H100, H200 and B200 at a fixed input and output
length and a fixed number of requests in flight. Each row becomes a closed-loop run
(bench/fidelity_replay.py), deployed as its campaign deployed it: aiconfigurator's generator for
the gap analysis's rows (SGLang's flags, the FP8 KV cache), InferenceX's launch scripts for the
others (bench/fidelity_inferencex.py). Rows the simulator cannot represent are skipped with the
reason counted.
"""

from __future__ import annotations

import csv
import math
from collections import Counter
from pathlib import Path

import fidelity_inferencex as inferencex
from public_run import CAMPAIGN_RELEASE, PublicRun

from sim.cost.engine_memory import release_tuple
from sim.cost.hardware import get_gpu
from sim.policies.sglang_knobs import sglang_chunk_default, sglang_mem_fraction_static


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


# A closed loop replays at its client count, which a row states as
# silicon_concurrency (its benchmark's `aiperf --concurrency`). The sample's rows that state none
# are skipped, the reason counted; among the aggregated vLLM and SGLang rows on these GPUs that is
# three: Qwen3-32B FP8 on one, two and eight H100s under vLLM 0.12 (the gap analysis's Dynamo
# 0.8.0 jobs of 2026-01-23 and 25, whose ids read "_c_": a blank concurrency). Their batch_size
# is the deployment's max_batch_size, not its clients: the evaluation pipeline that ran those
# jobs measured six client counts per deployment, from 1 up to max_batch_size
# (src/aiconfigurator/eval/pipeline.py `_auto_concurrency_values`, at commit 5e0243eb1), and
# the row does not say which one it holds. Read as batch_size clients on one server, the
# one- and two-GPU rows would have needed 98-102% of an H100's datasheet bandwidth and FP8
# FLOP/s at once, which no kernel reaches: 24 clients of 4,000 + 1,000 tokens, each prompt
# whole in one compute-bound step (vLLM's 8,192-token budget takes it in one), the other
# steps reading 32.8 GB of weights and 13.9 GB of KV each, 1 / 16.85 ms steps a second, the
# prompts 18% of each second. Until 2026-12-08 they replayed as batch_size clients:
# TTFT +178% and +289%, E2E +86% and +132% (kernel tables).
NO_CLIENT_COUNT = "no client count (silicon_concurrency)"  # the reason such a row is skipped


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
            elif "silicon_concurrency=" not in row["silicon_data_source"]:
                why = NO_CLIENT_COUNT
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
            conc = int(_num(source["silicon_concurrency"]))
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
