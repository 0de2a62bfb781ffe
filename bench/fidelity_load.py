"""Could a server without a prefix cache have produced this measurement? Measured kernels say.

Notable features
- `kernel_load(run)`: the share of each second that a run's MEASURED prompt throughput needs on
  its GPUs for the prompts alone, priced by the measured kernel tables (aiconfigurator-core,
  the run's engine and release: sim/cost/kernel_data.py) at their own speed: kernel_scale 1,
  no per-step or per-request overhead, prompts packed into steps of PACK_TOKENS, the most a
  default vLLM step takes on these GPUs (a bigger step gains little: the GEMMs are GPU-filling
  long before). Every decode step, the sampler and the scheduler's CPU time come on top.
- Above 1 the measured server did less work than prefilling every prompt: prefix-cache hits
  the source does not state (aiperf draws its prompts from 100 synthetic ones, and both
  engines cache prefixes by default: fidelity_closed_loop.AIPERF_PROMPTS), or lengths other than
  the stated ones. No replay that prefills every prompt can match such a run, so the report
  counts them apart (`INFEASIBLE`) and names them, beside its figures over every run.
- `step_load(run)` adds the decode steps (`decode_load`): a closed loop's server ran 1 / TPOT
  steps a second, and each one not carrying prompts read the weights and the decoding
  requests' KV at least once. Above STEP_INFEASIBLE (1.3: the fit runs reach 1.05) the
  measured TPOT is shorter than the measured kernels can step: cache hits again, or several
  tokens a step (speculative decoding), which no source states.
- It refines `fidelity_replay.prompt_load` (the same throughput over the GPUs' datasheet peak,
  for linear layers only) with what the kernels really reach at the prompt's shape, attention
  included. NaN where no table covers the GPU (the roofline would only restate its own MFU).

Run: imported by bench_fidelity_real.py.
"""

from __future__ import annotations

import dataclasses
import math

from fidelity_runs import PublicRun

from sim.cost.hardware import get_gpu, get_model
from sim.cost.kernel_data import Tables
from sim.cost.kernel_tables import kernel_times
from sim.cost.profiles import fitted_profile
from sim.cost.roofline import StepCostModel
from sim.policies import get_policy_class

# vLLM's default token budget per step on GPUs of 70 GiB or more under `vllm serve`
# (vllm/engine/arg_utils.py, EngineArgs default_max_num_batched_tokens, OPENAI_API_SERVER).
PACK_TOKENS = 8192
# kernel_load above this: the measured throughput is more than the kernels can prefill.
INFEASIBLE = 1.0
# step_load above this: more than the kernels can run. Not 1: isolated kernels add up to a bit
# more than a real step that replays them in one CUDA graph (kernel tails overlap, launches go);
# on the fit runs, whose TPOT the kernel profiles match within 3%, step_load reaches 1.05.
STEP_INFEASIBLE = 1.3


def bare_cost(
    gpu_name: str, model, tensor_parallel: int, tables: Tables, whole_experts: bool = False
) -> StepCostModel | None:
    """One deployment priced by the measured kernels at their own speed (kernel_scale 1, no
    per-step or per-request overhead); None where no table covers the GPU."""
    kernels = kernel_times(
        gpu_name, model, tensor_parallel, tables=tables, whole_experts=whole_experts
    )
    if kernels is None:
        return None
    profile, _ = fitted_profile(gpu_name, model.layers, kernels=True)
    bare = dataclasses.replace(profile, overhead_s=0.0, overhead_per_seq_s=0.0, kernel_scale=1.0)
    return StepCostModel(get_gpu(gpu_name), model, tensor_parallel, bare, kernels=kernels)


def _bare_cost(run: PublicRun) -> StepCostModel | None:
    """The run's deployment priced by `bare_cost`."""
    config = run.config({"step_costs": "kernels"})
    hw = config.hardware
    tables = Tables(get_policy_class(config.policy).kernel_engine, hw.kernel_version)
    return bare_cost(get_gpu(hw.gpu).name, get_model(hw.model), hw.tensor_parallel, tables)


