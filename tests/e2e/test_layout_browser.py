"""A projector, a phone and a tall window (issue 26): screenshots, and what can be measured.

- 1280x720 with ?compact=true: the compared panels and the Play/Pause buttons of a timeline
  fit in the window at once.
- 390x844 (a phone): every Play/Pause button lies inside the window; each panel's run label
  and its cursor readout do not overlap.
- 1400x2400: the whole page, for a look.
Screenshots go to artifacts/screenshots/layout_<page>_<lang>_<size>.png (CI keeps them).
"""

import pytest

from .test_browser import open_page, wait_idle

SIZES = {"projector": (1280, 720), "phone": (390, 844), "tall": (1400, 2400)}


def boxes(page) -> dict:
    """Window-relative boxes of the first timeline: the chart, its buttons, its annotations."""
    return page.evaluate("""() => {
        const gd = document.querySelector('[data-testid="stPlotlyChart"] .js-plotly-plot');
        const box = e => { const r = e.getBoundingClientRect();
                           return {x: r.left, y: r.top, w: r.width, h: r.height}; };
        const notes = [...gd.querySelectorAll('g.annotation')].map(a => ({
            index: Number(a.getAttribute('data-index')), text: a.textContent, box: box(a)}));
        return {chart: box(gd), buttons: [...gd.querySelectorAll('.updatemenu-button')].map(box),
                notes, panels: (gd.layout.annotations || []).length / 2};
    }""")


def inside(b: dict, width: int, height: int) -> bool:
    return b["x"] >= 0 and b["y"] >= 0 and b["x"] + b["w"] <= width and b["y"] + b["h"] <= height


def overlap(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["w"] <= b["x"]
        or b["x"] + b["w"] <= a["x"]
        or a["y"] + a["h"] <= b["y"]
        or b["y"] + b["h"] <= a["y"]
    )


def show_chart(page, app_url, path, query, size):
    width, height = SIZES[size]
    page.set_viewport_size({"width": width, "height": height})
    open_page(page, app_url, path, query)
    wait_idle(page)
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.locator(".updatemenu-button").first.wait_for(state="attached", timeout=60_000)
    chart.evaluate("e => e.scrollIntoView({block: 'start'})")  # no visibility wait: a redraw
    page.wait_for_timeout(500)  # right after the first paint is not "hidden" for long
    return width, height


@pytest.mark.parametrize("path", ["long-prompts", "batching"])
def test_projector_compact_layout_shows_panels_and_buttons_at_once(page, app_url, shots, path):
    width, height = show_chart(page, app_url, path, "?compact=true", "projector")
    chart = page.get_by_test_id("stPlotlyChart").first
    chart.evaluate("e => e.scrollIntoView({block: 'end'})")
    page.wait_for_timeout(300)
    page.screenshot(path=str(shots / f"layout_{path}_en_1280x720.png"))
    b = boxes(page)
    header = page.get_by_test_id("stHeader").bounding_box() or {"height": 0}
    # The whole figure (legend, every panel, the buttons) fits below Streamlit's header.
    assert b["chart"]["h"] + header["height"] <= height, (b["chart"], header)
    assert b["chart"]["y"] >= header["height"] - 1, b["chart"]
    assert b["buttons"] and all(inside(x, width, height) for x in b["buttons"]), b["buttons"]
    assert not page.errors, page.errors


@pytest.mark.parametrize(
    ("path", "lang"), [("batching", "en"), ("long-prompts", "ko"), ("memory", "ko")]
)  # memory: token counters
def test_phone_reaches_every_button_and_labels_do_not_overlap(page, app_url, shots, path, lang):
    width, height = show_chart(page, app_url, path, f"?lang={lang}", "phone")
    page.get_by_test_id("stPlotlyChart").first.locator(".updatemenu-button").last.evaluate(
        "e => e.scrollIntoView({block: 'center'})"
    )
    page.wait_for_timeout(300)
    page.screenshot(path=str(shots / f"layout_{path}_{lang}_390x844.png"))
    b = boxes(page)
    assert len(b["buttons"]) == 5  # 0.5x, 1x, 2x, 4x, pause
    assert all(inside(x, width, height) for x in b["buttons"]), b["buttons"]
    n = int(b["panels"])
    by_index = {note["index"]: note["box"] for note in b["notes"]}
    for i in range(n):  # annotations: the n readouts first, then the n run labels
        assert not overlap(by_index[i], by_index[n + i]), (i, by_index[i], by_index[n + i])
    assert not page.errors, page.errors


@pytest.mark.parametrize("path", ["long-prompts"])
def test_tall_window_screenshot(page, app_url, shots, path):
    show_chart(page, app_url, path, "", "tall")
    page.screenshot(path=str(shots / f"layout_{path}_en_1400x2400.png"), full_page=True)
    assert not page.errors, page.errors
