"""Labels the simulator makes reach a Korean page in Korean (issue 13).

sim/scenarios.py names its variants in English ("colocated", "swap (V0)", "chunk 2048"); those
names are ids (URLs, the CLI's --variant, tests), so the pages translate them at display time
through ui.labels and assets/i18n/<lang>/labels.json. These tests fail when one slips through:
- every variant label of every scenario (and every topology name) has a Korean rendering that
  differs from the English id, unless it is only engine, GPU, link or knob names (SAME_IN_KOREAN);
- every lesson page, rendered in Korean, shows none of those English labels and no "R0"-style
  request id in its titles, tables (index, columns, cells), metrics, text and figures (trace
  names, text, hover text, annotations, axis titles and categories, slider labels), no
  snake_case id as a table header and no metric value in English seconds ("2.62 s");
- every widget option a Korean page shows (a selectbox's "recompute"/"swap", a topology) is in
  Korean unless it is a name (a policy, a GPU, a model, an SLO preset), while the URL keeps the
  language-independent id (?mode=swap), so a link copied from the English page opens the same
  view in Korean and back (ui.widgets.select with `shown=`).
"""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from sim.config import DISAGG_PROTOCOLS, TOPOLOGY_NAMES
from sim.cost.profiles import FITTED, profile_origin
from sim.policies import POLICIES, get_policy_class
from sim.scenarios import SCENARIOS
from ui.i18n import catalog
from ui.labels import has_label, request_label, request_row, sim_label

# Labels made only of names that stay as they are in Korean (glossary: engine names, GPU and
# link names, vLLM's knob names).
SAME_IN_KOREAN = {
    "1P1D",  # 1 prefill + 1 decode worker: the xPyD notation
    "H100 + H100, IB",
    "H100 + H200, IB",
    "H100 + H100, 25GbE",
}
VARIANT_LABELS = sorted({v.label for s in SCENARIOS.values() for v in s.variants})
SHOWN_LABELS = sorted({*VARIANT_LABELS, *TOPOLOGY_NAMES})
# English ids that must not be on a Korean page. Names in SAME_IN_KOREAN may be, and so may a
# label that is also a policy's id ("static", "prefill-first"): a policy is named by its id, as
# its selectbox option and `--policy` write it.
ENGLISH_ONLY = sorted(
    label for label in SHOWN_LABELS if label not in SAME_IN_KOREAN and label not in POLICIES
)
REQUEST_ID = re.compile(r"(?<![A-Za-z0-9_])R\d+(?![A-Za-z0-9_])")  # R0, R12: the sim's ids


@pytest.mark.parametrize("label", SHOWN_LABELS)
def test_every_simulator_label_has_a_korean_rendering(label):
    assert has_label(label), f"no key label.{label} (or pattern) in assets/i18n/*/labels.json"
    assert sim_label(label, "en") == label  # English shows the id itself
    korean = sim_label(label, "ko")
    if label in SAME_IN_KOREAN:
        assert korean == label
    else:
        assert korean != label, f"{label!r} is shown untranslated in Korean"
        assert not english_hits(korean), korean


def test_numbered_labels_keep_their_numbers():
    assert sim_label("3000 tok x 16", "ko") == "3000토큰 × 16"
    assert sim_label("chunk 512", "ko") == "청크 512"
    assert sim_label("a visitor's own label", "ko") == "a visitor's own label"


def test_labels_catalog_has_the_same_keys_in_both_languages():
    en = {k for k in catalog("en") if k.startswith("label.")}
    ko = {k for k in catalog("ko") if k.startswith("label.")}
    assert en == ko and en


@pytest.mark.parametrize("policy", list(POLICIES))
def test_engine_notes_say_what_a_policy_mirrors_in_both_languages(policy):
    name = get_policy_class(policy).name
    assert catalog("en")[f"label.mirrors.{name}"] == get_policy_class(policy).mirrors  # in sync
    korean = catalog("ko")[f"label.mirrors.{name}"]
    assert re.search("[가-힣]", korean) and not english_hits(korean)


@pytest.mark.parametrize("gpu", list(FITTED))
def test_the_runs_a_profile_was_fitted_on_are_said_in_korean(gpu):
    assert catalog("en")[f"label.profile_detail.{gpu}"] == profile_origin(gpu)[2]  # in sync
    assert re.search("[가-힣]", catalog("ko")[f"label.profile_detail.{gpu}"])


def test_request_names_agree_between_rows_tables_and_charts():
    assert request_row(0, "en") == "R0"  # narrow timeline rows in English
    assert request_row(0, "ko") == request_label(0, "ko") == "요청 0"
    assert not REQUEST_ID.search(request_label(3, "en"))


# ---- every page, in Korean ----

