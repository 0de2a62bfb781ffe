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

    def __init__(self, knobs: Knobs | None = None) -> None:
        self.knobs = knobs if knobs is not None else self.Knobs()

    def schedule(self, engine: Engine, plan: StepPlan, now: float) -> None:
        """Fill `plan` with the next step's work (may admit and preempt through `engine`)."""
        raise NotImplementedError

    def pick_victim(self, running: list[Request]) -> Request:
        """Whom to preempt when memory runs out: by default the last admitted (vLLM FCFS)."""
        return running[-1]

    def reject_reason(self, req: Request, engine: Engine) -> str:
        """Why this policy can never serve `req` on `engine` ('' when it can)."""
        return ""
