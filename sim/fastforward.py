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
    the finishing step is the run's last, so that the policy decides the next step normally.
  * a KV block boundary: a decode whose last block is full takes a new one. The run stops
    before free blocks could run short (preemption); blocks filling up and entering the prefix
    cache are applied in the order step by step applies them (see `_chunk`).
  * the policy's own clock (`Policy.decode_horizon`: short-first's aging) and its promise that
    the waiting queue stays blocked; the run budget's step cap (`SimulatedClock.decode_run`).
- Pricing: in sim/cost.py the decode context enters a decode-only step only as its last memory
  term, `context x kv_s` (decode attention reads every request's KV: memory-bound). With b
  requests and c context tokens in all,
      seconds(b, c) = overhead(b) + compute(b) + (memory(b) + c * kv_s) + comm(b),
  and c grows by b every step, so a run of k steps lasts k * a(b) + kv_s * (k * c1 + b * k(k-1)/2)
  (`run_seconds`). We still need each step's end: every output token's time is in the trace.
  numpy computes them with the SAME float operations as `step_cost` and simpy (the b-terms come
  from step_cost itself, then memory + c * kv_s, then the left-to-right sum; step ends are a
  running sum t + d, as simpy's `now + delay`), so the trace is bit-identical to stepping, not
  merely close. Each run checks its last step against `step_cost` and prices step by step if
  they ever disagree (a cost model changed without this file).
"""

from __future__ import annotations

import math
import warnings
from array import array
from heapq import heappush
from typing import TYPE_CHECKING

import numpy as np
import simpy
from simpy.events import NORMAL

from sim.recorder import KIND_CODE

if TYPE_CHECKING:
    from sim.cluster import Worker
    from sim.engine import Batch

DECODE = KIND_CODE["decode"]
# Steps planned at once: a longer quiet stretch takes several runs. Where nothing bounds a run
# in advance (routers, P/D: another worker may cut it short) planning far costs for nothing.
MAX_RUN_STEPS = 512


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

    def timeout_at(self, at: float) -> simpy.Event:
        event = simpy.Event(self)
        event._ok, event._value = True, None  # already triggered, like a Timeout
        heappush(self._queue, (at, NORMAL, next(self._eid), event))
        return event


class DecodeTerms:
    """What a decode-only step costs apart from its context, by batch size, from step_cost.

    `price(b, c)` gives every step's (seconds, compute_s, memory_s, overhead_s, comm_s) as
    `step_cost((), b, c)` would: the batch-size terms are step_cost's own at context 0, looked
    up per step, then memory_s + c * kv_s and the left-to-right sum, as step_cost adds them.
    """

    def __init__(self, cost) -> None:
        self.cost = cost
        self.kv_s = getattr(cost, "decode_kv_s_per_token", None)
        self.step_min = cost.step_cost((), 1, 0).seconds  # no decode step is shorter
        self.columns = np.zeros((4, 0))  # compute, memory, overhead, comm by batch size

    def lower_bound(self, batch: int) -> float:
        """Seconds a decode step of `batch` requests lasts at least (its context adds to it)."""
        if batch >= self.columns.shape[1]:
            self._extend(max(batch + 1, 2 * self.columns.shape[1], 64))
        return float(self.columns[:, batch].sum()) if self.kv_s is not None else self.step_min

    def _extend(self, size: int) -> None:
        old = self.columns.shape[1]
        rows = [self.cost.step_cost((), b, 0) if b else None for b in range(old, size)]
        new = [(r.compute_s, r.memory_s, r.overhead_s, r.comm_s) if r else (0.0,) * 4
               for r in rows]  # fmt: skip
        self.columns = np.concatenate((self.columns, np.array(new).T.reshape(4, -1)), axis=1)

    def price(self, active: np.ndarray, context: np.ndarray) -> tuple:
        cost = self.cost
        if self.kv_s is not None:
            top = int(active.max()) + 1
            if top > self.columns.shape[1]:
                self._extend(max(top, 2 * self.columns.shape[1], 64))
            compute, memory_b, overhead, comm = self.columns[:, active]
            memory = memory_b + context * self.kv_s  # the decode attention's KV read, added last
            seconds = overhead + compute + memory + comm  # left to right, as in step_cost
            last = cost.step_cost((), int(active[-1]), int(context[-1]))
            if (last.seconds, last.compute_s, last.memory_s) == (
                seconds[-1],
                compute[-1],
                memory[-1],
            ):
                return seconds, compute, memory, overhead, comm
            self.kv_s = None  # this cost model is not of that form: price step by step
            _disagree()
        # Step by step pricing (any cost model with step_cost): exact by construction.
        rows = [cost.step_cost((), int(b), int(c)) for b, c in zip(active, context, strict=True)]
        fields = ("seconds", "compute_s", "memory_s", "overhead_s", "comm_s")
        return tuple(np.array([getattr(r, f) for r in rows], dtype=float) for f in fields)


class DecodeRun:
    """A run of plain decode steps planned at once, applied when it ends (or when touched).

    Step j (1-based) starts at `times[j-1]` and ends at `times[j]`. Request i (in running order)
    takes part in steps 1..last[i]; it finishes at step last[i] if that is its final token.
    `done` steps are applied (tokens, segments, finishes) and `allocated` steps hold their KV
    blocks; the engine's state is always that of step by step at the last applied instant.
    """

    def __init__(self, worker: Worker, reqs: list, c0: np.ndarray, rem: np.ndarray,
                 blocks: np.ndarray, allocated: int) -> None:  # fmt: skip
        self.worker, self.engine = worker, worker.engine
        self.reqs = reqs
        self.c0 = c0  # tokens in each request's KV before step 1 (its decode context)
        self.rem = rem  # tokens each request still has to generate before step 1
        self.blocks0 = blocks  # KV blocks each holds (step 1's included when it is scheduled)
        self.first_step = worker.engine.num_steps
        self.done = 0
        self.allocated = allocated  # 1 when step 1 was scheduled by the engine itself
        kv = worker.engine.kv
        self.free0 = kv.free_blocks  # free blocks when planned
        self.freed_at: list[tuple[int, int]] = []  # (step, blocks its finishes freed)
        self.c0_list, self.rem_list = c0.tolist(), rem.tolist()
        self.taken_to = allocated  # blocks are held for the steps up to this one
        self.booked = [0] * len(reqs)  # the last step applied to each request
        self.touched = False  # another process read or changed the engine mid-run
        self.k = 0

    # ---- planning -----------------------------------------------------------------------------

    def plan(self, limit_s: float, blocked: bool, margin: int) -> int:
        """Decide how many steps to take (0 or 1: not worth it) and price them."""
        worker = self.worker
        bs = self.engine.kv.block_size
        c0, rem, n = self.c0, self.rem, len(self.reqs)
        now = worker.env.now
        terms = worker.decode_terms
        # (1) finishes: with someone waiting the first finish ends the run (freed memory or a
        #     free seat may admit them); otherwise the run may go on until the last one. No
        #     step is shorter than one decode of one token: that bounds the steps before limit_s.
        k = int(rem.min()) if blocked else int(rem.max())
        k = min(k, worker.run_steps_cap)
        if limit_s < math.inf:
            k = min(k, int((limit_s - now) / terms.step_min) + 2)
        if k < 2:
            return 0
        steps = np.arange(1, k + 1)
        # Requests active in step j: those with rem >= j. Sorted by rem, the counts and the
        # context of every step come from one searchsorted.
        order = np.argsort(rem, kind="stable")
        rem_sorted = rem[order]
        gone = rem_sorted.searchsorted(steps)  # requests that finished before step j
        active = n - gone
        c_cum = np.concatenate(([0], c0[order].cumsum()))
        context = (c_cum[-1] - c_cum[gone]) + (steps - 1) * active  # sum of contexts at step j
        # (2) KV: step j grows request i to hold c0 + j tokens, i.e. ceil((c0 + j) / bs) blocks;
        #     the blocks still to take through step j must leave the policy's margin free.
        #     Blocks freed by finishes inside the run are not counted on.
        upto = np.minimum(steps, rem[:, None])  # (request, step) -> steps it has taken part in
        need = np.maximum(-(-(c0[:, None] + upto) // bs) - self.blocks0[:, None], 0).sum(0)
        if need[-1] > self.free0 - margin:
            k = int(np.argmax(self.free0 - need < margin))  # stop before the first short step
            if k < 2:
                return 0
        # (3) price the steps; a step may START only before limit_s (touch-first on a tie).
        seconds, compute, memory, overhead, comm = terms.price(active[:k], context[:k])
        times = np.empty(k + 1)
        times[0] = now
        times[1:] = seconds
        times = times.cumsum()  # sequential: times[j] = times[j-1] + seconds[j-1], as simpy
        if limit_s < math.inf:
            k = min(k, int(times[:k].searchsorted(limit_s)))
            if k < 2:
                return 0
        self.k = self.planned = k  # (copies: the trace keeps them, not the longer arrays)
        self.times = times[: k + 1].copy()
        self.active = active[:k].copy()
        self.need = need[:k].copy()
        self.cost = tuple(c[:k].copy() for c in (compute, memory, overhead, comm))
        self.end_s = float(self.times[k])
        self._times = array("d", self.times.tobytes())  # sliced into token_times
        self._order = order.tolist()  # requests by their last step
        self._set_finishing(k)
        return k

    def _set_finishing(self, k: int) -> None:
        """(step, requests whose last token comes then) for the finishes in steps 1..k."""
        by_step: dict[int, list[int]] = {}
        for i, r in enumerate(self.rem_list):
            if r <= k:
                by_step.setdefault(r, []).append(i)  # in running order
        self._finishing = sorted(by_step.items())

    # ---- applying -----------------------------------------------------------------------------

    def steps_started_before(self, now: float) -> int:
        """Steps scheduled by `now` (step 1 always; step j > 1 if it started strictly before)."""
        return max(1, int(np.searchsorted(self.times[: self.k], now, side="left")))

    def steps_ended_before(self, now: float) -> int:
        """Steps completed by `now`: those that ended strictly before it (touch-first on a tie)."""
        return int(np.searchsorted(self.times[1 : self.k + 1], now, side="left"))

    def catch_up(self, now: float) -> None:
        """Apply what step by step would have applied by `now`: the steps that ended, and the
        KV blocks of the step in flight (someone is about to read or change this engine)."""
        self.touched = True
        self._advance(self.steps_ended_before(now), self.steps_started_before(now))

    def left_by(self, now: float) -> int:
        """Requests that have finished by `now` but are still in the engine's running list
        (their steps are not applied yet): what a router must not count as load."""
        ended, done = self.steps_ended_before(now), self.done
        return sum(len(leaving) for f, leaving in self._finishing if done < f <= ended)

    def cut(self, now: float) -> bool:
        """Drop the steps that would start at or after `now`; True if any were dropped."""
        m = self.steps_started_before(now)
        if m >= self.k:
            return False
        self.k = m
        self.end_s = float(self.times[m])
        self._set_finishing(m)
        return True

    def finish(self) -> None:
        """The run's last step ended: apply everything and write its steps into the trace."""
        self._advance(self.k, self.k)
        k, engine = self.k, self.engine
        # Plan about as far as runs here get: twice as far after a full run, twice the steps
        # taken after one cut short (only the planning cost depends on it, never the trace).
        cap = self.worker.run_steps_cap
        cap = 2 * cap if k == self.planned else 2 * k
        self.worker.run_steps_cap = min(MAX_RUN_STEPS, max(16, cap))
        self.worker.clock.decode_run(self.worker, k)  # a budget counts them
        kv = engine.kv
        # KV in use after each step: the blocks taken so far minus those finishes freed. The
        # last row reads the cache itself: a touch (a P->D reservation) may have taken blocks
        # during the last step, and step by step would count them there.
        freed = np.zeros(k, dtype=np.int64)
        for step, blocks in self.freed_at:
            freed[step - 1 :] += blocks
        used = (kv.num_blocks - (self.free0 - self.need[:k] + freed)) * kv.block_size
        assert self.touched or used[-1] == kv.used_tokens, "fast-forward: KV out of step"
        used[-1] = kv.used_tokens
        compute, memory, overhead, comm = (c[:k] for c in self.cost)
        engine.recorder.step_run(engine.name, self.first_step, self.times[: k + 1],
                                 self.active[:k], used, kv.capacity_tokens, compute, memory,
                                 overhead, comm)  # fmt: skip

    def _advance(self, done_to: int, allocated_to: int) -> None:
        """Bring the engine to: steps 1..done_to applied, KV blocks of steps 1..allocated_to held.

        Only the KV cache cares about order: a finish frees blocks that later steps may take
        (with prefix caching the freed blocks' places in the free queue decide later hits). So
        blocks are taken phase by phase: those of the steps up to a finishing step f, then step
        f's frees, then the next phase. Within a phase, blocks come off the free queue's front
        request by request rather than step by step: with no free or lookup in between the same
        blocks are taken, and the blocks a decode fills hold the request's own tokens, which the
        cache only counts (sim/prefix_cache.py), so nothing else can differ. Tokens, segments
        and counters are per request: applied once.
        """
        if done_to <= self.done and allocated_to <= self.allocated:
            return
        engine, reqs, c0s = self.engine, self.reqs, self.c0_list
        kv = engine.kv
        bs = kv.block_size
        for f, leaving in self._finishing:
            if f <= self.done:
                continue
            if f > done_to:
                break
            self._take_blocks(f)
            before = kv.free_blocks
            for i in leaving:  # their last token came in step f: they leave, in running order
                req = reqs[i]
                self._book(i, f)
                kv.cache_full(req, c0s[i] + f)
                engine._finish(req, self._times[f])
            self.freed_at.append((f, kv.free_blocks - before))
        self._take_blocks(allocated_to)
        for i in self._order:
            r = self.rem_list[i]
            if r > done_to:
                req = reqs[i]
                self._book(i, done_to)
                total = c0s[i] + min(allocated_to, r)
                if total // bs > req.num_cached_blocks:
                    kv.cache_full(req, total)
        self.done = max(self.done, done_to)
        self.allocated = max(self.allocated, allocated_to)
        engine.num_steps = self.first_step + self.done

    def _take_blocks(self, upto: int) -> None:
        """Blocks for every request still in step `upto` to hold what it computes (c0 + upto)."""
        if upto <= self.taken_to:
            return
        self.taken_to = upto
        bs = self.engine.kv.block_size
        growing, totals = [], []
        for req, c0, r in zip(self.reqs, self.c0_list, self.rem_list, strict=True):
            if r >= upto and c0 + upto > req.blocks * bs:
                growing.append(req)
                totals.append(c0 + upto)
        if growing:
            self.engine.kv.take_blocks(growing, totals)

    def _book(self, i: int, upto: int) -> None:
        """Engine.complete's bookkeeping for request i, steps done+1..upto at once: counters,
        one token at each step's end, and its decode segment (one stretch, extended if it
        continues the request's last one)."""
        done = self.booked[i]
        n = upto - done
        if n <= 0:
            return
        self.booked[i] = upto
        req = self.reqs[i]
        req.num_computed += n
        req.num_generated += n
        if req.num_computed > req.high_water:
            req.high_water = req.num_computed
        times = self._times
        req.token_times.extend(times[done + 1 : upto + 1])
        rec, wid = self.engine.recorder, self.engine._worker_code
        start, end = times[done], times[upto]
        last_step = self.first_step + upto - 1
        j = req.last_segment
        if (j >= 0 and rec.end[j] == start and rec.kind[j] == DECODE and rec.flags[j] == 0
                and rec.worker[j] == wid):  # fmt: skip
            rec.end[j] = end
            rec.tokens[j] += n
            rec.last[j] = last_step
        else:
            rec.add(req, wid, DECODE, start, end, n, 0, self.first_step + done)
            rec.last[req.last_segment] = last_step


def _disagree() -> None:
    warnings.warn(
        "sim.fastforward: step_cost no longer matches its decode-only form "
        "(memory + context * decode_kv_s_per_token, added last); pricing runs step by step",
        RuntimeWarning,
        stacklevel=3,
    )


def start_run(worker: Worker, batch: Batch | None = None, admitted: bool = False
              ) -> DecodeRun | None:  # fmt: skip
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
    c0, rem, blocks = [], [], []
    for r in running:
        if not r.is_decoding:
            return None
        c0.append(r.num_computed)
        rem.append(r.output_tokens - r.num_generated)
        blocks.append(r.blocks)
    policy = engine.policy
    horizon = policy.decode_horizon(engine, now)
    if horizon is None:
        return None
    limit = min(horizon, limit)
    run = DecodeRun(worker, list(running), np.array(c0), np.array(rem), np.array(blocks),
                    allocated=0 if batch is None else 1)  # fmt: skip
    blocked = bool(engine.waiting or engine.swapped or worker.inbox)
    if run.plan(limit, blocked, policy.decode_kv_margin) < 2:
        return None
    return run
