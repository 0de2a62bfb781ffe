"""Where the K/V tensors of running requests live on the device: one contiguous row per slot.

Notable features
- Layout (layers, slots, kv_heads, max_len, head_dim), preallocated once. A request owns one slot;
  its K/V for positions [0, n) are `k[layer, slot, :, :n]`, a VIEW (no copy) that SDPA reads as is.
- Why not paged blocks? Block accounting (what vLLM's PagedAttention manages) is done by sim's
  KVCache; gathering pages into a contiguous tensor every layer is a real copy on CPU and cost
  2-3x on decode in our measurements. Why not per-request growing buffers? Growing means copying,
  and the batched decode attention (live/model/llama.py) wants many requests' rows as ONE strided
  view `k[layer, lo:hi, :, :max_ctx]`, which only a shared preallocated tensor gives.
- One scratch position past `max_len` per slot: the flat decode path (live/model/flat_attention.py)
  lets idle rows write there, so its shapes stay static without touching real K/V.
- Zero-initialised on purpose: the batched decode view also covers positions past a request's
  length (masked out), and masked keys must be finite (NaN * 0 is still NaN inside softmax).
- Slots are handed out lowest-first, so running requests stay packed at the low end and the
  batched decode view wastes little.
- Copy out/in (`export`, `load`, `copy_slot`) for swapping and for the disaggregated mode, where
  a prefill worker's KV is really copied into a decode worker's store.
"""

from __future__ import annotations

import heapq

import torch
from torch import Tensor

from live.model.llama import ModelShape


class KVStoreFull(RuntimeError):
    """Every slot of a KVStore is taken (release finished requests, or make the store bigger)."""


class KVStore:
    """Preallocated K/V rows for up to `slots` requests of at most `max_len` tokens each."""

    def __init__(
        self,
        shape: ModelShape,
        slots: int,
        max_len: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if max_len > shape.max_len:
            raise ValueError(f"max_len {max_len} exceeds the model's max_len {shape.max_len}")
        # + 1: the scratch position `max_len` (see the notes above); never read as context.
        size = (shape.layers, slots, shape.kv_heads, max_len + 1, shape.head_dim)
        self.shape = shape
        self.slots = slots
        self.max_len = max_len
        self.k = torch.zeros(size, device=device, dtype=dtype)  # (L, slots, KV, max_len+1, hd)
        self.v = torch.zeros(size, device=device, dtype=dtype)
        self._free = list(range(slots))  # a min-heap: the lowest free slot is reused first

    @property
    def device(self) -> torch.device:
        return self.k.device

    @property
    def dtype(self) -> torch.dtype:
        return self.k.dtype

    @property
    def call_keys(self) -> float:
        """One more decode-attention call costs about this many keys read
        (live/model/attention.py)."""
        from live.model.attention import call_cost_keys

        return call_cost_keys(self.shape, self.k.element_size(), self.device.type)

    @property
    def num_free(self) -> int:
        return len(self._free)

    @property
    def nbytes(self) -> int:
        """Bytes held by K and V together."""
        return 2 * self.k.numel() * self.k.element_size()

    def allocate(self) -> int:
        """Take the lowest free slot."""
        if not self._free:
            raise KVStoreFull(f"all {self.slots} KV slots are in use: release finished requests")
        return heapq.heappop(self._free)

    def free(self, slot: int) -> None:
        """Give a slot back (its old values stay until overwritten; readers never see them)."""
        if slot in self._free or not 0 <= slot < self.slots:
            raise ValueError(f"slot {slot} is not allocated")
        heapq.heappush(self._free, slot)

    def write(self, layer: int, slot: int, offset: int, k: Tensor, v: Tensor) -> None:
        """Store n new positions of one request. k, v: (n, kv_heads, head_dim)."""
        n = k.shape[0]
        if offset + n > self.max_len:
            raise ValueError(f"position {offset + n} is past the store's max_len {self.max_len}")
        self.k[layer, slot, :, offset : offset + n] = k.transpose(0, 1)  # (KV, n, hd)
        self.v[layer, slot, :, offset : offset + n] = v.transpose(0, 1)

    def write_decodes(
        self, layer: int, slots: Tensor, offsets: Tensor, k: Tensor, v: Tensor
    ) -> None:
        """Store one new position for each of B requests at once. k, v: (B, kv_heads, head_dim)."""
        # Advanced indexing on dims 1 and 3 puts the B dim first: the target is (B, KV, hd).
        self.k[layer, slots, :, offsets] = k
        self.v[layer, slots, :, offsets] = v

    def read(self, layer: int, slot: int, length: int) -> tuple[Tensor, Tensor]:
        """Views of one request's first `length` positions: (kv_heads, length, head_dim) each."""
        return self.k[layer, slot, :, :length], self.v[layer, slot, :, :length]

    def read_range(self, layer: int, lo: int, hi: int, length: int) -> tuple[Tensor, Tensor]:
        """Views of slots lo..hi-1, first `length` positions: (hi-lo, kv_heads, length, hd) each."""
        return self.k[layer, lo:hi, :, :length], self.v[layer, lo:hi, :, :length]

    def export(
        self, slot: int, length: int, device: torch.device | str | None = None
    ) -> tuple[Tensor, Tensor]:
        """Copies of one request's K/V, (layers, kv_heads, length, head_dim) each (e.g. to host)."""
        device = self.device if device is None else device
        k = self.k[:, slot, :, :length].to(device, copy=True)
        v = self.v[:, slot, :, :length].to(device, copy=True)
        return k, v

    def load(self, slot: int, k: Tensor, v: Tensor) -> None:
        """Copy exported K/V (layers, kv_heads, length, head_dim) into a slot, from position 0."""
        length = k.shape[2]
        self.k[:, slot, :, :length].copy_(k)
        self.v[:, slot, :, :length].copy_(v)

    def copy_slot(self, slot: int, dst: KVStore, dst_slot: int, length: int) -> None:
        """Copy one request's first `length` positions straight into another store's slot."""
        dst.k[:, dst_slot, :, :length].copy_(self.k[:, slot, :, :length])
        dst.v[:, dst_slot, :, :length].copy_(self.v[:, slot, :, :length])
