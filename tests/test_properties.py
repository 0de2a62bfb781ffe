"""Invariants that must hold for EVERY policy and topology, on random workloads and knobs.

- every request finishes exactly once, or is rejected with a reason;
- every prompt token is prefilled once and every output token after the first is decoded once
  (recomputation after a preemption is flagged and counted apart);
- a request's segments never overlap; a worker's steps never overlap;
- KV in use never exceeds the worker's capacity;
- the same inputs give the identical trace.
"""

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cluster import simulate
from sim.config import SimConfig, with_overrides
from sim.request import RequestSpec

EPS = 1e-9


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 20))
    rows = sorted(
        (draw(st.floats(0, 3)), draw(st.integers(1, 6000)), draw(st.integers(1, 200)),
         draw(st.integers(0, 3)))
        for _ in range(n)
    )  # fmt: skip
    return [RequestSpec(i, *r) for i, r in enumerate(rows)]


@st.composite
def configs(draw):
    policy = draw(st.sampled_from(["static", "prefill-first", "chunked", "short-first"]))
    knobs: dict = {}
    if policy == "static":
        knobs["batch_size"] = draw(st.integers(1, 12))
    else:
        knobs["max_num_seqs"] = draw(st.integers(1, 48))
        knobs["max_num_batched_tokens"] = draw(st.sampled_from([64, 256, 1024, 4096, 8192]))
        if policy == "prefill-first":
            knobs["max_num_batched_tokens"] = 8192
        else:
            partial = draw(st.integers(0, 4))
            knobs["max_num_partial_prefills"] = partial
            knobs["max_long_partial_prefills"] = draw(st.integers(1, max(1, partial)))
            knobs["long_prefill_token_threshold"] = draw(st.sampled_from([0, 100, 2000]))
            knobs["scheduling_policy"] = draw(st.sampled_from(["fcfs", "priority"]))
        if policy == "short-first":
            knobs["aging_s"] = draw(st.sampled_from([0.0, 0.5]))
    topology = draw(st.sampled_from(["colocated", "router", "disaggregated"]))
    knobs["topology"] = topology
    if topology == "router":
        knobs["router"] = draw(st.sampled_from(["round-robin", "least-loaded", "length"]))
        knobs["num_instances"] = draw(st.integers(1, 3))
        knobs["length_threshold"] = draw(st.sampled_from([500, 3000]))
    if topology == "disaggregated":
        knobs["num_prefill"] = draw(st.integers(1, 2))
        knobs["num_decode"] = draw(st.integers(1, 2))
        knobs["disagg_mode"] = draw(st.sampled_from(["always", "conditional"]))
        knobs["kv_bandwidth_gb_s"] = draw(st.sampled_from([3.1, 50.0]))
    # Small KV caches force preemption (and rejection of requests that can never fit).
    knobs["kv_capacity_tokens"] = draw(st.sampled_from([0, 3000, 8000, 20000]))
    knobs["preemption_mode"] = draw(st.sampled_from(["recompute", "swap"]))
    knobs["swap_space_gb"] = draw(st.sampled_from([0.0, 1.0]))
    return with_overrides(SimConfig(policy=policy), knobs)


def check_invariants(specs, run):
    q = run.requests.set_index("request_id")
    seg = run.segments
    assert sorted(q.index) == [s.request_id for s in specs]
    assert set(q.status) <= {"finished", "rejected"}
    for s in specs:
        r = q.loc[s.request_id]
        mine = seg[seg.request_id == s.request_id]
        if r.status == "rejected":
            assert r.reject_reason, "a rejected request must say why"
            assert len(run.token_times[s.request_id]) == 0
            continue
        times = run.token_times[s.request_id]
        assert len(times) == s.output_tokens  # finished exactly once, every token emitted
        assert np.all(np.diff(times) > 0)
        assert r.first_token_s == times[0] and r.finish_s == times[-1]
        assert r.first_token_s > s.arrival_s
        fresh = mine[(mine.kind == "prefill") & ~mine.recompute].tokens.sum()
        assert fresh == s.prompt_tokens  # each prompt token prefilled once (recompute apart)
        assert mine[mine.kind == "decode"].tokens.sum() == s.output_tokens - 1
        if r.preemptions == 0:
            assert not mine.recompute.any()
        if "kv_transfer" in set(mine.kind):
            assert mine[mine.kind == "kv_transfer"].tokens.sum() == s.prompt_tokens
        ordered = mine.sort_values("start_s")
        assert np.all(ordered.start_s.values[1:] >= ordered.end_s.values[:-1] - EPS)
        assert ordered.start_s.min() >= s.arrival_s - EPS
    for _, steps in run.steps.groupby("worker"):
        steps = steps.sort_values("start_s")
        assert np.all(steps.start_s.values[1:] >= steps.end_s.values[:-1] - EPS)
        assert np.all(steps.end_s.values > steps.start_s.values)
    assert (run.steps.kv_used_tokens <= run.steps.kv_capacity_tokens).all()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), configs())
def test_invariants_hold_for_every_policy_and_topology(specs, config):
    check_invariants(specs, simulate(specs, config))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), configs())
def test_same_inputs_give_the_identical_trace(specs, config):
    a, b = simulate(specs, config), simulate(specs, config)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.segments, b.segments)
    pd.testing.assert_frame_equal(a.steps, b.steps)
