"""The measured parts of a step, as StepCostModel uses them: a deployment's KernelTimes
(sim/cost/kernel_tables.py) with the profile's kernel_scale applied, remembered by size.

Notable features
- kernel_scale stretches the COMPUTE a kernel does, not its floor. The tables time each kernel
  alone, at the clocks a short burst gets; a server that prefills back to back runs its tensor
  cores under sustained power, at lower clocks, while a decode step streams weights at the
  bandwidth the tables saw. So:
  - prefill attention (all compute): measured x kernel_scale;
  - linear layers, the lm_head and routed experts: their 1-token time (reading the weights) as
    measured, the rest x kernel_scale: t(1) + kernel_scale x (t(T) - t(1));
  - decode attention and all-reduces (bandwidth and latency): as measured.
  kernel_scale is fitted with the per-step overheads on each GPU's fit runs only
  (bench/fit_profiles.py --step-costs kernels; sim/cost/profiles.py FITTED_KERNELS).
- A run repeats step sizes (the same batch of decodes, the same chunk budget) tens of thousands
  of times; interpolating a table costs microseconds, a dict lookup much less. Every priced part
  keeps the seconds it gave per size.
- Each part is None where no table priced it: StepCostModel's roofline takes that operator.
- Duck-typed on purpose: anything with the KernelTimes attributes will do (tests pass stand-ins
  with only some of them).
"""

from __future__ import annotations

from collections.abc import Callable


def _remembered(fn: Callable[[float], float] | None, scale: float = 1.0, floor: bool = False):
    """fn(x) remembered per x, None staying None. `scale` stretches all of it, or with `floor`
    only what exceeds fn(1): fn(1) + scale x (fn(x) - fn(1)) (never below fn(x) for scale >= 1).
    """
    if fn is None:
        return None
    memo: dict[float, float] = {}
    base = float(fn(1)) if floor and scale != 1.0 else 0.0

    def priced(x: float) -> float:
        seconds = memo.get(x)
        if seconds is None:
            raw = float(fn(x))
            if floor:
                seconds = raw if scale == 1.0 else base + scale * max(0.0, raw - base)
            else:
                seconds = raw * scale
            memo[x] = seconds
        return seconds

    return priced


class MeasuredStep:
    """Measured seconds of a step's operators on one rank, kernel_scale applied."""

    __slots__ = (
        "kernels",
        "linear",
        "lm_head",
        "moe",
        "allreduce",
        "decode_intercept",
        "decode_per_token",
        "prefill_attention",
    )

    def __init__(self, kernels, scale: float = 1.0) -> None:
        self.kernels = kernels
        part = lambda name: getattr(kernels, name, None)  # noqa: E731
        self.linear = _remembered(part("linear"), scale, floor=True)  # tokens -> s
        self.lm_head = _remembered(part("lm_head"), scale, floor=True)  # sampled positions -> s
        self.moe = _remembered(part("moe"), scale, floor=True)  # tokens into the experts -> s
        self.allreduce = _remembered(part("allreduce"))  # tokens -> s
        prefill = part("prefill_attention")  # (tokens, offset) -> s of one chunk's attention
        self.prefill_attention = prefill and (lambda c, s: prefill(c, s) * scale)
        decode = part("decode_attention")
        self.decode_intercept = decode and _remembered(decode.intercept)  # batch -> s
        self.decode_per_token = decode.per_token if decode else None  # s / KV token
