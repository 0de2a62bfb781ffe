"""Attention for a mixed step with NO per-request Python for decodes: one SDPA call per layer.

The runner's path on CUDA (`LlamaModel.forward_step(..., attention="flat")`); on a CPU the older
`live/model/attention.py` (decodes split into slot-contiguous groups, fewest keys read) stays the
default, and tests/test_live_flat.py holds the two to the same tokens and logits.

Notable features
- Decode rows ARE the KV slots: the decode part of a step is R rows, row r = slot r, for
  r < R = (highest decoding slot + 1), rounded up to a bucket when CUDA graphs replay it
  (live/model/decode_graphs.py). One SDPA call per layer reads the strided view
  `k[layer, :R, :, :ctx]` (no copy) with a key-length mask, so every decode of the step shares
  one kernel, and the shapes depend only on (R, ctx): what a CUDA graph needs (static shapes).
  gpt-fast does the same for its one-request decode; vLLM's paged kernel reads a block table.
- A slot in 0..R that does not decode this step (free, or prefilling) is an IDLE row: it
  writes its K/V into the store's scratch position `max_len` (never read), attends to key 0
  only, and its logits are ignored. So no row ever overwrites a real request's K/V.
- `ctx` is the longest decode context of the step (rounded up to `ctx_bucket` for graphs);
  each row's mask admits exactly its own context. A masked SDPA still streams the whole view,
  so a step reads R x ctx keys: exact when the decoding requests fill the low slots and have
  similar contexts; the buckets bound the waste to one bucket.
- Step metadata is built ONCE on the host as one int64 vector (token ids, positions, decode
  write positions, key lengths, sampling rows) and moved with ONE host-to-device copy (from a
  pinned buffer on CUDA, non-blocking); every per-layer index and mask is a view of it or is
  computed from it on the device. Nothing in the step reads a device value back (no host sync)
  until the runner reads the sampled ids.
- Prefill chunks keep one SDPA call per chunk (live/model/attention.py's `prefill_attention`): a
  chunk
  is hundreds of tokens of compute, and a step holds one or two, so their Python is negligible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from live.model.attention import PrefillSpan, chunk_mask, prefill_attention

if TYPE_CHECKING:
    from live.model.kvstore import KVStore
    from live.model.llama import ModelShape, Segment


def bucket(n: int, buckets: Sequence[int]) -> int:
    """The smallest bucket >= n (n itself past the last one)."""
    return next((b for b in buckets if b >= n), n)


ROW_BUCKETS = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128)  # decode rows a CUDA graph is made for
CTX_BUCKET = 256  # keys: a decode view's length is a multiple of this when graphed


@dataclass(frozen=True, slots=True)
class FlatLayout:
    """One step's packed inputs: P prefill rows, then R decode rows (row r = KV slot r)."""

    token_ids: Tensor  # (P + R,) int64
    positions: Tensor  # (P + R,) int64: offset + i per request; 0 on idle rows
    write_pos: Tensor  # (R,) int64: where each decode row's K/V goes (max_len on idle rows)
    lengths: Tensor  # (R,) int64: keys each decode row attends to (1 on idle rows)
    sample_rows: Tensor  # (S,) rows whose logits are computed, in segment order (all of a verify)
    prefills: tuple[PrefillSpan, ...]
    num_prefill_rows: int  # P
    rows: int  # R
    ctx: int  # keys in the decode view
    dec_mask: Tensor | None  # (R, 1, 1, ctx) bool; None when every row sees all ctx keys
    row_index: Tensor  # (R,) arange: the slot of each decode row

    @staticmethod
    def host(
        segments: Sequence[Segment],
        kv: KVStore,
        rows: int | None = None,
        ctx: int | None = None,
    ) -> tuple[list[int], dict]:
        """The step's integers, packed in one list, and the Python-side sizes. No tensors yet.

        `rows`/`ctx` force the decode shape (CUDA graph buckets); by default they are exact.
        """
        prefill = [s for s in segments if len(s.token_ids) > 1]
        decode = {s.slot: s for s in segments if len(s.token_ids) == 1}
        slots = [s.slot for s in segments]
        if len(prefill) + len(decode) != len(segments) or len(set(slots)) != len(slots):
            raise ValueError("every segment needs tokens, and a KV slot appears once per step")
        r = rows if rows is not None else (max(decode) + 1 if decode else 0)
        ids: list[int] = []
        pos: list[int] = []
        spans = []
        for s in prefill:
            spans.append((s.slot, len(ids), len(s.token_ids), s.offset))
            ids.extend(s.token_ids)
            pos.extend(range(s.offset, s.offset + len(s.token_ids)))
        p = len(ids)
        write, lengths = [kv.max_len] * r, [1] * r  # idle rows: scratch position, key 0 only
        dec_ids, dec_pos = [0] * r, [0] * r
        for slot, s in decode.items():
            dec_ids[slot], dec_pos[slot] = s.token_ids[0], s.offset
            write[slot], lengths[slot] = s.offset, s.offset + 1
        longest = max(lengths, default=0)
        c = ctx if ctx is not None else longest
        if c < longest:
            raise ValueError(f"decode view of {c} keys is shorter than a context of {longest}")
        first = {slot: (start, n) for slot, start, n, _ in spans}
        sample = []  # a chunk samples its last row, a verify (sample_all) every row
        for s in segments:
            if s.sample:
                start, n = first.get(s.slot, (p + s.slot, 1))
                sample.extend(range(start if s.sample_all else start + n - 1, start + n))
        full = len(decode) == r and all(n == c for n in lengths) and rows is None
        sizes = {"p": p, "r": r, "ctx": c, "s": len(sample), "spans": tuple(spans), "full": full}
        return ids + dec_ids + pos + dec_pos + write + lengths + sample, sizes

    @classmethod
    def from_device(cls, flat: Tensor, sizes: dict, shape: ModelShape) -> FlatLayout:
        """Split the copied int64 vector into views and build the masks on the device."""
        p, r, c, s = sizes["p"], sizes["r"], sizes["ctx"], sizes["s"]
        t = p + r
        ids, pos, write, lengths, sample = flat.split((t, t, r, r, s))
        dev = flat.device
        spans = tuple(
            PrefillSpan(slot, start, n, off, chunk_mask(off, n, shape.group, dev))
            for slot, start, n, off in sizes["spans"]
        )
        mask = None if sizes["full"] else torch.arange(c, device=dev)[None, :] < lengths[:, None]
        mask = None if mask is None else mask.view(r, 1, 1, c)
        return cls(
            ids, pos, write, lengths, sample, spans, p, r, c, mask, torch.arange(r, device=dev)
        )

    @classmethod
    def build(cls, segments: Sequence[Segment], kv: KVStore, shape: ModelShape) -> FlatLayout:
        """Host metadata -> one transfer -> device layout."""
        ints, sizes = cls.host(segments, kv)
        return cls.from_device(to_device(ints, kv.device), sizes, shape)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, kv: KVStore, layer: int) -> Tensor:
        return flat_attention(q, k, v, self, kv, layer)


