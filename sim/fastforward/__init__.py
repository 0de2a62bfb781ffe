"""Event speed: a SECOND implementation of the engine's step loop, for runs of plain decode steps.

A busy server's steps are mostly plain decodes; between two events that could change a step's
shape nothing new is decided, so this package takes such a run of steps at once (steps.py says
why that is exact). It is a speed trick, not a lesson: the engine (`sim.core`) and the policies
(`sim.policies`) read as the real schedulers do, and `tests/test_fastforward.py` holds this
package's traces equal to stepping, bit for bit.

The rest of sim/ enters only through the names below (lint-imports checks it: pyproject.toml).
"""

from sim.fastforward.admission import extend
from sim.fastforward.arrival_feed import ArrivalFeed
from sim.fastforward.steps import Environment, run_seconds, start_run

__all__ = ["ArrivalFeed", "Environment", "extend", "run_seconds", "start_run"]
