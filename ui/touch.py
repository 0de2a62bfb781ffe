"""What a touch screen needs that a mouse does not.

Streamlit shows a table's toolbar (columns, download, search, full screen) in a 44 px band just
above the table (`stElementToolbar`: position absolute, top -44px) while the table is hovered.
A mouse moves on and it goes; on a phone a tap brings it and it stays, over the last words of
whatever is above: a lesson's caption, the one that says what the table shows. On screens that
cannot hover, a table keeps that band free: 28 px of margin plus the column's 16 px gap.
"""

import streamlit as st

TOUCH_CSS = '@media (hover: none) { .stApp [data-testid="stDataFrame"] { margin-top: 28px; } }'


def touch_style() -> None:
    """The touch-screen rules (a style-only st.html: no space on the page)."""
    st.html(f"<style>{TOUCH_CSS}</style>")