_PINNED: dict[int, Tensor] = {}  # one reusable pinned host buffer per process, grown as needed


def staging_buffer(numel: int, pin_memory: bool = True) -> Tensor:
    """The process's host staging buffer, at least `numel` int64 long (grown, never shrunk).

    Always a NORMAL tensor, even when first asked for under inference_mode (forward_step runs
    in it): an inference tensor refuses in-place copies outside that mode, and CUDA graph
    replays copy into this buffer outside it (seen on an H200, 2026-12-04).
    """
    buf = _PINNED.get(0)
    if buf is None or buf.numel() < numel:
        with torch.inference_mode(False):
            buf = _PINNED[0] = torch.empty(
                max(4096, 2 * numel), dtype=torch.long, pin_memory=pin_memory
            )
    return buf


_COPIED: dict[int, torch.cuda.Event] = {}  # the last copy out of the staging buffer


def to_device(ints: list[int], device: torch.device, out: Tensor | None = None) -> Tensor:
    """ONE host-to-device copy of the step's integers (pinned + non-blocking on CUDA).

    With `out` (a static buffer of a CUDA graph), the copy lands there. The pinned buffer is
    refilled only once the previous copy out of it has finished (an event): a caller that never
    reads a result back (the warm-up) would otherwise overwrite a pending copy's integers, and
    that step would run with the next one's positions (seen on an H200, 2026-12-04: a
    device-side assert). In the serving loop the wait is free: each step ends with a sync.
    """
    host = torch.tensor(ints, dtype=torch.long)
    if device.type != "cuda":
        return host if out is None else out.copy_(host)
    if (pending := _COPIED.get(0)) is not None:
        pending.synchronize()
    host = staging_buffer(host.numel())[: host.numel()].copy_(host)
    moved = (
        out.copy_(host, non_blocking=True)
        if out is not None
        else host.to(device, non_blocking=True)
    )
    _COPIED[0] = torch.cuda.Event()
    _COPIED[0].record()
    return moved


def flat_attention(
    q: Tensor, k: Tensor, v: Tensor, lay: FlatLayout, kv: KVStore, layer: int
) -> Tensor:
    """Write the step's K/V, then attend. q: (P+R, H, hd); k, v: (P+R, KV, hd) -> (P+R, H, hd)."""
    p, r = lay.num_prefill_rows, lay.rows
    for sp in lay.prefills:
        kv.write(layer, sp.slot, sp.offset, k[sp.rows], v[sp.rows])
    if r:  # row i writes slot i at write_pos[i]: distinct slots, so no two rows collide
        kv.write_decodes(layer, lay.row_index, lay.write_pos, k[p:], v[p:])
    if not lay.prefills:
        return _decode_rows(q, lay, kv, layer)
    out = torch.empty_like(q)
    for sp in lay.prefills:
        keys, values = kv.read(layer, sp.slot, sp.offset + sp.n)  # (KV, offset+n, hd) views
        out[sp.rows] = prefill_attention(q[sp.rows], keys, values, sp.mask)
    if r:
        out[p:] = _decode_rows(q[p:], lay, kv, layer)
    return out


def _decode_rows(q: Tensor, lay: FlatLayout, kv: KVStore, layer: int) -> Tensor:
    """All decode rows in ONE call. q: (R, H, hd) -> (R, H, hd)."""
    r, heads, hd = q.shape
    kv_heads = kv.shape.kv_heads
    keys, values = kv.read_range(layer, 0, r, lay.ctx)  # (R, KV, ctx, hd) strided views
    qf = q.view(r, kv_heads, heads // kv_heads, hd)  # GQA fold: (R, KV, group, hd), a view
    out = F.scaled_dot_product_attention(qf, keys, values, attn_mask=lay.dec_mask)
    return out.reshape(r, heads, hd)  # CUDA's SDPA may return a transposed layout: not a view
