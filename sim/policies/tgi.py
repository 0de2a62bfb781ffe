"""TGI v3's batching (text-generation-inference, an archived engine: read-only since 2026).

Read beside huggingface/text-generation-inference at commit db931fcf (version 3.3.6-dev0, the
last snapshot before the archive): backends/v3/src/backend.rs `batching_task()` and
backends/v3/src/queue.rs `State::next_batch()`. Line numbers below are of that commit.

- A batch is formed from the queue's head, in arrival order, while each entry's whole life of KV
  (`input_length + max_new_tokens + speculate - 1` tokens, queue.rs:315) fits the free blocks
  and the prompts together fit `max_batch_prefill_tokens` (queue.rs:346). The first entry that
  does not fit ends the batch (queue.rs:327, :371): nobody jumps the queue.
- A new batch is prefilled ALONE: the running requests wait for that step (backend.rs:252), then
  everybody decodes together (backend.rs:285).
- While a batch runs, a new one is taken only if it has at least `floor(batch_size *
  waiting_served_ratio)` entries (backend.rs:194, queue.rs:410), unless the batch has decoded
  `max_waiting_tokens` times since the last prefill (backend.rs:186): then any size will do.
- KV is reserved for the whole request at admission, so nothing is ever preempted.

Modelled: the path without prefill chunking (`support_chunking` false; with chunking TGI ignores
`waiting_served_ratio` and `max_waiting_tokens`, backend.rs:39), the SimpleAllocator (prefix
caching off), no speculation (`speculate` = 0), no sliding window.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from sim.policies import register
from sim.policies.base import Knobs, Policy


@dataclass(frozen=True)
class TgiKnobs(Knobs):
    # backends/v3/src/main.rs:25-34, the router's flags and defaults.
    # main.rs:25-26 `#[clap(default_value = "1.2")] waiting_served_ratio`
    waiting_served_ratio: float = 1.2
    # main.rs: `#[clap(default_value = "4096")] max_batch_prefill_tokens`
    max_batch_prefill_tokens: int = 4096
    # main.rs: `max_batch_total_tokens: Option<u32>`; unset, TGI sizes it from free GPU memory.
    # 0 = the worker's KV cache.
    max_batch_total_tokens: int = 0
    # main.rs: `#[clap(default_value = "20")] max_waiting_tokens`
    max_waiting_tokens: int = 20
    # main.rs: `max_batch_size: Option<usize>`; 0 = None (no limit)
    max_batch_size: int = 0

    MEANINGS: ClassVar[Mapping[str, str]] = {
        "waiting_served_ratio": "TGI: a new batch joins only if it has this times the running one",
        "max_batch_prefill_tokens": "TGI: the prompt tokens of one prefill batch at most",
        "max_batch_total_tokens": "TGI: KV tokens of all batched requests (0 = the KV cache)",
        "max_waiting_tokens": "TGI: decode steps after which a new batch of any size may join",
        "max_batch_size": "TGI: the requests in one batch at most (0 = no limit)",
    }

    def __post_init__(self) -> None:
        self.check_positive("max_batch_prefill_tokens", "max_waiting_tokens")
        if self.waiting_served_ratio < 0:
            raise ValueError(f"waiting_served_ratio must be >= 0, got {self.waiting_served_ratio}")
        if self.max_batch_total_tokens < 0 or self.max_batch_size < 0:
            raise ValueError("max_batch_total_tokens and max_batch_size must be >= 0 (0 = unset)")


@register
class Tgi(Policy):
    """TGI v3: whole batches prefilled alone, joined by the waiting_served_ratio rule."""

    name = "tgi"
    Knobs = TgiKnobs
    mirrors = (
        "TGI v3 batching (archived engine; text-generation-inference 3.3.6-dev0 at db931fcf, "
        "backends/v3/src/backend.rs and queue.rs)"
    )
    # backends/v3/src/block_allocator.rs:151-152 "Block 0 is reserved for health checks":
    # `free_blocks: (1..blocks).collect()`.
    null_blocks = 1

    def __init__(self, knobs: Knobs | None = None) -> None:
        super().__init__(knobs)
        self.waiting_tokens = 1  # backend.rs:160 `let mut waiting_tokens = 1;`
        self.decode_next = False  # a new batch was just prefilled: backend.rs:285 decodes all

    def transfer_tokens(self, req):
        return req.prompt_tokens + req.output_tokens - 1

    def reject_reason(self, req, engine):
        # TGI's launcher refuses max_input_tokens > max_batch_prefill_tokens, so a longer prompt
        # is refused by validation; here it would block the queue's head forever.
        budget = self._pad(self.knobs.max_batch_prefill_tokens, engine.kv.block_size)
        if req.prompt_tokens > budget:
            return (
                f"prompt of {req.prompt_tokens} tokens exceeds max_batch_prefill_tokens "
                f"({self.knobs.max_batch_prefill_tokens})"
            )
        return ""

    @staticmethod
    def _pad(prefill_token_budget: int, block_size: int) -> int:
        # queue.rs:265 `prefill_token_budget.div_ceil(self.block_size) * self.block_size`
        return -(-prefill_token_budget // block_size) * block_size

    def max_batch_total_tokens(self, engine) -> int:
        return self.knobs.max_batch_total_tokens or engine.kv.capacity_tokens

    def next_batch(self, engine, min_size, max_size, prefill_token_budget, token_budget):
        """queue.rs `State::next_batch` (237-...): the entries of the new batch, [] for None."""
        # queue.rs:93 (Queue::next_batch): `if prefill_token_budget == 0 || token_budget == 0`
        if prefill_token_budget == 0 or token_budget == 0:
            return []
        # queue.rs:245 "No queue"
        if not engine.waiting:
            return []
        # queue.rs:250-251 "Not enough entries"
        if min_size is not None and len(engine.waiting) < min_size:
            return []
        # queue.rs:257-258 "No capacity"
        if max_size is not None and max_size == 0:
            return []
        kv = engine.kv
        prefill_token_budget = self._pad(prefill_token_budget, kv.block_size)
        # The SimpleAllocator's free blocks (block_allocator.rs:185). Its blocks are
        # max_batch_total_tokens / block_size less block 0 (block_allocator.rs:151-152): a knob
        # set below the KV cache caps them; unset (0), they are the KV cache's own.
        free_blocks = kv.free_blocks
        if self.knobs.max_batch_total_tokens:
            blocks = self.knobs.max_batch_total_tokens // kv.block_size - self.null_blocks
            free_blocks = min(free_blocks, blocks - (kv.num_blocks - kv.free_blocks))
        batch = []
        prefill_tokens = 0
        # queue.rs:278 'entry_loop: pop entries starting from the front of the queue
        for entry in engine.waiting:
            # queue.rs:315-318 `tokens = input_length + max_new_tokens + speculate - 1`
            tokens = entry.prompt_tokens + entry.output_tokens - 1
            required_blocks = kv.blocks_for(tokens)  # block_allocator.rs:181
            if required_blocks > free_blocks:  # block_allocator.rs:185
                break  # queue.rs:323-327 "Over budget: not enough free blocks"
            postfix_len = entry.prompt_tokens  # queue.rs:344 (no prefix cache: prefix_len 0)
            if prefill_tokens + postfix_len > prefill_token_budget:  # queue.rs:346
                break  # queue.rs:364-372 no chunking: "Over budget", back to the front
            free_blocks -= required_blocks
            prefill_tokens += postfix_len  # queue.rs:391
            batch.append(entry)
            if len(batch) == max_size:  # queue.rs:397-398
                break
        # queue.rs:410-418: a batch smaller than min_size goes back to the queue
        if min_size is not None and len(batch) < min_size:
            return []
        return batch

    def _prefill(self, engine, plan, batch) -> None:
        for entry in batch:
            engine.reserve_total(entry, entry.prompt_tokens + entry.output_tokens - 1)
            engine.admit(entry)
            plan.add(entry, entry.schedulable)

    def _decode(self, engine, plan) -> None:
        # backend.rs:285 `decode(&mut client, batches, ...)`; backend.rs:288 `waiting_tokens += 1`
        for req in engine.running:
            plan.add(req, req.schedulable)
        self.waiting_tokens += 1

    def schedule(self, engine, plan, now):
        k = self.knobs
        max_batch_size = k.max_batch_size or None
        max_batch_total_tokens = self.max_batch_total_tokens(engine)
        if not engine.running:
            # backend.rs:148-161: no batch runs; the next one has no minimum size
            self.decode_next = False
            batch = self.next_batch(
                engine, None, max_batch_size, k.max_batch_prefill_tokens, max_batch_total_tokens
            )
            if batch:
                self._prefill(engine, plan, batch)
                self.waiting_tokens = 1  # backend.rs:160
            return
        if self.decode_next:  # the decode that follows a new batch's prefill (backend.rs:285)
            self.decode_next = False
            self._decode(engine, plan)
            return
        # backend.rs:165-166 the running batch's size and max_tokens; the server reports
        # max_tokens = num_blocks * BLOCK_SIZE (server/.../flash_causal_lm.py:215)
        batch_size = len(engine.running)
        batch_max_tokens = sum(r.blocks for r in engine.running) * engine.kv.block_size
        token_budget = max(0, max_batch_total_tokens - batch_max_tokens)  # backend.rs:173
        if self.waiting_tokens >= k.max_waiting_tokens:  # backend.rs:186
            min_size = None
        else:  # backend.rs:194, in f32 as Rust computes it
            min_size = math.floor(np.float32(batch_size) * np.float32(k.waiting_served_ratio))
        # backend.rs:197-198 `max_batch_size.saturating_sub(batch_size)`
        max_size = None if max_batch_size is None else max(0, max_batch_size - batch_size)
        batch = self.next_batch(  # backend.rs:204-205
            engine, min_size, max_size, k.max_batch_prefill_tokens, token_budget
        )
        if batch:
            # backend.rs:252-253: the new batch is prefilled alone; the running ones wait
            self._prefill(engine, plan, batch)
            self.waiting_tokens = 1  # backend.rs:264
            self.decode_next = True
            return
        self._decode(engine, plan)
