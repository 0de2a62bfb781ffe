"""KV blocks with automatic prefix caching, as vLLM V1 manages them (vllm 0.33.0).

Notable features
- Same interface as `sim.core.kv.KVCache` (the plain free-block counter), plus the cache. An engine
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
- Block identity comes from `RequestSpec.block_keys` (prefix groups, Mooncake hash ids, or the
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
  keyed id leaves the middle of the queue (a hit touches it) lazily: its entry stays, the id is
  counted as stale, and the entry skips it when it reaches the front. A block's stale entries
  are always older than its live one (the queue is first in, first out), so a count per id is
  enough, and entering the queue costs nothing per block: only hits, which are few, pay.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from sim.core.kv import KVCache
from sim.core.request import HASH_BLOCK, Request

LOOKUP_CHUNK = 64  # keys looked up at once (a miss wastes at most this many lookups)


class PrefixCachingKV(KVCache):
    """A worker's KV blocks with vLLM V1's hash-chain prefix cache and LRU free queue."""

    caching = True

    def __init__(self, capacity_tokens: int, block_size: int = 16) -> None:
        super().__init__(capacity_tokens, block_size)
        # Tokens after each block its hash covers too (vLLM's num_hash_lookahead_tokens: 1 under
        # EAGLE, whose drafter reads one token ahead; the engine sets it from the policy's knobs).
        self.hash_lookahead = 0
        n = self.num_blocks
        # Keyed blocks (someone may hit them): an id each, its reference count and its key.
        self.ref = [0] * n
        self.key: list[int | None] = [None] * n  # (what a spare id last held: meaningless)
        # id -> how many of its entries in the free queue a hit has made stale since (it took
        # the block off the queue; the entry stays where it is and is skipped at the front).
        self._stale: dict[int, int] = {}
        self._spare_ids = list(range(n - 1, -1, -1))  # ids naming no keyed block now
        # key -> the keyed block that hits use; `_more` keeps the later copies of a key
        # (computed again before the first was cached), in order: together vLLM's holder list.
        self.cached: dict[int, int] = {}
        self._more: dict[int, list[int]] = {}
        # The free queue, front first: `_uncached` blocks holding nothing findable, then the
        # cached free blocks from least to most recently freed: -n for a run of n anonymous
        # blocks, [ids, start] for keyed blocks freed together (those from `start` on are still
        # in the queue, less the stale ones).
        self._uncached = n
        self._queue: deque[int | list] = deque()
        # request id -> how many of its first blocks other requests may also hold (from the
        # whole workload, `sharing`); without it, every prefix-group or hash block may be.
        self.shareable: dict[int, int] | None = None

    # ---- the block pool (vllm/v1/core/block_pool.py) ----------------------------------------

    def _take(self, count: int) -> None:
        """Take `count` blocks from the front of the free queue, evicting their cached hashes."""
        self.free_blocks -= count
        if count <= self._uncached:  # (the usual case: blocks that hold nothing findable)
            self._uncached -= count
            return
        count -= self._uncached
        self._uncached = 0
        queue, stale = self._queue, self._stale
        while count:
            entry = queue[0]
            if isinstance(entry, int):  # a run of anonymous cached blocks (-length)
                if -entry <= count:
                    queue.popleft()
                    count += entry
                else:
                    queue[0] = entry + count
                    count = 0
                continue
            # Keyed blocks freed together, oldest first. An entry whose block a hit took off
            # the queue since (it may have re-entered further back) is stale: it counts for
            # nothing, and its block is stale once less.
            ids, start = entry
            end = start + count
            if end < len(ids):
                entry[1] = end
            else:
                queue.popleft()
            taken = ids[start:end]
            if stale and not stale.keys().isdisjoint(taken):
                taken = [b for b in taken if not self._unstale(b)]
            count -= len(taken)
            self._evict_many(taken)  # _maybe_evict_cached_block

    def _unstale(self, b: int) -> bool:
        """Whether block b's entry at the queue's front is stale (and if so, count it off)."""
        left = self._stale.get(b, 0)
        if not left:
            return False
        if left == 1:
            del self._stale[b]
        else:
            self._stale[b] = left - 1
        return True

    def _evict_many(self, blocks: list[int]) -> None:
        key, cached = self.key, self.cached
        if self._more and not self._more.keys().isdisjoint([key[b] for b in blocks]):
            for b in blocks:  # a key with a second copy: one at a time
                self._evict(b)
            return
        for b in blocks:  # each was its key's only copy (plain loops: faster than map in 3.11)
            del cached[key[b]]
        self._spare_ids.extend(blocks)  # (their stale `key` entries are never read again)

    def _evict(self, b: int) -> None:
        k = self.key[b]
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
        ref, stale = self.ref, self._stale
        for b in blocks:
            if ref[b] == 0:  # a cached block nobody held: off the free queue, not to be evicted
                self.free_blocks -= 1
                stale[b] = stale.get(b, 0) + 1  # (its entry there stays, and is skipped)
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

    def _register_many(self, keys: list[int], ref: int) -> list[int]:
        """`_register` for each key, in order."""
        spare = self._spare_ids
        if len(keys) < 8 or not self.cached.keys().isdisjoint(keys):
            return [self._register(k, ref) for k in keys]
        ids = spare[: -len(keys) - 1 : -1]  # what popping them one by one gives
        del spare[-len(keys) :]
        key, refs = self.key, self.ref
        for b, k in zip(ids, keys, strict=True):
            key[b] = k
            refs[b] = ref
        self.cached.update(zip(keys, ids, strict=True))
        return ids

    def _queue_keyed(self, blocks: list[int]) -> None:
        """Keyed blocks nobody holds now join the end of the free queue, in this order."""
        if blocks:
            self._queue.append([blocks, 0])

    def _cache_full_blocks(self, req: Request, tokens: int) -> None:
        """Register the request's blocks that `tokens` computed tokens fill (cache_full_blocks)."""
        bs = self.block_size
        held = req.prompt_tokens + req.num_generated - self.hash_lookahead  # req.num_tokens
        full = (tokens if tokens < held else held) // bs  # hashes exist for full blocks only
        start = req.num_cached_blocks
        if full <= start:
            return
        # Blocks others can hit (shared prefix, hash blocks) get their keys now; the request's
        # own blocks after them are only counted (see the module docstring).
        spec = req.spec
        if spec.hash_ids or spec.prefix_tokens:
            if self.shareable is None:
                shared = min(full, spec.shared_blocks(bs, self.hash_lookahead))
            else:
                shared = min(full, self.shareable.get(req.request_id, 0))
            if shared > start:
                req.block_ids += self._register_many(self._keys(req, shared)[start:shared], 1)
        req.num_cached_blocks = full

    def _keys(self, req: Request, stop: int) -> list[int]:
        """The keys of `req`'s first `stop` blocks, kept on the request while it needs them."""
        keys = req.cache_keys
        if keys is None:
            keys = req.cache_keys = req.spec.block_keys(
                0, stop, self.block_size, self.hash_lookahead
            )
        elif len(keys) < stop:  # (the request's own)
            keys += req.spec.block_keys(len(keys), stop, self.block_size, self.hash_lookahead)
        return keys

    # ---- what the engine calls ----------------------------------------------------------------

    def lookup(self, req: Request) -> list[int]:
        """Cached blocks matching the start of `req`'s tokens (FullAttentionManager's hit).

        At most num_tokens - 1 tokens: the last one is computed to produce logits.
        """
        n = (req.num_tokens - 1) // self.block_size
        if not req.preemptions and self.shareable is not None:
            # Its own keys were never cached, and blocks past its shared ones have keys no
            # other request has: nothing there can hit (none at all if it shares nothing).
            n = min(n, self.shareable.get(req.request_id, 0))
        get = self.cached.get
        if not n or get(self._keys(req, 1)[0]) is None:
            return []  # the usual miss, decided by the first block alone
        hits: list[int] = []
        for i in range(0, n, LOOKUP_CHUNK):  # a chunk of keys at a time, looked up in C
            stop = min(i + LOOKUP_CHUNK, n)
            keys = self._keys(req, stop)  # (made as far as needed, and kept: a blocked head
            found = list(map(get, keys[i:stop]))  # of the queue is looked up often)
            if None in found:  # chained hashes: after a miss nothing later can hit
                hits += found[: found.index(None)]
                break
            hits += found
        return hits

    def allocate_slots(
        self,
        req: Request,
        new_tokens: int,
        hits: Sequence[int] = (),
        full_sequence_must_fit: bool = False,
        lookahead: int = 0,
    ) -> bool:
        """vLLM's `KVCacheManager.allocate_slots` for admission: adopt `hits`, add blocks for
        `new_tokens` more tokens (+ `lookahead` slots for a drafter, never cached); with
        `full_sequence_must_fit`, only if the WHOLE request fits."""
        if not hits:  # (the usual case: the checks below, without the hits' terms)
            if full_sequence_must_fit and (
                -(-req.num_tokens // self.block_size) - req.blocks > self.free_blocks
            ):
                return False
            return self.grow(req, req.num_computed + new_tokens, lookahead)
        ref = self.ref
        evictable = sum(1 for b in hits if ref[b] == 0)  # touching them takes them off free
        held = req.blocks + len(hits)
        computed = req.num_computed + len(hits) * self.block_size
        if full_sequence_must_fit:
            need = max(self.blocks_for(req.num_tokens) - held, 0) + evictable
            if need > self.free_blocks:
                return False
        need = max(self.blocks_for(computed + new_tokens + lookahead) - held, 0) + evictable
        if need > self.free_blocks:
            return False
        if hits:  # it holds nothing yet (a new or a recomputing request)
            self._touch(hits)
            req.block_ids.extend(hits)
            req.blocks += len(hits)
            req.num_cached_blocks = len(req.block_ids)
        req.num_computed = computed
        return self.grow(req, computed + new_tokens, lookahead)

    def grow(self, req: Request, total_tokens: int, lookahead: int = 0) -> bool:
        """Blocks for `total_tokens` tokens and `lookahead` slots past them; newly filled blocks
        (of the `total_tokens`) enter the cache. False if short."""
        extra = -(-(total_tokens + lookahead) // self.block_size) - req.blocks
        if extra > 0:
            if extra > self.free_blocks:
                return False
            self._take(extra)
            req.blocks += extra
        if total_tokens // self.block_size > req.num_cached_blocks:
            self._cache_full_blocks(req, total_tokens)
        return True

    def take(self, count: int) -> None:
        """`count` blocks (known to fit) off the free queue's front in one go, without
        registering them (`cache_full` does, once the request's token count has caught up).
        For a run of decode steps (sim/fastforward/steps.py): as many blocks come off the front as
        one request at a time would take; the run sets each request's own count."""
        self._take(count)

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
                own = self._keys(req, cached)[keyed:cached][::-1]
                self._queue_keyed(self._register_many(own, 0))
        ids = req.block_ids[::-1]
        if ids:
            ref = self.ref
            back = []  # those nobody holds now
            for b in ids:
                r = ref[b] = ref[b] - 1
                if not r:
                    back.append(b)
            self._queue_keyed(back)
            freed += len(back)
        self.free_blocks += freed
        req.block_ids = []
        req.blocks = 0
        req.num_cached_blocks = 0
        req.cache_keys = None


def sharing(specs, block_size: int, lookahead: int = 0) -> dict[int, int]:
    """request id -> its first blocks whose keys another request of `specs` has too.

    A block whose key no other request has can only be hit by its own request, after a
    preemption, like its own tokens: the cache need not name it (see the module docstring).
    Mooncake traces hash most of each prompt into ids no other request shares; a prefix group
    of one member shares nothing. Blocks up to the last shared key are named (exact either way).
    """
    from collections import Counter

    hash_use = Counter(h for s in specs for h in set(s.hash_ids))
    group_use = Counter(s.prefix_group for s in specs if s.prefix_tokens)
    out = {}
    for s in specs:
        blocks = 0
        if s.hash_ids:
            shared = [p for p, h in enumerate(s.hash_ids) if hash_use[h] > 1]
            if shared:
                end = min(
                    s.prompt_tokens, len(s.hash_ids) * HASH_BLOCK, (shared[-1] + 1) * HASH_BLOCK
                )
                blocks = max(0, end - lookahead) // block_size
        if s.prefix_tokens and group_use[s.prefix_group] > 1:
            blocks = max(blocks, max(0, s.prefix_tokens - lookahead) // block_size)
        if blocks:
            out[s.request_id] = blocks
    return out
