"""Each policy on two or three requests, with the expected times worked out on paper.

Clock (tests/toy_clock.py): a step takes 10 ms + 1 ms per prefill token; decodes add nothing.
Workload: A arrives at 0.00 s (prompt 100, output 5); B at 0.05 s (prompt 1000, output 3).
A token is emitted at the END of the step that completes its prompt (or decode).
"""

import pytest
from toy_clock import ToyClock

from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec

A = RequestSpec(0, 0.00, 100, 5)
B = RequestSpec(1, 0.05, 1000, 3)


def run(policy, workload=(A, B), **knobs):
    config = with_overrides(SimConfig(policy=policy), knobs)
    return simulate(list(workload), config, cost_model=ToyClock())


def row(result, request_id):
    return result.requests.set_index("request_id").loc[request_id]


def test_prefill_first_stalls_running_decode_for_the_whole_prefill():
    r = run("prefill-first")
    a, b = row(r, 0), row(r, 1)
    # A: prefill 0.00-0.11 -> token 1 at 0.11. B's prefill-only step 0.11-1.12 (A stalls).
    assert a.ttft_s == pytest.approx(0.11)
    assert b.ttft_s == pytest.approx(1.12 - 0.05)
    # Then decode steps of 10 ms: A tokens at 1.13, 1.14, 1.15, 1.16; B at 1.13, 1.14.
    assert a.finish_s == pytest.approx(1.16)
    assert a.tpot_s == pytest.approx((1.16 - 0.11) / 4)
    assert a.max_itl_s == pytest.approx(1.02)  # 0.11 -> 1.13: the freeze of C5
    assert b.tpot_s == pytest.approx(0.01)
    stall = r.segments[(r.segments.request_id == 0) & (r.segments.kind == "stall")]
    assert len(stall) == 1
    assert (stall.start_s.iloc[0], stall.end_s.iloc[0]) == pytest.approx((0.11, 1.12))


def test_chunked_slows_instead_of_freezing():
    r = run("chunked", max_num_batched_tokens=512)
    a, b = row(r, 0), row(r, 1)
    # 0.00-0.11 A prefill. 0.11-0.631: A decode + B chunk of 511 (budget 512 - 1 decode).
    # 0.631-1.130: A decode + B's last 489 tokens -> B token 1 at 1.13.
    assert a.ttft_s == pytest.approx(0.11)
    assert b.ttft_s == pytest.approx(1.13 - 0.05)
    assert a.max_itl_s == pytest.approx(0.521)  # half of prefill-first's 1.02 s
    assert a.finish_s == pytest.approx(1.15)
    assert b.finish_s == pytest.approx(1.15)
    slowed = r.segments[(r.segments.request_id == 0) & r.segments.slowed]
    assert slowed.tokens.sum() == 2  # the two decodes that shared a step with B's chunks


def test_static_batch_makes_late_arrival_wait_for_the_batch():
    r = run("static", batch_size=2)
    a, b = row(r, 0), row(r, 1)
    # Batch 1 = {A} (B had not arrived): 0.11 prefill + 4 decodes -> A done at 0.15.
    assert a.ttft_s == pytest.approx(0.11)
    assert a.tpot_s == pytest.approx(0.01)  # never interrupted: best TPOT (C4)
    assert a.finish_s == pytest.approx(0.15)
    # Batch 2 = {B}: prefill 0.15-1.16, decodes at 1.17, 1.18.
    assert b.ttft_s == pytest.approx(1.16 - 0.05)
    assert b.finish_s == pytest.approx(1.18)


def test_static_fills_batch_and_waits_for_the_longest():
    reqs = [RequestSpec(0, 0.0, 10, 2), RequestSpec(1, 0.0, 10, 6), RequestSpec(2, 0.0, 10, 2)]
    r = run("static", reqs, batch_size=2)
    # Batch {0, 1}: prefill 20 tokens = 0.03 s; 0 ends at 0.04, 1 at 0.08. Request 2 waits
    # for the whole batch although a slot was free from 0.04 on.
    assert row(r, 0).finish_s == pytest.approx(0.04)
    assert row(r, 1).finish_s == pytest.approx(0.08)
    assert row(r, 2).ttft_s == pytest.approx(0.08 + 0.02)


