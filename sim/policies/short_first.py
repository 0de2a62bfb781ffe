"""Short prompts first: vLLM V1 with priority scheduling, priority = prompt length (C10a).

Everything of `vllm` (it takes the same knobs), but run as vLLM's `--scheduling-policy priority`
with each request's priority set to its prompt length: the waiting queue is ordered shortest
first (vllm/v1/core/sched/request_queue.py, `PriorityRequestQueue`: a heap by (priority,
arrival)), and when KV runs out the running request with the longest prompt is preempted
(scheduler.py line 930: `max(running, key=(priority, arrival_time))`). A long prompt waits while
shorter work waits.

What it cannot fix (C7): a long prompt that is ALREADY prefilling keeps its place in the running
list, which comes first in every step. And under steady load of short prompts a long one may wait
forever (starvation). `aging_s` is PD Lab's own addition, not vLLM's: a request that has waited
`aging_s` seconds goes to the front (FCFS among the aged). 0 = no aging.
With aging off the step sequence is checked against the real V1 scheduler (priority scheduling,
priority = prompt length) in tests/test_vllm_differential.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from sim.policies import register
from sim.policies.vllm_v1 import Vllm, VllmEngineKnobs


@dataclass(frozen=True)
class ShortFirstKnobs(VllmEngineKnobs):
    aging_s: float = 0.0  # seconds of waiting after which a prompt jumps the queue (0 = never)

    MEANINGS: ClassVar[Mapping[str, str]] = {
        **VllmEngineKnobs.MEANINGS,
        "aging_s": "seconds of waiting after which a prompt jumps the queue",
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.aging_s >= 0:
            raise ValueError(f"aging_s must be >= 0 seconds, got {self.aging_s}")


@register
class ShortFirst(Vllm):
    """Waiting prompts by length (shortest first), with optional aging against starvation."""

    name = "short-first"
    Knobs = ShortFirstKnobs
    mirrors = (
        "vLLM V1 (vllm 0.33.0) --scheduling-policy priority with priority = prompt "
        "length; aging is PD Lab's own"
    )

    @property
    def by_priority(self) -> bool:
        return True

    def next_waiting(self, waiting, now):
        aging = self.knobs.aging_s

        def key(r):
            aged = aging > 0 and now - r.arrival_s >= aging
            rank = (0, r.arrival_s, 0) if aged else (1, r.prompt_tokens, r.arrival_s)
            return (not r.kv_holding, *rank, r.request_id)

        return min(waiting, key=key)

    def pick_victim(self, running):
        return max(running, key=lambda r: (r.prompt_tokens, r.arrival_s, r.request_id))
