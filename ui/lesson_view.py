"""How a lesson page reads: the picture first, student words, a layout for a projector.

- `compact_picker` (sidebar, every page) and `is_compact`: the compact layout, in the URL as
  ?compact=true. Streamlit cannot tell the server the window's size, so the layout is a switch
  an instructor turns on once (a copied link keeps it): timelines then fit a 1280x720 projector
  screen, the compared panels and the Play buttons together (ui/gantt.py, COMPACT_PX).
- `look`: the one "What to look at" line a lesson puts directly above each timeline.
- `more`: an expander for the rest of a lesson's explanation (knob names, PR numbers, caveats),
  so the controls and the picture come first.
- `glossary`: a caption spelling out the abbreviations a page uses (TTFT, TPOT, KV, SLO, ...),
  each term once, in the page's language (assets/i18n/*/lesson_view.json, glossary.*).
"""

from __future__ import annotations

import streamlit as st

from ui.language import translator

GLOSSARY = ("TTFT", "TPOT", "ITL", "KV", "SLO", "GPU", "MFU", "MBU", "TNG", "NIXL", "PCIe")


def compact_picker() -> None:
    """The sidebar switch of the compact layout (?compact=true)."""
    T = translator()
    st.sidebar.toggle(
        T("view.compact"),
        value=False,
        key="compact",
        bind="query-params",
        help=T("view.compact_help"),
    )


def is_compact() -> bool:
    """Whether the visitor asked for the compact (projector) layout."""
    return bool(st.session_state.get("compact", False))


def look(key: str, **fmt) -> None:
    """The one line above a timeline that says what to look at."""
    T = translator()
    st.markdown(f":material/visibility: **{T('view.look')}** {T(key, **fmt)}")


def more(title_key: str = "view.more"):
    """An expander (closed) for the explanation that follows the picture."""
    return st.expander(translator()(title_key), icon=":material/menu_book:")


def glossary(*terms: str) -> None:
    """One caption: each abbreviation the page uses, spelled out."""
    T = translator()
    unknown = [term for term in terms if term not in GLOSSARY]
    if unknown:
        raise KeyError(f"no glossary entry for {unknown}")
    parts = [f"**{term}** {T(f'glossary.{term}')}" for term in terms]
    st.caption(T("view.glossary") + " " + " · ".join(parts))
