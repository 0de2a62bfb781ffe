"""Entry point of `python -m sim` (see sim/cli.py)."""

import contextlib
import gc
import os
import signal
import sys

# OpenBLAS starts a pool of worker threads when numpy is imported, and they spin while they
# wait for work: about 0.1 s of CPU on a second core at every start (this 2-core machine:
# `import numpy` alone takes 0.23 s of CPU with the pool, 0.12 s without). A simulation never
# calls BLAS (no matrix products; calibration's least squares is a few dozen rows), so the
# command line runs it single-threaded unless the user says otherwise. Set before numpy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from sim.cli import main  # noqa: E402  (after the environment above)

# A run builds on the order of a million objects that live to its end (requests, their token
# times, the step tables). CPython's default young-generation threshold (700 allocations)
# rescans them some 230 times in a 10,000-request run, two of them full collections: 0.13 s of
# 1.6 s CPU for the Azure conversation excerpt (measured with gc.callbacks), 0.27 s of 7.8 s
# step by step. A batch process that frees almost nothing until it exits can collect rarely:
# 50,000 allocations per young collection make it about 0.02 s. (Only here, in the command
# line's own process: the app and the library keep the interpreter's defaults.)
gc.set_threshold(50_000, 20, 20)


class Terminated(BaseException):
    """SIGTERM arrived (`kill`, a batch scheduler's time limit): unwinds like Ctrl-C, so a
    sweep's clean-up stops its workers (sim/runs/parallel.py), and ends in one line."""


def _on_sigterm(signum, frame):
    raise Terminated


signal.signal(signal.SIGTERM, _on_sigterm)
try:
    code = main()
except KeyboardInterrupt:  # Ctrl-C is the user's choice: one line, not a traceback
    print("stopped (Ctrl-C); a run stopped here writes nothing", file=sys.stderr)
    code = 130  # 128 + SIGINT, what a shell reports for it
except Terminated:
    print("stopped (SIGTERM); a run stopped here writes nothing", file=sys.stderr)
    code = 143  # 128 + SIGTERM
if "ray" in sys.modules or "multiprocessing" in sys.modules:
    sys.exit(code)  # (a sweep: let Ray's exit hooks disconnect, and the pool's join its workers)
# Everything is written by now (the JSON or the --out files, each closed). Tearing the
# interpreter down would free the modules and their objects one by one for nothing the user
# sees (0.90 of the CPU of a 1 s run on this machine, whole processes timed from outside):
# flush the two streams and leave.
for stream in (sys.stdout, sys.stderr):
    with contextlib.suppress(OSError, ValueError):  # (a reader that went away: `| head`)
        stream.flush()
os._exit(code)
