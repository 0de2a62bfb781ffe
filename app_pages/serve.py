"""Real servers: watch a running `live serve` schedule real requests, chat with it, replay a load.

(a) The timeline of a `python -m live serve` (its /pdlab/trace), refreshed every second, so a
class can send requests from their laptops and watch them queue, prefill, decode and stall.
(b) A small workload replayed against any OpenAI-compatible server (live/replay.py), measured
beside the simulator's prediction. URLs are fetched only as the operator allows
(PDLAB_ALLOW_ENDPOINTS, live/serve_client.py).
"""

import importlib.util

import streamlit as st

from live.serve_client import ALLOW_ENV, EndpointError, allowed_mode, check_endpoint
from sim.config import TOPOLOGY_NAMES, SimConfig, with_overrides
from sim.hardware import GPUS, MODELS
from sim.policies import POLICIES
from ui import widgets as w

T = w.translator()
REFRESH_S = 1.0
MAX_REPLAY_REQUESTS = 32  # the page's replays stay small; the CLI takes any size
SERVE_CMD = "python -m live serve --model tiny --port 8000"
DEFAULT_URL = "http://127.0.0.1:8000"

st.title(T("serve.title"))
st.markdown(T("serve.lead"))

mode = allowed_mode()
if mode == "off":
    st.info(T("serve.off", env=ALLOW_ENV))
    st.code(f"{ALLOW_ENV}=loopback streamlit run app.py\n{SERVE_CMD}")
    st.stop()

url = st.text_input(
    T("serve.url"), DEFAULT_URL, key="url", bind="query-params", help=T(f"serve.url_help_{mode}")
)
try:
    endpoint = check_endpoint(url, mode)
except EndpointError as err:
    st.error(T("serve.bad_url", message=str(err)))
    st.stop()

watch_tab, replay_tab = st.tabs([T("serve.tab_watch"), T("serve.tab_replay")])

# ---- (a) watch a live serve ------------------------------------------------------------------

with watch_tab:
    last = w.slider("last", T("serve.last"), 4, 60, 20, help=T("serve.last_help"))
    with st.expander(T("serve.howto")):
        st.markdown(T("serve.howto_text"))
        st.code(
            f"{SERVE_CMD}   # --host 0.0.0.0 for a classroom; --policy prefill-first, ...\n\n"
            f"curl -N {endpoint.url}/v1/completions -H 'Content-Type: application/json' \\\n"
            """  -d '{"prompt": "Once upon a time", "max_tokens": 64, "stream": true}'""",
            language="bash",
        )
        st.code(
            f'from openai import OpenAI\nclient = OpenAI(base_url="{endpoint.url}/v1", '
            'api_key="none")\nfor chunk in client.completions.create(model="tiny", '
            'prompt="Hello", max_tokens=32, stream=True):\n'
            '    print(chunk.choices[0].text, end="", flush=True)',
            language="python",
        )

    @st.fragment(run_every=REFRESH_S)
    def watch() -> None:
        from live.serve_client import fetch_trace
        from ui.serve_figures import live_timeline

        try:
            run = fetch_trace(endpoint, last)
        except EndpointError as err:
            st.warning(T("serve.no_server", url=endpoint.url, message=str(err)))
            st.code(SERVE_CMD, language="bash")
            return
        meta, load = run.meta, run.meta.get("load", {})
        st.caption(
            T(
                "serve.server_info",
                model=meta.get("model", "?"),
                device=str(meta.get("gpu", "?")),
                policy=meta.get("policy", "?"),
                topology=meta.get("topology", "?"),
                up=float(meta.get("now_s", 0.0)),
            )
        )
        if meta.get("policy") in POLICIES:  # the server's own scheduler, as on every lesson
            w.engine_note(meta["policy"], caveat_key=w.topology_caveats(meta.get("topology", "")))
        c1, c2, c3, c4 = st.columns(4)
        c1.metric(T("serve.running"), load.get("running", 0))
        c2.metric(T("serve.waiting"), load.get("waiting", 0))
        c3.metric(T("serve.kv"), T("serve.percent", pct=100 * float(load.get("kv_usage", 0.0))))
        c4.metric(
            T("serve.served"),
            int((run.requests["status"] == "finished").sum()) if len(run.requests) else 0,
        )
        if not len(run.requests):
            st.info(T("serve.no_requests"))
            return
        st.plotly_chart(
            live_timeline(run, w.lang()),
            width="stretch",
            theme=None,
            config={"displayModeBar": False},
            key="serve_timeline",
        )
        st.caption(T("serve.timeline_caption"))

    watch()

    st.markdown(f"**{T('serve.chat')}**")
    max_tokens = w.slider("chat_tokens", T("serve.chat_tokens"), 8, 256, 64)
    question = st.chat_input(T("serve.chat_placeholder"), key="chat")
    if question:
        from live.serve_client import stream_chat

        with st.chat_message("user"):  # typed text and model output: never read as markdown
            st.markdown(w.escape_markdown(question))
        with st.chat_message("assistant"):
            try:
                st.write_stream(
                    w.escape_markdown(part) for part in stream_chat(endpoint, question, max_tokens)
                )
            except EndpointError as err:
                st.error(T("serve.chat_error", message=str(err)))

