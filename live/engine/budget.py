"""What one click of the Live page may take of the real model, checked before it takes it.

One live run at a time holds the model (and a lock) for every visitor (ui/gate.py), so a click
over the budget is refused first, from the simulator's count of the same engine's steps:
- the KV rows the live stores would preallocate: every request a slot of its longest prompt +
  output (+ speculation's lookahead), on every worker (live/model/kvstore.py);
- the engine steps each policy takes (`live_steps`): the simulator runs the same schedule, so
  its step count is the live run's (sim/runs/budget.py simulate_within, with max_steps).
The wall time (`live_seconds`) can only be checked as the run goes (the page's progress hook).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from live.engine.run import lookahead_rows
from sim.config import SimConfig
from sim.core.request import RequestSpec
from sim.runs.budget import Budget, BudgetExceeded, num_workers, simulate_within


def check_live_budget(
    configs: Sequence[SimConfig], requests: Sequence[RequestSpec], limits: Budget
) -> None:
    """Raise BudgetExceeded (`live_kv_tokens` or `live_steps`) if these runs are over `limits`."""
    ahead = max(lookahead_rows(c) for c in configs)  # speculation's drafts past the end
    rows = len(requests) * (max(r.prompt_tokens + r.output_tokens for r in requests) + ahead)
    rows *= max(num_workers(c) for c in configs)
    if rows > limits.live_kv_tokens:
        raise BudgetExceeded("live_kv_tokens", limits.live_kv_tokens, "live KV rows")
    budget = dataclasses.replace(limits, max_steps=limits.live_steps)
    for config in configs:
        try:
            simulate_within(requests, config, budget)
        except BudgetExceeded as err:
            if err.limit != "max_steps":
                raise
            raise BudgetExceeded("live_steps", limits.live_steps, "live steps") from None
