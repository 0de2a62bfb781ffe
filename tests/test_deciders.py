"""Conditional-disaggregation deciders named by system (sim/cluster/deciders.py).

Dynamo: every vector of lib/kv-router/src/conditional_disagg.rs's own `mod tests` (@088ca50b)
that exercises the three production policies, with the test's name. llm-d: hand traces of
prefix_based_pd_decider.go's `decide` (@06c08c08), citing its lines.
"""

import pytest

from sim.cluster.deciders import (
    DECIDERS,
    DisaggInput,
    decide,
    decode_gate_allows_bypass,
    dynamo_disaggregate,
    isl_bounding_bypass,
    isl_or_load_bypass,
    llmd_prefix_disaggregate,
    prefill_load_bypass,
)


def inp(prompt, overlap, bs, busy=None):
    return DisaggInput(prompt, bs, overlap, prefill_busy=busy)


# (test name in conditional_disagg.rs, enabled, eff_isl_threshold, ratio, input, bypass)
ISL_VECTORS = [
    ("disabled_never_bypasses", False, 2048, 0.7, inp(100, 0, 64), False),
    ("small_and_mostly_cached_bypasses", True, 2048, 0.7, inp(1000, 14, 64), True),
    (
        "large_eff_isl_does_not_bypass_even_if_ratio_low",
        True,
        2048,
        0.99,
        inp(100_000, 1000, 64),
        False,
    ),
    (
        "small_eff_isl_but_ratio_at_or_above_threshold_does_not_bypass",
        True,
        2048,
        0.7,
        inp(200, 0, 64),
        False,
    ),
    (
        "boundary_eff_isl_equals_threshold_does_not_bypass",
        True,
        2048,
        0.99,
        inp(2048, 0, 64),
        False,
    ),
    ("zero_prompt_tokens_does_not_panic", True, 2048, 0.7, inp(0, 0, 64), True),
    ("overlap_exceeding_prompt_clamps_to_zero_eff_isl", True, 2048, 0.7, inp(500, 10, 64), True),
]


@pytest.mark.parametrize(
    "name,enabled,thr,ratio,i,want", ISL_VECTORS, ids=[v[0] for v in ISL_VECTORS]
)
def test_isl_bounding_vectors(name, enabled, thr, ratio, i, want):
    assert isl_bounding_bypass(i, enabled, thr, ratio) is want


LOAD_VECTORS = [
    ("prefill_load_disabled_never_bypasses", False, inp(1000, 0, 64, True), False),
    ("prefill_load_signal_none_does_not_bypass", True, inp(1000, 0, 64, None), False),
    ("prefill_load_worker_calm_does_not_bypass", True, inp(1000, 0, 64, False), False),
    ("prefill_load_worker_busy_bypasses", True, inp(1000, 0, 64, True), True),
    ("prefill_load_independent_of_isl_fields (busy)", True, inp(100_000, 0, 64, True), True),
    ("prefill_load_independent_of_isl_fields (calm)", True, inp(100_000, 0, 64, False), False),
]


@pytest.mark.parametrize("name,enabled,i,want", LOAD_VECTORS, ids=[v[0] for v in LOAD_VECTORS])
def test_prefill_load_vectors(name, enabled, i, want):
    assert prefill_load_bypass(i, enabled) is want


def small(busy):  # 1000 prompt, 14 blocks * 64 cached: eff_isl 104, ratio 0.104
    return inp(1000, 14, 64, busy)


def large(busy):  # 100k prompt, no overlap
    return inp(100_000, 0, 64, busy)


OR_VECTORS = [
    ("isl_or_load_small_and_calm_bypasses_via_isl", True, small(False), True),
    ("isl_or_load_small_and_busy_bypasses", True, small(True), True),
    ("isl_or_load_large_and_calm_does_not_bypass", True, large(False), False),
    ("isl_or_load_large_and_busy_bypasses_via_load", True, large(True), True),
    ("isl_or_load_disabled_never_bypasses (small)", False, small(True), False),
    ("isl_or_load_disabled_never_bypasses (large)", False, large(True), False),
    ("isl_or_load_signal_none_falls_back_to_isl_only (small)", True, small(None), True),
    ("isl_or_load_signal_none_falls_back_to_isl_only (large)", True, large(None), False),
]


@pytest.mark.parametrize("name,enabled,i,want", OR_VECTORS, ids=[v[0] for v in OR_VECTORS])
def test_isl_or_load_vectors(name, enabled, i, want):
    assert isl_or_load_bypass(i, enabled) is want


