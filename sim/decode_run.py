"""A run of engine steps taken at once: plain decode steps, and the admission steps it carries.

See sim/fastforward.py for why a run may be taken at once and how its steps are priced. Here:
- PLANNING (`_plan`): from the requests in the run, when each takes a new KV block and when
  each leaves, price the next steps one after the other (bit for bit as step_cost would).
- APPLYING (`_advance`, `_book_all`): the engine's state follows step by step's at any instant
  someone looks; tokens and segments of requests still running are booked once, at the end.
- ADMISSION STEPS (sim/run_admission.py) make a run longer: the step after a run's last one is
  formed by the policy's own admission code, and when it only adds whole prompts the run takes
  it as one of its steps (its decodes are SLOWED ones, `mixed`) and the admitted requests JOIN
  the run as decoders from the next step on. Request i takes part in steps join[i] + 1 ..
  ends[i]; its decode context at step j is c0[i] + (j - join[i] - 1) tokens.
Steps are 1-based within the run: step j runs from times[j - 1] to times[j].
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from heapq import heappop, heappush
from typing import TYPE_CHECKING

import numpy as np

from sim.recorder import KIND_CODE, SLOWED, seg_code

if TYPE_CHECKING:
    from sim.cluster import Worker

DECODE = KIND_CODE["decode"]
# Steps planned at once: a longer quiet stretch takes several plans. Where nothing bounds a run
# in advance (routers, P/D: another worker may cut it short) planning far costs for nothing.
MAX_RUN_STEPS = 512


class DecodeRun:
    """Steps taken at once, applied when the run ends (or when touched).

    `done` steps are applied (tokens, segments, finishes) and `allocated` steps hold their KV
    blocks; the engine's state is always that of step by step at the last applied instant.
    """

    def __init__(self, worker: Worker, reqs: list, c0: list[int], rem: list[int],
                 blocks: list[int], allocated: int) -> None:  # fmt: skip
        self.worker, self.engine = worker, worker.engine
        self.reqs = reqs  # in running order (those who join later are appended: admission order)
        self.c0_list = c0  # tokens in each request's KV before its first step in the run
        self.rem_list = rem  # tokens each request still has to generate then
        self.blocks0 = blocks  # KV blocks each holds then
        self.join: list[int] = []  # request i takes part in steps join[i] + 1 .. ends[i]
        self.ends: list[int] = []
        self.first_step = worker.engine.num_steps
        self.done = 0
        self.allocated = allocated  # 1 when step 1 was scheduled by the engine itself
        self.free0 = worker.engine.kv.free_blocks  # free blocks when planned
        self.freed_at: list[tuple[int, int]] = []  # (step, blocks its finishes freed)
        self.taken_to = allocated  # blocks are held for the steps up to this one
        self.booked: list[int] = []  # the last step applied to each request
        self.touched = False  # another process read or changed the engine mid-run
        self.deferred = False  # a catch-up left the running requests' tokens for later
        self.absorbs = False  # the step after the run's end may join it (sim/run_admission.py)
        self.lazy = False  # it took one: tokens and stretches are booked at the end
        self.k = self.planned = 0
        self.counted = 0  # plain steps the clock has been told of (`count_taken`)
        self.times = array("d", (worker.env.now,))  # times[j]: step j's end (times[0]: start)
        # Per step (index j - 1): decodes, memory seconds, KV blocks taken since the run began.
        self.active: list[int] = []
        self.memory: list[float] = []
        self.need: list[int] = []
        self.slow: tuple[list, list, list] | None = None  # compute, overhead, comm (any model)
        self.mixed: dict = {}  # step -> (Batch, StepTiming) of an admission step in the run
        self.mixed_steps: list[int] = []
        self._finishing: list[tuple[int, list[int]]] = []  # (step, who leaves then), by step
        self._fin_pos = 0  # entries before it are applied
        # What the requests will do, by step (kept as they join, so a plan need not look at
        # every request). KV blocks: a request takes one at every bs-th step from its first
        # new block on, so requests are counted by PHASE (that step mod bs): `phase[r]` of them
        # take a block at each step j with j % bs == r, `starts[j]` begin to at step j (phase
        # j % bs), and `leave_phases[j]` stop after it. Who leaves at step j (running order),
        # the context they take with them (at the step after their last), and the steps they
        # leave at (a heap).
        bs = worker.engine.kv.block_size
        self.phase = [0] * bs  # as of the step after the last one planned
        self.starts: dict[int, int] = {}
        self.leave_phases: dict[int, list[int]] = {}
        self.leave_at: dict[int, list[int]] = {}
        self.leave_ctx: dict[int, int] = {}
        self.end_heap: list[int] = []
        self.max_end = 0
        self.valid = True  # every request holds the blocks of its KV (always, in a decode)
        # The step after the last one planned: its decodes, their context, blocks they take.
        self.next_b = self.next_context = self.next_take = 0
        for i in range(len(reqs)):
            self.join_run(i, 0)
        self.next_take = self.starts.get(1, 0)
        self.kv_last: int | None = None  # KV in use after the last step, if not kv's own now
        self.end_s = worker.env.now

    def join_run(self, i: int, join: int) -> None:
        """Request i (c0_list, rem_list, blocks0 set) takes part from step join + 1 on: note
        when it takes blocks and leaves. (It adds to next_b and next_context: the caller
        makes those the step join + 1's.)"""
        c0, end = self.c0_list[i], join + self.rem_list[i]
        self.join.append(join)
        self.ends.append(end)
        self.booked.append(join)
        bs = self.engine.kv.block_size
        first = join + self.blocks0[i] * bs - c0 + 1  # the step of its first new block
        if first <= join:
            self.valid = False
        if first <= end:  # it takes blocks at first, first + bs, ... (their tokens start one)
            self.starts[first] = self.starts.get(first, 0) + 1
            self.leave_phases.setdefault(end, []).append(first % bs)
        leaving = self.leave_at.get(end)
        if leaving is None:
            self.leave_at[end] = [i]
            self.leave_ctx[end] = c0 + end - join
        else:
            leaving.append(i)
            self.leave_ctx[end] += c0 + end - join
        heappush(self.end_heap, end)
        if end > self.max_end:
            self.max_end = end
        self.next_b += 1
        self.next_context += c0

    # ---- planning -----------------------------------------------------------------------------

    def plan(self, limit_s: float, blocked: bool, margin: int) -> int:
        """Plan the run's first steps (0 or 1: not worth it, and nothing is planned)."""
        return self._plan(limit_s, blocked, self.free0 - margin, min_steps=2)

    def _plan(self, limit_s: float, blocked: bool, room: int, min_steps: int = 1,
              decided: int = 0, cap: int | None = None) -> int:  # fmt: skip
        """Plan and price more steps, from step k + 1 (next_b decodes, next_context tokens of
        context); returns how many.

        Step j is taken while (1) nobody's finish before it could let a waiting request in
        (`blocked`: the first finish ends the plan), (2) the blocks taken through step j stay
        within `room` (the run's count `need`; blocks freed by finishes are not counted on),
        (3) it starts before limit_s (touch-first on a tie), except the first `decided` ones,
        which the policy already formed; at most run_steps_cap (and `cap`) steps. Moves
        next_b, next_context and next_take on to the step after the last one planned.
        """
        worker = self.worker
        terms = worker.decode_terms
        s = self.k + 1
        now = self.times[s - 1]
        b, context = self.next_b, self.next_context
        if not b or not self.valid:
            return 0
        heap = self.end_heap
        while heap[0] < s:
            heappop(heap)
        first_end = heap[0]  # the first finish's step
        k = min((first_end if blocked else self.max_end) - s + 1, worker.run_steps_cap)
        if cap is not None:
            k = min(k, cap)
        if limit_s < math.inf:  # a bound to plan to: no step is shorter than its batch's at
            # context 0, the whole batch's until the first finish, one request's after it
            full = terms.lower_bound(b)
            quiet = first_end - s + 1  # steps of the whole batch
            if (limit_s - now) / full < quiet:
                k = min(k, int((limit_s - now) / full) + 2)
            else:
                k = min(k, quiet + int((limit_s - now - quiet * full) / terms.step_min) + 2)
        k = max(k, decided, 0)
        if k < min_steps:
            return 0
        terms.cover(b)
        exact = terms.kv_s is not None
        cost = None if exact else terms.cost
        if not exact and self.slow is None:  # (the steps so far were priced by batch size)
            self.slow = tuple([col[n] for n in self.active]
                              for col in (terms.compute, terms.overhead, terms.comm))  # fmt: skip
        slow = self.slow
        mark, fmark = len(self.need), len(self._finishing)  # (to take the plan back)
        need = self.need[-1] if self.need else 0
        t = now
        times, kv_s = self.times, terms.kv_s
        starts_get, leave_at, leave_ctx = self.starts.get, self.leave_at, self.leave_ctx
        leave_phases = self.leave_phases
        phase = self.phase[:]  # (kept if the plan is)
        bs = len(phase)
        add_time, add_active, add_memory, add_need, add_finish = (
            times.append, self.active.append, self.memory.append, self.need.append,
            self._finishing.append)  # fmt: skip
        if exact:  # DecodeTerms.price, inline (the batch-size terms change when b does)
            head_b, mem_b, comm_b = terms.head[b], terms.memory[b], terms.comm[b]
        seconds = mem = 0.0
        last_b = last_context = 0
        j, last, forced = s, s + k - 1, s + decided - 1
        take, short = 0, False
        while j <= last and (t < limit_s or j <= forced):
            r = j % bs
            take = phase[r] + starts_get(j, 0)  # blocks taken at step j
            need += take
            if need > room:
                short = True
                break  # free blocks would fall below the margin: stop before this step
            phase[r] = take
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
            leaving = leave_at.get(j)
            if leaving is not None:  # ... but those whose last token this was leave
                context -= leave_ctx[j]
                b -= len(leaving)
                add_finish((j, leaving))
                for r in leave_phases.get(j, ()):
                    phase[r] -= 1
                if exact and b:
                    head_b, mem_b, comm_b = terms.head[b], terms.memory[b], terms.comm[b]
            j += 1
        added = j - s
        if added < min_steps or (exact and added and terms.due()
                                 and not terms.check(last_b, last_context, seconds, mem)):
            self._truncate(mark)
            del self._finishing[fmark:]
            if added < min_steps:
                return 0
            return self._plan(limit_s, blocked, room, min_steps, decided, cap)  # step by step
        if not short:  # (else `take` is the blocks of step j, which did not fit)
            take = phase[j % bs] + starts_get(j, 0)
        self.next_b, self.next_context, self.next_take = b, context, take
        self.phase = phase
        self.k += added
        self.planned = self.k
        self.end_s = times[self.k]
        return added

    def admission_step(self, end: float, batch, timing, need: int, admitted: list) -> None:
        """Step k + 1 is an admission step (sim/run_admission.py): next_b decodes and the
        `admitted` requests' whole prompts (booked already), ending at `end`, KV blocks taken
        through it `need`. Those requests join the run from step k + 2 on."""
        k = self.k + 1
        self.lazy = True  # (who left before step k is booked already)
        self.mixed[k] = (batch, timing)
        self.mixed_steps.append(k)
        self.times.append(end)
        self.active.append(self.next_b)
        self.memory.append(timing.memory_s)
        self.need.append(need)
        if self.slow is not None:
            for col, value in zip(self.slow, (timing.compute_s, timing.overhead_s,
                                              timing.comm_s), strict=True):  # fmt: skip
                col.append(value)
        phase = self.phase
        phase[k % len(phase)] += self.starts.get(k, 0)  # (next_take counted them)
        self.next_context += self.next_b  # its decodes, one token more each ...
        leaving = self.leave_at.get(k)
        if leaving is not None:  # ... but those whose last token this was leave
            self.next_context -= self.leave_ctx[k]
            self.next_b -= len(leaving)
            self._finishing.append((k, leaving))
            for r in self.leave_phases.get(k, ()):
                phase[r] -= 1
        for req in admitted:
            i = len(self.reqs)
            self.reqs.append(req)
            self.c0_list.append(req.num_computed)
            self.rem_list.append(req.output_tokens - req.num_generated)
            self.blocks0.append(req.blocks)
            self.join_run(i, k)
        self.next_take = phase[(k + 1) % len(phase)] + self.starts.get(k + 1, 0)
        self.k = k
        self.allocated = max(self.allocated, k)
        self.end_s = end

    def count_taken(self) -> None:
        """Tell the clock how many plain steps were taken since it was last told (a run budget
        counts them: sim/budget.py). At the run's end and at each of its extensions, so that
        a run that goes on through arrivals is stopped by the budget as soon as a step-by-step
        run would be, give or take one plan. (Its admission steps were counted by the clock
        that priced them.)"""
        plain = self.k - len(self.mixed)
        if plain > self.counted:
            steps, self.counted = plain - self.counted, plain
            self.worker.clock.decode_run(self.worker, steps)

    def _truncate(self, mark: int) -> None:
        """Forget the steps planned after the first `mark`."""
        del self.times[mark + 1 :]
        del self.active[mark:], self.memory[mark:], self.need[mark:]
        if self.slow is not None:
            for col in self.slow:
                del col[mark:]

    # ---- what other processes see mid-run -----------------------------------------------------

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

    # ---- applying -----------------------------------------------------------------------------

    def finish(self) -> None:
        """The run's last step ended: apply everything and write its steps into the trace."""
        self._advance(self.k, max(self.k, self.allocated))
        if self.lazy:
            self._book_at_once(max(self.k, self.allocated))
        k, engine = self.k, self.engine
        # Plan about as far as runs here get: twice as far after a full run, twice the steps
        # taken after one cut short (only the planning cost depends on it, never the trace).
        cap = self.worker.run_steps_cap
        cap = 2 * cap if k == self.planned else 2 * k
        self.worker.run_steps_cap = min(MAX_RUN_STEPS, max(16, cap))
        self.count_taken()
        kv = engine.kv
        # KV in use after each step: the blocks taken so far minus those finishes freed. The
        # last row reads the cache itself: a touch (a P->D reservation) may have taken blocks
        # during the last step, and step by step would count them there.
        kv_last = kv.used_tokens if self.kv_last is None else self.kv_last
        base = kv.num_blocks - self.free0
        freed = sum(blocks for _, blocks in self.freed_at)
        assert self.touched or (base + self.need[k - 1] - freed) * kv.block_size == kv_last, (
            "fast-forward: KV out of step")  # fmt: skip
        mixed = [(m - 1, batch.prefill_tokens, len(batch.prefill_chunks), timing.compute_s,
                  timing.overhead_s, timing.comm_s)
                 for m, (batch, timing) in self.mixed.items()]  # fmt: skip
        self._record(1, k, base, self.freed_at, kv_last, mixed)

    def _record(self, a: int, b: int, base: int, freed: list, kv_last: int, mixed=()) -> None:
        """Write steps a..b into the trace at once (TraceRecorder.step_run; `mixed`: which of
        them are admission steps, and their own terms)."""
        engine, kv = self.engine, self.engine.kv
        if self.slow is not None:
            compute, overhead, comm = (col[a - 1 : b] for col in self.slow)
            terms = None
        else:  # the batch-size terms: the recorder looks them up by batch size at the end
            compute = overhead = comm = None
            t = self.worker.decode_terms
            terms = (t.compute, t.overhead, t.comm)
        engine.recorder.step_run(
            engine.name, self.first_step + a - 1, self.times[a - 1 : b + 1], self.active[a - 1 : b],
            self.need[a - 1 : b], base, kv.block_size, freed, kv_last, kv.capacity_tokens,
            self.memory[a - 1 : b], terms, compute, overhead, comm, mixed,
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
        engine, reqs, c0s, joins = self.engine, self.reqs, self.c0_list, self.join
        kv = engine.kv
        caching = kv.caching
        finishing, p = self._finishing, self._fin_pos
        while p < len(finishing) and finishing[p][0] <= done_to:
            f, leaving = finishing[p]
            p += 1
            self._take_blocks(f)
            before = kv.free_blocks
            for i in leaving:  # their last token came in step f: they leave, in running order
                req = reqs[i]
                req.blocks = self._blocks_at(i, f)
                if self.lazy:
                    self._count(i, f)  # (its tokens and stretches: at the run's end)
                else:
                    self._book(i, f)
                if caching:
                    kv.cache_full(req, c0s[i] + f - joins[i])
                engine._finish(req, self.times[f])
            self.freed_at.append((f, kv.free_blocks - before))
        self._fin_pos = p
        self._take_blocks(allocated_to)
        # The requests still in the run (the rest finished above), booked by groups applied up
        # to the same step: their tokens, counters and segments are alike, and go in at once.
        if book and not self.lazy:
            ends, booked = self.ends, self.booked
            groups: dict[int, list[int]] = {}
            for i in range(len(reqs)):
                if ends[i] > done_to:
                    groups.setdefault(booked[i], []).append(i)
            for tail in groups.values():
                self._book_all(tail, done_to, allocated_to)
        self.done = max(self.done, done_to)
        self.allocated = max(self.allocated, allocated_to)
        engine.num_steps = self.first_step + self.done

    def _take_blocks(self, upto: int) -> None:
        """Blocks for every request still in step `upto` to hold what it computes: the plan
        counted them (`need`), so they come off the free queue as a count; each request's own
        count is set when it leaves or the run ends (`_blocks_at`)."""
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
        total = self.c0_list[i] + min(step, self.ends[i]) - self.join[i]
        return max(self.blocks0[i], -(-total // self.engine.kv.block_size))

    def _pieces(self, done: int, upto: int) -> list[tuple[int, int, bool]]:
        """Steps done+1..upto as decode stretches (first, last, slowed): the admission steps
        among them are SLOWED decodes (they share the step with a prefill), the rest plain."""
        ms = self.mixed_steps
        lo, hi = bisect_right(ms, done), bisect_right(ms, upto)
        if lo == hi:
            return [(done + 1, upto, False)]
        pieces: list[tuple[int, int, bool]] = []
        a = done + 1
        for m in ms[lo:hi]:
            if m > a:
                pieces.append((a, m - 1, False))
            if pieces and pieces[-1][2] and pieces[-1][1] == m - 1:
                pieces[-1] = (pieces[-1][0], m, True)  # admission steps in a row: one stretch
            else:
                pieces.append((m, m, True))
            a = m + 1
        if a <= upto:
            pieces.append((a, upto, False))
        return pieces

    def _count(self, i: int, upto: int) -> None:
        """Request i's counters through step `upto` (what its KV blocks' bookkeeping reads)."""
        n = upto - self.booked[i]
        if n > 0:
            self.booked[i] = upto
            req = self.reqs[i]
            req.num_computed += n
            req.num_generated += n
            if req.num_computed > req.high_water:
                req.high_water = req.num_computed

    def _book_at_once(self, allocated_to: int) -> None:
        """A run that took admission steps in (`lazy`: nobody looks at it before its end)
        books the tokens and decode stretches of everyone there from its first admission step
        on here, their whole part of the run at once: the counters of those still running, one
        slice of token times each, and the stretches as numpy columns. Steps 1..k split into
        plain stretches and admission steps (runs of them merged): a request's stretches are
        its steps cut by those boundaries. (Who left before was booked when leaving.)"""
        k, ends = self.k, self.ends
        tail = [i for i in range(len(self.reqs)) if ends[i] > k]
        for i in tail:
            self._count(i, k)
        if tail:
            self._book_all(tail, k, allocated_to)  # (n = 0: only their KV blocks)
        m1 = self.mixed_steps[0]
        members = [i for i in range(len(self.reqs)) if ends[i] >= m1]
        reqs = [self.reqs[i] for i in members]
        join_of = [self.join[i] for i in members]
        joins = np.array(join_of, dtype=np.int64)
        lo = joins + 1  # each request's first and last step in the run
        hi = np.minimum(np.array([ends[i] for i in members], dtype=np.int64), k)
        times = self.times
        for req, a, b in zip(reqs, lo.tolist(), hi.tolist(), strict=True):
            req.token_times.extend(times[a : b + 1])
        starts, stops, slowed = [], [], []  # the run's stretches: steps starts[p]..stops[p]
        a = 1
        for m in self.mixed_steps:
            if slowed and slowed[-1] and stops[-1] == m - 1:
                stops[-1] = m  # admission steps in a row: one slowed stretch
            else:
                if a < m:
                    starts.append(a), stops.append(m - 1), slowed.append(False)
                starts.append(m), stops.append(m), slowed.append(True)
            a = m + 1
        if a <= k:
            starts.append(a), stops.append(k), slowed.append(False)
        starts_a, stops_a = np.array(starts), np.array(stops)
        p_lo, p_hi = np.searchsorted(stops_a, lo), np.searchsorted(stops_a, hi)
        count = p_hi - p_lo + 1  # stretches of each request (>= 1)
        first_piece = np.cumsum(count) - count
        owner = np.repeat(np.arange(len(reqs)), count)
        p = np.repeat(p_lo - first_piece, count) + np.arange(int(count.sum()))
        s_step = np.maximum(starts_a[p], lo[owner])
        e_step = np.minimum(stops_a[p], hi[owner])
        t = np.frombuffer(times, dtype=np.float64)
        rec, wid = self.engine.recorder, self.engine._worker_code
        plain = seg_code(wid, DECODE)
        columns = [
            np.array([r.request_id for r in reqs], dtype=np.int64)[owner],
            np.where(np.array(slowed)[p], seg_code(wid, DECODE, SLOWED), plain),
            t[s_step - 1], t[e_step], e_step - s_step + 1,
            self.first_step + s_step - 1, self.first_step + e_step - 1,
        ]  # fmt: skip
        # A request that was decoding before the run continues its last stretch (step 1 is a
        # plain decode step, and only the requests there from the start can have one).
        keep = np.ones(len(p), dtype=bool)
        start = times[0]
        seg_end, seg_code_col, seg_tokens, seg_last = rec.end, rec.code, rec.tokens, rec.last
        for i in range(len(reqs)):
            if join_of[i]:
                break  # (the requests that joined later come after those there from step 1)
            j = reqs[i].last_segment
            if j >= 0 and seg_end[j] == start and seg_code_col[j] == plain:
                q = int(first_piece[i])
                seg_end[j] = float(columns[3][q])
                seg_tokens[j] += int(columns[4][q])
                seg_last[j] = int(columns[6][q])
                keep[q] = False
        base = rec.add_columns(*(c[keep] for c in columns))
        kept = np.cumsum(keep)  # a request's last stretch: the last kept row of its rows
        last_rows = first_piece + count - 1
        for req, row, has in zip(reqs, (base + kept[last_rows] - 1).tolist(),
                                 keep[last_rows].tolist(), strict=True):  # fmt: skip
            if has:
                req.last_segment = row

    def _book(self, i: int, upto: int) -> None:
        """Engine.complete's bookkeeping for request i, steps booked+1..upto at once."""
        self._book_all([i], upto, 0, blocks=False)

    def _book_all(self, tail: list[int], upto: int, allocated_to: int, blocks: bool = True
                  ) -> None:  # fmt: skip
        """Engine.complete's bookkeeping for each request i of `tail` (all applied up to the
        same step), steps booked+1..upto at once: counters, one token at each step's end, and
        its decode stretches (the first extends the request's last one if it continues it);
        with `blocks`, their KV blocks as of step `allocated_to` (held, full ones registered)."""
        reqs, booked = self.reqs, self.booked
        done = booked[tail[0]]
        n = upto - done
        times = self.times
        rec, wid = self.engine.recorder, self.engine._worker_code
        seg_end, seg_code_col, seg_tokens, seg_last = rec.end, rec.code, rec.tokens, rec.last
        first_step = self.first_step
        if n > 0:
            tokens = times[done + 1 : upto + 1]
            pieces = self._pieces(done, upto)
            a, b, slowed = pieces[0]
            start, end = times[a - 1], times[b]
            code = seg_code(wid, DECODE, SLOWED if slowed else 0)
            new = []
            for i in tail:
                req = reqs[i]
                booked[i] = upto
                req.num_computed += n
                req.num_generated += n
                if req.num_computed > req.high_water:
                    req.high_water = req.num_computed
                req.token_times.extend(tokens)
                j = req.last_segment
                if j >= 0 and seg_end[j] == start and seg_code_col[j] == code:
                    seg_end[j] = end
                    seg_tokens[j] += b - a + 1
                    seg_last[j] = first_step + b - 1
                else:
                    new.append(req)
            rec.add_same(new, code, start, end, b - a + 1, first_step + a - 1, first_step + b - 1)
            if len(pieces) > 1:
                members = [reqs[i] for i in tail]
                for a, b, slowed in pieces[1:]:
                    code = seg_code(wid, DECODE, SLOWED if slowed else 0)
                    rec.add_same(members, code, times[a - 1], times[b], b - a + 1,
                                 first_step + a - 1, first_step + b - 1)  # fmt: skip
        if not blocks:
            return
        c0s, ends, blocks0, joins = self.c0_list, self.ends, self.blocks0, self.join
        kv = self.engine.kv
        bs, caching = kv.block_size, kv.caching
        for i in tail:
            req = reqs[i]
            total = c0s[i] + min(allocated_to, ends[i]) - joins[i]  # (the cache reads tokens)
            held = -(-total // bs)
            if held > blocks0[i]:
                req.blocks = held
            if caching and total // bs > req.num_cached_blocks:
                kv.cache_full(req, total)
