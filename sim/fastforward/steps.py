"""Event speed: take a whole run of decode-only steps at once, exactly as step by step would.

Why a run can be skipped through
- Most steps of a busy server are PLAIN DECODE steps: every running request decodes one token,
  nobody is admitted, preempted or stalled, no prefill chunk rides along. Two such steps in a row
  differ only in the KV context each request reads, which grows by one token per request.
- So between two EVENTS that could change a step's shape, nothing new is decided, and the
  simulator may apply the steps in one go. The events, and where each is handled:
  * an arrival, a request routed here, a P->D hand-off, a KV transfer landing: anything another
    process does to this worker. Colocated runs stop before the next arrival (`limit_s`); the
    other topologies call `Worker.cut` (later steps must see the change) and `Worker.catch_up`
    (bring the engine up to this instant before reading or changing it) where they touch it.
  * a request finishing. If nothing waits for memory or a seat (no waiting, swapped or inbound
    request) a finish only shrinks the batch and the run goes on with one request fewer; else
    the finishing step is the run's last, so that the policy decides the next step normally;
    so it is where a client waits for the finish to send its next one (`Worker.serve_clients`).
  * a KV block boundary: a decode whose last block is full takes a new one. The run stops
    before free blocks could run short (preemption); blocks filling up and entering the prefix
    cache are applied in the order step by step applies them (`DecodeRun._advance`).
  * the policy's own clock (promises.py, e.g. short-first's aging) and its promise that
    the waiting queue stays blocked; the run budget's step cap (`SimulatedClock.decode_run`).
- Pricing: in sim/cost/roofline.py the decode context enters a decode-only step only as its last
  memory term, `context x kv_s` (decode attention reads every request's KV: memory-bound). With b
  requests and c context tokens in all,
      seconds(b, c) = overhead(b) + compute(b) + (memory(b) + c * kv_s) + comm(b),
  and c grows by b every step, so a run of k steps lasts k * a(b) + kv_s * (k * c1 + b * k(k-1)/2)
  (`run_seconds`). We still need each step's end: every output token's time is in the trace.
  Each step is priced with the SAME float operations as `step_cost` and simpy (the b-terms
  come from step_cost itself, then memory + c * kv_s, then the left-to-right sum; step ends are
  a running sum t + d, as simpy's `now + delay`), so the trace is bit-identical to stepping,
  not merely close. Plans check their last step against `step_cost` (`DecodeTerms.due`) and
  price step by step if they ever disagree (a cost model changed without this file).
- Admission steps: where nothing but arrivals touches a worker (one colocated instance) the
  step after a run's end may join the run, formed by the policy's own admission code: the
  running requests each decode one token in it while new prompts are prefilled, and the
  admitted requests join the run as decoders (sim/fastforward/admission.py). A busy server's run
  then carries on through arrivals instead of ending at each one.
- Cost: a few float operations per step and a few list operations per request per run (no
  numpy: runs are short between arrivals, and numpy's call overhead would dominate them).
  The requests still in a run when it is applied get their tokens and segments together
  (`DecodeRun._book_all`, `TraceRecorder.add_same`; sim/fastforward/decode_run.py).
"""

from __future__ import annotations

import warnings
from heapq import heappush
from typing import TYPE_CHECKING

import simpy
from simpy.events import NORMAL

from sim.fastforward import promises
from sim.fastforward.decode_run import DecodeRun

if TYPE_CHECKING:
    from sim.cluster.worker import Worker
    from sim.core.step import Batch


