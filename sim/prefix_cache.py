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

How it is kept cheap (the same decisions as block by block, at a cost per request, not per block)
- Only a block that someone could still look up needs a name. Blocks without a hash carry
  nothing: the free ones are just a count at the queue's front (`_uncached`; vLLM puts them
  there, and which one is reused first cannot matter). A request's own tokens ("r" keys) can
  only ever be hit by that same request, after a preemption: while it runs, its full own blocks
  are only counted as cached (they will go to the queue's end); when it finishes they join the
  queue as one anonymous run, to be evicted in turn without anything to un-register. Only when a
  request is preempted do its own blocks get registered under their keys, block by block.
- Blocks that others can hit (shared prefix groups, Mooncake hash blocks, a preempted request's
  own blocks) are "keyed": an id with a reference count, a key and a place in the queue, exactly
  as in vLLM. A request's keyed blocks are always its first ones (`req.block_ids`); the rest of
  the `req.blocks` it holds are anonymous.
- The queue of cached free blocks (`_queue`) holds anonymous runs and keyed ids in LRU order. A
  keyed id leaves the middle of the queue (a hit touches it) lazily: its entry stays, stamped
  with a generation, and is skipped when it reaches the front.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from sim.kv import KVCache
from sim.request import Request


class PrefixCachingKV(KVCache):
    """A worker's KV blocks with vLLM V1's hash-chain prefix cache and LRU free queue."""

    caching = True

    def __init__(self, capacity_tokens: int, block_size: int = 16) -> None:
        super().__init__(capacity_tokens, block_size)
        n = self.num_blocks
        # Keyed blocks (someone may hit them): an id each, its reference count, its key and how
        # many times it has entered the free queue (its entries there carry that generation).
        self.ref = [0] * n
        self.key: list[int | None] = [None] * n
        self.gen = [0] * n
        self._spare_ids = list(range(n - 1, -1, -1))  # ids naming no keyed block now
        # key -> the keyed block that hits use; `_more` keeps the later copies of a key
        # (computed again before the first was cached), in order: together vLLM's holder list.
        self.cached: dict[int, int] = {}
        self._more: dict[int, list[int]] = {}
        # The free queue, front first: `_uncached` blocks holding nothing findable, then the
        # cached free blocks from least to most recently freed: -n for a run of n anonymous
        # blocks, id + generation * num_blocks for a keyed block.
        self._uncached = n
        self._queue: deque[int] = deque()

    # ---- the block pool (vllm/v1/core/block_pool.py) ----------------------------------------

    def _take(self, count: int) -> None:
        """Take `count` blocks from the front of the free queue, evicting their cached hashes."""
        self.free_blocks -= count
        plain = min(self._uncached, count)
        self._uncached -= plain
        count -= plain
        queue, n = self._queue, self.num_blocks
        while count:
            entry = queue[0]
            if entry < 0:  # a run of anonymous cached blocks
                if -entry <= count:
                    queue.popleft()
                    count += entry
                else:
                    queue[0] = entry + count
                    count = 0
                continue
            queue.popleft()
            gen, b = divmod(entry, n)
            if self.ref[b] or self.gen[b] != gen:
                continue  # a hit took it off the queue since (or it re-entered further back)
            self._evict(b)  # _maybe_evict_cached_block
            count -= 1

    def _evict(self, b: int) -> None:
        k = self.key[b]
        self.key[b] = None
        self._spare_ids.append(b)
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
        ref = self.ref
        for b in blocks:
            if ref[b] == 0:
                self.free_blocks -= 1  # a cached block nobody held: no longer to be evicted
            ref[b] += 1

    def _register(self, key: int, ref: int) -> int:
        """A new keyed block holding `key`; a second copy if the key is already cached."""
        b = self._spare_ids.pop()
        self.key[b] = key
        self.ref[b] = ref
        if key in self.cached:
            self._more.setdefault(key, []).append(b)
        else:
            self.cached[key] = b
        return b

    def _queue_keyed(self, b: int) -> None:
        self.gen[b] += 1
        self._queue.append(b + self.gen[b] * self.num_blocks)

    def _cache_full_blocks(self, req: Request, tokens: int) -> None:
        """Register the request's blocks that `tokens` computed tokens fill (cache_full_blocks)."""
        bs = self.block_size
        full = min(tokens, req.num_tokens) // bs  # hashes exist for full blocks only
        start = req.num_cached_blocks
        if full <= start:
            return
        # Blocks others can hit (shared prefix, hash blocks) get their keys now; the request's
        # own blocks after them are only counted (see the module docstring).
        shared = min(full, req.spec.shared_blocks(bs))
        if shared > start:
            keys = self._keys(req, shared)
            req.block_ids += [self._register(keys[i], 1) for i in range(start, shared)]
        req.num_cached_blocks = full

    def _keys(self, req: Request, stop: int) -> list[int]:
        """The keys of `req`'s first `stop` blocks, kept on the request while it needs them."""
        keys = req.cache_keys
        if keys is None:
            keys = req.cache_keys = req.spec.block_keys(0, stop, self.block_size)
        elif len(keys) < stop:
            keys = req.cache_keys = keys + req.spec.block_keys(len(keys), stop, self.block_size)
        return keys

    # ---- what the engine calls ----------------------------------------------------------------

    def lookup(self, req: Request) -> list[int]:
        """Cached blocks matching the start of `req`'s tokens (FullAttentionManager's hit).

        At most num_tokens - 1 tokens: the last one is computed to produce logits.
        """
        n = (req.num_tokens - 1) // self.block_size
        get = self.cached.get
        if not n or get(req.spec.block_key(0, self.block_size)) is None:
            return []  # the usual miss, decided by the first block alone
        hits = []
        for k in self._keys(req, n)[:n]:  # a blocked head of the queue is looked up often
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
        held = req.blocks + len(hits)
        computed = req.num_computed + len(hits) * self.block_size
        if full_sequence_must_fit:
            need = max(self.blocks_for(req.num_tokens) - held, 0) + evictable
            if need > self.free_blocks:
                return False
        need = max(self.blocks_for(computed + new_tokens) - held, 0) + evictable
        if need > self.free_blocks:
            return False
        if hits:  # it holds nothing yet (a new or a recomputing request)
            self._touch(hits)
            req.block_ids.extend(hits)
            req.blocks += len(hits)
            req.num_cached_blocks = len(req.block_ids)
        req.num_computed = computed
        return self.grow(req, computed + new_tokens)

    def grow(self, req: Request, total_tokens: int) -> bool:
        """Blocks for `total_tokens` tokens; newly filled blocks enter the cache. False if short."""
        extra = -(-total_tokens // self.block_size) - req.blocks
        if extra > 0:
            if extra > self.free_blocks:
                return False
            self._take(extra)
            req.blocks += extra
        if total_tokens // self.block_size > req.num_cached_blocks:
            self._cache_full_blocks(req, total_tokens)
        return True

    def take_blocks(self, reqs: Sequence[Request], totals: Sequence[int]) -> None:
        """Blocks for each request to hold its total (known to fit), taken in one go, without
        registering them (`cache_full` does, once the request's token count has caught up).
        For a run of decode steps (sim/fastforward.py): as many blocks come off the free queue's
        front as one request at a time would take."""
        bs, taken = self.block_size, 0
        for req, total in zip(reqs, totals, strict=True):
            extra = -(-total // bs) - req.blocks
            if extra > 0:
                req.blocks += extra
                taken += extra
        self._take(taken)

    def cache_full(self, req: Request, total_tokens: int) -> None:
        """Register the blocks that `total_tokens` computed tokens fill (as `grow` does)."""
        if total_tokens // self.block_size > req.num_cached_blocks:
            self._cache_full_blocks(req, total_tokens)

    def free(self, req: Request, gone: bool = False) -> None:
        """Return `req`'s blocks, tail first; cached ones stay findable until evicted.

        Blocks without a hash go to the FRONT of the queue, cached ones to the END. `gone`: the
        request will never be looked up here again (it finished, or left for a decode worker),
        so its own cached blocks join the queue as one anonymous run; a preempted request's are
        registered under their keys, for it to hit when it comes back.
        """
        keyed, cached, held = len(req.block_ids), req.num_cached_blocks, req.blocks
        freed = held - max(cached, keyed)
        self._uncached += freed  # its partly filled (unhashed) blocks
        if cached > keyed:  # its own full blocks, tail first
            freed += cached - keyed
            if gone:
                self._queue.append(keyed - cached)
            else:
                keys = self._keys(req, cached)
                for i in range(cached - 1, keyed - 1, -1):
                    self._queue_keyed(self._register(keys[i], 0))
        ref = self.ref
        for b in reversed(req.block_ids):
            ref[b] -= 1
            if ref[b] == 0:
                self._queue_keyed(b)
                freed += 1
        self.free_blocks += freed
        req.block_ids = []
        req.blocks = 0
        req.num_cached_blocks = 0
        req.cache_keys = None
