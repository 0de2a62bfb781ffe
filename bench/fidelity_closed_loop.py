"""How the public runs' benchmark clients send their requests, as the simulator replays them.

A closed-loop run (bench/fidelity_runs.py) is N clients, each sending its next request when its
last one finishes. Which requests the benchmark measured, how its clients start (together, as
aiperf sends them, or spread out, as vLLM's mixed steps leave them), the burst that opens its
measured phase, a prompt pool's what-if and InferenceX's drawn lengths are all the client's
doing, not the server's; bench/fidelity_replay.py runs these and scores what comes out.

Notable features
- `closed_loop`: the clients' loop on one simulated instance at event speed (or step by step).
- `closed_loop_size`: how many requests to send and which of them to measure (warm-up and the
  draining last round left out: DRAIN_ROUNDS).
- `burst_wave`: the N requests that open the measured phase, sent at once to an idle server,
  weighed as 1 of MEASURED_ROUNDS rounds.
- Each constant says which benchmark source it is read from (aiperf, aiconfigurator's
  generator and evaluation pipeline, InferenceX's client), with the commit.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from sim.cluster.topologies import Cluster
from sim.config import SimConfig
from sim.core.request import Request, RequestSpec, RequestState
from sim.core.trace import RunResult
from sim.runs.budget import num_workers

# How the closed-loop replays start their clients (see `closed_loop`): the benchmark client sends
# all N at once; whether they stay together is the engine's doing. SGLang's prefill-first
# scheduler keeps them together; under vLLM's mixed steps they come apart, which "random"
# stands for (CLOSED_LOOP_DEFAULT). SGLang with --enable-mixed-chunk (rows >= 0.5.6 below)
# spreads the first wave over the prefill batches it needs, by itself; those replays also start
# together, as the client does.
CLOSED_LOOP_START: dict[str, str] = {"sglang": "together"}
# vLLM's clients come apart: at 4 clients the measured TTFT is one prompt's prefill, not four
# (H200, Llama-3.1-70B FP8, 1024 or 8192 tokens in: 0.20 and 1.35 s, as one prefill replays),
# so nothing keeps them in step. Apart is not evenly spaced, though: a client's phase is where
# the jitter it has gathered left it, independent of the others', so prompts sometimes meet and
# wait for each other. An even comb is the one arrangement where they never do: replayed that
# way, the TTFT of the fit runs fell short more the more clients there were (H200: 0.44 s
# against 0.73 s measured at 64 clients of 1024 tokens) and was 13 to 30% short on average per
# GPU. Replayed from random phases (seeded, uniform over a request's lifetime), the fit runs'
# mean |TTFT error| goes from 26% to 23% (H200 17 -> 13%, B200 21 -> 19%, H100 32 -> 30%),
# their TPOT and E2E unchanged at 3% (bench_fidelity_real.py --step-costs kernels); three seeds
# averaged gave the same figures to 1%, so one is replayed.
# What random phases miss (bench_fidelity_real.py --step-costs kernels --closed-loop-start
# together, H100 Qwen3-32B fit runs): their 4096-token runs' TTFT comes out 43% short from random
# phases and 22% short from clients sent together, their 1024-token runs' 17% short and 91% too
# long. The measured 4096-token runs keep much of the first burst's lockstep, the 1024-token ones
# lose it. Delaying each client's next send by an exponential 20 to 150 ms (mean) did not do both
# either: the delays split a burst, but the prompts that arrive during a prefill still meet.
CLOSED_LOOP_DEFAULT = "random"


def closed_loop(
    config: SimConfig,
    isl: int,
    osl: int,
    concurrency: int,
    num_requests: int,
    start: str = "even",
    seed: int = 0,
    prompts: int = 0,
    step_by_step: bool = False,
    send_delay_s: float = 0.0,
    range_ratio: float = 1.0,
) -> RunResult:
    """`concurrency` clients, each sending its next request (isl in, osl out) the moment its last
    one finishes: the benchmark clients' closed loop. Requests are numbered in send order.

    `start` says when the clients send their first request:
    - "even" (default): staggered evenly over one request's estimated lifetime. Started together
      they would stay in lockstep forever in a deterministic simulator (every wave prefilling in
      the same step), which the vLLM measurements rule out: at concurrency 4 the measured TTFT is
      about one prefill, not four. vLLM puts new prompts into the running decodes' steps, so a
      real benchmark's jitter (HTTP, detokenizing) shifts each client a little and the shifts
      add up: the clients spread out. Evenly is the least any spread makes prompts wait.
    - "together": all at t = 0, as the benchmark client does it. aiconfigurator's benchmark
      (src/aiconfigurator/generator/config/backend_templates/benchmark/bench_run.sh.j2, commit
      095f58a) runs `aiperf profile --concurrency N` with no `--concurrency-ramp-duration`, and
      aiperf's default timing is CONCURRENCY_BURST, credits "issued with zero delay" up to N in
      flight (ai-dynamo/aiperf docs/timing-modes.md, docs/tutorials/ramping.md "Without ramping"
      at commit 159f90b). Under SGLang's default scheduler the clients then STAY together: every
      waiting prompt is prefilled before any decode runs (scheduler.py get_next_batch_to_run,
      "Run prefill first if possible"), so a request that arrives a little late joins the same
      prefill wave instead of lagging behind it, and with equal output lengths (ignore_eos) the
      wave finishes on one step and comes back as one. Jitter is absorbed, not accumulated.
    - "random": uniformly over one lifetime (seeded): spread out as gathered jitter leaves
      them, each client's phase its own, so prompts meet now and then (the vLLM replays'
      start: CLOSED_LOOP_DEFAULT).

    `prompts` > 0: every request's prompt is one of that many, drawn at random (seeded), so a
    repeated prompt can be served from the prefix cache, as aiperf's synthetic dataset does it
    (see AIPERF_PROMPTS). 0: every prompt is its own.

    `send_delay_s` > 0 (a what-if, see AIPERF_PHASE): a client sends its next request that long
    after its last one finished, drawn for each send from an exponential of that mean (seeded):
    the client's and the network's jitter, which moves the clients' phases about.

    `range_ratio` < 1: each request's input and output lengths are drawn (seeded) from the
    integers [int(isl x ratio), isl] and [int(osl x ratio), osl], as InferenceX's client does it
    (fidelity_inferencex.RANGE_RATIO); unequal outputs take the clients apart by themselves.

    One instance runs at event speed (sim/fastforward/steps.py), its runs ending at each finish,
    where a client sends its next request (`Worker.serve_clients`): the same trace as
    `step_by_step` (tests/test_fidelity_real.py compares them); 3.7x faster over ten of H100's
    fit runs (1.5-8x each, most where outputs are long). Several
    instances go step by step: a client's send reads every instance's finished requests, and a
    run keeps the finishes it has not reached yet.
    """
    draw = np.random.default_rng(seed + 1)
    delays = np.random.default_rng(seed + 2)
    lengths = request_lengths(isl, osl, num_requests, range_ratio, seed + 3)
    one = not step_by_step and num_workers(config) == 1
    cluster = Cluster(config, step_by_step=not one)
    if one:
        cluster.workers[0].serve_clients()
    env, live = cluster.env, []
    per_instance = max(1, concurrency // len(cluster.workers))
    life = cluster.cost.prefill_s(isl) + osl * cluster.cost.decode_step_s(
        per_instance, isl + osl // 2
    )

    def send() -> None:
        n_in, n_out = lengths[len(live)]
        if prompts:
            which = int(draw.integers(prompts))
            spec = RequestSpec(
                len(live), env.now, n_in, n_out, prefix_group=f"prompt-{which}", prefix_tokens=n_in
            )
        else:
            spec = RequestSpec(len(live), env.now, n_in, n_out)
        req = Request(spec)
        live.append(req)
        cluster.route(req)

    def send_later(delay_s: float):
        yield env.timeout(delay_s)
        pending[0] -= 1
        send()

    def after_step(_worker) -> None:  # top up the clients whose request just finished
        in_flight = sum(r.state not in (RequestState.FINISHED, RequestState.REJECTED) for r in live)
        in_flight += pending[0]
        while in_flight < started[0] and len(live) + pending[0] < num_requests:
            if send_delay_s > 0:
                pending[0] += 1
                env.process(send_later(float(delays.exponential(send_delay_s))))
            else:
                send()
            in_flight += 1

    started = [0]  # clients started so far
    pending = [0]  # sends on their way (send_delay_s)

    def starter():
        n = min(concurrency, num_requests)
        if start == "even":
            times = [i * life / concurrency for i in range(n)]
        elif start == "random":
            times = sorted(np.random.default_rng(seed).uniform(0, life, n))
        elif start == "together":
            times = [0.0] * n
        else:
            raise ValueError(f"start must be even, together or random, got {start!r}")
        for t in times:
            if t > env.now:
                yield env.timeout(t - env.now)
            started[0] += 1
            send()

    for w in cluster.workers:
        w.on_step = after_step
    env.process(starter())
    env.run()
    return cluster.recorder.result(live, cluster.meta(live))


def request_lengths(
    isl: int, osl: int, n: int, range_ratio: float = 1.0, seed: int = 0
) -> list[tuple[int, int]]:
    """(input, output) tokens of n requests: isl and osl each, or with `range_ratio` < 1 drawn
    uniformly from the integers [int(L x ratio), L] (seeded), as InferenceX's client draws them
    (utils/bench_serving/benchmark_serving.py `sample_uniform`)."""
    if range_ratio >= 1:
        return [(isl, osl)] * n
    rng = np.random.default_rng(seed)
    ins = rng.integers(int(isl * range_ratio), isl + 1, size=n)
    outs = rng.integers(int(osl * range_ratio), osl + 1, size=n)
    return [(int(a), int(b)) for a, b in zip(ins, outs, strict=True)]


# aiperf's synthetic dataset: 100 distinct prompts ("conversations"), each request drawing one at
# random, "reused until benchmarking is complete" (ai-dynamo/aiperf at db4f639:
# aiperf/common/config/config_defaults.py ConversationDefaults.NUM = 100; conversation_config.py
# --num-dataset-entries; dataset_manager.py `self._conversation_query_random.choice`).
# aiconfigurator's generated benchmark keeps that default (bench_run.sh.j2: no
# --num-dataset-entries; its evaluation pipeline, which measured the gap analysis's rows, passed
# 12 x N: see MEASURED_ROUNDS) and
# its generator leaves vLLM's prefix caching and SGLang's radix cache at their defaults, on
# (rule_plugin/*.rule set disable_prefix_cache only to false). Yet the measurements disagree
# among themselves, so the report replays every prompt as its own (prompt_pool 0) and this stays
# a what-if (`bench_fidelity_real.py --prompt-pool 100`): the gap analysis's Llama-3.1-8B FP8
# runs at 100 tokens out would need up to 0.83 of the H200's FP8 peak for their prompts' linear
# layers alone if every prompt were prefilled (`prompt_load`: 0.67-0.83 at 1000-4000 tokens in
# on one GPU), which only cache hits make possible, while its TTFTs say each was prefilled.
AIPERF_PROMPTS = 100
# The benchmark's measured requests: after 2 x N warm-up ones, 20 x N of them (bench_run.sh.j2:
# --warmup-request-count, --num-requests with BENCH_MULTI_ROUND = 20). With a prompt pool, which
# prompts the cache holds changes along that window (each is cached from its first send on), so
# the replay measures 2 x N requests around its middle (request 12 x N), after a warm-up of
# 11 x N; but no more than SETTLED_SENDS: by then 99% of 100 prompts have been sent once
# (1 - 0.99^460), and the cache holds what it will hold.
AIPERF_WARMUP, AIPERF_MEASURED, SETTLED_SENDS = 2, 20, 460
# The rounds each client's measured requests make up in the public runs, which the burst below
# is weighed against: 10. aiconfigurator's evaluation pipeline, which measured the gap analysis's
# rows of January 2026 (vLLM 0.12 and SGLang; it existed 2025-08 to 2026-03-03), ran `aiperf
# profile --concurrency N --request-count 10N --warmup-request-count 2N --num-dataset-entries
# 12N` (ai-dynamo/aiconfigurator src/aiconfigurator/eval/benchmarks/genai_perf_runner.py `run`,
# at commit ca9dffd61; removed in c0c44d911). bench_run.sh.j2's 20 x N (50 x N until 2026-04-01)
# came with the generator's benchmark command, 2026-02-11. Twelve prompts a client for its
# twelve requests, and aiperf from 0.3.0 (2025-11-20) on shuffles its dataset without
# replacement (dataset/dataset_samplers.py ShuffleSampler): no prompt repeats, no prefix-cache
# hit (the report's prompt_pool 0). The other rows are InferenceX's (bench/fidelity_inferencex.py:
# the Llama-3.1-70B ones of 2025-10, the fit runs' for H200 and B200, and the MiniMax-M2.5 ones
# of 2026), whose client sends 10 x N random-token prompts, all N at once on an idle server, with
# prefix caching off or of no use, and draws their lengths. The fit runs' own TTFTs say one
# tenth too: measured minus the replay's steady state, over the burst's extra wait, is 1.96-2.11
# twentieths (median per GPU over their 1024-token runs at 16 to 64 clients); weighed as 1 of 20
# rounds, their mean TTFT came out 21% short (mean |error| 23%), as 1 of 10 it is 16%
# (bench_fidelity_real.py --step-costs kernels; measured before the lengths were drawn).
MEASURED_ROUNDS = 10


# The replay never measures the LAST round it sends. A closed loop ends by draining: once a
# client has sent its last request it sends no more, so the final round runs on a server that
# empties as it goes, with fewer and fewer requests beside it. aiperf's window has 20 rounds and
# only its last one drains (5% of it); a replay of three rounds that measured rounds 2 and 3 had
# half of its measured requests draining. On H100, Qwen3-32B TP4 under vLLM, 4096 tokens in, 128
# out, 128 clients (kernel tables): rounds 2 and 3 of a five-round replay take 28.9 and 28.8 s
# (E2E, all 128 clients in flight), its fifth 16.4 s; the three-round replay's third round took
# the same 16.4 s, so its measured mean was 22.7 s where the steady state is 28.8 s (measured:
# 21.5 s). The profiles fitted on such replays had soaked that up (kernel_scale, MFU), while
# SGLang's replays, whose clients run in waves that stay in step (nothing drains before the last
# wave ends), kept the full load: on the same GPU and model they came out ~30% slower than
# measured where vLLM's matched. So one more round is sent than is measured: DRAIN_ROUNDS.
DRAIN_ROUNDS = 1


def closed_loop_size(concurrency: int, osl: int, prompt_pool: int = 0) -> tuple[int, int, int]:
    """(requests to send, first measured, end of the measured ones): the replay measures
    requests numbered [first, end). Every prompt its own: rounds 2 and 3 of each client's four
    (the first is warm-up on an idle or filling server, the last drains it: DRAIN_ROUNDS). From
    a prompt pool: 2 x N measured where the benchmark's measured window has its middle (see
    AIPERF_MEASURED), after at least the benchmark's own warm-up, and one more round after."""
    tail = DRAIN_ROUNDS * concurrency
    if not prompt_pool:
        return 3 * concurrency + tail, concurrency, 3 * concurrency
    middle = AIPERF_WARMUP + AIPERF_MEASURED // 2  # requests sent, per client, by the middle
    warm = max(AIPERF_WARMUP * concurrency, min((middle - 1) * concurrency, SETTLED_SENDS))
    return warm + 2 * concurrency + tail, warm, warm + 2 * concurrency


