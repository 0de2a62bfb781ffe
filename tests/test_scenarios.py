"""Every lesson scenario shows its claim (README: "The lessons"), asserted on numbers."""

from functools import cache

import numpy as np
import pytest

from sim.cluster.topologies import simulate
from sim.runs.gpu_time import worker_utilisation
from sim.runs.metrics import summarize
from sim.runs.token_windows import compare_tokens_in_window
from sim.scenarios import SCENARIOS, get_scenario


@cache
def run(name: str, label: str):
    scenario = get_scenario(name)
    variant = scenario.variant(label)
    return simulate(scenario.requests(variant), variant.config)


def itls(result, ids):
    """All inter-token gaps of the given requests (seconds)."""
    return np.concatenate([np.diff(result.token_times[i]) for i in ids])


def decode_only_step_s(result):
    steps = result.steps
    return (steps.end_s - steps.start_s)[steps.prefill_tokens == 0].median()


def test_every_scenario_names_a_claim_and_runs():
    claims = {s.claim for s in SCENARIOS.values()}
    seeds = {f"C{i}" for i in range(1, 14) if i != 10} | {"C10a", "C10b", "C10c"}
    assert claims == seeds | {"PC1", "PC2", "PC3"}
    for s in SCENARIOS.values():
        assert s.description and s.variants
        assert get_scenario(s.claim) is s  # "C5" finds c5-long-prompt-freeze


def test_c1_prefill_is_compute_bound_decode_is_bandwidth_bound():
    steps = run("c1-prefill-vs-decode", "vLLM 2048").steps
    big_prefill = steps[steps.prefill_tokens >= 2000]
    decode_only = steps[steps.prefill_tokens == 0]
    assert len(big_prefill) >= 4 and len(decode_only) > 100
    assert (big_prefill.compute_s > big_prefill.memory_s).all()
    assert (decode_only.memory_s > decode_only.compute_s).all()


def test_c2_ttft_is_queueing_plus_prefill_and_grows_with_load():
    low, high = run("c2-ttft-tpot", "4 req/s"), run("c2-ttft-tpot", "24 req/s")
    for result in (low, high):
        seg, q = result.segments, result.requests.set_index("request_id")
        before = seg[seg.end_s <= seg.request_id.map(q.first_token_s) + 1e-12]
        parts = before.assign(d=before.end_s - before.start_s).groupby("request_id").d.sum()
        assert np.allclose(parts, q.ttft_s[parts.index])  # queued + prefill (+ stalls) = TTFT
    assert summarize(high)["ttft_p90_s"] > 3 * summarize(low)["ttft_p90_s"]  # queueing grows
    assert summarize(low)["tpot_p50_s"] == pytest.approx(decode_only_step_s(low), rel=0.3)


def throughput(result):
    q = result.requests
    return (q.prompt_tokens + q.output_tokens).sum() / q.finish_s.max()


def test_c3_throughput_grows_with_concurrency_then_saturates():
    for prompt in (3000, 1500):
        t = {
            c: throughput(run("c3-concurrency", f"{prompt} tok x {c}")) for c in (1, 2, 16, 64, 128)
        }
        assert t[2] / t[1] > 1.7  # bandwidth-bound: almost linear
        assert t[128] / t[64] < 1.15  # compute-bound: flat (doubling adds < 15%, not ~2x)
    short = throughput(run("c3-concurrency", "1500 tok x 64")) / throughput(
        run("c3-concurrency", "1500 tok x 16")
    )
    long = throughput(run("c3-concurrency", "3000 tok x 64")) / throughput(
        run("c3-concurrency", "3000 tok x 16")
    )
    assert short > long  # short prompts saturate at higher concurrency


def test_c4_static_has_best_tpot_and_worst_ttft():
    static = summarize(run("c4-static-vs-continuous", "static"))
    continuous = summarize(run("c4-static-vs-continuous", "prefill-first"))
    assert static["ttft_p50_s"] > 10 * continuous["ttft_p50_s"]
    assert static["tpot_p50_s"] < continuous["tpot_p50_s"]
    assert static["max_itl_s"] < continuous["max_itl_s"] / 5


def test_c5_prefill_first_freezes_streams_for_the_whole_long_prefill():
    result = run("c5-long-prompt-freeze", "prefill-first (V0)")
    q, seg = result.requests, result.segments
    long_id = q.loc[q.prompt_tokens.idxmax(), "request_id"]
    prefill = seg[(seg.request_id == long_id) & (seg.kind == "prefill")]
    assert len(prefill) == 1  # one step for the whole 16k prompt
    freeze = prefill.end_s.iloc[0] - prefill.start_s.iloc[0]
    chats = q[q.request_id != long_id]
    # A chat's worst gap = the prefill step plus the decode step after it.
    assert chats.max_itl_s.max() == pytest.approx(freeze + decode_only_step_s(result), rel=0.05)
    assert freeze > 0.5
    chunked = run("c5-long-prompt-freeze", "vLLM 2048").requests
    assert chunked[chunked.request_id != long_id].max_itl_s.max() < freeze / 4


