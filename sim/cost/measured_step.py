"""The measured parts of a step, as StepCostModel uses them: a deployment's KernelTimes
(sim/cost/kernel_tables.py) times the profile's kernel_scale, remembered by size.

Notable features
- A run repeats step sizes (the same batch of decodes, the same chunk budget) tens of thousands
  of times; interpolating a table costs microseconds, a dict lookup much less. Every priced part
  keeps the seconds it gave per size.
- Each part is None where no table priced it: StepCostModel's roofline takes that operator.
- Duck-typed on purpose: anything with the KernelTimes attributes will do (tests pass stand-ins
  with only some of them).
"""

from __future__ import annotations

from collections.abc import Callable


def _remembered(fn: Callable[[float], float] | None, scale: float):
    """fn(x) * scale, remembered per x; None stays None."""
    if fn is None:
        return None
    memo: dict[float, float] = {}

    def priced(x: float) -> float:
        seconds = memo.get(x)
        if seconds is None:
            seconds = memo[x] = float(fn(x)) * scale
        return seconds

    return priced


class MeasuredStep:
    """Measured seconds of a step's operators on one rank, kernel_scale applied."""

    __slots__ = (
        "kernels",
        "linear",
        "moe",
        "allreduce",
        "decode_intercept",
        "decode_per_token",
        "prefill_attention",
    )

    def __init__(self, kernels, scale: float = 1.0) -> None:
        self.kernels = kernels
        part = lambda name: getattr(kernels, name, None)  # noqa: E731
        self.linear = _remembered(part("linear"), scale)  # tokens -> s
        self.moe = _remembered(part("moe"), scale)  # tokens entering the MoE layers -> s
        self.allreduce = _remembered(part("allreduce"), scale)  # tokens -> s
        prefill = part("prefill_attention")  # (tokens, offset) -> s of one chunk's attention
        self.prefill_attention = prefill and (lambda c, s: prefill(c, s) * scale)
        decode = part("decode_attention")
        self.decode_intercept = decode and _remembered(decode.intercept, scale)  # batch -> s
        self.decode_per_token = decode.per_token * scale if decode else None  # s / KV token
