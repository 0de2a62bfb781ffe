"""The fast-forward through decode-only steps (sim/fastforward/steps.py) gives the step-by-step
trace.

Every request's times, every segment, every step row and every token's time are compared
between `simulate(..., step_by_step=True)` and the default event-speed run, on random workloads
x policies x topologies (the strategies of tests/test_properties.py, plus ones that make long
quiet decode stretches, KV pressure and prefix-cache reuse) and on every lesson scenario.

Tolerance: none (`TOL_S = 0`). The fast path does not approximate: it prices each step with
the same float operations as `step_cost` (the batch-size terms come from step_cost itself, the
context term is added last as there), and it forms each step's end as the same running sum
(previous end + duration) that simpy's `now + delay` forms, and wakes up at exactly that float
(`Environment.timeout_at`). So every time is the same float64 bit for bit; a tolerance would
only hide a divergence, e.g. a run that ends one step early or late, which is off by a whole
step (milliseconds), never by rounding.
"""

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_properties import configs, workloads
from toy_clock import ToyClock

from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.cost.hardware import GPUS, MODELS, get_gpu, get_model
from sim.cost.roofline import StepCostModel
from sim.fastforward.steps import run_seconds
from sim.policies import POLICIES
from sim.scenarios import SCENARIOS

TOL_S = 0.0  # see the module docstring: the two modes must agree exactly


def assert_same_run(fast, step):
    """Two runs of the same inputs are the same trace (rows compared in a canonical order)."""
    pd.testing.assert_frame_equal(fast.requests, step.requests, check_exact=True)
    order = ["request_id", "start_s", "kind", "worker"]
    seg_f = fast.segments.sort_values(order, kind="stable", ignore_index=True)
    seg_s = step.segments.sort_values(order, kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(seg_f, seg_s, check_exact=True)
    steps_f = fast.steps.sort_values(["worker", "step"], ignore_index=True)
    steps_s = step.steps.sort_values(["worker", "step"], ignore_index=True)
    pd.testing.assert_frame_equal(steps_f, steps_s, check_exact=True)
    assert fast.token_times.keys() == step.token_times.keys()
    for rid, times in step.token_times.items():
        assert np.array_equal(fast.token_times[rid], times), rid
    # The steps table is still in the order the steps ended.
    assert np.all(np.diff(fast.steps.end_s.to_numpy()) >= -TOL_S)


def both(specs, config):
    return simulate(specs, config), simulate(specs, config, step_by_step=True)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), configs())
def test_fast_forward_equals_step_by_step(specs, config):
    assert_same_run(*both(specs, config))


@st.composite
def decode_heavy(draw):
    """Few arrivals, long outputs: long runs, finishes inside runs, block boundaries, reuse."""
    n = draw(st.integers(1, 14))
    rows = []
    for i in range(n):
        prompt = draw(st.integers(1, 3000))
        group = draw(st.sampled_from(["", "a", "b"]))
        prefix = min(prompt, draw(st.sampled_from([16, 64, 1000]))) if group else 0
        arrival = draw(st.sampled_from([0.0, 0.05, 0.5, 1.0])) + i * draw(
            st.sampled_from([0.0, 0.01, 0.3])
        )
        rows.append((arrival, prompt, draw(st.integers(1, 700)), 0, group, prefix))
    rows.sort(key=lambda r: r[0])
    return [RequestSpec(i, *r) for i, r in enumerate(rows)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decode_heavy(), configs())
def test_long_decode_stretches(specs, config):
    assert_same_run(*both(specs, config))


# Arrivals that land exactly on step ends: every step lasts a multiple of 1/64 s (the toy
# clock's 1/64 s per step plus 1/64 s per prefill token; sums of these are exact in float64)
# and arrivals fall on the same grid. Whether a step sees a request that arrives at its start
# then depends on simpy's order of events at one instant, which the colocated fast path, whose
# worker takes its arrivals itself (sim/fastforward/arrival_feed.py), must reproduce.
TIE_CLOCK = ToyClock(2**-6, 2**-6)


@st.composite
def tied_arrivals(draw):
    ticks = sorted(draw(st.lists(st.integers(0, 120), min_size=1, max_size=40)))
    return [
        RequestSpec(i, t / 64, draw(st.integers(1, 40)), draw(st.integers(1, 60)))
        for i, t in enumerate(ticks)
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tied_arrivals(), st.sampled_from(sorted(POLICIES)))
def test_arrivals_on_step_ends_are_seen_as_step_by_step(specs, policy):
    config = SimConfig(policy=policy)
    fast = simulate(specs, config, TIE_CLOCK)
    assert_same_run(fast, simulate(specs, config, TIE_CLOCK, step_by_step=True))


