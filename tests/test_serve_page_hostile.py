"""The Serve page (app) without a server (issue 26) and its replays' bounds (issue 32, #16-17)."""

import asyncio
import time

import pytest
from test_app_hostile import SERVE, open_page, shown

from sim.runs.budget import Budget
from ui.i18n import t


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_without_a_server_the_page_says_what_it_needs_and_hides_what_cannot_work(lang):
    at = open_page(SERVE, {"lang": lang, "url": "http://127.0.0.1:9"})
    assert not at.exception, at.exception
    text = " ".join(shown(at))
    assert "Errno" not in text and "Connection refused" not in text  # no OS English
    (warning,) = [w.value for w in at.warning]
    assert t("errors.serve_refused", lang) in warning and "live serve" in warning
    assert "127.0.0.1:9" in warning.replace("\\", "")  # the URL it tried
    assert any("python -m live serve" in c.value for c in at.code)
    assert not at.chat_input  # a chat box that cannot work is not offered
    assert all(b.disabled for b in at.button if b.label == t("serve.run", lang))


def upload_to_serve(data: bytes):
    at = open_page(SERVE, {"wl": "upload", "url": "http://127.0.0.1:9"})
    (uploader,) = at.get("file_uploader")
    uploader.set_value(("w.csv", data, "text/csv")).run()
    assert not at.exception, at.exception
    return at


def test_an_upload_over_the_request_limit_is_refused_without_reading_the_rest():
    rows = "".join(f"{i * 0.1},16,4\n" for i in range(40))
    # A broken line after the limit: a reader that parsed the whole file would report it.
    at = upload_to_serve(("arrival_s,prompt_tokens,output_tokens\n" + rows + "oops\n").encode())
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "PDLAB_SERVE_REQUESTS" in errors[0], errors


def test_an_upload_whose_arrivals_span_30_days_is_refused_before_any_replay():
    at = upload_to_serve(b"arrival_s,prompt_tokens,output_tokens\n0,16,4\n2592000,16,4\n")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "PDLAB_SERVE_SECONDS" in errors[0], errors


def test_the_serve_limits_are_overridable_like_the_others():
    budget = Budget.from_env({"PDLAB_SERVE_SECONDS": "600", "PDLAB_SERVE_REQUESTS": "100"})
    assert (budget.serve_seconds, budget.serve_requests) == (600.0, 100)
    assert Budget.from_env({}, extra={"serve_seconds": 5}).serve_seconds == 5


class Left(Exception):
    """What Streamlit raises at the next st call once the visitor left (StopException)."""


def test_leaving_the_page_stops_a_replay_that_would_sleep_for_30_days():
    from ui.replay_runner import run_stoppable

    seen = {}

    async def thirty_days():
        try:
            await asyncio.sleep(2_592_000)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    def tick(elapsed):
        if elapsed > 0.5:
            raise Left

    started = time.monotonic()
    with pytest.raises(Left):
        run_stoppable(thirty_days, limit_s=3600, tick=tick, step_s=0.05)
    assert seen == {"cancelled": True} and time.monotonic() - started < 10


def test_a_replay_is_cut_at_its_wall_time_limit():
    from ui.replay_runner import run_stoppable

    async def sleeps_then_says_it_was_cut():
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            return "interrupted"  # (replay_async returns what it measured, interrupted=True)

    started = time.monotonic()
    assert run_stoppable(sleeps_then_says_it_was_cut, 0.3, lambda s: None, 0.05) == "interrupted"
    assert time.monotonic() - started < 10


def test_an_upload_with_a_request_of_a_million_tokens_is_refused():
    at = upload_to_serve(b"arrival_s,prompt_tokens,output_tokens\n0,1000000,4\n")
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "PDLAB_SERVE_TOKENS" in errors[0], errors


@pytest.fixture
def hostile_server():
    """A loopback HTTP server whose /pdlab/trace is JSON nested 100,000 deep."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = b"[" * 100_000 + b"]" * 100_000
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_a_hostile_servers_trace_is_one_warning_not_the_pages_error(hostile_server):
    at = open_page(SERVE, {"url": hostile_server})
    assert not at.exception, at.exception
    assert at.warning and hostile_server.removeprefix("http://") in at.warning[0].value
