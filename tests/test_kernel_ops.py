"""aiconfigurator-core's MoE, decode-attention and all-reduce tables (sim/cost/kernel_moe.py,
kernel_attention.py, kernel_comm.py) and how StepCostModel uses them (issue 30).

Each reader: the table's own numbers at its grid points (ms -> s), interpolation between them,
what happens past the grid, units checked against the hardware, and the roofline where the
table has nothing for the GPU, dtype or shape.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("aiconfigurator_core", reason="requirements-kernels.txt is not installed")

import pandas as pd  # noqa: E402

from sim.cost.hardware import get_gpu, get_model  # noqa: E402
from sim.cost.kernel_attention import decode_attention_times, fit_decode  # noqa: E402
from sim.cost.kernel_comm import allreduce_times  # noqa: E402
from sim.cost.kernel_data import envelope, read, table_paths  # noqa: E402
from sim.cost.kernel_moe import moe_times  # noqa: E402
from sim.cost.kernel_tables import gemm_table, kernel_times  # noqa: E402
from sim.cost.roofline import StepCostModel  # noqa: E402
from sim.cost.step_terms import DeviceProfile  # noqa: E402

QWEN = "Qwen3-235B-A22B:fp8:kv-fp8"  # 94 MoE layers: 128 experts of width 1,536, top-8


def raw(system: str, op: str, filename: str, version: str = "0.24.0") -> pd.DataFrame:
    path = next(p for p in table_paths(system, op, filename) if p.parent.name == version)
    return read(path)


# ---- routed experts -------------------------------------------------------------------------


def moe_rows(tp: int, ep: int) -> pd.Series:
    df = raw("h200_sxm", "moe", "moe_perf.parquet")
    df = df[
        (df.moe_dtype == "fp8_block")
        & (df.hidden_size == 4096)
        & (df.inter_size == 1536)
        & (df.num_experts == 128)
        & (df.topk == 8)
        & (df.moe_tp_size == tp)
        & (df.moe_ep_size == ep)
        & (df.distribution == "power_law_1.2")
    ]
    return df.groupby("num_tokens")["latency"].min()


def test_moe_grid_points_are_the_measured_layer_times_in_seconds():
    """TP2: moe_tp 2, each expert split; at grid token counts, 94 layers x the table's ms / 1000
    (within the 10% spike cap; these points are not spikes)."""
    moe = moe_times("H200", get_model(QWEN), 2)
    assert moe.layers == 94 and "fp8_block TP2" in moe.source
    rows = moe_rows(2, 1)
    for tokens in (1, 16, 256, 4096):
        assert moe(tokens) == pytest.approx(94 * rows[tokens] / 1000, rel=1e-9)


def test_moe_interpolates_between_token_counts_and_grows_in_proportion_past_them():
    moe = moe_times("H200", get_model(QWEN), 2)
    lo, mid, hi = moe(4096), moe(5000), moe(6144)
    assert lo < mid < hi and mid == pytest.approx(lo + (hi - lo) * (5000 - 4096) / 2048)
    assert moe(2 * 16384) == pytest.approx(2 * moe(16384))
    assert moe(0) == 0.0


def test_moe_cannot_beat_reading_the_experts_it_touches():
    """Units: one token through its top-8 experts on one of 2 ranks reads at least half of
    8 experts' FP8 weights (3 x 4096 x 1536 bytes each) per layer at <= 4.8 TB/s."""
    model, gpu = get_model(QWEN), get_gpu("H200")
    moe = moe_times("H200", model, 2)
    floor = model.moe_layers * 8 * 3 * 4096 * 1536 / 2 / (gpu.mem_bw_gb_s * 1e9)
    assert floor < moe(1) < 10 * floor


