"""Fill the shared caches with every lesson's default view as soon as the server is up.

A class opens the same link at the same moment, on a server that may just have woken up (Streamlit
Community Cloud starts a fresh process after 12 h without traffic: all caches empty). A lesson's
first view costs 0.3-1.8 s of CPU (its simulations and figures); its next views, from the
caches, ~0.1 s. So the first session of a process starts one background thread that visits each
lesson page, in each language, through the server's own websocket, exactly as a browser would:
the runs and figures it leaves in st.cache_data are the ones the visitors' default views ask for.

- Off with PDLAB_WARMUP=0, and never under AppTest (its runtime is a mock: nothing to visit).
- Costs ~10 s of CPU once per process, in the background; visitors who arrive meanwhile share
  the work (Streamlit computes a cache key once and makes the others wait for it).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import urllib.request

from ui.navigation import SIMULATED

PAGES = SIMULATED  # every page that simulates its default view on open
LANGS = ("en", "ko")
_LOG = logging.getLogger(__name__)
_started = threading.Event()
_lock = threading.Lock()


def _base_url() -> str | None:
    """http://host:port/base of the server this process runs, or None (no real server)."""
    import streamlit as st
    from streamlit import runtime

    if not runtime.exists() or type(runtime.get_instance()).__name__ != "Runtime":
        return None  # AppTest: a mocked runtime
    address = st.get_option("server.address") or "127.0.0.1"
    if address in ("0.0.0.0", "::", "localhost"):
        address = "127.0.0.1"
    base = (st.get_option("server.baseUrlPath") or "").strip("/")
    return f"http://{address}:{st.get_option('server.port')}" + (f"/{base}" if base else "")


async def visit(url: str, page: str, query: str = "", timeout_s: float = 120.0) -> float:
    """Open `page` through Streamlit's websocket (no browser); seconds until the script ends."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    start = time.perf_counter()
    ws_url = url.replace("http://", "ws://", 1) + "/_stcore/stream"
    async with websockets.connect(
        ws_url, subprotocols=["streamlit"], max_size=None, open_timeout=timeout_s
    ) as ws:
        msg = BackMsg()
        msg.rerun_script.page_name = page
        msg.rerun_script.query_string = query
        await ws.send(msg.SerializeToString())
        while True:
            forward = ForwardMsg()
            forward.ParseFromString(await asyncio.wait_for(ws.recv(), timeout_s))
            if forward.WhichOneof("type") == "script_finished":
                return time.perf_counter() - start


def _run(url: str) -> None:
    for _ in range(120):  # the server answers its health check once it listens
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            time.sleep(0.5)
    else:
        return
    began = time.perf_counter()
    for lang in LANGS:
        for page in PAGES:
            try:
                asyncio.run(visit(url, page, "" if lang == "en" else f"lang={lang}"))
            except Exception as err:  # a warm-up must never disturb the app
                _LOG.info("warm-up of %s (%s) failed: %s", page, lang, err)
    _LOG.info(
        "warm-up: %d lesson views cached in %.1f s",
        len(PAGES) * len(LANGS),
        time.perf_counter() - began,
    )


def start_once() -> bool:
    """Start the warm-up thread the first time this is called in a server process."""
    if _started.is_set() or os.environ.get("PDLAB_WARMUP", "1") == "0":
        return False
    url = _base_url()
    with _lock:
        if url is None or _started.is_set():
            return False
        _started.set()
    threading.Thread(target=_run, args=(url,), name="pdlab-warmup", daemon=True).start()
    return True