# The Playground with every translated option away from its default.
PLAYGROUND_OPTIONS = dict(k="1", n="20", arr="burst", prompt="code", slo="custom")
PAGES = {  # page -> query params that show as much simulator-made text as the page has
    "app_pages/home.py": {},
    "app_pages/prefill_decode.py": {},
    "app_pages/prefill_decode.py?h200": {"gpu": "H200"},  # its trust panel's known misses
    "app_pages/batching.py": {},
    "app_pages/chunked.py": {},
    "app_pages/long_prompts.py": {},
    "app_pages/memory.py": {},
    "app_pages/memory.py?swap": {"mode": "swap"},
    "app_pages/prefix_caching.py": {},
    "app_pages/speculative.py": {},
    "app_pages/speculative.py?options": {"method": "ngram", "accept": "geometric", "alpha": "0.3"},
    "app_pages/disaggregation.py": {"sweep": "true", "rate": "4.0"},
    "app_pages/playground.py": {"k": "3", "n": "40", "sweep": "true"},
    "app_pages/live.py": {},
    "app_pages/live.py?options": {"topo": "disaggregated", "vs": "none", "wl": "three"},
    "app_pages/playground.py?options": {**PLAYGROUND_OPTIONS, "t0": "router"},
    "app_pages/serve.py": {"url": "http://127.0.0.1:9", "wl": "upload", "gpu": "custom"},
}
FIGURELESS = ("app_pages/live", "app_pages/serve")  # the measured runs only come on a click

# Widget options that are names, the same in every language: policies (as `--policy` writes
# them), hand-off protocols (vllm, distserve), and what the Korean catalog itself writes in
# Latin (the glossary's colocation, disaggregation). Any other bare lowercase English word shown
# as an option on a Korean page ("none", "poisson", "custom") is an id nobody translated.
OPTION_NAMES = {*POLICIES, *DISAGG_PROTOCOLS, *catalog("ko").values()}
BARE_WORDS = re.compile(r"[a-z]+(\+[a-z]+)*")  # "swap", "chat+longdoc"; not H100-SXM, 8b-like
# The English rendering of every option the catalogs translate (options.json): shown as such on
# a Korean page, it slipped through untranslated.
OPTION_ENGLISH = {
    catalog("en")[k]
    for k in catalog("en")
    if k.startswith("option.") and catalog("ko")[k] != catalog("en")[k]
}


SNAKE_ID = re.compile(r"[a-z0-9]+(_[a-z0-9]+)+")  # a column's id (goodput_per_s), not its name


def english_hits(text: str) -> list[str]:
    """English-only simulator labels and request ids in `text`, as whole words."""
    hits = [m.group(0) for m in REQUEST_ID.finditer(text)]
    for label in ENGLISH_ONLY:
        if re.search(rf"(?<![\w`-]){re.escape(label)}(?![\w`(-])", text):  # not "...0(기본값)"
            hits.append(label)
    return hits


