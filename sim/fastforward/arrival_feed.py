"""Arrivals handed straight to the one worker of a colocated run, at the event speed's instants.

Why
- Step by step, a client process (`Cluster.client`) sends each request at its arrival time:
  one simpy timeout, one event-queue round trip and a wake-up per arrival (about 3 us each,
  30 ms of a 10,000-request run). With ONE instance nothing but that worker ever reads the
  queue the request joins, so the worker can take the arrivals itself whenever it wakes up
  (`ArrivalFeed.resume`), as long as it sees exactly what it would have seen with the client.
- What it would have seen is decided by simpy's event order. The client's timeout for a group
  of arrivals (those sent in one wake-up: equal times) fires at `tau = prev + (arrival - prev)`,
  prev being the time the client last woke up at (the float simpy computes: `now + delay`).
  At a worker wake-up at time t, every group with tau < t has arrived. A group with tau == t
  has arrived only if the client's timeout for it was put in the queue before the worker's own
  event (simpy breaks ties by insertion order): the client made that timeout when it sent the
  group before, so the group before must have arrived before the worker's event was made. The
  worker makes its next event in the same wake-up in which it takes arrivals, so that holds
  exactly when no group with tau < t arrived in this wake-up (`resume`).
- The worker's very first decision (t = 0) comes before the client's first wake-up (its
  process was made first), so it takes nothing. An idle worker is woken by an arrival, after
  the client sent it, so it takes everything sent up to its wake-up time (`wake`); a group sent
  at the very instant it goes idle (a tie it did not take) wakes it at once.
- Used for a colocated run at event speed only (`simulate` sets it up). The worker is then
  alone in the simulation and moves the clock itself (`Environment.jump`, sim/fastforward/steps.py)
  instead of yielding timeouts. Step by step keeps the client, so tests/test_fastforward.py
  compares the two ways of delivering arrivals as well (ties included: arrivals that land
  exactly on step ends).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from sim.core.request import Request, RequestSpec

if TYPE_CHECKING:
    from sim.core.engine import Engine


class ArrivalFeed:
    """The requests of a run in arrival order, with the instants the client would send them."""

    def __init__(self, specs: Sequence[RequestSpec], engine: Engine, requests: list[Request]):
        self.specs = sorted(specs, key=lambda s: (s.arrival_s, s.request_id))  # as the client
        self.engine = engine
        self.requests = requests  # every request that arrived, in order (the run's result)
        self.sent: list[float] = []  # per request: when the client would send it (tau, s)
        tau = 0.0
        for spec in self.specs:
            if spec.arrival_s > tau:  # the client sleeps until then: now + (arrival - now)
                tau = tau + (spec.arrival_s - tau)
            self.sent.append(tau)
        self.i = 0  # the first request not arrived yet

    def limit_s(self) -> float:
        """The next arrival time (what the client's `next_arrival_s` would be): colocated runs
        plan no step that starts at or after it."""
        i = self.i
        return self.specs[i].arrival_s if i < len(self.specs) else math.inf

    def next_s(self) -> float | None:
        """When the next group would be sent (an idle worker sleeps until then), or None."""
        return self.sent[self.i] if self.i < len(self.sent) else None

    def resume(self, now: float) -> None:
        """The worker woke up from its own event (a step's or a run's end) at `now`."""
        i, sent = self.i, self.sent
        if i < len(sent) and sent[i] <= now:
            self._deliver(now if sent[i] < now else math.nextafter(now, math.inf))

    def wake(self, now: float) -> None:
        """An idle worker woke up at `now`, the time the next group is sent: take all so far."""
        self._deliver(math.nextafter(now, math.inf))

    def _deliver(self, before: float) -> None:
        """Send every request the client would have sent before `before` (s)."""
        specs, sent, engine, requests = self.specs, self.sent, self.engine, self.requests
        i, n = self.i, len(sent)
        while i < n and sent[i] < before:
            req = Request(specs[i])
            requests.append(req)
            engine.add_request(req, sent[i])  # (Cluster.route of a colocated run: this alone)
            i += 1
        self.i = i
