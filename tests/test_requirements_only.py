"""A hosted deployment installs requirements.txt and nothing else: the app must start and every
page must render there, the Live page replaying its recorded runs (issue 9).

The venv is built once into .venv-app-only/ (git-ignored) and rebuilt when requirements.txt
changes (a stamp holds its sha256): ~1 min the first time, a few seconds after. The test then
starts `streamlit run app.py` with that venv's Python and opens every page through Streamlit's
own websocket, as a browser would, looking for exception elements.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import subprocess
import sys

import pytest
from aio import run_async
from conftest import ROOT

from ui.navigation import URLS

sys.path.insert(0, str(ROOT / "bench"))
from app_server import start_server, stop_server  # noqa: E402

VENV = ROOT / ".venv-app-only"
PAGES = URLS  # every page of the menu


def app_only_python() -> str:
    """The Python of a venv with requirements.txt only (built or rebuilt as needed)."""
    want = hashlib.sha256((ROOT / "requirements.txt").read_bytes()).hexdigest()
    stamp, python = VENV / ".requirements-stamp", VENV / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text() == want:
        return str(python)
    shutil.rmtree(VENV, ignore_errors=True)
    base = getattr(sys, "_base_executable", sys.executable)  # not this venv's packages
    subprocess.run([base, "-m", "venv", str(VENV)], check=True)
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(ROOT / "requirements.txt"),
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(f"pip install -r requirements.txt failed:\n{done.stderr[-3000:]}")
    stamp.write_text(want)
    return str(python)


async def page_elements(url: str, page: str) -> list:
    """The elements a page's script sends (Delta.new_element protos) until it finishes; a
    "page not found" message from the server is one more element, the string "page_not_found"."""
    import websockets
    from streamlit.proto.BackMsg_pb2 import BackMsg
    from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

    out = []
    async with websockets.connect(
        url.replace("http://", "ws://") + "/_stcore/stream",
        subprotocols=["streamlit"],
        max_size=None,
    ) as ws:
        msg = BackMsg()
        msg.rerun_script.page_name = page
        await ws.send(msg.SerializeToString())
        while True:
            forward = ForwardMsg()
            forward.ParseFromString(await asyncio.wait_for(ws.recv(), 120))
            kind = forward.WhichOneof("type")
            if kind == "delta" and forward.delta.WhichOneof("type") == "new_element":
                out.append(forward.delta.new_element)
            if kind == "page_not_found":
                out.append(kind)
            if kind == "script_finished":
                return out


def test_the_app_starts_and_every_page_renders_with_requirements_txt_alone():
    python = app_only_python()
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True)
    assert probe.returncode != 0, "requirements.txt must not bring torch"
    proc, url = start_server({**os.environ, "PDLAB_WARMUP": "0"}, python=python)
    try:
        for page in PAGES:
            elements = run_async(page_elements(url, page))
            assert "page_not_found" not in elements, page  # /home too, not just the root
            kinds = [e.WhichOneof("type") for e in elements]
            assert "exception" not in kinds, (
                page,
                [e.exception.message for e in elements if e.WhichOneof("type") == "exception"],
            )
            assert "heading" in kinds, (page, kinds)  # the page's title: it rendered
        assert "page_not_found" in run_async(page_elements(url, "no-such-lesson"))
        live = run_async(page_elements(url, "live"))
        texts = " ".join(e.alert.body for e in live if e.WhichOneof("type") == "alert")
        assert "RECORDED" in texts  # the recorded runs, labelled as such
        assert sum(e.WhichOneof("type") == "plotly_chart" for e in live) >= 1
    finally:
        stop_server(proc)
