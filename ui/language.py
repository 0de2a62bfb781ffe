"""The page's language: which one the visitor reads, how a page translates, how Korean wraps.

- The language is a URL parameter (?lang=ko), switched by `language_picker` in the sidebar (app.py)
  and read by `lang()` everywhere else; an unknown value reads as English.
- `translator()` gives a page its terse `T(key, **fmt)`: the catalog string (ui/i18n.py,
  assets/i18n/) for that key in the current language.
- `text_style` makes Korean wrap between words, never inside one (KOREAN_TEXT_CSS says why each
  rule is there), and puts the page's language on Streamlit's file uploader (`uploader_css`).
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


# Streamlit writes its file uploader's button and size limit in English whatever the page's
# language ("Upload", `${size} per file` + " • CSV" in its FileUploader component, 1.67), and has
# no setting to translate them. On a page in another language, CSS shrinks those words to
# nothing and writes the catalog's in their place (::after), the limit read from the server's
# own option so it cannot drift from what the server enforces, and the file type from what
# the uploader accepts (its <input accept>).
_DROPZONE = '.stApp [data-testid="stFileUploaderDropzone"]'
_BUTTON_TEXT = f'{_DROPZONE} button [data-testid="stMarkdownContainer"] p'
_LIMIT_TEXT = '.stApp [data-testid="stFileUploaderDropzoneInstructions"] span'
UPLOAD_TYPES = ("csv", "json")  # what the app's uploaders accept (its pages' type=[...])


def uploader_css(current: str, max_upload_mb: int) -> str:
    """CSS that writes the uploader's button and limit in `current` language ('' for English,
    whose words Streamlit's own already are)."""
    if current == DEFAULT_LANG:
        return ""

    def text(key: str, **fmt) -> str:
        return t(key, current, **fmt).replace("\\", "\\\\").replace('"', '\\"')

    button, limit = text("common.upload_button"), text("common.upload_limit", mb=max_upload_mb)
    rules = [
        f"{_BUTTON_TEXT}, {_LIMIT_TEXT} {{ font-size: 0; }}",  # (0.875rem: Streamlit's 14 px)
        f'{_BUTTON_TEXT}::after {{ content: "{button}"; font-size: 0.875rem; }}',
        f'{_LIMIT_TEXT}::after {{ content: "{limit}"; font-size: 0.875rem; }}',
    ]
    for kind in UPLOAD_TYPES:
        rules.append(
            f'{_DROPZONE}:has(input[accept*=".{kind}"]) '
            f'[data-testid="stFileUploaderDropzoneInstructions"] span::after '
            f'{{ content: "{limit} • {kind.upper()}"; }}'
        )
    return " ".join(rules)


def text_style(current: str) -> None:
    """The page's line-breaking rules for `current` language and its uploader's words (a
    style-only st.html: no space)."""
    css = KOREAN_TEXT_CSS if current == "ko" else ""
    css += " " + uploader_css(current, int(st.get_option("server.maxUploadSize")))
    if css.strip():
        st.html(f"<style>{css}</style>")


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
