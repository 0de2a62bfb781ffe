"""Lesson 3 (C4, C5): static batching vs continuous batching (prefill-first), same workload;
then TGI v3's waiting_served_ratio: when a running batch lets waiting requests in."""

import streamlit as st

from sim.policies.prefill_first import PrefillFirst
from sim.policies.static import StaticBatching
from sim.policies.tgi import Tgi
from ui import lesson_setups as ls
from ui import widgets as w

T, D = w.translator(), ls.BATCHING
st.title(T("batching.title"))
st.markdown(T("batching.lead"))
w.glossary("TTFT", "TPOT", "SLO")

c1, c2, c3, c4 = st.columns(4)
with c1:
    batch = w.steps("batch", T("batching.batch_size"), [1, 2, 4, 8, 16, 32, 64], D["batch"])
with c2:
    rate = w.slider("rate", T("common.rate"), 0.5, 16.0, D["rate"], step=0.5)
with c3:
    n = w.slider("n", T("common.num_requests"), 4, 64, D["n"])
with c4:
    long_prompt = w.toggle("long", T("batching.long_prompt"), D["long"])

try:  # the same runs as its effect contract (ui/effects.py)
    (_, workload, static), (_, _, continuous) = ls.batching_specs(batch, rate, n, long_prompt)
except ValueError as err:
    w.config_error(err)
    st.stop()
specs = [(T("batching.static"), workload, static), (T("batching.continuous"), workload, continuous)]
w.look("look.batching_long" if long_prompt else "look.batching")
w.timeline_of(specs, marks=[("prompt_tokens", 16384, T("gantt.mark.long"))])
st.caption(T("common.legend"))
w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs])
with w.more():
    st.markdown(T("batching.takeaway"))
w.engine_note("static", "prefill-first")
w.show_code(StaticBatching)
w.show_code(PrefillFirst)

st.subheader(T("tgi.title"))
st.markdown(T("tgi.lead"))
ratio = w.select(
    "ratio", T("tgi.ratio"), list(ls.TGI_RATIOS), ls.TGI["ratio"], help=T("tgi.ratio_help")
)
names = {
    "tgi": T("tgi.run.tgi", r=f"{ratio:g}"),
    "tgi_low": T("tgi.run.tgi", r=f"{ls.TGI_LOW:g}"),
    "vllm": T("tgi.run.vllm"),
}
try:  # the same runs as its effect contract (ui/effects.py `tgi`)
    tgi_specs = [(names[k], wl, cfg) for k, wl, cfg in ls.tgi_specs(ratio, rate, n)]
    tgi_runs = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in tgi_specs]
except ValueError as err:
    w.config_error(err)
    st.stop()
w.look("tgi.look", r=f"{ratio:g}")
w.timeline_of(tgi_specs, key="tgi_tl")
st.caption(T("common.legend"))
w.runs_table(tgi_runs, ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "max_itl_s"))
st.caption(T("tgi.caption"))
w.engine_note("tgi", "vllm")
w.show_code(Tgi)