def run_seconds(a_b: float, kv_s: float, b: int, c1: int, k: int) -> float:
    """Closed form of a run of k decode steps of b requests, c1 context tokens at the first step
    (every step adds b tokens of context): k * a(b) + kv_s * (k * c1 + b * k(k-1)/2) seconds.
    Equal to the sum of the steps up to float rounding (used to explain, not to time, runs)."""
    return k * a_b + kv_s * (k * c1 + b * k * (k - 1) // 2)


class Environment(simpy.Environment):
    """simpy's Environment plus `timeout_at`: wake up at an exact time.

    A run ends at the float its last step ends at (previous end + duration, as step by step).
    `timeout(end - now)` fires at now + (end - now), and rounding cannot always land that on
    `end` (ties to even may skip it), so the run's end is put in the event queue as it is.
    """

    def jump(self, at: float) -> None:
        """Move the clock to `at` without an event: for a process that is alone in the
        simulation (a colocated run whose worker takes its own arrivals,
        sim/fastforward/arrival_feed.py).
        With nothing else in the queue, yielding a timeout would only pop it straight back
        and resume the same process at the same instant (`now + delay` is what a timeout's
        time is: the caller passes that float)."""
        if self._queue:
            raise RuntimeError("Environment.jump: another event is waiting")
        self._now = at

    def timeout_at(self, at: float) -> simpy.Event:
        event = simpy.Event(self)
        event._ok, event._value = True, None  # already triggered, like a Timeout
        heappush(self._queue, (at, NORMAL, next(self._eid), event))
        return event


class DecodeTerms:
    """What a decode-only step costs apart from its context, by batch size, from step_cost.

    For b requests: step_cost((), b, 0)'s compute_s, memory_s, overhead_s and comm_s, and
    `head` = overhead_s + compute_s (the first addition of step_cost's sum, made once). A step
    of b requests reading c tokens of context then costs, in step_cost's order of operations,
        memory = memory_b + c * kv_s;  seconds = head_b + memory + comm_b
    (`price`), the same float64 bit for bit. Python floats, not numpy: a run is priced one step
    at a time as far as it goes, and a dozen float operations a step cost less than the numpy
    calls that would price a few dozen steps at once.
    """

    def __init__(self, cost) -> None:
        self.cost = cost
        self.kv_s = getattr(cost, "decode_kv_s_per_token", None)
        self.step_min = cost.step_cost((), 1, 0).seconds  # no decode step is shorter
        # By batch size (index 0 unused): step_cost's terms at context 0.
        self.compute: list[float] = [0.0]
        self.memory: list[float] = [0.0]
        self.overhead: list[float] = [0.0]
        self.comm: list[float] = [0.0]
        self.head: list[float] = [0.0]
        self.plans = 0  # plans priced (see `due`)

    def cover(self, batch: int) -> None:
        """Make the columns reach batch size `batch`."""
        for b in range(len(self.head), batch + 1):
            c = self.cost.step_cost((), b, 0)
            self.compute.append(c.compute_s)
            self.memory.append(c.memory_s)
            self.overhead.append(c.overhead_s)
            self.comm.append(c.comm_s)
            self.head.append(c.overhead_s + c.compute_s)

    def lower_bound(self, batch: int) -> float:
        """Seconds a decode step of `batch` requests lasts at least (its context adds to it)."""
        if self.kv_s is None:
            return self.step_min
        if batch >= len(self.head):
            self.cover(batch)
        return self.head[batch] + self.memory[batch] + self.comm[batch]

    def price(self, batch: int, context: int) -> tuple[float, float]:
        """(seconds, memory_s) of a decode-only step, as step_cost((), batch, context) gives."""
        memory = self.memory[batch] + context * self.kv_s
        return self.head[batch] + memory + self.comm[batch], memory

    def due(self) -> bool:
        """Whether to `check` the plan just priced: the first 16 plans of a worker, then one in
        16 (a cost model of another form shows at once; checking every plan of a busy server,
        one per arrival, would cost a step_cost call each)."""
        self.plans += 1
        return self.plans <= 16 or not self.plans & 15

    def check(self, batch: int, context: int, seconds: float, memory: float) -> bool:
        """Whether step_cost agrees with a step priced here (else price step by step)."""
        c = self.cost.step_cost((), batch, context)
        if (c.seconds, c.compute_s, c.memory_s) == (seconds, self.compute[batch], memory):
            return True
        self.kv_s = None  # this cost model is not of that form: price step by step
        _disagree()
        return False


def _disagree() -> None:
    warnings.warn(
        "sim.fastforward.steps: step_cost no longer matches its decode-only form "
        "(memory + context * decode_kv_s_per_token, added last); pricing runs step by step",
        RuntimeWarning,
        stacklevel=3,
    )


def start_run(
    worker: Worker, batch: Batch | None = None, admitted: bool = False
) -> DecodeRun | None:
    """A run starting now, or None (take the next step the ordinary way).

    Without `batch`, nothing is scheduled yet: the run starts only if nothing waits and every
    running request decodes. With `batch` (a step the engine just scheduled, while requests
    wait), it must be a plain decode step: every running request one decode token, nothing
    admitted, preempted, swapped or stalled.
    """
    engine = worker.engine
    running = engine.running
    if not running or engine.hands_off:
        return None
    if batch is None:
        if engine.waiting or engine.swapped:
            return None
    elif (
        admitted
        or batch.prefill_chunks
        or batch.stalled
        or batch.preempted
        or batch.swap_in_tokens
        or batch.swap_out_tokens
        or batch.num_decodes != len(running)
        or len(batch.items) != len(running)
    ):
        return None
    # Not even two steps before the next arrival? (Busy servers: decide it before any O(batch).)
    now, terms = worker.env.now, worker.decode_terms
    if terms is None:
        terms = worker.decode_terms = DecodeTerms(worker.cost)
    limit = worker.limit_s()
    if now + terms.lower_bound(len(running)) >= limit:
        return None
    if not all([r.is_decoding for r in running]):
        return None
    c0 = [r.num_computed for r in running]  # (a comprehension per column: faster than appends)
    rem = [r.output_tokens - r.num_generated for r in running]
    blocks = [r.blocks for r in running]
    policy = engine.policy
    horizon = promises.decode_horizon(policy, engine, now)
    if horizon is None:
        return None
    limit = min(horizon, limit)
    run = DecodeRun(worker, list(running), c0, rem, blocks, allocated=0 if batch is None else 1)
    blocked = bool(engine.waiting or engine.swapped or worker.inbox) or worker.finish_ends_run
    if run.plan(limit, blocked, promises.kv_margin(policy)) < 2:
        return None
    run.absorbs = worker.absorbs
    return run
