"""Lesson 5 (C7, C8, C10a): prefill-queue blocking, V1's and V0's fast lanes, short-first."""

import streamlit as st

from sim.config import SimConfig, with_overrides
from sim.policies.short_first import ShortFirst
from sim.policies.vllm_v0 import VllmV0
from sim.policies.vllm_v1 import Vllm
from sim.scenarios import long_prompts_then_chats, requests_from_rows
from ui import widgets as w
from ui.labels import sim_label

T = w.translator()
BUDGET = 2048  # the step's token budget in this lesson (vLLM's default on an A100 or L40S)
st.title(T("long.title"))
st.markdown(T("long.lead"))
w.glossary("TTFT", "TPOT", "SLO")
blocking, starvation = st.tabs([T("long.tab_blocking"), T("long.tab_starvation")])

with blocking:
    c1, c2, c3 = st.columns(3)
    with c1:
        long_len = w.steps("long_len", T("long.long_len"), [8192, 16384, 20000, 32768], 20000)
    with c2:
        n_long = w.select("n_long", T("long.n_long"), [1, 2], 2)
    with c3:
        threshold = w.steps("v1_threshold", T("long.threshold"), [128, 256, 512, 1024, 1536],
                            512)  # fmt: skip
    with st.expander(T("long.v0_knobs")):
        d1, d2, d3 = st.columns(3)
        with d1:
            partial = w.select("partial", T("long.partial"), [1, 2, 4, 8], 4)
        with d2:
            max_long = w.select("max_long", T("long.max_long"), [1, 2, 4, 8], 1)
        with d3:
            # URL key "threshold" kept from before this lesson had a V1 part: old links work.
            v0_threshold = w.steps("threshold", T("long.v0_threshold"),
                                   [1024, 2048, 4096, 10000, 16384], 10000)  # fmt: skip
    workload = long_prompts_then_chats([(0.02 * i, long_len) for i in range(n_long)])
    try:
        v1_default = with_overrides(SimConfig(), {"max_num_batched_tokens": BUDGET})
        v1_lane = with_overrides(v1_default, {"long_prefill_token_threshold": threshold})
        v0_lane = with_overrides(SimConfig(policy="vllm-v0"), {
            "max_num_batched_tokens": BUDGET, "max_num_partial_prefills": partial,
            "max_long_partial_prefills": max_long,
            "long_prefill_token_threshold": v0_threshold})  # fmt: skip
    except ValueError as err:
        w.config_error(err)
        st.stop()
    specs = [
        (T("long.v1_default"), workload, v1_default),
        (T("long.v1_lane", threshold=threshold), workload, v1_lane),
        (T("long.v0_lane", partial=partial, max_long=max_long), workload, v0_lane),
    ]
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
        rate = w.slider("chat_rate", T("long.chat_rate"), 10, 60, 50, step=5)
    with c2:
        aging = w.slider("aging", T("long.aging"), 0.0, 5.0, 2.0, step=0.5)
    rows = [(i / rate, 600, 30) for i in range(int(8 * rate))]
    rows += [(1.0, 12000, 20), (2.0, 12000, 20), (3.0, 12000, 20)]
    workload = requests_from_rows(rows)
    knobs = {"max_num_batched_tokens": BUDGET}
    fcfs = with_overrides(SimConfig(), knobs)
    short = with_overrides(SimConfig(policy="short-first"), {**knobs, "aging_s": aging})
    specs = [(sim_label("fcfs", w.lang()), workload, fcfs),
             (T("long.short_first", aging=aging), workload, short)]
    w.look("look.starvation")
    w.timeline_of(specs, key="starvation", marks=[("prompt_tokens", 10000,
                                                    T("gantt.mark.long"))])  # fmt: skip
    st.caption(T("common.legend"))
    runs = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs]
    table = {label: run.requests for label, run in runs}
    cols = st.columns(len(table))
    for col, (label, q) in zip(cols, table.items(), strict=True):
        long = q.prompt_tokens > 10000
        col.metric(T("long.long_ttft", label=label), T("live.seconds", s=q[long].ttft_s.max()))
        col.metric(T("long.chat_ttft", label=label), T("live.seconds", s=q[~long].ttft_s.median()))
    with w.more():
        st.markdown(T("long.starvation_text"))
        st.markdown(T("long.starvation_takeaway"))
    w.engine_note("vllm", "short-first")
    w.show_code(ShortFirst)
