"""Entry point of `python -m sim` (see sim/cli.py)."""

import gc
import sys

from sim.cli import main

# A run builds on the order of a million objects that live to its end (requests, their token
# times, the step tables). CPython's default young-generation threshold (700 allocations)
# rescans them some 230 times in a 10,000-request run, two of them full collections: 0.13 s of
# 1.6 s CPU for the Azure conversation excerpt (measured with gc.callbacks), 0.27 s of 7.8 s
# step by step. A batch process that frees almost nothing until it exits can collect rarely:
# 50,000 allocations per young collection make it about 0.02 s. (Only here, in the command
# line's own process: the app and the library keep the interpreter's defaults.)
gc.set_threshold(50_000, 20, 20)

sys.exit(main())
