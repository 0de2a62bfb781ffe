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
  Each step is priced with the SAME float operations as `step_cost` and simpy (the b-terms
  come from step_cost itself, then memory + c * kv_s, then the left-to-right sum; step ends are
  a running sum t + d, as simpy's `now + delay`), so the trace is bit-identical to stepping,
  not merely close. Each run checks its last step against `step_cost` and prices step by step
  if they ever disagree (a cost model changed without this file).
- Cost: a few float operations per step and a few list operations per request per run (no
  numpy: runs are short between arrivals, and numpy's call overhead would dominate them).
  The requests still in a run when it is applied get their tokens and segments together
  (`_book_all`, `TraceRecorder.add_same`).
"""

from __future__ import annotations

import math
import warnings
from array import array
from bisect import bisect_left
from heapq import heappush
from typing import TYPE_CHECKING

import simpy
from simpy.events import NORMAL

from sim.recorder import KIND_CODE, seg_code

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

    def check(self, batch: int, context: int, seconds: float, memory: float) -> bool:
        """Whether step_cost agrees with a step priced here (else price step by step)."""
        c = self.cost.step_cost((), batch, context)
        if (c.seconds, c.compute_s, c.memory_s) == (seconds, self.compute[batch], memory):
            return True
        self.kv_s = None  # this cost model is not of that form: price step by step
        _disagree()
        return False


class DecodeRun:
    """A run of plain decode steps planned at once, applied when it ends (or when touched).

    Step j (1-based) starts at `times[j-1]` and ends at `times[j]`. Request i (in running order)
    takes part in steps 1..rem[i]; it finishes at step rem[i] if that is within the run.
    `done` steps are applied (tokens, segments, finishes) and `allocated` steps hold their KV
    blocks; the engine's state is always that of step by step at the last applied instant.
    """

    def __init__(self, worker: Worker, reqs: list, c0: list[int], rem: list[int],
                 blocks: list[int], allocated: int) -> None:  # fmt: skip
        self.worker, self.engine = worker, worker.engine
        self.reqs = reqs
        self.c0_list = c0  # tokens in each request's KV before step 1 (its decode context)
        self.rem_list = rem  # tokens each request still has to generate before step 1
        self.blocks0 = blocks  # KV blocks each holds (step 1's included when it is scheduled)
        self.first_step = worker.engine.num_steps
        self.done = 0
        self.allocated = allocated  # 1 when step 1 was scheduled by the engine itself
        self.free0 = worker.engine.kv.free_blocks  # free blocks when planned
        self.freed_at: list[tuple[int, int]] = []  # (step, blocks its finishes freed)
        self.taken_to = allocated  # blocks are held for the steps up to this one
        self.booked = [0] * len(reqs)  # the last step applied to each request
        self.touched = False  # another process read or changed the engine mid-run
        self.deferred = False  # a catch-up left the running requests' tokens for later
        self.k = 0

    # ---- planning -----------------------------------------------------------------------------

    def plan(self, limit_s: float, blocked: bool, margin: int) -> int:
        """Decide how many steps to take (0 or 1: not worth it) and price them.

        Step j is taken while (1) nobody's finish before it could let a waiting request in
        (`blocked`: the first finish ends the run), (2) the blocks taken through step j leave
        the policy's margin free (blocks freed by finishes inside the run are not counted on)
        and (3) it starts before limit_s (touch-first on a tie); at most run_steps_cap steps.
        """
        worker = self.worker
        bs = self.engine.kv.block_size
        c0s, rems = self.c0_list, self.rem_list
        terms = worker.decode_terms
        b, now = len(c0s), worker.env.now
        k = min(min(rems) if blocked else max(rems), worker.run_steps_cap)
        if limit_s < math.inf:  # no step is shorter than its batch's at context 0 (nor than
            # one decode of one request, when finishes shrink the batch): a bound to plan to
            shortest = terms.lower_bound(b) if blocked else terms.step_min
            k = min(k, int((limit_s - now) / shortest) + 2)
        if k < 2:
            return 0
        # Request i is in steps 1..rem_i; it takes a new block at each step j whose token
        # (c0 + j) starts a block: the first at j = blocks * bs - c0 + 1, then every bs steps.
        leave_n, leave_c, take = [0] * (k + 1), [0] * (k + 1), [0] * (k + 1)
        leaving: dict[int, list[int]] = {}  # step -> requests whose last token comes then
        for i, (c0, r, b0) in enumerate(zip(c0s, rems, self.blocks0, strict=True)):
            first = b0 * bs - c0 + 1
            if first < 1:
                return 0  # it holds fewer blocks than its KV (never so in a plain decode)
            if r <= k:
                leave_n[r] += 1
                leave_c[r] += c0 + r  # its context at the step after its last
                leaving.setdefault(r, []).append(i)  # (in running order)
                last = r
            else:
                last = k
            if first <= last:  # (a run is mostly shorter than a block: one take at most)
                take[first] += 1
                if first + bs <= last:
                    for j in range(first + bs, last + 1, bs):
                        take[j] += 1
        context = sum(c0s)
        terms.cover(b)
        exact = terms.kv_s is not None
        cost = None if exact else terms.cost
        room = self.free0 - margin
        t = now
        times, active, memory, needs = array("d", (t,)), [], [], []
        slow: tuple[list, list, list] | None = None if exact else ([], [], [])
        need = 0
        j = 1
        kv_s = terms.kv_s
        if exact:  # DecodeTerms.price, inline (the batch-size terms change when b does)
            head_b, mem_b, comm_b = terms.head[b], terms.memory[b], terms.comm[b]
        add_time, add_active, add_memory, add_need = (
            times.append, active.append, memory.append, needs.append)  # fmt: skip
        seconds = mem = 0.0
        last_b = last_context = 0
        while j <= k and t < limit_s:
            need += take[j]
            if need > room:
                break  # free blocks would fall below the margin: stop before this step
            if exact:
                mem = mem_b + context * kv_s
                seconds = head_b + mem + comm_b
            else:  # any cost model: step_cost itself
                c = cost.step_cost((), b, context)
                seconds, mem = c.seconds, c.memory_s
                slow[0].append(c.compute_s)
                slow[1].append(c.overhead_s)
                slow[2].append(c.comm_s)
            last_b, last_context = b, context
            t = t + seconds  # as simpy's now + delay
            add_time(t)
            add_active(b)
            add_memory(mem)
            add_need(need)
            context += b  # every request one token more ...
            if leave_n[j]:  # ... but those whose last token this was leave
                context -= leave_c[j]
                b -= leave_n[j]
                if exact and b:
                    head_b, mem_b, comm_b = terms.head[b], terms.memory[b], terms.comm[b]
            j += 1
        k = j - 1
        if k < 2:
            return 0
        if exact and not terms.check(last_b, last_context, seconds, mem):
            return self.plan(limit_s, blocked, margin)  # again, step by step
        self.k = self.planned = k
        self.times, self.active, self.memory, self.need, self.slow = (
            times, active, memory, needs, slow)  # fmt: skip
        self.end_s = times[k]
        self._times = times  # (an array: sliced into token_times)
        # (step, requests whose last token comes then) for the finishes in steps 1..k
        finishing = sorted(leaving.items())
        if finishing and finishing[-1][0] > k:
            finishing = [item for item in finishing if item[0] <= k]
        self._finishing = finishing
        return k

    # ---- applying -----------------------------------------------------------------------------

    def steps_started_before(self, now: float) -> int:
        """Steps scheduled by `now` (step 1 always; step j > 1 if it started strictly before)."""
        return max(1, bisect_left(self.times, now, 0, self.k))

    def steps_ended_before(self, now: float) -> int:
        """Steps completed by `now`: those that ended strictly before it (touch-first on a tie)."""
        return bisect_left(self.times, now, 1, self.k + 1) - 1

    def catch_up(self, now: float) -> None:
        """Apply what step by step would have applied by `now` to the KV cache and the running
        list (someone is about to reserve blocks here): the steps that ended, the KV blocks of
        the step in flight, and the requests that finished. The tokens and segments of the
        requests still running are left for the run's end (nobody reads them before: they
        come out the same, a stretch extended once instead of at every touch)."""
        self.touched = True
        self._advance(self.steps_ended_before(now), self.steps_started_before(now), book=False)

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
        self.end_s = self.times[m]
        self._finishing = [item for item in self._finishing if item[0] <= m]
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
        # KV in use after each step: the blocks taken so far minus those finishes freed (the
        # recorder works the rows out at the end). The last row reads the cache itself: a touch
        # (a P->D reservation) may have taken blocks during the last step, and step by step
        # would count them there.
        base = kv.num_blocks - self.free0
        freed = sum(blocks for _, blocks in self.freed_at)
        assert self.touched or (base + self.need[k - 1] - freed) * kv.block_size == (
            kv.used_tokens), "fast-forward: KV out of step"  # fmt: skip
        if self.slow is not None:
            compute, overhead, comm = (col[:k] for col in self.slow)
            terms = None
        else:  # the batch-size terms: the recorder looks them up by batch size at the end
            compute = overhead = comm = None
            t = self.worker.decode_terms
            terms = (t.compute, t.overhead, t.comm)
        engine.recorder.step_run(
            engine.name, self.first_step, self._times[: k + 1], self.active[:k],
            self.need[:k], base, kv.block_size, self.freed_at, kv.used_tokens, kv.capacity_tokens,
            self.memory[:k], terms, compute, overhead, comm,
        )  # fmt: skip

    def _advance(self, done_to: int, allocated_to: int, book: bool = True) -> None:
        """Bring the engine to: steps 1..done_to applied, KV blocks of steps 1..allocated_to held.

        Only the KV cache cares about order: a finish frees blocks that later steps may take
        (with prefix caching the freed blocks' places in the free queue decide later hits). So
        blocks are taken phase by phase: those of the steps up to a finishing step f, then step
        f's frees, then the next phase. Within a phase, blocks come off the free queue's front
        request by request rather than step by step: with no free or lookup in between the same
        blocks are taken, and the blocks a decode fills hold the request's own tokens, which the
        cache only counts (sim/prefix_cache.py), so nothing else can differ. Tokens, segments
        and counters are per request: applied once (with `book`; else left for later, with the
        prefix cache's count of their full blocks, which depends on their token count).
        """
        if done_to <= self.done and allocated_to <= self.allocated and not (book and self.deferred):
            return
        self.deferred = not book
        engine, reqs, c0s = self.engine, self.reqs, self.c0_list
        kv = engine.kv
        caching = kv.caching
        for f, leaving in self._finishing:
            if f <= self.done:
                continue
            if f > done_to:
                break
            self._take_blocks(f)
            before = kv.free_blocks
            for i in leaving:  # their last token came in step f: they leave, in running order
                req = reqs[i]
                req.blocks = self._blocks_at(i, f)
                self._book(i, f)
                if caching:
                    kv.cache_full(req, c0s[i] + f)
                engine._finish(req, self._times[f])
            self.freed_at.append((f, kv.free_blocks - before))
        self._take_blocks(allocated_to)
        # The requests still in the run (the rest finished above): all applied up to the same
        # step, so their tokens, counters and segments are alike, and go in at once.
        tail = [i for i, r in enumerate(self.rem_list) if r > done_to] if book else ()
        if tail:
            self._book_all(tail, done_to, allocated_to)
        self.done = max(self.done, done_to)
        self.allocated = max(self.allocated, allocated_to)
        engine.num_steps = self.first_step + self.done

    def _take_blocks(self, upto: int) -> None:
        """Blocks for every request still in step `upto` to hold what it computes (c0 + upto):
        the plan counted them (`need`), so they come off the free queue as a count; each
        request's own count is set when it leaves or the run ends (`_blocks_at`)."""
        taken_to = self.taken_to
        if upto <= taken_to:
            return
        self.taken_to = upto
        need = self.need
        count = need[upto - 1] - (need[taken_to - 1] if taken_to else 0)
        if count:
            self.engine.kv.take(count)

    def _blocks_at(self, i: int, step: int) -> int:
        """KV blocks request i holds once the blocks of steps 1..step are taken."""
        total = self.c0_list[i] + min(step, self.rem_list[i])
        return max(self.blocks0[i], -(-total // self.engine.kv.block_size))

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
        if j >= 0 and rec.end[j] == start and rec.code[j] == seg_code(wid, DECODE):
            rec.end[j] = end
            rec.tokens[j] += n
            rec.last[j] = last_step
        else:
            rec.add(req, wid, DECODE, start, end, n, 0, self.first_step + done)
            rec.last[req.last_segment] = last_step

    def _book_all(self, tail: list[int], upto: int, allocated_to: int) -> None:
        """`_book(i, upto)` for each request i of `tail`, all applied up to the same step, and
        their KV blocks as of step `allocated_to` (held, and full ones registered)."""
        reqs, booked = self.reqs, self.booked
        c0s, rems, blocks0 = self.c0_list, self.rem_list, self.blocks0
        kv = self.engine.kv
        bs, caching = kv.block_size, kv.caching
        done = booked[tail[0]]
        n = upto - done
        times = self._times
        tokens = times[done + 1 : upto + 1]
        rec, wid = self.engine.recorder, self.engine._worker_code
        start, end = times[done], times[upto]
        last_step = self.first_step + upto - 1
        code = seg_code(wid, DECODE)
        seg_end, seg_code_col, seg_tokens, seg_last = rec.end, rec.code, rec.tokens, rec.last
        new = []
        for i in tail:
            req = reqs[i]
            if n > 0:
                booked[i] = upto
                req.num_computed += n
                req.num_generated += n
                if req.num_computed > req.high_water:
                    req.high_water = req.num_computed
                req.token_times.extend(tokens)
                j = req.last_segment
                if j >= 0 and seg_end[j] == start and seg_code_col[j] == code:
                    seg_end[j] = end
                    seg_tokens[j] += n
                    seg_last[j] = last_step
                else:
                    new.append(req)
            total = c0s[i] + min(allocated_to, rems[i])  # (after its tokens: the cache reads them)
            held = -(-total // bs)
            if held > blocks0[i]:
                req.blocks = held
            if caching and total // bs > req.num_cached_blocks:
                kv.cache_full(req, total)
        rec.add_same(new, code, start, end, n, self.first_step + done, last_step)


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
    if not all([r.is_decoding for r in running]):
        return None
    c0 = [r.num_computed for r in running]  # (a comprehension per column: faster than appends)
    rem = [r.output_tokens - r.num_generated for r in running]
    blocks = [r.blocks for r in running]
    policy = engine.policy
    horizon = policy.decode_horizon(engine, now)
    if horizon is None:
        return None
    limit = min(horizon, limit)
    run = DecodeRun(worker, list(running), c0, rem, blocks, allocated=0 if batch is None else 1)
    blocked = bool(engine.waiting or engine.swapped or worker.inbox)
    if run.plan(limit, blocked, policy.decode_kv_margin) < 2:
        return None
    return run
