"""One serving instance in simpy: an Engine, its serving loop, and the clock that times its steps.

Notable features
- `Worker.instance_loop` is the loop every instance runs: ask the engine for a batch, time it
  (`SimulatedClock`: the roofline cost model; the live engine's clock runs it on a real model),
  let simpy time pass for that long, apply the result. At event speed (sim/fastforward/steps.py) it
  takes runs of decode-only steps at once, which `cut` stops early when another process is
  about to change the engine (an arrival, KV reserved or landed).
- `LockstepGroup` / `LockstepWorker`: vLLM's data parallel + expert parallel ranks, which step
  together (a rank with nothing to run executes a dummy batch).
- `sim/cluster/topologies.py` builds the workers of a topology and wires routing and KV hand-offs
  to them.
"""

from __future__ import annotations

import math
from collections import deque

import simpy

from sim.core.engine import Engine
from sim.core.request import Request
from sim.core.step import StepTiming
from sim.cost.hardware import kv_transfer_s
from sim.cost.roofline import StepCostModel
from sim.fastforward import extend, start_run


class SimulatedClock:
    """The simulator's clock: a step lasts what the roofline cost model says.

    The live engine swaps in a clock whose step_timing RUNS the batch on a real model and returns
    the measured time; everything else (engines, routing, KV hand-offs) stays the same.
    """

    name = "simulated"

    def step_timing(self, worker: Worker, batch) -> StepTiming:
        c = worker.cost.step_cost(
            batch.prefill_chunks, batch.num_decodes, batch.decode_context_tokens
        )
        swap_s = (batch.swap_in_tokens + batch.swap_out_tokens) * worker.swap_s_per_token
        if worker.draft is not None:  # speculative decoding: the drafter's passes after it
            d = worker.draft.timing(batch)
            return StepTiming(
                c.seconds + swap_s + d.seconds,
                c.compute_s + d.compute_s,
                c.memory_s + d.memory_s,
                c.overhead_s,
                c.comm_s + d.comm_s,
                swap_s,
            )
        return StepTiming(
            c.seconds + swap_s, c.compute_s, c.memory_s, c.overhead_s, c.comm_s, swap_s
        )

    def transfer_s(self, req: Request, p: Worker, d: Worker, model, topology) -> float:
        """KV of the prompt over the P worker's link: bytes / bandwidth + latency."""
        return kv_transfer_s(
            req.prompt_tokens, model, topology.kv_bandwidth_gb_s, topology.kv_latency_ms / 1000
        )

    def after_step(self, worker: Worker, batch) -> None:
        """Nothing to clean up in a simulation."""

    def decode_run(self, worker: Worker, steps: int) -> None:
        """A run of `steps` decode-only steps was just taken at once (sim/fastforward/steps.py). A
        clock that counts steps (a run budget) overrides this."""


def fast_forward_ok(clock) -> bool:
    """Whether runs of decode steps may be taken at once under `clock`: the cost model's clock,
    or one that overrides `decode_run` as well as `step_timing` (a clock that does something
    in every step, like the live one, must see every step)."""
    cls = type(clock)
    return isinstance(clock, SimulatedClock) and (
        cls.step_timing is SimulatedClock.step_timing
        or cls.decode_run is not SimulatedClock.decode_run
    )


def no_limit() -> float:
    """A worker's `limit_s` when nothing bounds its runs: no step is ever too late."""
    return math.inf


