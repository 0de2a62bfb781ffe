"""The Korean catalogs keep one glossary: one term, one rendering (the tables below hold it).

The rule: names of phases and techniques (prefill, decode, goodput, TTFT, ...) and vLLM's knob
names stay in Latin letters; ordinary nouns are Korean (KV 캐시, 배치, 대기열).

A Korean student reads prose, legends, hover text and axis titles on the same screen; if the text
says "prefill" and the legend says "프리필", they look like two different things. These tests scan
every Korean string (all of assets/i18n/ko, including the labels of simulator variants) for:
- a second rendering of a glossary term (프리필 where the glossary keeps "prefill"),
- an English term left where the glossary has Korean (compute-bound is 연산 병목; the Latin may
  follow in brackets on first use, "연산 병목(compute-bound)"),
- the house style: "200토큰" attached, "100~300 ms" ranges, no space before "(", no English-style
  colon joining two sentences, no 해라체 (chart labels are nouns or -됨, prose is 합니다체).
The same rules also read what the catalogs never hold whole: the strings code assembles from
keys and numbers (hover templates, axis titles, legends, annotations, slider labels), taken
from the Gantt timeline and the figures of ui.charts rendered in Korean.
Each rule has a self-test on a bad example, so a rule that can never fire fails too.
"""

from __future__ import annotations

import json
import re

import pytest

from ui.i18n import catalog

KO = catalog("ko")

# A second rendering of a term, and the one the glossary asks for.
SECOND_RENDERINGS = {
    "프리필": "prefill",
    "디코드": "decode",
    "굿풋": "goodput",
    "디스어그리게이션": "disaggregation",
    "코로케이션": "colocation",
    "꺾임점": "리지 포인트 (ridge) or 전환점(knee)",
    "꺾이는 지점": "전환점(knee)",
    "선형 계층": "선형 레이어",
    "스톨": "멈춤",
    "스와핑": "스왑",
    "캐시 히트": "캐시 적중",
    "스루풋": "처리량",
    "로그 스케일": "로그 축",
    "적합 오차": "피팅 오차",
    "단원": "레슨",
    "기존 스케줄러": "예전(V0) 스케줄러 (기존 reads as the current one)",
    "KV 계산": "KV 블록 관리 (it is accounting, not computation)",
    "통합": "colocation",
}
SECOND_RENDERING_PATTERNS = {
    r"(?<!메모리 )대역폭 병목": "메모리 대역폭 병목",
    r"큐(?!레)": "대기열",
    r"(?<![A-Za-z])chunk(?![A-Za-z])": "청크 (chunked prefill and knob names stay Latin)",
    r"(?<![A-Za-z])roofline(?![A-Za-z])": "루프라인",
    r"(?<![A-Za-z])Playground(?![A-Za-z])": "플레이그라운드",
    r"FLOP/B(?![A-Za-z])": "FLOP/바이트 (as the roofline's axis writes it)",
}

# English terms the glossary renders in Korean. The Latin may stay only in brackets right after
# the Korean rendering: "연산 병목(compute-bound)".
ENGLISH_WITH_KOREAN = {
    "compute-bound": "연산 병목",
    "memory-bound": "메모리 대역폭 병목",
    "bandwidth-bound": "메모리 대역폭 병목",
    "knee": "전환점",
    "ridge": "리지 포인트",
    "swap": "스왑",
    "recompute": "재계산",
    "preemption": "선점",
    "preempted": "선점됨",
    "stall": "멈춤",
    "throughput": "처리량",
    "queue": "대기열",
    "colocated": "colocation",
    "disaggregated": "disaggregation",
    "cache hit": "캐시 적중",
    "prefix caching": "prefix 캐싱",
    "linear layer": "선형 레이어",
    "batch": "배치",
    "batches": "배치",
    "batching": "배칭",
    "KV cache": "KV 캐시",
    "KV block": "KV 블록",
    "KV blocks": "KV 블록",
    "FLOP/byte": "FLOP/바이트",
}

SPACE_BEFORE_UNIT = re.compile(r"(\d|\})[ \xa0]+(토큰|초(?!당)|개|번)")  # "768 토큰": attach
HYPHEN_RANGE = re.compile(r"\d\s*-\s*\d+\s*(ms|초|토큰|s\b)")  # "100-300 ms": use ~
DASH_RANGE = re.compile(r"\d\s*[–—]\s*\d")  # "3–5", "1.000–2.000초": an English range; use ~
SPACE_BEFORE_PAREN = re.compile(r"[가-힣A-Za-z0-9%}*`] \(")  # "도착률 (요청/초)": attach
# A colon after a finished sentence (…습니다: / …세요:) joins two sentences English-style.
COLON_AFTER_SENTENCE = re.compile(r"(니다|세요|해요):")
# 해라체 endings (…된다, …진다, …한다, …있다): prose is 합니다체, chart labels nouns or -됨.
HAERACHE = re.compile(r"(?<![니마보])(?<=[가-힣])다(?=$|[\s.,<)])")


