"""vLLM 0.12's DeepGEMM experts on Hopper (sim/cost/kernel_moe_deepgemm.py, issue 30): the padded
rows vLLM 0.12 computes, priced from DeepGEMM's measured GEMM rows, and only where that release
runs them."""

from __future__ import annotations

import pytest

pytest.importorskip("aiconfigurator_core", reason="requirements-kernels.txt is not installed")

from sim.cost.hardware import get_gpu, get_model  # noqa: E402
from sim.cost.kernel_data import Tables, read, table_paths  # noqa: E402
from sim.cost.kernel_gemm import gemm_table  # noqa: E402
from sim.cost.kernel_moe import MoeTimes, moe_times  # noqa: E402
from sim.cost.kernel_moe_deepgemm import (  # noqa: E402
    KERNEL,
    PaddedDeepGemmTimes,
    padded_rows,
)

QWEN = get_model("Qwen3-235B-A22B:fp8")  # 94 MoE layers, 128 experts of width 1,536, top-8
V012 = Tables("vllm", "0.12.0")


def test_the_rows_are_vllm_0_12s_worst_case_buffer():
    # compute_aligned_M: round_up(tokens x top-k + local experts x 127, 128)
    assert padded_rows(4, 8, 128) == 16384  # 32 + 16,256 = 16,288 -> 16,384
    assert padded_rows(48, 8, 128) == 16640  # 384 + 16,256, already on the grid
    assert padded_rows(16, 8, 64) == 8320  # expert parallel over 2: 64 local experts
    assert padded_rows(0.5, 8, 1) == 256  # a part of a token enters whole: 8 + 127 -> 256


def test_a_decode_step_hardly_moves_with_the_batch_as_measured():
    dg = moe_times("H200", QWEN, 2, tables=V012)
    assert isinstance(dg, PaddedDeepGemmTimes) and "DeepGEMM" in dg.source
    assert dg(4) == dg(16)  # the same 16,384 rows
    assert dg(48) / dg(4) < 1.02
    fused = moe_times("H200", QWEN, 2, tables=Tables("vllm", "0.16.0"))  # Triton's fused_moe
    assert isinstance(fused, MoeTimes) and fused(48) / fused(4) > 2  # reads what it touches
    assert dg(16) > 2 * fused(16)  # the padded blocks are most of the work


def test_each_layer_is_deepgemm_s_two_measured_gemms():
    table = gemm_table("H200", "fp8_block", V012, kernel=KERNEL)
    expected = 94 * (table.seconds(16384, 2 * 768, 4096) + table.seconds(16384, 4096, 768))
    assert moe_times("H200", QWEN, 2, tables=V012)(16) == pytest.approx(expected, rel=1e-12)
    # At a grid point the table is DeepGEMM's own row (ms -> s), up to the noise envelope.
    path = next(p for p in table_paths("h200_sxm", "gemm", "gemm_perf.parquet"))
    rows = read(path)
    row = rows[
        (rows.kernel_source == "DeepGemmFp8BlockScaledMMKernel")
        & (rows.m == 16384)
        & (rows.n == 1536)
        & (rows.k == 4096)
    ]
    assert table.seconds(16384, 1536, 4096) == pytest.approx(row.latency.median() / 1e3, rel=0.1)


def test_no_faster_than_the_fp8_peak_computes_the_padded_rows():
    rows, width = 16384, 1536 // 2  # two GPUs split every expert
    flops = 94 * 2 * rows * (2 * width * 4096 + 4096 * width)
    assert moe_times("H200", QWEN, 2, tables=V012)(16) > flops / (get_gpu("H200").fp8_tflops * 1e12)


@pytest.mark.parametrize(
    ("gpu", "tp", "tables"),
    [
        ("H200", 2, Tables("vllm", "0.13.0")),  # 0.13 marks the padding -1: DeepGEMM skips it
        ("H200", 8, V012),  # 0.12 keeps Triton when the experts are split 8 ways
        ("B200", 2, V012),  # not Hopper
        ("H200", 2, Tables("vllm", "")),  # the newest release
        ("H200", 2, Tables("sglang", "0.5.6.post2")),  # another engine
    ],
)
def test_other_releases_splits_and_gpus_keep_the_fused_moe_rows(gpu, tp, tables):
    assert not isinstance(moe_times(gpu, QWEN, tp, tables=tables), PaddedDeepGemmTimes)


def test_whole_experts_put_fewer_padded_blocks_on_each_rank():
    ep2 = moe_times("H200", QWEN, 2, tables=V012, whole_experts=True)
    assert isinstance(ep2, PaddedDeepGemmTimes) and ep2.local_experts == 64 and ep2.width == 1536
    assert "EP2" in ep2.source
