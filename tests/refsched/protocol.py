"""The drivers' side of the JSON protocol (tests/refsched/client.py documents it).

Both drivers run in their own virtualenv, with this folder on sys.path (it is the script's
folder), and differ only in how they build and step a vLLM scheduler: `serve` does the rest.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable


def log(*args) -> None:
    print(*args, file=sys.stderr, flush=True)


def serve(engine: str, load: Callable[[], object], run_case: Callable[[object, dict], dict]) -> int:
    """Read the cases from stdin, run each with `run_case(load(), case)`, print one JSON answer.

    vLLM's loggers (and V1's model-inspection subprocess) write to stdout, so the real stdout is
    kept for the answer and everything else goes to stderr. A case that raises is reported with
    its error and the next case still runs.
    """
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    doc = json.load(sys.stdin)
    answer = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    t0 = time.perf_counter()
    loaded = load()
    log(f"[{engine}] imports took {time.perf_counter() - t0:.1f}s")
    results = []
    for case in doc.get("cases", []):
        t1 = time.perf_counter()
        try:
            res = run_case(loaded, case)
        except Exception as exc:
            log(traceback.format_exc())
            res = {
                "name": case.get("name", ""),
                "error": f"{type(exc).__name__}: {exc}",
                "steps": [],
                "outputs": {},
            }
        dt = time.perf_counter() - t1
        log(f"[{engine}] case {res['name']!r}: {len(res['steps'])} steps in {dt:.2f}s")
        results.append(res)
    json.dump({"engine": engine, "results": results}, answer)
    answer.write("\n")
    answer.flush()
    return 0
