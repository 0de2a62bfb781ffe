"""Streamlit glue shared by the pages, and the one name (`w`) they reach it all through.

Pages write `from ui import widgets as w` and call `w.select`, `w.run_variant`, `w.timeline_of`,
`w.engine_note`...: one import, whatever the helper's job. The helpers live in modules with one
job each, and this module imports their public names (__all__ lists them):

- ui/language.py       the visitor's language, `T` for a page, Korean line breaking
- ui/url_widgets.py    controls bound to the URL, so a shared link reproduces the view
- ui/sim_cache.py      simulations cached for all sessions, within a budget (`limits()`)
- ui/figure_cache.py   timelines and charts built once and sent to the browser cheaply
- ui/engine_notes.py   which real engine each policy mirrors, and what the checks leave out
- ui/errors.py         text a visitor, a file or a server wrote, shown as text (`say`, `as_code`)
- ui/lesson_view.py    picture first: "What to look at", explanations in expanders, glossary

What stays here is how a page shows text and tables:
- `config_error` turns a config the simulator rejects into `st.error` with what to change, so the
  page stays usable.
- `show_code`, `formula`: the source a lesson demonstrates, a formula with its caption.
- `runs_table`, `goodput_table`: the headline numbers of some runs, column names translated
  (with speculative decoding, the drafts' acceptance rate and tokens per verify step too);
  `number_table` shows any table of numbers, formatted in the browser.
- `parse_knobs` reads typed knobs (a `model=` only from the catalog or an upload:
  ui/model_upload.check_model).
- Labels the simulator makes (variant names, request ids) reach a page only through
  `ui.labels` (`sim_label`, `request_label`): sim/ keeps them as English ids, the page shows them
  in the visitor's language.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import streamlit as st

from sim.runs.budget import BudgetExceeded
from ui.engine_notes import (
    TOPOLOGY_CAVEATS,
    VERIFIED,
    engine_note,
    policy_note,
    step_costs_note,
    topology_caveats,
)
from ui.errors import as_code, escape_markdown, say
from ui.figure_cache import cached_chart, chart, plain, timeline, timeline_of, timeline_runs
from ui.language import KOREAN_TEXT_CSS, lang, language_picker, text_style, translator
from ui.lesson_view import glossary, is_compact, look, more
from ui.model_upload import check_model
from ui.sim_cache import (
    CACHE_MB,
    CACHE_TTL,
    Overrides,
    RunRefused,
    RunSpec,
    Workload,
    budget_message,
    fingerprint,
    limits,
    run_or_error,
    run_variant,
    run_variants,
    simulate_cached,
    sweep_cached,
    variant_spec,
)
from ui.url_widgets import option_label, select, slider, steps, toggle

__all__ = [
    # ui/language.py
    "KOREAN_TEXT_CSS",
    "lang",
    "language_picker",
    "text_style",
    "translator",
    # ui/url_widgets.py
    "option_label",
    "select",
    "slider",
    "steps",
    "toggle",
    # ui/sim_cache.py
    "CACHE_MB",
    "CACHE_TTL",
    "Overrides",
    "RunRefused",
    "RunSpec",
    "Workload",
    "budget_message",
    "fingerprint",
    "limits",
    "run_or_error",
    "run_variant",
    "run_variants",
    "simulate_cached",
    "sweep_cached",
    "variant_spec",
    # ui/figure_cache.py
    "cached_chart",
    "chart",
    "plain",
    "timeline",
    "timeline_of",
    "timeline_runs",
    # ui/engine_notes.py
    "TOPOLOGY_CAVEATS",
    "VERIFIED",
    "engine_note",
    "policy_note",
    "step_costs_note",
    "topology_caveats",
    # ui/errors.py
    "as_code",
    "escape_markdown",
    "say",
    # ui/lesson_view.py
    "glossary",
    "is_compact",
    "look",
    "more",
    # here
    "config_error",
    "formula",
    "goodput_table",
    "number_table",
    "parse_knobs",
    "runs_table",
    "show_code",
    "spec_figures",
]


def config_error(err: Exception, where=None) -> None:
    """Show why the simulator refused a configuration, and what to change."""
    T = translator()
    if isinstance(err, RunRefused):
        message = str(err)  # (its quoted values were escaped where it was made: ui/sim_cache)
    elif isinstance(err, BudgetExceeded):
        message = budget_message(err)
    else:  # the simulator's sentence quotes the visitor's knob text: shown as text
        message = T("common.config_error", message=as_code(str(err).splitlines()[0]))
    (where or st).error(message)


def show_code(obj, title_key: str = "common.show_code") -> None:
    """An expander with the source of the policy (or function) this lesson demonstrates."""
    T = translator()
    module = inspect.getmodule(obj)
    # Named by its file ("sim/policies/vllm_v1.py"), which a student can open in the repository;
    # a class name such as "Vllm" says less.
    name = module.__name__.replace(".", "/") + ".py" if module else str(obj)
    with st.expander(T(title_key, name=name)):
        st.code(inspect.getsource(module), language="python")


def formula(latex: str, caption_key: str | None = None) -> None:
    """A formula the lesson shows, with an optional caption."""
    st.latex(latex)
    if caption_key:
        st.caption(translator()(caption_key))


SPEC_COLUMNS = ("acceptance_rate", "tokens_per_verify")  # of run.meta["speculation"]


def spec_figures(run) -> dict[str, float]:
    """The acceptance rate and tokens per verify step of a run with speculative decoding
    (run.meta["speculation"], sim/core/speculation.py acceptance_summary); NaN without it."""
    spec = run.meta.get("speculation") or {}
    return {key: float(spec.get(key, math.nan)) for key in SPEC_COLUMNS}


def runs_table(runs, columns: Sequence[str] | None = None):
    """One row per run: the headline numbers a lesson compares (translated column names).
    Where a run speculates, two more columns: the share of drafts accepted and the tokens a
    verify step yields ("–" for the runs that do not: st.dataframe would print "None")."""
    import pandas as pd

    from sim.runs.metrics import summarize

    runs = list(runs)
    speculating = any("speculation" in run.meta for _, run in runs)
    T = translator()
    keys = columns or (
        "ttft_p50_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p99_s",
        "max_itl_s",
        "output_tokens_per_s",
        "slo_attainment",
    )
    mixed = speculating and not all("speculation" in run.meta for _, run in runs)
    spec_names = [T(f"metric.spec_{k}") for k in SPEC_COLUMNS] if speculating else []
    rows, slo = {}, None
    for label, run in runs:
        s = getattr(run, "summary_cache", None) or summarize(run)
        rows[label] = {T(f"metric.{k}"): s.get(k) for k in keys}
        for name, value in zip(spec_names, spec_figures(run).values(), strict=False):
            rows[label][name] = ("–" if math.isnan(value) else f"{value:.3f}") if mixed else value
        slo = slo or (s.get("slo_ttft_s"), s.get("slo_tpot_s"))
    frame = pd.DataFrame.from_dict(rows, orient="index")
    right = st.column_config.TextColumn(alignment="right")  # numbers as text, beside "–"
    number_table(frame, column_config={name: right for name in spec_names} if mixed else {})
    if "slo_attainment" in keys and slo and slo[0] is not None:  # define "SLO met" where shown
        st.caption(T("common.slo_defined", ttft=slo[0], tpot=slo[1]))
    return frame


def number_table(frame, digits: int = 3, where=None, **kwargs) -> None:
    """st.dataframe, full width, every float column shown with `digits` decimals.

    The browser formats the numbers (column_config), not pandas' Styler on the server: a
    Styler renders every cell to text in Python, ~10 ms per table on every rerun of every
    visitor (a tenth of a warm lesson view), and the table is sent as numbers either way."""
    fmt = st.column_config.NumberColumn(format=f"%.{digits}f")
    config = {col: fmt for col in frame.columns if frame[col].dtype.kind == "f"}
    config |= kwargs.pop("column_config", None) or {}  # the caller's, for its other columns
    (where or st).dataframe(frame, column_config=config, width="stretch", **kwargs)


def goodput_table(sweeps: dict) -> None:
    """Goodput, GPUs and goodput per GPU of each swept configuration (one column each)."""
    from ui.goodput_text import goodput_frame  # "≥ 24" where every rate tried passed

    T = translator()
    frame = goodput_frame(sweeps)
    st.dataframe(frame.rename(index=lambda key: T(f"label.goodput.{key}")), width="stretch")


def parse_knobs(text: str) -> dict[str, str]:
    """'a=1, b=x' -> {"a": "1", "b": "x"}; ValueError saying how to write them."""
    out = {}
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"write knobs as key=value pairs separated by commas, not {part!r}")
        if key.strip() == "model":  # a catalog name or an upload, never a file of the server
            check_model(value.strip())
        out[key.strip()] = value.strip()
    return out