class Worker:
    """An Engine plus its simpy process, cost model and wake-up event."""

    def __init__(
        self,
        env: simpy.Environment,
        engine: Engine,
        role: str,
        cost,
        swap_s_per_token: float,
        gpus: int,
    ) -> None:
        self.env, self.engine, self.role, self.cost, self.gpus = env, engine, role, cost, gpus
        self.swap_s_per_token = swap_s_per_token  # host<->device copy time of one KV token
        self.on_handoff = None  # callback(worker, request) for finished prefills (P workers)
        self.on_step = None  # callback(worker) after each step
        self.inbox: deque[tuple[Request, Worker]] = deque()  # D: (request, its P) awaiting blocks
        self.gpu_name = ""
        self.draft = None  # speculative decoding: sim.cost.draft_cost.DraftCost (None: free/off)
        self.clock: SimulatedClock = SimulatedClock()  # the Cluster sets the run's clock
        # Event speed (sim/fastforward/steps.py): runs of decode steps taken at once, unless the
        # Cluster
        # asks for step by step. `limit_s()`: no step of a run may start at or after it.
        self.fast = False
        self.limit_s = no_limit
        self.run = None  # the DecodeRun in progress
        self.decode_terms = None  # sim.fastforward.steps.DecodeTerms of its cost model, once needed
        self.run_steps_cap = 64  # how far a run is planned (adapts to how far runs get here)
        self.absorbs = False  # runs may take admission steps in (sim/fastforward/admission.py)
        self.feed = (
            None  # an ArrivalFeed: it takes arrivals itself (sim/fastforward/arrival_feed.py)
        )
        self.finish_ends_run = False  # a finish may make a client send (`serve_clients`)
        self._wake = env.event()
        self.process = env.process(self.instance_loop())

    @property
    def name(self) -> str:
        return self.engine.name

    @property
    def load(self) -> int:
        left = self.run.left_by(self.env.now) if self.run is not None else 0  # mid-run
        return self.engine.load + len(self.inbox) - left

    def catch_up(self) -> None:
        """Before another process reads this engine mid-run: apply what has happened by now."""
        if self.run is not None:
            self.run.catch_up(self.env.now)

    def cut(self) -> None:
        """Before another process changes this engine mid-run (a request arrives, KV is reserved
        or lands): the run stops after the step in flight, so the next step sees the change."""
        if self.run is not None and self.run.cut(self.env.now):
            self.process.interrupt()  # wake up at the run's new end

    def serve_clients(self) -> None:
        """Requests will come from processes of the caller's (a benchmark's clients, each
        sending its next request when its last one finishes, from `on_step`) at any time: at
        event speed, a run stops after the step in flight when one comes (`cut`), ends at its
        first finish (so that `on_step` sees it then, as it would after that step), and takes
        no admission steps in (`on_step` must see every step that ends a request)."""
        self.limit_s = no_limit
        self.absorbs = False
        self.finish_ends_run = True

    def notify(self) -> None:
        """Something changed (arrival, freed memory): an idle worker looks again."""
        if not self._wake.triggered:
            self._wake.succeed()

    def timing(self, batch) -> StepTiming:
        """How long this batch takes: priced (simulated clock) or executed (live clock)."""
        return self.clock.step_timing(self, batch)

    def instance_loop(self):
        """The serving loop of one instance: schedule, execute (simulated), apply."""
        env, engine = self.env, self.engine
        feed = self.feed  # (set before the run starts)
        batch = (
            None  # a step a run handed back, formed but not taken (sim/fastforward/admission.py)
        )
        while True:
            if batch is None:
                if self.fast and (run := start_run(self)) is not None:
                    batch = yield from self._take(run)  # plain decode steps, many at once
                    continue
                admitted = engine._admit_counter
                batch = engine.schedule(env.now)
                if batch is None:  # nothing can run: sleep until an arrival or freed memory
                    if engine.retry_now:
                        continue  # it preempted and ran nothing: the next step can progress
                    if feed is not None and (at := feed.next_s()) is not None:
                        if at != env.now:  # (alone: sleeping until then = moving the clock)
                            env.jump(at)  # (else the client would wake it at once)
                        feed.wake(env.now)
                        continue
                    self._wake = env.event()
                    yield self._wake
                    continue
                if self.fast and (engine.waiting or engine.swapped):  # all decode, all blocked?
                    run = start_run(self, batch, admitted != engine._admit_counter)
                    if run is not None:
                        batch = yield from self._take(run)
                        continue
            timing = self.timing(batch)
            start = env.now
            if feed is None:
                yield env.timeout(timing.seconds)
            else:  # alone in the simulation: the step's end is the clock's next instant
                env.jump(start + timing.seconds)  # (simpy's now + delay)
                feed.resume(env.now)  # (arrivals the client would have sent by now)
            for req in engine.complete(batch, start, env.now, timing):
                self.on_handoff(self, req)
            self.clock.after_step(self, batch)
            if self.on_step is not None:
                self.on_step(self)
            batch = None

    def _take(self, run):
        """Let the run's time pass (until its end, which a `cut` may bring forward; admission
        steps may take it further), apply it. Returns the next step's Batch if the run formed
        it but could not take it."""
        self.run = run
        nxt = None
        feed = self.feed
        while True:
            if feed is None:
                try:
                    yield self.env.timeout_at(run.end_s)
                except simpy.Interrupt:
                    continue
            else:  # alone in the simulation (nothing can cut the run): move the clock there
                self.env.jump(run.end_s)
                feed.resume(run.end_s)
            if not run.absorbs:
                break
            nxt = extend(run)
            if nxt is not True:
                break
        self.run = None
        run.finish()
        if self.on_step is not None:
            self.on_step(self)
        return None if nxt is None else self.engine.batch_of(nxt)


