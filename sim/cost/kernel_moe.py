"""Measured routed-expert (MoE) times from aiconfigurator-core's tables (issue 30).

Notable features
- Table (sim/cost/kernel_data.py): `<gpu>/moe/<engine>/<version>/moe_perf.parquet`, one row per
  (moe_dtype, num_tokens, hidden_size, inter_size, topk, num_experts, moe_tp_size, moe_ep_size,
  distribution, kernel_source) with `latency` in ms: ONE MoE layer's fused experts (routing
  alignment, gate+up GEMM, activation, down GEMM) on one rank, as aiconfigurator's collector
  times vLLM's `fused_experts` (collector/vllm/collect_moe.py): `num_tokens` tokens enter the
  layer, each rank holds `inter_size / moe_tp_size` of every one of its
  `num_experts / moe_ep_size` experts.
- Parallelism as vLLM runs it: tensor parallel splits every expert (moe_tp = TP, moe_ep = 1);
  with expert parallel over g data-parallel instances (`--enable-expert-parallel`) each rank
  holds whole experts (moe_tp = 1, moe_ep = TP x g) and the layer sees all g instances' tokens
  (the all-gather of vLLM's default all2all backend), so the caller passes the group's tokens.
- Routing: `power_law_1.2`, the skewed token-to-expert load aiconfigurator's own MoE models
  assume (sdk/models/moe.py: workload_distribution "power_law", alpha 1.2); "balanced" where
  a table lacks it.
- Weights: the Qwen3 and DeepSeek FP8 checkpoints are block-quantized (128 x 128 scales), so an
  FP8 model takes the `fp8_block` rows only (the per-tensor `fp8` rows time another kernel: on
  an H200, FlashInfer's Cutlass path, 5x slower than Triton's block kernel at 16 tokens), bf16
  the `bfloat16` rows, NVFP4 the `nvfp4` ones. Where several kernels were timed for one shape (vLLM
  0.24.0 on an H200: Triton for tensor parallel, FlashInfer's Cutlass for expert parallel), the
  fastest at each token count, as the engine's kernel choice aims for.
- Which kernel: the one vLLM's MoE oracles pick for the GPU (`vllm_kernel`). Unquantized experts
  run Triton's fused_moe, priced from SGLang's copy of it where no vLLM table timed it there
  (the RTX PRO 6000: SGLANG_TRITON), never from another kernel's rows. On Blackwell a
  block-FP8 model runs FlashInfer's TRTLLM-gen experts from vLLM 0.18 on, but aiconfigurator's
  vLLM 0.19 and 0.22 tables time only Triton's fused_moe there (its collector calls
  `fused_experts` directly); those rows are taken from the nearest table that timed the
  engine's own kernel (0.24.0), and the source line says so.
- Interpolated linearly in num_tokens (27 values, 1..16384 on an H200); past the largest, time
  grows in proportion to the tokens. Experts split over n ranks that the table never timed
  split take its whole-expert rows over n ranks (named "EP8 rows for TP8"). A model whose
  expert shape (hidden, expert width, top-k, experts) or parallelism the table lacks keeps
  the roofline.
- Parallelism as vLLM's --enable-expert-parallel sets it on one instance too: its ranks hold
  whole experts (moe_tp 1, moe_ep = TP), the public MoE runs' `TP4+EP4`.
- vLLM 0.12 on Hopper runs block-FP8 experts on DeepGEMM, padded blocks and all: those are
  priced from DeepGEMM's GEMM rows instead (kernel_moe_deepgemm.py).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from sim.cost.kernel_data import (
    MS,
    TABLE_GPUS,
    VLLM,
    Tables,
    envelope,
    read,
    release,
    table_name,
    table_paths,
)
from sim.cost.kernel_moe_deepgemm import (
    PaddedDeepGemmTimes,
    padded_deepgemm_times,
    runs_padded_deepgemm,
)
from sim.cost.specs import ModelSpec

DISTRIBUTIONS = ("power_law_1.2", "balanced", "power_law_1.01")  # in order of preference
# aiconfigurator's systems whose GPUs are compute capability 10.x (vLLM's
# `is_device_capability_family(100)`): B200 and B300. (The RTX PRO 6000 is 12.0.)
SM100_SYSTEMS = frozenset({"b200_sxm", "b300_sxm", "gb200", "gb300"})
# The first vLLM release whose FlashInfer TRTLLM-gen FP8 experts take any router
# (`TrtLlmFp8ExpertsModular`, vllm/model_executor/layers/fused_moe/experts/trtllm_fp8_moe.py). In
# 0.17 only the monolithic class exists, whose block-FP8 path takes DeepSeek-V3 and Renormalize
# routing only, so a sigmoid router without expert groups (MiniMax-M2.5) falls through to
# DeepGEMM, which no vLLM table times: it keeps the Triton rows.
TRTLLM_FP8_ANY_ROUTER = (0, 18)
# vLLM 0.16 on Hopper: `select_fp8_moe_backend` (oracle/fp8.py 138-330) walks AITER,
# FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, DEEPGEMM, ... in that order, and FlashInfer's Cutlass
# experts take block FP8 on 9.0 (flashinfer_cutlass_moe.py `_supports_quant_scheme` 104-130),
# so they win for tensor and expert parallel alike. 0.17 adds `_get_priority_backends`, which on
# Hopper puts Triton first for tensor parallel (FlashInfer's Cutlass for expert parallel: the
# only kernel the tables time for whole experts there). 0.14 takes FlashInfer only when
# VLLM_USE_FLASHINFER_MOE_FP8 is set, else DeepGEMM, which no vLLM table times.
HOPPER_CUTLASS_FIRST = ((0, 16), (0, 17))  # [from, until)
# Unquantized (bf16) experts run on Triton's fused_moe on every NVIDIA GPU unless
# VLLM_USE_FLASHINFER_MOE_FP16=1 is set (0.19.0 oracle/unquantized.py
# `select_unquantized_moe_backend` 96-176: FlashInfer's TRTLLM or Cutlass experts only with it;
# 0.12.0 unquantized_fused_moe_method.py 62-66 the same). vLLM's tables name that kernel
# "vllm_fused_moe" (0.19, 0.22) or "..._triton_tritonexperts" (0.24).
VLLM_TRITON = ("vllm_fused_moe", "_triton_")
# Where no vLLM table timed it on a GPU (the RTX PRO 6000's only vLLM table, 0.24.0, times its
# bf16 experts on FlashInfer's Cutlass kernel alone), SGLang's tables time the same kernel:
# SGLang's fused_moe_triton is its copy of vLLM's Triton fused_moe. Two collectors, one kernel:
# on H100 and H200, where both timed it (bf16, power_law_1.2, every shape and layout both hold),
# SGLang 0.5.14's rows are 1.0x vLLM 0.24's at the median for split experts (p10-p90 0.8-1.55x)
# and 1.12-1.18x for whole experts (expert parallel; 0.86-1.76x); for Qwen3-30B-A3B's experts on
# one GPU 0.90-1.06x from 8 to 8192 tokens (test_kernel_ops.py). On the RTX PRO 6000 they are
# 0.62-1.40x FlashInfer's Cutlass rows.
SGLANG_TRITON = ("sglang_fused_moe_triton",)
HOPPER_SYSTEMS = frozenset({"h100_sxm", "h200_sxm"})


def vllm_kernel(system: str, dtype: str, tables: Tables) -> tuple[str, ...] | None:
    """The kernel_source (substrings, any of them) of the experts vLLM runs on this GPU, where
    its tables time more than one and it matters; None = any (the fastest at each token count).
    Unquantized experts: Triton's (VLLM_TRITON).

    Mirrors vLLM 0.18-0.19's `select_fp8_moe_backend` (oracle/fp8.py): its priority list starts
    FLASHINFER_TRTLLM, FLASHINFER_CUTLASS, DEEPGEMM, ..., TRITON, and only on Hopper does
    `_get_priority_backends` move Triton (tensor parallel) or FlashInfer's Cutlass (expert
    parallel) to the front for block FP8. On a 10.x GPU the first that supports the layer wins:
    TRTLLM-gen (the Cutlass path takes block FP8 on 9.0 only, flashinfer_cutlass_moe.py
    `_supports_quant_scheme`). On Hopper, vLLM 0.16 takes FlashInfer's Cutlass experts
    (HOPPER_CUTLASS_FIRST)."""
    if tables.engine != "vllm":
        return None
    if dtype == "bfloat16":
        return VLLM_TRITON
    if dtype != "fp8_block":
        return None
    if system in HOPPER_SYSTEMS and tables.version:
        first, until = HOPPER_CUTLASS_FIRST
        return ("flashinfer_cutlass",) if first <= release(tables.version) < until else None
    if system not in SM100_SYSTEMS:
        return None
    if tables.version and release(tables.version) < TRTLLM_FP8_ANY_ROUTER:
        return None
    return ("flashinfer_trtllm",)


def moe_dtypes(model: ModelSpec) -> tuple[str, ...]:
    """The table's moe_dtype rows for this model's experts, in order of preference."""
    if model.matmul_bytes_per_param == 2:
        return ("bfloat16",)
    if model.matmul_bytes_per_param == 1 and model.bytes_per_param == 1:
        return ("fp8_block",)
    if model.bytes_per_param == 0.5 and model.scale_bytes_per_param == 1 / 16:
        return ("nvfp4",)
    return ()


@dataclass(frozen=True)
class MoeTimes:
    """Measured seconds of a step's routed experts, all MoE layers, one rank."""

    tokens: np.ndarray  # (T,) ascending num_tokens of the table
    seconds_grid: np.ndarray  # (T,) one layer, seconds
    layers: int  # MoE layers
    source: str

    def __call__(self, tokens: float) -> float:
        """All MoE layers for `tokens` tokens entering each (the group's, under expert
        parallel), seconds."""
        if tokens <= 0:
            return 0.0
        t, s = self.tokens, self.seconds_grid
        one = s[-1] * tokens / t[-1] if tokens > t[-1] else float(np.interp(tokens, t, s))
        return self.layers * one


