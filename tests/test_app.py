"""Every page renders (both languages, default and extreme controls) and reacts to its controls.

AppTest runs the real script in-process (no browser): it sees widgets, errors and figure JSON.
Browser behaviour (Play, scrubbing, screenshots) is in tests/e2e/.
"""

import json

import numpy as np
import pytest
from apptest_page import open_page
from streamlit.testing.v1 import AppTest

from ui.i18n import t
from ui.labels import live_error_column

PAGES = {  # page file -> (title key, extreme query params)
    "app_pages/home.py": ("home.title", {"window": "10.0"}),
    "app_pages/prefill_decode.py": (
        "pd.title",
        {"gpu": "L4", "model": "Qwen2.5-0.5B", "ctx": "32768"},
    ),
    "app_pages/batching.py": (
        "batching.title",
        {"batch": "1", "rate": "16.0", "n": "64", "long": "true"},
    ),
    "app_pages/chunked.py": ("chunked.title", {"chunk": "256", "gpu": "L4"}),
    "app_pages/long_prompts.py": (
        "long.title",
        {
            "long_len": "32768",
            "n_long": "2",
            "partial": "8",
            "max_long": "8",
            "threshold": "1024",
            "chat_rate": "60",
            "aging": "0.0",
        },
    ),
    "app_pages/memory.py": ("memory.title", {"kv": "8000", "mode": "swap"}),
    "app_pages/prefix_caching.py": (
        "prefix.title",
        {"system": "8000", "rate": "16.0", "trace_rate": "0.5", "kv": "12000"},
    ),
    "app_pages/speculative.py": (
        "spec.title",
        {"method": "draft", "k": "7", "accept": "geometric", "alpha": "0.05", "gpu": "L4"},
    ),
    "app_pages/disaggregation.py": (
        "disagg.title",
        {"p": "3", "d": "3", "link": "25GbE", "dgpu": "L4", "rate": "16.0"},
    ),
    "app_pages/playground.py": (
        "play.title",
        {"k": "4", "arr": "gamma", "cv": "4.0", "n": "300", "rate": "40.0"},
    ),
    "app_pages/live.py": (
        "live.title",
        {
            "wl": "typed",
            "model": "smollm2-135m-shape",
            "topo": "disaggregated",
            "policy": "static",
            "vs": "none",
            "out": "48",
        },
    ),
}


def figures(at: AppTest) -> list[dict]:
    return [json.loads(e.proto.spec) for e in at.get("plotly_chart")]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("page", list(PAGES))
def test_page_renders_in_both_languages(page, lang):
    at = open_page(page, {"lang": lang})
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert at.title[0].value == t(PAGES[page][0], lang)


@pytest.mark.parametrize("page", list(PAGES))
def test_page_survives_extreme_controls(page):
    at = open_page(page, PAGES[page][1])
    assert not at.exception, at.exception


def test_every_page_of_the_app_is_tested_here():
    from ui.navigation import FILES

    assert set(FILES) - {"app_pages/serve.py"} <= set(PAGES)