def test_chunked_one_partial_prefill_blocks_the_queue_and_fast_lane_unblocks_it():
    # L: 3000-token prompt at 0; S: 50-token prompt at 0.1 s. Budget 1000.
    reqs = [RequestSpec(0, 0.0, 3000, 2), RequestSpec(1, 0.1, 50, 2)]
    blocked = run("chunked", reqs, max_num_batched_tokens=1000)
    # L's chunks: 0-1.01, 1.01-2.02, 2.02-3.03 (token 1). S waits for all of them (C7), then its
    # prefill shares the step with L's decode: 3.03-3.09 -> TTFT = 3.09 - 0.1.
    assert row(blocked, 1).ttft_s == pytest.approx(3.09 - 0.1)
    fast = run(
        "chunked",
        reqs,
        max_num_batched_tokens=1000,
        max_num_partial_prefills=2,
        long_prefill_token_threshold=1000,
    )
    # With 2 slots S joins at 1.01: budget split 500/500 -> L 500 + S 50 = 0.56 s -> 1.57.
    assert row(fast, 1).ttft_s == pytest.approx(1.57 - 0.1)
    assert row(fast, 0).ttft_s > row(blocked, 0).ttft_s  # the long one pays a little


def test_v1_packs_prefills_up_to_the_budget_and_spares_a_lone_request_the_threshold():
    reqs = [RequestSpec(0, 0.0, 3000, 2), RequestSpec(1, 0.1, 50, 2)]
    v1 = run("vllm", reqs, max_num_batched_tokens=1000, long_prefill_token_threshold=800)
    # 0-1.01: L alone in the scheduler, so the threshold does not apply (vLLM PR #57951): L 1000.
    # 1.01-1.87: L 800 (now capped: S waits too) + S's whole 50 in the same step (0.86 s).
    assert row(v1, 1).ttft_s == pytest.approx(1.87 - 0.1)
    steps = v1.steps.prefill_tokens.tolist()
    assert steps[:2] == [1000, 850]


def test_short_first_lets_short_prompts_pass_waiting_long_ones():
    # X runs alone first; then a 2000-token and a 100-token prompt wait together. The budget
    # (1024) fits only one of them at a time.
    reqs = [
        RequestSpec(0, 0.0, 500, 2),
        RequestSpec(1, 0.01, 2000, 2),
        RequestSpec(2, 0.02, 100, 2),
    ]
    fcfs = run("vllm", reqs, max_num_batched_tokens=1024)
    short = run("short-first", reqs, max_num_batched_tokens=1024)
    # FCFS: 0-0.51 X; 0.51-1.543 X's decode + 1023 of prompt 1; 1.543-2.577 the rest of 1 (977)
    # + the first 47 of prompt 2; 2.577-2.64 its last 53 -> token 1 at 2.64.
    # short-first: at 0.51 prompt 2 (100) goes first, prompt 1 gets the rest (923): 1.543.
    assert row(fcfs, 2).ttft_s == pytest.approx(2.64 - 0.02)
    assert row(short, 2).ttft_s == pytest.approx(1.543 - 0.02)
    assert row(short, 1).ttft_s > row(fcfs, 1).ttft_s  # the long prompt pays (C10a)


def _disaggregated(protocol):
    # KV link sized so 100 tokens of Llama-3.1-8B KV (128 KiB each) take exactly 1 ms.
    bandwidth = 100 * 131072 / 1e-3 / 1e9
    return run(
        "vllm",
        max_num_batched_tokens=4096,
        topology="disaggregated",
        kv_bandwidth_gb_s=bandwidth,
        kv_latency_ms=0,
        disagg_protocol=protocol,
        enable_prefix_caching=False,
    )


def test_disaggregated_decode_is_not_disturbed_by_prefill():
    r = _disaggregated("distserve")
    a, b = row(r, 0), row(r, 1)
    # A: P prefill 0-0.11 (token 1), KV 0.11-0.111, D decodes every 10 ms: 0.121 ... 0.151.
    assert a.ttft_s == pytest.approx(0.11)
    assert a.finish_s == pytest.approx(0.151)
    assert a.max_itl_s == pytest.approx(0.011)  # B's prefill runs on P: A never stalls (C10c)
    # B: waits for P until 0.11, prefill to 1.12, KV 10 ms, decodes at 1.14 and 1.15.
    assert b.ttft_s == pytest.approx(1.12 - 0.05)
    assert b.finish_s == pytest.approx(1.15)
    assert a.worker == "P0>D0"
    transfer = r.segments[(r.segments.request_id == 1) & (r.segments.kind == "kv_transfer")]
    assert transfer.tokens.tolist() == [1000]
    assert (transfer.end_s - transfer.start_s).iloc[0] == pytest.approx(0.010)


