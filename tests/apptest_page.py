"""Open one page of the app the way a visitor's link does, in Streamlit's AppTest."""

import os

from streamlit.testing.v1 import AppTest

from ui.navigation import HOME, PAGES

HOME_FILE = next(file for file, url, _, _ in PAGES if url == HOME)


def open_page(
    page: str, params: dict | None = None, env: dict | None = None, timeout: float = 120
) -> AppTest:
    """app.py run with `params` in the URL (and `env` set while it runs), then `page`."""
    old = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        at = AppTest.from_file("../app.py", default_timeout=timeout)
        for key, value in (params or {}).items():
            at.query_params[key] = value
        at.run()  # the default page, Home, as at the root URL
        if page != HOME_FILE:  # (a switch to home.py would open its /home alias: app.py)
            at.switch_page(page).run()
        return at
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
