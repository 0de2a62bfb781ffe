"""Server-side time from a control change to a rendered lesson page (Streamlit AppTest).

    python bench/bench_app.py [--repeats 5]
    python bench/bench_app.py --playground    # the Playground's largest runs, simulation only

For each lesson, it opens the page, then sets its key control to new values one after another
and times each rerun of the script (simulation + figures + widgets, everything but the browser).
"first" = a value never seen (the simulation runs); "cached" = a value seen before (the
simulation result and the figure come from the cache, as when students scrub back and forth).
This machine is shared and noisy: the baseline is the rerun time of a page with no simulation
(the same AppTest machinery), measured in the same run; ratios are against it.

--playground times the simulation of the largest workload the Playground allows (max_requests
of the run budget, at its highest rate) for every policy, topology and length preset, as the
page runs it (`simulate_within`, the run budget's clock), in CPU seconds; target < 1 s each.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from streamlit.testing.v1 import AppTest  # noqa: E402

LESSONS = {  # page -> (query key, values to cycle through)
    "app_pages/home.py": ("window", ["2.0", "4.0", "6.0", "8.0"]),
    "app_pages/prefill_decode.py": ("ctx", ["512", "1024", "4096", "8192"]),
    "app_pages/batching.py": ("batch", ["2", "4", "16", "32"]),
    "app_pages/chunked.py": ("chunk", ["512", "1024", "4096", "8192"]),
    "app_pages/long_prompts.py": ("partial", ["1", "2", "8", "4"]),
    "app_pages/memory.py": ("kv", ["16000", "32000", "48000", "64000"]),
    "app_pages/disaggregation.py": ("link", ["NVLink4", "PCIe Gen5", "100GbE", "25GbE"]),
    "app_pages/playground.py": ("n", ["50", "200", "400", "100"]),
}


def timed_run(at: AppTest) -> float:
    start = time.perf_counter()
    at.run()
    assert not at.exception, at.exception
    return time.perf_counter() - start


def playground() -> None:
    """CPU seconds of simulate_within for the Playground's largest workload, per configuration."""
    import pandas  # noqa: F401  (loaded in the app already: not part of the first run's time)

    from sim.config import SimConfig, with_overrides
    from sim.runs.budget import Budget, simulate_within
    from sim.workloads.workload import WorkloadConfig, generate

    budget = Budget.from_env()
    n, rate = budget.max_requests, 40.0  # the page's slider ends at 40 req/s
    print(f"{n} requests at {rate:g} req/s (the Playground's largest), CPU s of simulation")
    worst = 0.0
    for prompt, output in (("chat", "chat"), ("code", "code"), ("chat+longdoc", "chat")):
        requests = generate(
            WorkloadConfig(rate_per_s=rate, num_requests=n, prompt=prompt, output=output, seed=0)
        )
        for policy in ("vllm", "vllm-v0", "prefill-first", "static", "short-first", "sglang"):
            cells = []
            for topology in ("colocated", "router", "disaggregated"):
                config = with_overrides(SimConfig(policy=policy), {"topology": topology})
                start = time.process_time()
                run = simulate_within(requests, config, budget)
                run.requests, run.segments, run.steps  # noqa: B018 (the page reads them all;
                # a run hands them over as numpy columns, made DataFrames on first use)
                seconds = time.process_time() - start
                worst = max(worst, seconds)
                cells.append(f"{topology} {seconds:5.2f}")
            print(f"{prompt:13s} {policy:14s} " + "   ".join(cells))
    print(f"slowest: {worst:.2f} s of CPU (target < 1 s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="cached reruns per value")
    parser.add_argument(
        "--playground",
        action="store_true",
        help="time the Playground's largest simulations instead",
    )
    args = parser.parse_args()
    if args.playground:
        playground()
        return
    base = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    base.run()
    base.switch_page("app_pages/home.py").run()  # warm imports
    baseline = statistics.median(timed_run(base) for _ in range(5))  # home, cached: no sim
    print(f"baseline (cached rerun of Home, AppTest overhead included): {baseline * 1000:.0f} ms")
    print(f"{'page':34s} {'first p50 ms':>13s} {'cached p50 ms':>14s} {'x baseline':>11s}")
    firsts, cached_all = [], []
    for page, (key, values) in LESSONS.items():
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
        at.run()
        at.switch_page(page).run()
        first, cached = [], []
        for value in values:
            at.query_params[key] = value
            at.switch_page(page)
            first.append(timed_run(at))
        for _ in range(args.repeats):
            for value in values:
                at.query_params[key] = value
                at.switch_page(page)
                cached.append(timed_run(at))
        f, c = statistics.median(first), statistics.median(cached)
        firsts.append(f)
        cached_all += cached
        print(f"{page:34s} {f * 1000:13.0f} {c * 1000:14.0f} {c / baseline:11.1f}")
    print(
        f"all lessons: first-time p50 {statistics.median(firsts) * 1000:.0f} ms, "
        f"cached rerun p50 {statistics.median(cached_all) * 1000:.0f} ms (target < 300 ms)"
    )


if __name__ == "__main__":
    main()
