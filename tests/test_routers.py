"""Routers named by system (sim/cluster/routers.py).

`dynamo-kv` is proven against the real KvRouter in tests/refsched/dynamo/. `llm-d` is Go and is
not run here: these are hand traces that cite the lines of its sources (GAIE =
gateway-api-inference-extension @fd30cb97714a, pkg/epp/framework/plugins/scheduling/scorer/;
LLMD = llm-d-inference-scheduler @06c08c08).
"""

import pytest

from sim.cluster.routers import (
    PD_LAB,
    ROUTERS,
    DynamoKv,
    DynamoKvConfig,
    Llmd,
    LlmdConfig,
    WorkerView,
    dynamo_kv_logit,
    llmd_kv_scores,
    llmd_load_aware_scores,
    llmd_prefix_scores,
    llmd_queue_scores,
    softmax_weights,
)
from sim.config import ROUTER_NAMES


def test_every_router_is_registered_and_names_what_it_mirrors():
    assert set(ROUTERS) == set(ROUTER_NAMES)
    for name in ("round-robin", "least-loaded", "length"):
        assert ROUTERS[name] == PD_LAB
    assert ROUTERS["dynamo-kv"].startswith("Dynamo 1.6.1")
    assert "llm-d-inference-scheduler" in ROUTERS["llm-d"]


def test_dynamo_cost_by_hand():
    """(active_prefill + isl)/bs - credit*overlap, floored at 0, scaled; + decode blocks."""
    v = WorkerView("w", overlap_blocks=2, active_prefill_tokens=0, decode_blocks=2)
    assert dynamo_kv_logit(v, 34, DynamoKvConfig()) == pytest.approx(2.125)  # seen on the real one
    v = WorkerView("w", overlap_blocks=10, active_prefill_tokens=16, decode_blocks=3)
    assert dynamo_kv_logit(v, 32, DynamoKvConfig()) == 3  # prefill floored at 0
    cfg = DynamoKvConfig(overlap_score_credit=0.0)  # credit 0: no cache at all
    assert dynamo_kv_logit(v, 32, cfg) == pytest.approx(48 / 16 + 3)
    cfg = DynamoKvConfig(prefill_load_scale=2.0, decode_active_request_weight=1.0)
    v = WorkerView("w", active_prefill_tokens=16, decode_blocks=3, active_requests=2)
    assert dynamo_kv_logit(v, 16, cfg) == pytest.approx(2 * 2 + 3 + 2)


def test_dynamo_ties_take_the_first_and_softmax_follows_the_formula():
    views = [WorkerView("a", decode_blocks=1), WorkerView("b", decode_blocks=1)]
    pick = DynamoKv().pick(16, views)
    assert pick.index == 0 and pick.tied == [0, 1]
    w = softmax_weights([1.0, 2.0, 3.0], 0.5)  # exp(-(c - 1) / (2 * 0.5))
    assert w[0] / w[1] == pytest.approx(2.718281828) and sum(w) == pytest.approx(1)


def test_llmd_prefix_score_is_matched_over_total():
    # GAIE prefix/plugin.go:285-291: matchLen / total; total 0 -> 0.
    assert llmd_prefix_scores([3, 0], 4) == [0.75, 0.0]
    assert llmd_prefix_scores([0], 0) == [0.0]


def test_llmd_prefix_indexer_matches_in_order_and_stops_at_the_first_miss():
    r = Llmd()
    r.indexer.record("a", [1, 2, 3])
    r.indexer.record("b", [1, 9])
    # plugin.go:344-363: block 1 held by a and b (each +1), block 2 by a, block 7 by nobody: stop
    assert r.indexer.match([1, 2, 7, 3]) == {"a": 2, "b": 1}
    # a server missing block 0 still counts a later block that someone else also has (res[s]++)
    r.indexer.record("c", [5, 6])
    r.indexer.record("d", [6])
    assert r.indexer.match([5, 6]) == {"c": 2, "d": 1}
    # hashPrompt truncates at maxPrefixBlocks (plugin.go:417-420; default 256, plugin.go:48)
    small = Llmd(LlmdConfig(max_prefix_blocks=2))
    small.indexer.record("a", [1, 2, 3])
    assert small.indexer.match([1, 2, 3]) == {"a": 2}