def test_c6_smaller_chunks_lower_itl_and_raise_the_long_ttft():
    sizes = (512, 1024, 2048, 4096, 8192)
    max_itl, long_ttft = [], []
    for b in sizes:
        q = run("c6-chunk-size", f"chunk {b}").requests
        long = q.prompt_tokens == q.prompt_tokens.max()
        max_itl.append(q[~long].max_itl_s.max())
        long_ttft.append(q[long].ttft_s.iloc[0])
    assert all(a < b for a, b in zip(max_itl, max_itl[1:], strict=False))
    assert all(a > b for a, b in zip(long_ttft, long_ttft[1:], strict=False))


def shorts(result, limit=1000):
    q = result.requests
    return q[q.prompt_tokens < limit]


def test_c7_a_long_prompt_blocks_the_queue_and_priority_cannot_fix_it():
    blocked = run("c7-prefill-queue-blocking", "vLLM, threshold 0")
    seg = blocked.segments
    long_prefill_end = seg[(seg.request_id == 0) & (seg.kind == "prefill")].end_s.max()
    during = shorts(blocked)[shorts(blocked).arrival_s < long_prefill_end]
    assert len(during) >= 10
    # Every short prompt that arrived during the long prefill got its first token after it.
    assert (during.arrival_s + during.ttft_s >= long_prefill_end).all()
    short_first = shorts(run("c7-prefill-queue-blocking", "short-first"))
    assert short_first.ttft_s.median() == pytest.approx(shorts(blocked).ttft_s.median(), rel=0.02)
    for lane in ("vLLM, threshold 512", "V0 fast lane"):
        fast = shorts(run("c7-prefill-queue-blocking", lane))
        assert fast.ttft_s.median() < shorts(blocked).ttft_s.median() / 4, lane
    # The mechanism: under V1 with threshold 0 the long prompt takes the whole budget.
    steps = blocked.steps
    assert (steps[steps.num_prefills == 1].prefill_tokens.head(8) >= 2047).all()


def test_c8_fast_lane_cuts_short_ttft_and_long_prompts_slow_each_other():
    one = run("c8-fast-lane", "V0: 1 partial prefill")
    all_long = run("c8-fast-lane", "V0: 4 partial, 4 long")
    fast = run("c8-fast-lane", "V0: 4 partial, 1 long")
    assert shorts(fast).ttft_s.median() < shorts(one).ttft_s.median() / 4
    first_long = lambda r: r.requests.loc[0, "ttft_s"]  # noqa: E731
    assert first_long(all_long) > 1.3 * first_long(fast)  # two long prefills share the budget
    # While a long prompt prefills, the chats' decodes are slowed: TPOT stays high.
    assert shorts(fast).tpot_s.median() > 1.3 * decode_only_step_s(fast)


def test_c9_a_long_prefill_slows_every_running_decode_unless_disaggregated():
    colocated = run("c9-mixing-flaw", "colocated")
    seg = colocated.segments
    chats = shorts(colocated).request_id.tolist()
    slowed = seg[seg.request_id.isin(chats) & seg.slowed]
    assert set(slowed.request_id) == set(chats)  # every running stream is hit
    gaps = itls(colocated, chats)
    assert gaps.max() > 4 * np.median(gaps)
    split = run("c9-mixing-flaw", "1P1D")
    steady = np.concatenate([np.diff(split.token_times[i][1:]) for i in chats])  # after token 2
    assert steady.max() < 1.5 * np.median(steady)


def test_c10a_short_first_helps_chats_and_starves_long_prompts_until_aging():
    fcfs = run("c10a-short-first-starvation", "fcfs").requests
    short = run("c10a-short-first-starvation", "short-first").requests
    aged = run("c10a-short-first-starvation", "short-first + aging 2 s").requests
    is_long = lambda q: q.prompt_tokens > 10000  # noqa: E731
    assert short[~is_long(short)].ttft_s.median() < fcfs[~is_long(fcfs)].ttft_s.median() / 2
    assert short[is_long(short)].ttft_s.mean() > 3 * fcfs[is_long(fcfs)].ttft_s.mean()
    assert aged[is_long(aged)].ttft_s.max() < short[is_long(short)].ttft_s.max() / 2


def test_c10b_length_router_keeps_long_prompts_away_from_chats():
    rr = run("c10b-length-router", "round-robin x2")
    length = run("c10b-length-router", "length router")
    short_rr, short_len = shorts(rr, 8192), shorts(length, 8192)
    assert short_len.ttft_s.quantile(0.99) < short_rr.ttft_s.quantile(0.99) / 3
    assert np.quantile(itls(length, short_len.request_id), 0.99) < np.quantile(
        itls(rr, short_rr.request_id), 0.99
    )
    long_len = length.requests[length.requests.prompt_tokens >= 8192]
    assert (long_len.worker == "L0").all()
    assert (short_len.worker == "L0").any()  # spill-over: the long server is not left idle


