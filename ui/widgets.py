"""Streamlit glue shared by the pages: language, URL-bound controls, cached runs, show-the-code.

Notable features
- Every control is bound to the URL (`bind="query-params"`, key = the parameter name) with a
  FIXED default, so a shared link reproduces the exact view, even on a freshly started server
  and straight into an inner page.
- Runs are cached by (scenario, variant, knob overrides): moving a control reruns the simulation
  once; playing, pausing and scrubbing happen in the browser and never rerun anything.
- `config_error` turns a config the simulator rejects into `st.error` with what to change, so the
  page stays usable.
- Labels the simulator makes (variant names, request ids) reach a page only through
  `ui.labels` (`sim_label`, `request_label`): sim/ keeps them as English ids, the page shows them
  in the visitor's language. `text_style` makes Korean wrap between words, never inside one.
- Bounded work per visitor: every run goes through `sim.budget.simulate_within` under `limits()`
  (requests, instances, KV blocks, engine steps, CPU seconds per run); a refused run is cached as
  its message, so reloading a hostile URL costs nothing the second time. The caches hold at most
  CACHE_MB of results each and drop an entry CACHE_TTL after it was made. A local install raises
  the limits with PDLAB_MAX_* variables or a [limits] table in .streamlit/secrets.toml (README).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
from collections.abc import Callable, Sequence

import streamlit as st

from sim.budget import Budget, BudgetExceeded, simulate_within
from sim.config import SimConfig, with_overrides
from sim.request import RequestSpec
from sim.scenarios import get_scenario
from sim.trace import RunResult
from sim.workload import WorkloadConfig, generate
from ui.i18n import DEFAULT_LANG, LANGUAGES, catalog, t
from ui.labels import sim_label

Overrides = tuple[tuple[str, object], ...]  # hashable knob overrides, e.g. (("max_num_seqs", 8),)


def lang() -> str:
    """The current language (bound to ?lang= by the sidebar in app.py)."""
    value = st.session_state.get("lang") or DEFAULT_LANG
    return value if value in LANGUAGES else DEFAULT_LANG


def translator() -> Callable[..., str]:
    """A t(key, **fmt) bound to the current language, for terse page code."""
    current = lang()
    return lambda key, **fmt: t(key, current, **fmt)


# Korean wraps at spaces only (word-break: keep-all): the browser's default breaks between any
# two Hangul syllables, splitting words (사용/자의). overflow-wrap: break-word still breaks a
# token too long for its line (a URL, a knob name) instead of letting it run out of its column.
# Not `anywhere`: that one also counts as a break opportunity when a browser sizes a flex item
# or a table cell (min-content), so a narrow column shrinks to a letter and splits Korean words
# again; break-word only breaks what would overflow once the width is settled.
# On every element, !important: Streamlit sets word-break: break-word on headings and markdown.
# Headings balance their lines, so a title never leaves one word (에서, 병목) alone on its last.
KOREAN_TEXT_CSS = (
    ".stApp, .stApp * { word-break: keep-all !important; overflow-wrap: break-word !important; }"
    " .stApp :is(h1, h2, h3) { text-wrap: balance; }"
)


def text_style(current: str) -> None:
    """The page's line-breaking rules for `current` language (a style-only st.html: no space)."""
    if current == "ko":
        st.html(f"<style>{KOREAN_TEXT_CSS}</style>")


def language_picker() -> None:
    """The sidebar language switch; its value travels in the URL as ?lang=ko."""
    st.sidebar.segmented_control(
        "Language · 언어", list(LANGUAGES), default=DEFAULT_LANG, key="lang",
        bind="query-params", required=True,
    )  # fmt: skip


def slider(key: str, label: str, lo, hi, default, step=None, help: str | None = None, **kw):
    """A slider whose value lives in the URL under `key`."""
    return st.slider(label, lo, hi, default, step=step, key=key, bind="query-params", help=help,
                     **kw)  # fmt: skip


# No format_func on bound widgets: Streamlit writes the FORMATTED label into the URL, so a
# translated label would make a link shared in one language fail in the other. A select that
# shows its ids translated (`shown=`) is bound to the URL here instead, by _select_by_id: the
# box shows "스왑", the URL holds ?mode=swap in both languages.


