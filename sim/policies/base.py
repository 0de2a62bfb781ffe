"""What every scheduling policy is: knobs + one method that fills the next step.

A policy never knows what clock it runs under (simulated or measured). It reads the engine's
queues (`engine.waiting`, `engine.running`, free KV blocks) and calls the engine's mechanics
(`admit`, `allocate`, `allocate_or_preempt`) to put requests and token counts into a StepPlan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from sim.engine import Engine, StepPlan
    from sim.request import Request


@dataclass(frozen=True)
class Knobs:
    """Base of every policy's knobs. Subclasses are frozen dataclasses validated on creation."""

    def for_gpu(self, gpu_name: str, mem_gb: float) -> Knobs:
        """These knobs with any "engine default" (0) resolved for a GPU; most have none."""
        return self

    def check_positive(self, *names: str) -> None:
        for name in names:
            value = getattr(self, name)
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")


class Policy:
    """Base class. Subclasses set `name`, `Knobs`, and implement `schedule`."""

    name: ClassVar[str] = ""
    Knobs: ClassVar[type[Knobs]] = Knobs
    mirrors: ClassVar[str] = ""  # the real system whose behaviour this copies (shown in the UI)
    requeue_preempted_first: ClassVar[bool] = True  # vLLM: a preempted request waits at the front
    # Fast-forward (sim/fastforward.py): free KV blocks a run of decode steps must leave at every
    # step (vLLM V0 checks one free block before each decode even when it takes none).
    decode_kv_margin: ClassVar[int] = 0
    supports_swap: ClassVar[bool] = False  # preemption by swapping KV to host memory (vLLM V0)

    def __init__(self, knobs: Knobs | None = None) -> None:
        self.knobs = knobs if knobs is not None else self.Knobs()

    @property
    def prefix_caching(self) -> bool:
        """Whether the engine keeps a prefix cache (sim/prefix_cache.py) for this policy."""
        return bool(getattr(self.knobs, "enable_prefix_caching", False))

    def schedule(self, engine: Engine, plan: StepPlan, now: float) -> None:
        """Fill `plan` with the next step's work (may admit and preempt through `engine`)."""
        raise NotImplementedError

    def transfer_tokens(self, req: Request) -> int:
        """KV tokens a decode worker reserves for a prompt handed over to it (its prompt)."""
        return req.prompt_tokens

    def notes(self) -> list[str]:
        """Remarks a user should see about this configuration (e.g. an old spelling)."""
        return []

    def decode_horizon(self, engine: Engine, now: float) -> float | None:
        """Until when this policy keeps scheduling PLAIN DECODE steps (sim/fastforward.py).

        Asked when every running request decodes and either nothing waits, or a step just
        scheduled was already plain decode while requests wait. Promise: as long as requests
        only decode (each step one more token of context each), free KV only shrinks and nothing
        arrives or finishes, every step STARTED before the returned time (seconds) gives every
        running request exactly one decode token and admits nobody; math.inf for no time limit.
        None (this default) promises nothing: such a policy runs step by step, always correct.
        """
        return None

    def pick_victim(self, running: list[Request]) -> Request:
        """Whom to preempt when memory runs out: by default the last admitted (vLLM FCFS)."""
        return running[-1]

    def reject_reason(self, req: Request, engine: Engine) -> str:
        """Why this policy can never serve `req` on `engine` ('' when it can)."""
        return ""
