"""Lesson 8: the playground. Any workload, up to four configurations side by side, goodput."""

import json

import streamlit as st

from sim.config import TOPOLOGY_NAMES, SimConfig, with_overrides
from sim.policies import POLICIES, make_policy
from sim.runs.export import chrome_trace, to_json_dict
from sim.runs.metrics import summarize
from sim.runs.slo import SLO_PRESETS
from sim.workloads.workload import PRESETS, WorkloadConfig, WorkloadError, head, load_csv
from ui import charts
from ui import widgets as w
from ui.labels import sim_label
from ui.model_upload import uploaded_model

T, L = w.translator(), w.lang()
# Requests per run: 1,000 keeps a hosted deployment responsive and the timeline smooth; a local
# install may raise it (PDLAB_MAX_REQUESTS, README). Every run also keeps to w.limits()'s steps.
MAX_REQUESTS = w.limits().max_requests
st.title(T("play.title"))
st.markdown(T("play.lead"))
w.glossary("TTFT", "TPOT", "SLO")

# ---- workload ----
st.subheader(T("play.workload"))
source = w.select(
    "src",
    T("play.source"),
    ["generate", "upload"],
    "generate",
    help=T("play.source_help"),
    shown=w.option_label("source"),
)
workload = None
if source == "generate":
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        arrival = w.select(
            "arr",
            T("play.arrival"),
            ["poisson", "gamma", "burst"],
            "poisson",
            shown=w.option_label("arrival"),
        )
        cv = w.slider("cv", T("play.cv"), 0.5, 4.0, 2.0, step=0.5, disabled=arrival != "gamma")
    with c2:
        rate = w.slider("rate", T("common.rate"), 0.5, 40.0, 8.0, step=0.5)
        n = w.slider("n", T("common.num_requests"), 1, MAX_REQUESTS, 100)
    with c3:
        prompt = w.select(
            "prompt", T("play.prompt"), list(PRESETS), "chat", shown=w.option_label("preset")
        )
        output = w.select(
            "output", T("play.output"), list(PRESETS), "chat", shown=w.option_label("preset")
        )
    with c4:
        seed = int(st.number_input(T("play.seed"), 0, 10_000, 0, key="seed", bind="query-params"))
    workload = WorkloadConfig(
        arrival=arrival,
        rate_per_s=rate,
        cv=cv,
        num_requests=n,
        prompt=prompt,
        output=output,
        seed=seed,
    )
else:
    upload = st.file_uploader(T("play.upload"), type=["csv"], help=T("play.upload_help"))
    if upload is None:
        st.info(T("play.upload_help"))
        st.stop()
    try:  # parsing stops after MAX_REQUESTS + 1 rows: a huge file costs no more than that
        requests = load_csv(upload, max_rows=MAX_REQUESTS + 1)
    except WorkloadError as err:
        w.say("error", "play.bad_csv", message=str(err))  # it quotes the file: as text
        st.stop()
    if len(requests) > MAX_REQUESTS:
        st.warning(T("play.truncated_rows", limit=MAX_REQUESTS))
        requests = head(requests, MAX_REQUESTS)
    workload = tuple(requests)

# ---- configurations ----
st.subheader(T("play.configs"))
count = w.select("k", T("play.count"), [1, 2, 3, 4], 2)
with st.expander(T("common.own_model")):
    own_model = uploaded_model(T("common.own_model_upload"), help=T("common.own_model_help"))
defaults = [
    ("vllm", "colocated"),
    ("prefill-first", "colocated"),
    ("vllm", "disaggregated"),
    ("sglang", "colocated"),
]
specs, columns = [], st.columns(count)
for i, col in enumerate(columns):
    with col:
        policy = w.select(
            f"p{i}",
            T("play.policy"),
            list(POLICIES),
            defaults[i][0],
            shown=w.option_label("policy"),
        )
        topology = w.select(
            f"t{i}",
            T("play.topology"),
            list(TOPOLOGY_NAMES),
            defaults[i][1],
            shown=w.option_label(),
        )
        knobs = st.text_input(
            T("play.knobs"),
            "",
            key=f"s{i}",
            bind="query-params",
            placeholder="max_num_batched_tokens=512, num_decode=2",
            help=T("play.knobs_help"),
        )
        try:
            knobs_dict = w.parse_knobs(knobs)
            if own_model:  # every configuration runs the uploaded model unless it sets model=
                knobs_dict.setdefault("model", own_model)
            config = with_overrides(SimConfig(policy=policy), {"topology": topology, **knobs_dict})
        except ValueError as err:
            w.config_error(err)
            continue
        w.engine_note(config.policy, caveat_key=w.topology_caveats(config.topology.topology))
        for note in make_policy(config.policy, config.knobs).notes():
            st.info(w.policy_note(note))
        name = w.option_label("policy")(policy)
        specs.append((f"{i + 1}: {name} · {sim_label(topology, L)}", workload, config, col))

