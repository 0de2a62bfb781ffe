"""A clock simple enough to compute by hand: step = 10 ms + 1 ms per prefill token.

Decodes cost nothing beyond the fixed 10 ms, so every number in the policy tests can be worked
out on paper (see the comments there).
"""

from sim.core.step import StepTiming


class ToyClock:
    """step_cost() like sim.cost.roofline.StepCostModel, but linear: base_s + per_token_s *
    prefill."""

    def __init__(self, base_s: float = 0.010, per_prefill_token_s: float = 0.001) -> None:
        self.base_s = base_s
        self.per_token_s = per_prefill_token_s

    def step_cost(self, prefill_chunks, num_decodes, decode_context_tokens):
        prefill = sum(c[0] for c in prefill_chunks)
        # (the fields the simulated clock reads of a StepCost: seconds and the split)
        return StepTiming(self.base_s + self.per_token_s * prefill, overhead_s=self.base_s)
