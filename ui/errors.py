"""Text a visitor (or a server, or an uploaded file) controls, shown as text and nothing else.

Streamlit renders st.error, st.warning, st.info and st.caption as markdown. A message that
quotes what the visitor typed (a knob from a shared link, a URL, a CSV line, a field of an
uploaded config.json, a remote server's error) would otherwise let a crafted link put a
clickable phishing link, a remote image (a tracking pixel) or bold "official" text inside the
app's own error box (issue 32, #12).

So such a value joins a translated sentence as a code span (`as_code`): markdown reads nothing
inside one (no link, image, emphasis, HTML, $formula$ or :colour[]), and the visitor still reads
exactly what they typed, set apart in monospace. The fence is one backtick longer than the
longest run of backticks in the value, so the value cannot close it early (CommonMark 6.1).
`say(kind, key, **values)` does that for one catalog string; the catalog's own markdown stays
markdown. `escape_markdown` is the other way, for running text such as a chat (no monospace).
"""

from __future__ import annotations

import re

import streamlit as st

from ui.language import translator

_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:=^&\"'")


def escape_markdown(text: str) -> str:
    """`text` (typed by a visitor, or written by a model) shown by st.markdown/st.write as it is:
    every ASCII punctuation mark that markdown, LaTeX ($), Streamlit's :directives: or HTML
    could read is backslash-escaped, so no link, image, formula or colour is ever made of it.
    (Backslash escapes work inside a word too, so a bare http://... is no autolink either.)"""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in str(text))


def as_code(text) -> str:
    """`text` as one markdown code span: shown literally, whatever it holds."""
    text = " ".join(str(text).split("\n"))
    if not text.strip():
        return text
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text[0] in "` " or text[-1] in "` " else ""  # (one space each side is eaten)
    return f"{fence}{pad}{text}{pad}{fence}"


def say(kind: str, key: str, where=None, **values) -> None:
    """st.<kind> (error, warning, info, caption) of the catalog string `key`, each text value a
    code span (numbers are formatted by the catalog, so they are passed as they are)."""
    T = translator()
    safe = {k: v if isinstance(v, int | float) else as_code(v) for k, v in values.items()}
    getattr(where or st, kind)(T(key, **safe))
