"""KV-cache block accounting for one worker (paged attention, as vLLM does it).

Notable features
- Memory is counted in blocks of `block_size` tokens (16, vLLM's default on CUDA). A request
  holding t tokens of K/V needs ceil(t / block_size) blocks.
- Blocks are taken step by step as a request grows, not for its whole life at admission (vLLM
  V1). Static batching reserves the whole prompt + output up front instead.
- Only counts: which bytes live where is the live engine's business.
"""

from __future__ import annotations

from sim.core.request import Request


class KVCache:
    """Free-block counter of one worker's KV cache (no prefix caching)."""

    caching = False  # sim/core/prefix_cache.py is the variant with vLLM's prefix cache

    def __init__(self, capacity_tokens: int, block_size: int = 16) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size}")
        if capacity_tokens < block_size:
            raise ValueError(
                f"KV capacity {capacity_tokens} tokens is smaller than one block "
                f"({block_size} tokens): raise kv_capacity_tokens"
            )
        self.block_size = block_size
        self.num_blocks = capacity_tokens // block_size
        self.free_blocks = self.num_blocks

    @property
    def capacity_tokens(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def used_tokens(self) -> int:
        """Tokens' worth of blocks handed out (what limits admission)."""
        return (self.num_blocks - self.free_blocks) * self.block_size

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)  # ceil division

    def extra_blocks(self, req: Request, total_tokens: int) -> int:
        """Blocks `req` must still get so that it can hold `total_tokens` tokens."""
        return max(0, self.blocks_for(total_tokens) - req.blocks)

    def grow(self, req: Request, total_tokens: int, lookahead: int = 0) -> bool:
        """Give `req` the blocks to hold `total_tokens` tokens (and `lookahead` slots past them
        for a drafter's KV); False (and no change) if short."""
        extra = self.extra_blocks(req, total_tokens + lookahead)
        if extra > self.free_blocks:
            return False
        self.free_blocks -= extra
        req.blocks += extra
        return True

    def free(self, req: Request, gone: bool = False) -> None:
        """Return all of `req`'s blocks (`gone`: it will not come back; the prefix cache cares)."""
        self.free_blocks += req.blocks
        req.blocks = 0

    def take(self, count: int) -> None:
        """`count` blocks (known to be free) for a run of decode steps (sim/fastforward/steps.py),
        which sets each request's own count itself."""
        self.free_blocks -= count

    def cache_full(self, req: Request, total_tokens: int) -> None:
        """Register the blocks `total_tokens` fill in the prefix cache: there is none here."""

    # The same calls as the prefix-caching variant, without a cache.

    def lookup(self, req: Request) -> list[int]:
        """Cached blocks matching `req`'s first tokens: none without prefix caching."""
        return []

    def allocate_slots(
        self,
        req: Request,
        new_tokens: int,
        hits=(),
        full_sequence_must_fit: bool = False,
        lookahead: int = 0,
    ) -> bool:
        """Blocks for `new_tokens` more tokens (+ `lookahead` slots); with
        `full_sequence_must_fit`, only if the whole request (prompt + tokens generated so far)
        fits (vLLM 0.33's admission check)."""
        if full_sequence_must_fit and self.extra_blocks(req, req.num_tokens) > self.free_blocks:
            return False
        return self.grow(req, req.num_computed + new_tokens, lookahead)
