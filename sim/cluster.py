"""Topologies in simpy: one instance, a router over instances, disaggregated prefill/decode.

Notable features
- `simulate(requests, config) -> RunResult` is the simulator's front door.
- Every instance is an `Engine` (sim/engine.py, clock-agnostic) wrapped in a simpy process,
  `instance_loop`: ask the engine for a batch, price it with the roofline cost model, let simpy
  time pass for that long, apply the result. The live engine runs the same Engine with a real
  model instead of the cost model.
- Disaggregated: a request prefills on a P worker, waits for a D worker to reserve blocks for its
  prompt's KV, crosses the P worker's KV link (a FIFO simpy Resource, like SimPy's `Cable`
  example), then waits on D to be admitted like any request (so D's `max_num_seqs`, static batch
  and token budget apply) and decodes there. P holds its blocks until the transfer ends.
  `disagg_protocol` says who makes token 1: `vllm` (vLLM's NIXL connector: P runs with
  max_tokens=1 and its token is dropped; D computes the last prompt token again and samples token
  1) or `distserve` (DistServe: P's token is token 1, D only decodes).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from itertools import count

import simpy

from sim.arrival_feed import ArrivalFeed
from sim.config import SimConfig
from sim.cost import StepCostModel
from sim.engine import Engine, StepTiming
from sim.fastforward import Environment, start_run
from sim.hardware import custom_gpu, get_gpu, get_model, kv_capacity_tokens, kv_transfer_s
from sim.kv import KVCache
from sim.policies import make_policy
from sim.prefix_cache import PrefixCachingKV, sharing
from sim.profiles import resolve_profile
from sim.recorder import TraceRecorder
from sim.request import Request, RequestSpec, RequestState
from sim.run_admission import extend
from sim.trace import RunResult


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
        """A run of `steps` decode-only steps was just taken at once (sim/fastforward.py). A
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


def _never() -> float:
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
        self.clock: SimulatedClock = SimulatedClock()  # the Cluster sets the run's clock
        # Event speed (sim/fastforward.py): runs of decode steps taken at once, unless the Cluster
        # asks for step by step. `limit_s()`: no step of a run may start at or after it.
        self.fast = False
        self.limit_s = _never
        self.run = None  # the DecodeRun in progress
        self.decode_terms = None  # sim.fastforward.DecodeTerms of its cost model, once needed
        self.run_steps_cap = 64  # how far a run is planned (adapts to how far runs get here)
        self.absorbs = False  # runs may take admission steps in (sim/run_admission.py)
        self.feed = None  # an ArrivalFeed: it takes arrivals itself (sim/arrival_feed.py)
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
        self.limit_s = _never
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
        batch = None  # a step a run handed back, formed but not taken (sim/run_admission.py)
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
            tokens = [1 if b is None else b.num_decodes + sum(c for c, _, _ in b.prefill_chunks)
                      for b in batches]  # fmt: skip
            group = sum(tokens)
            costs = [
                cost.step_cost((), 1, 0, group_tokens=group)
                if b is None
                else cost.step_cost(b.prefill_chunks, b.num_decodes, b.decode_context_tokens,
                                    group_tokens=group)  # fmt: skip
                for b in batches
            ]
            swaps = [0.0 if b is None else (b.swap_in_tokens + b.swap_out_tokens)
                     * w.swap_s_per_token for b, w in zip(batches, ranks, strict=True)]  # fmt: skip
            seconds = max(c.seconds + s for c, s in zip(costs, swaps, strict=True))
            start = env.now
            yield env.timeout(seconds)
            for w, b, c, swap in zip(ranks, batches, costs, swaps, strict=True):
                if b is None:
                    continue
                wait = seconds - c.seconds - swap  # waiting for the slowest rank
                timing = StepTiming(seconds, c.compute_s, c.memory_s, c.overhead_s,
                                    c.comm_s + wait, swap)  # fmt: skip
                w.engine.complete(b, start, env.now, timing)
                w.clock.after_step(w, b)
            for w in ranks:
                if w.on_step is not None:
                    w.on_step(w)


