"""aiconfigurator-core's measured GEMM tables (sim/cost/kernel_tables.py) and the lesson's chart.

The package is optional for the app (requirements-kernels.txt) and part of the test install
(requirements-dev.txt); requirements-only deployments are covered by test_requirements_only.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("aiconfigurator_core", reason="requirements-kernels.txt is not installed")

import pandas as pd  # noqa: E402

from sim.cost.hardware import get_gpu, get_model  # noqa: E402
from sim.cost.kernel_tables import gemm_table, layer_gemm_efficiency, layer_gemms  # noqa: E402
from ui.charts_roofline import gemm_efficiency, has_measured_gemms  # noqa: E402


def raw_rows(system: str) -> pd.DataFrame:
    root = Path(importlib.util.find_spec("aiconfigurator_core").origin).parent
    path = root / "systems" / "data" / system / "gemm" / "vllm" / "0.24.0" / "gemm_perf.parquet"
    df = pd.read_parquet(path)
    return df[df["gemm_dtype"] == "bfloat16"]


def test_grid_points_are_the_measured_latencies_in_seconds():
    table = gemm_table("H200")
    assert table is not None and table.version == "vLLM 0.24.0"
    rows = raw_rows("h200_sxm").groupby(["m", "n", "k"])["latency"].median()
    for m, n, k in ((1, 4096, 4096), (256, 6144, 4096), (2048, 4096, 12288), (32768, 512, 65536)):
        assert table.seconds(m, n, k) == pytest.approx(rows[(m, n, k)] / 1000, rel=1e-12)


def test_between_grid_points_the_time_lies_between_its_neighbours():
    table = gemm_table("H200")
    lo, hi = table.seconds(1024, 4096, 12288), table.seconds(1024, 4096, 16384)
    mid = table.seconds(1024, 4096, 14336)  # Llama-3.1-8B's down projection: k = 14,336
    assert min(lo, hi) <= mid <= max(lo, hi)
    assert table.seconds(65536, 4096, 4096) == pytest.approx(2 * table.seconds(32768, 4096, 4096))


def test_no_kernel_beats_the_memory_bandwidth():
    """Units check: even one token must read the weights, n x k bf16 values, at <= the spec's
    bandwidth (H200: 4.8 TB/s), so a ms/s mix-up or a wrong axis would fail here."""
    table, gpu = gemm_table("H200"), get_gpu("H200")
    for n, k in layer_gemms(get_model("Llama-3.1-8B")):
        assert table.seconds(1, n, k) >= 2 * n * k / (gpu.mem_bw_gb_s * 1e9)


def test_small_steps_use_less_of_the_peak_than_large_ones():
    """Issue 30's point: a 256-token step's GEMMs reach a smaller share of the peak than a
    1,024-token step's (measured, H200, vLLM 0.24.0: 66% vs 80%), and none exceeds the peak."""
    gpu, model = get_gpu("H200"), get_model("Llama-3.1-8B")
    e256, e1024 = (layer_gemm_efficiency(gpu, model, t) for t in (256, 1024))
    assert e256 < e1024 - 0.1 and e1024 < 1.0
    assert layer_gemm_efficiency(gpu, model, 1) < 0.01  # one token: bandwidth-bound


def test_gpus_and_models_without_tables_keep_the_roofline():
    assert gemm_table("L4") is None  # aiconfigurator-core 0.12.0 has no vLLM GEMMs for it
    assert gemm_table("RTX-4090") is None  # not in its systems at all
    assert not has_measured_gemms("L4", "Llama-3.1-8B")
    moe = get_model("Mixtral-8x7B")
    assert layer_gemm_efficiency(get_gpu("H200"), moe, 512) is None
    with pytest.raises(ValueError, match="no measured GEMM table"):
        gemm_efficiency("L4", "Llama-3.1-8B")


def test_the_lessons_chart_draws_roofline_and_measured_curves():
    fig = gemm_efficiency("H100-SXM", "Llama-3.1-8B", lang="ko")
    assert [len(tr.x) for tr in fig.data] == [15, 15]
    assert "0.24.0" in fig.data[1].name and max(fig.data[1].y) < 100


# ---- step_costs=kernels: the simulator prices dense linear layers from the tables ------------


