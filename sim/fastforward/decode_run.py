"""A run of engine steps taken at once: plain decode steps, and the admission steps it carries.

See sim/fastforward/steps.py for why a run may be taken at once and how its steps are priced. Here:
- PLANNING (sim/fastforward/planning.py): from when each request in the run takes a new KV block and
  when it leaves (noted as it joins), price the next steps one after the other (bit for bit as
  step_cost would).
- APPLYING (`_advance`, here): the engine's KV cache and running list follow step by step's at
  any instant someone looks; tokens and segments of the requests still running are booked
  once, at the end (sim/fastforward/booking.py).
- ADMISSION STEPS (sim/fastforward/admission.py) make a run longer: the step after a run's last one
  is
  formed by the policy's own admission code, and when it only adds whole prompts the run takes
  it as one of its steps (its decodes are SLOWED ones, `mixed`) and the admitted requests JOIN
  the run as decoders from the next step on. Request i takes part in steps join[i] + 1 ..
  ends[i]; its decode context at step j is c0[i] + (j - join[i] - 1) tokens.
Steps are 1-based within the run: step j runs from times[j - 1] to times[j].
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import TYPE_CHECKING

from sim.fastforward.booking import RunBooking
from sim.fastforward.planning import RunPlanning

if TYPE_CHECKING:
    from sim.cluster.worker import Worker

# Steps planned at once: a longer quiet stretch takes several plans. Where nothing bounds a run
# in advance (routers, P/D: another worker may cut it short) planning far costs for nothing.
MAX_RUN_STEPS = 512


class DecodeRun(RunPlanning, RunBooking):
    """Steps taken at once, applied when the run ends (or when touched).

    `done` steps are applied (tokens, segments, finishes) and `allocated` steps hold their KV
    blocks; the engine's state is always that of step by step at the last applied instant.
    """

    def __init__(
        self,
        worker: Worker,
        reqs: list,
        c0: list[int],
        rem: list[int],
        blocks: list[int],
        allocated: int,
    ) -> None:
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
        self.absorbs = (
            False  # the step after the run's end may join it (sim/fastforward/admission.py)
        )
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
            "fast-forward: KV out of step"
        )
        mixed = [
            (
                m - 1,
                batch.prefill_tokens,
                len(batch.prefill_chunks),
                timing.compute_s,
                timing.overhead_s,
                timing.comm_s,
            )
            for m, (batch, timing) in self.mixed.items()
        ]
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
            engine.name,
            self.first_step + a - 1,
            self.times[a - 1 : b + 1],
            self.active[a - 1 : b],
            self.need[a - 1 : b],
            base,
            kv.block_size,
            freed,
            kv_last,
            kv.capacity_tokens,
            self.memory[a - 1 : b],
            terms,
            compute,
            overhead,
            comm,
            mixed,
        )

    def _advance(self, done_to: int, allocated_to: int, book: bool = True) -> None:
        """Bring the engine to: steps 1..done_to applied, KV blocks of steps 1..allocated_to held.

        Only the KV cache cares about order: a finish frees blocks that later steps may take
        (with prefix caching the freed blocks' places in the free queue decide later hits). So
        blocks are taken phase by phase: those of the steps up to a finishing step f, then step
        f's frees, then the next phase. Within a phase, blocks come off the free queue's front
        request by request rather than step by step: with no free or lookup in between the same
        blocks are taken, and the blocks a decode fills hold the request's own tokens, which the
        cache only counts (sim/core/prefix_cache.py), so nothing else can differ. Tokens, segments
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
