"""How InferenceX served and measured its rows of aiconfigurator's silicon sample.

Two of the sample's campaigns are InferenceX's (SemiAnalysisAI/InferenceX, called InferenceMAX
until 2026): their sources are its results database ("db-dump ... config_id=...;
workflow_run_id=...") and two dated exports of it (2026-03-25.csv, 2026-04-06.csv), which hold
InferenceX's models only (DeepSeek-R1, gpt-oss-120b, Kimi-K2.5, GLM-5, Qwen3.5, MiniMax-M2.5 and
Llama 70B) in its three shapes (1024/1024, 1024/8192, 8192/1024); aiconfigurator reads such
records with `src/aiconfigurator/sdk/config_adapter/inferencex.py`.
- Llama-3.1-70B, "measured" 2025-10-29: InferenceMAX's Llama 3.3 70B FP8/FP4 runs
  (nvidia/Llama-3.3-70B-Instruct-FP8, the same shape), served by vllm/vllm-openai:v0.10.2
  (.github/workflows/70b-tmpl.yml), removed from InferenceMAX that day (commit 2582bce40,
  "remove llama 70b"). The H200 and B200 profiles are fitted on these.
- MiniMax-M2.5, 2026-03 and 2026-04, vllm/vllm-openai:v0.16.0 to v0.19.0.
InferenceX keeps one launch script per model, precision and GPU and one image per recipe, so a
row's image release names the script that served it. Those scripts set what the replay would
otherwise take from vLLM's defaults (`RECIPES`), and every one of them runs the same kind of
client (`RANGE_RATIO`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The client. In 2026 (benchmarks/benchmark_lib.sh `run_benchmark_serving`, unchanged from
# 2026-03-01 to 2026-04-22): utils/bench_serving/benchmark_serving.py --dataset-name random
# --random-range-ratio $RANDOM_RANGE_RATIO (0.8: .github/workflows/benchmark-tmpl.yml)
# --num-prompts 10N --max-concurrency N --request-rate inf --ignore-eos --num-warmups 2N. In
# 2025-10 the same flags without --num-warmups, from kimbochen/bench_serving (benchmarks/
# 70b_fp8_h200_slurm.sh at 9596d23d7; random-range-ratio 0.8 in .github/workflows/
# full-sweep-tmpl.yml), each run on a server just started. `sample_random_requests` draws every
# request's input AND output length uniformly from the integers [int(L x 0.8), L]
# (`sample_uniform`: lower = int(seq_len * range_ratio), upper = seq_len), so a "1024 x 1024" row
# averages 921.5 tokens in and out. The measured 10N requests start with all N of them at once
# on an idle server: the burst and the ten rounds the replay already weighs
# (fidelity_closed_loop.MEASURED_ROUNDS = 10).
RANGE_RATIO = 0.8
# The vLLM release of the 2025 rows, which name none (70b-tmpl.yml's image for H100, H200 and
# B200 at 9596d23d7, 2025-10-29).
RELEASE_2025 = "0.10.2"


@dataclass(frozen=True)
class Recipe:
    """One InferenceX launch script, as far as it changes what the simulator replays."""

    script: str  # the script and the InferenceX commit it is read at
    settings: dict = field(default_factory=dict)  # SimConfig overrides (vLLM flag names)
    kv_dtype: str = ""  # --kv-cache-dtype; "" = auto: the checkpoint's 16-bit activations
    batched_tokens_per_isl: int = 0  # --max-num-batched-tokens "$((ISL * k))"; 0 = vLLM's
    seqs_per_client: bool = False  # --max-num-seqs $CONC: as many seats as the benchmark's clients


ASYNC = {"async_scheduling": True}  # --async-scheduling

# (GPU, weights' precision, the image's vLLM release) -> the script that served it. Prefix caching
# (on until 2026-03-27, `--no-enable-prefix-caching` after commit 0f78cf4eb) is left out: random
# prompts share no block. MiniMax-M2.5's FP8 checkpoint states no KV-cache scales, so "auto" is
# a BF16 cache (253,952 bytes a token over its 62 layers, twice the FP8 one). Not replayed:
# --stream-interval 20 (the client's chunks, not the steps), --max-cudagraph-capture-size 2048
# and the H100's '{"cudagraph_mode":"PIECEWISE"}' (graphs are not in the cost model).
RECIPES: dict[tuple[str, str, str], Recipe] = {
    # Llama 3.3 70B, 2025-10 (scripts at 9596d23d7): --kv-cache-dtype fp8, --async-scheduling,
    # --no-enable-prefix-caching, --max-num-batched-tokens 8192 (vLLM's default on these GPUs
    # anyway), --gpu-memory-utilization 0.9, --max-num-seqs $CONC (H100, H200) or 512 (B200).
    # The seats change no schedule (a closed loop never holds more than its clients) but they do
    # size vLLM's profile run, whose dummy sampler samples one token for each of min(max_num_seqs,
    # max_num_batched_tokens) requests (sim/cost/engine_memory.py): at 64 clients 0.3 GB a GPU
    # where vLLM's default 1,024 seats keep 4.9 GB off the KV cache. Async scheduling is off by
    # default before vLLM 0.14 (public_run.VLLM_ASYNC_DEFAULT_FROM); what it does to admission
    # is replayed (sim/policies/vllm_v1.py), the CPU work it hides behind the GPU's is not (the
    # fitted per-request overhead is these runs').
    ("H100-SXM", "fp8", RELEASE_2025): Recipe(
        "70b_fp8_h100_slurm.sh at 9596d23d7 (2025-10-29)",
        ASYNC,
        kv_dtype="fp8",
        seqs_per_client=True,
    ),
    ("H200", "fp8", RELEASE_2025): Recipe(
        "70b_fp8_h200_slurm.sh at 9596d23d7 (2025-10-29)",
        ASYNC,
        kv_dtype="fp8",
        seqs_per_client=True,
    ),
    ("B200", "fp8", RELEASE_2025): Recipe(
        "70b_fp8_b200_docker.sh at 9596d23d7 (2025-10-29)",
        {**ASYNC, "max_num_seqs": 512},
        kv_dtype="fp8",
    ),
    ("B200", "fp4", RELEASE_2025): Recipe(
        "70b_fp4_b200_docker.sh at 9596d23d7 (2025-10-29)",
        {**ASYNC, "max_num_seqs": 512},
        kv_dtype="fp8",
    ),
    ("H200", "fp8", "0.16.0"): Recipe(
        "minimaxm2.5_fp8_h200.sh at a36346339 (2026-03-01)", {"mem_utilization": 0.95}
    ),
    ("H200", "fp8", "0.18.0"): Recipe(
        "minimaxm2.5_fp8_h200.sh at 1d5cae141 and 626932a11 (2026-03-27)",
        {"mem_utilization": 0.95},
    ),
    ("H100-SXM", "fp8", "0.18.0"): Recipe(
        "minimaxm2.5_fp8_h100.sh at 1d5cae141 and 626932a11 (2026-03-27)",
        {"mem_utilization": 0.90, "max_num_seqs": 256},
    ),
    ("B200", "fp8", "0.17.0"): Recipe(
        "minimaxm2.5_fp8_b200.sh at f342df18e (2026-03-11) and 626932a11 (2026-03-27)",
        {"mem_utilization": 0.95, "block_size": 32},
    ),
    ("B200", "fp8", "0.19.0"): Recipe(
        "minimaxm2.5_fp8_b200.sh at bddbf4031 (2026-04-03), the v0.19.0 image's commit",
        {"mem_utilization": 0.90, "block_size": 32},
        kv_dtype="fp8",
        batched_tokens_per_isl=2,
    ),
    ("B200", "fp4", "0.19.0"): Recipe(
        "minimaxm2.5_fp4_b200.sh at 79bd988e9 (2026-04-08) and 13962fcfa (2026-04-21)",
        {"mem_utilization": 0.90},
        kv_dtype="fp8",
        batched_tokens_per_isl=2,
    ),
}


def is_inferencex(silicon_data_source: str) -> bool:
    """Whether a silicon row is InferenceX's: its source is InferenceX's results database or a
    dated export of it ("db-dump/2026-04-27; ...", "source_file=2026-04-06.csv; ...")."""
    return silicon_data_source.startswith("db-dump") or bool(
        re.match(r"source_file=\d{4}-\d{2}-\d{2}\.csv;", silicon_data_source)
    )


def recipe(gpu: str, precision: str, release: str) -> Recipe:
    """The launch script of an InferenceX row; KeyError for a deployment not read yet."""
    return RECIPES[(gpu, precision, release)]


def settings(
    gpu: str, precision: str, release: str, isl: int, concurrency: int
) -> tuple[dict, str]:
    """(SimConfig overrides, KV dtype) of an InferenceX row served with `isl` tokens in to
    `concurrency` clients."""
    r = recipe(gpu, precision, release)
    out = dict(r.settings)
    if r.batched_tokens_per_isl:
        out["max_num_batched_tokens"] = r.batched_tokens_per_isl * isl
    if r.seqs_per_client:
        out["max_num_seqs"] = concurrency
    return out, r.kv_dtype


def mean_length(length: int, range_ratio: float) -> float:
    """The mean of `sample_uniform`'s integers [int(length x ratio), length]."""
    return (int(length * range_ratio) + length) / 2
