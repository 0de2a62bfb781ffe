"""KV blocks with automatic prefix caching, as vLLM V1 manages them (vllm 0.33.0).

Notable features
- Same interface as `sim.kv.KVCache` (the plain free-block counter), plus the cache. An engine
  uses this class when its policy has `enable_prefix_caching` on.
- Mirrors vllm/v1/core/block_pool.py and single_type_kv_cache_manager.py (FullAttentionManager):
  * every block has a reference count; a FULL block of a request is registered under its
    hash-chain key when the step that computes it is scheduled (`cache_full_blocks`, called from
    `KVCacheManager.allocate_slots`), so a request admitted later in the SAME step can hit it;
  * a new request looks up the longest run of cached blocks from its first block, at most
    `num_tokens - 1` tokens (the last token is always computed, to get logits:
    `KVCacheManager.get_computed_blocks`); hit blocks are "touched" (ref + 1, taken out of the free
    queue if they were free);
  * free blocks wait in ONE queue that doubles as the LRU eviction order
    (`FreeKVCacheBlockQueue`): a finished request frees its blocks tail first; blocks that carry a
    hash go to the END of the queue (evicted last, FIFO), blocks without one to the FRONT (reused
    first, LIFO) (`BlockPool.free_blocks`); new blocks are taken from the front, and taking a
    cached block evicts its hash (`BlockPool.get_new_blocks`, `_maybe_evict_cached_block`).
- Free blocks that still hold cached KV count as free (vLLM's `get_num_free_blocks`), so cache
  contents never block admission; they just get evicted.
- Block identity comes from `RequestSpec.block_key` (prefix groups, Mooncake hash ids, or the
  request's own tokens), not from token values: the simulator has no tokens, only lengths.
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.kv import KVCache
from sim.request import Request


class PrefixCachingKV(KVCache):
    """A worker's KV blocks with vLLM V1's hash-chain prefix cache and LRU free queue."""

    caching = True

    def __init__(self, capacity_tokens: int, block_size: int = 16) -> None:
        super().__init__(capacity_tokens, block_size)
        n = self.num_blocks
        self.ref = [0] * n  # requests holding each block
        self.key: list[tuple | None] = [None] * n  # hash-chain key of a cached block
        self.cached: dict[tuple, list[int]] = {}  # key -> blocks holding it (first one is used)
        # The free queue as a doubly linked list over block ids; n = head sentinel, n+1 = tail.
        # Initially in block-id order, like vLLM's queue.
        self._head, self._tail = n, n + 1
        self._next, self._prev = [-1] * (n + 2), [-1] * (n + 2)
        chain = [self._head, *range(n), self._tail]
        for a, b in zip(chain, chain[1:], strict=False):
            self._next[a], self._prev[b] = b, a

    # ---- the free queue (vllm/v1/core/kv_cache_utils.py, FreeKVCacheBlockQueue) -------------

    def _unlink(self, b: int) -> None:
        p, q = self._prev[b], self._next[b]
        self._next[p], self._prev[q] = q, p
        self.free_blocks -= 1

    def _popleft(self) -> int:
        b = self._next[self._head]
        self._unlink(b)
        return b

    def _append(self, blocks: Sequence[int]) -> None:
        for b in blocks:
            last = self._prev[self._tail]
            self._next[last], self._prev[b] = b, last
            self._next[b], self._prev[self._tail] = self._tail, b
        self.free_blocks += len(blocks)

    def _prepend(self, blocks: Sequence[int]) -> None:
        for b in reversed(blocks):  # the first of `blocks` ends up first in the queue
            first = self._next[self._head]
            self._next[self._head], self._prev[b] = b, self._head
            self._next[b], self._prev[first] = first, b
        self.free_blocks += len(blocks)

    # ---- the block pool (vllm/v1/core/block_pool.py) ----------------------------------------

    def _get_new_blocks(self, count: int) -> list[int]:
        """Take `count` blocks from the front of the free queue, evicting their cached hashes."""
        out = []
        for _ in range(count):
            b = self._popleft()
            key = self.key[b]
            if key is not None:  # _maybe_evict_cached_block
                holders = self.cached[key]
                holders.remove(b)
                if not holders:
                    del self.cached[key]
                self.key[b] = None
            self.ref[b] = 1
            out.append(b)
        return out

    def _touch(self, blocks: Sequence[int]) -> None:
        for b in blocks:
            if self.ref[b] == 0:
                self._unlink(b)  # a cached block nobody held: no longer an eviction candidate
            self.ref[b] += 1

    def _cache_full_blocks(self, req: Request, tokens: int) -> None:
        """Register the request's blocks that `tokens` computed tokens fill (cache_full_blocks)."""
        full = min(tokens, req.num_tokens) // self.block_size  # hashes exist for full blocks only
        spec, ids = req.spec, req.block_ids
        for i in range(req.num_cached_blocks, full):
            key = spec.block_key(i, self.block_size)
            self.key[ids[i]] = key
            holders = self.cached.get(key)
            if holders is None:
                self.cached[key] = [ids[i]]
            else:
                holders.append(ids[i])  # a second copy (computed before the first was cached)
        if full > req.num_cached_blocks:
            req.num_cached_blocks = full

    # ---- what the engine calls ----------------------------------------------------------------

    def lookup(self, req: Request) -> list[int]:
        """Cached blocks matching the start of `req`'s tokens (FullAttentionManager's hit).

        At most num_tokens - 1 tokens: the last one is computed to produce logits.
        """
        hits = []
        get = self.cached.get
        key = req.spec.block_key
        for i in range((req.num_tokens - 1) // self.block_size):
            holders = get(key(i, self.block_size))
            if not holders:
                break  # chained hashes: after a miss nothing later can hit
            hits.append(holders[0])
        return hits

    def allocate_slots(
        self, req: Request, new_tokens: int, hits: Sequence[int] = (),
        full_sequence_must_fit: bool = False,
    ) -> bool:  # fmt: skip
        """vLLM's `KVCacheManager.allocate_slots` for admission: adopt `hits`, add blocks for
        `new_tokens` more tokens; with `full_sequence_must_fit`, only if the WHOLE request fits."""
        evictable = sum(1 for b in hits if self.ref[b] == 0)  # touching them takes them off free
        held = len(req.block_ids) + len(hits)
        computed = req.num_computed + len(hits) * self.block_size
        if full_sequence_must_fit:
            need = max(self.blocks_for(req.num_tokens) - held, 0) + evictable
            if need > self.free_blocks:
                return False
        need = max(self.blocks_for(computed + new_tokens) - held, 0) + evictable
        if need > self.free_blocks:
            return False
        if hits:
            self._touch(hits)
            req.block_ids.extend(hits)
            req.num_cached_blocks = len(req.block_ids)
        req.num_computed = computed
        return self.grow(req, computed + new_tokens)

    def grow(self, req: Request, total_tokens: int) -> bool:
        """Blocks for `total_tokens` tokens; newly filled blocks enter the cache. False if short."""
        extra = self.blocks_for(total_tokens) - len(req.block_ids)
        if extra > self.free_blocks:
            return False
        if extra > 0:
            req.block_ids.extend(self._get_new_blocks(extra))
        req.blocks = len(req.block_ids)
        if total_tokens // self.block_size > req.num_cached_blocks:
            self._cache_full_blocks(req, total_tokens)
        return True

    def free(self, req: Request) -> None:
        """Return `req`'s blocks, tail first; cached ones stay findable until evicted."""
        reuse_first, evict_last = [], []
        ref, key = self.ref, self.key
        for b in reversed(req.block_ids):
            ref[b] -= 1
            if ref[b] == 0:
                (reuse_first if key[b] is None else evict_last).append(b)
        self._prepend(reuse_first)
        self._append(evict_last)
        req.block_ids = []
        req.blocks = 0
        req.num_cached_blocks = 0
