"""The measured clock: the simulator's cluster, but every step RUNS on a real model.

Notable features
- `MeasuredClock` plugs into `sim.cluster.topologies.Cluster` in place of the roofline cost model.
  The same engines, the same policy objects, the same routing and P->D hand-offs decide every
  batch; here each batch is executed by a torch model (`live.engine.runner.ModelRunner`) and its
  measured wall time becomes the step's duration on that worker's timeline.
- What is measured and what is composed: each step's duration and each KV copy are measured;
  the timeline is composed from them in simpy's virtual time. Arrivals follow the workload's
  clock, so idle gaps and queueing are real in that composed time. With several workers on one
  device every step still runs alone (one CPU thread, or the one GPU); each worker's steps are
  placed on its own clock, as if each worker had its own share of the device.
- Every step is recorded (batch shape + seconds) for calibrating the simulator
  (live/engine/calibrate.py). A speculative verify is a chunk whose `samples` is its token count
  (every position goes to the lm_head), priced so by the calibrated cost model.
- Speculative decoding: the engine's speculator (sim's seeded draws) is replaced by the live
  one (`speculate`): n-gram lookups and greedy verifies really run on the worker's model.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.cluster.worker import Worker
from sim.core.request import Request, RequestState
from sim.core.step import Batch, StepTiming
from sim.cost.roofline import StepCostModel


class MeasuredClock:
    """step_timing = run the batch on the worker's model runner and time it."""

    name = "measured"

    def __init__(
        self,
        make_runner: Callable[[str], object],
        prompt_ids: dict[int, list[int]],
        shares: StepCostModel | None = None,
    ) -> None:
        self.make_runner = make_runner  # worker name -> a fresh ModelRunner (its own KV store)
        self.prompt_ids = prompt_ids  # request id -> prompt token ids
        self.shares = shares  # splits a measured step into compute/bandwidth shares (optional)
        self.runners: dict[str, object] = {}
        # (worker, prefill_chunks, num_decodes, decode_context_tokens, seconds), step by step
        self.samples: list[tuple] = []
        self.transfers: list[tuple[int, int, float]] = []  # (request, tokens, seconds)
        self.on_step: Callable[[str, int], None] | None = None  # progress: (worker, steps done)

    def runner(self, worker_name: str):
        if worker_name not in self.runners:
            self.runners[worker_name] = self.make_runner(worker_name)
        return self.runners[worker_name]

    def step_timing(self, worker: Worker, batch: Batch) -> StepTiming:
        runner = self.runner(worker.name)
        if worker.engine.speculator is not runner.speculator:  # (first step: install it)
            self.speculate(worker, runner)
        for req, _n, _offset, _decode in batch.items:
            if req.request_id not in runner._tokens:  # first step of this request here
                runner.add_prompt(req.request_id, self.prompt_ids[req.request_id])
        _sampled, seconds = runner.execute(batch)
        self.samples.append(
            (
                worker.name,
                tuple(batch.prefill_chunks),
                batch.num_decodes,
                batch.decode_context_tokens,
                seconds,
            )
        )
        if self.on_step is not None:
            self.on_step(worker.name, len(self.samples))
        compute_s = memory_s = 0.0
        if self.shares is not None:  # attribute the measured time as the calibrated model would
            c = self.shares.step_cost(
                batch.prefill_chunks, batch.num_decodes, batch.decode_context_tokens
            )
            busy = max(c.seconds - c.overhead_s, 1e-12)
            compute_s = (
                (seconds - c.overhead_s) * c.compute_s / busy if seconds > c.overhead_s else 0
            )
            memory_s = (seconds - c.overhead_s) * c.memory_s / busy if seconds > c.overhead_s else 0
        return StepTiming(seconds, compute_s, memory_s, seconds - compute_s - memory_s)

    @staticmethod
    def speculate(worker: Worker, runner) -> None:
        """Speculative decoding on the model: the engine's drawn speculator (sim) gives way to
        real n-gram lookups and greedy verifies on this worker's runner
        (live/engine/speculation.py), before the worker's first step settles."""
        from live.engine.speculation import live_speculator

        spec = live_speculator(worker.engine.policy.knobs, runner.kv.max_len)
        runner.speculator = worker.engine.speculator = spec

    def transfer_s(self, req: Request, p: Worker, d: Worker, model, topology) -> float:
        """Really copy the prompt's KV from the P worker's store into the D worker's, timed."""
        from live.engine.runner import copy_kv

        seconds = copy_kv(req.request_id, self.runner(p.name), self.runner(d.name))
        self.transfers.append((req.request_id, req.prompt_tokens, seconds))
        return seconds

    def after_step(self, worker: Worker, batch: Batch) -> None:
        """Free the KV slots of requests that just finished."""
        runner = self.runner(worker.name)
        for req, _n, _offset, _decode in batch.items:
            if req.state is RequestState.FINISHED:
                runner.release(req.request_id)
