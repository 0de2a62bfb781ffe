"""Figures of the Serve page: a running server's timeline, drawn with the lessons' Gantt builder.

Pure functions of the trace tables (no streamlit, no network), so they are tested without either.
"""

from __future__ import annotations

import plotly.graph_objects as go

from sim.core.trace import RunResult
from ui.gantt import static_timeline_figure
from ui.i18n import t


def live_timeline(run: RunResult, lang: str = "en", now_s: float | None = None) -> go.Figure:
    """The Gantt of a server's recent requests, its time axis from the first one to `now_s`.

    Times are the server's (seconds since it started); the axis shows only the stretch that the
    requests drawn cover, up to now, so a long-running server still fills the width.
    """
    now = float(run.meta.get("now_s", 0.0)) if now_s is None else float(now_s)
    segments = run.segments
    end = max(now, float(segments["end_s"].max()) if len(segments) else 0.0, 1e-3)
    start = float(run.requests["arrival_s"].min()) if len(run.requests) else 0.0
    start = max(0.0, min(start, end - 1.0))
    label = t(
        "serve.timeline_label",
        lang,
        policy=run.meta.get("policy", "?"),
        model=run.meta.get("model", "?"),
    )
    fig = static_timeline_figure([(label, run)], lang=lang, t_end=end)
    fig.update_xaxes(range=[start, end])
    fig.update_layout(uirevision="serve")  # keep a visitor's zoom across refreshes
    return fig
