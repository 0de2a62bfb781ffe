"""Issue 9 in a real browser: a hostile playground URL and a bad knob end as st.error boxes
(one per configuration, no traceback), the good configurations still draw their timeline."""

from playwright.sync_api import expect

from ui.i18n import t

HOSTILE = (
    "playground?n=1000&rate=40.0&k=2&prompt=chat%2Blongdoc&p0=chunked&p1=chunked"
    "&s0=max_num_batched_tokens%3D1&s1=max_num_batched_tokens%3D1%2C+max_num_seqs%3D255"
)


def wait_idle(page, timeout=120_000):
    page.wait_for_timeout(300)
    app = page.get_by_test_id("stApp")
    expect(app).to_have_attribute("data-test-connection-state", "CONNECTED", timeout=timeout)
    expect(app).to_have_attribute("data-test-script-state", "notRunning", timeout=timeout)


def test_the_hostile_url_shows_one_error_per_configuration(page, app_url, shots):
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.goto(f"{app_url}/{HOSTILE}", wait_until="domcontentloaded")
    wait_idle(page)
    alerts = page.get_by_test_id("stAlertContentError")
    expect(alerts).to_have_count(2)
    expect(alerts.first).to_contain_text("150,000")
    assert not page.get_by_test_id("stException").count()
    page.screenshot(path=str(shots / "issue9_hostile_url.png"), full_page=True)
    assert not page.errors, page.errors


def test_a_bad_knob_is_one_error_beside_timelines_that_still_run(page, app_url, shots):
    page.set_viewport_size({"width": 1400, "height": 1800})
    page.goto(
        f"{app_url}/playground?lang=ko&k=3&n=40&s1=decode_gpu%3Dnope&t1=disaggregated",
        wait_until="domcontentloaded",
    )
    wait_idle(page)
    page.wait_for_selector(
        '[data-testid="stPlotlyChart"] .main-svg', state="attached", timeout=60_000
    )
    alerts = page.get_by_test_id("stAlertContentError")
    expect(alerts).to_have_count(1)
    expect(alerts.first).to_contain_text("decode_gpu")
    expect(page.get_by_text(t("play.results", "ko"), exact=True)).to_be_visible()
    page.screenshot(path=str(shots / "issue9_one_bad_config_ko.png"), full_page=True)
    assert not page.errors, page.errors