def test_the_tie_workloads_do_put_arrivals_on_step_ends():
    specs = [RequestSpec(i, t / 64, 2, 30) for i, t in enumerate([0, 0, 3, 5, 5, 9, 17, 40])]
    run = simulate(specs, SimConfig(policy="vllm"), TIE_CLOCK)
    ends = set(run.steps.end_s)
    assert len(ends & {s.arrival_s for s in specs[2:]}) >= 3  # (not counting t = 0)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_lesson_scenarios(name):
    scenario = SCENARIOS[name]
    for variant in scenario.variants:
        assert_same_run(*both(scenario.requests(variant), variant.config))


def test_fast_forward_takes_few_engine_calls(monkeypatch):
    """The point of it: a quiet decode stretch costs one run, not one step per token."""
    from sim.core.engine import Engine

    calls = []
    schedule = Engine.schedule
    monkeypatch.setattr(
        Engine, "schedule", lambda self, now: calls.append(now) or schedule(self, now)
    )
    specs = [RequestSpec(i, 0.0, 100, 300 + 20 * i) for i in range(8)]
    step = simulate(specs, SimConfig(), step_by_step=True)
    steps_scheduled, calls[:] = len(calls), []
    fast = simulate(specs, SimConfig())
    assert_same_run(fast, step)
    # Step by step: the idle look at t = 0, one prefill, 439 decode steps, the idle look at the
    # end. Fast: the same two idle looks and the prefill; the decodes (finishes too) are a run.
    assert len(fast.steps) == 440 and steps_scheduled == 442
    assert len(calls) == 3


@pytest.mark.parametrize("gpu", list(GPUS))
def test_decode_cost_is_affine_in_context(gpu):
    """What the fast path relies on: in a decode-only step the context adds context x kv_s
    to memory_s, last, and nothing else depends on it (checked on every model of the catalog)."""
    rng = np.random.default_rng(0)
    for name in MODELS:
        for tp in (1, 2, 8):
            try:
                cost = StepCostModel(get_gpu(gpu), get_model(name), tp)
            except ValueError:
                continue
            kv_s = cost.decode_kv_s_per_token
            for b in rng.integers(1, 2000, 20).tolist():
                base = cost.step_cost((), b, 0)
                for ctx in rng.integers(0, 200_000, 5).tolist():
                    c = cost.step_cost((), b, ctx * b)
                    memory = base.memory_s + ctx * b * kv_s
                    assert c.memory_s == memory
                    assert c.seconds == base.overhead_s + base.compute_s + memory + base.comm_s
                    assert (c.compute_s, c.overhead_s, c.comm_s) == (
                        base.compute_s,
                        base.overhead_s,
                        base.comm_s,
                    )


