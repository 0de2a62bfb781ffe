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

What vLLM does and this does not: speculative decoding, encoder inputs, LoRA limits, pipeline
parallelism and async scheduling (async_scheduling=False is the reference). The step sequence is
checked against the real scheduler in tests/test_vllm_differential.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from sim.core.request import RequestState
from sim.policies import base, register
from sim.policies.base import Knobs, Policy

GIB = 1024**3
MAX_MODEL_LEN = 131072  # Llama-3.1's context, the catalog models' max_model_len


def vllm_batch_defaults(gpu_name: str, mem_gb: float) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that `vllm serve` picks for a GPU.

    vllm/engine/arg_utils.py, `EngineArgs.get_batch_defaults` (OPENAI_API_SERVER column):
    >= 160 GiB (B200, B300): 16384 / 1024; >= 70 GiB and not an A100 (H100, H200): 8192 / 1024;
    otherwise (A100, L40S, RTX 4090, ...): 2048 / 256. (The offline `LLM` class uses larger
    budgets; PD Lab models a server.)
    """
    mem = mem_gb * 1e9
    if mem >= 160 * GIB:
        return 16384, 1024
    if mem >= 70 * GIB and "a100" not in gpu_name.lower():
        return 8192, 1024
    return 2048, 256


@dataclass(frozen=True)
class VllmEngineKnobs(Knobs):
    """vLLM V1's scheduler settings shared by `vllm` and `short-first` (vLLM's names)."""

    max_num_batched_tokens: int = 0  # token budget per step; 0 = vLLM's default for the GPU
    max_num_seqs: int = 0  # running requests at most; 0 = vLLM's default for the GPU
    long_prefill_token_threshold: int = 0  # cap on one request's tokens per step (0 = none)
    enable_chunked_prefill: bool = True  # False: a prompt that does not fit whole waits
    enable_prefix_caching: bool = True  # vLLM V1's default
    scheduler_reserve_full_isl: bool = True  # admit only if the whole prompt's KV fits

    MEANINGS: ClassVar[Mapping[str, str]] = {
        "max_num_batched_tokens": base.STEP_BUDGET,  # without chunking: see meaning()
        "max_num_seqs": base.MAX_SEQS,
        "long_prefill_token_threshold": "a cap on one request's prefill tokens per step",
        "enable_chunked_prefill": "chunked prefill on or off",
        "enable_prefix_caching": base.PREFIX_CACHING,
        "scheduler_reserve_full_isl": "admission reserving KV for the whole prompt",
    }

    @classmethod
    def meaning(cls, name, values):
        if name == "max_num_batched_tokens" and not values["enable_chunked_prefill"]:
            return base.WHOLE_PROMPT_BUDGET  # vLLM then needs it >= max_model_len
        return super().meaning(name, values)

    def __post_init__(self) -> None:
        for name in ("max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"{name} must be >= 0 (0 = vLLM's default), got {getattr(self, name)}"
                )
        if 0 < self.max_num_batched_tokens < self.max_num_seqs:
            # vllm/config/scheduler.py refuses it too.
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs})"
            )

    def for_gpu(self, gpu_name: str, mem_gb: float) -> VllmEngineKnobs:
        """These knobs with 0 ("vLLM's default") replaced by what vLLM picks on that GPU.

        vllm/engine/arg_utils.py `_set_default_max_num_seqs_and_batched_tokens_args`
        (3151-3240): without chunked prefill the default budget is at least max_model_len; a
        default max_num_seqs never exceeds the budget.
        """
        tokens, seqs = vllm_batch_defaults(gpu_name, mem_gb)
        if not self.max_num_batched_tokens and not self.enable_chunked_prefill:
            tokens = max(tokens, MAX_MODEL_LEN)
        budget = self.max_num_batched_tokens or tokens
        return replace(
            self,
            max_num_batched_tokens=budget,
            max_num_seqs=self.max_num_seqs or min(seqs, budget),
        )


@dataclass(frozen=True)
class VllmKnobs(VllmEngineKnobs):
    scheduling_policy: str = "fcfs"  # fcfs | priority (lower priority value first)

    MEANINGS: ClassVar[Mapping[str, str]] = {
        **VllmEngineKnobs.MEANINGS,
        "scheduling_policy": "vLLM's order of the waiting queue",
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scheduling_policy not in ("fcfs", "priority"):
            raise ValueError(
                f"scheduling_policy must be fcfs or priority, got {self.scheduling_policy!r}"
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

    def next_waiting(self, engine, now):
        """The request the waiting loop looks at next (the queue's head)."""
        if self.by_priority:
            return min(
                engine.waiting,
                key=lambda r: (not r.kv_holding, r.priority, r.arrival_s, r.request_id),
            )
        return engine.waiting[0]

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
        """
        max_num_scheduled_tokens = self.knobs.max_num_batched_tokens
        long_prefill_token_threshold = self.long_prefill_threshold(engine)

        # First, schedule the RUNNING requests (793-1040), in admission order.
        for request in list(engine.running):
            token_budget = max_num_scheduled_tokens - plan.num_tokens
            if token_budget <= 0:
                break  # budget gone: the rest of the running list stalls this step
            if request.state is not RequestState.RUNNING:
                continue  # preempted by an earlier request of this loop
            num_new_tokens = request.remaining  # num_tokens - num_computed_tokens: 1 to decode
            if 0 < long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = long_prefill_token_threshold
            num_new_tokens = min(num_new_tokens, token_budget)
            # allocate_slots, preempting until it fits (912-1000): the last running request
            # (FCFS) or the worst by (priority, arrival); False if it preempted itself.
            if not engine.allocate_or_preempt(request, num_new_tokens, plan):
                if self.by_priority:
                    continue  # it was the worst running request; better ones may still fit
                break  # FCFS: it preempted itself, nothing after it can run
            plan.add(request, num_new_tokens)

        # Next, schedule the WAITING requests, unless this step preempted someone (1049).
        if not plan.preempted:
            self.schedule_waiting(engine, plan, now, long_prefill_token_threshold)

    def schedule_waiting(self, engine, plan, now, long_prefill_token_threshold):
        """The WAITING loop (scheduler.py 1049-1560), after the running one preempted nobody."""
        k = self.knobs
        max_num_scheduled_tokens = k.max_num_batched_tokens
        kv, block_size = engine.kv, engine.kv.block_size
        while engine.waiting and plan.num_tokens < max_num_scheduled_tokens:
            if len(engine.running) >= k.max_num_seqs:
                break
            request = self.next_waiting(engine, now)
            # get_computed_blocks: the prompt's cached prefix (at most num_tokens - 1 tokens)
            new_computed_blocks = (
                kv.lookup(request) if k.enable_prefix_caching and request.num_computed == 0 else []
            )
            num_computed_tokens = request.num_computed + len(new_computed_blocks) * block_size
            num_new_tokens = request.num_tokens - num_computed_tokens
            if 0 < long_prefill_token_threshold < num_new_tokens:
                num_new_tokens = long_prefill_token_threshold
            token_budget = max_num_scheduled_tokens - plan.num_tokens
            if not k.enable_chunked_prefill and num_new_tokens > token_budget:
                break  # without chunking a prompt runs whole or waits (1338)
            num_new_tokens = min(num_new_tokens, token_budget)
            if not engine.admit_with_cache(
                request, num_new_tokens, new_computed_blocks, k.scheduler_reserve_full_isl
            ):
                break  # head of line: the first request whose blocks do not fit stops admission
            plan.add(request, num_new_tokens)
