"""Lesson 7 (C9, C10b, C10c, C12, C13): colocated vs length router vs xPyD on the same GPUs."""

import numpy as np
import pandas as pd
import streamlit as st

from sim.config import DISAGG_PROTOCOLS, SimConfig, with_overrides
from sim.hardware import GPUS, LINKS_GB_S
from sim.metrics import summarize
from sim.workload import WorkloadConfig
from ui import charts, formulas
from ui import widgets as w

T, L = w.translator(), w.lang()
LONG = 8192  # prompt tokens from which a request counts as a long document
st.title(T("disagg.title"))
st.markdown(T("disagg.lead"))

c1, c2, c3, c4, c5, c6 = st.columns(6)
with c1:
    n_p = w.select("p", T("disagg.num_prefill"), [1, 2, 3], 1)
with c2:
    n_d = w.select("d", T("disagg.num_decode"), [1, 2, 3], 1)
with c3:
    link = w.steps("link", T("disagg.link"), list(LINKS_GB_S), "IB NDR")
    st.caption(f"{LINKS_GB_S[link]:g} GB/s")
with c4:
    decode_gpu = w.select("dgpu", T("disagg.decode_gpu"), list(GPUS), "H100-SXM")
with c5:
    rate = w.slider("rate", T("common.rate"), 1.0, 16.0, 6.0, step=1.0)
with c6:
    protocol = w.select("protocol", T("disagg.protocol"), list(DISAGG_PROTOCOLS), "vllm",
                        help=T("disagg.protocol_help"))  # fmt: skip

gpus = n_p + n_d
workload = WorkloadConfig(rate_per_s=rate, num_requests=120, prompt="chat+longdoc", seed=11)
try:
    configs = {
        T("disagg.colocated", n=gpus): with_overrides(SimConfig(), {
            "topology": "router", "router": "least-loaded", "num_instances": gpus}),
        T("disagg.router", n=gpus): with_overrides(SimConfig(), {
            "topology": "router", "router": "length", "num_instances": gpus}),
        f"{n_p}P{n_d}D": with_overrides(SimConfig(), {
            "topology": "disaggregated", "num_prefill": n_p, "num_decode": n_d,
            "kv_bandwidth_gb_s": LINKS_GB_S[link], "decode_gpu": decode_gpu,
            "disagg_protocol": protocol}),
    }  # fmt: skip
except ValueError as err:
    w.config_error(err)
    st.stop()
specs = [(label, workload, config) for label, config in configs.items()]
w.timeline_of(specs)
st.caption(T("common.legend"))
topologies = [config.topology.topology for config in configs.values()]
w.engine_note("vllm", caveat_key=w.topology_caveats(*topologies))  # router and P->D: our models
runs = [(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs]
rows = {}
for label, run in runs:  # chats and long documents apart: mixing them hides the story
    q, long = run.requests, run.requests.prompt_tokens >= LONG
    gaps = np.concatenate([np.diff(run.token_times[i]) for i in q[~long].request_id] or [[0.0]])
    rows[label] = {
        T("disagg.chat_ttft_p99"): q[~long].ttft_s.quantile(0.99),
        T("disagg.chat_itl_p99"): float(np.quantile(gaps, 0.99)),
        T("disagg.chat_worst_gap"): float(gaps.max()),
        T("disagg.long_ttft_p50"): q[long].ttft_s.median(),
        T("metric.output_tokens_per_s"): summarize(run)["output_tokens_per_s"],
    }
w.number_table(pd.DataFrame.from_dict(rows, orient="index"))
st.markdown(T("disagg.takeaway"))

st.subheader(T("disagg.util_title"))
st.markdown(T("disagg.util_text"))
w.cached_chart(charts.worker_utilisation_bars, runs[-1][1], lang=L)

st.subheader(T("disagg.goodput_title"))
st.markdown(T("disagg.goodput_text"))
if w.toggle("sweep", T("disagg.run_sweep"), False):
    rates = [float(r) for r in range(2, 25, 2)]
    bar = st.progress(0.0, text=T("disagg.sweeping"))
    sweeps = {}
    for done, (label, config) in enumerate(configs.items(), start=1):
        sweeps[label] = w.sweep_cached(workload, config, tuple(rates))
        bar.progress(done / len(configs), text=T("disagg.sweeping"))
    bar.empty()
    w.chart(charts.goodput_curves(sweeps, lang=L))
    w.goodput_table(sweeps)

with st.expander(T("disagg.formula_title")):
    w.formula(formulas.KV_TRANSFER, "disagg.formula_caption")
    w.formula(formulas.GOODPUT)
st.markdown(T("disagg.next"))