def test_expert_parallel_reads_the_ep_rows_and_missing_shapes_keep_the_roofline():
    model = get_model(QWEN)
    ep = moe_times("H200", model, 2, expert_parallel=2)  # DP2 + EP over TP2: EP4, moe_tp 1
    assert "EP4" in ep.source and ep(256) == pytest.approx(94 * moe_rows(1, 4)[256] / 1000)
    # No fp8_block rows split 8 ways: the whole-expert rows over 8 ranks stand in, named so.
    tp8 = moe_times("H200", model, 8)
    assert "EP8 rows for TP8" in tp8.source
    assert tp8(256) == pytest.approx(94 * moe_rows(1, 8)[256] / 1000)
    assert moe_times("RTX-4090", model, 2) is None  # no tables for the GPU
    assert moe_times("H200", get_model("Llama-3.1-8B"), 1) is None  # not a MoE model
    assert moe_times("H200", get_model("Qwen3-235B-A22B:fp4"), 2) is None  # no FP4 rows on Hopper


def test_one_instance_with_expert_parallel_reads_the_whole_expert_rows():
    """vLLM's --enable-expert-parallel on one TP2 instance: each rank holds whole experts (the
    table's moe_tp 1, moe_ep 2) and sees the step's own tokens; without it, every expert is
    split (moe_tp 2). kernel_times passes the choice on, and a simulated deployment takes it
    from hardware.expert_parallel."""
    model = get_model(QWEN)
    whole = moe_times("H200", model, 2, whole_experts=True)
    assert "EP2" in whole.source and whole(256) == pytest.approx(94 * moe_rows(1, 2)[256] / 1000)
    split = moe_times("H200", model, 2)
    assert "TP2" in split.source and split(256) == pytest.approx(94 * moe_rows(2, 1)[256] / 1000)
    assert whole(256) != pytest.approx(split(256), rel=0.01)  # two kernels' layouts, timed apart
    assert "EP2" in kernel_times("H200", model, 2, whole_experts=True).sources["moe"]
    from sim.cluster.topologies import Cluster
    from sim.config import SimConfig, with_overrides

    config = with_overrides(
        SimConfig(),
        {
            "gpu": "H200",
            "model": QWEN,
            "tensor_parallel": 2,
            "expert_parallel": True,
            "step_costs": "kernels",
        },
    )
    assert "EP2" in Cluster(config).cost.kernel_sources["moe"]


def test_minimax_m25_in_the_catalog_is_the_shape_aiconfigurator_ships():
    """The catalog's MiniMax-M2.5 (the public runs' model) and the config.json aiconfigurator-core
    ships for it (model_configs/MiniMaxAI--MiniMax-M2.5_config.json) describe one model; its
    FP8 checkpoint reads the fp8_block expert rows that shape has on an H200."""
    from importlib.resources import files

    from sim.cost.hf_config import read_model_file

    path = files("aiconfigurator_core") / "model_configs" / "MiniMaxAI--MiniMax-M2.5_config.json"
    shipped = read_model_file(str(path), 0)
    ours = get_model("MiniMax-M2.5:fp8")
    same = ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "moe", "mla")
    same += ("qk_norm_across_heads",)
    assert {k: getattr(ours, k) for k in same} == {k: getattr(shipped, k) for k in same}
    assert ours.bytes_per_param == shipped.bytes_per_param == 1
    assert "fp8_block TP4" in moe_times("H200", ours, 4).source