@functools.cache
def _moe_rows(
    system: str,
    shape: tuple[int, int, int, int],
    tp: int,
    ep: int,
    dtype: str,
    tables: Tables,
    kernel: tuple[str, ...] | None = None,
):
    """(table, kernels, num_tokens, seconds) of the nearest table with rows for this expert
    shape (hidden, expert width, top-k, experts), parallelism and dtype, of a kernel_source
    containing one of `kernel` when given; None if none has."""
    hidden, width, topk, experts = shape
    for path in table_paths(system, "moe", "moe_perf.parquet", tables):
        df = read(path)
        df = df[
            (df["moe_dtype"] == dtype)
            & (df["hidden_size"] == hidden)
            & (df["inter_size"] == width)
            & (df["topk"] == topk)
            & (df["num_experts"] == experts)
            & (df["moe_tp_size"] == tp)
            & (df["moe_ep_size"] == ep)
        ]
        if kernel:
            df = df[df["kernel_source"].map(lambda name: any(k in name for k in kernel))]
        for dist in DISTRIBUTIONS:
            rows = df[df["distribution"] == dist]
            if rows["num_tokens"].nunique() < 2:
                continue
            # The fastest kernel timed at each token count; a timing spike above a larger token
            # count's time is noise (`envelope`).
            best = rows.groupby("num_tokens")["latency"].min().sort_index()
            seconds = envelope(best.to_numpy(dtype=float) * MS)
            kernels = ", ".join(sorted(set(rows["kernel_source"])))
            return table_name(path), kernels, best.index.to_numpy(dtype=float), seconds
    return None


