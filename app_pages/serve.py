"""Real servers: watch a running `live serve` schedule real requests, chat with it, replay a load.

(a) The timeline of a `python -m live serve` (its /pdlab/trace), refreshed every second, so a
class can send requests from their laptops and watch them queue, prefill, decode and stall.
(b) A small workload replayed against any OpenAI-compatible server (live/replay/replayer.py),
measured beside the simulator's prediction. URLs are fetched only as the operator allows
(PDLAB_ALLOW_ENDPOINTS, live/serve/client.py, and ui/endpoints.py's stricter checks).

Bounded for a hosted app: a replay takes at most `serve_requests` requests whose arrivals span
at most `serve_seconds` (sim/runs/budget.py; PDLAB_SERVE_REQUESTS, PDLAB_SERVE_SECONDS), an upload
is read only up to one row past that, and the replay runs where leaving the page stops it
(ui/replay_runner.py). Whatever the visitor, the server or a file wrote is shown as text.
"""

import importlib.util

import streamlit as st

from live.serve.client import ALLOW_ENV, EndpointError, allowed_mode
from sim.config import TOPOLOGY_NAMES, SimConfig, with_overrides
from sim.cost.hardware import GPUS, MODELS
from sim.policies import POLICIES
from sim.runs.budget import BudgetExceeded
from ui import widgets as w
from ui.endpoints import checked_endpoint, probe
from ui.replay_runner import GRACE_S, replay_workload, run_stoppable
from ui.serve_snippets import SERVE_CMD, python_client, shell_howto

T = w.translator()
REFRESH_S = 1.0
LIMITS = w.limits()  # serve_requests, serve_seconds: the page's replays stay small (the CLI
#                      takes any size)
DEFAULT_URL = "http://127.0.0.1:8000"

st.title(T("serve.title"))
st.markdown(T("serve.lead"))

mode = allowed_mode()
if mode == "off":
    st.info(T("serve.off", env=ALLOW_ENV))
    st.code(f"{ALLOW_ENV}=loopback streamlit run app.py\n{SERVE_CMD}", "bash", wrap_lines=True)
    st.stop()

url = st.text_input(
    T("serve.url"), DEFAULT_URL, key="url", bind="query-params", help=T(f"serve.url_help_{mode}")
)
try:
    endpoint = checked_endpoint(url, mode)
except EndpointError as err:
    w.say("error", "serve.bad_url", message=str(err))
    st.stop()

# Is anything listening there? Without a server the timeline, the chat and the replay cannot
# work: say what the page needs, in the visitor's language, and leave those out (issue 26).
down = probe(endpoint)
if down:
    st.warning(T("errors.serve_down", url=w.as_code(endpoint.url), why=T(f"errors.serve_{down}")))
    st.code(SERVE_CMD, language="bash", wrap_lines=True)

    @st.fragment(run_every=2.0)
    def wait_for_server() -> None:  # the page comes back whole once something answers
        if probe(endpoint) is None:
            st.rerun(scope="app")

    wait_for_server()

watch_tab, replay_tab = st.tabs([T("serve.tab_watch"), T("serve.tab_replay")])

# ---- (a) watch a live serve ------------------------------------------------------------------

