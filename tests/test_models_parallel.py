"""Any Hugging Face model (dense, MoE, MLA), tensor / data / expert parallelism, fitted profiles.

The config.json files under tests/data/hf/ are hand-written from the public configs (facts about
the models' shapes); the parameter counts below are the ones the model cards publish.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from sim.cli import main
from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.cost.hardware import (
    MODELS,
    get_gpu,
    get_model,
    kv_capacity_tokens,
)
from sim.cost.hf_config import model_from_hf_config
from sim.cost.profiles import FITTED, GENERIC, fitted_profile, resolve_profile
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile

HF = Path(__file__).parent / "data" / "hf"
FLAT = DeviceProfile(mfu=0.5, mfu_attn=0.5, mbu=0.8, overhead_s=0.0)


# ---- config.json -> ModelSpec ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("folder", "total_b", "active_b", "catalog"),
    [
        ("llama-3.1-8b", 8.03, 6.98, "Llama-3.1-8B"),
        ("mixtral-8x7b", 46.7, 12.6, "Mixtral-8x7B"),  # model card: 46.7B, 12.9B with embeddings
        ("qwen3-30b-a3b", 30.5, 2.73, "Qwen3-30B-A3B"),  # 30.5B, 3.3B activated with embeddings
        ("qwen1.5-moe-a2.7b", 14.3, 2.07, None),  # 14.3B, 2.7B activated with embeddings
        ("deepseek-v2-lite", 15.7, 2.24, "DeepSeek-V2-Lite"),  # 15.7B, 2.4B activated
    ],
)
def test_hf_configs_load(folder: str, total_b: float, active_b: float, catalog) -> None:
    m = get_model(str(HF / folder))  # a folder works, and so does its config.json
    assert get_model(str(HF / folder / "config.json")) == m
    assert m.params_total / 1e9 == pytest.approx(total_b, abs=0.05)
    assert m.params_active / 1e9 == pytest.approx(active_b, abs=0.02)
    if catalog:  # the catalog entry is the same shape
        assert dataclasses.replace(m, name=catalog) == MODELS[catalog]


def test_moe_fields() -> None:
    mixtral = get_model(str(HF / "mixtral-8x7b"))
    assert (mixtral.moe.num_experts, mixtral.moe.experts_per_token) == (8, 2)
    assert mixtral.moe.expert_intermediate == 14336  # Mixtral's experts use intermediate_size
    qwen2 = get_model(str(HF / "qwen1.5-moe-a2.7b"))
    assert qwen2.moe.shared_intermediate == 5632 and qwen2.moe.dense_layers == 0
    ds = get_model(str(HF / "deepseek-v2-lite"))
    assert ds.moe.shared_intermediate == 2 * 1408 and ds.moe.dense_layers == 1
    # MLA caches one latent (512) + the shared RoPE key (64) per layer, not 2·H·d_h.
    assert ds.kv_bytes_per_token == 27 * (512 + 64) * 2
    assert ds.kv_replication(2) == 2  # every tensor-parallel rank holds the whole latent


def test_dtype_and_quantization() -> None:
    fp8 = get_model(str(HF / "qwen3-32b-fp8"))
    assert fp8.bytes_per_param == 1 and fp8.dtype == "fp8"
    bf16 = get_model("Qwen3-32B")
    # Body halves; embeddings and lm_head stay BF16.
    head = 2 * bf16.vocab * bf16.hidden * 2
    assert fp8.weight_bytes == pytest.approx((bf16.weight_bytes - head) / 2 + head)
    assert get_model("Llama-3.1-70B:fp8").bytes_per_param == 1
    assert get_model("llama-3.1-70b:FP4").bytes_per_param == 0.5
    assert get_model(f"{HF / 'llama-3.1-8b'}:fp8").name == "Llama-3.1-8B:fp8"
    # FP8 weights run on FP8 tensor cores where the GPU has them, else at the BF16 rate.
    assert get_gpu("H100-SXM").matmul_tflops(1) == 1979
    assert get_gpu("A100-80GB").matmul_tflops(1) == 312
    assert get_gpu("B200").matmul_tflops(0.5) == 9000


def test_four_bit_weights_carry_their_block_scales() -> None:
    # NVFP4 (the catalog's :fp4) stores one FP8 scale per 16 weights: 4.5 bits a body weight,
    # so its weights are 9/16 of FP8's, not 1/2, and a memory-bound decode step reads that much.
    fp8, fp4 = get_model("Llama-3.1-70B:fp8"), get_model("Llama-3.1-70B:fp4")
    head = 2 * fp8.vocab * fp8.hidden * 2  # embeddings + lm_head, BF16 in both
    assert fp4.stored_bytes_per_param == pytest.approx(0.5 + 1 / 16)
    assert fp4.weight_bytes - head == pytest.approx((fp8.weight_bytes - head) * 9 / 16, rel=1e-6)
    b200 = get_gpu("B200")
    step = {
        name: StepCostModel(b200, m, 1, FLAT).step_cost((), 1, 0).memory_s
        for name, m in (("fp8", fp8), ("fp4", fp4))
    }
    assert step["fp4"] / step["fp8"] == pytest.approx(
        ((fp8.weight_bytes - head) * 9 / 16 + head / 2) / ((fp8.weight_bytes - head) + head / 2),
        rel=0.01,
    )  # (a decode reads the lm_head, not the embeddings)
    # Hugging Face configs say which 4-bit format: MXFP4 (gpt-oss) one E8M0 scale per 32,
    # NVFP4 one FP8 per 16, GPTQ/AWQ one FP16 per group (none when per channel).
    base = json.loads((HF / "llama-3.1-8b/config.json").read_text())
    scales = {
        "mxfp4": {"quant_method": "mxfp4"},
        "modelopt": {"quant_method": "modelopt", "quant_algo": "NVFP4"},
        "compressed": {
            "quant_method": "compressed-tensors",
            "config_groups": {
                "group_0": {"weights": {"num_bits": 4, "type": "float", "group_size": 16}}
            },
        },
        "gptq": {"quant_method": "gptq", "bits": 4, "group_size": 128},
        "awq-channel": {"quant_method": "awq", "bits": 4, "group_size": -1},
    }
    got = {
        k: model_from_hf_config({**base, "quantization_config": q}).scale_bytes_per_param
        for k, q in scales.items()
    }
    assert got == {
        "mxfp4": 1 / 32,
        "modelopt": 1 / 16,
        "compressed": 1 / 16,
        "gptq": 2 / 128,
        "awq-channel": 0.0,
    }
    assert get_model(str(HF / "qwen3-32b-fp8")).scale_bytes_per_param == 0.0


def test_weight_only_formats_multiply_at_bf16() -> None:
    # GPTQ/AWQ (W4A16) dequantize in the kernel: no FP4 tensor cores even where the GPU has
    # them, so a prefill costs the BF16 rate; NVFP4 (W4A4) gets the FP4 rate on Blackwell, and
    # on an H100 (no FP4 tensor cores) is dequantized too: the BF16 rate, not FP8's.
    pro, h100 = get_gpu("RTX-PRO-6000"), get_gpu("H100-SXM")
    int4, fp4 = get_model("Llama-3.1-8B:int4"), get_model("Llama-3.1-8B:fp4")
    assert int4.matmul_bytes_per_param == 2 and fp4.matmul_bytes_per_param == 0.5
    assert pro.matmul_tflops(int4.matmul_bytes_per_param) == pro.bf16_tflops
    assert pro.matmul_tflops(fp4.matmul_bytes_per_param) == pro.fp4_tflops == 2015
    assert h100.matmul_tflops(0.5) == h100.bf16_tflops
    prefill = {
        m.name: StepCostModel(pro, m, 1, FLAT).prefill_s(8192)
        for m in (int4, fp4, get_model("Llama-3.1-8B"))
    }
    assert prefill["Llama-3.1-8B:int4"] == pytest.approx(prefill["Llama-3.1-8B"], rel=0.02)
    assert prefill["Llama-3.1-8B:fp4"] < prefill["Llama-3.1-8B"] / 2
    base = json.loads((HF / "llama-3.1-8b/config.json").read_text())

    def matmul(q: dict) -> float:
        return model_from_hf_config({**base, "quantization_config": q}).matmul_bytes_per_param

    w4a8 = {
        "quant_method": "compressed-tensors",
        "config_groups": {
            "g": {
                "weights": {"num_bits": 4, "type": "int", "group_size": 128},
                "input_activations": {"num_bits": 8, "type": "float"},
            }
        },
    }
    assert matmul({"quant_method": "gptq", "bits": 4, "group_size": 128}) == 2
    assert matmul({"quant_method": "gptq", "bits": 8, "group_size": 128}) == 2
    assert matmul({"quant_method": "mxfp4"}) == 2
    assert matmul(w4a8) == 1
    assert matmul({"quant_method": "fp8"}) == 1
    assert matmul({"quant_method": "modelopt", "quant_algo": "NVFP4"}) == 0.5


def test_bad_configs(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="or give a path to a Hugging Face config.json"):
        get_model(str(tmp_path / "missing"))
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="cannot read"):
        get_model(str(bad))
    with pytest.raises(ValueError, match="num_hidden_layers"):
        model_from_hf_config({"hidden_size": 64})
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        cfg = json.loads((HF / "mixtral-8x7b" / "config.json").read_text())
        del cfg["num_experts_per_tok"]
        model_from_hf_config(cfg)
    with pytest.raises(ValueError, match="unsupported quantization"):
        model_from_hf_config(
            {
                **json.loads((HF / "llama-3.1-8b/config.json").read_text()),
                "quantization_config": {"quant_method": "mystery"},
            }
        )


# ---- MoE costs ---------------------------------------------------------------------------------


def test_expected_experts() -> None:
    m = get_model("Qwen3-30B-A3B")  # 128 experts, top-8
    assert m.expected_experts(1) == pytest.approx(8)
    assert m.expected_experts(2) == pytest.approx(128 * (1 - (1 - 8 / 128) ** 2))
    assert m.expected_experts(2048) == pytest.approx(128)
    assert get_model("Llama-3.1-8B").expected_experts(100) == 0


def test_moe_decode_reads_touched_experts_only() -> None:
    gpu, m = get_gpu("H100-SXM"), get_model("Qwen3-30B-A3B")
    cm = StepCostModel(gpu, m, profile=FLAT)
    one = cm.step_cost((), 1, 100)
    big = cm.step_cost((), 256, 256 * 100)
    expert = m.params_expert * 2
    always = m.weight_bytes - m.expert_weight_bytes - m.vocab * m.hidden * 2  # minus embeddings
    # Batch 1 reads its 8 experts per layer; batch 256 reads (nearly) all 128.
    assert one.bytes == pytest.approx(always + 8 * expert + 101 * m.kv_bytes_per_token, rel=1e-6)
    touched = m.expected_experts(256)
    assert big.bytes == pytest.approx(
        always + touched * expert + 256 * 101 * m.kv_bytes_per_token, rel=1e-6
    )
    assert touched > 127.9
    # FLOPs run on the active experts only: ~2·3.3B per token, not 2·30B.
    assert one.flops / 2 < 3.5e9
    # A dense model of the same total size reads everything even at batch 1.
    dense = StepCostModel(gpu, get_model("Qwen3-32B"), profile=FLAT).step_cost((), 1, 100)
    assert dense.seconds > 5 * one.seconds


# ---- tensor, data and expert parallelism -------------------------------------------------------


def test_tensor_parallel_allreduce_terms() -> None:
    gpu, m = get_gpu("H100-SXM"), get_model("Llama-3.1-70B")
    for tp in (2, 4, 8):
        c = StepCostModel(gpu, m, tp, FLAT).step_cost((), 8, 8 * 1000)
        hop = gpu.link_latency_us * 1e-6
        ring = 2 * (tp - 1) / tp * 8 * m.hidden * 2 / (gpu.interconnect_gb_s * 1e9)
        per_layer = 2 * (ring + 2 * (tp - 1) * hop)  # two all-reduces per layer
        gather = (tp - 1) / tp * 8 * m.vocab * 2 / (gpu.interconnect_gb_s * 1e9) + (tp - 1) * hop
        assert c.comm_s == pytest.approx(m.layers * per_layer + gather)
    # Over PCIe with no NVLink the same all-reduces cost far more.
    pcie = StepCostModel(get_gpu("RTX-PRO-6000"), get_model("Qwen3-32B"), 2, FLAT)
    nvl = StepCostModel(get_gpu("H100-SXM"), get_model("Qwen3-32B"), 2, FLAT)
    assert pcie.step_cost((), 64, 64_000).comm_s > 3 * nvl.step_cost((), 64, 64_000).comm_s


def test_what_tensor_parallel_does_not_speed_up() -> None:
    gpu, m = get_gpu("H100-SXM"), get_model("Llama-3.1-70B")
    profile = DeviceProfile(mfu=0.5, mfu_attn=0.5, mbu=0.8, overhead_s=0.004)
    steps = [StepCostModel(gpu, m, tp, profile).step_cost((), 1, 500) for tp in (2, 4, 8)]
    # Weights split 2x per doubling, but overhead stays and the collectives' latency grows:
    for a, b in zip(steps, steps[1:], strict=False):
        assert b.overhead_s == a.overhead_s == 0.004
        assert b.comm_s > a.comm_s
        assert b.seconds > a.seconds / 2
        assert b.memory_s < a.memory_s
    # Sampling is not split: the lm_head's compute halves, the sampling read does not.
    assert steps[-1].seconds - steps[-1].overhead_s - steps[-1].comm_s > 0


def test_kv_heads_replicated_beyond_their_count() -> None:
    gpu, m = get_gpu("H100-SXM"), get_model("Qwen3-30B-A3B")  # 4 KV heads
    assert m.kv_replication(4) == 1 and m.kv_replication(8) == 2
    t4 = kv_capacity_tokens(gpu, m, 4)
    t8 = kv_capacity_tokens(gpu, m, 8)
    free4 = (0.9 * 79.15 * 2**30 - 1e9) * 4 - m.weight_bytes  # GiB the CUDA runtime reports
    free8 = (0.9 * 79.15 * 2**30 - 1e9) * 8 - m.weight_bytes
    assert t4 == math.floor(free4 / m.kv_bytes_per_token)
    assert t8 == math.floor(free8 / (2 * m.kv_bytes_per_token))


def test_expert_parallel_splits_experts_and_adds_collectives() -> None:
    gpu, m = get_gpu("RTX-PRO-6000"), get_model("Qwen3-30B-A3B")
    alone = StepCostModel(gpu, m, 1, FLAT)
    shared = StepCostModel(gpu, m, 1, FLAT, expert_parallel_instances=2)
    # Half the experts live here, but both instances' tokens pick from them.
    a, b = alone.step_cost((), 4, 4000), shared.step_cost((), 4, 4000)
    assert b.comm_s > 0 == a.comm_s
    local = 64 * (1 - (1 - 8 / 128) ** 8)  # 4 tokens here + 4 in lockstep on the other rank
    expert = m.params_expert * 2
    assert b.bytes - a.bytes == pytest.approx((local - m.expected_experts(4)) * expert, rel=1e-6)
    # Memory: each instance holds half the experts, so more KV fits.
    assert kv_capacity_tokens(gpu, m, expert_shards=2) > kv_capacity_tokens(gpu, m)
    assert StepCostModel(gpu, get_model("Qwen3-32B"), 1, FLAT, 2).expert_parallel_instances == 1


def test_data_parallel_and_expert_parallel_run() -> None:
    specs = [RequestSpec(i, 0.05 * i, 300, 40) for i in range(40)]
    base = SimConfig(policy="vllm")
    cfg = with_overrides(
        base,
        {
            "gpu": "RTX-PRO-6000",
            "model": "Qwen3-30B-A3B",
            "topology": "router",
            "router": "least-loaded",
            "num_instances": 2,
        },
    )
    replicas = simulate(specs, cfg)
    ep = simulate(specs, with_overrides(cfg, {"expert_parallel": "true"}))
    assert set(replicas.requests["worker"]) == {"I0", "I1"}
    assert (replicas.requests["finish_s"] > 0).all() and (ep.requests["finish_s"] > 0).all()
    kv = {w["kv_capacity_tokens"] for w in ep.meta["workers"].values()}
    kv_rep = {w["kv_capacity_tokens"] for w in replicas.meta["workers"].values()}
    assert min(kv) > max(kv_rep)  # half the experts each: more room for KV


def _ep_config(expert_parallel: bool) -> SimConfig:
    return with_overrides(
        SimConfig(policy="vllm"),
        {
            "gpu": "RTX-PRO-6000",
            "model": "Qwen3-30B-A3B",
            "topology": "router",
            "router": "round-robin",
            "num_instances": 2,
            "expert_parallel": str(expert_parallel),
        },
    )


def test_dp_ep_instances_step_together() -> None:
    # Round-robin: I0 gets a stream of long prompts, I1 a few long-running decodes.
    specs = [
        RequestSpec(i, 0.05 * i, 2048 if i % 2 == 0 else 16, 2 if i % 2 == 0 else 60)
        for i in range(24)
    ]
    ep = simulate(specs, _ep_config(True))
    steps = ep.steps
    i0, i1 = steps[steps.worker == "I0"], steps[steps.worker == "I1"]
    # Steps of the two instances never partly overlap: whenever both run, they start and end
    # together.
    shared = 0
    for s1, e1 in zip(i1.start_s, i1.end_s, strict=True):
        over = i0[(i0.start_s < e1) & (i0.end_s > s1)]
        assert ((over.start_s == s1) & (over.end_s == e1)).all()
        shared += len(over)
    assert shared > 10
    # So I1's decode steps wait out I0's 2048-token prefills: they last as long as those,
    # far longer than I1's decode steps beside I0's decodes; the wait is reported as
    # communication (the ranks meet in the MoE collectives).
    prefilling = i1.start_s.isin(i0[i0.prefill_tokens > 0].start_s)
    slowed, other = i1[prefilling & (i1.prefill_tokens == 0)], i1[~prefilling]
    took = lambda t: t.end_s - t.start_s  # noqa: E731
    assert len(slowed) and took(slowed).mean() > 1.5 * took(other).mean()
    assert (slowed.comm_s > 0.3 * took(slowed)).all()
    alone = simulate(specs, _ep_config(False)).steps
    alone = alone[(alone.worker == "I1") & (alone.prefill_tokens == 0)]
    assert took(slowed).mean() > 1.5 * took(alone).mean()  # stepping apart, nobody waits


def test_idle_rank_step_still_costs() -> None:
    # One request on a two-instance DP+EP group: the idle instance runs dummy steps alongside.
    specs = [RequestSpec(0, 0.0, 100, 50)]
    ep = simulate(specs, _ep_config(True))
    steps, req = ep.steps, ep.requests.iloc[0]
    assert set(steps.worker) == {"I0"}  # the dummy steps serve nobody: not in the trace
    cost = StepCostModel(
        get_gpu("RTX-PRO-6000"),
        get_model("Qwen3-30B-A3B"),
        1,
        resolve_profile(SimConfig().hardware, "RTX-PRO-6000", 48),
        2,
    )
    dummy = cost.step_cost((), 1, 0, group_tokens=2)
    # A dummy step reads its share of the experts and pays the step's overheads, like any step.
    assert dummy.memory_s > 0 and dummy.overhead_s > 0
    # The real rank's decode costs what a two-token MoE step costs: its token + the dummy's.
    decode = cost.step_cost((), 1, 150, group_tokens=2).seconds
    assert req.tpot_s == pytest.approx(max(decode, dummy.seconds), rel=0.05)


def test_moe_reads_the_experts_the_whole_group_picks() -> None:
    gpu, m = get_gpu("RTX-PRO-6000"), get_model("Qwen3-30B-A3B")
    cm = StepCostModel(gpu, m, 1, FLAT, expert_parallel_instances=2)
    expert = m.params_expert * 2
    always = m.weight_bytes_held(2) - m.expert_weight_bytes // 2 - m.vocab * m.hidden * 2
    for own, others in ((1, 0), (1, 1), (4, 60), (64, 64)):
        c = cm.step_cost((), own, 0, group_tokens=own + others)
        touched = 64 * (1 - (1 - 8 / 128) ** (own + others))  # of its 64 experts
        assert c.bytes == pytest.approx(
            always + touched * expert + own * m.kv_bytes_per_token, rel=1e-6
        )
    # Without group_tokens the others are assumed as busy as this one (2x4 tokens).
    assert cm.step_cost((), 4, 0).seconds == cm.step_cost((), 4, 0, group_tokens=8).seconds
    # Tokens held by the other instance cross the link: more of them, more communication.
    assert (
        cm.step_cost((), 4, 0, group_tokens=200).comm_s
        > cm.step_cost((), 4, 0, group_tokens=5).comm_s
    )


# ---- KV cache format ---------------------------------------------------------------------------


def test_fp8_kv_cache_halves_kv_bytes() -> None:
    gpu = get_gpu("H200")
    bf16, fp8 = get_model("Llama-3.1-70B:fp8"), get_model("Llama-3.1-70B:fp8:kv-fp8")
    assert fp8.name == "Llama-3.1-70B:fp8:kv-fp8" and fp8.bytes_per_param == 1
    assert fp8.kv_bytes_per_token * 2 == bf16.kv_bytes_per_token
    assert get_model("Llama-3.1-70B:kv-fp8").bytes_per_param == 2  # weights stay BF16
    # Twice the tokens fit; a long-context decode step reads half the KV.
    assert kv_capacity_tokens(gpu, fp8) == pytest.approx(2 * kv_capacity_tokens(gpu, bf16), 1e-5)
    a = StepCostModel(gpu, bf16, 1, FLAT).step_cost((), 64, 64 * 5000)
    b = StepCostModel(gpu, fp8, 1, FLAT).step_cost((), 64, 64 * 5000)
    assert a.bytes - b.bytes == pytest.approx(64 * 5001 * bf16.kv_bytes_per_token / 2, rel=1e-6)
    with pytest.raises(ValueError, match="KV cache format"):
        get_model("Llama-3.1-70B:kv-int3")


# ---- profiles ----------------------------------------------------------------------------------


def test_fitted_overheads_are_per_layer() -> None:
    hw = SimConfig().hardware
    fitted = FITTED["RTX-PRO-6000"]
    shallow = resolve_profile(hw, "RTX-PRO-6000", fitted.layers)
    deep = resolve_profile(hw, "RTX-PRO-6000", 2 * fitted.layers)
    # Twice the layers, twice the per-step and per-request overheads; efficiencies unchanged.
    assert shallow == fitted.profile
    assert deep.overhead_s == pytest.approx(2 * shallow.overhead_s)
    assert deep.overhead_per_seq_s == pytest.approx(2 * shallow.overhead_per_seq_s)
    assert (deep.mfu, deep.mbu) == (shallow.mfu, shallow.mbu)
    # A 64-layer model's decode step on that GPU costs more than a 32-layer one's overheads do.
    run = simulate(
        [RequestSpec(0, 0.0, 16, 20)],
        with_overrides(SimConfig(), {"gpu": "RTX-PRO-6000", "model": "Qwen3-32B"}),
    )
    assert run.steps.overhead_s.iloc[-1] == pytest.approx(deep.overhead_s + deep.overhead_per_seq_s)
    # An overhead you set is the whole per-step overhead, at any depth.
    mine = with_overrides(SimConfig(), {"overhead_ms": "2"}).hardware
    assert resolve_profile(mine, "RTX-PRO-6000", 64).overhead_s == pytest.approx(0.002)


def test_profiles_resolve() -> None:
    hw = SimConfig().hardware
    for gpu in ("H100-SXM", "RTX-PRO-6000", "RTX-4090", "A10G"):
        profile, note = fitted_profile(gpu)
        assert note and resolve_profile(hw, gpu) == profile
    assert fitted_profile("custom")[0] == GENERIC
    generic = with_overrides(SimConfig(), {"profile": "generic"}).hardware
    assert resolve_profile(generic, "RTX-PRO-6000") == GENERIC
    # A value you set wins over the fitted one; the others stay fitted.
    mine = with_overrides(SimConfig(), {"mbu": "0.55"}).hardware
    got = resolve_profile(mine, "RTX-PRO-6000")
    assert got.mbu == 0.55 and got.mfu == FITTED["RTX-PRO-6000"].profile.mfu
    with pytest.raises(ValueError, match="profile must be one of"):
        with_overrides(SimConfig(), {"profile": "magic"})


def test_the_kernel_profile_goes_with_the_kernel_tables() -> None:
    # step_costs=kernels: a GPU with its own kernel fit gets it; one the tables cover borrows its
    # lender's kernel profile (L40S from the RTX PRO 6000); one they do not cover runs every
    # operator on the roofline and keeps its class's roofline profile (RTX 4090, A10G).
    from sim.cost.profiles import FITTED_KERNELS

    kernel = FITTED_KERNELS["RTX-PRO-6000"].profile
    assert kernel != FITTED["RTX-PRO-6000"].profile
    assert fitted_profile("RTX-PRO-6000", kernels=True)[0] == kernel
    assert fitted_profile("L40S", 32, kernels=True)[0] == kernel
    for gpu in ("RTX-4090", "A10G"):
        assert fitted_profile(gpu, 32, kernels=True)[0] == fitted_profile(gpu, 32)[0]
        assert fitted_profile(gpu, 32, kernels=True)[0] == FITTED["RTX-PRO-6000"].profile


# ---- the command line --------------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v2-lite"])
def test_cli_runs_any_config(folder: str, capsys) -> None:
    code = main(
        [
            "run",
            "--scenario",
            "c2-ttft-tpot",
            "--model",
            str(HF / folder / "config.json"),
            "--gpu",
            "H100-SXM",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert code in (0, None)
    assert out["summary"]["finished"] == out["summary"]["num_requests"] > 0


def test_cli_moe_needs_room(capsys) -> None:
    assert (
        main(["run", "--scenario", "c2", "--model", str(HF / "mixtral-8x7b"), "--gpu", "H100-SXM"])
        == 2
    )
    assert "set tensor_parallel to 2" in capsys.readouterr().err
    assert main(
        [
            "run",
            "--scenario",
            "c2",
            "--model",
            str(HF / "mixtral-8x7b"),
            "--gpu",
            "H100-SXM",
            "--set",
            "tensor_parallel=2",
        ]
    ) in (0, None)


def test_uploaded_config_is_checked_and_kept(tmp_path: Path, monkeypatch) -> None:
    from ui import model_upload

    monkeypatch.setattr(model_upload, "UPLOADS", tmp_path)
    data = (HF / "qwen3-30b-a3b" / "config.json").read_bytes()
    path = model_upload.save_config(data, "config")
    assert path == model_upload.save_config(data, "config")  # same content, same path
    assert get_model(str(path)).moe.num_experts == 128
    with pytest.raises(ValueError, match="not a JSON file"):
        model_upload.save_config(b"\xff\xfe")
    with pytest.raises(ValueError, match="num_hidden_layers"):
        model_upload.save_config(b'{"hidden_size": 8}')