# The benchmark's measured phase STARTS WITH A BURST. aiperf runs its phases one after the other
# and waits for every request of one to come back before it starts the next (ai-dynamo/aiperf at
# db4f639: aiperf/timing/credit_issuing_strategy.py `_execute_phases`, "Wait for the credits to
# be returned before continuing to the next phase"), so the profiling phase finds the server
# drained and sends its first N requests at once (CONCURRENCY_BURST, see `closed_loop`). Those
# N of its MEASURED_ROUNDS x N requests wait for each other's prefills (at 64 clients of 1024
# tokens, eight steps of 8192 prompt tokens); the rest see the steady state that the "random"
# start stands for. So a vLLM replay weighs that first wave in, replayed on its own (N requests
# at t = 0): it is why the measured mean TTFT grows with the number of clients (H100, Qwen3-32B
# on 2 GPUs: 0.15 s at 8 clients, 0.65 s at 128) while one request's prefill does not. An SGLang
# replay starts its clients together, so its own first round IS that burst (N requests at t = 0
# on an idle server), and it is weighed in the same way, 1 of MEASURED_ROUNDS rounds. Until then
# the SGLang replays left it out with the warm-up: right where the waves stay in step (the 0.5.1
# rows: every round is a burst), not where they do not: with --enable-mixed-chunk (the 0.5.6
# rows) a couple of prompts join the running batch per step, the first round's prompts wait
# behind each other (at 512 clients of 1000 tokens and max_prefill_tokens 2500, ~256 steps) and
# the later rounds arrive spread out. (A prompt pool's what-if keeps the steady state only.)
# AIPERF_PHASE, a what-if (`bench_fidelity_real.py --closed-loop-start aiperf [--send-delay-ms
# D]`): the most literal replay, the measured phase itself: N clients sent together to an idle
# server, MEASURED_ROUNDS x N requests, every one of them counted (its opening burst and its
# draining end included), each send optionally D ms late on average (exponential: the client's
# and the network's jitter). It is not the report's replay because it measures worse: with
# D = 0, kernel tables, the held-out runs' mean |error| TTFT/TPOT/E2E is 79/17/16% (as scored:
# 33/16/16%) and the fit runs' 78/3/3% (24/3/3%); the knee within 10% on 13 of 20 decided
# sweeps (12). Again with 10 measured rounds and the profiles of 2026-12-06: 79/16/15% (as
# scored: 27/16/15%), fit 82/4/3% (17/3/3%), knee 12 of 20 (12). (Those knee counts predate
# bench_knee.py averaging repeats at one client count: the report's replay is now 9 of 13.)
# In the simulator a wave sent together stays together (equal prompts, equal outputs, nothing
# to tell them apart), so every round's prompts wait for each other; the real servers' waves
# come apart within the first rounds (B200, Llama-3.1-70B FP8, 1024 tokens in and out, 16
# clients: measured TTFT 0.20 s, this replay 1.30 s). Exponential delays of 2 to 100 ms (mean)
# did not take them apart either, on those fit runs: a delayed prompt still meets the others of
# its wave in a prefill (TTFT 0.80 to 1.21 s at 16 clients).
def burst_wave(
    config: SimConfig, isl: int, osl: int, concurrency: int, range_ratio: float = 1.0
) -> pd.DataFrame:
    """ttft_s, tpot_s, e2e_s of `concurrency` requests sent at once to an idle server (their
    lengths drawn as `closed_loop` draws them)."""
    from sim.cluster.topologies import simulate

    lengths = request_lengths(isl, osl, concurrency, range_ratio, seed=1)
    specs = [RequestSpec(i, 0.0, *lengths[i]) for i in range(concurrency)]
    return simulate(specs, config).requests[["ttft_s", "tpot_s", "e2e_s"]]