def test_blackwell_block_fp8_experts_are_the_kernel_vllm_picks_there():
    """vLLM 0.18+ on a 10.x GPU runs block-FP8 experts on FlashInfer's TRTLLM-gen kernels
    (oracle/fp8.py: FLASHINFER_TRTLLM first, Triton moved ahead on Hopper only), but the 0.19.0
    B200 table timed Triton's fused_moe alone: those runs read the nearest table that timed
    TRTLLM-gen (0.24.0), named so; vLLM 0.17 (no router-agnostic TRTLLM-gen class: DeepGEMM,
    untimed) keeps the Triton rows, as does Hopper. The two kernels differ where it matters:
    Triton's tile switch past 64 tokens nearly doubles a layer's time, TRTLLM-gen's does not."""
    from sim.cost.kernel_data import Tables

    model = get_model("MiniMax-M2.5:fp8")
    v19 = moe_times("B200", model, 2, tables=Tables("vllm", "0.19.0"))
    v17 = moe_times("B200", model, 2, tables=Tables("vllm", "0.17.0"))
    assert "vLLM 0.24.0" in v19.source and "flashinfer_trtllm" in v19.source
    assert "the kernel vLLM 0.19.0 runs here" in v19.source
    assert "vLLM 0.19.0" in v17.source and "vllm_fused_moe" in v17.source
    assert v17(128) / v17(64) > 1.5 > 1.2 > v19(128) / v19(64)
    hopper = moe_times("H200", model, 4, tables=Tables("vllm", "0.19.0"))
    assert "vllm_fused_moe" in hopper.source and "trtllm" not in hopper.source
    sglang = moe_times("B200", model, 2, tables=Tables("sglang", "0.5.14"))
    assert sglang is None or "the kernel vLLM" not in sglang.source


def test_hopper_block_fp8_experts_on_vllm_016_are_flashinfers_cutlass_ones():
    """vLLM 0.16's oracle (fp8.py 138-330) tries FlashInfer's Cutlass experts before DeepGEMM
    and Triton, and they take block FP8 on 9.0; 0.17 puts Triton first for tensor parallel. The
    tables time FlashInfer's Cutlass experts whole (moe_tp 1), so four ranks read the EP4 rows,
    slower than Triton's TP4 ones at a handful of tokens."""
    from sim.cost.kernel_data import Tables

    model = get_model("MiniMax-M2.5:fp8")
    v16 = moe_times("H200", model, 4, tables=Tables("vllm", "0.16.0"))
    v18 = moe_times("H200", model, 4, tables=Tables("vllm", "0.18.0"))
    assert "flashinfer_cutlass" in v16.source and "EP4 rows for TP4" in v16.source
    assert "the kernel vLLM 0.16.0 runs here" in v16.source
    assert "vllm_fused_moe" in v18.source and "flashinfer" not in v18.source
    assert v16(4) > 1.2 * v18(4)


def test_unquantized_experts_are_tritons_and_sglangs_copy_stands_in_where_vllm_never_timed_it():
    """vLLM runs bf16 experts on Triton's fused_moe unless VLLM_USE_FLASHINFER_MOE_FP16 is set
    (0.19.0 oracle/unquantized.py 96-176). The RTX PRO 6000's only vLLM table times FlashInfer's
    Cutlass experts, so they are priced from SGLang's copy of the Triton kernel; where both
    engines timed it on one GPU (H100, H200) SGLang's rows are within 12% of vLLM's for
    Qwen3-30B-A3B's experts (0.90-1.06x from 8 to 8192 tokens): the stand-in is that kernel."""
    from sim.cost.kernel_data import Tables

    model = get_model("Qwen3-30B-A3B")
    v19 = Tables("vllm", "0.19.0")
    rtx = moe_times("RTX-PRO-6000", model, tables=v19)
    assert "sglang_fused_moe_triton" in rtx.source and "no vLLM table here" in rtx.source
    assert "flashinfer" not in rtx.source
    tokens = np.array([8, 32, 128, 512, 2048, 8192])
    for gpu in ("H100-SXM", "H200"):
        own = moe_times(gpu, model, tables=v19)
        copy = moe_times(gpu, model, tables=Tables("sglang", "0.5.14"))
        assert "triton" in copy.source and "vllm" not in copy.source
        assert "fused_moe" in own.source or "triton" in own.source
        ratio = np.array([copy(t) / own(t) for t in tokens])
        assert ((ratio > 0.88) & (ratio < 1.12)).all(), (gpu, ratio.round(2))


# ---- decode attention -----------------------------------------------------------------------