def test_llmd_queue_kv_and_load_aware_scores():
    # GAIE queue.go:95-99: equal queues -> 1.0; else (max - q) / (max - min)
    assert llmd_queue_scores([2, 2]) == [1.0, 1.0]
    assert llmd_queue_scores([0, 4, 2]) == [1.0, 0.0, 0.5]
    # GAIE kvcache_utilization.go:79: 1 - usage
    assert llmd_kv_scores([0.25, 1.0]) == [0.75, 0.0]
    # LLMD load_aware.go:89-95 (threshold 128, line 19): 0 -> 0.5; 64 -> 0.25; >=128 -> 0
    assert llmd_load_aware_scores([0, 64, 128, 500]) == [0.5, 0.25, 0.0, 0.0]


def test_llmd_weighted_pick_by_hand():
    """Default weights: prefix 3, queue 2, kv 2 (GAIE chart _config.yaml:47-52), load-aware 1."""
    r = Llmd()
    views = [
        WorkerView("a", waiting=4, kv_usage=0.5),
        WorkerView("b", waiting=0, kv_usage=0.25),
    ]
    r.indexer.record("a", [10, 11, 12, 13])
    # a: prefix 4/4 = 1 -> 3; queue (4-4)/4 = 0; kv 0.5 -> 1.0; load 0.5*(1-4/128) -> 0.484375
    # b: prefix 0; queue 1 -> 2; kv 0.75 -> 1.5; load 0.5
    pick = r.pick_keys([10, 11, 12, 13], views)
    assert pick.scores == pytest.approx([3 + 0 + 1.0 + 0.484375, 0 + 2 + 1.5 + 0.5])
    assert pick.index == 0
    # the pick recorded the prompt's blocks for a (PreRequest): a 2-block prompt sharing them
    assert r.indexer.match([10, 11]) == {"a": 2}
    # with the prefix weight 0, b wins
    r0 = Llmd(LlmdConfig(prefix_weight=0.0))
    assert r0.pick_keys([10, 11, 12, 13], views).index == 1


def test_knobs_go_through_set():
    from sim.config import SimConfig, with_overrides

    c = with_overrides(
        SimConfig(),
        {"topology": "router", "router": "dynamo-kv", "router_temperature": "0.5"},
    )
    assert c.topology.router == "dynamo-kv" and c.topology.router_temperature == 0.5
    c = with_overrides(SimConfig(), {"disagg_mode": "isl_bounding", "eff_isl_threshold": "512"})
    assert c.topology.eff_isl_threshold == 512
    for bad in ({"router": "nope"}, {"disagg_mode": "nope"}, {"eff_isl_ratio_threshold": "2"}):
        with pytest.raises(ValueError):
            with_overrides(SimConfig(), bad)


def test_in_the_simulator_dynamo_kv_follows_the_cache_and_least_loaded_does_not():
    """r0 leaves a 2000-token prefix cached on I0; r2 (short, long output) then keeps I0 busy.
    r1 shares r0's prefix: least-loaded sends it to the idle I1, dynamo-kv to I0, where
    ~125 cached blocks outweigh r2's few decode blocks."""
    from sim.cluster.topologies import simulate
    from sim.config import SimConfig, with_overrides
    from sim.core.request import RequestSpec

    specs = [
        RequestSpec(0, 0.0, 2100, 5, prefix_group="sys", prefix_tokens=2000),
        RequestSpec(2, 4.0, 100, 2000),
        RequestSpec(1, 5.0, 2100, 5, prefix_group="sys", prefix_tokens=2000),
    ]
    workers = {}
    for router in ("least-loaded", "dynamo-kv"):
        knobs = {"topology": "router", "router": router, "num_instances": "2"}
        knobs["enable_prefix_caching"] = "true"
        run = simulate(specs, with_overrides(SimConfig(policy="vllm"), knobs))
        df = run.requests
        workers[router] = dict(zip(df["request_id"], df["worker"].astype(str), strict=True))
    assert workers["least-loaded"][1] != workers["least-loaded"][2]
    assert workers["dynamo-kv"][1] == workers["dynamo-kv"][0] == workers["dynamo-kv"][2]
