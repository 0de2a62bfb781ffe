"""Measured GEMM times from aiconfigurator-core's kernel tables (issue 30, first part).

Notable features
- Source: NVIDIA's `aiconfigurator-core` 0.12.0 (Apache-2.0, an optional install:
  requirements-kernels.txt). Its tables measure kernels on the GPUs themselves, per engine and
  version: `aiconfigurator_core/systems/data/<gpu>/gemm/<engine>/<version>/gemm_perf.parquet`,
  one row per (m, n, k, gemm_dtype) with `latency` in MILLISECONDS. For vLLM 0.24.0 on an H200
  the bf16 rows are a full grid: m in 75 values 1..32768 (dense below 4,353), n and k in 22
  values 32..65536 each; `kernel_source` torch.nn.functional.linear (cuBLAS).
- A GEMM here is (m, k) x (k, n): m = tokens in the step, n = output features, k = input
  features. `GemmTable.seconds(m, n, k)` interpolates the grid trilinearly (linear in m, n and k
  between grid points; past the largest m, time grows in proportion to m, as a GEMM that fills
  the GPU does). Shapes of real models (e.g. Llama-3.1-8B's down projection, k = 14,336) fall
  between grid points.
- Why it matters: a roofline with one MFU says a 256-token GEMM runs at the same share of the
  peak as a 4,096-token one. Measured, it does not (small m cannot fill the GPU's tiles):
  `layer_gemm_efficiency` shows it, the Prefill vs decode lesson draws it.
- Loaded lazily (the first call per GPU reads one parquet file, ~0.1 s) and cached per process.
  Without the package every function returns None and callers keep the roofline.
- `linear_times` prices a step's dense linear layers (bf16 or FP8 W8A8, any tensor-parallel
  size) for `StepCostModel` when a run sets `step_costs=kernels`; attention, MoE, the lm_head and
  communication stay on the roofline (their tables come next, issue 30).
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.cost.specs import GpuSpec, ModelSpec

PACKAGE = "aiconfigurator_core"
ENGINE = "vllm"  # the engine whose kernels were measured (its torch/cuBLAS GEMMs)
# Our catalog's GPU names -> aiconfigurator's system folders (those it has tables for).
TABLE_GPUS = {
    "A100-80GB": "a100_sxm",
    "H100-SXM": "h100_sxm",
    "H200": "h200_sxm",
    "B200": "b200_sxm",
    "L4": "l4",
    "L40S": "l40s",
    "RTX-PRO-6000": "rtx_pro_6000_server",
}


def available() -> bool:
    """Is aiconfigurator-core installed (requirements-kernels.txt)?"""
    return importlib.util.find_spec(PACKAGE) is not None


@dataclass(frozen=True)
class GemmTable:
    """Measured GEMM latency on a regular (m, n, k) grid, in seconds."""

    gpu: str
    version: str  # the engine version the kernels were measured under
    m: np.ndarray  # (M,) ascending
    n: np.ndarray  # (N,) ascending
    k: np.ndarray  # (K,) ascending
    seconds_grid: np.ndarray  # (M, N, K)

    def seconds(self, m: int, n: int, k: int) -> float:
        """Interpolated time of one (m x k) @ (k x n) GEMM, in seconds."""
        if min(m, n, k) < 1:
            raise ValueError(f"GEMM dimensions must be >= 1, got m={m}, n={n}, k={k}")
        scale = 1.0
        if m > self.m[-1]:  # beyond the grid: a GPU-filling GEMM's time grows with m
            scale, m = m / self.m[-1], int(self.m[-1])
        grid = self.seconds_grid
        for points, x in ((self.m, m), (self.n, n), (self.k, k)):  # m, then n, then k
            grid = _interp_first_axis(grid, points, x)
        return float(grid) * scale


def _interp_first_axis(grid: np.ndarray, points: np.ndarray, x: float) -> np.ndarray:
    """Linear interpolation of `grid` along its first axis at x (extrapolated past the last two
    points, clamped at the first); that axis is removed."""
    hi = int(np.clip(np.searchsorted(points, x), 1, len(points) - 1))
    lo = hi - 1
    w = (max(x, points[0]) - points[lo]) / (points[hi] - points[lo])
    return grid[lo] + w * (grid[hi] - grid[lo])


@functools.cache
def gemm_table(gpu_name: str, dtype: str = "bfloat16") -> GemmTable | None:
    """The newest measured GEMM table of this GPU under ENGINE, or None (no package, no table)."""
    system = TABLE_GPUS.get(gpu_name)
    if system is None or not available():
        return None
    import pandas as pd

    root = Path(importlib.util.find_spec(PACKAGE).origin).parent / "systems" / "data"
    versions = sorted(
        (p for p in (root / system / "gemm" / ENGINE).glob("*") if p.is_dir()),
        key=lambda p: tuple(int(x) if x.isdigit() else 0 for x in p.name.split(".")),
    )
    if not versions:
        return None
    path = versions[-1] / "gemm_perf.parquet"
    cols = ["m", "n", "k", "gemm_dtype", "latency"]
    df = pd.read_parquet(path, columns=cols)
    df = df[df["gemm_dtype"] == dtype]
    if df.empty:
        return None
    # One latency per (m, n, k): the median where a shape was measured more than once.
    cube = df.groupby(["m", "n", "k"])["latency"].median()
    axes = [np.sort(df[c].unique()) for c in ("m", "n", "k")]
    full = cube.reindex(pd.MultiIndex.from_product(axes))
    while full.isna().any():  # a hole (H200: n = k = 65536 was not measured): drop the grid
        holes = full[full.isna()].index.to_frame(index=False)  # value with most holes, again
        worst = max(
            ((a, v, c) for a in range(3) for v, c in holes[a].value_counts().items()),
            key=lambda t: t[2],
        )
        axes[worst[0]] = axes[worst[0]][axes[worst[0]] != worst[1]]
        if min(len(a) for a in axes) < 2:
            return None
        full = cube.reindex(pd.MultiIndex.from_product(axes))
    m, n, k = axes
    grid = full.to_numpy(dtype=float).reshape(len(m), len(n), len(k)) / 1000.0  # ms -> s
    return GemmTable(gpu_name, versions[-1].name, m, n, k, grid)


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
    """The table's gemm_dtype for this model's matmuls: bf16, or FP8 W8A8 with a per-tensor scale
    (vLLM's Cutlass scaled-mm rows); None for widths the tables do not hold (FP4, W4A16)."""
    if model.matmul_bytes_per_param == 2:
        return "bfloat16"
    if model.matmul_bytes_per_param == 1 and model.bytes_per_param == 1:
        return "fp8"
    return None


@dataclass(frozen=True)
class LinearTimes:
    """Measured seconds of a step's dense linear layers on ONE tensor-parallel rank."""

    table: GemmTable
    shapes: tuple[tuple[int, int], ...]  # (n, k) per GEMM of one layer, as one rank holds it
    layers: int
    source: str  # e.g. "aiconfigurator-core 0.12.0: H200, vLLM 0.24.0, fp8 GEMMs"

    def __call__(self, tokens: int) -> float:
        """Every layer's QKV, output, gate+up and down GEMMs for `tokens` tokens, seconds."""
        return self.layers * sum(self.table.seconds(tokens, n, k) for n, k in self.shapes)


def linear_times(gpu_name: str, model: ModelSpec, tensor_parallel: int = 1) -> LinearTimes | None:
    """The measured dense-linear pricing for this deployment, or None (roofline): no package, no
    table for the GPU or dtype, or a model whose layers are not all dense GQA (MoE, MLA).

    Tensor parallel as vLLM splits a layer: QKV and gate+up by output columns (n / TP), the
    output and down projections by input rows (k / TP); their all-reduces stay on the roofline.
    """
    dtype = table_dtype(model)
    if model.moe is not None or model.mla is not None or dtype is None:
        return None
    table = gemm_table(gpu_name, dtype)
    if table is None:
        return None
    tp = tensor_parallel
    (qkv, d), (_, q), (up, _), (_, ff) = layer_gemms(model)
    shapes = ((max(1, qkv // tp), d), (d, max(1, q // tp)), (max(1, up // tp), d), (d, ff // tp))
    source = f"aiconfigurator-core: {gpu_name}, {ENGINE} {table.version}, {dtype} GEMMs"
    return LinearTimes(table, shapes, model.layers, source)


@dataclass(frozen=True)
class PrefillAttentionTimes:
    """Measured FlashAttention prefill time, all layers, one TP rank: a chunk of c new tokens
    after s cached ones. The table holds fresh prompts of `isl` tokens (batch 1); a chunk is
    priced as its share of the (query, key) pairs of a fresh prompt of c + s tokens, at that
    prompt's measured seconds per pair (interpolated linearly in isl; past the largest isl, the
    largest's seconds per pair)."""

    isl: np.ndarray  # (I,) ascending
    seconds_per_pair: np.ndarray  # (I,) one layer, seconds / (query, key) pair
    layers: int
    source: str

    def __call__(self, tokens: int, offset: int) -> float:
        pairs = tokens * offset + tokens * (tokens + 1) // 2
        length = tokens + offset
        per_pair = float(np.interp(length, self.isl, self.seconds_per_pair))
        return self.layers * pairs * per_pair


@functools.cache
def _context_attention(system: str, heads: int, kv_heads: int, head_dim: int, kv: str):
    """(version, isl grid, seconds per pair) of the newest table, or None."""
    if not available():
        return None
    import pandas as pd

    root = Path(importlib.util.find_spec(PACKAGE).origin).parent / "systems" / "data"
    folder = root / system / "attention" / ENGINE
    versions = sorted(
        (p for p in folder.glob("*") if (p / "context_attention_perf.parquet").is_file()),
        key=lambda p: tuple(int(x) if x.isdigit() else 0 for x in p.name.split(".")),
    )
    if not versions:
        return None
    df = pd.read_parquet(versions[-1] / "context_attention_perf.parquet")
    df = df[
        (df["batch_size"] == 1)
        & (df["window_size"] == 0)
        & (df["num_heads"] == heads)
        & (df["num_key_value_heads"] == kv_heads)
        & (df["head_dim"] == head_dim)
        & (df["kv_cache_dtype"] == kv)
    ]
    by_isl = df.groupby("isl")["latency"].median()  # ms per layer
    by_isl = by_isl[by_isl.index >= 16]  # 1-token "prompts" are launch time, not attention
    if len(by_isl) < 2:
        return None
    isl = by_isl.index.to_numpy(dtype=float)
    per_pair = by_isl.to_numpy(dtype=float) / 1000.0 / (isl * (isl + 1) / 2)
    return versions[-1].name, isl, per_pair


def prefill_attention_times(
    gpu_name: str, model: ModelSpec, tensor_parallel: int = 1
) -> PrefillAttentionTimes | None:
    """Measured prefill attention for this deployment, or None (roofline): no table for the
    GPU, the per-rank head counts, head size or KV dtype, or MLA attention."""
    system = TABLE_GPUS.get(gpu_name)
    if system is None or model.mla is not None:
        return None
    tp = tensor_parallel
    kv = {2: "bfloat16", 1: "fp8"}.get(model.bytes_per_kv)
    heads, kv_heads = model.heads // tp, max(1, model.kv_heads // tp)
    found = kv and _context_attention(system, heads, kv_heads, model.head_dim, kv)
    if not found:
        return None
    version, isl, per_pair = found
    source = f"{ENGINE} {version} prefill attention ({heads}/{kv_heads} heads, KV {kv})"
    return PrefillAttentionTimes(isl, per_pair, model.layers, source)


@dataclass(frozen=True)
class KernelTimes:
    """What the measured tables price for one deployment; None parts stay on the roofline."""

    linear: LinearTimes | None
    prefill_attention: PrefillAttentionTimes | None

    @property
    def source(self) -> str:
        parts = [p.source for p in (self.linear, self.prefill_attention) if p is not None]
        return "; ".join(parts) if parts else "roofline"


def kernel_times(gpu_name: str, model: ModelSpec, tensor_parallel: int = 1) -> KernelTimes | None:
    """Every measured pricing this deployment has (None when the tables hold nothing for it)."""
    times = KernelTimes(
        linear_times(gpu_name, model, tensor_parallel),
        prefill_attention_times(gpu_name, model, tensor_parallel),
    )
    return None if times.linear is None and times.prefill_attention is None else times
