"""Speculative decoding (issue 31): at batch 1 it cuts TPOT; as the batch grows the verify work
(1 + k tokens per request per step) eats the gain, and the acceptance rate moves the crossover."""

import pandas as pd
import streamlit as st

from sim.core import speculation
from sim.cost.hardware import GPUS, MODELS
from ui import charts, spec_live
from ui import lesson_setups as ls
from ui import widgets as w

T, L = w.translator(), w.lang()
D = ls.SPECULATIVE
st.title(T("spec.title"))
st.markdown(T("spec.lead"))
w.glossary("TPOT", "KV", "GPU")

c1, c2, c3 = st.columns(3)
with c1:
    method = w.select(
        "method",
        T("spec.method"),
        list(speculation.METHODS),
        D["method"],
        help=T("spec.method_help"),
        shown=w.option_label("spec_method"),
    )
with c2:
    k = w.steps("k", T("spec.k"), list(range(1, 8)), D["k"])
with c3:
    accept = w.select(
        "accept",
        T("spec.accept"),
        list(ls.SPEC_ACCEPT),
        D["accept"],
        help=T("spec.accept_help"),
        shown=w.option_label("spec_accept"),
    )
c4, c5, c6 = st.columns(3)
with c4:
    gpu = w.select("gpu", T("common.gpu"), list(GPUS), D["gpu"])
with c5:
    model = w.select("model", T("common.model"), list(MODELS), D["model"])
alpha = D["alpha"]
if accept == "geometric":
    with c6:
        alpha = w.slider("alpha", T("spec.alpha"), 0.05, 0.95, D["alpha"], step=0.05)

choice = (method, k, accept, alpha, gpu, model)
try:  # the same runs as its effect contract (ui/effects.py)
    timeline = ls.spec_timeline_specs(*choice)
    sweep = ls.spec_sweep_specs(*choice)
    timeline_runs = [w.simulate_cached(wl, cfg) for _, wl, cfg in timeline]
except ValueError as err:  # a model that does not fit, a refused run: say what to change
    w.config_error(err)
    st.stop()

# ---- the timeline: a few requests, speculation off and on -------------------------------------
st.subheader(T("spec.timeline_title"))
shown_method = w.option_label("spec_method")(method)
labels = {"off": T("spec.run_off"), "on": T("spec.run_on", method=shown_method, k=k)}
specs = [(labels[run_id], wl, cfg) for run_id, wl, cfg in timeline]
w.look("look.spec", k=k)
w.timeline_of(specs, key="spec_tl")
st.caption(T("spec.legend"))
w.runs_table(
    [(label, run) for (label, _, _), run in zip(specs, timeline_runs, strict=True)],
    ("ttft_p50_s", "tpot_p50_s", "output_tokens_per_s"),
)

# ---- the batch sweep: TPOT on / off against the batch size ------------------------------------
st.subheader(T("spec.sweep_title"))
st.markdown(
    T("spec.sweep_text", prompt=ls.SPEC_PROMPT, output=ls.SPEC_OUTPUT, gpu=gpu, model=model)
)
if not sweep:
    st.error(T("spec.no_batch", gpu=gpu, model=model))
    st.stop()
try:
    sweep_runs = [w.simulate_cached(wl, cfg) for _, _, wl, cfg in sweep]
except ValueError as err:
    w.config_error(err)
    st.stop()
table = pd.DataFrame(ls.spec_table(sweep, sweep_runs))
chosen_label = (
    T("spec.curve.alpha", alpha=alpha)
    if accept == "geometric"
    else w.option_label("spec_accept")(accept)
)
curve_labels = {
    "off": T("spec.curve.off"),
    "high": T("spec.curve.high", alpha=ls.SPEC_HIGH),
    "chosen": chosen_label,
    "low": T("spec.curve.low", alpha=ls.SPEC_LOW),
}
w.cached_chart(charts.spec_ratio_chart, table, curve_labels, lang=L, highlight="chosen")

first = table[(table.curve == "chosen") & (table.batch == table.batch.min())].iloc[0]
lines = [
    T(
        "spec.b1",
        off=first.tpot_off_ms,
        on=first.tpot_on_ms,
        ratio=first.ratio,
        tpv=first.tokens_per_verify,
        acc=first.acceptance_rate,
    )
]
lines += ls.crossover_lines(table, curve_labels, T)
st.markdown("\n".join(f"- {line}" for line in lines))
left_out = [b for b in ls.SPEC_BATCHES if b not in set(table.batch)]
if left_out:
    st.caption(T("spec.kv_cut", batches=", ".join(map(str, left_out)), gpu=gpu, model=model))
with st.expander(T("spec.numbers")):
    w.cached_chart(charts.spec_tpot_chart, table, curve_labels, lang=L, highlight="chosen")
    numbers = table.assign(curve=table.curve.map(curve_labels))
    w.number_table(numbers.rename(columns=lambda c: T(f"spec.col.{c}")), digits=2, hide_index=True)

st.subheader(T("spec.why_title"))
st.markdown(T("spec.why_text"))
with w.more("spec.simplify_title"):
    st.markdown(T("spec.simplify"))

# ---- the live model, where a measurement was recorded -----------------------------------------
st.subheader(T("spec.live_title"))
st.markdown(T("spec.live_text"))
live_docs = {}  # chart curve id -> the measurement (bench/bench_live_spec.py --lesson)
for cid, path in spec_live.LIVE_CURVES.items():
    try:
        if (doc := spec_live.load_live(path)) is not None:
            live_docs[cid] = doc
    except ValueError as err:
        where = f"assets/speculation/{path.name}"
        st.warning(T("spec.live_bad", path=where, error=w.as_code(str(err))))
if not live_docs:
    st.caption(T("spec.live_missing"))
else:
    live_table = pd.concat(
        [spec_live.live_table(doc, cid) for cid, doc in live_docs.items()], ignore_index=True
    )
    live_labels = spec_live.live_labels(live_docs, T)
    w.cached_chart(
        charts.spec_ratio_chart,
        live_table,
        live_labels,
        lang=L,
        title_key="spec.live_chart_title",
        axis_key="spec.live_axis",
        region_x=0.01,
        regions_apart=True,  # the measured curves run close to 1 at every batch
    )
    st.markdown("\n".join(f"- {line}" for line in ls.crossover_lines(live_table, live_labels, T)))
    st.markdown(T("spec.live_v2"))
    with st.expander(T("spec.live_numbers")):
        numbers = spec_live.numbers_table(live_table)
        numbers = numbers.assign(curve=numbers.curve.map(live_labels))
        numbers = numbers.rename(columns=lambda c: T(f"spec.col.live_{c}"))
        w.number_table(numbers, digits=2, hide_index=True)
    first = next(iter(live_docs.values()))
    st.caption(
        T(
            "spec.live_caption",
            model=w.escape_markdown(first["model"]),
            device=w.escape_markdown(first["device"]),
            k=first["k"],
            runner=w.escape_markdown(str(first.get("model_runner", "v2"))),
            commands=", ".join(w.as_code(doc["command"]) for doc in live_docs.values()),
        )
    )

w.engine_note("vllm", caveat_key="spec.caveat")
w.show_code(speculation.settle_verify)
