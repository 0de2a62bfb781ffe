"""Measured attention times from aiconfigurator-core's tables (issue 30): prefill (context) and
decode (generation) attention, per tensor-parallel rank, all layers.

Notable features
- Tables (sim/cost/kernel_data.py): `<gpu>/attention/<engine>/<version>/
  context_attention_perf.parquet` and `generation_attention_perf.parquet`, one row per (batch,
  lengths, query heads, KV heads, head size, KV dtype, window) with `latency` in ms per layer.
  The heads are ONE rank's (heads / TP, KV heads / TP, at least one). Where a table timed
  several backends, the one timed on the grid (most rows) is read.
- Prefill: the table holds fresh prompts of `isl` tokens (batch 1). A chunk of c new tokens after
  s cached ones is priced as its share of the (query, key) pairs of a fresh prompt of c + s
  tokens, at that prompt's measured seconds per pair (interpolated linearly in isl; past the
  largest isl, the largest's seconds per pair).
- Decode: the table holds `batch_size` requests each reading `step` tokens of KV (FlashAttention
  3 on Hopper, FlashInfer's TRT-LLM decode kernel on Blackwell). It is fitted as
      seconds(b, s) = a(b) + c * b * s   (one layer; least squares on relative error)
  with one intercept per measured batch size and ONE slope: the step's decode attention is then
  a(batch) + c * (its total context), affine in the context with a slope that does not depend on
  the batch, which the event-speed path (sim/fastforward/steps.py) relies on. On an H200 the fit
  is within ~25% of most bandwidth-bound grid points; a(b) carries the per-request work that
  makes 2,048 one-token contexts take ~0.4 ms a layer.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from sim.cost.kernel_data import MS, TABLE_GPUS, VLLM, Tables, read, table_name, table_paths
from sim.cost.specs import ModelSpec

KV_DTYPES = {2: "bfloat16", 1: "fp8"}  # bytes per KV value -> the tables' kv_cache_dtype


def _rank_heads(model: ModelSpec, tensor_parallel: int) -> tuple[int, int]:
    return model.heads // tensor_parallel, max(1, model.kv_heads // tensor_parallel)


def _deployment(gpu_name: str, model: ModelSpec, tensor_parallel: int):
    """(table system, query heads, KV heads per rank, KV dtype) where the tables can price this
    deployment's attention; None (roofline): no table for the GPU or the KV dtype, or MLA."""
    system = TABLE_GPUS.get(gpu_name)
    kv = KV_DTYPES.get(model.bytes_per_kv)
    if system is None or model.mla is not None or kv is None:
        return None
    return (system, *_rank_heads(model, tensor_parallel), kv)


@dataclass(frozen=True)
class PrefillAttentionTimes:
    """Measured FlashAttention prefill time, all layers, one TP rank: a chunk of c new tokens
    after s cached ones (see the module's notes)."""

    isl: np.ndarray  # (I,) ascending
    seconds_per_pair: np.ndarray  # (I,) one layer, seconds / (query, key) pair
    layers: int
    source: str

    def __call__(self, tokens: int, offset: int) -> float:
        pairs = tokens * offset + tokens * (tokens + 1) // 2
        length = tokens + offset
        per_pair = float(np.interp(length, self.isl, self.seconds_per_pair))
        return self.layers * pairs * per_pair


def _rows(df, shape: tuple[int, int, int, str], **fixed):
    """(rows, kernel) of an attention table for one rank's (heads, KV heads, head size, KV
    dtype), full attention (no window) and the `fixed` column values, timed with the backend
    timed on the grid: the one with the most rows (H200, vLLM: FA3 beside a few FA4 rows;
    SGLang: FA3 beside a few Triton ones), not a median across backends. kernel None: none."""
    heads, kv_heads, head_dim, kv = shape
    keep = (
        (df["window_size"] == 0)
        & (df["num_heads"] == heads)
        & (df["num_key_value_heads"] == kv_heads)
        & (df["head_dim"] == head_dim)
        & (df["kv_cache_dtype"] == kv)
    )
    for column, value in fixed.items():
        keep &= df[column] == value
    df = df[keep]
    if df.empty:
        return df, None
    kernel = df["kernel_source"].value_counts().idxmax()
    return df[df["kernel_source"] == kernel], kernel


@functools.cache
def _context_attention(
    system: str, heads: int, kv_heads: int, head_dim: int, kv: str, tables: Tables = VLLM
):
    """(table, kernel, isl grid, seconds per pair) of the newest table holding these heads, or
    None."""
    for path in table_paths(system, "attention", "context_attention_perf.parquet", tables):
        df, kernel = _rows(read(path), (heads, kv_heads, head_dim, kv), batch_size=1)
        if kernel is None:
            continue
        by_isl = df.groupby("isl")["latency"].median()  # ms per layer
        by_isl = by_isl[by_isl.index >= 16]  # 1-token "prompts" are launch time, not attention
        if len(by_isl) < 2:
            continue
        isl = by_isl.index.to_numpy(dtype=float)
        per_pair = by_isl.to_numpy(dtype=float) * MS / (isl * (isl + 1) / 2)
        return table_name(path), kernel, isl, per_pair
    return None


