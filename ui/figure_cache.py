"""Figures on a page: drawn in our colours, built once for all visitors, sent cheaply.

- `timeline_of` / `timeline`: the animated Gantt of some runs (Play runs in the browser). The
  figure's dict is cached by the fingerprint of its runs, for all sessions. It shows about 30
  rows (a zoom, with a toggle for all), marks the rows a lesson names, and follows the compact
  layout switch (ui/lesson_view.py).
- `cached_chart`: a figure from ui.charts, cached by its builder and arguments.
- `chart` / `timeline_runs`: the same drawing, uncached: a figure the page built itself, the
  Gantt of runs at hand (a live measurement).
- A cached dict reaches st.plotly_chart through `_prebuilt` (not validated again, not walked by
  to_dict), its numpy arrays made lists by `plain`: a warm rerun sends it in a few ms of JSON.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import numpy as np
import streamlit as st

from ui.gantt_rows import COMPACT_ROWS, ZOOM_ROWS, MarkRule, marked_ids, zoom_rows
from ui.language import lang, translator
from ui.lesson_view import is_compact
from ui.sim_cache import (
    CACHE_MB,
    CACHE_TTL,
    Overrides,
    RunSpec,
    fingerprint,
    simulate_cached,
    variant_spec,
)
from ui.url_widgets import toggle


@st.cache_data(max_entries=64, max_size=f"{CACHE_MB}MB", ttl=CACHE_TTL, show_spinner=False)
def _timeline(
    key: str,
    lang: str,
    _specs: tuple[RunSpec, ...],
    limit: int | None = None,
    marks: tuple[MarkRule, ...] = (),
    compact: bool = False,
) -> dict:
    specs = _specs  # cached by key = fingerprint(specs)
    from ui.gantt import timeline_figure  # plotly is imported only by pages that draw
    from ui.gantt_frames import request_ids

    runs = [(label, simulate_cached(workload, config)) for label, workload, config in specs]
    marked = marked_ids(runs[0][1], marks)
    show = None
    if limit is not None:  # the zoom: the busiest stretch of arrivals and the marked rows
        ids = np.unique(np.concatenate([request_ids(run) for _, run in runs]))
        show = zoom_rows([run for _, run in runs], ids, marked, limit).tolist()
    figure = timeline_figure(runs, lang=lang, show=show, marks=marked, compact=compact)
    return plain(figure.to_dict())


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


def timeline_of(specs: Sequence[RunSpec], key=None, marks: Sequence[MarkRule] = ()) -> None:
    """The animated Gantt of several runs on one shared time axis (Play runs in the browser).

    More than ZOOM_ROWS requests (COMPACT_ROWS in the compact layout): the chart shows that many
    rows (ui.gantt_rows.zoom_rows) and, under it, says so next to a toggle that shows all of
    them (in the URL as ?<key>_all=true). `marks`: rules tagging the rows a lesson talks about,
    e.g. (("prompt_tokens", 8000, T("gantt.mark.long")),)."""
    specs = tuple(specs)
    compact = is_compact()
    limit = COMPACT_ROWS if compact else ZOOM_ROWS
    runs = [simulate_cached(wl, cfg) for _, wl, cfg in specs]  # cache hits, or made here once
    total = max(len(run.requests) for run in runs)
    T = translator()
    show_all = False
    place = st.container()  # the chart goes above the toggle that decides its rows
    if total > limit:
        left, right = st.columns([3, 1], vertical_alignment="center")
        name = f"{key or 'tl'}_all"
        with right:
            show_all = toggle(name, T("gantt.show_all", n=total), False)
        zoomed = "gantt.zoomed_marked" if marked_ids(runs[0], marks) else "gantt.zoomed"
        left.caption(T("gantt.all_rows", n=total) if show_all else T(zoomed, shown=limit, n=total))
    rows = None if show_all or total <= limit else limit
    figure = _timeline(fingerprint(specs), lang(), specs, rows, tuple(marks), compact)
    place.plotly_chart(
        _prebuilt(figure), width="stretch", config={"displayModeBar": False}, key=key, theme=None
    )


def timeline(
    scenario: str,
    labels: Sequence[str],
    overrides: Overrides = (),
    key=None,
    marks: Sequence[MarkRule] = (),
) -> None:
    """The animated Gantt of some variants of a lesson scenario."""
    timeline_of([variant_spec(scenario, label, overrides) for label in labels], key, marks)


def timeline_runs(runs, key=None) -> None:
    """The animated Gantt of runs already at hand (e.g. measured live runs, not cached)."""
    from ui.gantt import timeline_figure

    st.plotly_chart(
        timeline_figure(runs, lang=lang()),
        width="stretch",
        config={"displayModeBar": False},
        key=key,
        theme=None,
    )


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
    (where or st).plotly_chart(
        _prebuilt(_figure_dict(key, build, args, kwargs)), width="stretch", theme=None
    )