def test_prefix_caching_page_draws_the_cached_part_and_its_hit_rate():
    at = open_page("app_pages/prefix_caching.py", {"system": "4000"})
    assert not at.exception, at.exception
    names = {trace.get("name") for trace in figures(at)[0]["data"]}
    assert t("gantt.phase.cached", "en") in names
    table = at.dataframe[0].value  # caching on, caching off
    hit = table[t("metric.prefix_cache_hit_rate", "en")]
    assert hit.iloc[0] > 0.8 and hit.iloc[1] == 0  # 4000 of 4300 prompt tokens shared


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_checked_lines_say_router_and_hand_off_are_our_own_models(lang):
    """The differential suite steps one scheduler: where a picture shows a router or P->D
    workers, the 'checked' line says what is checked and what is PD Lab's own model."""
    verified, router, disagg = (
        t(k, lang) for k in ("common.verified_v1", "common.caveat_router", "common.caveat_disagg")
    )
    scope = t("common.caveat_scope", lang)
    text = captions(open_page("app_pages/disaggregation.py", {"lang": lang}))
    assert verified in text and router in text and disagg in text
    assert text.count(scope) == 1  # said once before both caveats, not once per caveat
    text = captions(open_page("app_pages/home.py", {"lang": lang}))  # V1 on 2 GPUs, both ways
    assert verified in text and disagg in text and router in text
    text = captions(
        open_page("app_pages/playground.py", {"lang": lang, "k": "1", "n": "20", "t0": "router"})
    )
    assert verified in text and router in text and disagg not in text
    text = captions(open_page("app_pages/playground.py", {"lang": lang, "k": "1", "n": "20"}))
    assert verified in text and router not in text and disagg not in text  # colocated: no caveat


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_playground_shows_a_policys_note_in_the_pages_language(lang):
    at = open_page(
        "app_pages/playground.py",
        {"lang": lang, "k": "1", "n": "20", "p0": "chunked", "s0": "max_num_partial_prefills=0"},
    )
    assert not at.exception, at.exception
    assert t("policy_note.chunked_partial_zero", lang) in [i.value for i in at.info]
    if lang == "ko":  # the CLI's English text does not reach a Korean page
        assert not any("old spelling" in i.value for i in at.info)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_playground_says_what_priced_the_steps_of_a_measured_kernels_run(lang, monkeypatch):
    """step_costs=kernels in one configuration's knobs: that column says which table priced which
    operator; without aiconfigurator-core (requirements.txt alone) it says the roofline did."""
    pytest.importorskip("aiconfigurator_core")
    query = {"lang": lang, "k": "2", "n": "20", "s0": "step_costs=kernels, gpu=H200"}
    at = open_page("app_pages/playground.py", {**query, "s1": "gpu=H200"})
    assert not at.exception, at.exception
    head = t("common.kernels_source", lang, gpu="H200", measured="|", rest="").split("|")[0]
    said = [c.value for c in at.caption if c.value.startswith(head)]
    assert len(said) == 1  # the kernels column only; the roofline column says nothing
    linear, sampling = t("kernel_op.linear", lang), t("kernel_op.sampling", lang)
    priced = t("kernel_op.priced", lang, op=linear, table="vLLM 0.24.0 GEMMs, bfloat16")
    assert priced in said[0]  # operators in the page's words
    lm_head = t("kernel_op.priced", lang, op="lm_head", table="vLLM 0.24.0 GEMMs, bfloat16")
    assert lm_head in said[0] and sampling in said[0]
    import sim.cost.kernel_data

    monkeypatch.setattr(sim.cost.kernel_data, "available", lambda: False)
    at = open_page("app_pages/playground.py", {**query, "k": "1"})
    assert not at.exception, at.exception
    assert t("common.kernels_missing", lang) in [i.value for i in at.info]


def test_serve_page_says_which_engine_its_prediction_mirrors():
    at = open_page("app_pages/serve.py")
    assert not at.exception, at.exception
    assert t("common.verified_v1", "en") in captions(at)  # the replay's default policy, vllm


def test_live_page_says_prefix_caching_is_off_in_one_line():
    at = open_page("app_pages/live.py")  # live runs, or recordings where torch is missing
    assert not at.exception, at.exception
    assert t("live.no_prefix_cache", "en") in [c.value for c in at.caption]


def test_timeline_is_animated_with_play_and_a_slider():
    fig = figures(open_page("app_pages/home.py"))[0]
    assert len(fig["frames"]) >= 30
    labels = [b["label"] for menu in fig["layout"]["updatemenus"] for b in menu["buttons"]]
    assert any("▶" in label or "Play" in label for label in labels)
    assert fig["layout"]["sliders"]


def test_changing_the_chunk_size_changes_the_numbers():
    small = open_page("app_pages/chunked.py", {"chunk": "512"}).dataframe[0].value
    big = open_page("app_pages/chunked.py", {"chunk": "8192"}).dataframe[0].value
    assert not small.iloc[1].equals(big.iloc[1])  # the chunked row differs
    assert small.iloc[0].equals(big.iloc[0])  # the prefill-first reference does not


