"""Home: the hero first (three requests on the same two GPUs, colocated vs disaggregated), then
what prefill and decode are. Its runs and defaults: ui/lesson_setups.py (home_specs, HOME)."""

import streamlit as st

from sim.runs.token_windows import compare_tokens_in_window
from ui import formulas
from ui import lesson_setups as ls
from ui import widgets as w
from ui.charts import tokens_in_window_bars
from ui.labels import request_label, sim_label
from ui.navigation import PAGES

T, L = w.translator(), w.lang()
SPECS = ls.home_specs()  # the same two GPUs either way (ui/lesson_setups.py)
LABELS = ls.HOME_RUNS

st.title(T("home.title"))
st.subheader(T("home.hero_title"))
st.markdown(T("home.look"))
w.timeline_of([(sim_label(run_id, L), wl, cfg) for run_id, wl, cfg in SPECS])
st.caption(T("common.legend"))
with st.expander(T("home.hero_more")):
    st.markdown(T("home.hero_text"))
with st.expander(T("home.how_we_know")):
    topologies = [cfg.topology.topology for _, _, cfg in SPECS]
    w.engine_note("vllm", caveat_key=w.topology_caveats(*topologies))

st.subheader(T("home.window_title"))
t1 = w.slider("window", T("home.window"), 1.0, 10.0, ls.HOME["window"], step=0.5)
runs = {run_id: w.simulate_cached(wl, cfg) for run_id, wl, cfg in SPECS}
table = compare_tokens_in_window(runs, 0.0, t1)
col_table, col_chart = st.columns([1, 2])
# Table and chart name requests and runs alike: "request 0" / "요청 0", "colocated" / "colocation"
shown = table.rename(index=lambda i: request_label(i, L), columns=lambda c: sim_label(c, L))
shown.index.name = T("home.request_col")
col_table.dataframe(shown, width="stretch")
named = table.rename(columns=lambda c: sim_label(c, L))  # index: request ids, the chart names them
w.cached_chart(tokens_in_window_bars, named, lang=L, where=col_chart)
gain = table[LABELS[1]] - table[LABELS[0]]
gains = ", ".join(
    T("home.gain", request=request_label(int(i), L), gain=int(g)) for i, g in gain.items()
)
st.info(T("home.window_result", t1=t1, gains=gains))

st.markdown(T("home.lead"))
left, right = st.columns(2)
left.markdown(T("home.prefill"))
right.markdown(T("home.decode"))

with st.expander(T("home.formula_title")):
    w.formula(formulas.TTFT_TPOT)
    w.formula(formulas.KV_TRANSFER, "home.formula_caption")

st.subheader(T("home.lessons"))
for path, _, key, _ in PAGES[1:]:  # every page after Home, in the menu's order
    st.page_link(path, label=T(key), query_params={"lang": L})