def second_renderings(text: str) -> list[str]:
    found = [w for w in SECOND_RENDERINGS if w in text]
    found += [p for p in SECOND_RENDERING_PATTERNS if re.search(p, text)]
    return found


def english_left(text: str) -> list[str]:
    """Glossary terms written in English outside the bracket after their Korean rendering."""
    left = []
    text = re.sub(r"\{[^{}]*\}", "0", text)  # placeholders such as {queue} are not prose
    for english, korean in ENGLISH_WITH_KOREAN.items():
        word = rf"(?<![A-Za-z_-]){re.escape(english)}(?![A-Za-z_-])"  # not in max_batch_size
        for m in re.finditer(word, text, re.IGNORECASE):
            before = text[: m.start()]
            bracketed = before.endswith("(") and korean in before[-len(korean) - 20 :]
            # also "(연산 병목, compute-bound)": the Korean first, the Latin after a comma
            after_comma = re.search(rf"{re.escape(korean)}[^()]*, $", before[-40:])
            in_code = before.count("`") % 2 == 1  # a knob name or command
            if not (bracketed or after_comma or in_code):
                left.append(english)
    return left


def style_faults(text: str) -> list[str]:
    faults = []
    for name, rule in [
        ("space before a counting unit", SPACE_BEFORE_UNIT),
        ("range with a hyphen (use ~)", HYPHEN_RANGE),
        ("range with a dash (use ~)", DASH_RANGE),
        ("space before (", SPACE_BEFORE_PAREN),
        ("colon joining two sentences", COLON_AFTER_SENTENCE),
        ("해라체 ending", HAERACHE),
    ]:
        if rule.search(text):
            faults.append(name)
    return faults


def test_the_rules_fire_on_bad_examples():
    """Each rule catches the fault it is for (a rule that cannot fail checks nothing)."""
    assert second_renderings("GPU당 굿풋과 프리필") == ["프리필", "굿풋"]
    assert second_renderings("Playground와 chunk 크기") == [
        "(?<![A-Za-z])chunk(?![A-Za-z])",
        "(?<![A-Za-z])Playground(?![A-Za-z])",
    ]
    assert second_renderings("chunked prefill") == []
    assert second_renderings("대역폭 병목") and not second_renderings("메모리 대역폭 병목")
    assert english_left("prefill은 compute-bound입니다") == ["compute-bound"]
    assert english_left("prefill은 연산 병목(compute-bound)입니다") == []
    assert english_left("(연산 병목, compute-bound)") == []
    assert english_left("`--policy swap`") == []
    assert english_left("대기 {queue}") == []
    assert english_left("continuous batching과 KV cache") == ["batching", "KV cache"]
    assert english_left("KV blocks와 batch") == ["batch", "KV blocks"]
    assert english_left("max_batch_size와 `--max-batch`") == []
    assert second_renderings("%{x:.1f} FLOP/B") == [r"FLOP/B(?![A-Za-z])"]
    assert style_faults("768 토큰") == ["space before a counting unit"]
    assert style_faults("TPOT 100-300 ms") == ["range with a hyphen (use ~)"]
    assert style_faults("스텝: 3–5") == ["range with a dash (use ~)"]
    assert style_faults("도착률 (요청/초)") == ["space before ("]
    assert style_faults("받아들이지 않았습니다: 이유") == ["colon joining two sentences"]
    assert style_faults("늘다가 포화된다") == ["해라체 ending"]
    assert style_faults("스텝마다 토큰 하나를 만듭니다. 읽는 속도보다 빠름") == []


@pytest.mark.parametrize("check", [second_renderings, english_left, style_faults])
def test_every_korean_string_follows_the_glossary(check):
    faults = {key: check(text) for key, text in KO.items() if check(text)}
    assert faults == {}


def test_phase_names_stay_latin_in_legends_and_hover():
    """The Gantt legend and hover say prefill/decode exactly as the prose does."""
    for key in ["gantt.phase.prefill", "gantt.hover.phase.prefill", "charts.role.prefill"]:
        assert KO[key] == "prefill"
    for key in ["gantt.phase.decode", "gantt.hover.phase.decode", "charts.role.decode"]:
        assert KO[key] == "decode"


# ---- strings assembled in code: figures rendered in Korean ----

# Where a plotly figure keeps text a visitor reads (not colours, fonts, ids or legend groups).
SHOWN_KEYS = {
    "name",
    "text",
    "hovertemplate",
    "hovertext",
    "ticktext",
    "label",
    "prefix",
    "title",
    "annotations",
}
NOT_SHOWN = {"bdata", "font", "marker", "line", "legendgroup", "meta", "customdata"}


def shown_strings(obj, shown: bool = False) -> list[str]:
    """Every string a figure's JSON shows: trace names, text, hover templates and text, axis
    and legend titles, annotations, play-button and slider labels."""
    if isinstance(obj, str):
        return [obj] if shown else []
    if isinstance(obj, dict):
        return [
            text
            for key, value in obj.items()
            if key not in NOT_SHOWN
            for text in shown_strings(value, shown or key in SHOWN_KEYS)
        ]
    if isinstance(obj, list):
        return [text for value in obj for text in shown_strings(value, shown)]
    return []