def select(key: str, label: str, options: Sequence, default, help=None, shown=None, **kw):
    """A selectbox bound to the URL under `key`: options shown as they are, or through
    `shown` (id -> label, e.g. option_label("arrival")) with the URL still holding the id."""
    options = list(options)
    if shown is not None:
        return _select_by_id(key, label, options, default, shown, help=help, **kw)
    return st.selectbox(label, options, index=options.index(default), key=key,
                        bind="query-params", help=help, **kw)  # fmt: skip


def option_label(group: str | None = None) -> Callable[[object], str]:
    """How a select shows an option id in the page's language: the catalog's
    option.<group>.<id> (assets/i18n/*/options.json), else the id itself (a policy, a GPU, an
    SLO preset: names). Without a group, the simulator's own label (sim_label: topologies)."""
    current = lang()

    def shown(value) -> str:
        if group is None:
            return sim_label(str(value), current)
        key = f"option.{group}.{value}"
        return t(key, current) if key in catalog(DEFAULT_LANG) else str(value)

    return shown


_IN_URL = "_pdlab_in_url."  # + key: the id this binding last left in the URL (None: absent)


def _select_by_id(key: str, label: str, options: list, default, shown, help=None, **kw):
    """A selectbox showing shown(option), bound to ?key=<option id> by hand.

    Streamlit's own binding would write shown(option) into the URL. Here the script keeps the
    id in st.query_params itself, with the rules of a bound widget: the URL wins on a first
    view and whenever it changed under the page (a pasted link, Back); a value equal to the
    default or unknown is left out of the URL; otherwise the widget's value is the visitor's.
    """
    by_id = {str(option): option for option in options}
    in_url = st.query_params.get(key)
    if key not in st.session_state or st.session_state.get(_IN_URL + key) != in_url:
        value = by_id.get(in_url, default)
    else:
        # Read before this run's widget exists, so with the last run's labels: after a switch
        # of language the box still sends the old language's label, which the new labels
        # would not know (it would fall back to the default).
        value = st.session_state[key]
        value = value if value in options else default
    st.session_state[key] = value
    value = st.selectbox(label, options, key=key, format_func=shown, help=help, **kw)
    wanted = None if value == default else str(value)
    if in_url != wanted:
        if wanted is None:
            del st.query_params[key]
        else:
            st.query_params[key] = wanted
    st.session_state[_IN_URL + key] = wanted
    return value


def steps(key: str, label: str, options: Sequence, default, help=None):
    """A select_slider (discrete values, e.g. chunk sizes) bound to the URL under `key`."""
    return st.select_slider(label, list(options), value=default, key=key, bind="query-params",
                            help=help)  # fmt: skip


def toggle(key: str, label: str, default: bool = False, help=None) -> bool:
    return st.toggle(label, value=default, key=key, bind="query-params", help=help)


Workload = WorkloadConfig | tuple[RequestSpec, ...]
RunSpec = tuple[str, Workload, SimConfig]  # (label, workload, config): one line of a comparison


CACHE_TTL = "2h"  # a visitor's runs are dropped 2 hours after they were made
CACHE_MB = 256  # at most this many MB of pickled runs per cache (Streamlit evicts the oldest)


@st.cache_resource(show_spinner=False)
def limits() -> Budget:
    """The budget of one run: the defaults of sim.budget.Budget, raised or lowered by PDLAB_MAX_*
    environment variables, then by a [limits] table in .streamlit/secrets.toml."""
    extra = None
    try:
        extra = dict(st.secrets["limits"]) if "limits" in st.secrets else None
    except Exception:  # no secrets.toml at all: Streamlit raises instead of being empty
        extra = None
    return Budget.from_env(extra=extra)


class RunRefused(ValueError):
    """A run the budget or the simulator refused; str() is the one line to show."""


def budget_message(err: BudgetExceeded) -> str:
    """The budget error in the visitor's language, with what to change."""
    T = translator()
    value = f"{err.value:,}" if isinstance(err.value, int) else f"{err.value:g}"
    return T(f"limits.{err.limit}", limit=value, env=f"PDLAB_{err.limit.upper()}")


