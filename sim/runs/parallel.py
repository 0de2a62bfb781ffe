"""Run independent simulations side by side: in this process, in local processes, or on Ray.

Notable features
- `map_points(fn, items, jobs, backend, address, progress)` returns `[fn(*item) for item in
  items]`, in order, whatever the backend: a sweep's points are independent simulations of the
  same deterministic model, so running them apart gives the very same rows as one by one.
- `jobs`: 1 runs here (the default); N > 1 uses N local worker processes; 0 one per CPU core.
  Workers are forked where this process has no other thread (the CLI: they start at once, with
  the simulator already imported), else they come from a fork server (a Streamlit server has
  threads, and forking those is unsafe).
- `backend="ray"` sends the points to an existing Ray cluster (`address`, default "auto": the
  one `ray start --head` runs on this machine, or $RAY_ADDRESS; "HOST:6379" or
  "ray://HOST:10001" for another; "local": a throwaway cluster in this process), so a capacity
  study of thousands of configurations runs where the cores are. The `sim` package is shipped
  with the job; the cluster's Python needs Ray, simpy, numpy and pandas. Ray is optional:
  without it this backend says how to get it. A cluster that cannot be reached or cannot run
  the points is one line: ConnectionError, or `ClusterError`.
- `progress(done, total)` is called as points finish, for a progress bar.
- In processes, the first point that fails stops the map: the points not started are cancelled,
  the worker processes are terminated (a point still running is not waited for) and the error is
  raised. `watch(pids)` is called in this process while points run (every `poll_s`); it may raise
  to stop the map the same way, e.g. when the workers' CPU time (`process_cpu_seconds`) is over a
  budget. Workers die with this process, however it ends (even SIGKILL: `_worker_start`), and
  leave Ctrl-C to it. `initializer(*initargs)` runs in each worker first (e.g. to hand it a
  shared counter made from `pool_context()`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

BACKENDS = ("processes", "ray")


class ClusterError(RuntimeError):
    """Ray could not run the points (a worker that cannot import them, or died): not an error
    of a point's own, which is raised as the point raised it."""


def cpu_jobs(jobs: int) -> int:
    """`jobs`, with 0 meaning one per CPU core this process may use."""
    if jobs < 0:
        raise ValueError(f"--jobs must be >= 0 (0 = one per core), got {jobs}")
    if jobs == 0:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return jobs


def pool_context():
    """The multiprocessing context worker processes start from (see the module's docstring)."""
    import multiprocessing

    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["sim.runs.sweep", "sim.runs.budget"])
    return context


