"""vLLM V1's scheduler, as of vllm 0.33.0: one token budget, running requests first (C5-C9).

Mirrors `Scheduler.schedule()` in vllm/v1/core/sched/scheduler.py (vllm 0.33.0 wheel):
- lines 753-763: `long_prefill_token_threshold` applies only when more than one request is
  running or waiting at the start of the step (PR #57951: a lone request takes the whole budget).
- lines 793-1040, the RUNNING loop, in list (= admission) order while budget is left: each
  request gets `num_tokens - num_computed` tokens (1 for a decode; a partial prefill its rest),
  capped by the threshold and by the budget left. If its KV blocks do not fit, the last request
  in the running list (FCFS, line 938) or the worst (priority, arrival) one (priority) is
  preempted by recompute and put back at the FRONT of the waiting queue (`_preempt_request`,
  1799-1843), until the blocks fit or the request preempted itself (FCFS: stop; priority: go on
  with the next one, 985-995).
- lines 1049-1560, the WAITING loop, only in a step that preempted nobody, while budget is left
  and fewer than `max_num_seqs` requests run: take the head of the queue (FCFS, or the heap of
  (priority, arrival)); look its prompt up in the prefix cache (`get_computed_blocks`, at most
  num_tokens - 1 tokens); schedule `num_tokens - cached` tokens capped by the threshold and the
  budget left (with chunked prefill off, a prompt that does not fit whole stops admission, 1338);
  allocate its blocks, checking that the WHOLE prompt fits (`scheduler_reserve_full_isl`, line
  1449; vllm/config/scheduler.py line 190, default True); the first request that does not fit
  stops admission.
So several prompts share a step (the leftover budget starts the next prompt as a partial chunk),
and a long prompt first in line takes the whole budget step after step: prefill-queue blocking
(C7). `long_prefill_token_threshold` below the budget is V1's fast lane.

Speculative decoding (`speculative=ngram|draft|eagle`): a running request's drafts are scheduled
with it (1 + drafts tokens, cut by the budget), KV slots are reserved `num_lookahead_tokens` past
them, a draft model takes one more input row per request (`draft_slots`), and a waiting request
with one token to go is padded to 1 + k (1308-1330). The engine rolls rejected drafts back
(sim/core/engine.py, `complete`); sim/core/speculation.py says who accepts what.

Async scheduling (`async_scheduling`, vLLM's --async-scheduling, on by default from 0.14):
EngineCore.step_with_batch_queue (vllm/v1/engine/core.py, 0.19.0 421-485) schedules step n+1
and hands it to the GPU while step n still runs (batch_queue_size 2), so the scheduler that
forms n+1 has seen only the requests that arrived before n started: one that arrives during a
busy step joins the step after next. On an idle server, or when that next step would be empty,
it goes at once. The knob delays admission that way and nothing else; the CPU work it hides
behind the GPU's is the step cost's business. Off by default: the differential tests drive the
real scheduler's synchronous loop, and a lesson's step shows the scheduler's own decision.

What vLLM does and this does not: encoder inputs, LoRA limits, pipeline parallelism, dynamic
speculation lengths, and async scheduling's placeholders for the tokens still on the GPU (0.19.0
scheduler.py 388-400 skips a request sure to end in step n when it forms n+1, so it is not
scheduled again there either). The step sequence is
checked against the real scheduler in tests/test_vllm_differential.py, with speculation in
tests/test_vllm_spec_differential.py.
"""

from __future__ import annotations

from sim.core.request import RequestState
from sim.policies import register
from sim.policies.base import Policy
from sim.policies.vllm_v1_knobs import (  # noqa: F401 (re-exported: their old home)
    MAX_MODEL_LEN,
    VllmEngineKnobs,
    VllmKnobs,
    vllm_batch_defaults,
)


