"""Attention for a mixed step: per-chunk prefill attention plus one batched decode attention.

Notable features
- `StepLayout` is built once per step and shared by every layer: packed token ids, per-request
  positions, where each segment's rows are, the decode masks and which rows sample.
- Prefill chunks come first in the packed tensor, then the decodes sorted by KV slot.
- A prefill chunk with nothing cached uses SDPA's `is_causal=True`. A chunk with cached past needs
  a LOWER-RIGHT causal mask (query i sees keys j <= offset + i): `is_causal` is top-left aligned
  and would be wrong whenever there are more keys than queries. On CUDA that mask is flash
  attention's own (`causal_lower_right`, nothing in memory); elsewhere a bool mask (`chunk_mask`).
  Measured on an H200 (8b-like, 2026-12-04): with the bool mask a 2,044-token chunk over a
  14k-token prefix plus 4 decodes took 250 ms, 5x a 2,048-token chunk alone, because a masked
  GQA call cannot use flash attention.
- Decodes are batched: a group of decodes shares ONE SDPA call over the strided view
  `k[layer, lo:hi, :, :ctx]` of the slots lo..hi-1 (no copy), with a key-length mask per row;
  slots in that range that are not decoding get a dummy query whose output is dropped. Measured
  against one SDPA call per decode (SmolLM2, fp32, 1 thread, context 256): B=8 117 vs 120 ms,
  B=32 173 vs 198 ms per step; on a GPU, one kernel launch per layer instead of B matters more.
- A batched call reads every row up to the group's LONGEST context, so one long request among
  short ones would make all of them read its length (a 1032-token context among five 60-token
  ones: 6 x 1032 keys read instead of 1332). Paged attention (vLLM) reads exactly each
  request's context, and so does the simulator's cost model. So decodes are split into
  slot-contiguous groups that minimise keys read + a per-call cost (`decode_groups`, exact DP).
- Grouped-query attention without copies or `enable_gqa` when a mask is given: the `group` query
  heads that share a K/V head are folded into that K/V head's query rows,
  q (B, H, 1, hd) -> (B, KV, group, hd), so the masked call is plain multi-head attention
  (on CUDA, `enable_gqa` with a mask falls back to the slow math kernel).
- All inputs are 4-D: on CPU, 3-D inputs silently take the slow "math" SDPA kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.attention.bias import CausalBias, causal_lower_right

if TYPE_CHECKING:
    from live.model.kvstore import KVStore
    from live.model.llama import ModelShape, Segment


@dataclass(frozen=True, slots=True)
class PrefillSpan:
    """Where one prefill chunk sits in the packed rows, and its mask (None: plain causal)."""

    slot: int
    start: int  # first row in the packed (T, ...) tensors
    n: int
    offset: int
    mask: Tensor | CausalBias | None  # see chunk_mask; None: plain causal (offset 0)

    @property
    def rows(self) -> slice:
        return slice(self.start, self.start + self.n)


@dataclass(frozen=True, slots=True)
class DecodeGroup:
    """Decodes of slots lo..hi-1 that share one attention call over a (hi-lo, KV, ctx, hd) view."""

    start: int  # first of this group's rows among the step's decode rows
    n: int  # decodes in the group
    lo: int
    hi: int
    ctx: int  # longest context in the group (keys in the view)
    rows: Tensor | None  # (n,) index of each decode in the view; None when the range is dense
    mask: Tensor | None  # (hi-lo, 1, 1, ctx) bool; None when every row sees all keys


# What one more attention call costs, in keys read (per row of K and V, all KV heads, one layer):
# ~50 us per SDPA call on a CPU at ~10 GB/s, ~20 us of launches on a GPU at ~2 TB/s.
CALL_COST_S_AND_BW = {"cpu": (50e-6, 10e9), "cuda": (20e-6, 2e12)}


def call_cost_keys(shape: ModelShape, bytes_per_value: int, device_type: str) -> float:
    """A separate decode-attention call's fixed cost, expressed as keys read."""
    seconds, bandwidth = CALL_COST_S_AND_BW.get(device_type, CALL_COST_S_AND_BW["cpu"])
    key_bytes = 2 * shape.kv_heads * shape.head_dim * bytes_per_value  # K and V of one position
    return seconds * bandwidth / key_bytes