def as_read(text: str) -> str:
    """What the visitor reads: a plotly placeholder (%{x:.2f}) shows a number, a tag breaks
    the line."""
    return re.sub(r"<[^<>]*>", "\n", re.sub(r"%\{[^{}]*\}", "0", text))


def test_the_figure_readers_see_what_a_visitor_sees():
    title = {"text": "시간(초)", "font": {"family": "Inter"}}
    fig = {
        "data": [
            {
                "name": "decode",
                "legendgroup": "stall",
                "marker": {"color": "red"},
                "hovertemplate": "시간: %{customdata[0]:.3f}–%{customdata[1]:.3f} 초",
            }
        ],
        "layout": {"xaxis": {"title": title}},
    }
    texts = [as_read(text) for text in shown_strings(fig)]
    assert texts == ["decode", "시간: 0–0 초", "시간(초)"]
    assert style_faults(texts[1]) == ["space before a counting unit", "range with a dash (use ~)"]


@pytest.fixture(scope="module")
def korean_figures() -> dict[str, dict]:
    """The Gantt timelines of lesson runs that show every phase (KV transfer, preemption,
    slowed decode, prefix-cache hits) and every figure builder of ui.charts, in Korean."""
    from test_charts import _chunk_table, _concurrency_table, _spec_table, _sweeps

    from sim.cluster.topologies import simulate
    from sim.scenarios import get_scenario
    from ui import charts
    from ui import lesson_setups as ls
    from ui.gantt import timeline_figure
    from ui.labels import sim_label

    def runs(scenario: str, *labels: str):
        s = get_scenario(scenario)
        for label in labels:
            variant = s.variant(label)
            yield sim_label(label, "ko"), simulate(s.requests(variant), variant.config)

    c12, c11, c5, pc1 = (
        list(runs("c12", "colocated", "disaggregated")),
        list(runs("c11", "swap (V0)")),
        list(runs("c5", "vLLM 2048")),
        list(runs("pc1", "caching on")),
    )
    gpu, model = "H100-SXM", "Llama-3.1-8B"
    # speculative decoding: a verify step's accepted and rejected parts, and the lesson's charts
    choice = ("eagle", 3, "eagle3-llama3.1-8b", 0.7, gpu, model)
    spec = [(lab, simulate(list(wl), cfg)) for lab, wl, cfg in ls.spec_timeline_specs(*choice)]

    spec_table, spec_labels = _spec_table("ko")
    sweeps = {sim_label(label, "ko"): sweep for label, sweep in _sweeps().items()}
    figures = {
        "timeline c12": timeline_figure(c12, lang="ko"),
        "timeline c11": timeline_figure(c11, lang="ko"),
        "timeline c5": timeline_figure(c5, lang="ko"),
        "timeline pc1": timeline_figure(pc1, lang="ko"),
        "roofline": charts.roofline(gpu, model, lang="ko"),
        "step time vs prompt": charts.step_time_vs_prompt(gpu, model, lang="ko"),
        "step time vs batch": charts.step_time_vs_batch(gpu, model, 1024, lang="ko"),
        "kv use": charts.kv_use(c11[0][1], lang="ko"),
        "worker utilisation": charts.worker_utilisation_bars(c12[1][1], lang="ko"),
        "throughput": charts.throughput_vs_concurrency(_concurrency_table(), "ko"),
        "chunk trade-off": charts.chunk_tradeoff(_chunk_table(), "ko"),
        "goodput": charts.goodput_curves(sweeps, "ko"),
        "fidelity": charts.fidelity_scatter(None, "ko"),
        "timeline speculative": timeline_figure(spec, lang="ko"),
        "spec ratio": charts.spec_ratio_chart(spec_table, spec_labels, "ko", "chosen"),
        "spec tpot": charts.spec_tpot_chart(spec_table, spec_labels, "ko", "chosen"),
    }
    return {name: json.loads(fig.to_json()) for name, fig in figures.items()}


@pytest.mark.parametrize("check", [second_renderings, english_left, style_faults])
def test_strings_built_in_code_follow_the_glossary(korean_figures, check):
    faults = {}
    for name, figure in korean_figures.items():
        for text in shown_strings(figure):
            if check(as_read(text)):
                faults.setdefault(name, []).append((text, check(as_read(text))))
    assert faults == {}


def test_figures_show_the_glossary_renderings(korean_figures):
    """The code-built strings were read at all: hover ranges and units as the glossary has them."""
    hover = "\n".join(shown_strings(korean_figures["timeline c12"]))
    assert "~%{customdata[4]}" in hover and "~%{customdata[1]:.3f}초" in hover
    assert "FLOP/바이트" in json.dumps(korean_figures["roofline"], ensure_ascii=False)
