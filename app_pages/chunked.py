"""Lesson 4 (C6): chunked prefill; the chunk size trades the long prompt's TTFT against ITL."""

import pandas as pd
import streamlit as st

from sim.policies.vllm_v1 import Vllm
from ui import charts
from ui import lesson_setups as ls
from ui import widgets as w
from ui.labels import sim_label

T, L = w.translator(), w.lang()
SCENARIO = "c6-chunk-size"
SIZES = [256, 512, 1024, 2048, 4096, 8192, 16384]
st.title(T("chunked.title"))
w.glossary("TTFT", "ITL", "TPOT", "SLO")

c1, c2 = st.columns(2)
with c1:
    chunk = w.steps("chunk", T("chunked.chunk"), SIZES, ls.CHUNKED["chunk"])
with c2:
    gpu = w.select(
        "gpu",
        T("common.gpu"),
        ["H100-SXM", "A100-80GB", "H200", "L4", "RTX-4090"],
        ls.CHUNKED["gpu"],
    )

hw = (("gpu", gpu),)
try:  # the same runs as its effect contract (ui/effects.py)
    (_, wl0, v0), (_, wl1, v1) = ls.chunked_specs(chunk, gpu)
except ValueError as err:
    w.config_error(err)
    st.stop()
specs = [(sim_label("prefill-first (V0)", L), wl0, v0), (T("label.v1_chunk", size=chunk), wl1, v1)]
w.look("look.chunked")
w.timeline_of(specs, marks=[("prompt_tokens", 8192, T("gantt.mark.long"))])
st.caption(T("common.legend"))
w.runs_table([(label, w.simulate_cached(wl, cfg)) for label, wl, cfg in specs])
with w.more():
    st.markdown(T("chunked.lead"))
w.engine_note("prefill-first", "vllm")

st.subheader(T("chunked.tradeoff_title"))
st.markdown(T("chunked.tradeoff_text"))
rows = []
for size in SIZES:
    run = w.run_variant(SCENARIO, "chunk 2048", (*hw, ("max_num_batched_tokens", size)))
    q = run.requests
    long = q.prompt_tokens == q.prompt_tokens.max()
    rows.append(
        {
            "chunk_size": size,
            "long_ttft_s": float(q[long].ttft_s.iloc[0]),
            "max_itl_s": float(q[~long].max_itl_s.max()),
            "p99_tpot_s": float(q[~long].tpot_s.quantile(0.99)),
        }
    )
w.cached_chart(charts.chunk_tradeoff, pd.DataFrame(rows), lang=L)
w.show_code(Vllm)
