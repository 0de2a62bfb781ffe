"""Measured kernel times from aiconfigurator-core's tables (issue 30): the GEMMs, and every
measured operator of a deployment gathered in `kernel_times`.

Notable features
- Tables: see sim/cost/kernel_data.py (where they live, units, lazy loading). The GEMM table,
  `<gpu>/gemm/vllm/<version>/gemm_perf.parquet`, holds one row per (m, n, k, gemm_dtype) with
  `latency` in ms. For vLLM 0.24.0 on an H200 the bf16 rows are a full grid: m in 75 values
  1..32768 (dense below 4,353), n and k in 22 values 32..65536 each; `kernel_source`
  torch.nn.functional.linear (cuBLAS); fp8 rows are vLLM's Cutlass scaled-mm.
- A GEMM here is (m, k) x (k, n): m = tokens in the step, n = output features, k = input
  features. `GemmTable.seconds(m, n, k)` interpolates the grid trilinearly (linear in m, n and k
  between grid points; past the largest m, time grows in proportion to m, as a GEMM that fills
  the GPU does). Shapes of real models (e.g. Llama-3.1-8B's down projection, k = 14,336) fall
  between grid points.
- Timing noise: a few grid points took twice their neighbours (B200 FP8 at m = 4: 32 us beside
  13 us at m = 3 and 5). A smaller GEMM can always run as a padded larger one, so no point is
  allowed above 1.1 x the fastest larger shape along m, n or k (kernel_data.envelope); ordinary
  few-percent noise stays as measured.
- Why it matters: a roofline with one MFU says a 256-token GEMM runs at the same share of the
  peak as a 4,096-token one. Measured, it does not (small m cannot fill the GPU's tiles):
  `layer_gemm_efficiency` shows it, the Prefill vs decode lesson draws it.
- The table itself (`GemmTable`, `gemm_table`) is sim/cost/kernel_gemm.py's.
- `linear_times` prices a step's linear layers (bf16 or FP8 W8A8, any tensor-parallel size):
  every layer's QKV and output projections, the dense MLPs, a MoE model's shared experts and
  router (bf16, replicated on every rank). `lm_head_times` prices the lm_head: one bf16 GEMM of
  the sampled positions against the rank's slice of the vocabulary.
- `kernel_times` gathers what the tables price for one deployment (`KernelTimes`): these GEMMs,
  the lm_head, prefill and decode attention (kernel_attention.py), the routed experts
  (kernel_moe.py) and the tensor-parallel all-reduces (kernel_comm.py); `KernelTimes.sources`
  says which source priced which operator, the roofline taking the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.cost.kernel_attention import (
    DecodeAttentionTimes,
    PrefillAttentionTimes,
    decode_attention_times,
    prefill_attention_times,
)
from sim.cost.kernel_comm import AllReduceTimes, allreduce_times
from sim.cost.kernel_data import VLLM, Tables, available
from sim.cost.kernel_gemm import GemmTable, gemm_table
from sim.cost.kernel_moe import MoeTimes, moe_times
from sim.cost.kernel_moe_deepgemm import PaddedDeepGemmTimes
from sim.cost.specs import GpuSpec, ModelSpec

__all__ = [
    "available",
    "gemm_table",
    "kernel_times",
    "layer_gemm_efficiency",
    "layer_gemms",
    "lm_head_times",
]


def layer_gemms(model: ModelSpec) -> tuple[tuple[int, int], ...]:
    """(n, k) of one dense decoder layer's GEMMs: fused QKV, output, fused gate+up, down."""
    q, kv = model.heads * model.head_dim, model.kv_heads * model.head_dim
    d, ff = model.hidden, model.intermediate
    return ((q + 2 * kv, d), (d, q), (2 * ff, d), (d, ff))


def layer_gemm_efficiency(gpu: GpuSpec, model: ModelSpec, tokens: int) -> float | None:
    """Measured share of the bf16 peak that one layer's GEMMs reach at `tokens` tokens a step,
    or None without a table (or for a model whose layers are not dense GQA)."""
    table = gemm_table(gpu.name)
    if table is None or model.moe is not None or model.mla is not None:
        return None
    shapes = layer_gemms(model)
    flops = sum(2 * tokens * n * k for n, k in shapes)
    seconds = sum(table.seconds(tokens, n, k) for n, k in shapes)
    return flops / seconds / (gpu.bf16_tflops * 1e12)


