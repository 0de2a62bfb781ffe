"""vLLM V0's chunked-prefill scheduler with concurrent partial prefills (vllm 0.10.2; C7, C8).

V0 was vLLM's engine until it was removed in September 2025 (PR #25321); its fast lane for short
prompts, `max_num_partial_prefills` / `max_long_partial_prefills` (PR #10235), existed from
February 2025 until then. Today's vLLM (the `vllm` policy) ignores both knobs.

Mirrors `Scheduler._schedule_chunked_prefill` in vllm/core/scheduler.py (vllm 0.10.2 wheel):
- `PartialPrefillMetadata.from_queues` (lines 365-412), before anything is scheduled: count the
  running prefills plus the waiting prompts that could start (a waiting LONG one only while the
  long quota has room), at most `max_num_partial_prefills`. The budget per prefill "slot" is
  `max_num_batched_tokens // that count` (lines 521-527).
- `_schedule_running` (640-810): walk the running queue in order. Each request gets
  min(its remaining tokens (1 for a decode), budget left, slot budget) (`_chunk_new_tokens_to_
  schedule`, 1979-2026); zero ends the walk (the rest stall). A request whose KV cannot grow
  (`can_append_slots`: every running request needs one free block, a partial prefill none when
  its prompt ends on a block boundary) preempts the LAST request of the part of the queue not
  walked yet, or itself if none is left.
- `_schedule_prefills` (1027-1214): admit waiting prompts in order while the budget and
  `max_num_seqs` (requests scheduled this step) allow, each with a chunk sized as above. A long
  prompt (remaining tokens > `long_prefill_token_threshold`) is passed over while
  `max_long_partial_prefills` long prompts already prefill and `max_num_partial_prefills` > 1
  (`can_schedule`, 345-354): shorter prompts behind it go first, the fast lane (C8). Admission
  reserves KV for the WHOLE prompt, keeping 1% of the blocks free (vllm/core/block_manager.py
  `can_allocate`, 110-147, watermark 0.01); the first prompt that does not fit stops admission.
- With preemption_mode=swap, victims' KV goes to host memory, and `_schedule_swapped`
  (812-925) brings it back after the running requests and before new prompts, only in a step
  that preempted nothing (1383-1387), while the blocks fit above the watermark and the budget
  holds (`schedule_swapped` below).
- Afterwards (1393-1417) the running queue is: requests not reached this step, decodes, prefills
  that finish this step, prefills that do not, new prefills (swapped-in requests go ahead of the
  decodes). Requests preempted this step go back to the front of the waiting queue after this
  step's admissions.
So `max_num_partial_prefills=1` (the default) does NOT serialise prompts: whole short prompts
pack beside a long prompt's chunk. What blocks the queue (C7) is a long prompt first in line
taking the whole budget. Not modelled: prefix caching (off by default in V0), LoRA, beam search.
Differs on purpose: vLLM V0 refuses max_num_batched_tokens < max_num_seqs (vllm/config/
scheduler.py `_verify_args`, line 262); PD Lab accepts it, so a small teaching budget runs with
the default max_num_seqs of 256, and a step then holds at most `max_num_batched_tokens` requests
(the differential tests keep max_num_seqs <= the budget, as vLLM must).
The step sequence is checked against the real V0 scheduler in tests/test_vllm_differential.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from sim.cost.engine_memory import vllm_profile_reserve_gb
from sim.policies import register
from sim.policies.base import MAX_SEQS, STEP_BUDGET, Knobs, Note, Policy

WATERMARK = 0.01  # vllm/core/block_manager.py line 67: keep 1% of the GPU blocks free
MAX_MODEL_LEN = 131072  # Llama-3.1's context: V0's auto threshold is 4% of it


def watermark_blocks(kv) -> int:
    return int(WATERMARK * kv.num_blocks)


def can_allocate(kv, req) -> str:
    """V0 `BlockSpaceManager.can_allocate`: blocks for the whole sequence, above the watermark.

    A request on a disaggregated decode worker already holds its prompt's blocks (V0 had no
    such worker): only the blocks it still lacks are counted against the free ones.
    """
    need = kv.blocks_for(req.num_tokens)
    if kv.num_blocks - need < watermark_blocks(kv):
        return "never"
    lacking = need - req.blocks
    return "ok" if kv.free_blocks - lacking >= watermark_blocks(kv) else "later"


def can_append(kv, req) -> bool:
    """V0 `can_append_slots`: free blocks >= blocks this step may touch (worst case).

    A decode touches its last block (1) even if it has room; a partial prefill's prompt is
    already allocated, so it touches one block unless the prompt ends on a block boundary
    (block_table.py `get_num_blocks_touched_by_append_slots`).
    """
    touched = 1 if req.is_decoding or req.num_tokens % kv.block_size else 0
    return touched <= kv.free_blocks


def can_swap_in(kv, req) -> str:
    """V0 `BlockSpaceManager._can_swap` (vllm/core/block_manager.py 465-516) for a swap-in: the
    blocks touched are its full blocks plus those its unseen tokens touch (488-504), which for
    one sequence is ceil(num_tokens / block_size); the GPU watermark applies (506-516)."""
    touched = kv.blocks_for(req.num_tokens)
    if kv.num_blocks < touched:
        return "never"
    return "ok" if kv.free_blocks - touched >= watermark_blocks(kv) else "later"


def schedule_swapped(engine, plan, num_seqs: int, budget: int, max_num_seqs: int) -> list:
    """V0 `_schedule_swapped` (vllm/core/scheduler.py 812-925): the swapped queue in order while
    each fits; returns the requests swapped in (each scheduled in this step)."""
    kv, swapped_in = engine.kv, []
    while engine.swapped:
        req = engine.swapped[0]
        status = can_swap_in(kv, req)  # 852-854
        if status == "later":
            break  # 855-856
        if status == "never":  # 857-866: FINISHED_IGNORED
            engine.abort(req, engine._now, never_fits_reason(kv, req) or "KV never fits")
            continue
        # 884-894: called without enable_chunking, so a prompt comes back whole; a decode is 1
        n = req.remaining
        if n == 0 or plan.num_tokens + n > budget or num_seqs + 1 > max_num_seqs:
            break  # `budget.can_schedule` (888-891)
        engine.swap_in(req, plan)  # 897 `_swap_in`
        kv.grow(req, req.num_tokens)  # 898 `_append_slots`
        plan.add(req, n)
        swapped_in.append(req)
        num_seqs += 1
    return swapped_in


def never_fits_reason(kv, req) -> str:
    """Why V0 would never admit `req` here ('' if it could): `can_allocate` says NEVER, and V0
    drops the request (FINISHED_IGNORED, vllm/core/scheduler.py `_schedule_prefills`)."""
    if can_allocate(kv, req) == "never":
        return (
            f"needs {req.num_tokens} tokens of KV cache, more than this worker holds above "
            f"vLLM V0's 1% watermark ({kv.capacity_tokens} tokens in all): raise "
            "kv_capacity_tokens"
        )
    return ""


def run_decodes_v0(engine, plan, queue: deque, tokens_for) -> list:
    """V0's `_schedule_running` walk: returns the (request, tokens) it scheduled, in order.

    `tokens_for(req)` gives the tokens a request gets now (0 stops the walk). Requests still in
    `queue` afterwards were not reached. Victims are preempted through the engine.
    """
    kv, scheduled = engine.kv, []
    while queue:
        req = queue[0]
        n = tokens_for(req)
        if n == 0:
            break  # no budget: the rest of the queue stalls
        queue.popleft()
        while not can_append(kv, req):
            victim = queue.pop() if queue else req  # the last request not walked yet
            engine.preempt(victim, plan)
            if victim is req:
                break
        else:
            kv.grow(req, req.num_computed + n)  # a decode may take its next block
            plan.add(req, n)
            scheduled.append((req, n))
    return scheduled


@dataclass(frozen=True)
class VllmV0Knobs(Knobs):
    max_num_batched_tokens: int = 2048  # token budget per step (V0's chunked default)
    max_num_seqs: int = 256  # requests scheduled in one step at most
    max_num_partial_prefills: int = 1  # prefill "slots" the budget is split across
    max_long_partial_prefills: int = 1  # of those, how many may be long
    long_prefill_token_threshold: int = 0  # "long" = more remaining tokens (0: 4% of 131072)

    MEANINGS: ClassVar[Mapping[str, str]] = {
        "max_num_batched_tokens": STEP_BUDGET,
        "max_num_seqs": MAX_SEQS,
        "max_num_partial_prefills": "the partial-prefill slots",
        "max_long_partial_prefills": "the slots for long prompts",
        "long_prefill_token_threshold": "the length above which a prompt counts as long",
    }

    def __post_init__(self) -> None:
        self.check_positive("max_num_batched_tokens", "max_num_seqs", "max_long_partial_prefills")
        self.check_partial_prefills()
        if self.long_prefill_token_threshold < 0:
            raise ValueError("long_prefill_token_threshold must be >= 0 (0 = auto)")
        if self.max_num_partial_prefills and (
            self.max_long_partial_prefills > self.max_num_partial_prefills
        ):
            raise ValueError("max_long_partial_prefills must be <= max_num_partial_prefills")

    def kv_reserve_gb(self, model, tensor_parallel: int) -> float:
        """vLLM's profile run (sim/cost/engine_memory.py): V0 samples for max_num_seqs dummy
        sequences too (at most one per budgeted token), sorting the vocabulary as every
        release with V0 did (V0 left vLLM in 0.11)."""
        requests = min(self.max_num_seqs, self.max_num_batched_tokens)
        return vllm_profile_reserve_gb(model, tensor_parallel, requests, release="0.10")

    def check_partial_prefills(self) -> None:
        if self.max_num_partial_prefills < 1:
            raise ValueError(
                "max_num_partial_prefills must be >= 1 (vLLM V0 requires it); for vLLM V1's "
                "packing without slots use the vllm policy"
            )

    @property
    def long_threshold(self) -> int:
        """Remaining tokens above which a prompt is long (vllm/config/scheduler.py 227-231)."""
        if self.long_prefill_token_threshold == 0 and self.max_num_partial_prefills > 1:
            return int(MAX_MODEL_LEN * 0.04)
        return self.long_prefill_token_threshold


@register
class VllmV0(Policy):
    """vLLM V0 chunked prefill: running first, then new prompts, the budget split by slots."""

    name = "vllm-v0"
    supports_swap = True  # V0 could swap preempted KV to host memory
    schedules_swap_in = True  # `_schedule_swapped`, after the running requests (below)
    Knobs = VllmV0Knobs
    mirrors = "vLLM V0 chunked-prefill scheduler (vllm 0.10.2, vllm/core/scheduler.py)"

    def reject_reason(self, req, engine):
        return never_fits_reason(engine.kv, req)

    def _is_long(self, req, threshold: int) -> bool:
        return req.remaining > threshold

    def schedulable_prefills(self, engine, threshold: int) -> tuple[int, int]:
        """(slots to split the budget over, long prompts prefilling): `from_queues`."""
        k = self.knobs
        prefills = long_running = waiting_long = 0
        for r in engine.running:
            if not r.is_decoding:
                prefills += 1
                long_running += self._is_long(r, threshold)
        for r in engine.waiting:
            if prefills >= k.max_num_partial_prefills:
                break
            if self._is_long(r, threshold):
                if long_running + waiting_long >= k.max_long_partial_prefills:
                    continue  # it will not be scheduled anyway
                waiting_long += 1
            prefills += 1
        return min(prefills, k.max_num_partial_prefills), long_running

    def schedule(self, engine, plan, now):
        k = self.knobs
        budget, threshold = k.max_num_batched_tokens, k.long_threshold
        slots, long_prefills = self.schedulable_prefills(engine, threshold)
        slot_budget = budget // slots if slots else budget

        def tokens_for(req):
            return min(
                1 if req.is_decoding else req.remaining, budget - plan.num_tokens, slot_budget
            )

        queue = deque(engine.running)
        waiting_before = len(engine.waiting)
        scheduled = run_decodes_v0(engine, plan, queue, tokens_for)
        # scheduler.py 1383-1387: swapped requests come back only in a step that preempted
        # nothing ("If preemption happens, it means we don't have space for swap-in"), after
        # the running ones and before new prompts.
        swapped_in = []
        if plan.preempted == 0:
            swapped_in = schedule_swapped(engine, plan, len(scheduled), budget, k.max_num_seqs)
        # Recompute victims went to the front of the waiting queue; V0 adds them back only
        # after this step's admissions, so admission starts behind them.
        start = len(engine.waiting) - waiting_before
        admitted = self._admit(
            engine,
            plan,
            start,
            slot_budget,
            threshold,
            long_prefills,
            len(scheduled) + len(swapped_in),
        )

        decodes = [r for r, _ in scheduled if r.is_decoding]
        prefills = [(r, n) for r, n in scheduled if not r.is_decoding]
        finishing = [r for r, n in prefills if n == r.remaining]
        rest = [r for r, n in prefills if n != r.remaining]
        # 1406-1410: swapped-in decodes, then swapped-in prefills, ahead of this step's decodes
        swapped_decodes = [r for r in swapped_in if r.is_decoding]
        swapped_prefills = [r for r in swapped_in if not r.is_decoding]
        engine.running[:] = [
            *queue,
            *swapped_decodes,
            *swapped_prefills,
            *decodes,
            *finishing,
            *rest,
            *admitted,
        ]

    def _admit(self, engine, plan, start, slot_budget, threshold, long_prefills, num_seqs):
        """`_schedule_prefills` with chunking: new prompts, in queue order from `start`."""
        k, kv = self.knobs, engine.kv
        budget, admitted, i = k.max_num_batched_tokens, [], start
        if plan.num_tokens >= budget:
            return admitted
        waiting = engine.waiting
        while i < len(waiting):
            req = waiting[i]
            is_long = self._is_long(req, threshold)
            if (
                is_long
                and long_prefills >= k.max_long_partial_prefills
                and (k.max_num_partial_prefills > 1)
            ):
                i += 1  # the fast lane: shorter prompts behind it may go first (C8)
                continue
            n = min(req.remaining, budget - plan.num_tokens, slot_budget)
            status = can_allocate(kv, req)
            if status == "never":  # it outgrew the cache (a recompute): V0 drops it
                engine.reject(req, never_fits_reason(kv, req))
                continue
            if status != "ok":
                break  # head of line: the whole prompt's KV does not fit yet
            if n == 0 or num_seqs + 1 > k.max_num_seqs:
                break
            kv.grow(req, req.num_tokens)  # V0 allocates the whole prompt at admission
            engine.admit(req)
            plan.add(req, n)
            admitted.append(req)
            num_seqs += 1
            long_prefills += is_long
        return admitted


@dataclass(frozen=True)
class ChunkedKnobs(VllmV0Knobs):
    """`vllm-v0`'s knobs, plus the old encoding max_num_partial_prefills=0 (see below)."""

    def kv_reserve_gb(self, model, tensor_parallel: int) -> float:
        """vLLM's profile run (sim/cost/engine_memory.py): V0 samples for max_num_seqs dummy
        sequences too (at most one per budgeted token), sorting the vocabulary as every
        release with V0 did (V0 left vLLM in 0.11)."""
        requests = min(self.max_num_seqs, self.max_num_batched_tokens)
        return vllm_profile_reserve_gb(model, tensor_parallel, requests, release="0.10")

    def check_partial_prefills(self) -> None:
        if self.max_num_partial_prefills < 0:
            raise ValueError("max_num_partial_prefills must be >= 0")


