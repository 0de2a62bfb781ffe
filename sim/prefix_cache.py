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

from collections import OrderedDict
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
        # key -> the block holding it that hits use; `_more` keeps the later copies of a key
        # (computed again before the first was cached), in order: together vLLM's holder list.
        self.cached: dict[tuple, int] = {}
        self._more: dict[tuple, list[int]] = {}
        # The free queue, front first, as an insertion-ordered dict of block ids (O(1) pop at the
        # front, append, move to the front and removal from the middle, all in C). Initially in
        # block-id order, like vLLM's queue.
        self._queue: OrderedDict[int, None] = OrderedDict.fromkeys(range(n))

    # ---- the block pool (vllm/v1/core/block_pool.py) ----------------------------------------

    def _get_new_blocks(self, count: int) -> list[int]:
        """Take `count` blocks from the front of the free queue, evicting their cached hashes."""
        pop, key, ref = self._queue.popitem, self.key, self.ref
        out = [pop(last=False)[0] for _ in range(count)]
        self.free_blocks -= count
        for b in out:
            if key[b] is not None:  # _maybe_evict_cached_block
                self._evict(b)
            ref[b] = 1
        return out

    def _evict(self, b: int) -> None:
        k = self.key[b]
        self.key[b] = None
        more = self._more.get(k)
        if self.cached[k] == b:
            if more:
                self.cached[k] = more.pop(0)  # the next copy becomes the one hits use
            else:
                del self.cached[k]
        else:
            more.remove(b)
        if more is not None and not more:
            del self._more[k]

    def _touch(self, blocks: Sequence[int]) -> None:
        queue, ref = self._queue, self.ref
        for b in blocks:
            if ref[b] == 0:
                del queue[b]  # a cached block nobody held: no longer an eviction candidate
                self.free_blocks -= 1
            ref[b] += 1

    def _cache_full_blocks(self, req: Request, tokens: int) -> None:
        """Register the request's blocks that `tokens` computed tokens fill (cache_full_blocks)."""
        full = min(tokens, req.num_tokens) // self.block_size  # hashes exist for full blocks only
        start = req.num_cached_blocks
        if full <= start:
            return
        keys = req.spec.block_keys(start, full, self.block_size)
        cached, key = self.cached, self.key
        for b, k in zip(req.block_ids[start:full], keys, strict=True):
            key[b] = k
            if k in cached:
                self._more.setdefault(k, []).append(b)  # a second copy of the same tokens
            else:
                cached[k] = b
        req.num_cached_blocks = full

    # ---- what the engine calls ----------------------------------------------------------------

    def lookup(self, req: Request) -> list[int]:
        """Cached blocks matching the start of `req`'s tokens (FullAttentionManager's hit).

        At most num_tokens - 1 tokens: the last one is computed to produce logits.
        """
        n = (req.num_tokens - 1) // self.block_size
        get, spec, bs = self.cached.get, req.spec, self.block_size
        if not n or get(spec.block_key(0, bs)) is None:
            return []  # the usual miss, decided by the first block alone
        hits = []
        for k in spec.block_keys(0, n, bs):
            b = get(k)
            if b is None:
                break  # chained hashes: after a miss nothing later can hit
            hits.append(b)
        return hits

    def allocate_slots(
        self, req: Request, new_tokens: int, hits: Sequence[int] = (),
        full_sequence_must_fit: bool = False,
    ) -> bool:  # fmt: skip
        """vLLM's `KVCacheManager.allocate_slots` for admission: adopt `hits`, add blocks for
        `new_tokens` more tokens; with `full_sequence_must_fit`, only if the WHOLE request fits."""
        ref = self.ref
        evictable = sum(1 for b in hits if ref[b] == 0)  # touching them takes them off free
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
        extra = -(-total_tokens // self.block_size) - len(req.block_ids)
        if extra > 0:
            if extra > self.free_blocks:
                return False
            req.block_ids.extend(self._get_new_blocks(extra))
        req.blocks = len(req.block_ids)
        if total_tokens // self.block_size > req.num_cached_blocks:
            self._cache_full_blocks(req, total_tokens)
        return True

    def free(self, req: Request) -> None:
        """Return `req`'s blocks, tail first; cached ones stay findable until evicted.

        Blocks without a hash go to the FRONT of the queue (reused first), in that tail-first
        order; cached ones to the END (evicted last).
        """
        reuse_first, evict_last = [], []
        ref, key = self.ref, self.key
        for b in reversed(req.block_ids):
            ref[b] -= 1
            if ref[b] == 0:
                (reuse_first if key[b] is None else evict_last).append(b)
        queue = self._queue
        for b in reversed(reuse_first):  # the first of them ends up first in the queue
            queue[b] = None
            queue.move_to_end(b, last=False)
        queue.update(dict.fromkeys(evict_last))
        self.free_blocks += len(reuse_first) + len(evict_last)
        req.block_ids = []
        req.blocks = 0
        req.num_cached_blocks = 0
