"""Chunked prefill with a shared token budget: vLLM's scheduler with chunking on (C6, C7, C8).

Every step has a budget of `max_num_batched_tokens` tokens, shared by decodes (1 token each) and
prefill chunks. Running requests come first (their decodes never stall while the budget lasts),
then waiting requests are admitted FCFS with what budget is left. Running decodes advance one
token per chunk, so a long prompt SLOWS streams instead of freezing them.

Two generations of vLLM, one knob (`max_num_partial_prefills`):
- >= 1: vLLM V0 chunked prefill. At most that many requests are partially prefilled at a time,
  and the budget is split evenly across those prefill slots. The default 1 means each step holds
  the prompt tokens of ONE request, so a long prompt blocks every prompt behind it: prefill-queue
  blocking (C7). With more slots, `max_long_partial_prefills` and
  `long_prefill_token_threshold` make a fast lane: at most that many prompts longer than the
  threshold prefill at once, and shorter prompts may pass a waiting long one (vLLM PR #10235, C8).
- 0: vLLM V1. No slot limit: prefills are packed until the budget is used up, and
  `long_prefill_token_threshold` (if > 0) caps the tokens one request gets per step.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sim.policies import register
from sim.policies.base import Knobs, Policy
from sim.request import Request, RequestState

# vLLM: with several partial prefills and no threshold, "long" = 4% of max_model_len.
AUTO_LONG_THRESHOLD = int(131072 * 0.04)


@dataclass(frozen=True)
class ChunkedKnobs(Knobs):
    max_num_batched_tokens: int = 2048  # token budget per step (vLLM V0's chunked default)
    max_num_seqs: int = 256  # running requests at most
    max_num_partial_prefills: int = 1  # prompts prefilled at once; 0 = no cap (vLLM V1)
    max_long_partial_prefills: int = 1  # of those, how many may be long
    long_prefill_token_threshold: int = 0  # tokens; a prompt above it is "long" (0 = auto/off)
    scheduling_policy: str = "fcfs"  # fcfs | priority (lower priority value first)

    def __post_init__(self) -> None:
        self.check_positive("max_num_batched_tokens", "max_num_seqs", "max_long_partial_prefills")
        if self.max_num_partial_prefills < 0:
            raise ValueError("max_num_partial_prefills must be >= 0 (0 = no cap, vLLM V1)")
        if self.long_prefill_token_threshold < 0:
            raise ValueError("long_prefill_token_threshold must be >= 0 (0 = auto)")
        if 0 < self.max_num_partial_prefills < self.max_long_partial_prefills:
            raise ValueError("max_long_partial_prefills must be <= max_num_partial_prefills")
        if self.scheduling_policy not in ("fcfs", "priority"):
            raise ValueError(
                f"scheduling_policy must be fcfs or priority, got {self.scheduling_policy!r}"
            )

    @property
    def is_v1(self) -> bool:
        return self.max_num_partial_prefills == 0

    @property
    def long_threshold(self) -> int:
        """Tokens above which a prompt counts as long (0: no prompt is long)."""
        if self.long_prefill_token_threshold == 0 and self.max_num_partial_prefills > 1:
            return AUTO_LONG_THRESHOLD
        return self.long_prefill_token_threshold


def _walk(waiting) -> Iterator[Request]:
    """Yield waiting requests in queue order while the caller admits some of them."""
    i = 0
    while i < len(waiting):
        req = waiting[i]
        yield req
        if i < len(waiting) and waiting[i] is req:
            i += 1  # skipped (still there); if admitted, the next one moved into slot i


@register
class Chunked(Policy):
    """Running first (decodes, then partial prefills), then admit waiting prompts in chunks."""

    name = "chunked"
    Knobs = ChunkedKnobs
    mirrors = "vLLM chunked prefill: V0 with partial-prefill slots (PR #10235), or V1 (slots 0)"

    # ---- ordering hooks (short-first overrides them) ----

    def waiting_order(self, engine, now: float) -> Iterator[Request]:
        if self.knobs.scheduling_policy == "priority":
            return iter(sorted(engine.waiting, key=lambda r: (r.priority, r.arrival_s)))
        return _walk(engine.waiting)

    def pick_victim(self, running):
        if self.knobs.scheduling_policy == "priority":
            return max(running, key=lambda r: (r.priority, r.arrival_s))
        return running[-1]

    # ---- the step ----

    def schedule(self, engine, plan, now):
        k = self.knobs
        budget, thr, v1 = k.max_num_batched_tokens, k.long_threshold, k.is_v1
        decodes, prefilling = [], []  # one pass over the running batch
        for r in engine.running:
            (decodes if r.is_decoding else prefilling).append(r)
        if v1:
            order = engine.running[:]  # admission order, as V1 walks self.running
            slot_budget = budget
        else:  # V0: decodes first, then partial prefills; budget split over prefill slots
            order = decodes + prefilling
            slots = len(prefilling) + self._startable(engine, now, prefilling, thr)
            slot_budget = budget // max(1, min(k.max_num_partial_prefills, slots))

        items, block = plan.items, engine.kv.block_size
        for req in order:
            if req.state is not RequestState.RUNNING:
                continue  # preempted by someone earlier in this loop
            left = budget - plan.num_tokens
            if left <= 0:
                break  # budget gone: the rest stall this step
            if req.is_decoding:
                if req.num_computed < req.blocks * block:  # room in its last KV block:
                    items[req] = 1  # the common case, inlined (= plan.add(req, 1))
                    plan.num_tokens += 1
                    continue
                n = 1
            else:
                n = min(req.schedulable, left, slot_budget)
                if v1 and thr:
                    n = min(n, thr)
            if not engine.allocate_or_preempt(req, n, plan):
                break  # it had to preempt itself: stop scheduling (vLLM)
            plan.add(req, n)

        if plan.preempted or engine.swapped or not engine.waiting:
            return  # vLLM admits nobody in a step that preempted (or while KV is swapped out)
        still = [r for r in prefilling if r.state is RequestState.RUNNING]
        num_prefills = len(still)
        num_long = sum(1 for r in still if r.schedulable > thr > 0)
        for req in self.waiting_order(engine, now):
            left = budget - plan.num_tokens
            if left <= 0 or len(engine.running) >= k.max_num_seqs:
                break
            if not v1 and num_prefills >= k.max_num_partial_prefills:
                break  # every prefill slot is taken: the queue waits (C7)
            is_long = bool(thr) and req.schedulable > thr
            if self._fast_lane(is_long, num_long):
                continue  # long prompt waits for the long slot; shorter ones may pass (C8)
            n = min(req.schedulable, left, slot_budget)
            if v1 and thr:
                n = min(n, thr)
            if not engine.allocate(req, n):
                break  # head-of-line: the first request that does not fit stops admission
            engine.admit(req)
            plan.add(req, n)
            num_prefills += 1
            num_long += is_long

    def _fast_lane(self, is_long: bool, num_long: int) -> bool:
        """True when a long waiting prompt must let shorter ones pass (V0 with several slots)."""
        k = self.knobs
        return (
            is_long and k.max_num_partial_prefills > 1 and num_long >= k.max_long_partial_prefills
        )

    def _startable(self, engine, now, prefilling, thr) -> int:
        """How many waiting prompts could start a prefill this step (to size V0's slots)."""
        free = self.knobs.max_num_partial_prefills - len(prefilling)
        num_long = sum(1 for r in prefilling if thr and r.schedulable > thr)
        count = 0
        for req in self.waiting_order(engine, now):
            if count >= free:
                break
            is_long = bool(thr) and req.schedulable > thr
            if self._fast_lane(is_long, num_long):
                continue
            count += 1
            num_long += is_long
        return max(0, count)
