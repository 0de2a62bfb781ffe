"""How InferenceX served and measured the MiniMax-M2.5 rows of aiconfigurator's silicon sample.

The sample's 2026 MiniMax-M2.5 rows are InferenceX's (SemiAnalysisAI/InferenceX): their
sources are its results database ("db-dump ... config_id=...; workflow_run_id=...") and two
exports of it, with its images (vllm/vllm-openai:v0.16.0 to v0.19.0), its model prefix
(`minimaxm2.5`) and its three shapes (1024/1024, 1024/8192, 8192/1024); aiconfigurator reads
such records with `src/aiconfigurator/sdk/config_adapter/inferencex.py`. InferenceX keeps one
launch script per model, precision and GPU (`benchmarks/single_node/minimaxm2.5_<prec>_<gpu>.sh`)
and one image per recipe (`.github/configs/nvidia-master.yaml`), so a row's image release names
the script that served it. Those scripts set what the replay would otherwise take from vLLM's
defaults (`RECIPES`), and every one of them runs the same client (`RANGE_RATIO`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# The client (benchmarks/benchmark_lib.sh `run_benchmark_serving`, unchanged from 2026-03-01 to
# 2026-04-22): utils/bench_serving/benchmark_serving.py --dataset-name random --random-range-ratio
# $RANDOM_RANGE_RATIO (0.8: .github/workflows/benchmark-tmpl.yml) --num-prompts 10N
# --max-concurrency N --request-rate inf --ignore-eos --num-warmups 2N. `sample_random_requests`
# draws every request's input AND output length uniformly from the integers
# [int(L x 0.8), L] (`sample_uniform`: lower = int(seq_len * range_ratio), upper = seq_len), so a
# "1024 x 1024" row averages 921.5 tokens in and out. The 2N warm-up requests (one test prompt)
# all return before the measured 10N start, all N of them at once on an idle server: the burst
# and the ten rounds the replay already weighs (fidelity_replay.MEASURED_ROUNDS = 10).
RANGE_RATIO = 0.8


@dataclass(frozen=True)
class Recipe:
    """One InferenceX launch script, as far as it changes what the simulator replays."""

    script: str  # the script and the InferenceX commit it is read at
    settings: dict = field(default_factory=dict)  # SimConfig overrides (vLLM flag names)
    kv_dtype: str = ""  # --kv-cache-dtype; "" = auto: the checkpoint's 16-bit activations
    batched_tokens_per_isl: int = 0  # --max-num-batched-tokens "$((ISL * k))"; 0 = vLLM's


# (GPU, weights' precision, the image's vLLM release) -> the script that served it. Prefix caching
# (on until 2026-03-27, `--no-enable-prefix-caching` after commit 0f78cf4eb) is left out: random
# prompts share no block. MiniMax-M2.5's FP8 checkpoint states no KV-cache scales, so "auto" is
# a BF16 cache (253,952 bytes a token over its 62 layers, twice the FP8 one). Not replayed:
# --stream-interval 20 (the client's chunks, not the steps), --max-cudagraph-capture-size 2048
# and the H100's '{"cudagraph_mode":"PIECEWISE"}' (graphs are not in the cost model).
RECIPES: dict[tuple[str, str, str], Recipe] = {
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


def is_inferencex(model_path: str, source: dict[str, str]) -> bool:
    """Whether a silicon row is one of InferenceX's MiniMax-M2.5 measurements."""
    return model_path == "MiniMaxAI/MiniMax-M2.5" and source.get("measured", "") >= "2026-03"


def recipe(gpu: str, precision: str, release: str) -> Recipe:
    """The launch script of an InferenceX row; KeyError for a deployment not read yet."""
    return RECIPES[(gpu, precision, release)]


def settings(gpu: str, precision: str, release: str, isl: int) -> tuple[dict, str]:
    """(SimConfig overrides, KV dtype) of an InferenceX row served with `isl` tokens in."""
    r = recipe(gpu, precision, release)
    out = dict(r.settings)
    if r.batched_tokens_per_isl:
        out["max_num_batched_tokens"] = r.batched_tokens_per_isl * isl
    return out, r.kv_dtype


def mean_length(length: int, range_ratio: float) -> float:
    """The mean of `sample_uniform`'s integers [int(length x ratio), length]."""
    return (int(length * range_ratio) + length) / 2
