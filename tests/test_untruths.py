"""Small untruths a student would catch (issue 26), each pinned by a test."""

import json

import pandas as pd
import pytest
from apptest_page import open_page

from sim.runs.sweep import goodput_of
from ui import charts
from ui import lesson_setups as ls
from ui.goodput_text import goodput_cell, goodput_frame
from ui.i18n import catalog, t


def sweep(attainments, rates=(2.0, 4.0, 6.0), gpus=2):
    return pd.DataFrame(
        {"rate_per_s": rates, "attainment": attainments, "num_gpus": [gpus] * len(rates)}
    )


def test_goodput_says_at_least_when_every_rate_tried_met_the_target():
    passed = goodput_of(sweep([1.0, 0.95, 0.91]))
    assert passed["all_rates_met"] and goodput_cell(passed) == "≥ 6"
    assert goodput_cell(passed, per_gpu=True) == "≥ 3"
    missed = goodput_of(sweep([1.0, 0.95, 0.5]))
    assert not missed["all_rates_met"] and goodput_cell(missed) == "4"
    frame = goodput_frame({"a": sweep([1.0, 1.0, 1.0])})
    assert frame.loc["goodput_per_s", "a"] == "≥ 6"
    fig = charts.goodput_curves({"a": sweep([1.0, 1.0, 1.0])})
    assert "≥" in fig.data[0].name


def test_the_roofline_follows_the_context_slider():
    for ctx in (1024, 4096):
        at = open_page("app_pages/prefill_decode.py", {"ctx": str(ctx)})
        names = [
            tr.get("name", "")
            for ch in at.get("plotly_chart")
            for tr in json.loads(ch.proto.spec)["data"]
        ]
        assert t("charts.roofline.decode", "en", context=ctx) in names


def test_the_compute_bound_region_is_not_called_flat_while_it_still_rises():
    from sim.cluster.topologies import simulate
    from sim.scenarios import get_scenario

    s = get_scenario("c3-concurrency")
    runs = {v.label: simulate(list(v.workload), v.config) for v in s.variants}
    table = charts.concurrency_table(runs)
    rows = table[table.prompt_tokens == 3000].sort_values("concurrency")
    sat = charts.saturation_concurrency(rows.concurrency, rows.tokens_per_s)
    rise = rows.tokens_per_s.iloc[-1] / float(rows[rows.concurrency == sat].tokens_per_s.iloc[0])
    assert rise > 1.1  # it still rises past the boundary...
    for lang in ("en", "ko"):  # ...so the label says it slows, not that it is flat
        assert "flat" not in t("charts.concurrency.flat", lang).lower()
        assert "평탄" not in t("charts.concurrency.flat", lang)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_choosing_swap_says_it_runs_vllm_v0(lang):
    swap = open_page("app_pages/memory.py", {"mode": "swap", "lang": lang})
    assert t("memory.swap_is_v0", lang) in [i.value for i in swap.info]
    recompute = open_page("app_pages/memory.py", {"lang": lang})
    assert t("memory.swap_is_v0", lang) not in [i.value for i in recompute.info]


def test_slo_is_spelled_out_where_slo_met_is_shown():
    for page in ("app_pages/batching.py", "app_pages/chunked.py", "app_pages/long_prompts.py"):
        at = open_page(page)
        shown = any(
            t("metric.slo_attainment", "en") in frame.value.columns for frame in at.dataframe
        )
        captions = " ".join(c.value for c in at.caption)
        assert not shown or "service-level objective" in captions, page


def test_the_texts_do_not_say_uploads_are_in_the_url():
    for lang in ("en", "ko"):
        for key in ("app.tagline", "play.lead"):
            text = catalog(lang)[key]
            assert ("upload" in text.lower()) or ("업로드" in text), (lang, key)


def test_long_prompts_starvation_table_names_its_columns_in_full():
    at = open_page("app_pages/long_prompts.py")
    headers = [c for frame in at.dataframe for c in frame.value.columns]
    assert t("long.starvation_col_chat", "en") in headers
    assert t("long.starvation_col_long", "en") in headers
    assert ls.STARVATION["aging"] == 0.0


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_live_table_names_its_columns_in_words(lang):
    from live.engine.calibrate import fidelity
    from live.replay.report import errors
    from sim.cluster.topologies import simulate
    from sim.scenarios import requests_from_rows
    from ui.labels import live_error_column

    run = simulate(list(requests_from_rows([(0.0, 100, 10), (0.1, 200, 10)])))
    for table in (errors(run, run), fidelity(run, run)):  # the replay's, the Live page's
        columns = [live_error_column(c, lang) for c in table.columns]
        assert all("_" not in c for c in columns), columns
        assert t("live.col.measured_s", lang, metric="TTFT") in columns
        assert t("live.col.predicted_s", lang, metric="TPOT") in columns