def test_decode_gate_truth_table():
    """conditional_bypass.rs decode_gate_allows_bypass:
    policy && (!configured || busy == Some(false))."""
    for policy in (False, True):
        for configured in (False, True):
            for busy in (None, False, True):
                want = policy and (not configured or busy is False)
                assert decode_gate_allows_bypass(policy, configured, busy) is want
    assert not decode_gate_allows_bypass(True, True, None)  # unknown vetoes


def test_dynamo_disaggregate_is_not_bypass():
    assert dynamo_disaggregate("isl_bounding", small(None)) is False  # bypass: prefill on D
    assert dynamo_disaggregate("isl_bounding", large(True)) is True
    assert dynamo_disaggregate("prefill_load", large(True)) is False
    assert dynamo_disaggregate("isl_or_load", large(False)) is True
    # the decode veto: configured and D busy (or unknown) -> remote prefill after all
    busy_d = DisaggInput(1000, 64, 14, decode_busy=True)
    assert dynamo_disaggregate("isl_bounding", busy_d, decode_gate_configured=True) is True
    calm_d = DisaggInput(1000, 64, 14, decode_busy=False)
    assert dynamo_disaggregate("isl_bounding", calm_d, decode_gate_configured=True) is False


def test_llmd_prefix_decider_hand_traces():
    """prefix_based_pd_decider.go @06c08c08, `decide`."""
    # Default NonCachedTokens 0 (line 49): line 94 returns true -> always disaggregate.
    assert llmd_prefix_disaggregate(10, 0, 16) is True
    assert llmd_prefix_disaggregate(10_000, 600, 16) is True
    # NonCachedTokens 256; input 200 < 256: line 106 returns false (decode only).
    assert llmd_prefix_disaggregate(200, 0, 16, 256) is False
    # input 1000, 50 blocks * 16 = 800 hit (line 124); non-cached 200 (line 126) < 256:
    # line 132 returns false (decode only).
    assert llmd_prefix_disaggregate(1000, 50, 16, 256) is False
    # input 1000, 40 blocks hit = 640; non-cached 360 >= 256: line 136 returns true.
    assert llmd_prefix_disaggregate(1000, 40, 16, 256) is True
    # boundary: non-cached exactly 256 is not < 256 (line 132): disaggregate.
    assert llmd_prefix_disaggregate(1056, 50, 16, 256) is True
    # boundary: input exactly 256 is not < 256 (line 106); no hit: disaggregate.
    assert llmd_prefix_disaggregate(256, 0, 16, 256) is True


def test_every_decider_names_what_it_mirrors():
    assert set(DECIDERS) >= {"always", "conditional", "isl_bounding", "prefill_load"}
    assert "Dynamo 1.6.1" in DECIDERS["isl_or_load"]
    assert "llm-d" in DECIDERS["llm-d-prefix"]
    assert DECIDERS["conditional"].startswith("PD Lab's own")


def test_decide_keeps_the_answer_and_the_figures_it_compared():
    """`decide` answers as the plain functions do and writes down what they read."""
    mostly_cached = inp(1000, 14, 64)  # 896 cached, 104 uncached: Dynamo keeps it on D
    d = decide(7, "isl_bounding", mostly_cached)
    assert (d.request_id, d.remote) == (7, False)
    assert (d.cached_tokens, d.uncached_tokens) == (896, 104)
    assert (d.token_threshold, d.ratio_threshold) == (2048, 0.7)
    assert decide(7, "llm-d-prefix", mostly_cached, non_cached_tokens=256).remote is False
    assert decide(7, "llm-d-prefix", inp(1000, 0, 64), non_cached_tokens=256).remote is True
    assert decide(7, "always", mostly_cached).remote is True


def test_a_disaggregated_run_records_each_decision():
    """The run's meta holds one decision per request, agreeing with where it went."""
    from sim.cluster.topologies import simulate
    from ui import lesson_setups as ls

    for mode, workload, config in ls.decider_specs(1024):
        run = simulate(list(workload), config)
        decisions = {d["request_id"]: d for d in run.meta["decisions"]}
        for rid, worker in zip(run.requests.request_id, run.requests.worker, strict=True):
            assert decisions[rid]["mode"] == mode
            assert decisions[rid]["remote"] == worker.startswith("P"), (mode, rid, worker)
