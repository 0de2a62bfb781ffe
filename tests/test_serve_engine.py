"""The real-time engine behind `live serve`, in process (tiny random-weight model, no HTTP)."""

import queue
import time

import pytest

pytest.importorskip("torch")

from live.engine.run import LiveOptions  # noqa: E402
from live.serve.engine import ServeEngine  # noqa: E402
from live.serve.limits import LimitError, ServeLimits  # noqa: E402
from sim.config import SimConfig, with_overrides  # noqa: E402

TINY = LiveOptions(model="tiny")


SMALL = ServeLimits(max_num_requests=4, max_model_len=128)


def make(limits: ServeLimits = SMALL, **knobs) -> ServeEngine:
    return ServeEngine(with_overrides(SimConfig(), knobs), TINY, limits)


def collect(engine, handle_events: queue.Queue, timeout=10.0) -> list[tuple]:
    """Events of one request until it ends (its last token, or a rejection)."""
    out, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            event = handle_events.get(timeout=0.1)
        except queue.Empty:
            continue
        out.append(event)
        if event[0] == "rejected" or (event[0] == "token" and event[3] is not None):
            return out
    raise AssertionError(f"request did not finish: {out}")


def submit(engine, prompt, max_tokens, **kw):
    events: queue.Queue = queue.Queue()
    handle = engine.submit(prompt, max_tokens, events.put, **kw)
    return handle, events


def test_limits_refuse_with_400_and_429():
    engine = make(ServeLimits(max_num_requests=2, max_model_len=64, max_tokens_in_flight=80))
    with pytest.raises(LimitError) as err:
        engine.admission.check([1] * 60, 10)
    assert err.value.status == 400 and "maximum context length is 64" in err.value.message
    with pytest.raises(LimitError, match="outside the vocabulary"):
        engine.admission.check([1, 999], 4)
    with pytest.raises(LimitError, match="min_tokens"):
        engine.admission.check([1], 4, min_tokens=5)
    # Not started: submissions wait in the inbox, and the limits count them.
    submit(engine, [1] * 20, 20)
    with pytest.raises(LimitError) as err:  # 40 + 50 tokens > 80 in flight
        submit(engine, [1] * 30, 20)
    assert err.value.status == 429 and "in flight" in err.value.message
    submit(engine, [1] * 10, 10)
    with pytest.raises(LimitError) as err:  # a third request: at most 2 at once
        submit(engine, [1], 1)
    assert err.value.status == 429 and "at most 2" in err.value.message
    engine.start()  # they run and end, and the counters come back to zero
    try:
        deadline = time.monotonic() + 10
        while engine.admission.active and time.monotonic() < deadline:
            time.sleep(0.01)
        assert engine.admission.active == 0 and engine.admission.tokens == 0
        submit(engine, [1] * 30, 20)  # fits now
    finally:
        engine.stop()


def test_tokens_stream_in_order_and_the_trace_matches():
    engine = make()
    engine.start()
    try:
        handles = [submit(engine, [5, 6, 7] * (i + 1), 6 + i) for i in range(3)]
        results = [collect(engine, events) for _, events in handles]
        run = engine.snapshot()
    finally:
        engine.stop()
    for (handle, _), events in zip(handles, results, strict=True):
        assert events[0] == ("accepted",)
        tokens = [e for e in events if e[0] == "token"]
        assert len(tokens) == handle.spec.output_tokens
        times = [e[2] for e in tokens]
        assert times == sorted(times)
        assert tokens[-1][3] == "length"
    req = run.requests.set_index("request_id")
    assert (req["status"] == "finished").all()
    for handle, _events in handles:
        rid = handle.request_id
        assert list(run.token_times[rid]) == sorted(run.token_times[rid])
        assert req.loc[rid, "first_token_s"] > req.loc[rid, "arrival_s"]
    kinds = set(run.segments["kind"])
    assert {"prefill", "decode"} <= kinds
    assert len(run.steps) > 0 and (run.steps["end_s"] > run.steps["start_s"]).all()


