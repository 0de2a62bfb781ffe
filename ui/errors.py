"""Text a visitor (or a server, or an uploaded file) controls, shown as text and nothing else.

Streamlit renders st.error, st.warning, st.info and st.caption as markdown. A message that
quotes what the visitor typed (a knob from a shared link, a URL, a CSV line, a field of an
uploaded config.json, a remote server's error) would otherwise let a crafted link put a
clickable phishing link, a remote image (a tracking pixel) or bold "official" text inside the
app's own error box. So every such value passes through `escape_markdown` before it joins a
translated sentence: `say(kind, key, **values)` does that for one catalog string. The catalog's
own markdown (`code`, **bold**) stays markdown; only the values are escaped.
"""

from __future__ import annotations

import streamlit as st

from ui.language import translator

_MARKDOWN_SPECIAL = set("\\`*_{}[]()<>#+-.!|~$:=^&\"'")


def escape_markdown(text: str) -> str:
    """`text` (typed by a visitor, or written by a model) shown by st.markdown/st.write as it is:
    every ASCII punctuation mark that markdown, LaTeX ($), Streamlit's :directives: or HTML
    could read is backslash-escaped, so no link, image, formula or colour is ever made of it.
    (Backslash escapes work inside a word too, so a bare http://... is no autolink either.)"""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in str(text))


def say(kind: str, key: str, where=None, **values) -> None:
    """st.<kind> (error, warning, info, caption) of the catalog string `key`, each value escaped
    (numbers are formatted by the catalog first, so they are passed as they are)."""
    T = translator()
    safe = {k: v if isinstance(v, int | float) else escape_markdown(v) for k, v in values.items()}
    getattr(where or st, kind)(T(key, **safe))