def test_c10c_disaggregation_smooths_decodes_and_prefill_saturates_first():
    # Same two GPUs. Decodes become smooth, but the single prefill worker is the bottleneck:
    # TTFT grows while TPOT shrinks (unbalanced utilisation; the P:D ratio is a knob).
    colocated = run("c10c-disaggregation", "colocated x2")
    split = run("c10c-disaggregation", "1P1D")
    a, b = shorts(colocated, 8192).request_id, shorts(split, 8192).request_id
    steady = np.concatenate([np.diff(split.token_times[i][1:]) for i in b])
    assert np.quantile(steady, 0.99) < np.quantile(itls(colocated, a), 0.99) / 3
    assert summarize(split)["ttft_p99_s"] > summarize(colocated)["ttft_p99_s"]
    assert summarize(split)["tpot_p99_s"] < summarize(colocated)["tpot_p99_s"]
    util = worker_utilisation(split).set_index("worker")
    assert util.loc["P0", "compute_share"] > 0.5  # the prefill worker is compute-bound
    assert util.loc["D0", "bandwidth_share"] > 0.5  # the decode worker is bandwidth-bound
    assert (split.segments.kind == "kv_transfer").sum() == len(split.requests)


def test_c11_memory_pressure_preempts_by_recompute_or_swap():
    recompute = run("c11-memory-pressure", "recompute")
    swap = run("c11-memory-pressure", "swap (V0)")
    for result in (recompute, swap):
        assert result.requests.preemptions.sum() > 0
        assert (result.requests.status == "finished").all()
        assert (result.steps.kv_used_tokens <= result.steps.kv_capacity_tokens).all()
        assert result.steps.kv_used_tokens.max() > 0.9 * result.steps.kv_capacity_tokens.max()
        assert (result.segments.kind == "preempted").any()
    assert recompute.segments.recompute.any()
    assert not swap.segments.recompute.any()
    assert swap.steps.swap_s.sum() > 0


def test_c12_every_request_makes_more_tokens_disaggregated_the_first_most():
    scenario = get_scenario("c12-three-requests")
    runs = {v.label: run(scenario.name, v.label) for v in scenario.variants}
    table = compare_tokens_in_window(runs, *scenario.window_s)
    gain = table["disaggregated"] - table["colocated"]
    assert (gain > 0).all()
    assert gain.idxmax() == 0


def test_c13_decode_on_a_bandwidth_gpu_and_the_cost_of_a_slow_link():
    base = run("c13-heterogeneous", "H100 + H100, IB")
    h200 = run("c13-heterogeneous", "H100 + H200, IB")
    slow = run("c13-heterogeneous", "H100 + H100, 25GbE")
    assert summarize(h200)["tpot_p50_s"] < 0.85 * summarize(base)["tpot_p50_s"]
    transfer = lambda r: r.segments[r.segments.kind == "kv_transfer"]  # noqa: E731
    duration = lambda s: (s.end_s - s.start_s).sum()  # noqa: E731
    assert duration(transfer(slow)) > 10 * duration(transfer(base))
    assert summarize(slow)["tpot_p99_s"] > summarize(base)["tpot_p99_s"]


def hit_rate(result):
    q = result.requests
    return q.cached_tokens.sum() / q.prompt_tokens.sum()


def test_pc1_a_shared_system_prompt_is_prefilled_once():
    on, off = (
        run("pc1-shared-system-prompt", "caching on"),
        run("pc1-shared-system-prompt", "caching off"),
    )
    q = on.requests
    # Every request after the first finds the 2,000-token system prompt (whole 16-token blocks).
    assert (q.cached_tokens.iloc[1:] == 2000 // 16 * 16).all() and q.cached_tokens.iloc[0] == 0
    assert hit_rate(off) == 0
    assert on.steps.prefill_tokens.sum() < 0.3 * off.steps.prefill_tokens.sum()
    assert summarize(on)["ttft_p50_s"] < summarize(off)["ttft_p50_s"] / 2
    cached = on.segments[on.segments.kind == "cached"]
    assert len(cached) == len(q) - 1 and (cached.tokens == 2000).all()


def test_pc2_real_conversations_reuse_half_their_prompts():
    on, off = run("pc2-multi-turn", "caching on"), run("pc2-multi-turn", "caching off")
    assert 0.35 < hit_rate(on) < 0.75
    assert summarize(on)["ttft_p50_s"] < summarize(off)["ttft_p50_s"] / 2


def test_pc3_memory_pressure_evicts_the_cache():
    roomy, tight = (
        run("pc3-cache-eviction", "KV 200k tokens"),
        run("pc3-cache-eviction", "KV 24k tokens"),
    )
    # With room, each of the 8 documents is prefilled once and found by its 5 later visits.
    assert hit_rate(roomy) > 0.75
    assert hit_rate(tight) < hit_rate(roomy) / 2
