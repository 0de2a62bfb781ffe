"""One phase's bars of the animated Gantt as a plotly trace: colour, hatch, outline and hover.

Split from ui/gantt.py (which lays out the figure and its frames); pure, no streamlit.
"""

from __future__ import annotations

import numpy as np

from ui import gantt_frames as gf
from ui.gantt_frames import TRACE_PHASES
from ui.i18n import t
from ui.theme import CACHED_PATTERN, COLORS, OUTLINE, REJECTED_PATTERN, SLOWED_PATTERN

# segments that span engine steps
STEP_PHASES = ("prefill", "decode", "decode_slowed", "accepted", "rejected", "stall")
TOKEN_PHASES = ("prefill", "decode", "decode_slowed", "kv_transfer", "cached")  # "tokens: n"
# A verify step's parts say what their tokens are: accepted (drafts kept + the target's own
# token) or rejected (drafts computed, then rolled back).
SPEC_TOKEN_LINES = {
    "accepted": "gantt.hover.tokens_accepted",
    "rejected": "gantt.hover.tokens_rejected",
}


def _marker(phase: str) -> dict:
    """Colour, outline and hatch of one drawn phase, from ui.theme."""
    if phase == "decode_slowed":
        pattern = {"shape": SLOWED_PATTERN, "fillmode": "replace", "solidity": 0.55, "size": 7}
        return {"color": COLORS["decode"], "pattern": pattern, "line": {"width": 0}}
    if phase == "rejected":
        pattern = {"shape": REJECTED_PATTERN, "fillmode": "overlay", "fgcolor": "#FFFFFF"}
        pattern |= {"solidity": 0.25, "size": 6}
        return {"color": COLORS["rejected"], "pattern": pattern, "line": {"width": 0}}
    if phase == "stall":
        return {"color": COLORS["stall"], "line": {"color": OUTLINE, "width": 1}}
    if phase == "cached":
        pattern = {
            "shape": CACHED_PATTERN,
            "fillmode": "overlay",
            "fgcolor": COLORS["prefill"],
            "solidity": 0.3,
            "size": 6,
        }
        return {
            "color": COLORS["cached"],
            "pattern": pattern,
            "line": {"color": OUTLINE, "width": 0.5},
        }
    return {"color": COLORS[phase], "line": {"width": 0}}


def _hovertemplate(phase: str, lang: str) -> str:
    """Hover text of one phase's bars (customdata = start, end, tokens, step_first, step_last)."""
    lines = [
        f"<b>{t('label.hover_request', lang)}</b>",  # the row label says "요청" in Korean
        f"{t('gantt.hover.phase', lang)}: {t(f'gantt.hover.phase.{phase}', lang)}",
        f"{t('gantt.hover.worker', lang)}: %{{hovertext}}",
    ]
    # Whole lines from the catalog, not words joined here: a range is "3–5" and "1.000–2.000 s"
    # in English but "3~5" and "1.000~2.000초" in Korean (the glossary's range and unit rules).
    if phase in STEP_PHASES:
        lines.append(t("gantt.hover.steps", lang))
    if phase in TOKEN_PHASES:
        lines.append(t("gantt.hover.tokens", lang))
    if phase in SPEC_TOKEN_LINES:
        lines.append(t(SPEC_TOKEN_LINES[phase], lang))
    lines.append(t("gantt.hover.time", lang))
    return "<br>".join(lines) + "<extra></extra>"


def bar_trace(bars: gf.Bars, phase: str, lang: str, axes: tuple[str, str], **extra) -> dict:
    """One phase's bars in one subplot, at full width (the chart at t = t_end)."""
    note = f" · {t('gantt.hover.recompute', lang)}"
    hovertext = np.where(bars.recompute, bars.worker + note, bars.worker) if len(bars) else []
    customdata = np.column_stack(
        [bars.start, bars.end, bars.tokens, bars.step_first, bars.step_last]
    ).astype(float)
    return {
        "type": "bar",
        "orientation": "h",
        "name": t(f"gantt.phase.{phase}", lang),
        "legendgroup": phase,
        "legendrank": 1000 + TRACE_PHASES.index(phase),  # theme order
        "y": bars.row,
        "base": bars.start,
        "x": gf.full_widths(bars),
        "xaxis": axes[0],
        "yaxis": axes[1],
        "marker": _marker(phase),
        "customdata": customdata,
        "hovertext": hovertext,
        "hovertemplate": _hovertemplate(phase, lang),
        **extra,
    }
