"""Short prompts first: chunked prefill with a priority that penalises long prompts (C10a).

Everything of `chunked` (it takes all its knobs), but the waiting queue is ordered by prompt
length, shortest first: a long prompt waits while shorter work waits. Its own preemption victim
is the running request with the longest prompt.

What it cannot fix (C7): a long prompt that is ALREADY prefilling keeps its slot; running requests
come first in every step. And under steady load of short prompts a long one may wait forever
(starvation). `aging_s` fixes that: a request that has waited `aging_s` seconds goes to the front
(FCFS among the aged). 0 = no aging.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.policies import register
from sim.policies.chunked import Chunked, ChunkedKnobs


@dataclass(frozen=True)
class ShortFirstKnobs(ChunkedKnobs):
    aging_s: float = 0.0  # seconds of waiting after which a prompt jumps the queue (0 = never)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.aging_s >= 0:
            raise ValueError(f"aging_s must be >= 0 seconds, got {self.aging_s}")


@register
class ShortFirst(Chunked):
    """Waiting prompts by length (shortest first), with optional aging against starvation."""

    name = "short-first"
    Knobs = ShortFirstKnobs
    mirrors = "vLLM --scheduling-policy priority with priority = prompt length"

    def waiting_order(self, engine, now):
        aging = self.knobs.aging_s

        def key(r):
            aged = aging > 0 and now - r.arrival_s >= aging
            return (0, r.arrival_s, 0) if aged else (1, r.prompt_tokens, r.arrival_s)

        return iter(sorted(engine.waiting, key=key))

    def pick_victim(self, running):
        return max(running, key=lambda r: (r.prompt_tokens, r.arrival_s))
