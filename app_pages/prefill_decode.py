"""Lesson 2 (C1-C3): prefill is compute-bound, decode bandwidth-bound; throughput vs concurrency."""

import streamlit as st

from sim.cost.hardware import GPUS, MODELS, get_gpu, get_model, kv_capacity_tokens
from sim.cost.profiles import profile_origin
from sim.scenarios import get_scenario
from ui import charts, formulas
from ui import lesson_setups as ls
from ui import widgets as w
from ui.i18n import DEFAULT_LANG, catalog
from ui.labels import has_label, sim_label
from ui.model_upload import uploaded_model

T, L = w.translator(), w.lang()
st.title(T("pd.title"))
st.markdown(T("pd.lead"))
w.glossary("GPU", "TTFT", "TPOT", "KV", "TNG")

c1, c2, c3 = st.columns(3)
with c1:
    gpu_name = w.select("gpu", T("common.gpu"), list(GPUS), ls.PREFILL_DECODE["gpu"])
with c2:
    model_name = w.select("model", T("common.model"), list(MODELS), ls.PREFILL_DECODE["model"])
with c3:
    context = w.steps(
        "ctx",
        T("pd.context"),
        [256, 512, 1024, 2048, 4096, 8192, 16384, 32768],
        ls.PREFILL_DECODE["ctx"],
    )

with st.expander(T("common.own_model")):
    own = uploaded_model(T("common.own_model_upload"), help=T("common.own_model_help"))
model_name = own or model_name  # a path to the uploaded config.json: the simulator reads it

try:
    gpu, model = get_gpu(gpu_name), get_model(model_name)
    kv_capacity_tokens(gpu, model)  # does the model fit on one GPU at all?
except ValueError as err:
    w.config_error(err)
    st.stop()

st.subheader(T("pd.c1_title"))
st.markdown(T("pd.c1_text"))
left, right = st.columns(2)
w.cached_chart(charts.step_time_vs_prompt, gpu, model, lang=L, where=left)
w.cached_chart(charts.step_time_vs_batch, gpu, model, context, lang=L, where=right)
w.cached_chart(charts.roofline, gpu, model, lang=L, context_tokens=context)  # the slider's
st.markdown(T("pd.gemm_text"))
if charts.has_measured_gemms(gpu, model):  # aiconfigurator-core installed and covering them
    w.cached_chart(charts.gemm_efficiency, gpu, model, lang=L)
else:
    st.caption(T("pd.gemm_missing"))
with st.expander(T("pd.formula_title")):
    w.formula(formulas.STEP_TIME, "pd.formula_caption")
    w.formula(formulas.KNEE, "pd.knee_caption")

st.subheader(T("pd.c2_title"))
st.markdown(T("pd.c2_text"))
w.formula(formulas.TTFT_TPOT)

st.subheader(T("pd.c3_title"))
st.markdown(T("pd.c3_text"))
scenario = get_scenario("c3-concurrency")
overrides = (("gpu", gpu_name), ("model", model_name))
try:
    runs = {v.label: w.run_variant(scenario.name, v.label, overrides) for v in scenario.variants}
except ValueError as err:
    w.config_error(err)
    st.stop()
table = charts.concurrency_table(runs)
w.cached_chart(charts.throughput_vs_concurrency, table, lang=L)
w.engine_note(scenario.config.policy)

# The research-grade part (fitting, held-out errors, sources) waits in an expander (issue 26).
trust = st.expander(T("view.trust"), icon=":material/science:")
trust.markdown(T("pd.trust_text"))
profile, origin, detail = profile_origin(gpu_name)
if origin == "fitted" and has_label(f"profile_detail.{gpu_name}"):  # the runs it was fitted on,
    detail = sim_label(f"profile_detail.{gpu_name}", L)  # in the page's language (labels.json)
trust.caption(
    T(
        f"pd.trust_origin_{origin}",
        gpu=gpu_name,
        detail=detail,
        mfu=profile.mfu,
        attn=profile.mfu_attn,
        mbu=profile.mbu,
        overhead=profile.overhead_s * 1000,
    )
)
report = charts.load_report()
if report is None:
    trust.info(T("pd.trust_missing"))
else:
    if not any(r["gpu"] == gpu_name for r in report["summary"]):
        trust.caption(T("pd.trust_other", gpu=gpu_name))
    table = charts.fidelity_table(gpu_name, L)
    w.number_table(table, digits=0, hide_index=True, where=trust)
    # TTFT beside TPOT; a phone stacks the two columns.
    for metric, column in zip(("ttft", "tpot"), trust.columns(2), strict=True):
        w.cached_chart(charts.fidelity_scatter, gpu_name, lang=L, metric=metric, where=column)
    kernels = charts.load_report(charts.KERNELS_REPORT_PATH)  # the same runs, measured kernels
    if kernels and any(r["gpu"] == gpu_name for r in kernels["summary"]):
        trust.caption(T("pd.trust_kernels"))
        w.number_table(charts.fidelity_table(gpu_name, L, kernels), hide_index=True, where=trust)
        if base := charts.baseline_figures(gpu_name):  # NVIDIA's closed formula, same runs
            scope = gpu_name if base["gpu"] else T("pd.trust_baseline_all")
            text = T("pd.trust_baseline", scope=scope, **base)
            if base["memory"]:  # saturated runs: the formula has no queue, so no answer
                text += " " + T("pd.trust_baseline_memory", memory=base["memory"])
            trust.caption(text)
    if f"pd.trust_known.{gpu_name}" in catalog(DEFAULT_LANG):  # what it is known to miss
        trust.caption(T(f"pd.trust_known.{gpu_name}"))
    trust.caption(T("pd.trust_sources", command=report.get("command", "")))