def test_vllm_hand_off_makes_token_1_on_the_decode_worker():
    r = _disaggregated("vllm")
    a, b = row(r, 0), row(r, 1)
    # A: P prefills 0-0.11 and drops its token (max_tokens=1); KV 0.11-0.111; D computes the
    # last prompt token again (a 1-token prefill, 0.011 s) and samples token 1 at 0.122.
    assert a.ttft_s == pytest.approx(0.122)
    assert a.finish_s == pytest.approx(0.162)  # then 4 decodes of 10 ms
    seg = r.segments[r.segments.request_id == 0]
    d_prefill = seg[(seg.worker == "D0") & (seg.kind == "prefill")]
    assert d_prefill.tokens.tolist() == [1] and d_prefill.recompute.all()
    # B's first token also comes from D: P 0.11-1.12, KV 10 ms, D's 1-token step.
    assert b.ttft_s == pytest.approx(1.13 + 0.011 - 0.05)
    assert len(r.token_times[1]) == 3  # all of B's tokens, none from P


def test_decode_worker_admits_no_more_than_max_num_seqs():
    specs = [RequestSpec(i, 0.0, 100, 20) for i in range(8)]
    config = with_overrides(
        SimConfig(policy="vllm"),
        {"topology": "disaggregated", "max_num_seqs": 2, "max_num_batched_tokens": 4096},
    )
    r = simulate(specs, config, cost_model=ToyClock())
    d = r.steps[r.steps.worker == "D0"]
    assert d.batch_size.max() == 2  # 8 requests handed over, at most 2 decode together
    assert (r.requests.status == "finished").all()


# ---- SGLang: the decisions its real scheduler (sglang 0.5.23's Scheduler, built by its own
# __init__ with the model runner stubbed as SGLang's tools/sglang-simulator does) was seen to
# make on 1 x 3000-token prompt A + 6 x 300 (b0..b5), 4 output tokens each,
# chunked_prefill_size 2048, all arriving at once. PD Lab's sglang policy must make the same.

DOC = [RequestSpec(0, 0.0, 3000, 4)] + [RequestSpec(i, 0.0, 300, 4) for i in range(1, 7)]


def sglang_steps(**knobs):
    from sim.stepper import run_steps

    # Observed with SGLang's default page size, 1 token: PD Lab's KV blocks are its pages.
    overrides = {"enable_prefix_caching": False, "block_size": 1, **knobs}
    config = with_overrides(SimConfig(policy="sglang"), overrides)
    steps, outputs = run_steps([(0, spec) for spec in DOC], config, kv_blocks=320_000)
    assert outputs == {i: 4 for i in range(7)}
    return [s.scheduled for s in steps]


def test_sglang_prefill_batches_take_priority_over_decodes():
    steps = sglang_steps(chunked_prefill_size=2048)
    assert steps[0] == {0: 2048}  # EXTEND A:2048 (A becomes the chunked request)
    assert steps[1] == {0: 952, 1: 300, 2: 300, 3: 300, 4: 196}  # A's rest, b0-b2, b3 cut
    assert steps[2] == {4: 104, 5: 300, 6: 300}  # A and b0-b2 wait: prefill first
    assert all(set(n.values()) == {1} for n in steps[3:])  # then DECODE batches only


def test_sglang_mixed_chunk_lets_decodes_ride_along():
    steps = sglang_steps(chunked_prefill_size=2048, enable_mixed_chunk=True)
    assert steps[:2] == sglang_steps(chunked_prefill_size=2048)[:2]
    assert steps[2] == {4: 104, 5: 300, 6: 300, 0: 1, 1: 1, 2: 1, 3: 1}  # MIXED


def test_sglang_max_running_requests_caps_the_batch():
    steps = sglang_steps(chunked_prefill_size=2048, max_running_requests=3)
    assert steps[0] == {0: 2048}
    assert steps[1] == {0: 952, 1: 300, 2: 300}
    assert steps[2:5] == [{0: 1, 1: 1, 2: 1}] * 3  # A, b0, b1 decode to the end
    assert steps[5] == {3: 300, 4: 300, 5: 300}
    assert steps[9] == {6: 300}


