"""Continuous batching, prefill-first: vLLM V0's default scheduler, chunked prefill off (C5, C9).

Mirrors `Scheduler._schedule_default` in vllm/core/scheduler.py (vllm 0.10.2 wheel, 1217-1343):
1. Unless a request is swapped out, admit waiting prompts WHOLE, in order, while their tokens
   fit `max_num_batched_tokens`, the running requests plus the new ones fit `max_num_seqs`, and
   the whole prompt's KV fits above the 1% watermark (`_schedule_prefills`, 1027-1214). If any
   was admitted the step is prefill-only: "Don't schedule decodes if prefills are scheduled"
   (line 1253), so every running stream STALLS for the whole prefill.
2. Otherwise every running request decodes one token (`_schedule_running`, 640-810); one whose
   KV cannot grow preempts the last request not yet walked (or itself).
TGI behaves alike (a prefill pauses the running batch). So a new request gets its first token as
soon as possible (best TTFT), and a long prompt freezes every stream for its whole prefill.
Without chunking V0 sets the budget to max_model_len (131072 for Llama-3.1), so any prompt fits;
a smaller value caps how many prompts one prefill step batches. One deviation: a request
preempted for recompute whose prompt + output outgrew the budget runs alone instead of being
dropped. Checked against the real V0 scheduler in tests/test_vllm_differential.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from sim.policies import register
from sim.policies.base import MAX_SEQS, WHOLE_PROMPT_BUDGET, Knobs, Policy
from sim.policies.vllm_v0 import can_allocate, never_fits_reason, run_decodes_v0, schedule_swapped


@dataclass(frozen=True)
class PrefillFirstKnobs(Knobs):
    # Prompt tokens one prefill step may hold: V0 without chunking sets max_model_len.
    max_num_batched_tokens: int = 131072
    max_num_seqs: int = 256  # running requests at most

    MEANINGS: ClassVar[Mapping[str, str]] = {
        "max_num_batched_tokens": WHOLE_PROMPT_BUDGET,
        "max_num_seqs": MAX_SEQS,
    }

    def __post_init__(self) -> None:
        self.check_positive("max_num_batched_tokens", "max_num_seqs")


@register
class PrefillFirst(Policy):
    """Prefill whenever a prompt fits; decode otherwise."""

    name = "prefill-first"
    supports_swap = True  # V0 could swap preempted KV to host memory
    schedules_swap_in = True  # `_schedule_swapped` after the decodes (below)
    Knobs = PrefillFirstKnobs
    mirrors = "vLLM V0 default scheduler, chunked prefill off (vllm 0.10.2); TGI alike"

    def reject_reason(self, req, engine):
        if req.prompt_tokens > self.knobs.max_num_batched_tokens:
            return (
                f"prompt of {req.prompt_tokens} tokens exceeds max_num_batched_tokens "
                f"({self.knobs.max_num_batched_tokens}) and this policy cannot chunk it"
            )
        return never_fits_reason(engine.kv, req)

    def schedule(self, engine, plan, now):
        k, kv = self.knobs, engine.kv
        # Disaggregated decode worker (not a V0 feature): a request whose prompt KV arrived
        # from a prefill worker needs one token, like a decode, so it joins the decode batch
        # rather than forcing a prefill-only step that would stall the streams (DistServe).
        while (
            engine.waiting
            and engine.waiting[0].kv_holding
            and engine.waiting[0].remaining == 1
            and len(engine.running) < k.max_num_seqs
        ):
            engine.admit(engine.waiting[0])
        if not engine.swapped:  # V0 schedules no new prefill while anything is swapped out
            num_seqs = len(engine.running)
            while engine.waiting and num_seqs < k.max_num_seqs:
                req = engine.waiting[0]
                need = req.remaining
                if plan.items and plan.num_tokens + need > k.max_num_batched_tokens:
                    break
                status = can_allocate(kv, req)
                if status == "never":  # it outgrew the cache (a recompute): V0 drops it
                    engine.reject(req, never_fits_reason(kv, req))
                    continue
                if status != "ok":
                    break  # head of line: the first prompt that does not fit stops admission
                kv.grow(req, req.num_tokens)
                engine.admit(req)
                plan.add(req, need)
                num_seqs += 1
            if plan.items:
                return  # a prefill-only step: running decodes stall
        run_decodes_v0(engine, plan, deque(engine.running), lambda req: req.remaining)
        # vllm/core/scheduler.py 1259-1266 (`_schedule_default`): swap in only if this step
        # preempted nothing; 1280-1282: the swapped-in decodes join the END of the running queue.
        if plan.preempted == 0 and engine.swapped:
            engine.running.extend(
                schedule_swapped(
                    engine, plan, len(engine.running), k.max_num_batched_tokens, k.max_num_seqs
                )
            )
