"""What drafting adds to a step under speculative decoding (the verify itself is in step_cost).

vLLM's model runner drafts right after the target's forward pass, on the same GPU, for every
request that sampled in the step (vllm/v1/worker/gpu_model_runner.py, `propose_draft_token_ids`):
- n-gram (prompt lookup) searches the request's own tokens on the CPU: no GPU work, priced 0 s
  here (a simplification the lesson states; vLLM's NgramProposer is numba over the batch);
- a draft model runs k forward passes of its own, one per draft position: each is priced as a
  decode step of the DRAFT model's roofline over the same batch and contexts;
- EAGLE runs k passes of a one-layer head with the target's width that reads the target's hidden
  states: priced as a decode step of the target's shape with one layer.
Only the operators' time counts (the per-step host overhead is already in the target's step).
Where the target is priced from measured kernels (step_costs=kernels), so is the drafter: its own
shape's GEMMs and attention from the same GPU's tables (sim/cost/kernel_tables.py), the roofline
for what they do not hold.
"""

from __future__ import annotations

from dataclasses import replace

from sim.core.step import StepTiming
from sim.cost.hardware import get_model
from sim.cost.kernel_tables import kernel_times
from sim.cost.roofline import StepCostModel


class DraftCost:
    """Seconds a drafter adds to a step; `for_method` builds it (None for n-gram)."""

    def __init__(self, k: int, drafter: StepCostModel) -> None:
        self.k, self.drafter = k, drafter

    @classmethod
    def for_method(cls, method: str, k: int, target: StepCostModel, draft_model: str):
        if method == "draft":
            model = get_model(draft_model)
        elif method == "eagle":
            model = replace(target.model, name=f"{target.model.name} EAGLE head", layers=1)
        else:
            return None  # ngram: CPU lookup, no GPU pass
        tp = target.tensor_parallel
        kernels = None
        if target.kernels is not None:  # the drafter runs on the target's engine, its kernels
            kernels = kernel_times(target.gpu.name, model, tp, tables=target.kernels.tables)
        return cls(k, StepCostModel(target.gpu, model, tp, target.profile, kernels=kernels))

    def timing(self, batch) -> StepTiming:
        """k draft passes over the requests that sampled in `batch` (decodes, verifies and
        prompts' last chunks), each reading its context's KV in the drafter."""
        drafting = batch.num_decodes
        context = batch.decode_context_tokens
        for tokens, offset, samples in batch.prefill_chunks:
            if samples:
                drafting += 1
                context += offset + tokens
        if not drafting:
            return StepTiming(0.0)
        c = self.drafter.step_cost((), drafting, context)
        compute, memory, comm = self.k * c.compute_s, self.k * c.memory_s, self.k * c.comm_s
        return StepTiming(compute + memory + comm, compute, memory, 0.0, comm)