def test_closed_form():
    cost = StepCostModel(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"))
    b, c1, k = 12, 12 * 900, 300
    steps = [cost.step_cost((), b, c1 + j * b).seconds for j in range(k)]
    a_b = cost.step_cost((), b, 0).seconds
    assert math.isclose(
        run_seconds(a_b, cost.decode_kv_s_per_token, b, c1, k), sum(steps), rel_tol=1e-12
    )


def test_step_by_step_is_what_the_live_clock_gets():
    """A clock that must see every step (the live one) is never fast-forwarded."""
    from sim.cluster.topologies import Cluster
    from sim.cluster.worker import SimulatedClock, fast_forward_ok

    class Counting(SimulatedClock):
        steps = 0

        def step_timing(self, worker, batch):
            Counting.steps += 1
            return super().step_timing(worker, batch)

    assert fast_forward_ok(SimulatedClock()) and not fast_forward_ok(Counting())
    assert not Cluster(SimConfig(), step_by_step=True).fast
    specs = [RequestSpec(i, 0.0, 50, 60) for i in range(3)]
    run = simulate(specs, SimConfig(), clock=Counting())
    assert Counting.steps == len(run.steps)


@pytest.mark.parametrize(
    "policy", ["vllm", "vllm-v0", "prefill-first", "static", "sglang", "short-first"]
)
@pytest.mark.parametrize("topology", ["colocated", "router", "disaggregated"])
def test_azure_excerpt_every_policy_and_topology(policy, topology, azure_conv_300):
    knobs = {"topology": topology}
    if topology == "router":
        knobs.update(router="least-loaded", num_instances="2")
    if topology == "disaggregated":
        knobs.update(num_prefill="1", num_decode="2")
    config = with_overrides(SimConfig(policy=policy), knobs)
    assert_same_run(*both(azure_conv_300, config))


@pytest.mark.parametrize("topology", ["colocated", "router", "disaggregated"])
@pytest.mark.parametrize(
    "policy, knob, extra",
    [
        ("sglang", "overlap_schedule", {"enable_mixed_chunk": "false"}),
        ("sglang", "overlap_schedule", {"enable_mixed_chunk": "true"}),
        ("vllm", "async_scheduling", {}),
    ],
)
def test_azure_excerpt_next_step_formed_while_this_one_runs(
    topology, policy, knob, extra, azure_conv_300
):
    """SGLang's overlap loop (sim/policies/sglang.py) and vLLM's async scheduling
    (sim/policies/vllm_v1.py) form the next step while this one runs, so a request that arrived
    during a busy step goes into the step after next: the fast-forwarded run defers it alike."""
    knobs = {"topology": topology, knob: "true", **extra}
    if topology == "router":
        knobs.update(router="least-loaded", num_instances="2")
    if topology == "disaggregated":
        knobs.update(num_prefill="1", num_decode="2")
    config = with_overrides(SimConfig(policy=policy), knobs)
    fast, step = both(azure_conv_300, config)
    assert_same_run(fast, step)
    normal = simulate(azure_conv_300, with_overrides(config, {knob: "false"}))
    # (the deferral shows; SGLang's P/D prefill worker defers only behind other queued prompts)
    assert fast.requests.ttft_s.mean() > normal.requests.ttft_s.mean() or (
        policy == "sglang" and topology == "disaggregated"
    )


@pytest.mark.parametrize(
    "knobs",
    [
        {"topology": "router", "router": "dynamo-kv", "num_instances": "3"},
        {"topology": "router", "router": "dynamo-kv", "router_temperature": "0.5"},
        {"topology": "router", "router": "llm-d", "num_instances": "3"},
        {"topology": "disaggregated", "disagg_mode": "isl_bounding", "num_decode": "2"},
        {"topology": "disaggregated", "disagg_mode": "isl_or_load", "prefill_busy_threshold": "1"},
        {"topology": "disaggregated", "disagg_mode": "llm-d-prefix", "non_cached_tokens": "256"},
    ],
    ids=lambda k: "-".join(v for v in k.values() if not v[0].isdigit()),
)
def test_azure_excerpt_named_routers_and_deciders(knobs, azure_conv_300):
    """Routers and deciders that read the workers' queues and caches at each arrival: the
    fast-forwarded run makes the same decisions as the step-by-step one."""
    config = with_overrides(SimConfig(policy="vllm"), knobs)
    assert_same_run(*both(azure_conv_300, config))


@pytest.fixture(scope="module")
def azure_conv_300():
    from conftest import azure_trace

    from sim.workloads.workload import load_workload

    requests = load_workload(str(azure_trace("conv")))[:300]
    t0 = requests[0].arrival_s
    # Three times the real rate, so that requests queue, preempt and share steps.
    return [
        RequestSpec(r.request_id, (r.arrival_s - t0) / 3, r.prompt_tokens, r.output_tokens)
        for r in requests
    ]


def test_the_run_budget_counts_fast_forwarded_steps():
    """A hosted run's step cap (sim/runs/budget.py) still holds when decode steps go by in runs."""
    from sim.cluster.worker import fast_forward_ok
    from sim.runs.budget import Budget, BudgetClock, BudgetExceeded, simulate_within

    specs = [RequestSpec(i, 0.0, 100, 400) for i in range(4)]
    assert fast_forward_ok(BudgetClock(Budget()))
    with pytest.raises(BudgetExceeded):
        simulate_within(specs, SimConfig(), Budget(max_steps=300))
    budget = Budget(max_steps=1000)
    clock = BudgetClock(budget)
    run = simulate_within(specs, SimConfig(), budget, clock)
    assert clock.steps == len(run.steps) == 400  # colocated: no run is cut short
    assert_same_run(run, simulate(specs, SimConfig(), step_by_step=True))


def test_a_cost_model_of_another_form_is_priced_step_by_step():
    """A cost model whose decode steps are not batch terms + context x kv_s (here: a context
    penalty that grows faster) is noticed on the first run and priced step by step: exact."""
    from sim.cluster.topologies import Cluster

    class Quadratic(StepCostModel):
        __slots__ = ()

        def step_cost(self, prefill_chunks, num_decodes, decode_context_tokens):
            c = super().step_cost(prefill_chunks, num_decodes, decode_context_tokens)
            extra = 1e-12 * decode_context_tokens**2
            return type(c)(
                c.seconds + extra,
                c.compute_s,
                c.memory_s + extra,
                c.overhead_s,
                c.comm_s,
                c.flops,
                c.bytes,
            )

    config = SimConfig()
    cost = Quadratic(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"))
    assert Cluster(config, cost).fast
    specs = [RequestSpec(i, 0.01 * i, 200, 300) for i in range(6)]
    with pytest.warns(RuntimeWarning, match="pricing runs step by step"):
        fast = simulate(specs, config, cost_model=cost)
    assert_same_run(fast, simulate(specs, config, cost_model=cost, step_by_step=True))


@pytest.mark.parametrize(
    "knobs",
    [
        {},  # vLLM V1 on an H100 as served: 8,192-token budget, 1,024 seats
        {"kv_capacity_tokens": "60000"},  # KV pressure: runs end where a decode would preempt
        {"max_num_seqs": "12"},  # seats: requests wait while a run goes on
        {"enable_chunked_prefill": "false", "max_num_batched_tokens": "16384"},  # whole prompts
    ],
)
def test_admission_steps_ride_in_runs(monkeypatch, azure_conv_300, knobs):
    """A busy server admits a request every few steps. The admitting step joins the run
    (sim/fastforward/admission.py) instead of ending it, every way extend can go is taken (a prompt
    admitted into the run, a plain step decided by the policy, a step handed back: a long
    prompt's first chunk, a one-token request; the run ending at KV pressure or an idle
    server), and the trace is still step by step's exactly."""
    import sim.cluster.worker
    from sim.fastforward.decode_run import DecodeRun

    specs = []
    for r in azure_conv_300:
        prompt, output, group, prefix = r.prompt_tokens, r.output_tokens, "", 0
        if r.request_id % 25 == 7:
            prompt = 12_000  # over the 8,192-token budget: chunked, handed back
        if r.request_id % 30 == 11:
            output = 1  # finishes in the step that admits it: handed back
        if r.request_id % 4 == 0:
            group, prefix = "system", min(prompt, 600)  # shared prefix: cache hits on admission
        specs.append(RequestSpec(r.request_id, r.arrival_s, prompt, output, 0, group, prefix))
    outcomes = Counter()
    extend = sim.cluster.worker.extend

    def counting(run):
        k = run.k
        out = extend(run)
        if out is True:
            admitted = run.mixed_steps and run.mixed_steps[-1] == k + 1
            outcomes["admitted" if admitted else "plain"] += 1
        else:
            outcomes["handed back" if out is not None else "ended"] += 1
        return out

    runs = []
    finish = DecodeRun.finish
    monkeypatch.setattr(sim.cluster.worker, "extend", counting)
    monkeypatch.setattr(DecodeRun, "finish", lambda self: runs.append(self) or finish(self))
    config = with_overrides(SimConfig(), knobs)
    fast = simulate(specs, config)
    assert_same_run(fast, simulate(specs, config, step_by_step=True))
    assert outcomes["admitted"] and outcomes["plain"] and outcomes["ended"], outcomes
    if knobs:
        return  # (the squeezed servers: exactness is the point)
    assert outcomes["handed back"], outcomes
    admitting = int((fast.steps.prefill_tokens > 0).sum())
    assert outcomes["admitted"] > admitting / 2  # most admissions ride in a run ...
    assert len(runs) < admitting / 5  # ... so runs are few, far fewer than admitting steps


def test_the_run_budget_stops_a_run_that_goes_on_through_arrivals(azure_conv_300):
    """A run that carries admission steps may last the whole simulation: the run budget still
    stops it within one plan of its step cap (not when the run finally ends)."""
    from sim.fastforward.decode_run import MAX_RUN_STEPS
    from sim.runs.budget import Budget, BudgetClock, BudgetExceeded, simulate_within

    budget = Budget(max_steps=1_000)
    clock = BudgetClock(budget)
    with pytest.raises(BudgetExceeded, match="1,000 engine steps"):
        simulate_within(azure_conv_300, SimConfig(), budget, clock)
    assert 1_000 < clock.steps <= 1_000 + MAX_RUN_STEPS
    full = simulate(azure_conv_300, SimConfig())
    assert len(full.steps) > 2 * 1_000  # (the cap really cut the run short)


@pytest.mark.parametrize("seed", range(6))
def test_the_steps_of_runs_go_where_a_stable_sort_puts_them(seed):
    """The steps table merges the runs' rows with the other steps' by end time: the same rows in
    the same places as a stable sort of both (ties: the other steps first), whether the two
    are each in order already (one worker: a merge) or not (several workers' runs interleave)."""
    from sim.core.recorder import _merge_order

    rng = np.random.default_rng(seed)
    steps = np.round(rng.uniform(0, 5, rng.integers(0, 40)), 1)  # rounded: many ties
    runs = np.round(rng.uniform(0, 5, rng.integers(1, 60)), 1)
    if seed % 2:
        steps, runs = np.sort(steps), np.sort(runs)
    at_steps, at_runs = _merge_order(steps, runs)
    order = np.argsort(np.concatenate((steps, runs)), kind="stable")
    placed = np.empty(len(order), dtype=np.intp)
    placed[order] = np.arange(len(order))
    assert at_steps.tolist() == placed[: len(steps)].tolist()
    assert at_runs.tolist() == placed[len(steps) :].tolist()