def fingerprint(*objs) -> str:
    """A short key for cache arguments that are large but plain (a workload of hundreds of
    RequestSpecs, configs): one pickle and a hash, ~1 ms. Streamlit's own hashing walks every
    field of every dataclass in Python (~40 ms per 200-request workload, each call, on every
    rerun of every visitor: most of a warm lesson page's CPU before this)."""
    return hashlib.blake2b(pickle.dumps(objs, protocol=5), digest_size=16).hexdigest()


@st.cache_data(max_entries=256, max_size=f"{CACHE_MB}MB", ttl=CACHE_TTL, show_spinner=False)
def _simulate_or_refuse(key: str, lang: str, _workload: Workload,
                        _config: SimConfig) -> RunResult | str:  # fmt: skip
    """A run, or the one line saying why it was refused (cached too: refusing costs once).
    Cached by `key` = fingerprint(workload, config); the _arguments are not hashed."""
    from sim.metrics import summarize

    workload, config = _workload, _config
    try:
        requests = generate(workload) if isinstance(workload, WorkloadConfig) else list(workload)
        run = simulate_within(requests, config, limits())
        run.summary_cache = summarize(run)  # once, for runs_table on every later rerun
        return run
    except BudgetExceeded as err:
        return budget_message(err)
    except ValueError as err:  # the simulator refused the configuration (a WorkloadError too)
        return t("common.config_error", lang, message=str(err).splitlines()[0])


def simulate_cached(workload: Workload, config: SimConfig) -> RunResult:
    """Simulate once per (workload, config), within the budget; every later view is a cache hit.
    RunRefused (a ValueError) says in one translated line why a run is not possible."""
    out = _simulate_or_refuse(fingerprint(workload, config), lang(), workload, config)
    if isinstance(out, str):
        raise RunRefused(out)
    return out


def run_or_error(workload: Workload, config: SimConfig, where=None) -> RunResult | None:
    """The run, or None after an st.error (in `where`) saying why it was refused."""
    try:
        return simulate_cached(workload, config)
    except RunRefused as err:
        (where or st).error(str(err))
        return None


def variant_spec(scenario: str, label: str, overrides: Overrides = ()) -> RunSpec:
    """(label, workload, config) of a lesson scenario's variant with some knobs changed; the
    label comes back in the page's language (it is what the timeline and tables show)."""
    s = get_scenario(scenario)
    variant = s.variant(label)
    workload = variant.workload if variant.workload is not None else s.workload
    return sim_label(label, lang()), workload, with_overrides(variant.config, dict(overrides))


def run_variant(scenario: str, label: str, overrides: Overrides = ()) -> RunResult:
    """Simulate one variant of a lesson scenario with some knobs changed (cached)."""
    _, workload, config = variant_spec(scenario, label, overrides)
    return simulate_cached(workload, config)


def run_variants(scenario: str, labels: Sequence[str], overrides: Overrides = ()):
    """[(label, RunResult), ...] for several variants of one scenario (labels as given: ids;
    show them through sim_label)."""
    return [(label, run_variant(scenario, label, overrides)) for label in labels]


def config_error(err: Exception, where=None) -> None:
    """Show why the simulator refused a configuration, and what to change."""
    T = translator()
    if isinstance(err, RunRefused):
        message = str(err)
    elif isinstance(err, BudgetExceeded):
        message = budget_message(err)
    else:
        message = T("common.config_error", message=str(err).splitlines()[0])
    (where or st).error(message)


# Which real scheduler each policy's step sequence is checked against (tests/test_vllm_differential
# .py); the key of the sentence a lesson shows under a picture drawn with that policy.
VERIFIED = {"vllm": "common.verified_v1", "short-first": "common.verified_v1",
            "vllm-v0": "common.verified_v0", "chunked": "common.verified_v0",
            "prefill-first": "common.verified_v0", "sglang": "common.sglang_source"}  # fmt: skip


# What the differential suite does not cover where several workers serve: it steps ONE scheduler,
# so the router and the P->D hand-off are PD Lab's own models (a sentence each).
TOPOLOGY_CAVEATS = {"router": "common.caveat_router", "disaggregated": "common.caveat_disagg"}


def topology_caveats(*topologies: str) -> tuple[str, ...]:
    """The caveat keys (for `engine_note`) of the topologies a picture shows."""
    return tuple(dict.fromkeys(TOPOLOGY_CAVEATS[t] for t in topologies if t in TOPOLOGY_CAVEATS))