def moe_times(
    gpu_name: str,
    model: ModelSpec,
    tensor_parallel: int = 1,
    expert_parallel: int = 1,
    tables: Tables = VLLM,
    whole_experts: bool = False,
) -> MoeTimes | PaddedDeepGemmTimes | None:
    """Measured routed experts for this deployment, or None (roofline). `expert_parallel`: the
    data-parallel instances sharing the experts (1 = one instance); `whole_experts`: each rank
    holds whole experts (vLLM's --enable-expert-parallel, which one tensor-parallel instance
    takes too: moe_tp 1, moe_ep = TP; its ranks see the same tokens, so the caller passes the
    step's), where False with one instance splits every expert across the ranks."""
    system = TABLE_GPUS.get(gpu_name)
    m = model.moe
    if system is None or m is None:
        return None
    shape = (model.hidden, m.expert_intermediate, m.experts_per_token, m.num_experts)
    if expert_parallel > 1 or whole_experts:
        layouts = [(1, tensor_parallel * expert_parallel)]
    else:
        # Experts split n ways where the table times that; else its whole-expert rows over n
        # ranks (vLLM 0.19.0 on an H200 times fp8_block slices for moe_tp 1, 2 and 4 only):
        # each rank reads the same share of the picked experts' weights and launches the same
        # kernels, arranged as whole experts. Where a table has both they agree: MiniMax-M2.5's
        # experts on an H200 (power_law_1.2), moe_tp 4 against moe_ep 4, 58 against 73 us a
        # layer at 4 tokens, 296 against 285 us at 256.
        layouts = [(tensor_parallel, 1)] + ([(1, tensor_parallel)] if tensor_parallel > 1 else [])
    for dtype in moe_dtypes(model):
        # vLLM 0.12's DeepGEMM experts on Hopper, which compute their padded rows too
        # (kernel_moe_deepgemm.py): priced from DeepGEMM's GEMM rows, where the table has them.
        tp, ep = layouts[0]
        if runs_padded_deepgemm(system, dtype, tables, tp, m.expert_intermediate // tp):
            padded = padded_deepgemm_times(gpu_name, model, tp, ep, tables)
            if padded is not None:
                return padded
        # The engine's own kernel from the nearest table that timed it, then (Triton's
        # unquantized experts) SGLang's copy of it, else (the FP8 and FP4 kernels) any kernel.
        kernel = vllm_kernel(system, dtype, tables)
        tries = [(tables, kernel)]
        tries.append((Tables("sglang"), SGLANG_TRITON) if kernel == VLLM_TRITON else (tables, None))
        for where, want in dict.fromkeys(tries):
            for tp, ep in layouts:
                found = _moe_rows(system, shape, tp, ep, dtype, where, want)
                if found:
                    table, kernels, tokens, seconds = found
                    par = f"TP{tp}" if ep == 1 else f"EP{ep}"
                    if not (expert_parallel > 1 or whole_experts) and ep > 1:
                        par += f" rows for TP{ep}"
                    source = f"{table} {dtype} {par}, {kernels}"
                    if where is not tables:
                        source += " (vLLM's Triton experts as SGLang runs them: no vLLM table here)"
                    elif want and tables.version and not table.endswith(f" {tables.version}"):
                        source += f" (the kernel vLLM {tables.version} runs here)"
                    return MoeTimes(tokens, seconds, model.moe_layers, source)
    return None