with watch_tab:
    if not down:  # (no timeline to size without a server)
        last = w.slider("last", T("serve.last"), 4, 60, 20, help=T("serve.last_help"))
    with st.expander(T("serve.howto")):
        st.markdown(T("serve.howto_text"))
        shell = shell_howto(endpoint.url, T("serve.howto_comment"))
        st.code(shell, language="bash", wrap_lines=True)  # (a phone shows it whole, no scroll)
        st.code(python_client(endpoint.url), language="python", wrap_lines=True)

    @st.fragment(run_every=REFRESH_S)
    def watch() -> None:
        from live.serve.client import fetch_trace
        from ui.serve_figures import live_timeline

        try:
            run = fetch_trace(endpoint, last)
        except EndpointError as err:
            w.say("warning", "serve.no_server", url=endpoint.url, message=str(err))
            st.code(SERVE_CMD, language="bash", wrap_lines=True)
            return
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
            # Any server can answer (PDLAB_ALLOW_ENDPOINTS=any): JSON nested too deep, columns
            # of the wrong type... are its fault, said in one line, not the page's error.
            w.say("warning", "serve.no_server", url=endpoint.url, message=type(err).__name__)
            return
        meta, load = run.meta, run.meta.get("load", {})
        esc = w.as_code  # the server's own words (any server, where the operator says any)
        try:
            up = float(meta.get("now_s", 0.0))
        except (TypeError, ValueError):
            up = 0.0
        st.caption(
            T(
                "serve.server_info",
                model=esc(meta.get("model", "?")),
                device=esc(meta.get("gpu", "?")),
                policy=esc(meta.get("policy", "?")),
                topology=esc(meta.get("topology", "?")),
                up=up,
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

    if not down:
        watch()
        st.markdown(f"**{T('serve.chat')}**")
        max_tokens = w.slider("chat_tokens", T("serve.chat_tokens"), 8, 256, 64)
    question = (
        None if down else st.chat_input(T("serve.chat_placeholder"), key="chat", max_chars=2000)
    )  # (a chat message, not a book)
    if question:
        from live.serve.client import stream_chat

        with st.chat_message("user"):  # typed text and model output: never read as markdown
            st.markdown(w.escape_markdown(question))
        with st.chat_message("assistant"):
            try:
                st.write_stream(
                    w.escape_markdown(part) for part in stream_chat(endpoint, question, max_tokens)
                )
            except EndpointError as err:
                w.say("error", "serve.chat_error", message=str(err))
            except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
                w.say("error", "serve.chat_error", message=type(err).__name__)  # a hostile
                #                                  server's stream: its fault, one line

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
        gpu = w.select(
            "gpu",
            T("common.gpu"),
            [*GPUS, "custom"],
            defaults.hardware.gpu,
            shown=w.option_label("gpu"),
        )
    with c3:
        sim_model = w.select("model", T("common.model"), list(MODELS), defaults.hardware.model)
    with c4:
        policy = w.select(
            "policy",
            T("play.policy"),
            list(POLICIES),
            defaults.policy,
            shown=w.option_label("policy"),
        )
    c5, c6 = st.columns([1, 3])
    with c5:
        topology = w.select(
            "topo", T("play.topology"), list(TOPOLOGY_NAMES), "colocated", shown=w.option_label()
        )
    with c6:
        knobs_text = st.text_input(
            T("play.knobs"), "", key="knobs", bind="query-params", help=T("play.knobs_help")
        )
    upload = None
    if workload == "upload":
        upload = st.file_uploader(T("play.upload"), type=["csv"], help=T("play.upload_help"))
    else:
        st.caption(T(f"live.about_{workload}"))
    requests = None  # read as soon as it is chosen, within the limits (ui/replay_runner.py)
    if workload == "upload" and upload is None:
        st.caption(T("serve.no_file"))
    else:
        try:
            requests = replay_workload(workload, upload, LIMITS)
        except BudgetExceeded as err:
            w.config_error(err)
        except ValueError as err:  # a WorkloadError: the line and what is wrong with it
            w.say("error", "play.bad_csv", message=str(err))

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

    if st.button(T("serve.run"), type="primary", disabled=bool(down) or requests is None):
        if importlib.util.find_spec("openai") is None:
            st.warning(T("serve.needs_live"))
            st.code("pip install -r requirements-live.txt", "bash", wrap_lines=True)
            st.stop()
        import asyncio

        from live.replay.replayer import ReplayError, ReplayOptions, replay_async
        from live.replay.report import predict, summary_of

        options = ReplayOptions(
            endpoint.root,
            read_timeout_s=30.0,
            connect_timeout_s=3.0,
            ttft_slo_s=config.slo.ttft_slo_s,
            tpot_slo_s=config.slo.tpot_slo_s,
        )
        limit_s = LIMITS.serve_seconds + GRACE_S
        st.button(T("errors.serve_stop"))  # any click reruns the page, which stops the replay
        bar = st.progress(0.0, text=T("serve.replaying", n=len(requests)))

        def tick(elapsed: float) -> None:  # an st call: where Streamlit stops a visitor's run
            bar.progress(
                min(1.0, elapsed / limit_s),
                text=T("errors.serve_progress", s=elapsed, limit=limit_s),
            )

        try:
            result = run_stoppable(lambda: replay_async(requests, options), limit_s, tick)
        except (ReplayError, ValueError, OSError) as err:
            w.say("error", "serve.replay_failed", message=str(err).splitlines()[0])
            st.stop()
        except asyncio.CancelledError:  # cut before the first request was sent
            w.say("warning", "errors.serve_cut", limit=limit_s)
            st.stop()
        bar.empty()
        if result.interrupted:
            w.say("warning", "errors.serve_cut", limit=limit_s)
        st.session_state["serve_replay"] = {
            "result": result,
            "summary": summary_of(result),
            "predicted": predict(requests, config),
            "label": f"{config.policy} · {config.hardware.gpu}",
        }

    done = st.session_state.get("serve_replay")
    if done is not None:
        from live.replay.report import errors

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
        for m in result.failed[:3]:  # the server's words: as text
            w.say("warning", "serve.request_failed", id=m.spec.request_id, message=m.error)
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
