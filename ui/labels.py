"""Labels the simulator makes (variant and topology names, request ids), in the page's language.

The simulator's labels ("colocated", "swap (V0)", "chunk 2048", R0 ...) are ids: URLs, the CLI's
`--variant` and the tests use them as they are, so sim/ keeps them in English. A page shows them
through `sim_label` (and a request through `request_row` or `request_label`), which looks them up
in assets/i18n/<lang>/labels.json at display time.

Notable features
- One catalog key per label, the label itself after "label." ("label.swap (V0)"): the English
  catalog maps each label to itself, the Korean one keeps the Korean glossary (phase and
  technique names in Latin, ordinary nouns in Korean; tests/test_korean_glossary.py checks it).
- Labels that carry a number the scenarios vary (C3's "3000 tok x 16", C6's "chunk 512") match a
  PATTERN instead, whose key takes the numbers as placeholders.
- A label with neither a key nor a pattern is shown as it is (a visitor's own text, an engine
  name); tests/test_i18n_labels.py checks that every scenario variant label has a key or pattern.
"""

from __future__ import annotations

import re

from ui.i18n import DEFAULT_LANG, catalog, t

PREFIX = "label."
PATTERNS = (  # (a label with numbers, the key that renders it with those numbers)
    (re.compile(r"(?P<prompt>\d+) tok x (?P<c>\d+)"), "label.pattern.prompt_x_concurrency"),
    (re.compile(r"chunk (?P<size>\d+)"), "label.pattern.chunk"),
)


def has_label(text: str) -> bool:
    """Whether `text` has a catalog key or a pattern (in English, the reference catalog)."""
    return PREFIX + text in catalog(DEFAULT_LANG) or any(p.fullmatch(text) for p, _ in PATTERNS)


def sim_label(text: str, lang: str = DEFAULT_LANG) -> str:
    """A simulator label (variant, topology) in `lang`; unknown text comes back as it is."""
    text = str(text)
    if PREFIX + text in catalog(DEFAULT_LANG):
        return t(PREFIX + text, lang)
    for pattern, key in PATTERNS:
        match = pattern.fullmatch(text)
        if match:
            return t(key, lang, **{k: int(v) for k, v in match.groupdict().items()})
    return text


def request_row(request_id: int, lang: str = DEFAULT_LANG) -> str:
    """A request's row on a timeline: R0 in English (narrow rows), 요청 0 in Korean."""
    return t("label.request_row", lang, id=int(request_id))


def request_label(request_id: int, lang: str = DEFAULT_LANG) -> str:
    """A request in tables and bar charts ("request 0", "요청 0"): one word for both."""
    return t("charts.tokens.request", lang, id=int(request_id))


def live_error_column(column: str, lang: str = DEFAULT_LANG) -> str:
    """A column of a per-request error table in words: the replay's (live.replay.report.errors,
    "ttft_measured_s" -> "TTFT measured (s)") and the Live page's (live.engine.calibrate,
    "ttft_live_s" -> "TTFT measured (s)", "ttft_sim_s" -> "TTFT simulated (s)"); an unknown
    column comes back as it is."""
    match = re.fullmatch(
        r"(ttft|tpot|e2e)_(measured_s|predicted_s|live_s|sim_s|err_s|err_pct)", column
    )
    if not match:
        return column
    metric = t(f"live.col.metric.{match[1]}", lang)
    kind = {"live_s": "measured_s", "sim_s": "predicted_s"}.get(match[2], match[2])
    return t(f"live.col.{kind}", lang, metric=metric)
