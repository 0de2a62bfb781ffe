"""The Live page's bounds (issue 9): one run at a time, a waiting count that cannot leak,
topology knobs refused, steps and KV rows capped before the model is taken for everyone."""

import threading
import time

import pytest
from streamlit.testing.v1 import AppTest

from ui.gate import Gate
from ui.i18n import t


class Left(Exception):
    """What Streamlit raises in a script whose visitor left (StopException)."""


def test_a_visitor_who_leaves_while_queued_gives_the_place_back():
    gate, holding, release = Gate(), threading.Event(), threading.Event()

    def holder():
        with gate.turn(lambda ahead: None):
            holding.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    holding.wait(5)
    seen = []

    def leave(ahead):
        seen.append(ahead)
        raise Left

    with pytest.raises(Left), gate.turn(leave, poll_s=0.01):
        pass
    assert seen == [0] and gate.waiting == 0  # no phantom waiter left behind
    release.set()
    thread.join(5)
    with gate.turn(lambda ahead: None):  # and the lock was released
        assert gate.waiting == 0


def test_the_gate_lets_one_run_at_a_time_and_releases_on_errors():
    gate, inside, most = Gate(), [0], [0]

    def run():
        with gate.turn(lambda ahead: None, poll_s=0.005):
            inside[0] += 1
            most[0] = max(most[0], inside[0])
            time.sleep(0.01)
            inside[0] -= 1

    threads = [threading.Thread(target=run) for _ in range(5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(5)
    assert most[0] == 1 and gate.waiting == 0
    with pytest.raises(RuntimeError), gate.turn(lambda ahead: None):
        raise RuntimeError("the run failed")
    assert gate.lock.acquire(blocking=False)  # released


def open_live(params: dict) -> AppTest:
    pytest.importorskip("torch")
    at = AppTest.from_file("../app.py", default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()
    at.switch_page("app_pages/live.py").run()
    return at


@pytest.mark.parametrize(
    ("topo", "knobs"),
    [
        ("colocated", "topology=router, num_instances=8"),
        ("disaggregated", "num_decode=4"),
        ("colocated", "topology=disaggregated"),
    ],
)
def test_live_knobs_cannot_change_the_topology(topo, knobs):
    at = open_live({"model": "smollm2-135m-shape", "topo": topo, "knobs": knobs})
    assert not at.exception, at.exception
    assert len(at.error) == 1 and t("live.one_instance", "en") in at.error[0].value
    assert not at.button  # refused before the Run button: nothing can take the model


def test_a_tiny_token_budget_is_refused_before_taking_the_model():
    at = open_live(
        {"model": "smollm2-135m-shape", "wl": "blocking", "knobs": "max_num_batched_tokens=1"}
    )
    assert not at.exception, at.exception
    assert [e.value for e in at.error] == [
        t("limits.live_steps", "en", limit="400", env="PDLAB_LIVE_STEPS")
    ]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_without_torch_the_live_page_replays_recorded_runs_labelled_as_such(monkeypatch, lang):
    import importlib.util

    from live.engine.recording import available, load

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a)
    )
    at = AppTest.from_file("../app.py", default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    at.switch_page("app_pages/live.py").run()
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    assert not at.button  # nothing to run here
    names = [p.stem for p in available()]
    assert len(names) >= 4 and at.selectbox(key="rec").options == names
    rec = load(available()[0])
    banner = at.warning[0].value
    assert banner.startswith(
        t(
            "live.recorded_banner",
            lang,
            date="",
            device="",
            model="",
            torch="",
            commit="",
            workload="",
            topology="",
            wall=0.0,
        )[:12]
    )
    for fact in (rec.date, rec.model, rec.versions["torch"], rec.machine["cpu"], rec.device):
        assert str(fact) in banner  # machine, model, versions and date, as the issue asks
    chart = __import__("json").loads(at.get("plotly_chart")[0].proto.spec)
    titles = __import__("json").dumps(chart["layout"], ensure_ascii=False)
    assert t("live.measured_recorded", lang) in titles and t("live.simulated", lang) in titles


def test_recordings_round_trip_and_say_where_they_come_from():
    from live.engine.recording import available, load

    for path in available():
        rec = load(path)
        assert rec.date and rec.machine["cpu"] and rec.versions["torch"] and rec.model
        device = rec.machine["device"]  # issue 27: the device is named (GPU: model, memory, ...)
        assert device["kind"] in ("cpu", "cuda") and device["torch"] and device["cpu"]
        if device["kind"] == "cuda":
            assert all(device.get(k) for k in ("gpu", "gpu_memory_gb", "driver", "cuda"))
        assert len(rec.runs) == 2 and path.stat().st_size < 300_000  # small files
        for r in rec.runs:
            assert len(r.live.requests) == len(r.predicted.requests) > 0
            assert {"prefill", "decode"} <= set(r.live.segments["kind"])
            assert set(r.errors.columns) >= {"ttft_err_pct", "tpot_err_pct"}


def test_the_live_budget_counts_kv_rows_on_every_worker_and_the_engine_steps():
    from live.engine.budget import check_live_budget
    from sim.config import SimConfig, with_overrides
    from sim.core.request import RequestSpec
    from sim.runs.budget import Budget, BudgetExceeded

    limits = Budget(live_kv_tokens=1_000, live_steps=50)
    four = [RequestSpec(i, 0.0, 100, 20) for i in range(4)]  # 4 slots x 120 rows = 480
    check_live_budget([SimConfig(policy="vllm")], four, limits)  # within both
    split = with_overrides(SimConfig(policy="vllm"), {"topology": "disaggregated"})
    with pytest.raises(BudgetExceeded) as err:  # 480 rows on each of 2 workers: 960, then 1,200
        check_live_budget([split], [*four, RequestSpec(4, 0.0, 100, 20)], limits)
    assert err.value.limit == "live_kv_tokens"
    one_token_steps = with_overrides(SimConfig(policy="vllm"), {"max_num_batched_tokens": 1})
    with pytest.raises(BudgetExceeded) as err:  # 400 prompt tokens, one a step: > 50 steps
        check_live_budget([one_token_steps], four, limits)
    assert err.value.limit == "live_steps"