def table_dtype(model: ModelSpec) -> str | None:
    """The table's gemm_dtype for this model's matmuls: bf16, FP8 W8A8 with a per-tensor scale
    (vLLM's Cutlass scaled-mm rows), or NVFP4 (E2M1 with an FP8 scale per 16 weights: the
    FlashInfer kernel's rows, Blackwell only); None for widths the tables do not hold (W4A16).

    Block-scaled FP8 checkpoints (Qwen3-235B-A22B-FP8, MiniMax-M2.5: 128 x 128 scales) take the
    per-tensor rows too. The `fp8_block` rows are timed without CUDA graphs (aiconfigurator's
    collector/vllm/collect_gemm.py: `use_cuda_graph=gemm_type != "fp8_block"`), so they hold the
    host's launches: on an H200 (vLLM 0.24.0) 58 us at m = 1 for (n, k) = (2048, 3072) and a
    flat 83-87 us from m = 64 to 4,096, against 9 us and 16-81 us per-tensor, where a server's
    decode replays its steps as CUDA graphs. The MoE rows are timed in CUDA graphs and do take
    the block-scaled kernels (kernel_moe.py)."""
    if model.matmul_bytes_per_param == 2:
        return "bfloat16"
    if model.matmul_bytes_per_param == 1 and model.bytes_per_param == 1:
        return "fp8"
    if model.bytes_per_param == 0.5 and model.scale_bytes_per_param == 1 / 16:
        return "nvfp4"
    return None


@dataclass(frozen=True)
class LinearTimes:
    """Measured seconds of a step's linear layers (all but the routed experts and the lm_head)
    on ONE tensor-parallel rank."""

    table: GemmTable
    shapes: tuple[tuple[int, int, int], ...]  # (n, k, layers): one GEMM as one rank holds it
    source: str  # e.g. "vLLM 0.24.0 GEMMs, fp8"
    # GEMMs that run unquantized beside the quantized ones, (bf16 table, n, k, layers) each:
    # - a MoE layer's router (n = experts, k = hidden): every rank holds all of it (vLLM's gate
    #   is a ReplicatedLinear, never quantized: modules_to_not_convert "gate"), as
    #   aiconfigurator's own MoE block prices it (sdk/models/blocks/moe.py `router_gemm`, bf16);
    # - attention projections the checkpoint leaves out of its quantization
    #   (ModelSpec.attention_bytes: MiniMax-M2.5's NVFP4 checkpoint).
    unquantized: tuple[tuple[GemmTable, int, int, int], ...] = ()

    def __call__(self, tokens: int) -> float:
        """Every layer's GEMMs for `tokens` tokens, seconds."""
        s = sum(count * self.table.seconds(tokens, n, k) for n, k, count in self.shapes)
        for table, n, k, count in self.unquantized:
            s += count * table.seconds(tokens, n, k)
        return s