def engine_note(*policies: str, caveat_key: str | Sequence[str] | None = None) -> None:
    """One caption per policy shown: which engine and version it is, and how we know.

    `caveat_key` names the sentence(s) saying what of this picture the checks do NOT cover; they
    follow a policy's "checked" sentence (a policy never checked says so, and needs none)."""
    from sim.policies import get_policy_class

    T = translator()
    caveats = (caveat_key,) if isinstance(caveat_key, str) else tuple(caveat_key or ())
    seen = set()
    for name in policies:
        cls = get_policy_class(name)
        if cls.name in seen:
            continue
        seen.add(cls.name)
        proof_key = VERIFIED.get(cls.name, "")
        proof = T(proof_key) if proof_key else ""
        if proof_key.startswith("common.verified_"):
            # "That check covers each worker's own scheduler" once, then what it leaves out.
            scope = ["common.caveat_scope"] if set(caveats) & set(TOPOLOGY_CAVEATS.values()) else []
            proof = " ".join([proof, *(T(c) for c in [*scope, *caveats])])
        key = f"label.mirrors.{cls.name}"  # the policy's `mirrors`, in the page's language
        mirrors = T(key) if key in catalog(DEFAULT_LANG) else cls.mirrors
        st.caption(T("common.engine_note", policy=cls.name, mirrors=mirrors, proof=proof))


def policy_note(note) -> str:
    """A policy's remark (sim.policies.base.Note) in the page's language; its English text if
    the catalogs have no key for it."""
    key = f"policy_note.{note.key}"
    return translator()(key) if key in catalog(DEFAULT_LANG) else str(note)


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


@st.cache_data(max_entries=64, max_size=f"{CACHE_MB}MB", ttl=CACHE_TTL, show_spinner=False)
def _timeline(key: str, lang: str, _specs: tuple[RunSpec, ...]) -> dict:
    specs = _specs  # cached by key = fingerprint(specs)
    from ui.gantt import timeline_figure  # plotly is imported only by pages that draw

    runs = [(label, simulate_cached(workload, config)) for label, workload, config in specs]
    return plain(timeline_figure(runs, lang=lang).to_dict())


def _prebuilt(figure: dict):
    """A plotly Figure that hands st.plotly_chart a cached, already valid dict as it is.

    Given a dict, st.plotly_chart validates it by building a go.Figure (~0.4 s for a timeline
    with 120 frames); given a Figure it calls to_dict() (~0.2 s). Our timelines come out of a
    pure builder and a cache, so they are valid by construction: this Figure's to_dict() just
    returns the cached dict, and a rerun costs a few ms of JSON instead. The object is made
    without go.Figure.__init__ (which builds a layout template: ~5 ms per chart per rerun);
    st.plotly_chart only checks that it is a Figure and calls to_dict().
    """
    prebuilt = object.__new__(_prebuilt_class())
    prebuilt.__dict__["_pdlab_dict"] = figure
    return prebuilt


@functools.cache
def _prebuilt_class():
    import plotly.graph_objects as go

    class Prebuilt(go.Figure):
        def to_dict(self):
            return self.__dict__["_pdlab_dict"]

    return Prebuilt


def plain(obj):
    """A figure dict with numpy arrays and scalars as lists and Python numbers: the same JSON,
    written by json's C encoder without a Python callback per array (8.4 -> 3.7 ms for Home's
    timeline, on every rerun of every visitor)."""
    import numpy as np

    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def timeline_of(specs: Sequence[RunSpec], key=None) -> None:
    """The animated Gantt of several runs on one shared time axis (Play runs in the browser)."""
    specs = tuple(specs)
    st.plotly_chart(_prebuilt(_timeline(fingerprint(specs), lang(), specs)), width="stretch",
                    config={"displayModeBar": False}, key=key, theme=None)  # fmt: skip


def timeline(scenario: str, labels: Sequence[str], overrides: Overrides = (), key=None) -> None:
    """The animated Gantt of some variants of a lesson scenario."""
    timeline_of([variant_spec(scenario, label, overrides) for label in labels], key=key)