# ---- SLO ----
c1, c2, c3 = st.columns(3)
with c1:
    preset = w.select(
        "slo",
        T("play.slo"),
        [*SLO_PRESETS, "custom"],
        "tng-interactive",
        shown=w.option_label("slo"),
    )
with c2:
    ttft = st.number_input(
        T("play.ttft_slo"),
        0.05,
        60.0,
        3.0,
        step=0.05,
        key="ttft",
        bind="query-params",
        disabled=preset != "custom",
    )
with c3:
    tpot = st.number_input(
        T("play.tpot_slo"),
        0.01,
        5.0,
        0.3,
        step=0.01,
        key="tpot",
        bind="query-params",
        disabled=preset != "custom",
    )
if preset != "custom":
    ttft, tpot = SLO_PRESETS[preset].ttft_s, SLO_PRESETS[preset].tpot_s
# Each configuration runs on its own: one the simulator or the budget refuses shows its st.error
# in its own column, and the others still run.
runs, good = [], []
for label, wl, cfg, col in specs:
    cfg = with_overrides(cfg, {"ttft_slo_s": ttft, "tpot_slo_s": tpot})
    run = w.run_or_error(wl, cfg, where=col)
    if run is not None:
        w.step_costs_note(cfg, run, where=col)  # step_costs=kernels: what priced the steps
        runs.append((label, run))
        good.append((label, wl, cfg))
specs = good
if not specs:
    st.stop()

# ---- results ----
st.subheader(T("play.results"))
w.look("look.playground")
w.timeline_of(specs)
st.caption(T("common.legend"))
w.runs_table(runs)

st.subheader(T("play.downloads"))
for (label, run), col in zip(runs, st.columns(len(runs)), strict=True):
    with col:
        st.markdown(f"**{label}**")
        name = label.split(":")[0]
        downloads = (  # built lazily, on click: a trace of 1,000 requests is megabytes
            ("play.dl_requests", lambda r=run: r.requests.to_csv(index=False), "requests", "csv"),
            ("play.dl_segments", lambda r=run: r.segments.to_csv(index=False), "segments", "csv"),
            (
                "play.dl_summary",
                lambda r=run: json.dumps(to_json_dict(r, summarize(r))),
                "summary",
                "json",
            ),
            ("play.dl_trace", lambda r=run: json.dumps(chrome_trace(r)), "trace", "json"),
        )
        for key, data, stem, ext in downloads:
            mime = "text/csv" if ext == "csv" else "application/json"
            st.download_button(
                T(key),
                data,
                f"{stem}_{name}.{ext}",
                mime,
                on_click="ignore",
                key=f"dl_{stem}_{name}",
            )

st.subheader(T("play.goodput"))
if w.toggle("sweep", T("play.run_sweep"), False):
    lo, hi = st.slider(
        T("play.rates"), 0.5, 60.0, (2.0, 20.0), step=0.5, key="rates", bind="query-params"
    )
    rates = tuple(round(lo + i * (hi - lo) / 9, 3) for i in range(10))
    bar = st.progress(0.0, text=T("disagg.sweeping"))
    sweeps = {}
    for k, (label, wl, cfg) in enumerate(specs):
        try:
            sweeps[label] = w.sweep_cached(wl, cfg, rates)
        except ValueError as err:  # over budget: say so for this one, keep the others
            w.config_error(err)
        bar.progress((k + 1) / len(specs), text=T("disagg.sweeping"))
    bar.empty()
    if not sweeps:
        st.stop()
    w.chart(charts.goodput_curves(sweeps, lang=L))
    w.goodput_table(sweeps)
