"""What every scheduling policy is: knobs + one method that fills the next step.

A policy never knows what clock it runs under (simulated or measured). It reads the engine's
queues (`engine.waiting`, `engine.running`, free KV blocks) and calls the engine's mechanics
(`admit`, `allocate`, `allocate_or_preempt`) to put requests and token counts into a StepPlan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, NamedTuple

from sim.cost.hardware import ACTIVATION_RESERVE_GB

if TYPE_CHECKING:
    from sim.core.engine import Engine
    from sim.core.request import Request
    from sim.core.step import StepPlan
    from sim.cost.specs import ModelSpec


# What a knob means, shared by the engines whose knob of that name means the same thing. Knobs of
# one name but another meaning get another sentence (`Knobs.MEANINGS`).
STEP_BUDGET = "a step's token budget, prompts cut into chunks to fit"
WHOLE_PROMPT_BUDGET = "a step's token budget for whole prompts, at least the longest prompt"
MAX_SEQS = "the requests in one step at most"
PREFIX_CACHING = "prefix caching on or off"


@dataclass(frozen=True)
class Note:
    """A remark about a configuration (`Policy.notes`). The CLI prints `text` (English); the app
    shows catalog key `policy_note.<key>` in the page's language (ui/engine_notes.policy_note)."""

    key: str
    text: str

    def __str__(self) -> str:
        return self.text


class DroppedKnob(NamedTuple):
    """A knob `Knobs.carry_to` left behind: its value, and what it means on either side."""

    name: str
    value: object
    meaning: str | None  # under the old policy
    new_meaning: str | None  # under the new policy (None: it has no such knob)


@dataclass(frozen=True)
class Knobs:
    """Base of every policy's knobs. Subclasses are frozen dataclasses validated on creation.

    `MEANINGS` says what each knob means in its engine, in a few words. Moving a configuration
    to another policy (`carry_to`) keeps a knob only where both policies have it with the SAME
    meaning: a knob of the same name means something else in another engine (vLLM V1's
    long_prefill_token_threshold caps a request's tokens per step, V0's says which prompts are
    long; a chunking budget of 2048 would reject every longer prompt without chunking).
    """

    MEANINGS: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def meaning(cls, name: str, values: Mapping[str, object]) -> str | None:
        """What knob `name` means with these knob values (every field has one: a test checks)."""
        return cls.MEANINGS.get(name)

    def carry_to(self, cls: type[Knobs]) -> tuple[Knobs, list[DroppedKnob]]:
        """Knobs of class `cls` keeping the knobs chosen here (not this class's defaults) that
        `cls` has with the same meaning; the rest are `cls`'s defaults. Also the chosen knobs
        left behind, in declaration order."""
        mine = dataclasses.asdict(self)
        defaults = dataclasses.asdict(type(self)())
        chosen = {k: v for k, v in mine.items() if defaults[k] != v}
        theirs = {f.name for f in dataclasses.fields(cls)}
        target = {**dataclasses.asdict(cls()), **{k: v for k, v in chosen.items() if k in theirs}}
        kept, dropped = {}, []
        for name, value in chosen.items():
            old = type(self).meaning(name, mine)
            new = cls.meaning(name, target) if name in theirs else None
            if new == old:
                kept[name] = value
            else:
                dropped.append(DroppedKnob(name, value, old, new))
        return cls(**kept), dropped

    def for_gpu(self, gpu_name: str, mem_gb: float) -> Knobs:
        """These knobs with any "engine default" (0) resolved for a GPU; most have none."""
        return self

    def kv_reserve_gb(self, model: ModelSpec, tensor_parallel: int) -> float:
        """GB per GPU this engine keeps off its KV cache beside the weights, with these knobs
        (resolved by `for_gpu`): a generic 1 GB for activations, CUDA graphs and workspace,
        unless the engine sizes it itself (vLLM: its profile run). SGLang's share of memory
        for activations is already out of its mem_fraction_static."""
        return ACTIVATION_RESERVE_GB

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
    supports_swap: ClassVar[bool] = False  # preemption by swapping KV to host memory (vLLM V0)
    schedules_swap_in: ClassVar[bool] = False  # True: the policy swaps in (else the engine)
    null_blocks: ClassVar[int] = 0  # KV blocks the engine's block pool keeps for itself
    # Whose measured kernels price its steps under step_costs=kernels (aiconfigurator-core's
    # engine folder: sim/cost/kernel_data.ENGINES). Every engine without tables takes vLLM's.
    kernel_engine: ClassVar[str] = "vllm"

    def __init__(self, knobs: Knobs | None = None) -> None:
        self.knobs = knobs if knobs is not None else self.Knobs()

    @property
    def prefix_caching(self) -> bool:
        """Whether the engine keeps a prefix cache (sim/core/prefix_cache.py) for this policy."""
        return bool(getattr(self.knobs, "enable_prefix_caching", False))

    def usable_kv_tokens(self, capacity_tokens: int, block_size: int) -> int:
        """Tokens of a KV cache of `capacity_tokens` that requests can use: its whole blocks
        less the `null_blocks` the engine keeps for itself."""
        return (capacity_tokens // block_size - self.null_blocks) * block_size

    def schedule(self, engine: Engine, plan: StepPlan, now: float) -> None:
        """Fill `plan` with the next step's work (may admit and preempt through `engine`)."""
        raise NotImplementedError

    def transfer_tokens(self, req: Request) -> int:
        """KV tokens a decode worker reserves for a prompt handed over to it (its prompt)."""
        return req.prompt_tokens

    def notes(self) -> list[Note]:
        """Remarks a user should see about this configuration (e.g. an old spelling)."""
        return []

    def pick_victim(self, running: list[Request]) -> Request:
        """Whom to preempt when memory runs out: by default the last admitted (vLLM FCFS)."""
        return running[-1]

    def reject_reason(self, req: Request, engine: Engine) -> str:
        """Why this policy can never serve `req` on `engine` ('' when it can)."""
        return ""
