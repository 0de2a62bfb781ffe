"""Student words first, picture first (issue 26): what a lesson's main view shows, in AppTest.

The main view is everything a page renders outside expanders (expanders hold the provenance,
the code and the longer explanations). It must carry no claim ids ("(C7, C8)", "PC1"), no
test paths and no raw preset ids; and every timeline has a "What to look at" line right above it.
"""

import json
import re

import pytest
from test_app import open_page

from ui.i18n import t
from ui.navigation import PAGES, SIMULATED

LESSONS = [file for file, url, _, _ in PAGES if url in SIMULATED]  # the simulated pages
# Home and Disaggregation are laid out by their own lesson work (their text and layout); the
# "What to look at" line is checked on the others.
LOOK_LESSONS = [p for p in LESSONS if p not in ("app_pages/home.py", "app_pages/disaggregation.py")]
ENGINEERING = re.compile(
    r"\(\s*P?C\d+[a-z]?\b"  # a claim id in brackets: (C7, C8), (C10a), (PC1-PC3)
    r"|\b(?:freeze|blocking|three) \(C\d+"  # "freeze (C5)"
    r"|\btests?/\w+\.py"  # a test path
    r"|\btng-interactive|\bdistserve-(?:chatbot|code|summar)"  # raw SLO preset ids
)


def main_view(node, out: list, in_expander: bool = False) -> list:
    """(kind, text) of every element outside expanders, in page order; timelines as kind
    'timeline' (a plotly chart with animation frames)."""
    kind = getattr(node, "type", "")
    if kind == "expander":
        return out
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        label = getattr(node, "label", None)
        if isinstance(label, str):
            out.append((kind, label))
        for child in children.values():
            main_view(child, out)
        return out
    if kind == "plotly_chart":
        spec = json.loads(node.proto.spec)
        out.append(("timeline" if spec.get("frames") else "chart", ""))
        return out
    widget = hasattr(node, "set_value")  # its value is an id; what it shows are its options
    for attr in ("label", "body", *(() if widget else ("value",))):
        text = getattr(node, attr, None)
        if isinstance(text, str):
            out.append((kind, text))
    out += [(kind, str(option)) for option in (getattr(node, "options", None) or [])]
    return out


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("page", [*LESSONS, "app_pages/live.py", "app_pages/serve.py"])
def test_main_view_has_no_claim_ids_test_paths_or_raw_ids(page, lang):
    at = open_page(page, {"lang": lang})
    assert not at.exception, at.exception
    texts = [text for _, text in main_view(at.main, [])]
    found = [m.group(0) for text in texts for m in [ENGINEERING.search(text)] if m]
    assert found == [], found


@pytest.mark.parametrize("page", LOOK_LESSONS)
def test_every_timeline_has_a_look_line_right_above_it(page):
    at = open_page(page)
    items = main_view(at.main, [])
    look = t("view.look", "en")
    timelines = [i for i, (kind, _) in enumerate(items) if kind == "timeline"]
    for i in timelines:
        before = [text for kind, text in items[:i] if kind == "markdown"]
        assert before and look in before[-1], (page, before[-1:] or None)
    if page != "app_pages/prefill_decode.py":
        assert timelines, page


def test_provenance_sits_in_the_how_do_we_know_expander():
    at = open_page("app_pages/batching.py")
    main = " ".join(text for _, text in main_view(at.main, []))
    assert t("common.verified_v0", "en") not in main
    boxes = [e for e in at.expander if e.label == t("view.how_we_know", "en")]
    assert boxes and t("common.verified_v0", "en") in " ".join(c.value for c in boxes[0].caption)


def test_a_busy_timeline_shows_thirty_rows_and_a_toggle_for_all():
    at = open_page("app_pages/long_prompts.py", {"chat_rate": "50"})
    figs = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    starvation = figs[1]  # the second tab: 400 chats and 3 long prompts
    rows = starvation["layout"]["yaxis"]["categoryarray"]
    assert len(rows) == 30
    assert sum(r.startswith(t("gantt.mark.long", "en")) for r in rows) == 3
    toggle = at.toggle(key="starvation_all")
    assert toggle.label == t("gantt.show_all", "en", n=403)
    toggle.set_value(True).run()
    figs = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    assert len(figs[1]["layout"]["yaxis"]["categoryarray"]) == 403


def test_compact_layout_fits_a_projector_screen():
    at = open_page("app_pages/long_prompts.py", {"compact": "true"})
    figs = [json.loads(e.proto.spec) for e in at.get("plotly_chart")]
    assert all(f["layout"]["height"] <= 640 for f in figs)  # three panels and the ▶ buttons
