"""Routed experts computed in whole row tiles (sim/cost/roofline.py MOE_BLOCK_ROWS, `moe_rows`).

A grouped-GEMM MoE kernel pads each expert's tokens to a whole tile, so an expert that got a few
tokens costs a tile's FLOPs. These tests pin what that means for a step's time: prefill chunks
whose tokens spread thin over the experts pay for the padding, large ones hardly do, decode stays
memory-bound with the context term last (sim/fastforward/steps.py's DecodeTerms), and the
calibration terms agree with step_cost.
"""

from __future__ import annotations

import math

import pytest

from sim.cost.hardware import get_gpu, get_model
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import MOE_BLOCK_ROWS, DeviceProfile, moe_rows

# No overheads, so step times are the operators alone.
BARE = DeviceProfile(mfu=0.5, mfu_attn=0.4, mbu=0.7, overhead_s=0.0)


def test_rows_are_whole_tiles_and_never_fewer_than_the_routed_rows():
    # 10 experts with 5 rows each: one tile each.
    assert moe_rows(50, 10) == pytest.approx(10 * MOE_BLOCK_ROWS)
    # Many tiles per expert: about half a tile of padding each, i.e. within 1% at 50 tiles.
    useful = 10 * 50 * MOE_BLOCK_ROWS
    assert moe_rows(useful, 10) == pytest.approx(useful + 10 * MOE_BLOCK_ROWS / 2)
    for useful, touched in ((1, 1), (7, 3.5), (1e5, 128), (64, 64)):
        assert moe_rows(useful, touched) >= useful


def test_thin_moe_prefill_computes_padded_tiles():
    """Qwen3-30B-A3B (128 experts, top 8): a 256-token chunk gives each expert 16 routed rows on
    average, all padded to one 64-row tile: the expert GEMMs compute ~4x their useful FLOPs. The
    FLOP count reported stays the useful one."""
    model = get_model("Qwen3-30B-A3B")
    gpu = get_gpu("H100-SXM")
    cost = StepCostModel(gpu, model, 1, BARE)
    m = model.moe
    tokens = 256
    touched = m.num_experts * (1 - (1 - m.experts_per_token / m.num_experts) ** tokens)
    useful = tokens * m.experts_per_token
    padded = moe_rows(useful, touched)
    assert padded == pytest.approx(MOE_BLOCK_ROWS * touched, rel=1e-9)  # one tile per expert
    assert 3.5 < padded / useful < 4.5
    # The routed experts' operator (second linear term, at 100% efficiency) computes the padded
    # rows at the weights' matmul peak.
    peak = gpu.matmul_tflops(model.bytes_per_param) * 1e12
    expert_compute, _ = cost.terms(((tokens, 0, True),), 0, 0).linear[1]
    assert expert_compute == pytest.approx(padded * 2 * model.params_expert / peak, rel=1e-9)
    step = cost.step_cost(((tokens, 0, True),), 0, 0)
    assert step.flops == pytest.approx(
        tokens * model.flops_per_token_body
        + model.flops_lm_head_per_token
        + tokens * (tokens + 1) // 2 * model.attn_flops_per_ctx_token,
        rel=1e-9,
    )


def test_padding_slows_a_compute_bound_moe_step():
    """At 4096 tokens the experts get 256 rows each (4 tiles + half a tile of padding): the step
    is compute-bound and its expert compute is 1.125x the useful FLOPs' time."""
    model = get_model("Qwen3-30B-A3B")
    gpu = get_gpu("H100-SXM")
    cost = StepCostModel(gpu, model, 1, BARE)
    tokens = 4096
    useful = tokens * model.moe.experts_per_token
    expert_compute, expert_memory = cost.terms(((tokens, 0, True),), 0, 0).linear[1]
    assert expert_compute / BARE.mfu > expert_memory / BARE.mbu  # compute-bound
    peak = gpu.matmul_tflops(model.bytes_per_param) * 1e12
    assert expert_compute / (useful * 2 * model.params_expert / peak) == pytest.approx(
        1.125, rel=1e-6
    )


def test_large_prefill_pays_little_padding():
    model = get_model("Qwen3-30B-A3B")
    m = model.moe
    useful = 16384 * m.experts_per_token  # 1024 rows per expert: 16 tiles each
    assert moe_rows(useful, m.num_experts) / useful == pytest.approx(1 + 0.5 / 16, rel=1e-9)


def test_dense_models_are_unchanged_and_decode_keeps_the_fast_forward_form():
    """Decode-only MoE steps stay memory-bound, with the context term added last: a step's time
    is affine in decode_context_tokens with slope decode_kv_s_per_token."""
    cost = StepCostModel(get_gpu("H200"), get_model("Qwen3-235B-A22B:fp8:kv-fp8"), 2, BARE)
    for batch in (1, 4, 16, 64):
        a = cost.step_cost((), batch, batch * 1000)
        b = cost.step_cost((), batch, batch * 3000)
        slope = (b.seconds - a.seconds) / (batch * 2000)
        assert slope == pytest.approx(cost.decode_kv_s_per_token, rel=1e-6)
        assert a.compute_s == 0.0  # memory-bound: padding adds no time to a decode step


@pytest.mark.parametrize(
    ("model", "tp", "chunks", "decodes", "context"),
    [
        ("Qwen3-30B-A3B", 1, ((256, 0, True),), 0, 0),
        ("Qwen3-30B-A3B", 2, ((2048, 512, True),), 8, 9000),
        ("Qwen3-235B-A22B:fp8", 4, ((40, 0, False),), 30, 40000),
        ("Llama-3.1-8B", 1, ((512, 0, True),), 4, 4000),
    ],
)
def test_calibration_terms_match_step_cost(model, tp, chunks, decodes, context):
    cost = StepCostModel(get_gpu("H100-SXM"), get_model(model), tp, BARE)
    step = cost.step_cost(chunks, decodes, context).seconds
    terms = cost.terms(chunks, decodes, context).seconds(BARE)
    assert math.isclose(step, terms, rel_tol=1e-9)
