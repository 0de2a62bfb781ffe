"""Which request rows a Gantt shows, and which it marks: a zoom that keeps the evidence.

Past about 30 requests per panel, rows get too thin to read, so a lesson's timeline shows at
most ZOOM_ROWS of them by default: the stretch of consecutive arrivals with the most evidence,
plus every row the lesson talks about (its marks). The simulations are not changed: every
number on the page (tables, readouts, effect figures) still comes from the full runs, and a
control under the chart shows all the rows.

- Evidence of a request, summed over the compared runs: seconds spent queued, preempted or
  stalled, plus seconds of decode slowed by a prefill (the white, grey, purple and hatched
  parts a lesson asks students to look at).
- The window slides over the requests in arrival order, so the zoom still reads as a piece of
  the timeline (not scattered rows); marked rows count as infinitely interesting, and any
  marked row the window misses replaces the window's least interesting unmarked row.
- Marks are rules, (requests column, minimum value, tag): e.g. ("prompt_tokens", 8000,
  "long") tags every prompt of 8,000 tokens or more. Rules are plain tuples, so a figure stays
  cacheable by their fingerprint.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sim.core.trace import RunResult

ZOOM_ROWS = 30  # rows per panel by default (the "about 30 rows or fewer")
COMPACT_ROWS = 20  # ... in the compact (projector) layout
EVIDENCE_KINDS = ("queued", "preempted", "stall")
MarkRule = tuple[str, float, str]  # (requests column, minimum value, tag shown on the row)


def marked_ids(run: RunResult, rules: Sequence[MarkRule]) -> dict[int, str]:
    """request id -> tag of every request a rule marks (the first matching rule's tag)."""
    out: dict[int, str] = {}
    q = run.requests
    for column, minimum, tag in rules:
        if column not in q.columns:
            continue
        for rid in q.loc[q[column] >= minimum, "request_id"].astype(int).tolist():
            out.setdefault(rid, tag)
    return out


def evidence(run: RunResult, ids: np.ndarray) -> np.ndarray:
    """Seconds of queued, preempted, stall and slowed-decode time of each request in `ids`."""
    segs = run.segments
    if not len(segs):
        return np.zeros(len(ids))
    kind = segs["kind"].to_numpy(dtype=object)
    picked = np.isin(kind, EVIDENCE_KINDS) | ((kind == "decode") & segs["slowed"].to_numpy(bool))
    rid = segs["request_id"].to_numpy(dtype=np.int64)[picked]
    dur = (segs["end_s"].to_numpy(dtype=float) - segs["start_s"].to_numpy(dtype=float))[picked]
    where = np.searchsorted(ids, rid)
    ok = (where < len(ids)) & (ids[np.minimum(where, len(ids) - 1)] == rid)
    out = np.zeros(len(ids))
    np.add.at(out, where[ok], dur[ok])
    return out


def arrival_order(run: RunResult, ids: np.ndarray) -> np.ndarray:
    """`ids` sorted by arrival time (ties by id); ids without a request row go last."""
    q = run.requests
    arrival = dict(
        zip(q["request_id"].astype(int).tolist(), q["arrival_s"].astype(float), strict=True)
    )
    key = np.array([arrival.get(i, np.inf) for i in ids.tolist()])
    return ids[np.lexsort((ids, key))]


def zoom_rows(
    runs: Sequence[RunResult], ids: np.ndarray, marks: dict[int, str], limit: int = ZOOM_ROWS
) -> np.ndarray:
    """The ids (sorted) of at most `limit` rows to show; all of `ids` when they fit."""
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) <= limit:
        return ids
    score = sum(evidence(run, ids) for run in runs)
    marked = np.isin(ids, np.fromiter(marks, dtype=np.int64, count=len(marks)))
    order = arrival_order(runs[0], ids)
    pos = np.searchsorted(ids, order)
    s = np.where(marked, 1e9, score)[pos]
    window = np.convolve(s, np.ones(limit), mode="valid")  # sum over each `limit` run
    first = int(np.argmax(window))
    chosen = list(order[first : first + limit])
    seen = {int(i) for i in chosen}
    missing = [int(i) for i in ids[marked] if int(i) not in seen][:limit]
    if missing:
        by_score = dict(zip(ids.tolist(), np.where(marked, np.inf, score).tolist(), strict=True))
        keep = sorted(chosen, key=lambda i: by_score[int(i)], reverse=True)
        chosen = keep[: limit - len(missing)] + missing
    return np.sort(np.asarray(chosen, dtype=np.int64))
