"""Requests: what a client sends (RequestSpec) and what the engine tracks (Request).

Notable features
- `RequestSpec` is the immutable input: arrival time, prompt length, output length, priority, and
  what its prompt shares with other prompts (for prefix caching): a named prefix group whose first
  `prefix_tokens` tokens are the same for every member, or Mooncake-style `hash_ids` (one id per
  512-token block of the prompt; equal ids at equal positions = equal tokens up to that block).
- `Request` is the engine's mutable state for one request, with ONE scheduling rule shared by
  prefill and decode (vLLM V1's design): the request has `num_tokens` (prompt + tokens generated
  so far) and `num_computed` (tokens whose KV is in the cache). A step gives it n new tokens to
  compute; when `num_computed` catches up with `num_tokens`, the model samples one new token.
  A decode is simply the case `num_tokens - num_computed == 1`.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from enum import Enum

HASH_BLOCK = 512  # tokens per hash id in the Mooncake traces (FAST'25 artifact README)


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One client request, as a workload describes it (times in seconds, lengths in tokens)."""

    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    priority: int = 0  # lower value = served earlier (vLLM's convention)
    prefix_group: str = ""  # requests of one group start with the same prefix_tokens tokens
    prefix_tokens: int = 0  # length of that shared prefix (0 = nothing shared)
    hash_ids: tuple[int, ...] = ()  # Mooncake traces: chained hash of each 512-token block

    def __post_init__(self) -> None:
        if not (math.isfinite(self.arrival_s) and self.arrival_s >= 0):
            raise ValueError(
                f"request {self.request_id}: arrival_s must be >= 0, got {self.arrival_s}"
            )
        if self.prompt_tokens < 1:
            raise ValueError(
                f"request {self.request_id}: prompt_tokens must be >= 1, got {self.prompt_tokens}"
            )
        if self.output_tokens < 1:
            raise ValueError(
                f"request {self.request_id}: output_tokens must be >= 1, got {self.output_tokens}"
            )
        if not 0 <= self.prefix_tokens <= self.prompt_tokens:
            raise ValueError(
                f"request {self.request_id}: prefix_tokens must be between 0 and prompt_tokens "
                f"({self.prompt_tokens}), got {self.prefix_tokens}"
            )
        if self.prefix_tokens and not self.prefix_group:
            raise ValueError(
                f"request {self.request_id}: prefix_tokens needs a prefix_group naming "
                "which requests share those tokens"
            )

    def shared_blocks(self, block_size: int, lookahead: int = 0) -> int:
        """How many leading blocks have keys other requests may share ("m" or "g" ones)."""
        hashed = 0
        if self.hash_ids:
            hashed = (
                max(0, min(self.prompt_tokens, len(self.hash_ids) * HASH_BLOCK) - lookahead)
                // block_size
            )
        return max(hashed, max(0, self.prefix_tokens - lookahead) // block_size)

    def block_keys(self, start: int, stop: int, block_size: int, lookahead: int = 0) -> list[int]:
        """The keys of KV blocks start..stop-1, a run at a time. A block's key identifies its
        tokens AND those of every block before it.

        vLLM hashes each full block together with its parent block's hash (a hash chain), so two
        requests can share block i only if all their tokens up to the end of block i agree. Here
        the key names (kind, owner, i):
        - inside a shared prefix group: ("g", the group, i), the same for every member;
        - inside Mooncake hash blocks: ("m", hash id of the 512-token block holding its end, i);
        - otherwise the tokens are this request's own: ("r", request_id, i).
        It is packed into one int, `pack_key`, because the prefix cache hashes every block's key
        several times in its life and an int hashes for free (a tuple re-hashes its items).

        `lookahead`: tokens after each block that its hash covers too (vLLM's
        `num_hash_lookahead_tokens`, 1 under EAGLE with prefix caching: kv_cache_utils.py
        953-977): a block is shared only if the token after it is as well, and a Mooncake block
        is named by the hash id holding that token (which identifies at least as much).
        """
        keys: list[int] = []
        m_end = start
        la = lookahead
        if self.hash_ids:  # blocks ending inside the hashed part of the prompt
            hashed = (
                max(0, min(self.prompt_tokens, len(self.hash_ids) * HASH_BLOCK) - la) // block_size
            )
            m_end = max(start, min(stop, hashed))
            i = start
            while i < m_end:  # one hash id covers the blocks ending in its 512 tokens
                h = ((i + 1) * block_size - 1 + la) // HASH_BLOCK
                last = min(m_end, ((h + 1) * HASH_BLOCK - la) // block_size)  # ending in h
                base = pack_key(KEY_HASHED, self.hash_ids[h], 0)
                keys += range(base + (i << 2), base + (last << 2), 4)
                i = last
        g_end = max(m_end, min(stop, max(0, self.prefix_tokens - la) // block_size))
        if g_end > m_end:
            base = pack_key(KEY_GROUP, _group_id(self.prefix_group), 0)
            keys += range(base + (m_end << 2), base + (g_end << 2), 4)
        base = pack_key(KEY_OWN, self.request_id, 0)
        keys += range(base + (g_end << 2), base + (stop << 2), 4)
        return keys


KEY_HASHED, KEY_GROUP, KEY_OWN = 1, 2, 3  # the kinds of block key ("m", "g", "r")
_INDEX_BITS = 24  # block index within a request: up to 16.7M blocks (268M tokens of 16)
_GROUPS: dict[str, int] = {}  # prefix group name -> a small int, for packing


def pack_key(kind: int, owner: int, index: int) -> int:
    """(kind, owner, block index) as one int: ((owner << 24) | index) << 2 | kind."""
    return ((owner << _INDEX_BITS) | index) << 2 | kind


def _group_id(group: str) -> int:
    return _GROUPS.setdefault(group, len(_GROUPS))


class RequestState(Enum):
    """Where a request is in its life (one state at a time)."""

    WAITING = "waiting"  # arrived, not admitted (or preempted for recompute: back in line)
    RUNNING = "running"  # admitted: prefilling or decoding, holds KV blocks
    SWAPPED = "swapped"  # preempted by swapping its KV to host memory
    TRANSFERRING = "transferring"  # prefilled on a P worker, KV on its way to a D worker
    FINISHED = "finished"
    REJECTED = "rejected"  # can never be served (see reject_reason)


class Request:
    """The engine's mutable state for one request (slots: it is touched every step)."""

    __slots__ = (
        "spec",
        "request_id",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "priority",
        "state",
        "num_computed",
        "num_generated",
        "blocks",
        "first_token_s",
        "finish_s",
        "preemptions",
        "reject_reason",
        "remote_decode",
        "token_times",
        "workers",
        "wait_kind",
        "wait_since",
        "admit_seq",
        "last_segment",
        "swapped_tokens",
        "high_water",
        "is_decoding",
        "block_ids",
        "num_cached_blocks",
        "cached_tokens",
        "pending_cached",
        "kv_holding",
        "cache_keys",
        "incoming",
        "spec_drafts",
        "spec_samples",
        "spec_drafted",
        "spec_accepted",
        "spec_verifies",
    )

    def __init__(self, spec: RequestSpec) -> None:
        self.spec = spec
        self.request_id = spec.request_id
        self.arrival_s = spec.arrival_s
        self.prompt_tokens = spec.prompt_tokens
        self.output_tokens = spec.output_tokens
        self.priority = spec.priority
        self.state = RequestState.WAITING
        self.num_computed = 0  # tokens whose K/V sit in this worker's cache
        self.num_generated = 0  # output tokens emitted so far
        self.blocks = 0  # KV blocks held on the current worker
        self.first_token_s = math.nan
        self.finish_s = math.nan
        self.preemptions = 0
        self.reject_reason = ""
        # Disaggregated: prefill on a P worker, decode on a D worker, by which protocol
        # ("" = not disaggregated, "vllm" = token 1 sampled on D, "distserve" = on P).
        self.remote_decode = ""
        self.token_times = array("d")  # emission time (s) of each output token
        self.workers: list[str] = []  # workers that served it, in order
        self.wait_kind = "queued"  # segment kind shown while it waits: queued | preempted
        self.wait_since = spec.arrival_s
        self.admit_seq = 0  # admission order on its worker (FCFS victim = most recent)
        self.last_segment = -1  # index of its latest trace segment (the recorder may extend it)
        self.swapped_tokens = 0  # KV tokens parked in host memory while SWAPPED
        self.high_water = 0  # most tokens ever computed: below it, computing again = recompute
        # One token to go and at least one already generated: a plain decode. Kept as a field
        # (read millions of times a run) and refreshed by sync_phase() whenever counts change.
        self.is_decoding = False
        # Prefix caching (sim/core/prefix_cache.py): the ids of the blocks it holds, in order, and
        # how many of them are registered in the cache; tokens the cache served at first admission.
        self.block_ids: list[int] = []
        self.num_cached_blocks = 0
        self.cached_tokens = 0
        self.pending_cached = 0  # cache-hit tokens to draw beside its next prefill chunk
        # Disaggregated: the KV blocks a decode worker reserved for this request's prompt while
        # the prefill worker still holds its own (a Request standing in for it there).
        self.incoming: Request | None = None
        self.cache_keys: list[int] | None = None  # its blocks' keys, kept while the cache uses them
        # Disaggregated decode side: its prompt KV arrived from a P worker and sits in blocks it
        # holds while it waits to be admitted (vLLM's KV-holding waiting requests).
        self.kv_holding = False
        # Speculative decoding (sim/core/speculation.py): draft tokens proposed for its next
        # step (vLLM's len(spec_token_ids)), its sampling events so far (the draws' index), and
        # totals: drafts verified, drafts accepted, verify steps.
        self.spec_drafts = 0
        self.spec_samples = 0
        self.spec_drafted = 0
        self.spec_accepted = 0
        self.spec_verifies = 0

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens: what the KV cache must eventually hold."""
        return self.prompt_tokens + self.num_generated

    @property
    def remaining(self) -> int:
        """Tokens still to compute before the next token can be sampled (1 for a decode)."""
        return self.prompt_tokens + self.num_generated - self.num_computed

    @property
    def schedulable(self) -> int:
        """Most tokens one step may give it.

        Normally all remaining tokens (a policy may chunk them). After a recompute preemption the
        lost KV is rebuilt first, up to `high_water`; then it continues where it was, so every
        prefill chunk is either all recompute or all new work.
        """
        if self.num_computed < self.high_water:
            return self.high_water - self.num_computed
        return self.prompt_tokens + self.num_generated - self.num_computed

    def sync_phase(self) -> None:
        """Refresh `is_decoding` after num_computed or num_generated changed."""
        self.is_decoding = (
            self.num_generated > 0
            and self.num_computed + 1 == self.prompt_tokens + self.num_generated
        )

    @property
    def is_finished(self) -> bool:
        return self.state is RequestState.FINISHED

    def __repr__(self) -> str:  # handy in tests and debugging
        return (
            f"Request({self.request_id}, {self.state.value}, computed={self.num_computed}/"
            f"{self.num_tokens}, generated={self.num_generated}/{self.output_tokens})"
        )
