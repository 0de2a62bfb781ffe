"""A step's three shapes, shared by every driver of the engine (sim/core/engine.py).

- `StepPlan`: what a policy has chosen so far for the step being formed (request -> tokens);
  the policy fills it (sim/policies/), the engine preempts out of it.
- `Batch`: the finished plan as a driver runs it: prefill chunks and decodes with their KV
  offsets, the shapes a cost model (sim/cost/) or a model runner (live/engine/runner.py) needs.
- `StepTiming`: how long the step took and how the cost model splits it (seconds), which
  `Engine.complete` writes into the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.core.request import Request


class StepPlan:
    """What a policy has chosen so far for the step being formed: request -> tokens."""

    __slots__ = (
        "items",
        "num_tokens",
        "preempted",
        "swap_in_tokens",
        "swap_out_tokens",
        "spec",
        "padded",
    )

    def __init__(self) -> None:
        self.items: dict[Request, int] = {}  # insertion-ordered; identity-hashed requests
        self.num_tokens = 0  # counts against max_num_batched_tokens
        self.preempted = 0
        self.swap_in_tokens = 0
        self.swap_out_tokens = 0
        # Speculative decoding: draft tokens scheduled per request (among its items' tokens),
        # and the requests whose drafts are only padding (vLLM's -1 placeholders).
        self.spec: dict[Request, int] = {}
        self.padded: set[Request] = set()

    def add(self, req: Request, tokens: int) -> None:
        self.items[req] = self.items.get(req, 0) + tokens
        self.num_tokens += tokens

    def remove(self, req: Request) -> None:
        self.num_tokens -= self.items.pop(req)
        self.spec.pop(req, None)  # scheduled_spec_decode_tokens.pop (scheduler.py 957)
        self.padded.discard(req)


@dataclass(slots=True)
class Batch:
    """One step's work, ready to execute. Shapes are what the cost model and a model runner need."""

    worker: str
    step: int
    # (request, tokens to compute, offset = tokens already in its KV, is_decode)
    items: list[tuple[Request, int, int, bool]]
    # (tokens, offset, samples): a prefill chunk; samples = its last position goes to the lm_head
    prefill_chunks: list[tuple[int, int, bool]]
    num_decodes: int
    decode_context_tokens: int  # sum of the decodes' context lengths (tokens of KV they read)
    swap_in_tokens: int = 0  # KV tokens copied host -> device before the step
    swap_out_tokens: int = 0  # KV tokens copied device -> host (preempted by swapping)
    preempted: int = 0
    stalled: list[Request] = field(default_factory=list)
    # Speculative decoding: draft tokens each verifying request's item carries (its item's
    # tokens = 1 + drafts, all sampled: a chunk whose `samples` is that count) and the requests
    # whose drafts are padding.
    spec: dict[Request, int] = field(default_factory=dict)
    padded: set[Request] = field(default_factory=set)

    @property
    def prefill_tokens(self) -> int:
        return sum(c[0] for c in self.prefill_chunks)


@dataclass(frozen=True, slots=True)
class StepTiming:
    """How long a step took and how the cost model splits it (seconds)."""

    seconds: float
    compute_s: float = 0.0
    memory_s: float = 0.0
    overhead_s: float = 0.0
    comm_s: float = 0.0
    swap_s: float = 0.0