def test_changing_the_window_changes_the_token_table():
    a = open_page("app_pages/home.py", {"window": "2.0"}).dataframe[0].value
    b = open_page("app_pages/home.py", {"window": "8.0"}).dataframe[0].value
    assert (b.values > a.values).all()


def test_a_model_that_does_not_fit_shows_an_error_not_a_traceback():
    at = open_page("app_pages/prefill_decode.py", {"model": "Llama-3.3-70B", "gpu": "L4"})
    assert not at.exception
    assert at.error and "tensor_parallel" in at.error[0].value


def test_bad_knobs_in_the_playground_show_an_error_and_keep_the_rest():
    at = open_page("app_pages/playground.py", {"s0": "bogus=1", "k": "2"})
    assert not at.exception
    assert any("bogus" in e.value for e in at.error)
    assert figures(at)  # the other configuration still runs and draws


def test_language_is_in_the_url_and_survives_page_changes():
    at = open_page("app_pages/memory.py", {"lang": "ko"})
    assert at.query_params["lang"] == ["ko"] or at.query_params["lang"] == "ko"
    at.switch_page("app_pages/chunked.py").run()
    assert at.title[0].value == t("chunked.title", "ko")


def test_goodput_sweep_draws_attainment_per_rate_and_the_goodput():
    at = open_page("app_pages/playground.py", {"sweep": "true", "k": "1", "n": "60"})
    assert not at.exception, at.exception
    sweep = figures(at)[-1]
    assert "goodput" in json.dumps(sweep["layout"]).lower()
    assert t("label.goodput.goodput_per_s", "en") in at.dataframe[-1].value.index


def test_live_page_runs_two_policies_and_compares_each_with_the_simulation():
    at = open_page(
        "app_pages/live.py",
        {"model": "smollm2-135m-shape", "wl": "freeze", "policy": "vllm", "vs": "prefill-first"},
    )
    at.button[0].click().run(timeout=400)  # calibration (~30 s) + two runs
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    for table in at.dataframe[:2]:  # per policy, the freeze workload's five requests
        errors = table.value
        wanted = {live_error_column(c, "en") for c in ("ttft_err_pct", "tpot_err_pct")}
        assert wanted <= set(errors.columns) and len(errors) == 5  # named in words
        assert not [c for c in errors.columns if "_" in c], errors.columns  # every one of them
    titles = json.dumps(figures(at)[0]["layout"], ensure_ascii=False)
    for name in ("vllm", "prefill-first"):
        for kind in ("live.measured", "live.simulated"):
            assert f"{name} · {t(kind, 'en')}" in titles
    # C5 on the real model: prefill-first stalls the streaming chats for the whole 768-token
    # prefill; vLLM V1 interleaves it with their decodes, so no gap is nearly that long.
    values = [float(m.value.split()[0]) for m in at.metric if m.label == t("live.stall", "en")]
    assert len(values) == 2
    chunked_stall, prefill_first_stall = values
    assert prefill_first_stall > 2 * chunked_stall


