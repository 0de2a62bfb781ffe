"""The Korean catalogs follow ../shared/reference/korean-glossary.md: one term, one rendering.

A Korean student reads prose, legends, hover text and axis titles on the same screen; if the text
says "prefill" and the legend says "프리필", they look like two different things. These tests scan
every Korean string (all of assets/i18n/ko, including the labels of simulator variants) for:
- a second rendering of a glossary term (프리필 where the glossary keeps "prefill"),
- an English term left where the glossary has Korean (compute-bound is 연산 병목; the Latin may
  follow in brackets on first use, "연산 병목(compute-bound)"),
- the house style: "200토큰" attached, "100~300 ms" ranges, no space before "(", no English-style
  colon joining two sentences, no 해라체 (chart labels are nouns or -됨, prose is 합니다체).
Each rule has a self-test on a bad example, so a rule that can never fire fails too.
"""

from __future__ import annotations

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
}

SPACE_BEFORE_UNIT = re.compile(r"(\d|\})\s+(토큰|초(?!당)|개|번)")  # "768 토큰": attach
HYPHEN_RANGE = re.compile(r"\d\s*-\s*\d+\s*(ms|초|토큰|s\b)")  # "100-300 ms": use ~
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
        word = rf"(?<![A-Za-z-]){re.escape(english)}(?![A-Za-z-])"
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
    assert style_faults("768 토큰") == ["space before a counting unit"]
    assert style_faults("TPOT 100-300 ms") == ["range with a hyphen (use ~)"]
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
