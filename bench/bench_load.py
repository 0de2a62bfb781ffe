"""A class at once: N browser contexts open lessons together; how long until each sees its lesson.

    python bench/bench_load.py --clients 30             # a fresh server, 30 visitors at once
    python bench/bench_load.py --cold                   # what one cold lesson page costs the server
    python bench/bench_load.py --clients 30 --url http://127.0.0.1:8501   # a server already up

Load: starts `streamlit run app.py` (cold: empty caches, unless --url), opens ONE headless
Debian chromium and N browser contexts (separate cookies and sessions, as N students), and sends
them all to lesson pages at the same moment (client i gets lesson i mod len(LESSONS), or --page
for all).
A visitor "sees the lesson" when the page's title and first chart are drawn and Streamlit says
the script is done (stApp data-test-script-state=notRunning with its first plotly SVG attached).
Printed: seconds to that per visitor (p50, p90, max, how many within --target), and what the
server process used meanwhile (CPU seconds, peak resident memory).

--client ws: the same N visitors without a browser, speaking Streamlit's websocket protocol (and
with --assets fetching the HTML and scripts a browser would): the server's part of the wait,
since in a classroom each student's browser runs on the student's own machine.

Cold (--cold): for each lesson, a fresh server and one visitor: the server's CPU seconds and
memory growth for that first view (simulation, figures, imports of that page), then a second
visitor on the same page (the caches warm).

The browser runs on the same machine as the server, so on a 2-core host the N renderers compete
with the server for the same cores: the figures are an upper bound for the server alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # import ui/ from the checkout

from app_server import CHROMIUM_ARGS, chromium_path, start_server, stop_server  # noqa: E402

from ui.navigation import SIMULATED  # noqa: E402

# The lessons a class is sent to: every page that simulates on open but the Playground (free
# exploration, not a lesson).
LESSONS = [url for url in SIMULATED if url != "playground"]
TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """utime + stime of a process (its threads included), seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident now, peak resident) of a process, MB."""
    status = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    return int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024


def chromium() -> str:
    exe = chromium_path()
    if not exe:
        sys.exit("no chromium: apt-get install chromium (see scripts/test.sh)")
    return exe


async def visit(browser, url: str, start: asyncio.Event, timeout_s: float) -> float:
    """Seconds from navigation to the lesson drawn (title, first chart, script done)."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await start.wait()
    t0 = time.perf_counter()
    try:
        await page.goto(url, wait_until="domcontentloaded", timeout=timeout_s * 1000)
        await page.wait_for_selector(
            '[data-testid="stPlotlyChart"] .main-svg', state="attached", timeout=timeout_s * 1000
        )
        await page.wait_for_selector(
            '[data-testid="stApp"][data-test-script-state="notRunning"]',
            state="attached",
            timeout=timeout_s * 1000,
        )
        return time.perf_counter() - t0
    except Exception:  # timed out: report it as such
        return float("inf")
    finally:
        await context.close()


async def load(url: str, pages: list[str], timeout_s: float) -> list[float]:
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(
            executable_path=chromium(), headless=True, args=CHROMIUM_ARGS
        )
        start = asyncio.Event()
        tasks = [
            asyncio.create_task(visit(browser, f"{url}/{page}", start, timeout_s)) for page in pages
        ]
        await asyncio.sleep(2.0)  # every context and tab is open before anyone navigates
        start.set()
        out = await asyncio.gather(*tasks)
        await browser.close()
    return out


async def ws_visit(
    url: str, page: str, start: asyncio.Event, timeout_s: float, assets: list[str]
) -> float:
    """A visitor without a browser: Streamlit's own websocket protocol. Fetches the page's HTML
    and scripts as a browser would (--assets), opens /_stcore/stream, asks for `page` and times
    until the server's script_finished: the server's part of a visitor's wait, alone."""
    import websockets  # a dependency of streamlit; httpx (--assets only) is not
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    await start.wait()
    t0 = time.perf_counter()
    try:
        if assets:
            import httpx

            await _fetch(httpx, url, assets, timeout_s)
        ws_url = url.replace("http://", "ws://") + "/_stcore/stream"
        async with websockets.connect(
            ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s
        ) as ws:
            msg = BackMsg()
            msg.rerun_script.page_name = page
            await ws.send(msg.SerializeToString())
            while True:
                forward = ForwardMsg()
                forward.ParseFromString(await asyncio.wait_for(ws.recv(), timeout_s))
                if forward.WhichOneof("type") == "script_finished":
                    return time.perf_counter() - t0
    except Exception:
        return float("inf")


async def _fetch(httpx, url: str, assets: list[str], timeout_s: float) -> None:
    async with httpx.AsyncClient(timeout=timeout_s) as http:
        for path in assets:  # gzip-encoded, as a browser asks for them; not unzipped here
            async with http.stream(
                "GET", url + path, headers={"Accept-Encoding": "gzip"}
            ) as response:
                async for _ in response.aiter_raw():
                    pass