def test_decode_fit_recovers_an_affine_table_exactly():
    batch = np.repeat([1.0, 8.0, 64.0], 4)
    step = np.tile([1.0, 100.0, 1000.0, 10000.0], 3)
    a = {1.0: 10e-6, 8.0: 12e-6, 64.0: 30e-6}
    seconds = np.array([a[b] for b in batch]) + 2e-10 * batch * step
    sizes, intercepts, slope = fit_decode(batch, step, seconds)
    assert slope == pytest.approx(2e-10) and intercepts == pytest.approx([a[b] for b in sizes])


def test_decode_attention_follows_the_measured_grid():
    """Llama-3.1-8B on one H200 (32 query, 8 KV heads, bf16 KV): the fitted a(b) + c * b * s
    is within 25% of 9 in 10 measured points, and its slope is a bandwidth an H200 can reach."""
    model, gpu = get_model("Llama-3.1-8B"), get_gpu("H200")
    dec = decode_attention_times("H200", model)
    df = raw("h200_sxm", "attention", "generation_attention_perf.parquet")
    df = df[
        (df.num_heads == 32)
        & (df.num_key_value_heads == 8)
        & (df.head_dim == 128)
        & (df.kv_cache_dtype == "bfloat16")
        & (df.window_size == 0)
    ]
    predicted = [
        dec.intercept(b) + dec.per_token * b * s
        for b, s in zip(df.batch_size, df.step, strict=True)
    ]
    ratio = np.array(predicted) / (model.layers * df.latency.to_numpy() / 1000)
    assert np.quantile(np.abs(ratio - 1), 0.9) < 0.25
    bytes_per_token = model.kv_bytes_per_token  # all layers
    bandwidth = bytes_per_token / dec.per_token
    assert 0.6 * gpu.mem_bw_gb_s * 1e9 < bandwidth <= gpu.mem_bw_gb_s * 1e9
    assert dec.intercept(0) == 0.0 and dec.intercept(1) > 0
    assert dec.intercept(4096) == pytest.approx(2 * dec.intercept(2048))  # past the grid


def test_decode_attention_falls_back_without_a_table():
    assert decode_attention_times("RTX-4090", get_model("Llama-3.1-8B")) is None
    assert decode_attention_times("H200", get_model("DeepSeek-V2-Lite")) is None  # MLA
    tp8 = decode_attention_times("H200", get_model("Llama-3.1-70B:fp8:kv-fp8"), 8)
    assert "8/1 heads, KV fp8" in tp8.source  # one rank's heads


# ---- tensor-parallel all-reduce -------------------------------------------------------------


def test_allreduce_is_the_graph_rows_twice_a_layer():
    model = get_model("Llama-3.1-70B")
    ar = allreduce_times("H200", model, 4)
    df = raw("h200_sxm", "comm", "custom_allreduce_perf.parquet")
    df = df[(df.num_gpus == 4) & (df.backend == "vllm_graph")].set_index("message_size")
    tokens = 128  # 128 x 8192 = 2^20 values, a grid point
    assert ar(tokens) == pytest.approx(160 * df.latency[2**20] / 1000, rel=1e-9)
    assert ar.seconds(3 * 2**19) == pytest.approx(
        (df.latency[2**20] + df.latency[2**21]) / 2 / 1000, rel=1e-9
    )
    assert ar.seconds(2**31) == pytest.approx(4 * ar.seconds(2**29))


def test_allreduce_sizes_are_values_and_no_faster_than_nvlink():
    """1 GiB of bf16 values over 2 H200s: a ring moves (n-1)/n x 2 x bytes through each GPU's
    link (450 GB/s one way); the measured time is above that floor, and within 2x of it."""
    gpu = get_gpu("H200")
    ar = allreduce_times("H200", get_model("Llama-3.1-8B"), 2)
    nbytes = 2 * 2**29
    floor = nbytes / (gpu.interconnect_gb_s * 1e9)
    assert floor < ar.seconds(2**29) < 2 * floor
    assert allreduce_times("H200", get_model("Llama-3.1-8B"), 1) is None
    assert allreduce_times("H200", get_model("Llama-3.1-8B"), 3) is None
    assert allreduce_times("L4", get_model("Llama-3.1-8B"), 2) is None


