"""PD Lab: the Streamlit entry point. Run with `streamlit run app.py`.

It runs on every page view: page config, the sidebar (language and the compact projector layout,
shared on every page and kept in the URL as ?lang= and ?compact=), and the navigation over the
lesson pages in app_pages/. (The folder is not called pages/: with st.navigation, a pages/
folder makes Streamlit route a freshly started server's first deep link without this entry
point, losing the sidebar and the language.)
An exception no page caught becomes one translated st.error; its traceback goes to the server's
log only (Streamlit Community Cloud forces showErrorDetails=false, which would show tracebacks).
"""

import logging
import os

import streamlit as st

from ui import warmup
from ui.i18n import t
from ui.lesson_view import compact_picker
from ui.navigation import HOME, PAGES
from ui.touch import touch_style
from ui.widgets import lang, language_picker, text_style

st.set_page_config(page_title="PD Lab", page_icon="⏱️", layout="wide")
warmup.start_once()  # the first session of a server fills the caches with every lesson's view
language_picker()
compact_picker()  # ?compact=true: timelines that fit a 1280x720 projector screen
L = lang()
text_style(L)  # Korean breaks lines between words, not inside them
touch_style()  # on a phone, a table's toolbar keeps off the caption above it

pages = [  # Home, the default page, is served at the app's root
    st.Page(
        path,
        title=t(title, L),
        icon=icon,
        url_path="" if url == HOME else url,
        default=url == HOME,
    )
    for path, url, title, icon in PAGES
]
# /home shows Home too (hidden from the menu): Streamlit serves the default page at the root only,
# so a link or a typed URL that named Home by its path got "Page not found". (Not a switch_page
# to the root: Streamlit refuses to clear or set the query parameters the widgets are bound to.)
home_file, _, home_title, home_icon = next(page for page in PAGES if page[1] == HOME)
pages.append(
    st.Page(home_file, title=t(home_title, L), icon=home_icon, url_path=HOME, visibility="hidden")
)
st.sidebar.caption(t("app.tagline", L))
try:
    st.navigation(pages).run()
except Exception:  # the net under the pages' own st.error: never a traceback for a visitor
    if os.environ.get("PDLAB_RAISE_ERRORS") == "1":  # the tests want to see it (conftest.py)
        raise
    logging.getLogger("pdlab").exception("a page failed")  # the server's log has the traceback
    st.error(t("app.error", L))
