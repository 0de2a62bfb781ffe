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


def map_points(
    fn: Callable,
    items: Sequence[tuple],
    jobs: int = 1,
    backend: str = "processes",
    address: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list:
    """`[fn(*item) for item in items]`, computed serially, in local processes or on Ray."""
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
    return _in_processes(fn, items, jobs, progress)


def _in_processes(fn, items, jobs, progress) -> list:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    method = "fork" if threading.active_count() == 1 else "forkserver"
    context = multiprocessing.get_context(method)
    if method == "forkserver":
        context.set_forkserver_preload(["sim.sweep", "sim.budget"])
    out: list = [None] * len(items)
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(fn, *item): i for i, item in enumerate(items)}
        for done, future in enumerate(as_completed(futures), start=1):
            out[futures[future]] = future.result()  # re-raises a point's error here
            if progress is not None:
                progress(done, len(items))
    return out


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
