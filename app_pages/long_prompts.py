"""Lesson 5 (C7, C8, C10a): prefill-queue blocking, V1's and V0's fast lanes, short-first."""

import pandas as pd
import streamlit as st

from sim.policies.short_first import ShortFirst
from sim.policies.vllm_v0 import VllmV0
from sim.policies.vllm_v1 import Vllm
from ui import lesson_setups as ls
from ui import widgets as w

T = w.translator()
B, S = ls.BLOCKING, ls.STARVATION  # the defaults, shared with the effect contracts
st.title(T("long.title"))
st.markdown(T("long.lead"))
w.glossary("TTFT", "TPOT", "SLO")
blocking, starvation = st.tabs([T("long.tab_blocking"), T("long.tab_starvation")])

with blocking:
    c1, c2, c3 = st.columns(3)
    with c1:
        long_len = w.steps(
            "long_len", T("long.long_len"), [8192, 16384, 20000, 32768], B["long_len"]
        )
    with c2:
        n_long = w.select("n_long", T("long.n_long"), [1, 2], B["n_long"])
    with c3:
        threshold = w.steps(
            "v1_threshold", T("long.threshold"), [128, 256, 512, 1024, 1536], B["v1_threshold"]
        )
    with st.expander(T("long.v0_knobs")):
        d1, d2, d3 = st.columns(3)
        with d1:
            partial = w.select("partial", T("long.partial"), [1, 2, 4, 8], B["partial"])
        with d2:
            max_long = w.select("max_long", T("long.max_long"), [1, 2, 4, 8], B["max_long"])
        with d3:
            # URL key "threshold" kept from before this lesson had a V1 part: old links work.
            v0_threshold = w.steps(
                "threshold",
                T("long.v0_threshold"),
                [1024, 2048, 4096, 10000, 16384],
                B["threshold"],
            )
    try:
        specs = ls.blocking_specs(long_len, n_long, threshold, partial, max_long, v0_threshold)
    except ValueError as err:
        w.config_error(err)
        st.stop()
    names = {
        "v1_default": T("long.v1_default"),
        "v1_lane": T("long.v1_lane", threshold=threshold),
        "v0_lane": T("long.v0_lane", partial=partial, max_long=max_long),
    }
    specs = [(names[run_id], wl, cfg) for run_id, wl, cfg in specs]
    w.look("look.blocking")
    w.timeline_of(specs, key="blocking", marks=[("prompt_tokens", 8192, T("gantt.mark.long"))])
    st.caption(T("common.legend"))
    w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs])
    with w.more():
        st.markdown(T("long.blocking_text"))
        st.markdown(T("long.blocking_takeaway"))
    w.engine_note("vllm", "vllm-v0")
    w.show_code(Vllm)
    w.show_code(VllmV0)

with starvation:
    c1, c2 = st.columns(2)
    with c1:
        rate = w.slider("chat_rate", T("long.chat_rate"), 10, 60, S["chat_rate"], step=5)
    with c2:
        aging = w.slider("aging", T("long.aging"), 0.0, 5.0, S["aging"], step=0.5)
    names = {
        "fcfs": T("long.fcfs"),
        "short_first": T("long.short_first", aging=aging) if aging else T("long.no_aging"),
    }
    specs = [(names[run_id], wl, cfg) for run_id, wl, cfg in ls.starvation_specs(rate, aging)]
    w.look("look.starvation")
    w.timeline_of(
        specs, key="starvation", marks=[("prompt_tokens", ls.LONG_PROMPT, T("gantt.mark.long"))]
    )
    st.caption(T("common.legend"))
    runs = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs]
    rows = {}
    for label, run in runs:  # full column names in a table: metric labels were cut off
        q, long = run.requests, run.requests.prompt_tokens > ls.LONG_PROMPT
        rows[label] = {
            T("long.starvation_col_chat"): q[~long].ttft_s.median(),
            T("long.starvation_col_long"): q[long].ttft_s.max(),
        }
    w.number_table(pd.DataFrame.from_dict(rows, orient="index"), digits=2)
    with w.more():
        st.markdown(T("long.starvation_text"))
        st.markdown(T("long.starvation_takeaway"))
    w.engine_note("vllm", "short-first")
    w.show_code(ShortFirst)