@register
class Vllm(Policy):
    """vLLM V1: one budget, running requests first, then waiting ones while budget is left."""

    name = "vllm"
    Knobs = VllmKnobs
    mirrors = "vLLM V1 scheduler (vllm 0.33.0, vllm/v1/core/sched/scheduler.py)"
    # vllm/v1/core/block_pool.py:191 `self.null_block = self.free_block_queue.popleft()`: block 0
    # is a placeholder no request gets, so a cache of N blocks has N - 1 usable
    # (block_pool.py:929 `total_gpu_blocks = self.num_gpu_blocks - 1`).
    null_blocks = 1

    def __init__(self, knobs=None) -> None:
        super().__init__(knobs)
        self._seen: set[int] = set()  # request ids waiting when the last step was formed
        self._busy = False  # the last step ran something: the GPU was busy until now

    def reject_reason(self, req, engine):
        k = self.knobs
        if not k.enable_chunked_prefill and req.prompt_tokens > k.max_num_batched_tokens:
            # vLLM refuses such a config outright (max_num_batched_tokens < max_model_len).
            return (
                f"prompt of {req.prompt_tokens} tokens exceeds max_num_batched_tokens "
                f"({k.max_num_batched_tokens}) with enable_chunked_prefill=false"
            )
        return ""

    # ---- ordering hooks (short-first overrides them) ----

    @property
    def by_priority(self) -> bool:
        """vLLM's scheduling_policy=priority: a heap for waiting, the worst request preempted."""
        return self.knobs.scheduling_policy == "priority"

    def next_waiting(self, waiting, now):
        """The request the waiting loop looks at next among `waiting` (the queue's head)."""
        if self.by_priority:
            return min(
                waiting,
                key=lambda r: (not r.kv_holding, r.priority, r.arrival_s, r.request_id),
            )
        return waiting[0]

    def visible(self, engine) -> list | None:
        """Under async scheduling, the waiting requests the scheduler of this step had seen:
        those waiting when the last step was formed, if the GPU was busy with it and this step
        holds anything else (running requests, or requests seen before); None = all of them."""
        if not (self.knobs.async_scheduling and self._busy):
            return None
        seen = [r for r in engine.waiting if r.request_id in self._seen]
        return seen if engine.running or seen else None

    def pick_victim(self, running):
        if self.by_priority:
            return max(running, key=lambda r: (r.priority, r.arrival_s))  # first of equals
        return running[-1]

    # ---- the step ----

    def long_prefill_threshold(self, engine) -> int:
        """scheduler.py 753-763: the threshold applies only when more than one request is running
        or waiting at the start of the step (PR #57951: a lone request takes the whole budget)."""
        num_eligible_reqs = len(engine.running) + len(engine.waiting)
        return self.knobs.long_prefill_token_threshold if num_eligible_reqs > 1 else 0

    def schedule(self, engine, plan, now):
        """`Scheduler.schedule()`: the RUNNING loop, then the WAITING loop.

        vLLM counts `token_budget` down as it schedules and gives a preempted request's tokens
        back (scheduler.py 954); here `plan.num_tokens` counts up and `engine.preempt` takes a
        victim's tokens out of the plan, so the budget left is always max - plan.num_tokens.
        With speculation a draft model takes `draft_slots` more input rows per request
        (`input_budget`, 722/797/847/1003); drafts ride along as extra tokens (below).
        """
        k = self.knobs
        max_num_scheduled_tokens = k.max_num_batched_tokens
        long_prefill_token_threshold = self.long_prefill_threshold(engine)
        draft_slots, lookahead = k.draft_slots, k.num_lookahead_tokens
        prefill_scheduled = False  # 1003: a running request continued its prefill
        visible = self.visible(engine)  # (before the running loop preempts anyone)

        # First, schedule the RUNNING requests (793-1040), in admission order.
        for request in list(engine.running):
            token_budget = max_num_scheduled_tokens - plan.num_tokens
            if token_budget <= 0:
                break  # budget gone: the rest of the running list stalls this step
            input_budget = token_budget - draft_slots * len(plan.items)
            if input_budget <= draft_slots:
                break  # 797
            if request.state is not RequestState.RUNNING:
                continue  # preempted by an earlier request of this loop
            # num_tokens_with_spec - num_computed_tokens: 1 to decode, + its drafts to verify
            num_new_tokens = request.remaining + request.spec_drafts
            if 0 < long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = long_prefill_token_threshold
            num_new_tokens = min(num_new_tokens, token_budget, input_budget - draft_slots)
            # allocate_slots, preempting until it fits (912-1000): the last running request
            # (FCFS) or the worst by (priority, arrival); False if it preempted itself.
            if not engine.allocate_or_preempt(request, num_new_tokens, plan, lookahead):
                if self.by_priority:
                    continue  # it was the worst running request; better ones may still fit
                break  # FCFS: it preempted itself, nothing after it can run
            prefill_scheduled |= request.remaining > 1  # `request.is_prefill_chunk`
            plan.add(request, num_new_tokens)
            if request.spec_drafts:  # 1010-1025: the drafts that fit ride along
                num_scheduled_spec_tokens = num_new_tokens - request.remaining
                if num_scheduled_spec_tokens > 0:
                    plan.spec[request] = min(num_scheduled_spec_tokens, request.spec_drafts)
                request.spec_drafts = 0  # new ones come after this step

        # Next, schedule the WAITING requests, unless this step preempted someone (1049).
        if not plan.preempted:
            self.schedule_waiting(
                engine, plan, now, long_prefill_token_threshold, prefill_scheduled, visible
            )
        if k.async_scheduling:  # what the scheduler of the next step will have seen
            self._seen = {r.request_id for r in engine.waiting}
            self._busy = bool(plan.items)

    def schedule_waiting(
        self, engine, plan, now, long_prefill_token_threshold, prefill_scheduled=False, visible=None
    ):
        """The WAITING loop (scheduler.py 1049-1560), after the running one preempted nobody;
        `visible`: the waiting requests it may take (async scheduling), None = all."""
        k = self.knobs
        max_num_scheduled_tokens = k.max_num_batched_tokens
        draft_slots, num_spec_tokens = k.draft_slots, k.num_spec_tokens
        kv, block_size = engine.kv, engine.kv.block_size
        running_scheduled = bool(plan.items)  # `scheduled_running_reqs` (none are added here)
        while engine.waiting and plan.num_tokens < max_num_scheduled_tokens:
            token_budget = max_num_scheduled_tokens - plan.num_tokens
            input_budget = token_budget - draft_slots * len(plan.items)
            if input_budget <= draft_slots:
                break  # 1068
            if len(engine.running) >= k.max_num_seqs:
                break
            if visible is None:
                request = self.next_waiting(engine.waiting, now)
            else:  # async scheduling: only those its scheduler had seen
                visible = [r for r in visible if r.state is RequestState.WAITING]
                if not visible:
                    break
                request = self.next_waiting(visible, now)
            # get_computed_blocks: the prompt's cached prefix (at most num_tokens - 1 tokens)
            new_computed_blocks = (
                kv.lookup(request) if k.enable_prefix_caching and request.num_computed == 0 else []
            )
            num_computed_tokens = request.num_computed + len(new_computed_blocks) * block_size
            num_new_tokens = request.num_tokens - num_computed_tokens
            request_token_budget = min(token_budget, input_budget - draft_slots)  # 1295
            padded = False
            if (  # 1308-1330: one token to go is padded to 1 + k (a uniform decode batch)
                num_spec_tokens
                and not engine.hands_off  # (a prefill worker samples nothing of its own)
                and num_new_tokens == 1
                and not prefill_scheduled
                and (running_scheduled or num_computed_tokens > 0)
            ):
                if 1 + num_spec_tokens > request_token_budget:
                    break  # "Prefer to not schedule than schedule un-padded."
                num_new_tokens, padded = 1 + num_spec_tokens, True
            if 0 < long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = long_prefill_token_threshold
            if not k.enable_chunked_prefill and num_new_tokens > request_token_budget:
                break  # without chunking a prompt runs whole or waits (1338)
            num_new_tokens = min(num_new_tokens, request_token_budget)
            if not engine.admit_with_cache(
                request,
                num_new_tokens,
                new_computed_blocks,
                k.scheduler_reserve_full_isl,
                k.num_lookahead_tokens,
            ):
                break  # head of line: the first request whose blocks do not fit stops admission
            plan.add(request, num_new_tokens)
            if padded:  # 1578-1582: k placeholder drafts (-1), all rejected
                plan.spec[request] = num_spec_tokens
                plan.padded.add(request)
