"""vLLM's start-up memory: the profile run's reserve and the KV cache it leaves (issue 30)."""

from __future__ import annotations

import pytest

from sim.config import SimConfig, with_overrides
from sim.cost.engine_memory import release_tuple, vllm_profile_reserve_gb
from sim.cost.hardware import get_gpu, get_model, kv_capacity_tokens
from sim.cost.specs import GIB

# vLLM 0.11.0's own logs on H100s at gpu_memory_utilization 0.9 and max_num_seqs 1024
# (llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md): the KV cache it
# allocated, GiB per GPU. (Its 70B row is Llama-3.3-70B FP8: Llama-3.1-70B's shapes.)
MEASURED_KV_GIB = [
    ("Llama-3.1-8B", 1, 51.38),
    ("Llama-3.1-70B:fp8", 2, 32.00),
    ("Qwen3-32B", 1, 4.45),
    ("Qwen3-32B", 2, 34.49),
]


@pytest.mark.parametrize(("model", "tp", "measured"), MEASURED_KV_GIB)
def test_the_kv_cache_is_the_one_vllm_allocated(model, tp, measured):
    # The logs print two decimals and the reserve's line fits the peaks within 0.07 GiB: the
    # whole KV cache within 0.15 GiB (under 0.5% of the 32-GiB ones; 3% of the 4.45-GiB one).
    m = get_model(model)
    reserve = vllm_profile_reserve_gb(m, tp, 1024, release="0.11.0")
    tokens = kv_capacity_tokens(get_gpu("H100-SXM"), m, tp, 0.9, reserve)
    per_gpu_gib = tokens * m.kv_bytes_per_token * m.kv_replication(tp) / tp / GIB
    assert per_gpu_gib == pytest.approx(measured, abs=0.15)


def test_the_sampler_sorts_until_0_17_and_filters_in_place_after():
    m = get_model("Llama-3.1-8B")
    sort, triton = (vllm_profile_reserve_gb(m, 1, 1024, r) for r in ("0.16.0", "0.17.0"))
    assert sort > 2 * triton - 0.5  # 9.32 against 3.5 matrices of 1024 x 128,256 fp32
    assert vllm_profile_reserve_gb(m, 1, 1024) == triton  # "": the newest release
    # one request's row of the vocabulary less: 9.32 x 128,256 x 4 bytes
    step = sort - vllm_profile_reserve_gb(m, 1, 1023, "0.16")
    assert step == pytest.approx(9.32 * 128_256 * 4 / 1e9)
    # two GPUs add NCCL's buffers, and every rank samples the whole vocabulary
    assert vllm_profile_reserve_gb(m, 2, 1024, "0.16") - sort == pytest.approx(0.42 * GIB / 1e9)
    with pytest.raises(ValueError, match="sampler_requests"):
        vllm_profile_reserve_gb(m, 1, 0)


def test_release_tuple():
    assert release_tuple("0.12.0") == (0, 12, 0) and release_tuple("0.11") == (0, 11)
    assert release_tuple("0.5.6.post2") == (0, 5, 6)
    assert release_tuple("0.17.0") >= (0, 17) > release_tuple("0.16.1")
    assert release_tuple("nightly-5b8c30d6") == ()
    assert release_tuple("") == ()


def test_each_engine_keeps_its_own_reserve_unless_told():
    vllm = SimConfig()  # vLLM V1 on an H100: 1024 dummy requests, the newest sampler
    expected = vllm_profile_reserve_gb(get_model(vllm.hardware.model), 1, 1024)
    assert vllm.kv_reserve_gb("H100-SXM", 80.0) == pytest.approx(expected)
    # fewer sequences, a smaller sampler peak
    few = with_overrides(vllm, {"max_num_seqs": 64})
    assert few.kv_reserve_gb("H100-SXM", 80.0) < expected
    # SGLang keeps its activations' share out of mem_fraction_static: the generic 1 GB
    assert SimConfig(policy="sglang").kv_reserve_gb("H100-SXM", 80.0) == 1.0
    told = with_overrides(vllm, {"activation_reserve_gb": 7.5})
    assert told.kv_reserve_gb("H100-SXM", 80.0) == 7.5


def test_a_share_of_memory_below_the_reserve_is_refused_with_what_to_change():
    # 2% of an H100 is 1.7 GB, under the 2.2 GB vLLM's sampler keeps for 1024 requests
    with pytest.raises(ValueError, match="mem_utilization=0.02 leaves .* raise mem_utilization"):
        with_overrides(SimConfig(), {"mem_utilization": 0.02})
    # with 64 requests its peak is 0.5 GB: the same share is enough to start
    with_overrides(SimConfig(), {"mem_utilization": 0.02, "max_num_seqs": 64})


def test_the_speculative_lesson_keeps_the_batches_its_runs_can_hold():
    # The sweep's cut (ui/lesson_setups.spec_batches) counts the same reserve as the runs it
    # starts: vLLM's sampler peak for max_num_seqs = the batch.
    from sim.runs.memory import kv_blocks
    from ui import lesson_setups as ls

    kept = ls.spec_batches("L4", "Llama-3.1-8B", 4)
    assert kept and kept[-1] < ls.SPEC_BATCHES[-1]  # a 24-GB card cuts the largest batches
    per_request = ls.SPEC_PROMPT + ls.SPEC_OUTPUT + 4 + 16
    for b in ls.SPEC_BATCHES:
        config = ls.spec_batch_spec(b, "L4", "Llama-3.1-8B", {})[1]
        held = kv_blocks(config) * config.engine.block_size
        assert (b in kept) == (b * per_request <= held), b
