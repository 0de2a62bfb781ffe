"""Lesson 7 (PC1-PC3): automatic prefix caching, as vLLM V1 does it, on shared and real prompts."""

import pandas as pd
import streamlit as st

from sim.core.prefix_cache import PrefixCachingKV
from sim.runs.metrics import summarize
from ui import lesson_setups as ls
from ui import widgets as w

T, L = w.translator(), w.lang()
st.title(T("prefix.title"))
w.glossary("TTFT", "KV")
system_tab, trace_tab, evict_tab = st.tabs(
    [T("prefix.tab_system"), T("prefix.tab_trace"), T("prefix.tab_evict")]
)
KEYS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "prefix_cache_hit_rate", "output_tokens_per_s")


def on_off(specs):
    """ls's (id, workload, config) caching on/off specs, labelled for the page."""
    names = {"on": T("prefix.on"), "off": T("prefix.off")}
    return [(names[run_id], wl, cfg) for run_id, wl, cfg in specs]


with system_tab:
    st.markdown(T("prefix.system_text"))
    c1, c2 = st.columns(2)
    with c1:
        system = w.steps(
            "system",
            T("prefix.system_len"),
            [256, 500, 1000, 2000, 4000, 8000],
            ls.PREFIX_SYSTEM["system"],
        )
    with c2:
        rate = w.slider("rate", T("common.rate"), 1.0, 16.0, ls.PREFIX_SYSTEM["rate"], step=1.0)
    specs = on_off(ls.system_prompt_specs(system, rate))
    w.look("look.prefix_system")
    w.timeline_of(specs, key="tl_system")
    st.caption(T("prefix.legend"))
    w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs], KEYS)
    with w.more():
        st.markdown(T("prefix.lead"))
        st.markdown(T("prefix.system_takeaway"))
    w.engine_note("vllm")

with trace_tab:
    st.markdown(T("prefix.trace_text"))
    rate = w.slider(
        "trace_rate", T("common.rate"), 0.1, 0.5, ls.PREFIX_TRACE["trace_rate"], step=0.05
    )
    specs = on_off(ls.trace_specs(rate))
    w.look("look.prefix_trace")
    w.timeline_of(specs, key="tl_trace")
    st.caption(T("prefix.legend"))
    w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs], KEYS)
    with w.more():
        st.markdown(T("prefix.trace_takeaway"))
    w.engine_note("vllm")

with evict_tab:
    st.markdown(T("prefix.evict_text"))
    capacity = w.steps("kv", T("memory.capacity"), list(ls.EVICT_SIZES), ls.PREFIX_EVICT["kv"])
    workload, config = ls.evict_spec(capacity)
    w.look("look.prefix_evict")
    w.timeline_of([(T("label.kv_capacity", capacity=capacity), workload, config)], key="tl_evict")
    st.caption(T("prefix.legend"))
    rows = []
    for size in ls.EVICT_SIZES:
        s = summarize(w.simulate_cached(*ls.evict_spec(size)))
        rows.append(
            {
                T("memory.capacity"): size,
                T("metric.prefix_cache_hit_rate"): s["prefix_cache_hit_rate"],
                T("metric.ttft_p50_s"): s["ttft_p50_s"],
            }
        )
    w.number_table(pd.DataFrame(rows), hide_index=True)
    with w.more():
        st.markdown(T("prefix.evict_takeaway"))
    w.engine_note("vllm")
    w.show_code(PrefixCachingKV)