def test_sglang_without_chunking_caps_a_prefill_batch_at_max_prefill_tokens():
    # Observed with the radix cache on (add_one_req's input cap). With it off,
    # add_one_req_ignore_eos
    # has no such cap and b3 joins too (test_sglang_differential.py, doc-no-chunking-no-radix).
    steps = sglang_steps(
        chunked_prefill_size=-1, max_prefill_tokens=4096, enable_prefix_caching=True
    )
    assert steps[0] == {0: 3000, 1: 300, 2: 300, 3: 300}
    assert steps[1] == {4: 300, 5: 300, 6: 300}  # no decodes between the prefill batches


# ---- SGLang's new_token_ratio: a running request reserves its remaining output times a ratio
# that starts at 0.7 and decays by (0.7 - 0.098) / 600 per decode batch (schedule_policy.py
# PrefillAdder._get_running_request_total_token_offset; new_token_ratio_tracker.py), with the
# radix cache on: for every request up to sglang 0.5.8 (reserve_fixed_output=False), for all but
# fixed-length (ignore_eos) ones in 0.5.23, which reserve their output in full.

# A (160 + 2000) and C (160 + 100) start; B (160 + 1500) arrives next and does not fit, which
# sets batch_is_full: no new prefill until a request leaves the batch (C, step 99).
RATIO_DOC = [
    (0, RequestSpec(0, 0.0, 160, 2000)),
    (0, RequestSpec(2, 0.0, 160, 100)),
    (1, RequestSpec(1, 0.0, 160, 1500)),
]


def sglang_ratio_steps(radix: bool, fixed_in_full: bool = False):
    from sim.stepper import run_steps

    config = with_overrides(
        SimConfig(policy="sglang"),
        {"enable_prefix_caching": radix, "reserve_fixed_output": fixed_in_full},
    )
    steps, outputs = run_steps(RATIO_DOC, config, kv_blocks=200)  # 3200 tokens
    assert outputs == {0: 2000, 2: 100, 1: 1500}
    return steps


def test_sglang_reserves_running_output_at_the_decaying_ratio():
    steps = sglang_ratio_steps(radix=True)
    assert steps[99].finished == [2]
    # Step 1: 2848 tokens free, A and C reserve 0.7 x (1999 + 99): B (1660) does not fit, and
    # is not tried again while the batch stays whole (not at every step as the ratio decays).
    # Step 100: C has left; ~100 decode batches took the ratio to ~0.6, A reserves 0.6 x 1899
    # of the 2928 free tokens: B fits (at ratio 1.0 it would not: 2928 - 1899 < 1660).
    first = next(i for i, s in enumerate(steps) if 1 in s.scheduled)
    assert first == 100 and steps[first].scheduled == {1: 160}
    # A and B then outgrow the 3200 tokens: retract_decode sends back B (fewest output tokens).
    retracted = [i for i, s in enumerate(steps) if s.preempted]
    assert retracted == [1490] and steps[1490].preempted == [1]  # 320 + 1490 + 1389 ~ 3200


@pytest.mark.parametrize("radix, fixed_in_full", [(False, False), (True, True)])
def test_sglang_reserves_ignore_eos_output_in_full(radix: bool, fixed_in_full: bool) -> None:
    # add_one_req_ignore_eos: with the radix cache off, an ignore_eos request counts at 1.0; in
    # sglang 0.5.23 (the default) it does with the radix cache on as well.
    steps = sglang_ratio_steps(radix=radix, fixed_in_full=fixed_in_full)
    first = next(i for i, s in enumerate(steps) if 1 in s.scheduled)
    assert first == 2000 and not any(s.preempted for s in steps)  # B waits for A's end


def test_sglang_ratio_after_a_retraction_and_when_idle():
    from sim.core.engine import Engine
    from sim.core.prefix_cache import PrefixCachingKV
    from sim.core.recorder import TraceRecorder
    from sim.core.request import Request
    from sim.core.step import StepPlan
    from sim.policies import make_policy

    policy = make_policy("sglang", SimConfig(policy="sglang").knobs)
    assert policy.ratio_init == 0.7 and abs(policy.ratio_min - 0.098) < 1e-12
    engine = Engine("I0", policy, PrefixCachingKV(3200, 16), TraceRecorder(), "recompute")
    assert policy.new_token_ratio(engine) == 0.7
    engine.num_steps = 100  # 100 decode batches later (none of them a prefill formed here)
    assert abs(policy.new_token_ratio(engine) - (0.7 - 100 * 0.602 / 600)) < 1e-12
    engine.num_steps = 10_000
    assert policy.new_token_ratio(engine) == policy.ratio_min  # the floor
    engine.add_request(Request(RequestSpec(0, 0.0, 100, 10)), 0.0)
    plan = StepPlan()
    policy.schedule(engine, plan, 0.0)  # nothing ran: the server was idle, reset
    assert plan.items and policy.new_token_ratio(engine) == 0.7
    engine.num_steps += 1  # that prefill batch ran: it does not decay the ratio
    assert policy.new_token_ratio(engine) == 0.7


