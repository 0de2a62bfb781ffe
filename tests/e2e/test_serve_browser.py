"""The Real servers page in a browser: a live serve's timeline fills as requests arrive."""

import threading

import pytest
from playwright.sync_api import expect

from ui.i18n import t

pytest.importorskip("torch")
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def server():
    from test_serve import Server

    s = Server("--model", "tiny", "--max-model-len", "256", "--policy", "prefill-first")
    yield s
    s.stop()


def bar_rows(page) -> int:
    """Request rows with at least one bar in the page's first timeline."""
    return page.evaluate("""() => {
        const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
        if (!gd || !gd.data) return 0;
        const rows = new Set();
        gd.data.filter(tr => tr.type === 'bar')
            .forEach(tr => (tr.y || []).forEach(y => rows.add(y)));
        return rows.size;
    }""")


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_requests_sent_from_outside_appear_within_seconds(page, app_url, shots, server, lang):
    page.goto(f"{app_url}/serve?lang={lang}&url={server.url}", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", level=1).first).to_have_text(
        t("serve.title", lang), timeout=60_000
    )
    before = bar_rows(page)

    def traffic():  # three short answers, then a long prompt while they stream
        threads = [
            threading.Thread(
                target=server.post,
                args=(
                    "/v1/completions",
                    {"prompt": [5] * 16, "max_tokens": 120, "ignore_eos": True},
                ),
            )
            for _ in range(3)
        ]
        threads.append(
            threading.Thread(
                target=server.post, args=("/v1/completions", {"prompt": [7] * 200, "max_tokens": 4})
            )
        )
        for th in threads:
            th.start()
        for th in threads:
            th.join()

    traffic()
    page.wait_for_function(
        f"() => {{ const gd = document.querySelector("
        f"'[data-testid=\"stPlotlyChart\"] .js-plotly-plot'); "
        f"return gd && gd.data && new Set(gd.data.filter(t => t.type === 'bar')"
        f".flatMap(t => t.y || [])).size >= {before + 4}; }}",
        timeout=30_000,
    )
    assert not page.get_by_test_id("stException").count()
    page.screenshot(path=str(shots / f"serve_{lang}.png"), full_page=True)
    assert not page.errors, page.errors


def test_the_chat_box_streams_an_answer(page, app_url, server):
    page.goto(f"{app_url}/serve?url={server.url}", wait_until="domcontentloaded")
    box = page.get_by_test_id("stChatInputTextArea")
    box.wait_for(timeout=60_000)
    box.fill("Hello there")
    box.press("Enter")
    answer = page.get_by_test_id("stChatMessage").nth(1)
    expect(answer).to_be_visible(timeout=30_000)
    assert not page.get_by_test_id("stException").count()