def decode_groups(slots: Sequence[int], contexts: Sequence[int], call_keys: float) -> list[range]:
    """Split slot-sorted decodes into consecutive groups minimising padded keys + calls.

    A group i..j reads (slots[j] - slots[i] + 1) rows of max(contexts[i..j]) keys; each group
    costs `call_keys` more. Exact dynamic programme, O(B^2) for B decodes.
    """
    b = len(slots)
    # Shortcut (exact): any split costs at least sum(contexts) + 2 calls, one group costs
    # span x longest + 1 call; if one group wastes less than a call, it is optimal. This is
    # the common case (similar contexts, packed slots) and skips the O(B^2) loop, which took
    # ~1.5 ms of host time per step at B = 64 (bench/bench_host_share.py).
    if b and (slots[-1] - slots[0] + 1) * max(contexts) - sum(contexts) <= call_keys:
        return [range(b)]
    best = [0.0] + [float("inf")] * b  # best[j]: cost of the first j decodes
    cut = [0] * (b + 1)
    for j in range(1, b + 1):
        longest = 0
        for i in range(j, 0, -1):  # group = decodes i-1 .. j-1
            longest = max(longest, contexts[i - 1])
            cost = best[i - 1] + (slots[j - 1] - slots[i - 1] + 1) * longest + call_keys
            if cost < best[j]:
                best[j], cut[j] = cost, i - 1
    groups, j = [], b
    while j > 0:
        groups.append(range(cut[j], j))
        j = cut[j]
    return groups[::-1]


@dataclass(frozen=True, slots=True)
class StepLayout:
    """Per-step index tensors that every layer reuses."""

    token_ids: Tensor  # (T,) int64
    positions: Tensor  # (T,) int64: offset + i within each request
    prefills: tuple[PrefillSpan, ...]
    num_prefill_rows: int  # decodes start at this row
    dec_slots: Tensor  # (B,) int64, sorted
    dec_offsets: Tensor  # (B,) int64: where each decode's K/V goes
    dec_groups: tuple[DecodeGroup, ...]  # consecutive runs of the decode rows
    sample_rows: Tensor  # (S,) rows whose logits are computed, in segment order (all of a verify)

    @classmethod
    def build(
        cls,
        segments: Sequence[Segment],
        shape: ModelShape,
        device: torch.device,
        call_keys: float = 0.0,
    ) -> StepLayout:
        """Pack the segments (prefills first, then decodes by slot) and precompute masks."""
        if len({s.slot for s in segments}) != len(segments):
            raise ValueError("a KV slot appears twice in one step")
        prefill_idx = [i for i, s in enumerate(segments) if len(s.token_ids) > 1]
        decode_idx = sorted(
            (i for i, s in enumerate(segments) if len(s.token_ids) == 1),
            key=lambda i: segments[i].slot,
        )
        if len(prefill_idx) + len(decode_idx) != len(segments):
            raise ValueError("every segment needs at least one token")
        ids: list[int] = []
        pos: list[int] = []
        first_row = [0] * len(segments)
        spans = []
        for i in prefill_idx + decode_idx:
            s, start = segments[i], len(ids)
            n = len(s.token_ids)
            ids.extend(s.token_ids)
            pos.extend(range(s.offset, s.offset + n))
            first_row[i] = start
            if n > 1:
                mask = chunk_mask(s.offset, n, shape.group, device)
                spans.append(PrefillSpan(s.slot, start, n, s.offset, mask))
        slots = [segments[i].slot for i in decode_idx]
        offsets = [segments[i].offset for i in decode_idx]
        contexts = [o + 1 for o in offsets]  # keys each decode attends to (itself included)
        groups = tuple(
            _decode_group(g.start, slots[g.start : g.stop], contexts[g.start : g.stop], device)
            for g in decode_groups(slots, contexts, call_keys)
        )
        sample_rows = [  # a verify (sample_all) samples every row, any other its last
            row
            for i, s in enumerate(segments)
            if s.sample
            for row in range(
                first_row[i] + (0 if s.sample_all else len(s.token_ids) - 1),
                first_row[i] + len(s.token_ids),
            )
        ]
        return cls(
            _long(ids, device),
            _long(pos, device),
            tuple(spans),
            len(ids) - len(slots),
            _long(slots, device),
            _long(offsets, device),
            groups,
            _long(sample_rows, device),
        )

    def attend(self, q: Tensor, k: Tensor, v: Tensor, kv: KVStore, layer: int) -> Tensor:
        return attention(q, k, v, self, kv, layer)


def _decode_group(start: int, slots: list[int], contexts: list[int], device) -> DecodeGroup:
    """One batched call's view, dummy-row index and key-length mask."""
    lo, hi, ctx = slots[0], slots[-1] + 1, max(contexts)
    rows = mask = None
    if hi - lo != len(slots):  # holes in the slot range: dummy rows
        rows = _long([s - lo for s in slots], device)
    if rows is not None or min(contexts) != ctx:
        lengths = torch.ones(hi - lo, dtype=torch.long)  # dummy rows see key 0 only
        lengths[[s - lo for s in slots]] = torch.tensor(contexts)
        mask = torch.arange(ctx)[None, :] < lengths[:, None]  # (R, ctx)
        mask = mask.view(hi - lo, 1, 1, ctx).to(device)
    return DecodeGroup(start, len(slots), lo, hi, ctx, rows, mask)


