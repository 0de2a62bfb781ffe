"""Static (request-level) batching, as in FasterTransformer before continuous batching (C4).

Fill a batch with up to `batch_size` waiting requests, prefill them together in one step, then
decode until the LONGEST of them finishes. Nobody joins mid-batch: a request that arrives during
the batch waits for the whole batch (worst TTFT), and a finished request's slot sits idle. In
return a running decode is never interrupted by someone else's prefill (best TPOT).

Each request reserves KV for its whole prompt + output at admission, so it is never preempted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from sim.policies import register
from sim.policies.base import Knobs, Policy


@dataclass(frozen=True)
class StaticKnobs(Knobs):
    batch_size: int = 8  # requests per batch

    MEANINGS: ClassVar[Mapping[str, str]] = {"batch_size": "requests per static batch"}

    def __post_init__(self) -> None:
        self.check_positive("batch_size")


@register
class StaticBatching(Policy):
    """Batch, prefill together, decode to the end; then the next batch."""

    name = "static"
    supports_swap = True  # it never preempts (all KV reserved up front): either mode is moot
    Knobs = StaticKnobs
    mirrors = "FasterTransformer-style static batching (no iteration-level scheduling)"

    def transfer_tokens(self, req):
        """On a decode worker, a handed-over request reserves its whole life up front too, so a
        transfer is accepted only if the request can then run to its end."""
        return req.prompt_tokens + req.output_tokens

    def schedule(self, engine, plan, now):
        if not engine.running:  # the previous batch is done: form a new one
            while engine.waiting and len(engine.running) < self.knobs.batch_size:
                req = engine.waiting[0]
                if not engine.reserve_total(req, req.prompt_tokens + req.output_tokens):
                    break  # memory full: the batch is as big as it gets
                engine.admit(req)
        for req in engine.running:  # first step: every prompt whole; then one token each
            plan.add(req, req.schedulable)
