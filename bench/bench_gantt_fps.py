"""Animated Gantt speed: build time, JSON size and real browser frames per second during Play.

    python bench/bench_gantt_fps.py [--sizes 100,1000] [--rate 2] [--frames 120] [--repeats 3]
                                    [--design clip|cursor] [--out /tmp]

For each size it simulates a chat workload (sim.workloads.workload presets, default SimConfig:
chunked
prefill on one H100), builds `ui.gantt.timeline_figure`, writes a standalone HTML file and opens
it in headless Debian chromium through Playwright. After one warm-up pass at 4x (the first pass
also pays for JIT compilation) it presses "Play 1x" `--repeats` times and counts
plotly_animatingframe events against the page clock until each playback ends; the table shows
the median. 1x asks for a frame every 30 ms, so about 30 frames/s means the browser keeps up;
the "2x fps" column asks for one every animation tick and shows the headroom. A screenshot taken
half-way through a last 1x playback lands in <out>/gantt_<n>.png for a visual check.
`--design clip|cursor` forces one design, to find the size where "clip" stops holding 30 frames/s
(the threshold `ui.gantt.CLIP_MAX_BARS`).

Needs /usr/bin/chromium (apt-get install chromium); never `playwright install`. Frame rates drop
on a busy machine, so the load average is printed with the table.
Target: 30 frames/s at 1x for 1,000 requests.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from sim.cluster.topologies import simulate  # noqa: E402
from sim.config import SimConfig  # noqa: E402
from sim.workloads.workload import WorkloadConfig, generate  # noqa: E402
from ui.gantt import timeline_figure  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
]
LISTEN = """() => {
    const gd = document.querySelector('.js-plotly-plot');
    window.__frames = []; window.__done = false;
    gd.on('plotly_animatingframe', () => window.__frames.push(performance.now()));
    gd.on('plotly_animated', () => { window.__done = true; });
}"""  # once per page: plotly keeps every handler registered
RESET = "() => { window.__frames = []; window.__done = false; }"


def build(num_requests: int, rate: float, frames: int, design: str | None, out: Path) -> dict:
    """Simulate, build the figure and write its HTML; returns sizes and timings."""
    run = simulate(
        generate(WorkloadConfig(rate_per_s=rate, num_requests=num_requests, seed=1)), SimConfig()
    )
    start = time.perf_counter()
    fig = timeline_figure([("chunked", run)], num_frames=frames, design=design)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    text = fig.to_json()
    json_s = time.perf_counter() - start
    path = out / f"gantt_{num_requests}{'_' + design if design else ''}.html"
    fig.write_html(path, include_plotlyjs=True, auto_play=False)
    bars = sum(len(tr.x) for tr in fig.data if tr.type == "bar")
    return {
        "requests": num_requests,
        "segments": len(run.segments),
        "bars": bars,
        "path": path,
        "design": "clip" if fig.frames[0].data else "cursor",
        "build_s": build_s,
        "json_s": json_s,
        "json_mb": len(text) / 1e6,
    }


def play(page, button: int) -> list[float]:
    """Press one Play button and return the page-clock times (ms) of its frames."""
    page.evaluate(RESET)
    page.locator(".updatemenu-button").nth(button).click()  # 0.5x, 1x, 2x, 4x, pause
    page.wait_for_function("window.__done", timeout=120_000)
    return page.evaluate("window.__frames")


def fps(stamps: list[float]) -> float:
    """Frames per second from frame times in ms."""
    return 1000 * (len(stamps) - 1) / (stamps[-1] - stamps[0])


def measure(page, row: dict, repeats: int) -> dict:
    """Open the HTML, warm up at 4x, then play at 1x `repeats` times; screenshot mid-playback."""
    page.goto(row["path"].as_uri(), wait_until="load")
    page.wait_for_selector(".js-plotly-plot .barlayer .point", state="attached", timeout=60_000)
    page.wait_for_timeout(500)  # let the first paint settle
    page.evaluate(LISTEN)
    play(page, 3)  # warm-up: the first pass also pays for JIT compilation
    rates, peaks = [], []
    for _ in range(repeats):
        rates.append(fps(play(page, 1)))  # 1x: one frame per 30 ms, at most ~30 frames/s
        peaks.append(fps(play(page, 2)))  # 2x: a frame every 15 ms, i.e. every animation tick
    page.evaluate(RESET)
    page.locator(".updatemenu-button").nth(1).click()
    page.wait_for_timeout(2000)  # about half-way through the 4 s of 1x playback
    page.screenshot(path=str(row["path"].with_suffix(".png")))
    page.wait_for_function("window.__done", timeout=120_000)
    return {**row, "fps": median(rates), "fps_all": rates, "peak": median(peaks)}


def main() -> None:
    """Run the benchmark and print one table row per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=120)
    parser.add_argument("--sizes", default="100,1000")
    parser.add_argument("--rate", type=float, default=2.0, help="arrivals per second")
    parser.add_argument("--design", choices=["clip", "cursor"], default=None)
    parser.add_argument("--repeats", type=int, default=3, help="1x playbacks (median shown)")
    parser.add_argument("--out", type=Path, default=Path("/tmp"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [
        build(int(n), args.rate, args.frames, args.design, args.out) for n in args.sizes.split(",")
    ]

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        results = [measure(page, row, args.repeats) for row in rows]
        browser.close()
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} CPUs (a busy machine lowers fps)")
    print(
        f"{'requests':>8} {'segments':>8} {'bars':>6} {'design':>6} {'build s':>8} "
        f"{'to_json s':>9} {'JSON MB':>8} {'fps 1x':>6} {'(runs)':<10} {'2x fps':>7}  "
        "screenshot"
    )
    for r in results:
        each = ",".join(f"{x:.0f}" for x in r["fps_all"])
        print(
            f"{r['requests']:>8} {r['segments']:>8} {r['bars']:>6} {r['design']:>6} "
            f"{r['build_s']:>8.2f} {r['json_s']:>9.2f} {r['json_mb']:>8.2f} {r['fps']:>6.1f} "
            f"{each:<10} {r['peak']:>7.1f}  {r['path'].with_suffix('.png')}"
        )


if __name__ == "__main__":
    main()
