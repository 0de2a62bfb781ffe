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
  one `ray start` runs on this machine), so a capacity study of thousands of configurations
  runs where the cores are. Ray is optional: without it this backend says how to get it.
- `progress(done, total)` is called as points finish, for a progress bar.
- In processes, the first point that fails stops the map: the points not started are cancelled,
  the worker processes are terminated (a point still running is not waited for) and the error is
  raised. `watch(pids)` is called in this process while points run (every `poll_s`); it may raise
  to stop the map the same way, e.g. when the workers' CPU time (`process_cpu_seconds`) is over a
  budget. `initializer(*initargs)` runs in each worker first (e.g. to hand it a shared counter
  made from `pool_context()`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence

BACKENDS = ("processes", "ray")


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
        context.set_forkserver_preload(["sim.sweep", "sim.budget"])
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
    return _in_processes(fn, items, jobs, progress, context or pool_context(), initializer,
                         initargs, watch, poll_s)  # fmt: skip


def _in_processes(fn, items, jobs, progress, context, initializer, initargs, watch,
                  poll_s) -> list:  # fmt: skip
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    out: list = [None] * len(items)
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=initializer,
                               initargs=initargs)  # fmt: skip
    try:
        futures = {pool.submit(fn, *item): i for i, item in enumerate(items)}
        pending, done = set(futures), 0
        while pending:
            finished, pending = wait(pending, timeout=poll_s if watch else None,
                                     return_when=FIRST_COMPLETED)  # fmt: skip
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
    except ImportError:
        raise ValueError(
            "--backend ray needs Ray: pip install 'ray[default]' here and on the cluster, "
            "start one with `ray start --head` (or give --address), or use --jobs N instead"
        ) from None
    if not ray.is_initialized():
        # The workers import this project's `sim` package: ship it unless the cluster has it.
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ray.init(address=address or "auto", runtime_env={"working_dir": root,
                 "excludes": [".venv*", ".git", "artifacts", "assets"]},
                 log_to_driver=False)  # fmt: skip
    task = ray.remote(fn)
    refs = [task.remote(*item) for item in items]
    index = {ref: i for i, ref in enumerate(refs)}
    out: list = [None] * len(items)
    pending, done = list(refs), 0
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        out[index[ready[0]]] = ray.get(ready[0])
        done += 1
        if progress is not None:
            progress(done, len(items))
    return out
