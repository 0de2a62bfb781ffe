"""Decode steps replayed from CUDA graphs: the launch overhead of ~10 kernels x layers, gone.

A speed trick, kept out of the model: `LlamaModel.forward_layout` is unchanged; this module only
decides WHEN to record it into a graph and how to feed it.

Notable features
- Why: a decode step of a small batch launches hundreds of tiny kernels (norms, RoPE, K/V
  writes, attention, matmuls per layer). Launched one by one from Python, the GPU waits on the
  host between them: measured on an H200, `8b-like` decoded in 18 ms where reading its weights
  takes 3.8 ms. A CUDA graph records the launches once and replays them in one call
  (gpt-fast: `torch.compile(mode="reduce-overhead")`; vLLM and nano-vllm: graphs per batch size).
- Graphs need static shapes and static addresses. The flat layout (live/model/flat_attention.py)
  gives both: a decode-only step is R rows (row r = KV slot r) over a view of ctx keys, so one graph
  serves every step with the same (R, ctx) bucket. R is rounded up to ROW_BUCKETS, ctx to a
  multiple of CTX_BUCKET; the extra rows are idle (they write the scratch position, logits
  ignored) and the extra keys are masked.
- Inputs live in one static int64 buffer per graph (token ids, positions, write positions, key
  lengths): a step copies its host vector into it (one pinned, non-blocking transfer), replays,
  and reads the R sampled ids back (the step's only sync). Everything else, the K/V store
  included, is already at fixed addresses.
- A graph is captured the first time its bucket is needed, BEFORE the runner starts the step's
  clock (`prepare`): like vLLM's start-up capture, it is set-up, not a step's cost.
- `decode_fn` is the captured function itself; on the CPU, tests compile it with
  `torch.compile(fullgraph=True)` to prove it has no graph break and no host sync.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from live.model.flat_attention import CTX_BUCKET, ROW_BUCKETS, FlatLayout, bucket, to_device

if TYPE_CHECKING:
    from live.model.kvstore import KVStore
    from live.model.llama import LlamaModel, Segment


def decode_shape(segments: Sequence[Segment], kv: KVStore) -> tuple[int, int] | None:
    """(rows, ctx) bucket of a decode-only step; None when the step holds a prefill chunk."""
    if not segments or any(len(s.token_ids) != 1 for s in segments):
        return None
    rows = min(bucket(max(s.slot for s in segments) + 1, ROW_BUCKETS), kv.slots)
    longest = max(s.offset + 1 for s in segments)
    return rows, min(-(-longest // CTX_BUCKET) * CTX_BUCKET, kv.max_len)


def static_inputs(rows: int, kv: KVStore) -> Tensor:
    """(4 R + R,) int64: ids, positions, write positions, key lengths, then the sampled rows.

    Starts as all-idle rows (write to the scratch position, see key 0), so warming up and
    capturing never touch a real request's K/V.
    """
    buf = torch.zeros(5 * rows, dtype=torch.long, device=kv.device)
    buf[2 * rows : 3 * rows] = kv.max_len
    buf[3 * rows : 4 * rows] = 1
    buf[4 * rows :] = torch.arange(rows, device=kv.device)  # every row samples
    return buf


def decode_fn(model: LlamaModel, kv: KVStore, rows: int, ctx: int) -> Callable[[Tensor], Tensor]:
    """static inputs (5R,) -> greedy ids (R,): the whole decode step as device ops only."""
    sizes = {"p": 0, "r": rows, "ctx": ctx, "s": rows, "spans": (), "full": False}

    def step(static: Tensor) -> Tensor:
        layout = FlatLayout.from_device(static, sizes, model.shape)  # masks from the buffer
        return model.forward_layout(layout, kv).argmax(dim=-1)  # (R,)

    return step


class DecodeGraphs:
    """One CUDA graph per (rows, ctx) bucket, sharing one memory pool."""

    def __init__(self, model: LlamaModel, kv: KVStore) -> None:
        if kv.device.type != "cuda":
            raise ValueError("CUDA graphs need a CUDA device")
        self.model, self.kv = model, kv
        self.pool = torch.cuda.graph_pool_handle()
        self.graphs: dict[tuple[int, int], tuple[torch.cuda.CUDAGraph, Tensor, Tensor]] = {}

    def prepare(self, key: tuple[int, int]) -> None:
        """Capture the bucket's graph if it is new (call outside the timed step)."""
        if key in self.graphs:
            return
        rows, ctx = key
        static = static_inputs(rows, self.kv)
        fn = decode_fn(self.model, self.kv, rows, ctx)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.inference_mode(), torch.cuda.stream(side):
            for _ in range(2):  # warm-up: lazy inits and kernel choices happen outside the graph
                fn(static)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode(), torch.cuda.graph(graph, pool=self.pool):
            out = fn(static)
        torch.cuda.synchronize()
        self.graphs[key] = (graph, static, out)

    def run(self, segments: Sequence[Segment], key: tuple[int, int]) -> list[int]:
        """Replay: copy the inputs in, replay, read the sampling rows' ids (the one sync)."""
        graph, static, out = self.graphs[key]
        rows, ctx = key
        ints, _ = FlatLayout.host(segments, self.kv, rows=rows, ctx=ctx)
        to_device(ints[: 4 * rows], self.kv.device, out=static[: 4 * rows])
        graph.replay()
        ids = out.tolist()
        return [ids[s.slot] for s in segments if s.sample]