def test_minimax_all_reduces_its_qk_norms_once_more_a_layer():
    """MiniMax-M2 normalises q and k over all heads (vLLM's MiniMaxText01RMSNormTP.forward_qk):
    under TP every layer all-reduces two fp32 variances a token, besides the two hidden-sized
    all-reduces; a model normalising per head (Llama) does not. On one GPU there is none."""
    from sim.cost.kernel_comm import NORM_VALUES_PER_TOKEN

    model = get_model("MiniMax-M2.5:fp8")
    assert model.qk_norm_across_heads and not get_model("Llama-3.1-70B").qk_norm_across_heads
    ar = allreduce_times("H200", model, 4)
    assert ar.norm_calls == 62 and "q/k norms" in ar.source
    tokens = 64
    two = 2 * 62 * ar.seconds(tokens * 3072)
    assert ar(tokens) == pytest.approx(two + 62 * ar.seconds(tokens * NORM_VALUES_PER_TOKEN))
    assert ar(tokens) - two > 62 * ar.seconds(1) * 0.99  # latency-bound: never free
    assert allreduce_times("H200", model, 1) is None


def test_a_moe_layer_pays_its_replicated_bf16_router():
    """vLLM's gate is a ReplicatedLinear left in bf16 (modules_to_not_convert: "gate"): every
    rank runs the (tokens x hidden) x (hidden x experts) GEMM each MoE layer, as aiconfigurator's
    MoE block prices it; the rest of an FP8 model's linear layers read the FP8 rows."""
    from sim.cost.kernel_tables import linear_times

    model = get_model("MiniMax-M2.5:fp8")
    for tp in (1, 4):
        lin = linear_times("H200", model, tp)
        ((table, n, k, layers),) = lin.unquantized  # the router alone: FP8 attention
        assert (n, k, layers) == (256, 3072, 62) and "router bf16" in lin.source
        assert table.version == lin.table.version and lin.table is not table  # bf16 beside fp8
        bare = sum(c * lin.table.seconds(8, n_, k_) for n_, k_, c in lin.shapes)
        assert lin(8) == pytest.approx(bare + 62 * table.seconds(8, 256, 3072))
    assert linear_times("H200", get_model("Llama-3.1-70B"), 2).unquantized == ()  # dense


