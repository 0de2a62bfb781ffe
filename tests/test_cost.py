"""Hardware catalog and roofline cost model, checked against the reference's hand numbers (§5)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cost.hardware import (
    GPUS,
    LINKS_GB_S,
    MODELS,
    GpuSpec,
    ModelSpec,
    custom_gpu,
    get_gpu,
    get_model,
    kv_capacity_tokens,
    kv_transfer_s,
)
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile, StepCost

KIB = 1024
# §5.8 uses one MFU for linear layers and attention, MBU 0.75, and quotes times before overhead.
WORKED = DeviceProfile(mfu=0.55, mfu_attn=0.55, mbu=0.75, overhead_s=0.0)


@pytest.fixture
def h100_8b() -> StepCostModel:
    return StepCostModel(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"), profile=WORKED)


# ---- hardware.py -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params_b", "weights_gb", "kv_kib"),
    [
        ("Llama-3.1-8B", 8.03, 16.1, 128),
        ("Llama-3.3-70B", 70.55, 141.1, 320),
        ("Qwen2.5-0.5B", 0.49, 0.99, 12),
        ("Qwen2.5-7B", 7.62, 15.2, 56),
        ("Mistral-7B", 7.25, 14.5, 128),
        ("SmolLM2-135M", 0.135, 0.27, 22.5),
    ],
)
def test_model_table(name: str, params_b: float, weights_gb: float, kv_kib: float) -> None:
    m = get_model(name)
    assert m.params_total / 1e9 == pytest.approx(params_b, abs=0.006)
    assert m.weight_bytes / 1e9 == pytest.approx(weights_gb, abs=0.06)
    assert m.kv_bytes_per_token == kv_kib * KIB


def test_per_token_flop_constants() -> None:
    m = get_model("Llama-3.1-8B")
    assert m.flops_per_token_body / 1e9 == pytest.approx(13.96, abs=0.01)
    assert m.flops_lm_head_per_token / 1e9 == pytest.approx(1.05, abs=0.01)
    assert m.attn_flops_per_ctx_token / 1e6 == pytest.approx(0.524, abs=0.001)
    qwen = get_model("Qwen2.5-0.5B")  # tied: the V·d matrix is stored once but read for logits
    assert qwen.params_body / 1e9 == pytest.approx(0.36, abs=0.005)
    assert qwen.params_total == qwen.params_body + qwen.params_lm_head


def test_catalog_lookup() -> None:
    assert list(GPUS)[:5] == ["A100-80GB", "H100-SXM", "H200", "L4", "RTX-4090"]
    assert {"RTX-PRO-6000", "B200", "A10G", "L40S"} <= set(GPUS)
    assert list(MODELS)[:2] == ["Llama-3.1-8B", "Llama-3.3-70B"] and len(MODELS) == 17
    assert get_gpu("h100-sxm") is GPUS["H100-SXM"]
    assert get_model("  qwen2.5-0.5b ") is MODELS["Qwen2.5-0.5B"]
    with pytest.raises(ValueError, match="A100-80GB, H100-SXM"):
        get_gpu("MI300X")
    with pytest.raises(ValueError, match="Llama-3.1-8B"):
        get_model("gpt-5")
    with pytest.raises(TypeError):
        GPUS["x"] = GPUS["L4"]  # type: ignore[index]


def test_validation() -> None:
    assert custom_gpu(1.0, 50.0, 64.0).name == "custom"
    for bad in (0, -1, math.nan, math.inf):
        with pytest.raises(ValueError, match="bf16_tflops"):
            custom_gpu(bad, 50.0, 64.0)
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        ModelSpec("x", 2, 64, 6, 4, 16, 128, 100, False)
    with pytest.raises(ValueError, match="layers"):
        ModelSpec("x", 0, 64, 4, 4, 16, 128, 100, False)
    with pytest.raises(ValueError, match="mbu"):
        DeviceProfile(mbu=1.2)
    with pytest.raises(ValueError, match="overhead_s"):
        DeviceProfile(overhead_s=-1)
    assert isinstance(GPUS["H200"], GpuSpec)


def test_kv_capacity() -> None:
    h100, llama8 = get_gpu("H100-SXM"), get_model("Llama-3.1-8B")
    tokens = kv_capacity_tokens(h100, llama8)
    # 0.9 of the 79.15 GiB the CUDA runtime reports (the datasheet's "80 GB" is 80 GiB, of
    # which the driver keeps some), less the generic 1 GB reserve and the weights
    expected = (0.9 * 79.15 * 2**30 - 1e9 - llama8.weight_bytes) / (128 * KIB)
    assert tokens == math.floor(expected)
    assert kv_capacity_tokens(h100, llama8, tensor_parallel=2) > 2 * tokens
    with pytest.raises(ValueError, match=r"141 GB of weights\) does not fit on 1×H200; set tens"):
        kv_capacity_tokens(get_gpu("H200"), get_model("Llama-3.3-70B"))
    assert kv_capacity_tokens(get_gpu("H200"), get_model("Llama-3.3-70B"), tensor_parallel=2) > 0


def test_kv_transfer() -> None:
    llama8 = get_model("Llama-3.1-8B")  # §2.4: 10k tokens = 1.31 GB
    assert kv_transfer_s(10_000, llama8, LINKS_GB_S["NVLink4"]) == pytest.approx(2.9e-3, rel=0.01)
    assert kv_transfer_s(10_000, llama8, LINKS_GB_S["100GbE"]) == pytest.approx(0.105, rel=0.01)
    assert kv_transfer_s(0, llama8, 50.0, latency_s=0.001) == 0.001
    with pytest.raises(ValueError):
        kv_transfer_s(10, llama8, 0.0)


# ---- roofline.py: the §5.8 worked example ----------------------------------------------------


def test_worked_decode(h100_8b: StepCostModel) -> None:
    cost = h100_8b.step_cost((), 32, 32 * 2048)
    assert cost.seconds == pytest.approx(9.4e-3, rel=0.02)
    assert cost.bytes / 1e9 == pytest.approx(23.6, rel=0.01)
    assert cost.flops / 1e12 == pytest.approx(0.51, rel=0.02)
    assert cost.memory_s > cost.compute_s


def test_worked_prefill(h100_8b: StepCostModel) -> None:
    cost = h100_8b.step_cost([(2048, 0, True)], 0, 0)
    assert cost.flops / 1e12 == pytest.approx(29.7, rel=0.01)
    assert cost.seconds == pytest.approx(0.055, rel=0.02)
    assert h100_8b.prefill_s(2048) == cost.seconds


def test_worked_mixed_and_unchunked(h100_8b: StepCostModel) -> None:
    mixed = h100_8b.step_cost([(2048, 0, True)], 32, 32 * 2048)
    assert mixed.seconds == pytest.approx(0.060, rel=0.02)
    assert mixed.seconds / h100_8b.decode_step_s(32, 2048) > 5  # Sarathi's "slowdown"
    assert h100_8b.prefill_s(16384) == pytest.approx(0.55, rel=0.02)


def test_knee() -> None:
    llama = get_model("Llama-3.1-8B")
    for gpu, knee in (("H100-SXM", 295), ("A100-80GB", 153), ("H200", 206), ("L4", 403)):
        assert StepCostModel(get_gpu(gpu), llama).knee_tokens() == pytest.approx(knee, abs=1)
    profile = DeviceProfile(mfu=0.5, mbu=0.5)
    model = StepCostModel(get_gpu("H100-SXM"), llama, profile=profile)
    assert model.knee_tokens(effective=True) == pytest.approx(model.knee_tokens())


def test_memory_bound_below_knee_compute_bound_above() -> None:
    m = StepCostModel(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"))
    decode = m.step_cost((), 64, 64 * 1000)
    assert decode.memory_s > decode.compute_s
    prefill = m.step_cost([(4096, 0, True)], 0, 0)
    assert prefill.compute_s > prefill.memory_s
    # Below the knee a small chunk rides along nearly free; above it, time grows with tokens.
    base = m.decode_step_s(32, 1000)
    assert m.step_cost([(64, 0, False)], 32, 32_000).seconds < 1.05 * base
    assert m.step_cost([(2048, 0, False)], 32, 32_000).seconds > 3 * base


def test_parts_add_up_and_overhead() -> None:
    m = StepCostModel(get_gpu("L4"), get_model("Qwen2.5-0.5B"), profile=DeviceProfile())
    c = m.step_cost([(300, 100, True), (7, 0, False)], 5, 900)
    assert isinstance(c, StepCost)
    assert c.seconds == pytest.approx(c.overhead_s + c.compute_s + c.memory_s + c.comm_s)
    assert c.overhead_s == 0.003 and c.comm_s == 0.0
    with pytest.raises(AttributeError):
        c.seconds = 1.0  # type: ignore[misc]


def test_bad_steps() -> None:
    m = StepCostModel(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"))
    with pytest.raises(ValueError, match="empty step"):
        m.step_cost((), 0, 0)
    with pytest.raises(ValueError, match="tokens >= 1"):
        m.step_cost([(0, 5, True)], 1, 10)
    with pytest.raises(ValueError, match=">= 0"):
        m.step_cost((), -1, 0)
    with pytest.raises(ValueError, match="tensor_parallel"):
        StepCostModel(get_gpu("H100-SXM"), get_model("Llama-3.1-8B"), tensor_parallel=0)


def test_tensor_parallel_halves_big_prefill() -> None:
    gpu, llama = get_gpu("H100-SXM"), get_model("Llama-3.1-8B")
    one = StepCostModel(gpu, llama, 1, WORKED).step_cost([(8192, 0, True)], 0, 0)
    two = StepCostModel(gpu, llama, 2, WORKED).step_cost([(8192, 0, True)], 0, 0)
    assert two.comm_s > 0 and one.comm_s == 0
    assert 0.5 < two.seconds / one.seconds < 0.6
    assert two.flops == pytest.approx(one.flops)  # totals over the GPUs don't change


# ---- properties ------------------------------------------------------------------------------

chunks_st = st.lists(
    st.tuples(st.integers(1, 8192), st.integers(0, 32768), st.booleans()), max_size=4
)
names_st = st.sampled_from(list(MODELS))
gpus_st = st.sampled_from(list(GPUS))


@settings(max_examples=200, deadline=None)
@given(
    chunks_st,
    st.integers(0, 256),
    st.integers(0, 4096),
    st.integers(1, 1000),
    names_st,
    gpus_st,
    st.sampled_from([1, 2, 4, 8]),
)
def test_monotonic(chunks, decodes, ctx, extra, model, gpu, tp) -> None:
    m = StepCostModel(get_gpu(gpu), get_model(model), tp)
    if not chunks and decodes == 0:
        decodes = 1
    ctx_total = decodes * ctx
    base = m.step_cost(chunks, decodes, ctx_total).seconds
    assert base > 0
    assert m.step_cost(chunks, decodes + 1, ctx_total + ctx).seconds >= base  # one more decode
    if decodes:
        assert m.step_cost(chunks, decodes, ctx_total + extra).seconds >= base  # longer contexts
    if chunks:
        c, s, smp = chunks[0]
        longer = [(c + extra, s, smp), *chunks[1:]]
        later = [(c, s + extra, smp), *chunks[1:]]
        assert m.step_cost(longer, decodes, ctx_total).seconds >= base
        assert m.step_cost(later, decodes, ctx_total).seconds >= base


@settings(max_examples=200, deadline=None)
@given(
    chunks_st,
    st.integers(0, 128),
    st.integers(0, 8192),
    names_st,
    gpus_st,
    st.sampled_from([1, 2, 8]),
    st.tuples(*[st.floats(0.05, 1.0)] * 3),
    st.floats(0, 0.01),
)
def test_terms_match_step_cost(chunks, decodes, ctx, model, gpu, tp, effs, overhead) -> None:
    profile = DeviceProfile(*effs, overhead_s=overhead)
    m = StepCostModel(get_gpu(gpu), get_model(model), tp, profile)
    if not chunks and decodes == 0:
        decodes = 1
    expected = m.step_cost(chunks, decodes, decodes * ctx).seconds
    assert m.terms(chunks, decodes, decodes * ctx).seconds(profile) == pytest.approx(expected)