# ---- (b) replay a workload, measured beside predicted -----------------------------------------

with replay_tab:
    st.markdown(T("serve.replay_lead"))
    defaults = SimConfig()
    c1, c2, c3, c4 = st.columns(4)
    with c1:
        workload = w.select(
            "wl",
            T("play.workload"),
            ["freeze", "three", "blocking", "chat", "upload"],
            "freeze",
            shown=w.option_label("workload"),
        )
    with c2:
        gpu = w.select("gpu", T("common.gpu"), [*GPUS, "custom"], defaults.hardware.gpu,
                       shown=w.option_label("gpu"))  # fmt: skip
    with c3:
        sim_model = w.select("model", T("common.model"), list(MODELS), defaults.hardware.model)
    with c4:
        policy = w.select("policy", T("play.policy"), list(POLICIES), defaults.policy)
    c5, c6 = st.columns([1, 3])
    with c5:
        topology = w.select("topo", T("play.topology"), list(TOPOLOGY_NAMES), "colocated",
                            shown=w.option_label())  # fmt: skip
    with c6:
        knobs_text = st.text_input(
            T("play.knobs"), "", key="knobs", bind="query-params", help=T("play.knobs_help")
        )
    upload = None
    if workload == "upload":
        upload = st.file_uploader(T("play.upload"), type=["csv"], help=T("play.upload_help"))
    else:
        st.caption(T(f"live.about_{workload}"))

    try:
        config = with_overrides(
            SimConfig(policy=policy),
            {"topology": topology, "gpu": gpu, "model": sim_model, **w.parse_knobs(knobs_text)},
        )
    except ValueError as err:
        w.config_error(err)
        st.stop()
    # The prediction's policy: which engine it mirrors, and what the checks cover.
    w.engine_note(config.policy, caveat_key=w.topology_caveats(config.topology.topology))

    if st.button(T("serve.run"), type="primary"):
        if importlib.util.find_spec("openai") is None:
            st.warning(T("serve.needs_live"))
            st.code("pip install -r requirements-live.txt")
            st.stop()
        from live.replay import ReplayError, ReplayOptions, replay
        from live.replay_report import predict, summary_of

        if workload == "upload":
            if upload is None:
                st.error(T("serve.no_file"))
                st.stop()
            from sim.workload import load_csv

            try:
                requests = load_csv(upload)
            except ValueError as err:
                st.error(T("play.bad_csv", message=str(err)))
                st.stop()
        else:
            from live.workloads import live_workload

            requests = live_workload(workload)
        if len(requests) > MAX_REPLAY_REQUESTS:
            st.error(T("serve.too_many", n=len(requests), limit=MAX_REPLAY_REQUESTS))
            st.stop()
        options = ReplayOptions(
            endpoint.root,
            read_timeout_s=30.0,
            connect_timeout_s=3.0,
            ttft_slo_s=config.slo.ttft_slo_s,
            tpot_slo_s=config.slo.tpot_slo_s,
        )
        with st.spinner(T("serve.replaying", n=len(requests))):
            try:
                result = replay(requests, options)
            except (ReplayError, ValueError, OSError) as err:
                st.error(T("serve.replay_failed", message=str(err).splitlines()[0]))
                st.stop()
        st.session_state["serve_replay"] = {
            "result": result,
            "summary": summary_of(result),
            "predicted": predict(requests, config),
            "label": f"{config.policy} · {config.hardware.gpu}",
        }

    done = st.session_state.get("serve_replay")
    if done is not None:
        from live.replay_report import errors

        result, summary, predicted = done["result"], done["summary"], done["predicted"]
        st.success(
            T(
                "serve.replay_done",
                finished=summary["finished"],
                n=summary["num_requests"],
                exact=summary["exact_output"],
                failed=summary["failed"] + summary["rejected"],
            )
        )
        for m in result.failed[:3]:
            st.warning(T("serve.request_failed", id=m.spec.request_id, message=m.error))
        w.timeline_runs(
            [
                (T("serve.measured", url=endpoint.host), result.run),
                (T("serve.predicted", label=done["label"]), predicted),
            ],
            key="serve_replay_timeline",
        )
        st.caption(T("serve.measured_note", factor=result.run.meta.get("stall_factor", 3.0)))
        w.runs_table(
            [
                (T("serve.measured", url=endpoint.host), result.run),
                (T("serve.predicted", label=done["label"]), predicted),
            ]
        )
        st.caption(T("serve.errors_caption"))
        w.number_table(errors(result.run, predicted))