def runs_table(runs, columns: Sequence[str] | None = None):
    """One row per run: the headline numbers a lesson compares (translated column names)."""
    import pandas as pd

    from sim.metrics import summarize

    T = translator()
    keys = columns or ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "max_itl_s",
                       "output_tokens_per_s", "slo_attainment")  # fmt: skip
    rows = {}
    for label, run in runs:
        s = getattr(run, "summary_cache", None) or summarize(run)
        rows[label] = {T(f"metric.{k}"): s.get(k) for k in keys}
    frame = pd.DataFrame.from_dict(rows, orient="index")
    st.dataframe(frame.style.format(precision=3), width="stretch")
    return frame


@st.cache_data(max_entries=32, max_size="64MB", ttl=CACHE_TTL, show_spinner=False)
def _sweep_or_refuse(key: str, lang: str, _workload: Workload, _config: SimConfig,
                     _rates: tuple[float, ...]):  # fmt: skip
    workload, config, rates = _workload, _config, _rates  # cached by key = their fingerprint
    from sim.budget import sweep_within

    try:
        budget = limits()  # the rates run side by side, in up to sweep_jobs processes
        jobs = min(budget.sweep_jobs, len(os.sched_getaffinity(0)))
        return sweep_within(workload, config, list(rates), budget, jobs=jobs)
    except BudgetExceeded as err:
        return budget_message(err)
    except ValueError as err:
        return t("common.config_error", lang, message=str(err).splitlines()[0])


def goodput_table(sweeps: dict) -> None:
    """Goodput, GPUs and goodput per GPU of each swept configuration (one column each)."""
    import pandas as pd

    from sim.sweep import goodput_of

    T = translator()
    frame = pd.DataFrame({label: goodput_of(table) for label, table in sweeps.items()})
    st.dataframe(frame.rename(index=lambda key: T(f"label.goodput.{key}")), width="stretch")


def sweep_cached(workload: Workload, config: SimConfig, rates: tuple[float, ...]):
    """Attainment per arrival rate (sim.sweep.sweep_rates, within the budget), cached.
    RunRefused says in one translated line why the sweep is not possible."""
    rates = tuple(rates)
    out = _sweep_or_refuse(fingerprint(workload, config, rates), lang(), workload, config, rates)
    if isinstance(out, str):
        raise RunRefused(out)
    return out


def timeline_runs(runs, key=None) -> None:
    """The animated Gantt of runs already at hand (e.g. measured live runs, not cached)."""
    from ui.gantt import timeline_figure

    st.plotly_chart(timeline_figure(runs, lang=lang()), width="stretch",
                    config={"displayModeBar": False}, key=key, theme=None)  # fmt: skip


def parse_knobs(text: str) -> dict[str, str]:
    """'a=1, b=x' -> {"a": "1", "b": "x"}; ValueError saying how to write them."""
    out = {}
    for part in text.replace(";", ",").split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"write knobs as key=value pairs separated by commas, not {part!r}")
        out[key.strip()] = value.strip()
    return out


_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:=^&\"'")


def escape_markdown(text: str) -> str:
    """`text` (typed by a visitor, or written by a model) shown by st.markdown/st.write as it is:
    every ASCII punctuation mark that markdown, LaTeX ($), Streamlit's :directives: or HTML
    could read is backslash-escaped, so no link, image, formula or colour is ever made of it."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in text)


def chart(figure, where=None) -> None:
    """Draw a figure from ui.charts full width, in our own colours (not Streamlit's theme)."""
    (where or st).plotly_chart(figure, width="stretch", theme=None)


@st.cache_data(max_entries=256, max_size="64MB", ttl=CACHE_TTL, show_spinner=False)
def _figure_dict(key: str, _build: Callable, _args: tuple, _kwargs: dict) -> dict:
    return plain(_build(*_args, **_kwargs).to_dict())  # cached by key = fingerprint(build, args)


def cached_chart(build: Callable, *args, where=None, **kwargs) -> None:
    """chart(build(*args, **kwargs)), built once for all visitors: a figure from the same
    arguments (a lesson's defaults, most of the time) is a cache hit, not ~50-150 ms of plotly
    object building on every rerun of every session."""
    key = fingerprint(build.__module__, build.__qualname__, args, kwargs)
    (where or st).plotly_chart(_prebuilt(_figure_dict(key, build, args, kwargs)),
                               width="stretch", theme=None)  # fmt: skip
