"""The page's language: which one the visitor reads, how a page translates, how Korean wraps.

- The language is a URL parameter (?lang=ko), switched by `language_picker` in the sidebar (app.py)
  and read by `lang()` everywhere else; an unknown value reads as English.
- `translator()` gives a page its terse `T(key, **fmt)`: the catalog string (ui/i18n.py,
  assets/i18n/) for that key in the current language.
- `text_style` makes Korean wrap between words, never inside one (KOREAN_TEXT_CSS says why each
  rule is there).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from ui.i18n import DEFAULT_LANG, LANGUAGES, t


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
        "Language · 언어",
        list(LANGUAGES),
        default=DEFAULT_LANG,
        key="lang",
        bind="query-params",
        required=True,
    )