def test_sglang_overlap_loop_admits_a_request_that_arrived_in_a_busy_step_one_step_later():
    # SGLang's overlap event loop (0.5.6.post2 scheduler.py event_loop_overlap 1005-1063) forms
    # the next batch while the current one runs: a request that arrives during a busy step
    # joins the batch after next. A 4-step decode of b0 runs; b1 arrives before step 2.
    from sim.stepper import run_steps

    arrivals = [(0, RequestSpec(0, 0.0, 300, 6)), (2, RequestSpec(1, 0.0, 300, 4))]

    def first_steps(overlap: bool) -> dict[int, int]:
        config = with_overrides(
            SimConfig(policy="sglang"),
            {"enable_prefix_caching": False, "block_size": 1, "overlap_schedule": overlap},
        )
        steps, outputs = run_steps(arrivals, config, kv_blocks=320_000)
        assert outputs == {0: 6, 1: 4}
        return {rid: next(k for k, s in enumerate(steps) if rid in s.scheduled) for rid in (0, 1)}

    normal, overlap = first_steps(False), first_steps(True)
    assert normal == {0: 0, 1: 2}  # the normal loop prefills b1 in the step it arrived before
    # An idle server launches at once (b0), a busy one one step later (b1).
    assert overlap == {0: 0, 1: 3}


@pytest.mark.parametrize("scheduling_policy", ["fcfs", "priority"])
def test_vllm_async_scheduling_admits_a_request_that_arrived_in_a_busy_step_one_step_later(
    scheduling_policy,
):
    # vLLM's async scheduling (0.19.0 vllm/v1/engine/core.py step_with_batch_queue 421-485)
    # schedules step n+1 while step n runs: a request that arrives during a busy step joins the
    # step after next; on an idle server it goes at once. b0 decodes alone; b1 arrives before
    # step 2.
    from sim.stepper import run_steps

    arrivals = [(0, RequestSpec(0, 0.0, 300, 6)), (2, RequestSpec(1, 0.0, 300, 4))]

    def first_steps(asynchronous: bool) -> dict[int, int]:
        config = with_overrides(
            SimConfig(policy="vllm"),
            {
                "enable_prefix_caching": False,
                "scheduling_policy": scheduling_policy,
                "async_scheduling": asynchronous,
            },
        )
        steps, outputs = run_steps(arrivals, config, kv_blocks=20_000)
        assert outputs == {0: 6, 1: 4}
        return {rid: next(k for k, s in enumerate(steps) if rid in s.scheduled) for rid in (0, 1)}

    assert first_steps(False) == {0: 0, 1: 2}  # the synchronous loop: the step it came before
    assert first_steps(True) == {0: 0, 1: 3}  # idle: at once (b0); busy: one step later (b1)


def test_sglang_default_memory_fraction():
    # memory_hook.py handle_gpu_memory_settings: 512 MiB + 1.5 x chunk + tp/8 GiB + 2 x graph bs,
    # at least 10 GiB on big GPUs.
    from sim.policies.sglang_knobs import sglang_cuda_graph_max_bs, sglang_mem_fraction_static

    assert sglang_cuda_graph_max_bs(80, 2) == 256 and sglang_cuda_graph_max_bs(80, 4) == 512
    assert sglang_mem_fraction_static(80, 1, 8192) == round(1 - 13440 / 81920, 3)  # 0.836
    assert sglang_mem_fraction_static(141, 8, 8192) == round(1 - 14848 / (141 * 1024), 3)
    # A small chunk on a big GPU: the 10 GiB floor.
    assert sglang_mem_fraction_static(80, 1, 2048, cuda_graph_max_bs=8) == round(
        1 - 10240 / 81920, 3
    )
