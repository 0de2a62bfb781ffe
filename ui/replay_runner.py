"""A Serve-page replay that a visitor can stop, and that stops by itself (issue 32, #17).

`live.replay.replayer.replay` runs `asyncio.run(...)` in the calling thread, the visitor's script
thread, until the last request finishes. An upload whose arrivals span 30 days kept that thread
asleep for 30 days, and nothing could stop it: Streamlit stops a script only at its next st
call, and a thread inside asyncio.run makes none.

Here the replay's coroutine runs in an event loop on a worker thread, and the script thread
waits for it in short steps, calling `tick(elapsed_s)` (which draws the progress) between
them. So:
- a visitor who leaves the page, reruns it or presses Stop gets Streamlit's StopException /
  RerunException from that st call; the `finally` cancels the replay's task (replay_async's own
  Ctrl-C path: every open stream is cancelled) and waits for the loop to wind down;
- past `limit_s` of wall time the task is cancelled the same way, and the result says so
  (`ReplayResult.interrupted`: the requests not finished are marked cancelled).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any


def run_stoppable(
    make: Callable[[], Coroutine[Any, Any, Any]],
    limit_s: float,
    tick: Callable[[float], None],
    step_s: float = 0.25,
):
    """Run the coroutine `make()` on a worker thread; its result, or its exception re-raised.
    Cancelled past `limit_s` seconds, or when `tick` raises (the visitor left)."""
    loop = asyncio.new_event_loop()
    box: dict[str, Any] = {}
    started = threading.Event()

    def body() -> None:
        asyncio.set_event_loop(loop)
        try:
            box["task"] = loop.create_task(make())
            started.set()
            box["result"] = loop.run_until_complete(box["task"])
        except BaseException as err:  # noqa: BLE001 (handed to the waiting thread)
            box["error"] = err
        finally:
            started.set()
            loop.close()

    worker = threading.Thread(target=body, name="serve-replay", daemon=True)
    t0 = time.monotonic()
    worker.start()
    try:
        while worker.is_alive():
            worker.join(step_s)
            elapsed = time.monotonic() - t0
            if elapsed > limit_s:
                _cancel(loop, box, started)
                worker.join(timeout=30)
                break
            tick(elapsed)
    finally:
        if worker.is_alive():  # the visitor left (StopException from tick): stop the replay
            _cancel(loop, box, started)
            worker.join(timeout=10)
    if "error" in box:
        raise box["error"]
    return box.get("result")


def _cancel(loop, box, started) -> None:
    started.wait(5)
    task = box.get("task")
    if task is not None and not loop.is_closed():
        with contextlib.suppress(RuntimeError):  # (the loop closed meanwhile: nothing to stop)
            loop.call_soon_threadsafe(task.cancel)


GRACE_S = 60.0  # after the last arrival, time for the last requests to finish (read timeout 30 s)


def replay_workload(workload: str, upload, limits):
    """The requests the page would replay: a built-in live workload, or the upload read only up
    to one row past `limits.serve_requests` (a 20 MB file is not parsed in full to be refused).
    BudgetExceeded (serve_requests, serve_tokens, serve_seconds) or WorkloadError (a bad line)
    if refused."""
    from sim.runs.budget import BudgetExceeded

    if upload is not None:
        from sim.workloads.workload import load_csv

        requests = load_csv(upload, max_rows=limits.serve_requests + 1)
    else:
        from live.engine.workloads import live_workload

        requests = live_workload(workload)
    if len(requests) > limits.serve_requests:
        raise BudgetExceeded(
            "serve_requests", limits.serve_requests, f"more than {limits.serve_requests} requests"
        )
    longest = max((r.prompt_tokens + r.output_tokens for r in requests), default=0)
    if longest > limits.serve_tokens:
        raise BudgetExceeded(
            "serve_tokens", limits.serve_tokens, f"a request of {longest:,} tokens"
        )
    last = max((r.arrival_s for r in requests), default=0.0)
    if last > limits.serve_seconds:  # the replay sleeps until each arrival, in real time
        raise BudgetExceeded("serve_seconds", limits.serve_seconds, f"arrivals span {last:g} s")
    return requests
