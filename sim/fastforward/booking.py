"""Booking a run of steps taken at once (sim/fastforward/decode_run.py): what Engine.complete would
have written step by step, for each request at once.

- A request that leaves the run is booked as it leaves (`_book`: counters, one token at each
  step's end, its decode stretch), the requests still running when the run ends together
  (`_book_all`): before the run's first admission step.
- After it (`lazy`), only counters follow along (`_count`: the prefix cache reads them), and
  every token time and decode stretch is written at the run's end (`_book_at_once`), the
  stretches as numpy columns cut at the admission steps (their decodes are SLOWED ones).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np

from sim.core.recorder import KIND_CODE, SLOWED, seg_code

DECODE = KIND_CODE["decode"]


class RunBooking:
    """DecodeRun's bookkeeping of tokens and segments (its state: DecodeRun.__init__)."""

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
            t[s_step - 1],
            t[e_step],
            e_step - s_step + 1,
            self.first_step + s_step - 1,
            self.first_step + e_step - 1,
        ]
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
        for req, row, has in zip(
            reqs, (base + kept[last_rows] - 1).tolist(), keep[last_rows].tolist(), strict=True
        ):
            if has:
                req.last_segment = row

    def _book(self, i: int, upto: int) -> None:
        """Engine.complete's bookkeeping for request i, steps booked+1..upto at once."""
        self._book_all([i], upto, 0, blocks=False)

    def _book_all(self, tail: list[int], upto: int, allocated_to: int, blocks: bool = True) -> None:
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
                    rec.add_same(
                        members,
                        code,
                        times[a - 1],
                        times[b],
                        b - a + 1,
                        first_step + a - 1,
                        first_step + b - 1,
                    )
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