def test_end_of_sequence_stops_after_min_tokens():
    engine = make()
    engine.start()
    try:
        _, probe = submit(engine, [10, 11, 12], 8)
        greedy = [e[1] for e in collect(engine, probe) if e[0] == "token"]
        eos = greedy[1]  # pretend the model's 2nd token is its end of sequence
        engine.eos_ids = frozenset({eos})
        _, stop_early = submit(engine, [10, 11, 12], 8)
        _, stop_later = submit(engine, [10, 11, 12], 8, min_tokens=5)
        _, ignored = submit(engine, [10, 11, 12], 8, ignore_eos=True)
        early, later, full = (collect(engine, q) for q in (stop_early, stop_later, ignored))
    finally:
        engine.stop()

    def tokens(events):
        return [e[1] for e in events if e[0] == "token"]

    first = greedy.index(eos)  # greedy is deterministic: the same tokens again
    assert tokens(early) == greedy[: first + 1] and early[-1][3] == "stop"
    after = [i for i, tok in enumerate(greedy) if tok == eos and i + 1 >= 5]
    expected = after[0] + 1 if after else 8
    assert tokens(later) == greedy[:expected]
    assert later[-1][3] == ("stop" if after else "length")
    assert tokens(full) == greedy and full[-1][3] == "length"


def test_an_aborted_request_leaves_and_frees_its_memory():
    engine = make()
    handle, events = submit(engine, [3] * 50, 60)
    engine.abort(handle)  # before the engine even saw it
    engine.start()
    try:
        deadline = time.monotonic() + 5
        while not handle.closed and time.monotonic() < deadline:
            time.sleep(0.01)
        assert handle.closed and handle.finish_reason == "abort"
        ok_handle, ok_events = submit(engine, [3] * 10, 5)
        collect(engine, ok_events)
        run = engine.snapshot()
        load = engine.load()
    finally:
        engine.stop()
    statuses = run.requests.set_index("request_id")["status"]
    assert statuses[handle.request_id] == "aborted"
    assert statuses[ok_handle.request_id] == "finished"
    assert load["kv_used_tokens"] == 0 and load["running"] == 0
    assert engine.admission.active == 0 and engine.admission.tokens == 0


def test_the_policy_can_refuse_and_the_client_is_told():
    engine = ServeEngine(
        with_overrides(SimConfig(policy="prefill-first"), {"max_num_batched_tokens": 16}),
        TINY,
        ServeLimits(max_num_requests=2, max_model_len=128),
    )
    engine.start()
    try:
        _, events = submit(engine, [1] * 40, 4)
        got = collect(engine, events)
    finally:
        engine.stop()
    assert got[0][0] == "rejected" and "max_num_batched_tokens" in got[0][1]


def test_disaggregated_topology_really_copies_kv_from_p_to_d():
    engine = make(topology="disaggregated")
    engine.start()
    try:
        pairs = [submit(engine, [7] * 30, 5) for _ in range(2)]
        for _, events in pairs:
            assert sum(e[0] == "token" for e in collect(engine, events)) == 5
        run = engine.snapshot()
    finally:
        engine.stop()
    assert set(run.requests["worker"]) == {"P0>D0"}
    transfers = run.segments[run.segments["kind"] == "kv_transfer"]
    assert len(transfers) == 2 and (transfers["tokens"] == 30).all()


def test_snapshot_shows_requests_in_flight_and_keeps_only_the_last():
    engine = make()  # never started: its request is taken in (drained) but never scheduled
    submit(engine, [1] * 8, 4)
    engine._drain()
    run = engine.snapshot()
    assert run.requests["status"].tolist() == ["waiting"]
    assert run.segments["kind"].tolist() == ["queued"]  # an open wait, drawn up to now
    assert run.meta["load"]["waiting"] == 1
    assert len(engine.snapshot(last=1).requests) == 1


def test_the_server_says_prefix_caching_is_off():
    """vllm turns prefix caching on, but each request's KV has a store slot of its own here, so
    the server's config (what /pdlab/trace and the Real servers page show) must not claim it."""
    assert SimConfig().knobs.enable_prefix_caching  # the simulator's default: on
    engine = make()
    assert not engine.config.knobs.enable_prefix_caching
    assert engine.snapshot().meta["config"]["enable_prefix_caching"] is False


@pytest.mark.parametrize(
    "knobs",
    [{"kv_capacity_tokens": 96}, {"topology": "router", "router": "round-robin"}],
    ids=["preemption", "router"],
)
def test_preemption_and_routing_still_give_every_request_its_tokens(knobs):
    """Short of KV memory the engine preempts (recompute); a router spreads requests."""
    engine = make(**knobs)
    engine.start()
    try:
        pairs = [submit(engine, [20 + i] * 24, 30) for i in range(3)]
        results = [collect(engine, events, timeout=30) for _, events in pairs]
        run = engine.snapshot()
    finally:
        engine.stop()
    for events in results:
        times = [e[2] for e in events if e[0] == "token"]
        assert len(times) == 30 and times == sorted(times)
    if "kv_capacity_tokens" in knobs:
        assert run.requests["preemptions"].sum() > 0
    else:
        assert set(run.requests["worker"]) == {"I0", "I1"}