def linear_times(
    gpu_name: str, model: ModelSpec, tensor_parallel: int = 1, tables: Tables = VLLM
) -> LinearTimes | None:
    """The measured linear-layer pricing for this deployment, or None (roofline): no package, no
    table for the GPU or dtype, or MLA attention.

    Tensor parallel as vLLM splits a layer: QKV and gate+up by output columns (n / TP), the
    output and down projections by input rows (k / TP). A MoE model's layers keep their
    attention projections here, plus the dense MLPs of its leading dense layers and its shared
    experts and router (bf16); the routed experts are kernel_moe.py's. Attention projections the
    checkpoint left unquantized (ModelSpec.attention_bytes) take the bf16 rows.
    """
    dtype = table_dtype(model)
    if model.mla is not None or dtype is None:
        return None
    table = gemm_table(gpu_name, dtype, tables)
    if table is None:
        return None
    tp = tensor_parallel
    (qkv, d), (_, q), (up, _), (_, ff) = layer_gemms(model)
    layers = model.layers
    attention = [(max(1, qkv // tp), d, layers), (d, max(1, q // tp), layers)]
    shapes = []
    mlps = [(ff, layers)]  # (width, layers with a dense MLP of that width)
    if model.moe is not None:
        m = model.moe
        mlps = [(ff, m.dense_layers), (m.shared_intermediate, model.moe_layers)]
    for width, count in mlps:
        if width and count:
            shapes += [(max(1, 2 * width // tp), d, count), (d, max(1, width // tp), count)]
    source = f"{table.version} GEMMs, {dtype}"
    bf16 = table if dtype == "bfloat16" else gemm_table(gpu_name, "bfloat16", tables)
    unquantized = []
    if model.attention_bytes and model.attention_bytes != model.bytes_per_param:
        if model.attention_bytes != 2 or bf16 is None:
            return None  # no table for the attention's own width: the roofline prices it all
        unquantized += [(bf16, n, k, count) for n, k, count in attention]
        source += ", attention bf16"
    else:
        shapes = attention + shapes
    if model.moe is not None and bf16 is not None:
        unquantized.append((bf16, model.moe.num_experts, d, model.moe_layers))
        source += ", router bf16"
    return LinearTimes(table, tuple(shapes), source, tuple(unquantized))


@dataclass(frozen=True)
class LmHeadTimes:
    """Measured seconds of the lm_head on ONE tensor-parallel rank: (sampled positions, hidden)
    x (hidden, vocab / TP), in bf16."""

    table: GemmTable
    n: int  # the rank's slice of the vocabulary
    k: int  # hidden size
    source: str

    def __call__(self, sampled: int) -> float:
        """The logits of `sampled` positions (decodes and last prompt chunks), seconds."""
        return self.table.seconds(sampled, self.n, self.k)


def lm_head_times(
    gpu_name: str, model: ModelSpec, tensor_parallel: int = 1, tables: Tables = VLLM
) -> LmHeadTimes | None:
    """The measured lm_head pricing, or None (roofline: no package or no bf16 table).

    vLLM's ParallelLMHead splits the vocabulary over the tensor-parallel ranks, each computing
    its slice's logits (then all-gathered: the roofline's comm), padded to a multiple of 64
    first (`pad_vocab_size`, vocab_parallel_embedding.py). It runs in bf16 whatever the
    checkpoint: FP8 and NVFP4 checkpoints leave `lm_head` out of their quantization
    (`exclude_modules` / `ignore` in their configs), as ModelSpec.head_bytes_per_param says.
    Only sampled positions reach it (vLLM's `compute_logits` on `logits_indices`): m = the
    step's decodes plus its last prompt chunks, 1 to a few hundred, where the tables' small-m
    rows are weight reads at the bandwidth they measured.
    """
    table = gemm_table(gpu_name, "bfloat16", tables)
    if table is None:
        return None
    padded = -(-model.vocab // 64) * 64
    n = -(-padded // tensor_parallel)
    return LmHeadTimes(table, n, model.hidden, f"{table.version} GEMMs, bfloat16")


# The operators of a step, in the order `KernelTimes.sources` lists them, and their names.
OPERATORS = {
    "linear": "linear layers",
    "prefill_attention": "prefill attention",
    "decode_attention": "decode attention",
    "moe": "routed experts",
    "allreduce": "TP all-reduce",
    "lm_head": "lm_head",
    "sampling": "sampling",
    "kv_write": "KV write",
    "expert_parallel": "EP transfers",
}
ALWAYS_ROOFLINE = ("sampling", "kv_write", "expert_parallel")


@dataclass(frozen=True)
class KernelTimes:
    """What the measured tables price for one deployment; None parts stay on the roofline."""

    gpu: str
    linear: LinearTimes | None = None
    prefill_attention: PrefillAttentionTimes | None = None
    decode_attention: DecodeAttentionTimes | None = None
    moe: MoeTimes | PaddedDeepGemmTimes | None = None
    allreduce: AllReduceTimes | None = None
    lm_head: LmHeadTimes | None = None
    absent: tuple[str, ...] = ()  # operators this deployment does not run (MoE of a dense model)
    tables: Tables = VLLM  # whose kernels, of which release; a draft model takes the same

    @property
    def sources(self) -> dict[str, str]:
        """Operator -> what priced it: a table's description, or "roofline"."""
        out = {}
        for op in OPERATORS:
            if op in self.absent:
                continue
            part = None if op in ALWAYS_ROOFLINE else getattr(self, op)
            out[op] = part.source if part is not None else "roofline"
        return out

    @property
    def source(self) -> str:
        """One line: the tables used, per operator, then what the roofline prices."""
        measured = [f"{OPERATORS[op]} ({s})" for op, s in self.sources.items() if s != "roofline"]
        rest = [OPERATORS[op] for op, s in self.sources.items() if s == "roofline"]
        if not measured:
            return "roofline"
        head = f"aiconfigurator-core, {self.gpu}: " + "; ".join(measured)
        return head + ("; roofline: " + ", ".join(rest) if rest else "")


def kernel_times(
    gpu_name: str,
    model: ModelSpec,
    tensor_parallel: int = 1,
    expert_parallel: int = 1,
    tables: Tables = VLLM,
    whole_experts: bool = False,
) -> KernelTimes | None:
    """Every measured pricing this deployment has (None when the tables hold nothing for it).
    `expert_parallel`: data-parallel instances sharing the experts (vLLM's DP + EP); `tables`:
    whose kernels, of which release (an operator the engine has no table for takes vLLM's);
    `whole_experts`: ranks hold whole experts (--enable-expert-parallel, one instance too)."""
    absent = {
        "moe": model.moe is None,
        "allreduce": tensor_parallel == 1,
        "expert_parallel": model.moe is None or expert_parallel == 1,
    }
    tp = tensor_parallel
    times = KernelTimes(
        gpu_name,
        linear_times(gpu_name, model, tp, tables),
        prefill_attention_times(gpu_name, model, tp, tables),
        decode_attention_times(gpu_name, model, tp, tables),
        moe_times(gpu_name, model, tp, expert_parallel, tables, whole_experts),
        allreduce_times(gpu_name, model, tp, tables),
        lm_head_times(gpu_name, model, tp, tables),
        tuple(op for op, no in absent.items() if no),
        tables,
    )
    return None if times.source == "roofline" else times
