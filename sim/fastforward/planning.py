"""Planning a run of steps taken at once (sim/fastforward/decode_run.py): which steps come next,
and when.

- `join_run` notes a request's future when it joins the run (from its start, or after the
  admission step that admitted it): the steps at which it takes KV blocks (counted by phase:
  one every block_size steps from its first new block) and the step it leaves at.
- `_plan` prices the next steps one after the other, bit for bit as step_cost and simpy would,
  until the next event that could change a step's shape (see sim/fastforward/steps.py); it reads
  only the steps it prices, never every request.
- `admission_step` takes the step the policy formed at the run's end into the run
  (sim/fastforward/admission.py); `count_taken` tells a run budget how far the run has gone.
"""

from __future__ import annotations

import math
from heapq import heappop, heappush


class RunPlanning:
    """DecodeRun's planning (its state is set up in DecodeRun.__init__)."""

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

    def plan(self, limit_s: float, blocked: bool, margin: int) -> int:
        """Plan the run's first steps (0 or 1: not worth it, and nothing is planned)."""
        return self._plan(limit_s, blocked, self.free0 - margin, min_steps=2)

    def _plan(
        self,
        limit_s: float,
        blocked: bool,
        room: int,
        min_steps: int = 1,
        decided: int = 0,
        cap: int | None = None,
    ) -> int:
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
            self.slow = tuple(
                [col[n] for n in self.active] for col in (terms.compute, terms.overhead, terms.comm)
            )
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
            times.append,
            self.active.append,
            self.memory.append,
            self.need.append,
            self._finishing.append,
        )
        if exact:  # DecodeTerms.price, inline (the batch-size terms change when b does)
            head_b, mem_b, comm_b = terms.head[b], terms.memory[b], terms.comm[b]
        b0, context0 = b, context  # (the first step's shape: `check` prices it again)
        last, forced = s + k - 1, s + decided - 1
        take, short = 0, False
        for j in range(s, last + 1):
            if t >= limit_s and j > forced:
                break
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
        else:
            j = last + 1  # (every step of the range was planned: j is the one after)
        added = j - s
        if added < min_steps or (
            exact
            and added
            and terms.due()
            and not terms.check(b0, context0, *terms.price(b0, context0))
        ):
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
        """Step k + 1 is an admission step (sim/fastforward/admission.py): next_b decodes and the
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
            for col, value in zip(
                self.slow, (timing.compute_s, timing.overhead_s, timing.comm_s), strict=True
            ):
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
        counts them: sim/runs/budget.py). At the run's end and at each of its extensions, so that
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
