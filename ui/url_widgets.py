"""Controls bound to the URL, so a shared link reproduces the exact view.

Every control here is bound to the URL (`bind="query-params"`, key = the parameter name) with a
FIXED default: a link opened on a freshly started server, straight into an inner page, shows
what its sender saw. A select can show its options translated (`shown=option_label(...)`) while
the URL keeps the option's id, so a link works in both languages (_select_by_id says how).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import streamlit as st

from ui.i18n import DEFAULT_LANG, catalog, t
from ui.labels import sim_label
from ui.language import lang


def slider(key: str, label: str, lo, hi, default, step=None, help: str | None = None, **kw):
    """A slider whose value lives in the URL under `key`."""
    return st.slider(
        label, lo, hi, default, step=step, key=key, bind="query-params", help=help, **kw
    )


# No format_func on bound widgets: Streamlit writes the FORMATTED label into the URL, so a
# translated label would make a link shared in one language fail in the other. A select that
# shows its ids translated (`shown=`) is bound to the URL here instead, by _select_by_id: the
# box shows "스왑", the URL holds ?mode=swap in both languages.


def select(key: str, label: str, options: Sequence, default, help=None, shown=None, **kw):
    """A selectbox bound to the URL under `key`: options shown as they are, or through
    `shown` (id -> label, e.g. option_label("arrival")) with the URL still holding the id."""
    options = list(options)
    if shown is not None:
        return _select_by_id(key, label, options, default, shown, help=help, **kw)
    return st.selectbox(
        label, options, index=options.index(default), key=key, bind="query-params", help=help, **kw
    )


def option_label(group: str | None = None) -> Callable[[object], str]:
    """How a select shows an option id in the page's language: the catalog's
    option.<group>.<id> (assets/i18n/*/options.json), else the id itself (a policy, a GPU, an
    SLO preset: names). Without a group, the simulator's own label (sim_label: topologies)."""
    current = lang()

    def shown(value) -> str:
        if group is None:
            return sim_label(str(value), current)
        key = f"option.{group}.{value}"
        return t(key, current) if key in catalog(DEFAULT_LANG) else str(value)

    return shown


_IN_URL = "_pdlab_in_url."  # + key: the id this binding last left in the URL (None: absent)


def _select_by_id(key: str, label: str, options: list, default, shown, help=None, **kw):
    """A selectbox showing shown(option), bound to ?key=<option id> by hand.

    Streamlit's own binding would write shown(option) into the URL. Here the script keeps the
    id in st.query_params itself, with the rules of a bound widget: the URL wins on a first
    view and whenever it changed under the page (a pasted link, Back); a value equal to the
    default or unknown is left out of the URL; otherwise the widget's value is the visitor's.
    """
    by_id = {str(option): option for option in options}
    in_url = st.query_params.get(key)
    if key not in st.session_state or st.session_state.get(_IN_URL + key) != in_url:
        value = by_id.get(in_url, default)
    else:
        # Read before this run's widget exists, so with the last run's labels: after a switch
        # of language the box still sends the old language's label, which the new labels
        # would not know (it would fall back to the default).
        value = st.session_state[key]
        value = value if value in options else default
    st.session_state[key] = value
    value = st.selectbox(label, options, key=key, format_func=shown, help=help, **kw)
    wanted = None if value == default else str(value)
    if in_url != wanted:
        if wanted is None:
            del st.query_params[key]
        else:
            st.query_params[key] = wanted
    st.session_state[_IN_URL + key] = wanted
    return value


def steps(key: str, label: str, options: Sequence, default, help=None):
    """A select_slider (discrete values, e.g. chunk sizes) bound to the URL under `key`."""
    return st.select_slider(
        label, list(options), value=default, key=key, bind="query-params", help=help
    )


def toggle(key: str, label: str, default: bool = False, help=None) -> bool:
    return st.toggle(label, value=default, key=key, bind="query-params", help=help)