def test_measured_linear_seconds_replace_the_roofline_and_nothing_else():
    """Two fake tables 1 s apart move every step by exactly 1 s: the measured seconds go in as
    they are (not scaled by the profile), and the rest of the step (attention, KV write, lm_head,
    overhead) is the roofline's, unchanged."""
    from sim.cost.roofline import StepCostModel
    from sim.cost.step_terms import DeviceProfile

    gpu, model = get_gpu("H200"), get_model("Llama-3.1-8B")
    prof = DeviceProfile(0.5, 0.4, 0.7, 0.003)

    def fake(linear=None, attention=None) -> SimpleNamespace:  # a KernelTimes stand-in
        return SimpleNamespace(linear=linear, prefill_attention=attention, source="fake")

    steps = (
        ((), 8, 8000),
        (((512, 0, True),), 0, 0),
        (((256, 1024, False), (64, 0, True)), 4, 4096),
    )
    for kind in ("linear", "attention"):
        zero, one = (
            StepCostModel(gpu, model, 1, prof, 1, fake(**{kind: lambda *a, v=v: v}))
            for v in (0.0, 1.0)
        )
        for step in steps:
            calls = 1 if kind == "linear" else len(step[0])  # attention: once per chunk
            diff = one.step_cost(*step).seconds - zero.step_cost(*step).seconds
            assert diff == pytest.approx(calls)
    # calibration sees the same step: its terms give the same seconds under any profile
    both = fake(lambda t: 2e-6 * t + 1e-3, lambda c, s: 1e-9 * c * (s + c))
    for p in (prof, DeviceProfile(0.9, 0.2, 0.5, 0.0, 0.001)):
        cm = StepCostModel(gpu, model, 1, p, 1, both)
        for step in steps:
            assert cm.terms(*step).seconds(p) == pytest.approx(cm.step_cost(*step).seconds)


def test_a_run_with_kernels_names_its_source_and_falls_back_where_no_table_is():
    from sim.cluster.topologies import simulate
    from sim.config import SimConfig, with_overrides
    from sim.core.request import RequestSpec

    specs = [RequestSpec(0, 0.0, 2048, 32), RequestSpec(1, 0.1, 300, 64)]
    runs = {}
    for gpu, costs in (("H200", "kernels"), ("H200", "roofline"), ("RTX-4090", "kernels")):
        config = with_overrides(SimConfig(), {"gpu": gpu, "step_costs": costs})
        runs[gpu, costs] = simulate(specs, config)
    source = runs["H200", "kernels"].meta["kernel_source"]
    assert "aiconfigurator-core" in source and "H200" in source and "bfloat16" in source
    assert "prefill attention (vLLM 0.24.0 vllm_flash_attn_fa3, 32/8 heads" in source
    assert runs["H200", "roofline"].meta["kernel_source"] == "roofline"
    assert runs["RTX-4090", "kernels"].meta["kernel_source"] == "roofline"  # no table: fallback
    kern, roof = (runs["H200", c].requests.ttft_s.iloc[0] for c in ("kernels", "roofline"))
    assert kern != roof  # the tables did price the 2,048-token prefill
    with pytest.raises(ValueError, match="step_costs must be one of roofline, kernels"):
        with_overrides(SimConfig(), {"step_costs": "fast"})


def test_event_speed_equals_step_by_step_with_measured_kernels():
    """sim/fastforward prices runs of decode steps from the batch size and the KV read alone;
    measured linear seconds depend on the batch size only, so the shortcut stays exact."""
    from sim.cluster.topologies import simulate
    from sim.config import SimConfig, with_overrides
    from sim.core.request import RequestSpec

    specs = [RequestSpec(i, 0.05 * i, 200 + 300 * (i % 4), 40 + 30 * (i % 3)) for i in range(12)]
    config = with_overrides(SimConfig(), {"gpu": "H100-SXM", "step_costs": "kernels"})
    fast, step = simulate(specs, config), simulate(specs, config, step_by_step=True)
    pd.testing.assert_frame_equal(fast.requests, step.requests, check_exact=True)
    assert fast.meta["kernel_source"].startswith("aiconfigurator-core")


def test_fp8_models_use_the_fp8_rows_and_tensor_parallel_splits_the_shapes():
    from sim.cost.kernel_tables import linear_times

    fp8 = linear_times("H200", get_model("Llama-3.1-8B:fp8"))
    bf16, tp2 = linear_times("H200", get_model("Llama-3.1-8B")), None
    assert "fp8" in fp8.source and fp8(4096) < bf16(4096)  # FP8 tensor cores: faster at scale
    tp2 = linear_times("H200", get_model("Llama-3.1-8B"), 2)
    assert tp2(4096) < bf16(4096) and tp2.shapes[0][0] * 2 == bf16.shapes[0][0]
    assert linear_times("H200", get_model("Llama-3.1-8B:fp4")) is None  # no FP4 rows on Hopper
    fp4 = linear_times("B200", get_model("Llama-3.1-8B:fp4"))  # NVFP4 on Blackwell
    assert "nvfp4" in fp4.source and fp4(4096) < linear_times(
        "B200", get_model("Llama-3.1-8B:fp8")
    )(4096)