@register
class Chunked(VllmV0):
    """The old name of `vllm-v0`, kept so that shared links and scripts keep working.

    Under this name only, max_num_partial_prefills=0 keeps its old meaning, "no slot limit,
    pack prompts until the budget is used" (vLLM V1's packing): it runs the `vllm` policy with
    the same budget and prefix caching off. New work should say `vllm` for that.
    """

    name = "chunked"
    Knobs = ChunkedKnobs
    mirrors = "alias of vllm-v0 (vLLM V0 chunked prefill, vllm 0.10.2)"

    def __init__(self, knobs=None) -> None:
        super().__init__(knobs)
        self.v1 = None
        if self.knobs.max_num_partial_prefills == 0:
            from sim.policies.vllm_v1 import Vllm, VllmKnobs

            k = self.knobs
            self.v1 = Vllm(
                VllmKnobs(
                    max_num_batched_tokens=k.max_num_batched_tokens,
                    max_num_seqs=min(k.max_num_seqs, k.max_num_batched_tokens),
                    long_prefill_token_threshold=k.long_prefill_token_threshold,
                    enable_prefix_caching=False,
                )
            )

    def notes(self) -> list[Note]:
        if self.v1 is not None:
            return [
                Note(
                    "chunked_partial_zero",
                    "chunked with max_num_partial_prefills=0 is the "
                    "old spelling of vLLM V1's packing: use --policy vllm (prefix caching is "
                    "off here, on in vllm)",
                )
            ]
        return []

    def reject_reason(self, req, engine):
        if self.v1 is not None:
            return self.v1.reject_reason(req, engine)
        return super().reject_reason(req, engine)

    def schedule(self, engine, plan, now):
        if self.v1 is not None:
            return self.v1.schedule(engine, plan, now)
        return super().schedule(engine, plan, now)
