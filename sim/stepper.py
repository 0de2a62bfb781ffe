"""Run one engine step by step with no clock: which request gets how many tokens in each step.

Notable features
- `run_steps(arrivals, config, kv_blocks)` drives one `Engine` (the same policy objects as every
  run) the way vLLM's own scheduler tests drive theirs: before step k every request arriving at
  step k is added, then `schedule()` forms the step and `complete()` applies it. Time plays no
  part, so the result is the scheduler's decisions alone.
- This is PD Lab's side of the differential tests against the real vLLM schedulers
  (tests/test_vllm_differential.py): both sides get the same requests at the same step indices
  and must produce the same tokens per request in every step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sim.config import SimConfig
from sim.core.engine import Engine
from sim.core.kv import KVCache
from sim.core.prefix_cache import PrefixCachingKV
from sim.core.recorder import TraceRecorder
from sim.core.request import Request, RequestSpec, RequestState
from sim.core.step import StepTiming
from sim.cost.hardware import get_gpu
from sim.policies import make_policy


@dataclass
class Step:
    """One step's decisions: request id -> tokens computed (and what the cache supplied)."""

    scheduled: dict[int, int] = field(default_factory=dict)
    cached: dict[int, int] = field(default_factory=dict)  # cache hits of requests admitted now
    preempted: list[int] = field(default_factory=list)
    finished: list[int] = field(default_factory=list)
    # Speculative decoding: request id -> (draft tokens scheduled, of them padding, accepted),
    # and every unfinished scheduled request's computed tokens after the step (rollback shown).
    spec: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    computed: dict[int, int] = field(default_factory=dict)


def run_steps(
    arrivals: Sequence[tuple[int, RequestSpec]],
    config: SimConfig,
    kv_blocks: int,
    max_steps: int = 20_000,
    swap_blocks: int = 0,
) -> tuple[list[Step], dict[int, int]]:
    """Steps until every request finished (or was rejected), and each request's output tokens.

    `arrivals` = (step index, request) pairs; `kv_blocks` = KV blocks of the worker, as vLLM's
    `num_gpu_blocks` (the policy's `null_blocks` among them are not usable); `swap_blocks` =
    host blocks for preemption by swapping (vLLM's `num_cpu_blocks`).
    """
    gpu = get_gpu(config.hardware.gpu)
    policy = make_policy(config.policy, config.knobs.for_gpu(gpu.name, gpu.mem_gb))
    block = config.engine.block_size
    tokens = policy.usable_kv_tokens(kv_blocks * block, block)
    kv = (PrefixCachingKV if policy.prefix_caching else KVCache)(tokens, block)
    engine = Engine(
        "I0",
        policy,
        kv,
        TraceRecorder(),
        config.engine.preemption_mode,
        swap_blocks * block,
    )
    pending = sorted(arrivals, key=lambda a: a[0])
    requests: list[Request] = []
    steps: list[Step] = []
    timing = StepTiming(1.0)
    for k in range(max_steps):
        while pending and pending[0][0] <= k:
            req = Request(pending.pop(0)[1])
            requests.append(req)
            engine.add_request(req, float(k))
        if not pending and all(
            r.state in (RequestState.FINISHED, RequestState.REJECTED) for r in requests
        ):
            break
        before = {r.request_id: r.preemptions for r in requests}
        batch = engine.schedule(float(k))
        step = Step()
        steps.append(step)
        preempted = [r.request_id for r in requests if r.preemptions > before[r.request_id]]
        step.preempted = preempted
        if batch is None:
            continue
        accepted_before = {}
        for req, n, _offset, _decode in batch.items:
            step.scheduled[req.request_id] = n
            if req.pending_cached:
                step.cached[req.request_id] = req.pending_cached
            accepted_before[req] = req.spec_accepted
        engine.complete(batch, float(k), float(k + 1), timing)
        step.finished = [r.request_id for r, *_ in batch.items if r.finish_s == k + 1]
        for req, drafts in batch.spec.items():
            padding = drafts if req in batch.padded else 0
            step.spec[req.request_id] = (
                drafts,
                padding,
                req.spec_accepted - accepted_before[req],
            )
        if engine.speculator is not None:
            step.computed = {
                r.request_id: r.num_computed for r, *_ in batch.items if not r.is_finished
            }
    return steps, {r.request_id: r.num_generated for r in requests}