class LockstepWorker(Worker):
    """An instance of a DP+EP group: it steps only when its group does (see `LockstepGroup`)."""

    def __init__(self, group: LockstepGroup, *args) -> None:
        self.group = group  # before Worker.__init__ starts the process
        group.ranks.append(self)
        super().__init__(*args)

    def instance_loop(self):
        return self.group.loop(self)

    def notify(self) -> None:
        self.group.notify()


class LockstepGroup:
    """vLLM's data parallel + expert parallel ranks, which step together.

    Every rank runs a forward pass in every step while any rank of the group has requests: a
    rank with nothing to run executes a dummy batch (`DPEngineCoreProc.run_busy_loop` calls
    `execute_dummy_batch` when no ready request ran: vllm/v1/engine/core.py), because the MoE
    layers of all ranks exchange their tokens (all-gather and reduce-scatter per MoE layer) and
    each waits for the others there. So a step lasts as long as the group's slowest rank, each
    rank's experts run on all ranks' tokens, and a rank's idle time in a step is spent waiting
    in the collectives (reported as communication). A dummy batch is one token
    (`_dummy_run(1)`), as in vLLM. The group sleeps when no rank can run anything.
    """

    def __init__(self, env, cost: StepCostModel) -> None:
        self.env, self.cost, self.ranks = env, cost, []
        self._wake = env.event()

    def notify(self) -> None:
        if not self._wake.triggered:
            self._wake.succeed()

    def loop(self, worker: Worker):
        """The group's serving loop, run by its first rank's process (the others have none)."""
        if worker is not self.ranks[0]:
            return
        env, cost, ranks = self.env, self.cost, self.ranks
        while True:
            batches = []
            for w in ranks:
                batch = w.engine.schedule(env.now)
                while batch is None and w.engine.retry_now:  # preempted, ran nothing: again
                    batch = w.engine.schedule(env.now)
                batches.append(batch)
            if all(b is None for b in batches):
                self._wake = env.event()
                yield self._wake
                continue
            tokens = [
                1 if b is None else b.num_decodes + sum(c for c, _, _ in b.prefill_chunks)
                for b in batches
            ]
            group = sum(tokens)
            costs = [
                cost.step_cost((), 1, 0, group_tokens=group)
                if b is None
                else cost.step_cost(
                    b.prefill_chunks, b.num_decodes, b.decode_context_tokens, group_tokens=group
                )
                for b in batches
            ]
            swaps = [
                0.0 if b is None else (b.swap_in_tokens + b.swap_out_tokens) * w.swap_s_per_token
                for b, w in zip(batches, ranks, strict=True)
            ]
            seconds = max(c.seconds + s for c, s in zip(costs, swaps, strict=True))
            start = env.now
            yield env.timeout(seconds)
            for w, b, c, swap in zip(ranks, batches, costs, swaps, strict=True):
                if b is None:
                    continue
                wait = seconds - c.seconds - swap  # waiting for the slowest rank
                timing = StepTiming(
                    seconds, c.compute_s, c.memory_s, c.overhead_s, c.comm_s + wait, swap
                )
                w.engine.complete(b, start, env.now, timing)
                w.clock.after_step(w, b)
            for w in ranks:
                if w.on_step is not None:
                    w.on_step(w)