def test_prefill_attention_is_its_share_of_a_measured_fresh_prompt():
    """A chunk after cached tokens costs its share of the (query, key) pairs of a fresh prompt
    as long as both (FlashAttention is compute-bound there); a whole fresh prompt at a grid
    point is the table's row itself."""
    from sim.cost.kernel_attention import _context_attention, prefill_attention_times

    attn = prefill_attention_times("H200", get_model("Llama-3.1-8B"))
    _, kernel, isl, per_pair = _context_attention("h200_sxm", 32, 8, 128, "bfloat16")
    assert kernel == "vllm_flash_attn_fa3"  # the backend timed on the grid, not a blend
    assert attn(4096, 0) == pytest.approx(32 * per_pair[list(isl).index(4096)] * 4096 * 4097 / 2)
    whole, tail = attn(8192, 0), attn(4096, 4096)  # the second half of an 8k prompt
    assert tail == pytest.approx(whole * (4096 * 4096 + 4096 * 4097 / 2) / (8192 * 8193 / 2))
    assert attn(16384, 0) > 3.5 * attn(8192, 0)  # quadratic, not linear
    assert prefill_attention_times("RTX-4090", get_model("Llama-3.1-8B")) is None


def test_kernel_scale_stretches_the_measured_compute_only():
    """kernel_scale multiplies prefill attention, and the linear layers' time above their
    1-token time (the weights' read); decode attention is as measured."""
    from sim.config import SimConfig, with_overrides
    from sim.cost.roofline import StepCostModel
    from sim.cost.step_terms import DeviceProfile

    gpu, model = get_gpu("H200"), get_model("Llama-3.1-8B")
    decode = SimpleNamespace(intercept=lambda b: 1e-3, per_token=1e-8)
    kernels = SimpleNamespace(
        linear=lambda t: 0.01 + 1e-5 * t,
        prefill_attention=lambda c, s: 0.002,
        decode_attention=decode,
    )
    step = (((512, 0, True), (256, 512, False)), 3, 3000)
    one, two = (
        StepCostModel(gpu, model, 1, DeviceProfile(kernel_scale=k), 1, kernels) for k in (1, 2)
    )
    stretched = 1e-5 * (771 - 1) + 2 * 0.002  # linear above its 1-token time, two chunks
    assert two.step_cost(*step).seconds - one.step_cost(*step).seconds == pytest.approx(stretched)
    decode_only = ((), 8, 8000)
    assert two.step_cost(*decode_only).seconds - one.step_cost(*decode_only).seconds == (
        pytest.approx(1e-5 * 7)
    )
    assert two.terms(*step).seconds(two.profile) == pytest.approx(two.step_cost(*step).seconds)
    with pytest.raises(ValueError, match="kernel_scale"):
        DeviceProfile(kernel_scale=0.1)
    with pytest.raises(ValueError, match="kernel_scale must be between 0.5 and 5"):
        with_overrides(SimConfig(), {"kernel_scale": 9})


def test_each_engine_is_priced_with_its_own_kernels_and_its_release():
    """An SGLang run reads SGLang's tables (its sgl-kernel GEMMs, FA3, fused MoE), a vLLM run
    vLLM's; a release names the nearest measured table (SGLang 0.5.6.post2's MoE: 0.5.10's, not
    the newest 0.5.14), and an operator the engine's tables lack falls back to vLLM's."""
    from sim.cluster.topologies import Cluster
    from sim.config import SimConfig, with_overrides
    from sim.cost.kernel_data import Tables, table_paths

    base = {"gpu": "H200", "model": "Qwen3-235B-A22B:fp8", "tensor_parallel": 2}
    base["step_costs"] = "kernels"
    sources = {}
    for policy, release in (("sglang", ""), ("sglang", "0.5.6.post2"), ("vllm", "")):
        config = with_overrides(SimConfig(policy=policy), {**base, "kernel_version": release})
        sources[policy, release] = Cluster(config).cost.kernels.sources
    assert sources["sglang", ""]["linear"] == "SGLang 0.5.14 GEMMs, fp8, router bf16"
    assert sources["sglang", ""]["moe"].startswith("SGLang 0.5.14 fp8_block TP2")
    assert sources["sglang", "0.5.6.post2"]["moe"].startswith("SGLang 0.5.10 fp8_block TP2")
    assert sources["vllm", ""]["moe"].startswith("vLLM 0.24.0 fp8_block TP2")
    assert sources["vllm", ""]["prefill_attention"].startswith("vLLM 0.24.0 vllm_flash_attn_fa3")
    # SGLang 0.5.6.post2's all-reduce table timed TensorRT-LLM's kernel: the nearest with
    # SGLang's own graph rows is read instead.
    assert sources["sglang", "0.5.6.post2"]["allreduce"].startswith("SGLang 0.5.9 custom")
    # Every SGLang table first (the wanted release's nearest first), vLLM's after them.
    paths = table_paths("h200_sxm", "moe", "moe_perf.parquet", Tables("sglang", "0.5.6.post2"))
    engines = [p.parent.parent.name for p in paths]
    assert engines == sorted(engines, key=lambda e: e != "sglang") and engines[-1] == "vllm"
    assert paths[0].parent.name == "0.5.10"
    with pytest.raises(ValueError, match="engine must be one of vllm, sglang"):
        Tables("tgi")
    with pytest.raises(ValueError, match="kernel_version must be a release"):
        with_overrides(SimConfig(), {"kernel_version": "0.12; rm -rf"})
