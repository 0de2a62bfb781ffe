"""Measured tensor-parallel all-reduce times from aiconfigurator-core's tables (issue 30).

Notable features
- Table (sim/cost/kernel_data.py): `<gpu>/comm/<engine>/<version>/custom_allreduce_perf.parquet`,
  the engine's custom all-reduce of `message_size` bf16 VALUES (not bytes: an H200 pair moves
  1 GiB of values in 3.3 ms, 330 GB/s, and 8 H200s reach NCCL's ~470 GB/s bus bandwidth only
  when read so) over `num_gpus` GPUs, `latency` in ms. Rows `vllm_graph` / `sglang_graph`
  (inside a CUDA graph, as both engines run their decode steps) and `*_eager`; aiconfigurator
  keeps the graph rows only, and so does this reader.
- A decoder layer all-reduces its activations twice under tensor parallel (after attention and
  after the MLP): 2 x layers all-reduces of tokens x hidden values a step. Interpolated linearly
  in the message size (23 sizes, 128 .. 2^29 values); past the largest, time grows in
  proportion to the size. A TP size the table lacks (it has 2, 4 and 8) keeps the roofline.
- MiniMax-M2 normalises q and k over all heads (ModelSpec.qk_norm_across_heads): one more
  all-reduce per layer, of each token's two fp32 variances (4 bf16 values' bytes), priced from
  the same rows at that size (latency-bound: the table's smallest message, 128 values).
- The roofline keeps the lm_head's logit all-gather and expert-parallel transfers.
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
    table_name,
    table_paths,
)
from sim.cost.specs import ModelSpec

# The q/k norm all-reduce's message per token: two fp32 variances, as bf16 values' bytes.
NORM_VALUES_PER_TOKEN = 4


@dataclass(frozen=True)
class AllReduceTimes:
    """Measured seconds of a step's tensor-parallel all-reduces (all layers)."""

    sizes: np.ndarray  # (S,) ascending message sizes, values
    seconds_grid: np.ndarray  # (S,) one all-reduce, seconds
    values_per_token: int  # the hidden size: values all-reduced per token
    calls: int  # all-reduces a step: 2 per layer
    source: str
    norm_calls: int = 0  # all-reduces of the q/k variances a step (qk_norm_across_heads)

    def seconds(self, values: float) -> float:
        """One all-reduce of `values` bf16 values, seconds."""
        s, t = self.sizes, self.seconds_grid
        return t[-1] * values / s[-1] if values > s[-1] else float(np.interp(values, s, t))

    def __call__(self, tokens: int) -> float:
        """Every all-reduce of a step of `tokens` tokens, seconds."""
        norms = self.norm_calls * self.seconds(tokens * NORM_VALUES_PER_TOKEN)
        return self.calls * self.seconds(tokens * self.values_per_token) + norms


@functools.cache
def _custom_allreduce(system: str, gpus: int, tables: Tables = VLLM):
    """(table, sizes, seconds) of the newest table with graph rows for `gpus` GPUs, or None."""
    for path in table_paths(system, "comm", "custom_allreduce_perf.parquet", tables):
        df = read(path)
        if "backend" not in df:  # (SGLang 0.5.6's table timed TensorRT-LLM's all-reduce)
            continue
        df = df[(df["num_gpus"] == gpus) & df["backend"].str.endswith("_graph")]
        by_size = df.groupby("message_size")["latency"].median().sort_index()
        if len(by_size) >= 2:
            seconds = envelope(by_size.to_numpy(dtype=float) * MS)
            return table_name(path), by_size.index.to_numpy(dtype=float), seconds
    return None


def allreduce_times(
    gpu_name: str, model: ModelSpec, tensor_parallel: int = 1, tables: Tables = VLLM
) -> AllReduceTimes | None:
    """Measured TP all-reduces for this deployment, or None (roofline): one GPU, or no table for
    the GPU or TP size."""
    system = TABLE_GPUS.get(gpu_name)
    if system is None or tensor_parallel < 2:
        return None
    found = _custom_allreduce(system, tensor_parallel, tables)
    if not found:
        return None
    table, sizes, seconds = found
    source = f"{table} custom all-reduce (CUDA graph), {tensor_parallel} GPUs"
    norm_calls = model.layers if model.qk_norm_across_heads else 0
    if norm_calls:
        source += ", + the q/k norms' all-reduce per layer"
    return AllReduceTimes(sizes, seconds, model.hidden, 2 * model.layers, source, norm_calls)
