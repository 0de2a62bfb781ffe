"""A class at once (issue 9): lesson views are shared across sessions, and cheap to send again.

The load itself is measured by bench/bench_load.py (N browser contexts or websocket sessions);
these check the mechanisms it relies on.
"""

import json
import sys
import time

import numpy as np
import plotly.io as pio
from aio import run_async

from ui import warmup
from ui.figure_cache import _prebuilt, plain
from ui.sim_cache import fingerprint


def test_plain_figures_write_the_same_json():
    figure = {
        "data": [
            {
                "x": np.arange(3.0),
                "y": np.array([1, 2, 3]),
                "name": "a",
                "marker": {"size": np.float32(2.5)},
            }
        ],
        "frames": [{"data": [{"x": (np.int64(1), 2.0)}]}],
    }
    assert pio.to_json(plain(figure), validate=False) == pio.to_json(figure, validate=False)
    assert (
        json.loads(pio.to_json(_prebuilt(plain(figure)), validate=False))["data"][0]["name"] == "a"
    )


def test_fingerprint_is_stable_and_tells_configs_apart():
    from sim.config import SimConfig, with_overrides

    a, b = SimConfig(), with_overrides(SimConfig(), {"max_num_seqs": 8})
    assert fingerprint(a) == fingerprint(SimConfig()) != fingerprint(b)


def test_warmup_stays_off_without_a_real_server(monkeypatch):
    assert warmup._base_url() is None  # no Streamlit runtime here
    assert warmup.start_once() is False
    monkeypatch.setenv("PDLAB_WARMUP", "0")
    assert warmup.start_once() is False


def test_a_fresh_server_warms_every_lesson_and_then_serves_a_class_quickly():
    """A real server: after the first visit its warm-up caches each lesson's default view, so
    30 sessions opening lessons together are served from the caches (websocket, no browser)."""
    sys.path.insert(0, str(__import__("conftest").ROOT / "bench"))
    from app_server import start_server, stop_server
    from bench_load import LESSONS, cpu_s, ws_load

    proc, url = start_server()
    try:
        run_async(warmup.visit(url, "home"))
        deadline, busy = time.time() + 120, float("inf")
        while time.time() < deadline:  # the warm-up visits 20 views; wait until they are done
            before = cpu_s(proc.pid)
            time.sleep(3)
            busy = cpu_s(proc.pid) - before
            if busy < 0.1:
                break
        # Still busy, the server would count the warm-up's work as the 30 visitors' below.
        assert busy < 0.1, (
            f"the warm-up did not finish within 120 s (the server still used {busy:.1f} s of "
            "CPU in its last 3 s): the visitors' CPU cannot be measured apart from it"
        )
        cpu0 = cpu_s(proc.pid)
        pages = [LESSONS[i % len(LESSONS)] for i in range(30)]
        seconds = run_async(ws_load(url, pages, 60.0, []))
        used = cpu_s(proc.pid) - cpu0
    finally:
        stop_server(proc)
    assert max(seconds) < 30, seconds  # 2 s here when alone; generous for a busy CI
    assert used < 10, used  # server CPU for 30 visitors: ~1.5 s with warm caches (~10 s cold)
