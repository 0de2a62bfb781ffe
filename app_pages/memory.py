"""Lesson 6 (C11): KV memory against capacity; preemption by recompute or swap."""

import streamlit as st

from sim.core.engine import Engine
from ui import charts
from ui import lesson_setups as ls
from ui import widgets as w
from ui.labels import sim_label

T, L = w.translator(), w.lang()
SCENARIO = "c11-memory-pressure"
ENGINES = {"vllm": "vLLM V1", "vllm-v0": "vLLM V0"}  # the policies this lesson's variants run
st.title(T("memory.title"))
w.glossary("KV", "GPU", "PCIe")
c1, c2 = st.columns(2)
with c1:
    capacity = w.steps(
        "kv",
        T("memory.capacity"),
        [8000, 12000, 16000, 24000, 32000, 48000, 64000, 100000],
        ls.MEMORY["kv"],
    )
with c2:
    mode = w.select(
        "mode",
        T("memory.mode"),
        ["recompute", "swap"],
        ls.MEMORY["mode"],
        help=T("memory.mode_help"),
        shown=w.option_label("mode"),
    )
overrides = (("kv_capacity_tokens", capacity),)
variant = "recompute" if mode == "recompute" else "swap (V0)"  # swap exists only in vLLM V0
try:
    spec = w.variant_spec(SCENARIO, variant, overrides)
    run = w.simulate_cached(spec[1], spec[2])
except ValueError as err:
    w.config_error(err)
    st.stop()
if mode == "swap":  # say it: choosing swap also switches the engine to vLLM V0
    st.info(T("memory.swap_is_v0"))
# The engine's bare name: the policy's option label ("vLLM V1 (today's default)") made the
# timeline's title run off a phone's screen.
engine = ENGINES.get(spec[2].policy) or w.option_label("policy")(spec[2].policy)
label = T("label.memory_run", engine=engine, mode=sim_label(variant, L), capacity=capacity)
w.look("look.memory_swap" if mode == "swap" else "look.memory")  # swap: no second prefill
w.timeline_of([(label, spec[1], spec[2])])
st.caption(T("common.legend"))
q = run.requests
m1, m2, m3 = st.columns(3)
m1.metric(T("memory.preemptions"), int(q.preemptions.sum()))
m2.metric(T("memory.rejected"), int((q.status == "rejected").sum()))
m3.metric(T("memory.peak"), f"{run.steps.kv_used_tokens.max() / capacity:.0%}")
w.cached_chart(charts.kv_use, run, lang=L)
with w.more():
    st.markdown(T("memory.lead"))
    st.markdown(T("memory.takeaway"))
w.engine_note(spec[2].policy)  # swap too: the V0 suite swaps out and back in (issue 29)
w.show_code(Engine, "memory.show_code")