def _long(values: list[int], device: torch.device) -> Tensor:
    return torch.tensor(values, dtype=torch.long, device=device)


def attention(q: Tensor, k: Tensor, v: Tensor, lay: StepLayout, kv: KVStore, layer: int) -> Tensor:
    """Write the step's K/V, then attend. q: (T, H, hd); k, v: (T, KV, hd) -> (T, H, hd)."""
    p = lay.num_prefill_rows
    for sp in lay.prefills:
        kv.write(layer, sp.slot, sp.offset, k[sp.rows], v[sp.rows])
    if len(lay.dec_slots):
        kv.write_decodes(layer, lay.dec_slots, lay.dec_offsets, k[p:], v[p:])
    if not lay.prefills and len(lay.dec_groups) == 1:
        return _decode_attention(q, lay.dec_groups[0], kv, layer)
    out = torch.empty_like(q)
    for sp in lay.prefills:
        keys, values = kv.read(layer, sp.slot, sp.offset + sp.n)  # (KV, offset+n, hd) views
        out[sp.rows] = prefill_attention(q[sp.rows], keys, values, sp.mask)
    for g in lay.dec_groups:
        rows = slice(p + g.start, p + g.start + g.n)
        out[rows] = _decode_attention(q[rows], g, kv, layer)
    return out


def chunk_mask(offset: int, n: int, group: int, device) -> Tensor | CausalBias | None:
    """The lower-right causal mask of an n-token chunk after `offset` cached tokens.

    None when offset = 0 (SDPA's is_causal is right). On CUDA a `CausalBias`: flash attention
    applies it inside the kernel, with GQA, and nothing is materialised. Elsewhere a
    (group * n, offset + n) bool mask, True = may attend, tiled for the folded GQA query rows
    (on a CPU the folded masked call is the fast one).
    """
    if offset == 0:
        return None
    if torch.device(device).type == "cuda":
        return causal_lower_right(n, offset + n)
    keys = torch.arange(offset + n, device=device)
    queries = torch.arange(offset, offset + n, device=device)
    return (keys[None, :] <= queries[:, None]).repeat(group, 1)


def prefill_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | CausalBias | None) -> Tensor:
    """One chunk against its prefix. q: (n, H, hd); k, v: (KV, past+n, hd) -> (n, H, hd)."""
    n, heads, hd = q.shape
    kv_heads = k.shape[0]
    if mask is None or isinstance(mask, CausalBias):  # causal inside the kernel, GQA too
        # Lower-right with GQA is flash attention's own: on an H200 (2026-12-04,
        # bench/gpu_probe.py) it matched the same call on repeated K/V heads exactly (max |diff| 0)
        # for 2,048 queries after 2,048 cached, 32 query and 8 K/V heads.
        out = F.scaled_dot_product_attention(
            q.transpose(0, 1)[None],
            k[None],
            v[None],
            attn_mask=mask,
            is_causal=mask is None,
            enable_gqa=heads != kv_heads,
        )  # (1, H, n, hd)
        return out[0].transpose(0, 1)
    g = heads // kv_heads  # fold the query heads of each K/V head into its query rows
    qf = q.view(n, kv_heads, g, hd).permute(1, 2, 0, 3).reshape(1, kv_heads, g * n, hd)
    out = F.scaled_dot_product_attention(qf, k[None], v[None], attn_mask=mask)  # (1, KV, g n, hd)
    return out.view(kv_heads, g, n, hd).permute(2, 0, 1, 3).reshape(n, heads, hd)


def _decode_attention(q: Tensor, g: DecodeGroup, kv: KVStore, layer: int) -> Tensor:
    """One group's decodes in one call. q: (n, H, hd) sorted by slot -> (n, H, hd)."""
    n, heads, hd = q.shape
    r, kv_heads = g.hi - g.lo, kv.shape.kv_heads
    keys, values = kv.read_range(layer, g.lo, g.hi, g.ctx)  # (R, KV, ctx, hd)
    if g.rows is not None:  # scatter into the slot range; dummy rows stay zero
        qr = q.new_zeros(r, heads, hd)
        qr[g.rows] = q
        q = qr
    qf = q.view(r, kv_heads, heads // kv_heads, hd)  # GQA fold: (R, KV, group, hd), a view
    out = F.scaled_dot_product_attention(qf, keys, values, attn_mask=g.mask)
    out = out.reshape(r, heads, hd)  # CUDA's SDPA may return a transposed layout: not a view
    return out if g.rows is None else out[g.rows]
