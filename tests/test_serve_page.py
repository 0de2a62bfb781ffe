"""The Real servers page (AppTest, both languages): guarded URLs, a live timeline, a replay."""

import json
import time

import pytest
from apptest_page import open_page as open_app_page
from streamlit.testing.v1 import AppTest

from live.serve.client import EndpointError, check_endpoint
from ui.i18n import t

PAGE = "app_pages/serve.py"


def open_page(params: dict | None = None, env: dict | None = None) -> AppTest:
    return open_app_page(PAGE, params, env)


def figures(at: AppTest) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_renders_in_both_languages_and_says_how_to_start_a_server(lang):
    # A port nobody listens on: the page says so (a warning), it does not fail.
    at = open_page({"lang": lang, "url": "http://127.0.0.1:9"})
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == t("serve.title", lang)
    assert any("live serve" in c.value for c in at.code)
    assert at.warning and "127.0.0.1:9" in at.warning[0].value


def test_an_operator_can_turn_url_fetching_off():
    at = open_page(env={"PDLAB_ALLOW_ENDPOINTS": "off"})
    assert not at.exception and not at.error
    assert "PDLAB_ALLOW_ENDPOINTS" in at.info[0].value


@pytest.mark.parametrize(
    "url",
    [
        "http://192.0.2.1:8000",
        "http://10.1.2.3",
        "ftp://127.0.0.1",
        "http://user:pw@127.0.0.1:8000",
    ],
)
def test_a_url_this_app_may_not_fetch_is_an_error_saying_what_to_change(url):
    at = open_page({"url": url})
    assert not at.exception, at.exception
    assert at.error and "127.0.0.1" in at.error[0].value  # says what would work


def test_the_guard_resolves_and_checks_every_address_before_any_request():
    assert check_endpoint("localhost:8000", "loopback").root.startswith("http://127.0.0.1:")
    assert check_endpoint("http://[::1]:8000", "loopback").root == "http://[::1]:8000"
    with pytest.raises(EndpointError, match="loopback"):
        check_endpoint("http://192.0.2.1:8000", "loopback")
    assert check_endpoint("http://192.0.2.1:8000", "any").root == "http://192.0.2.1:8000"
    with pytest.raises(EndpointError, match="link-local"):  # cloud metadata services live there
        check_endpoint("http://169.254.169.254/", "any")
    with pytest.raises(EndpointError, match="off"):
        check_endpoint("http://127.0.0.1:8000", "off")
    with pytest.raises(EndpointError, match="port"):
        check_endpoint("http://127.0.0.1:99999", "loopback")


def test_unknown_modes_fail_closed(monkeypatch):
    from live.serve.client import allowed_mode

    monkeypatch.setenv("PDLAB_ALLOW_ENDPOINTS", "yes please")
    assert allowed_mode() == "off"
    monkeypatch.delenv("PDLAB_ALLOW_ENDPOINTS")
    assert allowed_mode() == "loopback"


@pytest.fixture(scope="module")
def server():
    pytest.importorskip("torch")
    pytest.importorskip("fastapi")
    from test_serve import Server

    s = Server("--model", "tiny", "--max-model-len", "256")
    yield s
    s.stop()


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_running_server_fills_the_timeline(server, lang):
    server.post("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 20})
    at = open_page({"url": server.url, "lang": lang})
    assert not at.exception, at.exception
    assert not at.error and not at.warning, [e.value for e in at.error + at.warning]
    fig = figures(at)[0]
    rows = {row for tr in fig["data"] if tr.get("type") == "bar" for row in tr.get("y") or []}
    assert rows  # one row per request, e.g. "R0"
    assert fig["layout"]["xaxis"]["range"][1] > 0
    assert any(m.label == t("serve.running", lang) for m in at.metric)


def test_replaying_a_workload_draws_measured_beside_predicted(server):
    pytest.importorskip("openai")
    at = open_page({"url": server.url, "wl": "chat"})
    at.button[0].click().run(timeout=120)
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert "8 of 8" in at.success[0].value
    timeline = figures(at)[-1]
    assert len(timeline["frames"]) >= 2  # animated, two panels: measured and simulated
    labels = json.dumps(timeline["layout"]["annotations"])
    assert "measured" in labels and "simulated" in labels
    errors = at.dataframe[-1].value
    assert len(errors) == 8 and "ttft_measured_s" in errors.columns


def test_the_chat_box_streams_an_answer_and_the_request_shows_up(server):
    at = open_page({"url": server.url})
    before = len(server.trace()["requests"])
    at.chat_input[0].set_value("hello").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    time.sleep(0.3)  # the server reuses a trace answer for 0.25 s
    assert len(server.trace()["requests"]) == before + 1