def test_nvfp4_minimax_keeps_its_attention_projections_in_bf16():
    """nvidia/MiniMax-M2.5-NVFP4 leaves every layer's self_attn* out of its quantization (the
    hf_quant_config.json aiconfigurator-core ships): vLLM runs Q/K/V/O unquantized, so the
    tables price them from the bf16 rows, the memory holds them at 2 bytes, and the roofline
    runs them at the bf16 rate. Read from the checkpoint's own config.json, the same."""
    import json
    from importlib.util import find_spec
    from pathlib import Path

    from sim.cost.hf_config import model_from_hf_config
    from sim.cost.kernel_tables import linear_times

    fp4 = get_model("MiniMax-M2.5:fp4")
    all_fp4 = dataclasses.replace(fp4, attention_bytes=0.0)
    assert fp4.attention_bytes == 2 and get_model("MiniMax-M2.5:fp8").attention_bytes == 0
    assert get_model("Llama-3.1-70B:fp4").attention_bytes == 0  # ModelOpt: only lm_head out
    attention = 62 * (3072 * 6144 * 2 + 3072 * 1024 * 2)  # Q, O; K, V
    assert fp4.params_attention == attention
    extra = attention * (2 - all_fp4.stored_bytes_per_param)  # bf16 instead of 4.5 bits
    assert fp4.weight_bytes - all_fp4.weight_bytes == pytest.approx(extra, abs=2)
    folder = Path(find_spec("aiconfigurator_core").origin).parent / "model_configs"
    config = json.loads((folder / "nvidia--MiniMax-M2.5-NVFP4_config.json").read_text())
    read = model_from_hf_config(config)
    assert (read.bytes_per_param, read.attention_bytes) == (0.5, 2)
    assert read.weight_bytes == fp4.weight_bytes
    lin = linear_times("B200", fp4, 4)
    bf16 = gemm_table("B200", "bfloat16")
    assert "nvfp4, attention bf16, router bf16" in lin.source
    assert [(n, k, c) for _, n, k, c in lin.unquantized] == [
        (8192 // 4, 3072, 62),  # fused QKV, split by columns
        (3072, 6144 // 4, 62),  # output, split by rows
        (256, 3072, 62),  # the router
    ]
    assert all(t.version == bf16.version for t, *_ in lin.unquantized)
    assert lin.shapes == ()  # no dense MLP, no shared expert: only the experts are NVFP4
    roof = StepCostModel(get_gpu("B200"), fp4, 1)
    roof_fp4 = StepCostModel(get_gpu("B200"), all_fp4, 1)
    prefill = roof.terms([(4096, 0, 1)], 0, 0).linear[0][0]
    prefill_fp4 = roof_fp4.terms([(4096, 0, 1)], 0, 0).linear[0][0]
    gpu = get_gpu("B200")
    slower = 4096 * 2 * attention * (1 / gpu.bf16_tflops - 1 / gpu.matmul_tflops(0.5)) / 1e12
    assert prefill - prefill_fp4 == pytest.approx(slower, rel=1e-9)


# ---- timing spikes, sources, and the step --------------------------------------------------


def test_envelope_removes_spikes_and_keeps_ordinary_noise():
    times = np.array([27.0, 33.0, 13.0, 32.0, 13.0, 13.5, 14.0, 20.0])
    assert list(envelope(times)) == pytest.approx([14.3, 14.3, 13.0, 14.3, 13.0, 13.5, 14.0, 20.0])
    b200 = gemm_table("B200", "fp8")  # 2560 x 8192 at m = 4 was timed at 32 us, m = 3 and 5 at 13
    assert b200.seconds(4, 2560, 8192) < 1.11 * b200.seconds(5, 2560, 8192)


def test_the_breakdown_names_every_operator_of_the_deployment():
    dense = kernel_times("H200", get_model("Llama-3.1-8B"), 1).sources
    assert list(dense) == [
        "linear",
        "prefill_attention",
        "decode_attention",
        "lm_head",
        "sampling",
        "kv_write",
    ]
    moe = kernel_times("H200", get_model(QWEN), 2)
    assert moe.sources["moe"].startswith("vLLM 0.24.0 fp8_block TP2")
    assert moe.sources["allreduce"].endswith("2 GPUs")
    assert moe.sources["lm_head"] == "vLLM 0.24.0 GEMMs, bfloat16"  # an FP8 checkpoint's: bf16
    assert "routed experts (vLLM 0.24.0 fp8_block" in moe.source
    assert "roofline: sampling, KV write" in moe.source
    tp8 = kernel_times("H200", get_model(QWEN), 8)
    assert "EP8 rows for TP8" in tp8.sources["moe"]  # a stand-in, and it says so
    fp4 = kernel_times("H200", get_model("Qwen3-235B-A22B:fp4"), 2)  # no FP4 rows on Hopper
    assert fp4.sources["moe"] == "roofline"  # no table for it: the roofline, and it says so
    assert kernel_times("RTX-4090", get_model(QWEN), 2) is None


def test_the_lm_head_is_the_bf16_gemm_of_one_ranks_vocabulary_slice():
    """vLLM pads the vocabulary to a multiple of 64 and splits it over the TP ranks; the FP8
    checkpoint's lm_head runs in bf16, so it reads the bf16 rows at the same shape."""
    fp8, bf16 = get_model("Llama-3.1-8B:fp8"), get_model("Llama-3.1-8B")
    one, eight = (kernel_times("H200", fp8, tp).lm_head for tp in (1, 8))
    assert (one.n, one.k, eight.n) == (128_256, 4096, 16_032)  # 128,256 = 2,004 x 64
    assert one(64) == kernel_times("H200", bf16, 1).lm_head(64)
    table = gemm_table("H200", "bfloat16")
    assert one(64) == table.seconds(64, 128_256, 4096)
    # One position reads all of the rank's slice: a TP8 rank reads an eighth of the weights,
    # in about an eighth of the time (launch and tail effects leave it within 6-10x).
    assert 6 < one(1) / eight(1) < 10
    # Reading 1.05 GB of bf16 weights is at least 1.05 GB / 4.8 TB/s on one H200.
    assert one(1) > 128_256 * 4096 * 2 / (get_gpu("H200").mem_bw_gb_s * 1e9)


def fake(**parts) -> SimpleNamespace:
    """A KernelTimes stand-in: the given parts, None for the rest."""
    names = ("linear", "prefill_attention", "decode_attention", "moe", "allreduce", "lm_head")
    return SimpleNamespace(**{n: parts.get(n) for n in names}, source="fake")


@pytest.mark.parametrize("kind", ["moe", "allreduce", "decode", "lm_head"])
def test_measured_parts_move_the_step_by_their_seconds(kind):
    """Two fake tables 1 s apart move every step by exactly 1 s (the fake's seconds go in as
    they are), and calibration's terms give the same seconds under any profile."""
    gpu, model = get_gpu("H200"), get_model(QWEN)
    prof = DeviceProfile(0.5, 0.4, 0.7, 0.003)

    def part(v: float):
        if kind == "decode":
            return SimpleNamespace(intercept=lambda b: v * (b > 0), per_token=1e-9)
        return lambda tokens: v + 1e-6 * tokens

    zero, one = (
        StepCostModel(
            gpu, model, 2, prof, 1, fake(**{kind.replace("decode", "decode_attention"): part(v)})
        )
        for v in (0.0, 1.0)
    )
    steps = (((), 8, 8000), (((512, 0, True),), 0, 0), (((256, 1024, False),), 4, 4096))
    for step in steps:
        diff = one.step_cost(*step).seconds - zero.step_cost(*step).seconds
        moves = kind != "decode" or step[1] > 0
        assert diff == pytest.approx(1.0 if moves else 0.0)
        for p in (prof, DeviceProfile(0.9, 0.2, 0.5, 0.0, 0.001)):
            cm = StepCostModel(gpu, model, 2, p, 1, one.kernels)
            assert cm.terms(*step).seconds(p) == pytest.approx(cm.step_cost(*step).seconds)
    if kind == "decode":  # the context's seconds are the measured slope (event speed needs it)
        assert one.decode_kv_s_per_token == 1e-9


def test_event_speed_equals_step_by_step_with_every_table():
    """A MoE model on 2 GPUs prices linear layers, attention, experts and all-reduces from the
    tables; runs of decode steps at event speed match step-by-step pricing exactly."""
    from sim.cluster.topologies import simulate
    from sim.config import SimConfig, with_overrides
    from sim.core.request import RequestSpec

    specs = [RequestSpec(i, 0.05 * i, 200 + 300 * (i % 4), 40 + 30 * (i % 3)) for i in range(12)]
    config = with_overrides(
        SimConfig(),
        {"gpu": "H200", "model": QWEN, "tensor_parallel": 2, "step_costs": "kernels"},
    )
    fast, step = simulate(specs, config), simulate(specs, config, step_by_step=True)
    pd.testing.assert_frame_equal(fast.requests, step.requests, check_exact=True)
    source = fast.meta["kernel_source"]
    assert "routed experts" in source and "TP all-reduce" in source and "decode attention" in source
