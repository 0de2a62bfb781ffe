"""Lesson 5 (C7, C8, C10a): prefill-queue blocking, the fast lane, short-first and starvation."""

import streamlit as st

from sim.config import SimConfig, with_overrides
from sim.policies.chunked import Chunked
from sim.policies.short_first import ShortFirst
from sim.scenarios import long_prompts_then_chats, requests_from_rows
from ui import widgets as w

T = w.translator()
st.title(T("long.title"))
st.markdown(T("long.lead"))
blocking, starvation = st.tabs([T("long.tab_blocking"), T("long.tab_starvation")])

with blocking:
    st.markdown(T("long.blocking_text"))
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        long_len = w.steps("long_len", T("long.long_len"), [8192, 16384, 20000, 32768], 20000)
    with c2:
        n_long = w.select("n_long", T("long.n_long"), [1, 2], 2)
    with c3:
        partial = w.select("partial", T("long.partial"), [1, 2, 4, 8], 4)
    with c4:
        max_long = w.select("max_long", T("long.max_long"), [1, 2, 4, 8], 1)
    threshold = w.steps("threshold", T("long.threshold"), [1024, 2048, 4096, 10000, 16384], 10000)
    workload = long_prompts_then_chats([(0.02 * i, long_len) for i in range(n_long)])
    try:
        default = SimConfig()
        mine = with_overrides(SimConfig(), {
            "max_num_partial_prefills": partial, "max_long_partial_prefills": max_long,
            "long_prefill_token_threshold": threshold})  # fmt: skip
    except ValueError as err:
        w.config_error(err)
        st.stop()
    specs = [(T("long.vllm_default"), workload, default), (T("long.yours"), workload, mine)]
    w.timeline_of(specs, key="blocking")
    w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs])
    st.markdown(T("long.blocking_takeaway"))
    w.show_code(Chunked)

with starvation:
    st.markdown(T("long.starvation_text"))
    c1, c2 = st.columns(2)
    with c1:
        rate = w.slider("chat_rate", T("long.chat_rate"), 10, 60, 50, step=5)
    with c2:
        aging = w.slider("aging", T("long.aging"), 0.0, 5.0, 2.0, step=0.5)
    rows = [(i / rate, 600, 30) for i in range(int(8 * rate))]
    rows += [(1.0, 12000, 20), (2.0, 12000, 20), (3.0, 12000, 20)]
    workload = requests_from_rows(rows)
    knobs = {"max_num_partial_prefills": 2, "max_long_partial_prefills": 1,
             "long_prefill_token_threshold": 8192}  # fmt: skip
    fcfs = with_overrides(SimConfig(), knobs)
    short = with_overrides(SimConfig(policy="short-first"), {**knobs, "aging_s": aging})
    specs = [("fcfs", workload, fcfs), (T("long.short_first", aging=aging), workload, short)]
    w.timeline_of(specs, key="starvation")
    runs = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs]
    table = {label: run.requests for label, run in runs}
    cols = st.columns(len(table))
    for col, (label, q) in zip(cols, table.items(), strict=True):
        long = q.prompt_tokens > 10000
        col.metric(T("long.long_ttft", label=label), f"{q[long].ttft_s.max():.2f} s")
        col.metric(T("long.chat_ttft", label=label), f"{q[~long].ttft_s.median():.2f} s")
    st.markdown(T("long.starvation_takeaway"))
    w.show_code(ShortFirst)