class Cluster:
    """Builds the workers of a topology and routes arriving requests to them."""

    def __init__(
        self, config: SimConfig, cost_model=None, clock=None, step_by_step: bool = False
    ) -> None:
        self.config = config
        self.clock = clock or SimulatedClock()
        # Take runs of decode-only steps at once (sim/fastforward.py; the same trace, faster)
        # unless asked for step by step or the clock must see every step (the live one).
        self.fast = not step_by_step and fast_forward_ok(self.clock)
        self.next_arrival_s = math.inf  # the client's next arrival (colocated runs stop there)
        hw, eng, topo = config.hardware, config.engine, config.topology
        self.env = Environment()
        self.recorder = TraceRecorder()
        self.model = get_model(hw.model)
        if hw.gpu.lower() == "custom":
            self.gpu = custom_gpu(hw.gpu_tflops, hw.gpu_bw_gb_s, hw.gpu_mem_gb)
        else:
            self.gpu = get_gpu(hw.gpu)
        tp = hw.tensor_parallel
        # Expert parallel (MoE, router topology): the instances share one set of experts.
        ep = topo.num_instances if hw.expert_parallel and topo.topology == "router" else 1
        # The GPU's fitted efficiencies by default (overheads for this model's depth).
        profile = resolve_profile(hw, self.gpu.name, self.model.layers)
        # Anything with step_cost(prefill_chunks, num_decodes, decode_context_tokens) will do:
        # tests pass a toy clock, the live page a model calibrated on real measurements.
        self.cost = cost_model or StepCostModel(self.gpu, self.model, tp, profile, ep)
        self.kv_tokens = eng.kv_capacity_tokens or kv_capacity_tokens(
            self.gpu, self.model, tp, eng.mem_utilization, expert_shards=ep
        )
        self.decode_gpu = self.gpu  # heterogeneous P/D (C13): D workers may use another GPU
        self.decode_cost, self.decode_kv_tokens = self.cost, self.kv_tokens
        if topo.topology == "disaggregated" and topo.decode_gpu:
            self.decode_gpu = get_gpu(topo.decode_gpu)
            d_profile = resolve_profile(hw, self.decode_gpu.name, self.model.layers)
            self.decode_cost = cost_model or StepCostModel(
                self.decode_gpu, self.model, tp, d_profile
            )
            self.decode_kv_tokens = eng.kv_capacity_tokens or kv_capacity_tokens(
                self.decode_gpu, self.model, tp, eng.mem_utilization
            )
        self.swap_tokens = int(eng.swap_space_gb * 1e9 // self.model.kv_bytes_per_token)
        self.workers: list[Worker] = []
        # DP+EP: the instances step together (LockstepGroup), under the cost model's clock.
        self.lockstep = None
        if (ep > 1 and isinstance(self.cost, StepCostModel)
                and type(self.clock).step_timing is SimulatedClock.step_timing):  # fmt: skip
            self.lockstep = LockstepGroup(self.env, self.cost)
        self._rr = count()
        if topo.topology == "colocated":
            self.instances = [self._worker("I0", "colocated")]
        elif topo.topology == "router":
            n = topo.num_instances
            if topo.router == "length" and n >= 2:  # short-prompt servers S*, one long server L0
                self.instances = [self._worker(f"S{i}", "short") for i in range(n - 1)]
                self.long = self._worker("L0", "long")
            else:
                self.instances = [self._worker(f"I{i}", "colocated") for i in range(n)]
        else:
            self.prefill = [self._worker(f"P{i}", "prefill") for i in range(topo.num_prefill)]
            self.decode = [self._worker(f"D{i}", "decode") for i in range(topo.num_decode)]
            for p in self.prefill:
                p.on_handoff = self._handoff
                p.link = simpy.Resource(self.env, capacity=1)  # its KV link, one copy at a time
            for d in self.decode:
                d.on_step = self._start_transfers
        if topo.topology in ("colocated", "router"):
            # Their only outside event is an arrival: every instance's run stops before the
            # next one, wherever it will go (cheaper than cutting the run it lands in; the
            # arrival itself only joins a queue, and the router reads loads, which runs keep).
            # Nothing else touches them mid-run: a run may take the policy's admission steps in.
            for w in self.workers:
                w.limit_s = lambda: self.next_arrival_s
                w.absorbs = (w.on_step is None
                             and type(self.clock).after_step is SimulatedClock.after_step)

    def knobs_for(self, gpu) -> object:
        """The policy's knobs with "the engine's default" resolved for `gpu` (e.g. vLLM's
        max_num_batched_tokens, SGLang's chunked_prefill_size)."""
        return self.config.knobs.for_gpu(gpu.name, gpu.mem_gb)

    def _worker(self, name: str, role: str) -> Worker:
        c, eng = self.config, self.config.engine
        gpu, cost, kv_tokens = self.gpu, self.cost, self.kv_tokens
        if role == "decode":
            gpu, cost, kv_tokens = self.decode_gpu, self.decode_cost, self.decode_kv_tokens
        policy = make_policy(c.policy, self.knobs_for(gpu))
        kv_class = PrefixCachingKV if policy.prefix_caching else KVCache
        engine = Engine(
            name,
            policy,
            kv_class(kv_tokens, eng.block_size),
            self.recorder,
            eng.preemption_mode,
            self.swap_tokens,
        )
        engine.hands_off = role == "prefill"
        swap_s = self.model.kv_bytes_per_token / (gpu.host_link_gb_s * 1e9)
        if self.lockstep is not None:  # one rank of a DP+EP group: steps with the others
            w = LockstepWorker(self.lockstep, self.env, engine, role, cost, swap_s,
                               c.hardware.tensor_parallel)  # fmt: skip
        else:
            w = Worker(self.env, engine, role, cost, swap_s, c.hardware.tensor_parallel)
        w.clock = self.clock
        w.fast = self.fast and self.lockstep is None  # a group's steps are taken one by one
        w.gpu_name = gpu.name
        self.workers.append(w)
        return w

    # ---- routing ------------------------------------------------------------------------------

    def route(self, req: Request, now: float | None = None) -> None:
        """Send an arriving request to the worker the topology picks (now = simpy's clock
        unless a real-time driver, live/serve_engine.py, says otherwise)."""
        now = self.env.now if now is None else now
        topo = self.config.topology
        if topo.topology == "colocated":
            target = self.instances[0]
        elif topo.topology == "router":
            target = self._pick_instance(req)
        else:
            target = self._pick_disaggregated(req)
            if target is None:
                return  # refused: it could never decode anywhere
        if target.limit_s is _never:  # (else its run ended before this arrival anyway)
            target.cut()  # mid-run: its next step must see the new request
        target.engine.add_request(req, now)
        target.notify()

    def _pick_instance(self, req: Request) -> Worker:
        topo = self.config.topology
        if topo.router == "round-robin":
            return self.instances[next(self._rr) % len(self.instances)]
        if topo.router == "length" and len(self.workers) >= 2:
            if req.prompt_tokens >= topo.length_threshold:
                return self.long
            short = min(self.instances, key=lambda w: w.load)
            # Spill-over: an idle long server takes short work rather than sit unused (C10b).
            return self.long if short.load > 0 and self.long.load == 0 else short
        return min(self.instances, key=lambda w: w.load)

    def _pick_disaggregated(self, req: Request) -> Worker | None:
        topo = self.config.topology
        decode = min(self.decode, key=lambda w: w.load)
        p = min(self.prefill, key=lambda w: len(w.engine.waiting))
        if topo.disagg_mode == "conditional" and (
            req.prompt_tokens <= topo.max_local_prefill_length
            or len(p.engine.waiting) >= topo.max_prefill_queue
        ):
            return decode  # short prompt (or P lagging): prefill locally on D (Dynamo's rule)
        reason = decode.engine.capacity_reason(req.prompt_tokens + req.output_tokens)
        if reason:  # it could prefill on P but never decode on D: refuse it up front
            req.workers.append(decode.name)
            req.reject_reason = reason
            req.state = RequestState.REJECTED
            return None
        req.remote_decode = topo.disagg_protocol
        return p

    # ---- disaggregated hand-off ---------------------------------------------------------------

    def _handoff(self, p: Worker, req: Request) -> None:
        """P finished a prompt: queue it for the least-loaded D worker."""
        d = min(self.decode, key=lambda w: w.load)
        req.wait_kind, req.wait_since = "queued", self.env.now
        d.cut()  # mid-run: waiting work changes what a finish there may start
        d.inbox.append((req, p))
        self._start_transfers(d)

    def _start_transfers(self, d: Worker) -> None:
        """Reserve D's blocks for waiting prompts (in order) and start their KV copies."""
        if d.inbox:  # mid-run: reserving blocks reads the KV now, and changes later steps
            d.catch_up()
            d.cut()
        for req, p in self.reserve_transfers(d):
            self.env.process(self._transfer(req, p, d))

    def reserve_transfers(self, d: Worker) -> list[tuple[Request, Worker]]:
        """The prompts waiting for `d` whose blocks `d` can reserve now, in order, with their P.

        Clock-free, like `finish_transfer`: the simulator times the copy with simpy, the live
        server (live/serve_engine.py) makes it for real in between."""
        ready = []
        while d.inbox and d.engine.reserve_transfer(d.inbox[0][0]):
            ready.append(d.inbox.popleft())
        return ready

    def finish_transfer(self, req: Request, p: Worker, d: Worker, start: float, end: float):
        """The prompt's KV reached `d` between `start` and `end`: draw the wait and the copy,
        free P's blocks, and queue the request on D."""
        link_name = f"{p.name}>{d.name}"
        self.recorder.segment(req, link_name, req.wait_kind, req.wait_since, start)
        self.recorder.segment(req, link_name, "kv_transfer", start, end, tokens=req.prompt_tokens)
        p.engine.release(req)
        req.workers.append(d.name)
        d.engine.add_prefilled(req, end)

    def _transfer(self, req: Request, p: Worker, d: Worker):
        topo = self.config.topology
        with p.link.request() as turn:
            yield turn
            start = self.env.now
            yield self.env.timeout(self.clock.transfer_s(req, p, d, self.model, topo))
        d.cut()
        self.finish_transfer(req, p, d, start, self.env.now)
        p.notify()  # its blocks are free again
        d.notify()

    # ---- the run ------------------------------------------------------------------------------

    def client(self, specs: list[RequestSpec], requests: list[Request]):
        """Sends the requests at their arrival times."""
        for spec in sorted(specs, key=lambda s: (s.arrival_s, s.request_id)):
            if spec.arrival_s > self.env.now:
                self.next_arrival_s = spec.arrival_s
                yield self.env.timeout(spec.arrival_s - self.env.now)
            req = Request(spec)
            requests.append(req)
            self.route(req)
        self.next_arrival_s = math.inf

    def meta(self, requests: list[Request]) -> dict:
        c = self.config
        workers = {
            w.name: {
                "role": w.role,
                "gpus": w.gpus,
                "gpu": w.gpu_name,
                "kv_capacity_tokens": w.engine.kv.capacity_tokens,
            }
            for w in self.workers
        }
        finish = [r.finish_s for r in requests if r.finish_s == r.finish_s]
        return {
            "policy": c.policy, "topology": c.topology.topology, "gpu": self.gpu.name,
            "model": self.model.name, "num_gpus": sum(w.gpus for w in self.workers),
            "ttft_slo_s": c.slo.ttft_slo_s, "tpot_slo_s": c.slo.tpot_slo_s,
            "duration_s": max(finish, default=0.0), "workers": workers,
            "config": {**c.flat(), **dataclasses.asdict(self.knobs_for(self.gpu))},
            "clock": self.clock.name,
        }  # fmt: skip


def simulate(
    requests: list[RequestSpec],
    config: SimConfig | None = None,
    cost_model=None,
    clock=None,
    step_by_step: bool = False,
) -> RunResult:
    """Run `requests` through the configured topology and policy; return the trace tables.

    `cost_model` replaces the roofline model built from the config (same `step_cost` method);
    `clock` replaces how steps get their duration (live/ passes one that runs a real model).
    `step_by_step` turns off the fast-forward through decode-only steps (same trace, slower).
    """
    config = config or SimConfig()
    cluster = Cluster(config, cost_model, clock, step_by_step)
    caches = [w.engine.kv for w in cluster.workers if w.engine.kv.caching]
    if caches:  # the workload is known: blocks nobody else holds need no name in the cache
        shareable = sharing(requests, config.engine.block_size)
        for kv in caches:
            kv.shareable = shareable
    live: list[Request] = []
    if cluster.fast and config.topology.topology == "colocated":  # one worker, at event speed
        w = cluster.instances[0]
        w.feed = ArrivalFeed(requests, w.engine, live)  # it takes its arrivals itself
        w.limit_s = w.feed.limit_s
    else:
        cluster.env.process(cluster.client(list(requests), live))
    cluster.env.run()
    return cluster.recorder.result(live, cluster.meta(live), final=True)