def prompt_seconds(run: PublicRun, isl: int) -> float:
    """Seconds of measured kernels per prompt of `isl` tokens, packed PACK_TOKENS a step; NaN
    where no table covers the GPU."""
    cost = _bare_cost(run)
    if cost is None:
        return math.nan
    per_step = max(1, PACK_TOKENS // isl)
    chunks = tuple((isl, 0, True) for _ in range(per_step))
    return cost.step_cost(chunks, 0, 0).seconds / per_step


def decode_seconds(run: PublicRun, batch: int, context: int) -> float:
    """Seconds of measured kernels for one decode-only step of `batch` requests, each reading
    `context` cached tokens (the weights once, every request's KV); NaN without a table."""
    cost = _bare_cost(run)
    if cost is None:
        return math.nan
    return cost.step_cost((), batch, batch * context).seconds


def decode_load(run: PublicRun) -> float:
    """Seconds of measured decode-step kernels per second of a closed-loop run, on each GPU.

    Every decoding request takes one token a step (vLLM V1 and SGLang alike), so the server ran
    1 / TPOT steps a second. The fewest that could have carried the prompts (their tokens over
    PACK_TOKENS) are already priced by `prompt_seconds`, weights and all; each other step read
    the weights and the KV of the requests decoding (Little's law: clients x their share of a
    request's life spent decoding, each at a context of isl + osl / 2 on average), with no
    prefill to hide that read behind. A lower bound: the kernels at their own speed, nothing
    for the sampler, the scheduler or the launches. Speculative decoding (several tokens a
    step) would break it; no public run states it. NaN for traces and without a table."""
    m = run.measured_means
    if run.specs or not m:
        return math.nan
    isl, osl = run.mean_isl, run.mean_osl  # (the client's mean lengths)
    tpot, e2e = m["tpot_s"], m["ttft_s"] + (osl - 1) * m["tpot_s"]
    if not (tpot > 0 and e2e > 0):
        return math.nan
    rate = run.concurrency / e2e
    steps = max(0.0, 1.0 / tpot - rate * isl / PACK_TOKENS)
    decoding = max(1, int(run.concurrency * (osl - 1) * tpot / e2e))
    instances = int(run.settings.get("num_instances", 1))
    per_instance = max(1, decoding // instances)
    return steps * decode_seconds(run, per_instance, round(isl + osl / 2))


def kernel_load(run: PublicRun) -> float:
    """Seconds of measured prompt kernels per second of the run, on each of its GPUs (see the
    module's notes): above INFEASIBLE, no cache-free server could have measured it."""
    if run.specs:
        arrivals = [s.arrival_s for s in run.specs]
        ids = [s.request_id for s in run.specs]
        ends = [a + e for a, e in zip(arrivals, run.measured["e2e_s"].reindex(ids), strict=True)]
        span = max(e for e in ends if e == e) - min(arrivals)
        isl = round(sum(s.prompt_tokens for s in run.specs) / len(run.specs))
        rate = len(run.specs) / span if span > 0 else math.nan
    else:  # Little's law, as prompt_load: clients / mean E2E
        m = run.measured_means
        e2e = m["ttft_s"] + (run.mean_osl - 1) * m["tpot_s"]
        isl, rate = round(run.mean_isl), run.concurrency / e2e if e2e > 0 else math.nan
    instances = int(run.settings.get("num_instances", 1))
    return rate / instances * prompt_seconds(run, isl)


def step_load(run: PublicRun) -> float:
    """kernel_load plus decode_load: the prompts and every other step's reads, per second, on
    each GPU (NaN where either is unknown). Above STEP_INFEASIBLE no cache-free server without
    speculative decoding could have measured the run."""
    return kernel_load(run) + decode_load(run)


def infeasible(kernel: float, step: float) -> bool:
    """Could no cache-free server have measured a run with these loads? (NaN = unknown: no.)"""
    return bool(kernel > INFEASIBLE or step > STEP_INFEASIBLE)
