"""Speculative decoding in the simulator: the acceptance model, the verify's price, the run."""

from __future__ import annotations

import math

import pytest

from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.core.speculation import TABLES, AcceptanceTable, DrawnSpeculator, acceptance_table
from sim.cost.hardware import get_gpu, get_model
from sim.cost.roofline import StepCostModel


def test_draws_reproduce_and_follow_the_table():
    """Draws are a pure function of (seed, request, event); over many, position i is accepted
    as often as the table says (binomial: 20,000 draws give a standard error under 0.0036, so
    0.02 is over 5 of them)."""
    table = TABLES["eagle3-llama3.1-8b"]
    s = DrawnSpeculator(table, 3, seed=7)
    assert s.draws_for(4, 50) == DrawnSpeculator(table, 3, seed=7).draws_for(4, 50)
    assert s.draws_for(4, 50) != DrawnSpeculator(table, 3, seed=8).draws_for(4, 50)
    n = 20_000
    accepted = [s.draw(r, j)[0] for r in range(200) for j in range(n // 200)]
    for position, rate in enumerate(table.rates, 1):
        share = sum(a >= position for a in accepted) / n
        assert share == pytest.approx(rate, abs=0.02), position
    assert {s.draw(1, j)[1] for j in range(100)} == {3}  # always k drafts (V2 model runner)


def test_tables_past_their_length_keep_the_last_ratio():
    t = AcceptanceTable("x", (0.8, 0.4), "test")
    assert t.rate(3) == pytest.approx(0.2)
    assert t.mean_accepted(3) == pytest.approx(1.4)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("0.5,0.9", "must not increase"),
        ("1.5", "must be in [0, 1]"),
        ("abc", "spec_acceptance must name a table"),
        ("0.5@2", "propose must be in [0, 1]"),
    ],
)
def test_bad_acceptance_says_what_to_change(spec, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        acceptance_table(spec, "ngram")


def test_a_verify_is_priced_as_its_positions():
    """A verify of 1 + k tokens sends every position to the lm_head: it costs more than a decode
    (k more tokens through the layers and the lm_head) but, at batch 1 on a GPU, far less than
    k + 1 decodes (the weights are read once)."""
    cost = StepCostModel(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"))
    decode = cost.step_cost((), 1, 1000).seconds
    verify = cost.step_cost(((4, 1000, 4),), 0, 0).seconds
    as_prompt_chunk = cost.step_cost(((4, 1000, True),), 0, 0).seconds
    assert decode < as_prompt_chunk < verify < 1.2 * decode


def _tpot(batch: int, **knobs) -> float:
    reqs = [RequestSpec(i, 0.0, 200, 64) for i in range(batch)]
    config = with_overrides(
        SimConfig(policy="vllm"), {"max_num_seqs": 1024, "max_num_batched_tokens": 8192, **knobs}
    )
    run = simulate(reqs, config)
    return float(run.requests.tpot_s.median()), run.meta


def test_speculation_pays_at_batch_one_and_reports_its_acceptance():
    off, meta_off = _tpot(1)
    on, meta = _tpot(1, speculative="eagle")
    assert "speculation" not in meta_off
    spec = meta["speculation"]
    # 63 tokens after the first: the mean tokens per verify is 1 + accepted drafts per verify
    assert spec["tokens_per_verify"] == pytest.approx(1 + spec["accepted"] / spec["verify_steps"])
    assert 0 < spec["acceptance_rate"] < 1
    assert on < off / 1.5  # ~2.6 tokens per verify at nearly a decode step's price


def test_a_weak_drafter_hurts_a_large_batch():
    """Past the knee a verify's extra tokens cost compute: with vLLM-like low acceptance, 256
    requests decode slower with speculation than without."""
    off, _ = _tpot(256)
    on, meta = _tpot(256, speculative="eagle", spec_acceptance="0.5,0.25,0.12")
    assert meta["speculation"]["acceptance_rate"] < 0.35
    assert on > off
    assert math.isfinite(on)


@pytest.mark.parametrize("method", ["draft", "eagle"])
def test_a_drafter_is_priced_like_its_target_roofline_or_kernel_tables(method):
    """The drafter's passes come from the same source as the target's step: with step_costs=
    kernels, the draft model's (or EAGLE head's) own GEMMs from the H100's measured tables."""
    from sim.cost.draft_cost import DraftCost
    from sim.cost.kernel_tables import kernel_times

    gpu, model = get_gpu("H100-SXM"), get_model("Llama-3.1-8B")
    roof = DraftCost.for_method(method, 3, StepCostModel(gpu, model), "Llama-3.2-1B")
    kernels = kernel_times(gpu.name, model)
    assert kernels is not None  # the H100 has tables for this shape
    measured = DraftCost.for_method(
        method, 3, StepCostModel(gpu, model, kernels=kernels), "Llama-3.2-1B"
    )
    assert roof.drafter.kernels is None
    assert measured.drafter.kernels is not None and measured.drafter.kernels.linear is not None
    assert measured.drafter.model.name == roof.drafter.model.name  # the drafter's own shape
    batch = type("B", (), {"num_decodes": 32, "decode_context_tokens": 32 * 1000})()
    batch.prefill_chunks = ()
    t_roof, t_measured = roof.timing(batch).seconds, measured.timing(batch).seconds
    assert t_roof > 0 and t_measured > 0 and t_measured != pytest.approx(t_roof, rel=1e-3)
    assert DraftCost.for_method("ngram", 3, StepCostModel(gpu, model), "Llama-3.2-1B") is None


def test_speculation_runs_on_kernel_tables():
    on, meta = _tpot(8, speculative="draft", step_costs="kernels")
    off, _ = _tpot(8, step_costs="kernels")
    assert meta["speculation"]["verify_steps"] > 0 and 0 < on < off