def test_pages_never_import_torch():
    import subprocess
    import sys

    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        "[AppTest.from_file('app.py', default_timeout=120).run() for _ in range(1)]; "
        "print('torch' in sys.modules)"
    )
    from conftest import ROOT

    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip().endswith("False"), out.stderr[-2000:]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_trust_section_names_what_it_is_known_to_miss_on_that_gpu(lang):
    # The H200's public runs hold two misses a teacher should know about (the 8B points whose
    # measurements disagree with each other, MoE too fast); the H100's view has no such note.
    known = t("pd.trust_known.H200", lang)
    h200 = open_page("app_pages/prefill_decode.py", {"gpu": "H200", "lang": lang})
    assert not h200.exception
    assert known in [c.value for c in h200.caption]
    h100 = open_page("app_pages/prefill_decode.py", {"gpu": "H100-SXM", "lang": lang})
    assert not any("H200" in c.value for c in h100.caption)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_trust_section_sets_nvidias_closed_formula_beside_ours(lang):
    # bench/vs_aiconfigurator_e2e.py --write: the same held-out H100 runs, both models' errors,
    # and the saturated runs the formula cannot price (it has no queue)
    from ui.charts_fidelity import baseline_figures

    base = baseline_figures("H100-SXM")
    expected = t("pd.trust_baseline", lang, scope="H100-SXM", **base)
    expected += " " + t("pd.trust_baseline_memory", lang, memory=base["memory"])
    h100 = open_page("app_pages/prefill_decode.py", {"gpu": "H100-SXM", "lang": lang})
    assert not h100.exception
    assert expected in [c.value for c in h100.caption]
    assert f"{base['aic_ttft']:.0f}%" in expected and f"{base['ours_ttft']:.0f}%" in expected


# ---- Speculative decoding: when it pays ----

SPEC_PAGE = "app_pages/speculative.py"
SPEC_FIXTURE = __import__("conftest").ROOT / "tests" / "data" / "spec_crossover_cpu.json"


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_speculative_page_draws_verify_steps_the_crossover_and_the_acceptance(lang):
    from ui import spec_live

    at = open_page(SPEC_PAGE, {"lang": lang})
    assert not at.exception and not at.error, (at.exception, [e.value for e in at.error])
    timeline, ratio, tpot = figures(at)[:3]
    legend = {tr.get("name") for tr in timeline["data"] if tr.get("showlegend")}
    assert {t("gantt.phase.accepted", lang), t("gantt.phase.rejected", lang)} <= legend
    assert timeline["frames"]  # the animated Gantt
    crossing = t("charts.spec.crossover", lang, batch=0).split("0")[0]  # "crossover ≈ "
    notes = [a["text"] for a in ratio["layout"]["annotations"]]
    assert sum(crossing in n for n in notes) == 1  # only the low rates cross, near 88
    assert len([tr for tr in tpot["data"] if tr.get("mode") == "lines+markers"]) == 4
    table = at.dataframe[0].value  # speculation off and on: the on row has the acceptance
    rate = table[t("metric.spec_acceptance_rate", lang)]  # text: "–" where it does not apply
    assert rate.iloc[0] == "–" and 0.3 < float(rate.iloc[1]) < 0.8
    assert float(table[t("metric.spec_tokens_per_verify", lang)].iloc[1]) > 2
    # the checked-in live measurements (bench/bench_live_spec.py --lesson): per prompt set, its
    # TPOT and its batch's decode time, on / off
    docs = [spec_live.load_live(path) for path in spec_live.LIVE_CURVES.values()]
    chart = figures(at)[-1]
    assert chart["layout"]["title"]["text"] == t("spec.live_chart_title", lang)
    curves = [tr for tr in chart["data"] if tr.get("mode") == "lines+markers"]
    assert len(curves) == 2 * len(docs) == 4
    for (tpot, batch), live in zip(zip(curves[::2], curves[1::2], strict=True), docs, strict=True):
        assert array(tpot["y"]) == pytest.approx([r["tpot_ratio"] for r in live["rows"]])
        assert array(batch["y"]) == pytest.approx([r["decode_time_ratio"] for r in live["rows"]])
        assert f"{spec_live.acceptance(live):.0%}" in tpot["name"]


def test_speculative_page_widgets_change_the_runs():
    base = open_page(SPEC_PAGE).dataframe[0].value
    ngram = open_page(SPEC_PAGE, {"method": "ngram", "k": "5"}).dataframe[0].value
    assert base.iloc[0].equals(ngram.iloc[0])  # speculation off: the same run
    assert not base.iloc[1].equals(ngram.iloc[1])
    low = open_page(SPEC_PAGE, {"accept": "geometric", "alpha": "0.2"})
    assert t("spec.alpha", "en") in [s.label for s in low.slider]
    assert float(low.dataframe[0].value[t("metric.spec_acceptance_rate", "en")].iloc[1]) < 0.3