def figure_strings(obj) -> list[str]:
    """Every string a plotly figure's JSON can show (names, text, hover, titles, categories)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):  # "bdata": a numpy array in base64, not text
        return [s for k, v in obj.items() if k != "bdata" for s in figure_strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in figure_strings(v)]
    return []


MARKDOWN_KINDS = (
    "title",
    "header",
    "subheader",
    "markdown",
    "caption",
    "info",
    "warning",
    "success",
)
STRIKE = re.compile(r"(?<!\\)~[^~]*(?<!\\)~")  # two unescaped tildes: GFM strikethrough


def page_strings(at: AppTest) -> dict[str, list[str]]:
    """What a visitor reads on the page, by where it is."""
    out: dict[str, list[str]] = {}
    for kind in (
        "title",
        "header",
        "subheader",
        "markdown",
        "caption",
        "info",
        "warning",
        "success",
        "text",
        "expander",
        "tab",
    ):
        out[kind] = [
            str(getattr(e, "label", None) or getattr(e, "value", "")) for e in at.get(kind)
        ]
    out["metric"] = [f"{m.label} {m.value}" for m in at.metric]
    out["seconds in English"] = [m.value for m in at.metric if re.search(r"\d s$", str(m.value))]
    tables = []
    for frame in at.dataframe:
        table = frame.value
        tables += [str(v) for v in (*table.index, *table.columns, table.index.name)]
        tables += [v for v in table.to_numpy().ravel().tolist() if isinstance(v, str)]
    out["dataframe"] = tables
    out["table header id"] = [v for v in tables if SNAKE_ID.fullmatch(v)]
    out["widget option"] = [o for e in (*at.selectbox, *at.select_slider) for o in e.options]
    out["figure"] = []
    for chart in at.get("plotly_chart"):
        spec = json.loads(chart.proto.spec)
        out["figure"] += figure_strings(spec)
    return out


def open_page(page: str, params: dict) -> AppTest:
    at = AppTest.from_file("../app.py", default_timeout=300)
    for key, value in {"lang": "ko", **params}.items():
        at.query_params[key] = value
    at.run()
    at.switch_page(page.split("?")[0]).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize("page", list(PAGES))
def test_no_simulator_label_reaches_a_korean_page_untranslated(page):
    at = open_page(page, PAGES[page])
    strings = page_strings(at)
    ids = strings.pop("table header id")
    seconds = strings.pop("seconds in English")  # "2.62 s": Korean says 2.62초
    found = {
        where: sorted({hit for text in texts for hit in english_hits(text)})
        for where, texts in strings.items()
    }
    found["table header id"] = ids
    found["seconds in English"] = seconds
    found["untranslated option"] = untranslated_options(strings["widget option"])
    # Korean writes ranges with "~" (glossary: "100~300 ms"); in Markdown two of them strike
    # the text between through, so text shown as Markdown must escape it ("100\\~300 ms").
    found["~ read as strikethrough"] = [
        text for kind in MARKDOWN_KINDS for text in strings[kind] if STRIKE.search(text)
    ]
    assert {where: hits for where, hits in found.items() if hits} == {}
    assert strings["figure"] or page.startswith(FIGURELESS), "nothing was checked"


def untranslated_options(options: list[str]) -> list[str]:
    return sorted(
        {
            o
            for o in options
            if o in OPTION_ENGLISH or (BARE_WORDS.fullmatch(o) and o not in OPTION_NAMES)
        }
    )


def test_the_option_check_fires_on_english_ids():
    assert untranslated_options(["swap", "poisson", "chat+longdoc", "none"]) == [
        "chat+longdoc",
        "none",
        "poisson",
        "swap",
    ]
    assert untranslated_options(["vllm", "prefill-first", "distserve", "H100-SXM", "스왑"]) == []


# ---- widget options: shown in the page's language, ids in the URL ----

SHARED_VIEWS = {  # page -> a URL's query, with options away from their defaults
    "app_pages/memory.py": {"mode": "swap"},
    "app_pages/playground.py": {**PLAYGROUND_OPTIONS, "t0": "disaggregated"},
    "app_pages/live.py": {"wl": "three", "vs": "none", "topo": "disaggregated"},
}


def shown_value(box) -> str:
    """What a selectbox shows for its value (AppTest keeps the shown labels as options)."""
    return box.options[box.index]


@pytest.mark.parametrize("page", list(SHARED_VIEWS))
def test_a_copied_english_url_opens_the_same_view_in_korean(page):
    query = SHARED_VIEWS[page]
    views = {lang: open_page(page, {"lang": lang, **query}) for lang in ("en", "ko")}
    for key, option in query.items():
        assert all(views[lang].query_params[key] == option for lang in views)  # still the id
    for key in [box.key for box in views["en"].selectbox]:
        en, ko = (views[lang].selectbox(key=key) for lang in ("en", "ko"))
        assert en.value == ko.value, key  # the same view
        if key in query:
            assert en.value == type(en.value)(query[key]), key  # ... the one the URL asked for
        assert not untranslated_options(ko.options) and not english_hits(shown_value(ko)), key


def test_choosing_an_option_on_a_korean_page_writes_its_id_to_the_url():
    at = open_page("app_pages/memory.py", {})
    box = at.selectbox(key="mode")
    assert box.options == [catalog("ko")[f"option.mode.{m}"] for m in ("recompute", "swap")]
    box.select("swap").run()
    assert at.query_params.get("mode") == "swap" and at.selectbox(key="mode").value == "swap"
    at.selectbox(key="mode").select("recompute").run()  # the default leaves the URL, as bound
    assert "mode" not in at.query_params and not at.exception


def test_switching_language_keeps_the_chosen_option():
    at = open_page("app_pages/memory.py", {"mode": "swap"})
    at.segmented_control(key="lang").set_value("en").run()  # the box still sent "스왑"
    assert at.selectbox(key="mode").value == "swap"
    assert shown_value(at.selectbox(key="mode")) == "swap"
    assert at.query_params.get("mode") == "swap"


def test_an_unknown_option_in_the_url_falls_back_to_the_default_and_leaves_the_url():
    at = open_page("app_pages/memory.py", {"mode": "스왑"})  # only ids are accepted
    assert at.selectbox(key="mode").value == "recompute" and "mode" not in at.query_params


def test_home_table_and_chart_name_requests_and_runs_alike():
    for lang in ("en", "ko"):
        at = open_page("app_pages/home.py", {"lang": lang})
        table = at.dataframe[0].value
        chart = json.loads(at.get("plotly_chart")[1].proto.spec)
        assert (
            list(table.index) == chart["data"][0]["x"] == [request_label(i, lang) for i in range(3)]
        )
        assert list(table.columns) == [trace["name"] for trace in chart["data"]]
        assert list(table.columns) == [sim_label(c, lang) for c in ("colocated x2", "1P1D")]