def prefill_attention_times(
    gpu_name: str, model: ModelSpec, tensor_parallel: int = 1, tables: Tables = VLLM
) -> PrefillAttentionTimes | None:
    """Measured prefill attention for this deployment, or None (roofline): no table for the
    GPU, the per-rank head counts, head size or KV dtype, or MLA attention."""
    if (deployment := _deployment(gpu_name, model, tensor_parallel)) is None:
        return None
    system, heads, kv_heads, kv = deployment
    found = _context_attention(system, heads, kv_heads, model.head_dim, kv, tables)
    if not found:
        return None
    table, kernel, isl, per_pair = found
    source = f"{table} {kernel}, {heads}/{kv_heads} heads, KV {kv}"
    return PrefillAttentionTimes(isl, per_pair, model.layers, source)


@dataclass(frozen=True)
class DecodeAttentionTimes:
    """Measured decode attention, all layers, one TP rank: a step of b decodes reading C tokens
    of KV in all costs intercept(b) + per_token * C (see the module's notes)."""

    batches: np.ndarray  # (B,) ascending batch sizes of the table
    intercepts: np.ndarray  # (B,) a(b), seconds, one layer
    seconds_per_token: float  # c, seconds per context token, one layer
    layers: int
    source: str

    def intercept(self, batch: int) -> float:
        """a(batch) over all layers, seconds (0 for no decodes; past the largest batch size it
        grows in proportion to the batch)."""
        if batch <= 0:
            return 0.0
        b, a = self.batches, self.intercepts
        one = a[-1] * batch / b[-1] if batch > b[-1] else float(np.interp(batch, b, a))
        return self.layers * one

    @property
    def per_token(self) -> float:
        """Seconds per token of context read, all layers."""
        return self.layers * self.seconds_per_token


def fit_decode(batch: np.ndarray, step: np.ndarray, seconds: np.ndarray):
    """Least squares of seconds = a(batch) + c * batch * step in relative error: (batch sizes,
    intercepts clipped at 0, c), or None when the slope is not positive."""
    sizes = np.unique(batch)
    cols = np.searchsorted(sizes, batch)
    design = np.zeros((len(seconds), len(sizes) + 1))
    design[np.arange(len(seconds)), cols] = 1.0
    design[:, -1] = batch * step
    weights = 1.0 / seconds
    solution, *_ = np.linalg.lstsq(design * weights[:, None], np.ones(len(seconds)), rcond=None)
    if solution[-1] <= 0:
        return None
    return sizes.astype(float), np.maximum(solution[:-1], 0.0), float(solution[-1])


@functools.cache
def _generation_attention(
    system: str, heads: int, kv_heads: int, head_dim: int, kv: str, tables: Tables = VLLM
):
    """(table, kernel, batch sizes, intercepts, slope) fitted to the newest table holding
    these heads, or None."""
    for path in table_paths(system, "attention", "generation_attention_perf.parquet", tables):
        df, kernel = _rows(read(path), (heads, kv_heads, head_dim, kv), isl=1, beam_width=1)
        if kernel is None:
            continue
        points = df.groupby(["batch_size", "step"])["latency"]
        points = points.median().reset_index()
        if points["batch_size"].nunique() < 2:
            continue
        fit = fit_decode(
            points["batch_size"].to_numpy(dtype=float),
            points["step"].to_numpy(dtype=float),
            points["latency"].to_numpy(dtype=float) * MS,
        )
        if fit is not None:
            return (table_name(path), kernel, *fit)
    return None


def decode_attention_times(
    gpu_name: str, model: ModelSpec, tensor_parallel: int = 1, tables: Tables = VLLM
) -> DecodeAttentionTimes | None:
    """Measured decode attention for this deployment, or None (roofline): no table for the GPU,
    the per-rank head counts, head size or KV dtype, or MLA attention."""
    if (deployment := _deployment(gpu_name, model, tensor_parallel)) is None:
        return None
    system, heads, kv_heads, kv = deployment
    found = _generation_attention(system, heads, kv_heads, model.head_dim, kv, tables)
    if not found:
        return None
    table, kernel, batches, intercepts, slope = found
    source = f"{table} {kernel}, {heads}/{kv_heads} heads, KV {kv}"
    return DecodeAttentionTimes(batches, intercepts, slope, model.layers, source)
