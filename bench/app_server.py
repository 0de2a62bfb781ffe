"""A cold `streamlit run app.py` on a free loopback port, and the headless chromium that visits it.

One place for what the class-load benchmark (bench/bench_load.py), the browser tests
(tests/e2e/conftest.py) and the requirements-only test (tests/test_requirements_only.py) need:
- `start_server`: a fresh server process (its own caches, so a first view is a cold one) on
  127.0.0.1, no usage statistics, no file watcher; it returns once /_stcore/health says "ok".
- `stop_server`: terminate, then kill if it does not exit within 10 s.
- `chromium_path` and `CHROMIUM_ARGS`: Debian's chromium (or $CHROMIUM) for Playwright, headless.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 120.0  # a cold start on a busy 2-core CI machine takes 5-20 s: a wide margin
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--disable-component-update",
    "--no-first-run",
]


def free_port() -> int:
    """A loopback port nothing listens on now (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    env: dict | None = None, python: str = sys.executable
) -> tuple[subprocess.Popen, str]:
    """`python -m streamlit run app.py` on a free loopback port: (process, base URL). `env` is
    the server's whole environment (None: this process's). RuntimeError if it is not healthy
    within START_TIMEOUT_S (the process is killed)."""
    port = free_port()
    proc = subprocess.Popen(
        [
            python,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.headless",
            "true",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                return proc, url
        except OSError:
            time.sleep(0.25)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"streamlit did not start (exit code {proc.returncode}) with {python}")


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server; kill it if it has not exited 10 s later."""
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def chromium_path() -> str | None:
    """$CHROMIUM, else the chromium on PATH (Debian's); None where there is none."""
    return (
        os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    )
