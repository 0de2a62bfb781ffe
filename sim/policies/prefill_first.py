"""Continuous batching, prefill-first: vLLM V0's default scheduler (no chunking) and TGI (C5, C9).

Each step is EITHER a prefill step or a decode step:
1. If waiting prompts fit (token budget, `max_num_seqs`, KV blocks for the whole prompt), admit as
   many as fit, FCFS, and run a prefill-only step. Every running decode STALLS for that step.
2. Otherwise run one decode token for every running request (preempting the last admitted
   request when KV runs out).

So a new request gets its first token as soon as possible (best TTFT), but while someone's long
prompt is prefilled every stream freezes: the step lasts as long as the whole prefill.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies import register
from sim.policies.base import Knobs, Policy


@dataclass(frozen=True)
class PrefillFirstKnobs(Knobs):
    # Prompt tokens one prefill step may hold. V0 without chunking sets it to max_model_len
    # (131072 for Llama-3.1), so any prompt fits; a smaller value caps how many prompts batch.
    max_num_batched_tokens: int = 131072
    max_num_seqs: int = 256  # running requests at most

    def __post_init__(self) -> None:
        self.check_positive("max_num_batched_tokens", "max_num_seqs")


@register
class PrefillFirst(Policy):
    """Prefill whenever a prompt fits; decode otherwise."""

    name = "prefill-first"
    Knobs = PrefillFirstKnobs
    mirrors = "vLLM V0 default scheduler (chunked prefill off); TGI"

    def reject_reason(self, req, engine):
        if req.prompt_tokens > self.knobs.max_num_batched_tokens:
            return (
                f"prompt of {req.prompt_tokens} tokens exceeds max_num_batched_tokens "
                f"({self.knobs.max_num_batched_tokens}) and this policy cannot chunk it"
            )
        return ""

    def schedule(self, engine, plan, now):
        k = self.knobs
        if not engine.swapped:  # V0 schedules no new prefill while anything is swapped out
            while engine.waiting and len(engine.running) < k.max_num_seqs:
                req = engine.waiting[0]
                need = req.schedulable
                # A recompute longer than the budget may still run alone, or it would never run.
                if plan.items and plan.num_tokens + need > k.max_num_batched_tokens:
                    break
                if not engine.allocate(req, need):
                    break  # head-of-line: the first prompt that does not fit stops admission
                engine.admit(req)
                plan.add(req, need)
            if plan.items:
                return  # a prefill-only step: running decodes stall
        for req in list(engine.running):
            if req.state.value != "running":
                continue  # preempted earlier in this loop
            if engine.allocate_or_preempt(req, 1, plan):
                plan.add(req, req.schedulable)
