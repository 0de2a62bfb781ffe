"""A cold Streamlit server and Debian's chromium for the browser tests.

Skipped (not failed) where /usr/bin/chromium is missing, so the fast tests still run anywhere;
.ci/run installs chromium, so CI always runs them. Screenshots go to artifacts/screenshots/.
"""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
from app_server import CHROMIUM_ARGS, chromium_path, start_server, stop_server  # noqa: E402

SHOTS = ROOT / "artifacts" / "screenshots"


@pytest.fixture(scope="session")
def app_url():
    """Start `streamlit run app.py` on a free loopback port; stop it after the session."""
    proc, url = start_server()
    yield url
    stop_server(proc)


# Package scope, not session: Playwright's sync API keeps an asyncio loop running in the main
# thread while the browser is open, and every later test calling asyncio.run() (live replay, the
# websocket load tests) would fail with "cannot be called from a running event loop".
@pytest.fixture(scope="package")
def browser():
    exe = chromium_path()
    if not exe:
        pytest.skip("no chromium on this machine (CI installs Debian's)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh tab that records console errors (offline font fetches excepted)."""
    context = browser.new_context(viewport={"width": 1500, "height": 1000})
    tab = context.new_page()
    tab.errors = []

    def on_console(msg):
        offline = any(
            s in msg.text
            for s in ("fonts.gstatic", "ERR_NAME_NOT_RESOLVED", "ERR_INTERNET_DISCONNECTED")
        )
        # On a deep link Streamlit's frontend first probes <page>/_stcore/{health,host-config}
        # (404), then the root: its own path discovery, not an error of the app.
        url = (msg.location or {}).get("url", "")
        probe = url.endswith(("/_stcore/health", "/_stcore/host-config"))
        if msg.type == "error" and not offline and not probe:
            tab.errors.append(f"{msg.text} ({url})")

    tab.on("console", on_console)
    tab.on("pageerror", lambda err: tab.errors.append(str(err)))
    yield tab
    context.close()


@pytest.fixture(scope="session")
def shots() -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    return SHOTS
