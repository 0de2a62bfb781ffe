"""What each policy promises event speed: when plain decode steps may be taken many at once.

A policy file mirrors a real scheduler line by line and knows nothing of event speed. Event
speed needs three answers about each policy, and each answer is a claim about that scheduler's
code. They live here, beside their reasons, so that a policy reads like the source it mirrors.

- `decode_horizon(policy, engine, now)`: until when the policy keeps scheduling PLAIN DECODE
  steps. Asked when every running request decodes and either nothing waits, or a step just
  scheduled was already plain decode while requests wait. The promise: as long as requests only
  decode (each step one more token of context each), free KV only shrinks and nothing arrives
  or finishes, every step STARTED before the returned time (seconds) gives every running request
  exactly one decode token and admits nobody; math.inf for no time limit. None promises
  nothing: the policy runs step by step, which is always correct. A policy this module does not
  name gets None.
- `kv_margin(policy)`: free KV blocks a run of decode steps must leave at every step (vLLM V0
  checks one free block before each decode, `can_append_slots`, even when it takes none).
- `admits_in_run(policy, engine)` and `admit_in_run(policy, engine, plan, now)`: whether, when
  every running request decodes and none needs a block it cannot get, the policy's next step is
  "each running request one decode token, then the waiting loop", and that waiting loop alone
  (sim/fastforward/admission.py). Only vLLM V1 with FCFS (its waiting loop is
  `Vllm.schedule_waiting`, the very function its `schedule` calls).

tests/test_fastforward.py holds every promise to account: each policy's traces at event speed
equal its traces step by step, bit for bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.core.engine import Engine
    from sim.core.step import StepPlan
    from sim.policies.base import Policy

Horizon = Callable[["Policy", "Engine", float], "float | None"]


def _vllm(policy, engine, now):
    """vLLM V1 (sim/policies/vllm_v1.py). The running loop gives every running request its one
    token unless the budget ends inside the running list. A waiting head that did not fit stays
    out: the queue order, the budget left and the seats are fixed, free blocks only shrink, and
    with the whole prompt reserved (scheduler_reserve_full_isl) losing cache hits never raises
    what it needs."""
    k = policy.knobs
    if len(engine.running) > k.max_num_batched_tokens:
        return None  # the budget ends inside the running list: some stall
    if engine.waiting and k.async_scheduling:
        return None  # a request left out only because it came during the last step joins next
    if engine.waiting and k.enable_prefix_caching and not k.scheduler_reserve_full_isl:
        # A waiting head that failed only for its chunk's blocks may fit once the decodes'
        # allocations evict its cached prefix (fewer hits, fewer blocks to adopt): no promise.
        return None
    return math.inf


AGING_MARGIN_S = 1e-6  # stop this much before a request ages: far above the rounding of
# `now - arrival_s`, far below a step


def _short_first(policy, engine, now):
    """vLLM V1 ordered by prompt length (sim/policies/short_first.py). A waiting request that
    ages jumps to the front, and a new head may fit: the promise ends a little before that."""
    horizon = _vllm(policy, engine, now)
    aging = policy.knobs.aging_s
    if horizon is None or not aging:
        return horizon
    for r in engine.waiting:
        if now - r.arrival_s < aging:
            horizon = min(horizon, r.arrival_s + aging - AGING_MARGIN_S)
    return horizon


def _vllm_v0(policy, engine, now):
    """vLLM V0 chunked prefill (sim/policies/vllm_v0.py). Every decode gets its token while the
    running list fits the budget and a slot's share is at least one token. A waiting prompt that
    did not fit stays out: the queue, the slots and the seats are fixed, and `can_allocate` only
    sees fewer free blocks. `chunked` with max_num_partial_prefills=0 runs vLLM V1."""
    if getattr(policy, "v1", None) is not None:
        return _vllm(policy.v1, engine, now)
    k = policy.knobs
    slots, _ = policy.schedulable_prefills(engine, k.long_threshold)
    slot_budget = k.max_num_batched_tokens // slots if slots else k.max_num_batched_tokens
    if len(engine.running) > k.max_num_batched_tokens or slot_budget < 1:
        return None  # some decodes would get no token
    return math.inf


def _prefill_first(policy, engine, now):
    """vLLM V0 without chunking (sim/policies/prefill_first.py). Every running request decodes
    unless a prompt is admitted; one that did not fit stays out (fixed queue and seats, fewer
    free blocks), and nothing is admitted while a request is swapped out."""
    return math.inf


def _static(policy, engine, now):
    """Static batching: nobody joins a batch that is still running."""
    return math.inf


def _sglang(policy, engine, now):
    """SGLang (sim/policies/sglang.py). A full batch forms no prefill batch until a request
    leaves it, unless the flag is about to be lost (get_next_batch_to_run: the running batch is
    empty, or the last prefill batch becomes the running batch). Otherwise its KV check reserves
    every running request's remaining output, which shrinks each step: a waiting request may fit
    a few steps later. No promise then."""
    lost = not engine.running or (policy._last_prefill_merged and not policy._running_before_merge)
    if policy.chunked is None and policy.batch_is_full and not lost:
        return math.inf
    if engine.waiting or policy.chunked is not None:
        return None
    return math.inf


HORIZONS: dict[str, Horizon] = {
    "vllm": _vllm,
    "short-first": _short_first,
    "vllm-v0": _vllm_v0,
    "chunked": _vllm_v0,
    "prefill-first": _prefill_first,
    "static": _static,
    "sglang": _sglang,
}
KV_MARGINS = {"vllm-v0": 1, "chunked": 1, "prefill-first": 1}  # V0's can_append_slots


def decode_horizon(policy: Policy, engine: Engine, now: float) -> float | None:
    """Until when `policy` schedules plain decode steps (see the module's docstring)."""
    horizon = HORIZONS.get(policy.name)
    return None if horizon is None else horizon(policy, engine, now)


def kv_margin(policy: Policy) -> int:
    """Free KV blocks a run of decode steps must leave at every step."""
    return KV_MARGINS.get(policy.name, 0)


def admits_in_run(policy: Policy, engine: Engine) -> bool:
    """Whether the step after a run is "one decode token each, then the waiting loop": vLLM V1
    with FCFS whose running list fits the budget (priority order is a heap, short-first ages),
    synchronous (async scheduling admits from the queue the step before saw)."""
    return (
        policy.name == "vllm"
        and not policy.by_priority
        and not policy.knobs.async_scheduling  # (its waiting loop sees the step before's queue)
        and len(engine.running) <= policy.knobs.max_num_batched_tokens
    )


def admit_in_run(policy: Policy, engine: Engine, plan: StepPlan, now: float) -> None:
    """vLLM V1's waiting loop alone, as `Vllm.schedule` runs it after the running loop (the
    running requests' decode tokens are in `plan.num_tokens` already)."""
    policy.schedule_waiting(engine, plan, now, policy.long_prefill_threshold(engine))