def test_speculative_page_says_what_to_change_for_a_model_that_does_not_fit():
    at = open_page(SPEC_PAGE, {"model": "Llama-3.3-70B", "gpu": "L4"})
    assert not at.exception
    assert at.error and "tensor_parallel" in at.error[0].value


def array(values) -> np.ndarray:
    """A figure's numbers: a list, or plotly's base64 typed array {"bdata", "dtype"}."""
    if isinstance(values, dict):
        import base64

        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"])
    return np.asarray(values, dtype=float)


def test_speculative_page_draws_the_live_measurement_where_one_was_recorded(monkeypatch):
    from ui import spec_live

    monkeypatch.setattr(spec_live, "LIVE_CURVES", {"live": SPEC_FIXTURE})
    at = open_page(SPEC_PAGE)
    assert not at.exception and not at.error
    live = figures(at)[-1]
    assert live["layout"]["title"]["text"] == t("spec.live_chart_title", "en")
    (curve,) = [tr for tr in live["data"] if tr.get("mode") == "lines+markers"]
    assert array(curve["y"]) == pytest.approx([11 / 20, 18 / 24, 52 / 40])
    assert curve["name"] == t("spec.curve.live", "en", prompts=t("spec.prompts.all", "en"), acc=0.6)
    assert any("CPU, 2 cores" in c for c in captions(at).splitlines())
    # the sentence under the chart says where the measured curve crosses (log-interpolated)
    text = "\n".join(m.value for m in at.markdown)
    assert t("spec.cross.at", "en", curve=curve["name"], batch=2 ** (2 + 2 * 0.25 / 0.55)) in text


def test_speculative_page_draws_a_second_prompt_set_beside_the_first(monkeypatch, tmp_path):
    """Two measurements (bench --prompts all, --prompts code): a curve per set, each named by
    its prompts and acceptance, each with its own crossover."""
    from ui import spec_live

    doc = json.loads(SPEC_FIXTURE.read_text())
    code = {**doc, "prompts": "code", "acceptance_rate": 0.55}
    code["rows"] = [{**r, "tpot_on_ms": r["tpot_on_ms"] * 1.3} for r in doc["rows"]]
    path = tmp_path / "code.json"
    path.write_text(json.dumps(code))
    monkeypatch.setattr(spec_live, "LIVE_CURVES", {"live": SPEC_FIXTURE, "live_code": path})
    at = open_page(SPEC_PAGE, {"lang": "ko"})
    assert not at.exception and not at.error
    names = [tr["name"] for tr in figures(at)[-1]["data"] if tr.get("mode") == "lines+markers"]
    code_name = t("spec.curve.live", "ko", prompts=t("spec.prompts.code", "ko"), acc=0.55)
    assert names[1] == code_name and "55%" in code_name
    text = "\n".join(m.value for m in at.markdown)
    assert code_name in text and names[0] in text  # each curve's crossover sentence


def test_speculative_page_says_how_to_record_a_missing_live_measurement(monkeypatch, tmp_path):
    from ui import spec_live

    monkeypatch.setattr(spec_live, "LIVE_CURVES", {"live": tmp_path / "absent.json"})
    at = open_page(SPEC_PAGE)
    assert not at.exception and not at.error
    assert t("spec.live_missing", "en") in captions(at)


def test_speculative_page_warns_about_a_malformed_live_file(monkeypatch, tmp_path):
    from ui import spec_live

    bad = tmp_path / "spec.json"
    bad.write_text('{"model": "m", "device": "d", "k": 3, "command": "c", "rows": [{"batch": 1}]}')
    monkeypatch.setattr(spec_live, "LIVE_CURVES", {"live": bad})
    at = open_page(SPEC_PAGE)
    assert not at.exception and not at.error
    assert at.warning and "tpot_off_ms" in at.warning[0].value