def process_cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) process `pid` has used so far; None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after the command name, "(...)"
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def map_points(
    fn: Callable,
    items: Sequence[tuple],
    jobs: int = 1,
    backend: str = "processes",
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    *,
    context=None,
    initializer: Callable | None = None,
    initargs: tuple = (),
    watch: Callable[[list[int]], None] | None = None,
    poll_s: float = 0.05,
) -> list:
    """`[fn(*item) for item in items]`, computed serially, in local processes or on Ray.
    `context`, `initializer`, `watch` apply to worker processes (jobs > 1, backend "processes")."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "ray":
        return _on_ray(fn, items, address, progress)
    if address:
        raise ValueError("--address names a Ray cluster: use it with --backend ray")
    jobs = min(cpu_jobs(jobs), len(items))
    if jobs <= 1:
        out = []
        for item in items:
            out.append(fn(*item))
            if progress is not None:
                progress(len(out), len(items))
        return out
    return _in_processes(
        fn, items, jobs, progress, context or pool_context(), initializer, initargs, watch, poll_s
    )


def _in_processes(fn, items, jobs, progress, context, initializer, initargs, watch, poll_s) -> list:
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    out: list = [None] * len(items)
    pool = ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_worker_start,
        initargs=(initializer, initargs),
    )
    try:
        futures = {pool.submit(fn, *item): i for i, item in enumerate(items)}
        pending, done = set(futures), 0
        while pending:
            finished, pending = wait(
                pending, timeout=poll_s if watch else None, return_when=FIRST_COMPLETED
            )
            for future in finished:
                out[futures[future]] = future.result()  # re-raises a point's error here
                done += 1
                if progress is not None:
                    progress(done, len(items))
            if watch is not None and pending:
                watch(sorted(pool._processes or ()))  # pid -> process, of the live workers
    except BaseException:
        _stop(pool)  # not `with`: its exit would wait for every point submitted
        raise
    pool.shutdown(wait=True)
    return out


PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies


def _worker_start(initializer: Callable | None, initargs: tuple) -> None:
    """First thing in every worker process: die with the parent, leave Ctrl-C to it.

    A worker is a child process. If the sweep is killed (SIGKILL, the OOM killer, a closed
    terminal) nothing in Python runs to stop its workers, and they would go on computing
    points nobody reads, holding the terminal's pipes. Linux can tie a child's life to its
    parent's: prctl(PR_SET_PDEATHSIG, SIGKILL) asks the kernel to kill this process when the
    parent exits, however it exits. (If the parent died before the call, we are already an
    orphan: exit.) Ctrl-C in a terminal signals the whole process group; the workers ignore it
    and the parent, which gets it too, stops them (`_stop`) and prints one line. SIGTERM gets
    back its default (die) in case the parent installed a handler before forking."""
    import signal
    import sys

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # (no prctl to call: a worker may outlive us)
            pass
    from multiprocessing import parent_process

    parent = parent_process()
    if parent is not None and not parent.is_alive():
        os._exit(1)
    if initializer is not None:
        initializer(*initargs)


def _stop(pool) -> None:
    """Cancel the points not started, terminate the workers (and whatever they run), reap them."""
    manager = pool._executor_manager_thread  # shutdown(wait=False) forgets it
    workers = list((pool._processes or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)  # those already handed to a worker cannot
    for process in workers:  # be cancelled: they are stopped here
        if process.is_alive():
            process.terminate()
    for process in workers:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
    if manager is not None:
        manager.join()  # it sees the workers gone and fails the points they had


def _on_ray(fn, items, address, progress) -> list:
    try:
        import ray
        from ray.exceptions import RayError, RayTaskError
    except ImportError:
        raise ValueError(
            "--backend ray needs Ray: pip install 'ray[default]' here and on the cluster, "
            "start one with `ray start --head` (or give --address), or use --jobs N instead"
        ) from None
    if not ray.is_initialized():
        _connect(ray, address or "auto")
    task = ray.remote(fn)
    # The points share their workload and config: put each distinct argument in the object
    # store once (a task's ObjectRef arguments arrive as their values), not once per point.
    stored: dict[int, object] = {}

    def shared(arg):
        if arg is None or isinstance(arg, (bool, int, float, str)):
            return arg
        if id(arg) not in stored:  # `items` holds every argument alive: ids stay unique
            stored[id(arg)] = ray.put(arg)
        return stored[id(arg)]

    refs = [task.remote(*map(shared, item)) for item in items]
    index = {ref: i for i, ref in enumerate(refs)}
    out: list = [None] * len(items)
    pending, done = list(refs), 0
    try:
        while pending:
            ready, pending = ray.wait(pending, num_returns=1)
            out[index[ready[0]]] = ray.get(ready[0])
            done += 1
            if progress is not None:
                progress(done, len(items))
    except RayError as err:  # stop the points not finished (not started, or interrupted)
        for ref in pending:
            ray.cancel(ref)
        cause = err.cause if isinstance(err, RayTaskError) else err  # what the point raised
        lines = str(cause).strip().splitlines() or [type(cause).__name__]
        if isinstance(cause, RayError):  # not the point's: a worker died, its setup failed, ...
            raise ClusterError(f"Ray: {lines[0]}") from err
        if lines[0].startswith("The remote function failed to import"):  # a module missing there
            raise ClusterError(
                f"a Ray worker could not load {fn.__name__}: {lines[-1]} (install it on the "
                "cluster: sim needs simpy, numpy, pandas)"
            ) from err
        raise cause from err  # the point's own error; the remote traceback is in `err`
    return out


def _connect(ray, address: str) -> None:
    """Join the Ray cluster at `address` ("local": start one here), shipping the `sim` package
    for the workers to import; a cluster that is not there is one ConnectionError line."""
    import logging
    import socket

    if address == "auto":  # Ray reads $RAY_ADDRESS first: so do the checks and hints here
        address = os.environ.get("RAY_ADDRESS") or "auto"
    if address not in ("auto", "local"):  # Ray retries a wrong address for minutes: ask first
        host, _, port = address.removeprefix("ray://").rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=5).close()
        except (OSError, ValueError):
            raise ConnectionError(
                f"nothing answers at Ray address {address!r}: give HOST:PORT (6379, the one "
                "`ray start --head` prints) or ray://HOST:10001"
            ) from None
    sim_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the sim package
    try:
        ray.init(
            address=address,
            runtime_env={"py_modules": [sim_dir], "excludes": ["__pycache__"]},
            logging_level=logging.ERROR,
            log_to_driver=False,
        )
    except ConnectionError as err:
        if address == "auto":
            raise ConnectionError(
                "no Ray cluster runs here: start one with `ray start --head`, give --address "
                "HOST:6379 (or set RAY_ADDRESS), or use --jobs N instead"
            ) from None
        reason = str(err).strip().splitlines()[0] if str(err).strip() else "no answer"
        if "RAY_AUTH_MODE" not in os.environ:  # Ray sends its token by itself only for "auto"
            hint = (
                "a cluster with token authentication (`ray start`'s default) needs "
                "RAY_AUTH_MODE=token here, and its token in ~/.ray/auth_token or "
                "RAY_AUTH_TOKEN"
            )
        else:
            hint = "check the address and the cluster's token"
        raise ConnectionError(
            f"could not join the Ray cluster at {address!r} ({reason}): {hint}"
        ) from None
