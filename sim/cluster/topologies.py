"""Topologies in simpy: one instance, a router over instances, disaggregated prefill/decode.

Notable features
- `simulate(requests, config) -> RunResult` is the simulator's front door.
- Every instance is an `Engine` (sim/core/engine.py, clock-agnostic) wrapped in a simpy process
  (`sim/cluster/worker.py` `Worker.instance_loop`): ask the engine for a batch, price it with the
  roofline cost model, let simpy time pass for that long, apply the result. The live engine
  runs the same Engine with a real model instead of the cost model.
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

from sim.cluster.deciders import DisaggInput, decide, prefill_busy
from sim.cluster.routers import make_router
from sim.cluster.worker import (
    LockstepGroup,
    LockstepWorker,
    SimulatedClock,
    Worker,
    fast_forward_ok,
    no_limit,
)
from sim.config import SimConfig
from sim.core.engine import Engine
from sim.core.kv import KVCache
from sim.core.prefix_cache import PrefixCachingKV, sharing
from sim.core.recorder import TraceRecorder
from sim.core.request import Request, RequestSpec, RequestState
from sim.core.speculation import acceptance_summary
from sim.core.trace import RunResult
from sim.cost.draft_cost import DraftCost
from sim.cost.hardware import custom_gpu, get_gpu, get_model, kv_capacity_tokens
from sim.cost.kernel_data import Tables
from sim.cost.kernel_tables import kernel_times
from sim.cost.profiles import resolve_profile
from sim.cost.roofline import StepCostModel
from sim.fastforward import ArrivalFeed, Environment
from sim.policies import get_policy_class, make_policy

MAX_DECISIONS = 10_000  # Cluster.decisions keeps the latest this many (a lesson has tens)


class Cluster:
    """Builds the workers of a topology and routes arriving requests to them."""

    def __init__(
        self, config: SimConfig, cost_model=None, clock=None, step_by_step: bool = False
    ) -> None:
        self.config = config
        self.clock = clock or SimulatedClock()
        # Take runs of decode-only steps at once (sim/fastforward/steps.py; the same trace, faster)
        # unless asked for step by step or the clock must see every step (the live one).
        # Speculative decoding emits several tokens a step: runs of decode steps assume one.
        speculative = getattr(config.knobs, "speculative", "")
        self.fast = not step_by_step and fast_forward_ok(self.clock) and not speculative
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
        # step_costs=kernels: the measured kernels of the policy's engine where a table has
        # them (SGLang's for SGLang, vLLM's otherwise; of hw.kernel_version's release, or the
        # newest), the roofline elsewhere.
        tables = Tables(get_policy_class(config.policy).kernel_engine, hw.kernel_version)

        def measured(gpu_name: str, ep: int = 1):
            if hw.step_costs != "kernels":
                return None
            return kernel_times(gpu_name, self.model, tp, ep, tables, hw.expert_parallel)

        self.cost = cost_model or StepCostModel(
            self.gpu, self.model, tp, profile, ep, measured(self.gpu.name, ep)
        )
        self.kv_tokens = eng.kv_capacity_tokens or kv_capacity_tokens(
            self.gpu,
            self.model,
            tp,
            eng.mem_utilization,
            config.kv_reserve_gb(self.gpu.name, self.gpu.mem_gb),
            expert_shards=ep,
        )
        self.decode_gpu = self.gpu  # heterogeneous P/D (C13): D workers may use another GPU
        self.decode_cost, self.decode_kv_tokens = self.cost, self.kv_tokens
        if topo.topology == "disaggregated" and topo.decode_gpu:
            self.decode_gpu = get_gpu(topo.decode_gpu)
            d_profile = resolve_profile(hw, self.decode_gpu.name, self.model.layers)
            self.decode_cost = cost_model or StepCostModel(
                self.decode_gpu, self.model, tp, d_profile, 1, measured(self.decode_gpu.name)
            )
            self.decode_kv_tokens = eng.kv_capacity_tokens or kv_capacity_tokens(
                self.decode_gpu,
                self.model,
                tp,
                eng.mem_utilization,
                config.kv_reserve_gb(self.decode_gpu.name, self.decode_gpu.mem_gb),
            )
        self.swap_tokens = int(eng.swap_space_gb * 1e9 // self.model.kv_bytes_per_token)
        self.workers: list[Worker] = []
        # DP+EP: the instances step together (LockstepGroup), under the cost model's clock.
        self.lockstep = None
        if (
            ep > 1
            and isinstance(self.cost, StepCostModel)
            and type(self.clock).step_timing is SimulatedClock.step_timing
        ):
            self.lockstep = LockstepGroup(self.env, self.cost)
        self._rr = count()
        # disaggregated: each request's Decision (deciders.py), in order; the latest
        # MAX_DECISIONS only, so a long-running `live serve` cannot grow it without bound
        self.decisions: deque = deque(maxlen=MAX_DECISIONS)
        self.router = make_router(topo, eng.block_size)  # None: PD Lab's own, run below
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
                w.absorbs = (
                    w.on_step is None and type(self.clock).after_step is SimulatedClock.after_step
                )

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
            kv_class(policy.usable_kv_tokens(kv_tokens, eng.block_size), eng.block_size),
            self.recorder,
            eng.preemption_mode,
            self.swap_tokens,
        )
        engine.hands_off = role == "prefill"
        swap_s = self.model.kv_bytes_per_token / (gpu.host_link_gb_s * 1e9)
        if self.lockstep is not None:  # one rank of a DP+EP group: steps with the others
            w = LockstepWorker(
                self.lockstep, self.env, engine, role, cost, swap_s, c.hardware.tensor_parallel
            )
        else:
            w = Worker(self.env, engine, role, cost, swap_s, c.hardware.tensor_parallel)
        w.clock = self.clock
        knobs = policy.knobs
        if getattr(knobs, "speculative", "") and isinstance(cost, StepCostModel):
            w.draft = DraftCost.for_method(
                knobs.speculative, knobs.num_speculative_tokens, cost, knobs.draft_model
            )
        w.fast = self.fast and self.lockstep is None  # a group's steps are taken one by one
        w.gpu_name = gpu.name
        self.workers.append(w)
        return w

    # ---- routing ------------------------------------------------------------------------------

    def route(self, req: Request, now: float | None = None) -> None:
        """Send an arriving request to the worker the topology picks (now = simpy's clock
        unless a real-time driver, live/serve/engine.py, says otherwise)."""
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
        if target.limit_s is no_limit:  # (else its run ended before this arrival anyway)
            target.cut()  # mid-run: its next step must see the new request
        target.engine.add_request(req, now)
        target.notify()

    def _pick_instance(self, req: Request) -> Worker:
        topo = self.config.topology
        if self.router is not None:  # a router named by system (sim/cluster/routers.py)
            for w in self.instances:  # mid-run: it reads queues, progress and the KV now
                w.catch_up()
            return self.instances[self.router.route(req, self.instances).index]
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
            return decode  # short prompt (or P lagging): prefill locally on D (PD Lab's own)
        if topo.disagg_mode != "conditional" and not self._disaggregate(req, p, decode):
            return decode  # a named decider (sim/cluster/deciders.py) keeps it on D
        reason = decode.engine.capacity_reason(req.prompt_tokens + req.output_tokens)
        if reason:  # it could prefill on P but never decode on D: refuse it up front
            req.workers.append(decode.name)
            req.reject_reason = reason
            req.state = RequestState.REJECTED
            return None
        req.remote_decode = topo.disagg_protocol
        return p

    def _disaggregate(self, req: Request, p: Worker, d: Worker) -> bool:
        """Always, Dynamo's or llm-d's decider: remote prefill on `p`, or local on `d`? The
        answer and what it was decided on go to `self.decisions` (the run's meta)."""
        topo = self.config.topology
        kv = d.engine.kv
        overlap, busy = 0, None  # `always` reads nothing; Dynamo: no threshold = unknown = calm
        if topo.disagg_mode != "always":
            p.catch_up()  # mid-run: read their queues and caches as of now
            d.catch_up()
            overlap = len(kv.lookup(req)) if kv.caching else 0  # D's cache hit for this prompt
        if topo.disagg_mode in ("prefill_load", "isl_or_load") and topo.prefill_busy_threshold > 0:
            eng = p.engine
            active = sum(r.prompt_tokens - r.num_computed for r in (*eng.waiting, *eng.running))
            # the policy's token budget (SGLang's and others' name it otherwise: 0 = none)
            limit = getattr(self.knobs_for(self.gpu), "max_num_batched_tokens", 0) or 0
            busy = prefill_busy(active, topo.prefill_busy_threshold, limit)
        inp = DisaggInput(req.prompt_tokens, kv.block_size, overlap, prefill_busy=busy)
        decision = decide(
            req.request_id,
            topo.disagg_mode,
            inp,
            topo.eff_isl_threshold,
            topo.eff_isl_ratio_threshold,
            topo.non_cached_tokens,
        )
        self.decisions.append(decision)
        return decision.remote

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
        server (live/serve/engine.py) makes it for real in between."""
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
            "policy": c.policy,
            "topology": c.topology.topology,
            "gpu": self.gpu.name,
            "model": self.model.name,
            "num_gpus": sum(w.gpus for w in self.workers),
            "ttft_slo_s": c.slo.ttft_slo_s,
            "tpot_slo_s": c.slo.tpot_slo_s,
            "duration_s": max(finish, default=0.0),
            "workers": workers,
            "config": {**c.flat(), **dataclasses.asdict(self.knobs_for(self.gpu))},
            "clock": self.clock.name,
            "kernel_source": getattr(self.cost, "kernel_source", "roofline"),
            "kernel_sources": getattr(self.cost, "kernel_sources", {}),  # operator -> its table
            **self._speculation(requests),
            # disaggregated: who prefilled where, and why (sim/cluster/deciders.py Decision)
            **(
                {"decisions": [dataclasses.asdict(d) for d in self.decisions]}
                if self.decisions
                else {}
            ),
        }

    def _speculation(self, requests: list[Request]) -> dict:
        """Run totals of speculative decoding (empty when it is off)."""
        if not any(w.engine.speculator is not None for w in self.workers):
            return {}
        return {
            "speculation": acceptance_summary(
                sum(r.spec_drafted for r in requests),
                sum(r.spec_accepted for r in requests),
                sum(r.spec_verifies for r in requests),
            )
        }


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
        lookahead = caches[0].hash_lookahead  # (every worker runs the same policy's knobs)
        shareable = sharing(requests, config.engine.block_size, lookahead)
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