def static_assets(url: str) -> list[str]:
    """The HTML page and the scripts/styles it names (what each browser downloads once)."""
    import re

    html = urllib.request.urlopen(url + "/", timeout=30).read().decode()
    return ["/", *sorted(set(re.findall(r'(?:src|href)="\.?(/static/[^"]+\.(?:js|css))"', html)))]


async def ws_load(url: str, pages: list[str], timeout_s: float, assets: list[str]) -> list[float]:
    start = asyncio.Event()
    tasks = [asyncio.create_task(ws_visit(url, page, start, timeout_s, assets)) for page in pages]
    await asyncio.sleep(0.2)
    start.set()
    return list(await asyncio.gather(*tasks))


def run_load(args) -> dict:
    proc, url = (None, args.url) if args.url else start_server()
    pages = [args.page or LESSONS[i % len(LESSONS)] for i in range(args.clients)]
    pid = proc.pid if proc else None
    try:
        if args.client == "ws":
            assets = static_assets(url) if args.assets else []

            def visits(some: list[str]) -> list[float]:
                return asyncio.run(ws_load(url, some, args.timeout, assets))
        else:

            def visits(some: list[str]) -> list[float]:
                return asyncio.run(load(url, some, args.timeout))

        if args.settle:  # the teacher opens the app first: its warm-up (ui/warmup.py) runs
            asyncio.run(ws_load(url, ["home"], args.timeout, []))
            time.sleep(args.settle)
        if args.warm:  # one visitor per page first: the caches are warm, as after a warm-up
            visits(sorted(set(pages)))
        cpu0 = cpu_s(pid) if pid else 0.0
        wall0 = time.perf_counter()
        seconds = visits(pages)
        wall = time.perf_counter() - wall0
        cpu = cpu_s(pid) - cpu0 if pid else float("nan")
        rss, peak = memory_mb(pid) if pid else (float("nan"), float("nan"))
    finally:
        if proc:
            stop_server(proc)
    done = sorted(seconds)
    q = statistics.quantiles([min(s, 1e9) for s in done], n=10) if len(done) > 1 else done * 9
    return {
        "clients": args.clients,
        "client": args.client,
        "assets": args.assets,
        "warm": args.warm,
        "settle_s": args.settle,
        "pages": sorted(set(pages)),
        "p50_s": round(statistics.median(done), 2),
        "p90_s": round(q[8], 2),
        "max_s": round(done[-1], 2),
        "within_target": sum(s <= args.target for s in done),
        "target_s": args.target,
        "timed_out": sum(s == float("inf") for s in done),
        "server_cpu_s": round(cpu, 1),
        "server_rss_mb": round(rss),
        "server_peak_mb": round(peak),
        "wall_s": round(wall, 1),
        "cores": os.cpu_count(),
        "per_client_s": [round(s, 2) for s in seconds],
    }


def run_cold(args) -> list[dict]:
    rows = []
    for lesson in [args.page] if args.page else LESSONS:
        proc, url = start_server({**os.environ, "PDLAB_WARMUP": "0"})  # truly cold, no warm-up
        try:
            asyncio.run(load(url, ["home"], args.timeout))  # the server's own imports, home page
            cpu0, (rss0, _) = cpu_s(proc.pid), memory_mb(proc.pid)
            first = asyncio.run(load(url, [lesson], args.timeout))[0]
            cpu1, (rss1, peak1) = cpu_s(proc.pid), memory_mb(proc.pid)
            second = asyncio.run(load(url, [lesson], args.timeout))[0]
            cpu2 = cpu_s(proc.pid)
        finally:
            stop_server(proc)
        rows.append(
            {
                "page": lesson,
                "cold_s": round(first, 2),
                "cold_cpu_s": round(cpu1 - cpu0, 2),
                "rss_growth_mb": round(rss1 - rss0),
                "peak_mb": round(peak1),
                "second_visit_s": round(second, 2),
                "second_cpu_s": round(cpu2 - cpu1, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--page", help="one url path for every client (default: the 8 lessons)")
    parser.add_argument("--url", help="a server already running (default: start a fresh one)")
    parser.add_argument("--warm", action="store_true", help="visit each page once first")
    parser.add_argument(
        "--client",
        choices=["browser", "ws"],
        default="browser",
        help="browser: N chromium contexts; ws: N websocket sessions, no "
        "browser (the server's part alone)",
    )
    parser.add_argument(
        "--assets",
        action="store_true",
        help="ws: also download the HTML and scripts per visitor (needs httpx)",
    )
    parser.add_argument("--cold", action="store_true", help="per lesson: a cold first view")
    parser.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="open Home, then wait this many seconds before the class arrives "
        "(the server's warm-up fills the caches meanwhile)",
    )
    parser.add_argument("--target", type=float, default=5.0, help="seconds a visitor may wait")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", help="also write the result to this file")
    args = parser.parse_args()
    result = run_cold(args) if args.cold else run_load(args)
    if not args.cold:
        print(json.dumps({k: v for k, v in result.items() if k != "per_client_s"}, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
