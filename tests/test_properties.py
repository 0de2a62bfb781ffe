"""Invariants that must hold for EVERY policy and topology, on random workloads and knobs.

- every request finishes exactly once, or is rejected with a reason;
- every prompt token is prefilled once or served by the prefix cache, and every output token
  after the first is decoded once (recomputation after a preemption is flagged and counted
  apart; vLLM recomputes prompt + output in one prefill, so it may also compute the newest token);
- a request's segments never overlap; a worker's steps never overlap;
- KV in use never exceeds the worker's capacity;
- the same inputs give the identical trace.
"""

import os

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec

EPS = 1e-9


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 20))
    rows = []
    for _ in range(n):
        prompt = draw(st.integers(1, 6000))
        group = draw(st.sampled_from(["", "", "a", "b"]))  # some share a prefix
        prefix = min(prompt, draw(st.sampled_from([16, 300, 2000]))) if group else 0
        rows.append(
            (
                draw(st.floats(0, 3)),
                prompt,
                draw(st.integers(1, 200)),
                draw(st.integers(0, 3)),
                group,
                prefix,
            )
        )
    rows.sort(key=lambda r: r[0])
    return [RequestSpec(i, *r) for i, r in enumerate(rows)]


@st.composite
def configs(draw):
    policy = draw(
        st.sampled_from(["static", "prefill-first", "vllm", "vllm-v0", "short-first", "sglang"])
    )
    knobs: dict = {}
    if policy == "static":
        knobs["batch_size"] = draw(st.integers(1, 12))
    elif policy == "sglang":
        knobs["chunked_prefill_size"] = draw(st.sampled_from([-1, 64, 1024, 8192]))
        knobs["max_running_requests"] = draw(st.integers(0, 48))
        knobs["enable_mixed_chunk"] = draw(st.booleans())
        knobs["enable_prefix_caching"] = draw(st.booleans())
        knobs["schedule_policy"] = draw(st.sampled_from(["fcfs", "lpm"]))
        knobs["overlap_schedule"] = draw(st.booleans())
    else:
        budget = draw(st.sampled_from([64, 256, 1024, 4096, 8192]))
        knobs["max_num_batched_tokens"] = 8192 if policy == "prefill-first" else budget
        knobs["max_num_seqs"] = min(knobs["max_num_batched_tokens"], draw(st.integers(1, 48)))
        if policy == "vllm-v0":
            partial = draw(st.integers(1, 4))
            knobs["max_num_partial_prefills"] = partial
            knobs["max_long_partial_prefills"] = draw(st.integers(1, partial))
            knobs["long_prefill_token_threshold"] = draw(st.sampled_from([0, 100, 2000]))
        elif policy != "prefill-first":  # vLLM V1 and short-first
            knobs["long_prefill_token_threshold"] = draw(st.sampled_from([0, 100, 2000]))
            knobs["enable_prefix_caching"] = draw(st.booleans())
            chunked = draw(st.booleans())
            knobs["enable_chunked_prefill"] = chunked
            if not chunked:
                knobs["max_num_batched_tokens"] = 8192
            knobs["async_scheduling"] = draw(st.booleans())
            if policy == "vllm":
                knobs["scheduling_policy"] = draw(st.sampled_from(["fcfs", "priority"]))
            else:
                knobs["aging_s"] = draw(st.sampled_from([0.0, 0.5]))
    topology = draw(st.sampled_from(["colocated", "router", "disaggregated"]))
    knobs["topology"] = topology
    if topology == "router":
        knobs["router"] = draw(
            st.sampled_from(["round-robin", "least-loaded", "length", "dynamo-kv", "llm-d"])
        )
        knobs["num_instances"] = draw(st.integers(1, 3))
        knobs["length_threshold"] = draw(st.sampled_from([500, 3000]))
    if topology == "disaggregated":
        knobs["num_prefill"] = draw(st.integers(1, 2))
        knobs["num_decode"] = draw(st.integers(1, 2))
        knobs["disagg_mode"] = draw(
            st.sampled_from(
                ["always", "conditional", "isl_bounding", "isl_or_load", "llm-d-prefix"]
            )
        )
        knobs["kv_bandwidth_gb_s"] = draw(st.sampled_from([3.1, 50.0]))
    # Small KV caches force preemption (and rejection of requests that can never fit).
    knobs["kv_capacity_tokens"] = draw(st.sampled_from([0, 3000, 8000, 20000]))
    if policy in ("vllm-v0", "prefill-first"):  # only vLLM V0 could swap
        knobs["preemption_mode"] = draw(st.sampled_from(["recompute", "swap"]))
        knobs["swap_space_gb"] = draw(st.sampled_from([0.0, 1.0]))
    knobs["disagg_protocol"] = draw(st.sampled_from(["vllm", "distserve"]))
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
            # Refused on arrival: no token. V0 may also drop a request that outgrew the cache
            # after a preemption (FINISHED_IGNORED): it keeps the tokens it had streamed.
            assert len(run.token_times[s.request_id]) < s.output_tokens
            continue
        times = run.token_times[s.request_id]
        assert len(times) == s.output_tokens  # finished exactly once, every token emitted
        assert np.all(np.diff(times) > 0)
        assert r.first_token_s == times[0] and r.finish_s == times[-1]
        assert r.first_token_s > s.arrival_s
        fresh = mine[(mine.kind == "prefill") & ~mine.recompute].tokens.sum()
        again = mine[(mine.kind == "prefill") & mine.recompute].tokens.sum()
        decoded = mine[mine.kind == "decode"].tokens.sum()
        cached = mine[mine.kind == "cached"].tokens.sum()
        assert 0 <= r.cached_tokens < s.prompt_tokens  # the last prompt token is always computed
        if r.preemptions == 0 and "kv_transfer" not in set(mine.kind):
            assert not mine.recompute.any()
            assert fresh + r.cached_tokens == s.prompt_tokens  # each prompt token once
            assert decoded == s.output_tokens - 1  # each later token decoded once
        else:  # recomputed work is flagged; nothing is computed for the first time twice
            assert fresh + r.cached_tokens <= s.prompt_tokens
            assert decoded <= s.output_tokens - 1
            assert fresh + again + decoded + cached >= s.prompt_tokens + s.output_tokens - 1
        if "kv_transfer" in set(mine.kind):
            assert mine[mine.kind == "kv_transfer"].tokens.sum() == s.prompt_tokens
        # A cached segment is drawn over the step of the chunk it came with (a prefill, or the
        # one-token decode of a resumed request the cache held all but that token of); the rest
        # of a request's segments never overlap.
        for c in mine[mine.kind == "cached"].itertuples():
            same = mine[
                mine.kind.isin(["prefill", "decode"])
                & (mine.start_s <= c.start_s + EPS)
                & (mine.end_s >= c.end_s - EPS)
            ]
            assert len(same) >= 1
        ordered = mine[mine.kind != "cached"].sort_values("start_s")
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


def test_property_tests_are_derandomized_unless_asked_to_explore():
    """A fresh clone's `scripts/test.sh` tests the same examples as CI (tests/conftest.py)."""
    explore = os.environ.get("PDLAB_HYPOTHESIS") == "explore"
    assert settings().derandomize is not explore
    assert settings().database is None or explore  # derandomized: no examples carried over
