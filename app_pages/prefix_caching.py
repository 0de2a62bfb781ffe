"""Lesson 7 (PC1-PC3): automatic prefix caching, as vLLM V1 does it, on shared and real prompts."""

import pandas as pd
import streamlit as st

from sim.config import with_overrides
from sim.metrics import summarize
from sim.prefix_cache import PrefixCachingKV
from sim.scenarios import mooncake_excerpt, shared_system_prompt
from ui import widgets as w

T, L = w.translator(), w.lang()
st.title(T("prefix.title"))
w.glossary("TTFT", "KV")
system_tab, trace_tab, evict_tab = st.tabs(
    [T("prefix.tab_system"), T("prefix.tab_trace"), T("prefix.tab_evict")]
)
KEYS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "prefix_cache_hit_rate", "output_tokens_per_s")


def on_and_off(workload, label_on, label_off, overrides=()):
    """The scenario's config with caching on and off, as (label, workload, config) specs."""
    base = w.variant_spec("pc1-shared-system-prompt", "caching on", overrides)[2]
    return [(label_on, workload, base),
            (label_off, workload, with_overrides(base, {"enable_prefix_caching": False}))]


with system_tab:
    st.markdown(T("prefix.system_text"))
    c1, c2 = st.columns(2)
    with c1:
        system = w.steps("system", T("prefix.system_len"), [256, 500, 1000, 2000, 4000, 8000],
                         2000)  # fmt: skip
    with c2:
        rate = w.slider("rate", T("common.rate"), 1.0, 16.0, 4.0, step=1.0)
    specs = on_and_off(shared_system_prompt(60, rate, system), T("prefix.on"), T("prefix.off"))
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
    rate = w.slider("trace_rate", T("common.rate"), 0.1, 0.5, 0.25, step=0.05)
    specs = on_and_off(mooncake_excerpt(rate), T("prefix.on"), T("prefix.off"))
    w.look("look.prefix_trace")
    w.timeline_of(specs, key="tl_trace")
    st.caption(T("prefix.legend"))
    w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs], KEYS)
    with w.more():
        st.markdown(T("prefix.trace_takeaway"))
    w.engine_note("vllm")

with evict_tab:
    st.markdown(T("prefix.evict_text"))
    capacity = w.steps("kv", T("memory.capacity"), [12000, 24000, 48000, 100000, 200000],
                       24000)  # fmt: skip
    chosen = (("kv_capacity_tokens", capacity),)
    spec = w.variant_spec("pc3-cache-eviction", "KV 24k tokens", chosen)
    w.look("look.prefix_evict")
    w.timeline_of([(T("label.kv_capacity", capacity=capacity), spec[1], spec[2])], key="tl_evict")
    st.caption(T("prefix.legend"))
    rows = []
    for size in (12000, 24000, 48000, 100000, 200000):
        s = summarize(w.run_variant("pc3-cache-eviction", "KV 24k tokens",
                                    (("kv_capacity_tokens", size),)))  # fmt: skip
        rows.append({T("memory.capacity"): size, T("metric.prefix_cache_hit_rate"):
                     s["prefix_cache_hit_rate"], T("metric.ttft_p50_s"): s["ttft_p50_s"]})
    w.number_table(pd.DataFrame(rows), hide_index=True)
    with w.more():
        st.markdown(T("prefix.evict_takeaway"))
    w.engine_note("vllm")
    w.show_code(PrefixCachingKV)
