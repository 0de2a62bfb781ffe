"""Disaggregation: colocated vs length router vs xPyD on the same GPUs, in two regimes (presets):
one where disaggregation wins goodput per GPU (DistServe's: long prompts, a tight TPOT target)
and one where it loses (chats at relaxed targets); then one trace under three deciders (always,
Dynamo's isl_bounding, llm-d's prefix decider): who prefills where, and why. Defaults:
ui/lesson_setups.py."""

import dataclasses

import pandas as pd
import streamlit as st

from sim.config import DISAGG_PROTOCOLS
from sim.cost.hardware import GPUS, LINKS_GB_S
from sim.runs.sweep import goodput_of
from ui import charts, formulas
from ui import lesson_setups as ls
from ui import widgets as w
from ui.decisions import decision_table, remote_counts
from ui.goodput_text import goodput_cell

T, L = w.translator(), w.lang()
D = ls.DISAGG
st.title(T("disagg.title"))
st.markdown(T("disagg.lead"))

preset_key = w.select(
    "preset",
    T("disagg.preset"),
    list(ls.DISAGG_PRESETS),
    D["preset"],
    shown=w.option_label("disagg_preset"),
)
preset = ls.DISAGG_PRESETS[preset_key]
st.caption(T(f"disagg.preset_text.{preset_key}"))
c1, c2, c3, c4, c5, c6 = st.columns(6)
with c1:
    n_p = w.select("p", T("disagg.num_prefill"), [1, 2, 3], D["p"])
with c2:
    n_d = w.select("d", T("disagg.num_decode"), [1, 2, 3], D["d"])
with c3:
    link = w.steps(
        "link", T("disagg.link"), list(LINKS_GB_S), D["link"], help=T("disagg.link_help")
    )
    st.caption(f"{LINKS_GB_S[link]:g} GB/s")
with c4:
    decode_gpu = w.select("dgpu", T("disagg.decode_gpu"), list(GPUS), D["dgpu"])
with c5:
    rate = w.slider("rate", T("common.rate"), 1.0, 16.0, D["rate"], step=1.0)
with c6:
    protocol = w.select(
        "protocol",
        T("disagg.protocol"),
        list(DISAGG_PROTOCOLS),
        D["protocol"],
        help=T("disagg.protocol_help"),
    )

gpus = n_p + n_d
labels = {
    "colocated": T("disagg.colocated", n=gpus),
    "router": T("disagg.router", n=gpus),
    "disaggregated": f"{n_p}P{n_d}D",
}
try:
    configs = ls.disagg_configs(preset, n_p, n_d, LINKS_GB_S[link], decode_gpu, protocol)
except ValueError as err:
    w.config_error(err)
    st.stop()
# The timeline: the preset's first requests at the chosen rate (few enough rows to read)
shown = dataclasses.replace(preset.workload, rate_per_s=rate, num_requests=D["timeline_requests"])
specs = [(labels[k], shown, configs[k]) for k in ls.DISAGG_RUNS]
st.markdown(T("disagg.look"))
w.timeline_of(specs)
st.caption(T("common.legend"))
runs = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs]
w.runs_table(
    runs, ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "max_itl_s", "slo_attainment")
)

st.subheader(T("disagg.goodput_title"))
st.markdown(T("disagg.when_it_pays"))
rows, sweeps = {}, {}
with st.spinner(T("disagg.sweeping")):
    for key, each in ls.DISAGG_PRESETS.items():
        try:
            chosen = ls.disagg_configs(each, n_p, n_d, LINKS_GB_S[link], decode_gpu, protocol)
            tables = {
                labels[k]: w.sweep_cached(each.workload, chosen[k], each.rates)
                for k in ls.DISAGG_RUNS
            }
        except ValueError as err:
            w.config_error(err)
            continue
        rows[T(f"disagg.preset_short.{key}")] = {  # short: two columns that fit a phone
            label: goodput_cell(goodput_of(table), per_gpu=True) for label, table in tables.items()
        }
        if key == preset_key:
            sweeps = tables
st.dataframe(pd.DataFrame(rows), width="stretch")  # a configuration per row
st.caption(T("disagg.goodput_caption"))
with st.expander(T("disagg.goodput_more")):
    st.markdown(T("disagg.goodput_text"))
    if sweeps:
        w.chart(charts.goodput_curves(sweeps, lang=L))
        w.goodput_table(sweeps)

with st.expander(T("disagg.more_title")):
    st.markdown(T("disagg.takeaway"))
    st.markdown(T("disagg.util_text"))
    w.cached_chart(charts.worker_utilisation_bars, runs[-1][1], lang=L)
with st.expander(T("disagg.how_we_know")):
    w.engine_note(
        "vllm", caveat_key=w.topology_caveats(*(c.topology.topology for c in configs.values()))
    )
    st.caption(T("disagg.sources"))
with st.expander(T("disagg.formula_title")):
    w.formula(formulas.KV_TRANSFER, "disagg.formula_caption")
    w.formula(formulas.GOODPUT)
st.subheader(T("decide.title"))
st.markdown(T("decide.lead"))
non_cached = w.select(
    "noncached",
    T("decide.non_cached"),
    list(ls.NON_CACHED_CHOICES),
    ls.DECIDE["non_cached"],
    help=T("decide.non_cached_help"),
)
names = {
    "always": T("decide.run.always"),
    "isl_bounding": T("decide.run.isl_bounding"),
    "llm-d-prefix": T("decide.run.llmd"),
}
# The same runs as its effect contract (ui/effects.py `deciders`)
decider_specs = [(names[m], wl, cfg) for m, wl, cfg in ls.decider_specs(non_cached)]
try:
    decided = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in decider_specs]
    table = decision_table(decided, T)
except ValueError as err:
    w.config_error(err)
    st.stop()
w.look("decide.look")
st.dataframe(table, hide_index=True, width="stretch")
st.caption(T("decide.table_caption"))
counts = ", ".join(f"{label} {n}" for label, n in remote_counts(decided).items())
st.caption(T("decide.counts", n=len(table), counts=counts))
w.timeline_of(decider_specs, key="decide_tl")
w.runs_table(decided, ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "max_itl_s"))
st.markdown(T("decide.simplified"))
with st.expander(T("view.how_we_know"), icon=":material/verified:"):  # the deciders' checks
    st.caption(T("common.caveat_disagg"))
st.markdown(T("disagg.next"))
