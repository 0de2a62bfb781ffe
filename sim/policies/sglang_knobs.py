"""SGLang's server settings for the `sglang` policy: its flags' names and defaults, and the
defaults it derives from the GPU's memory (chunk size, decode CUDA graphs, memory fraction).

Split from sim/policies/sglang.py, which mirrors the scheduler itself (as vllm_v1_knobs.py is
from vllm_v1.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from sim.policies.base import PREFIX_CACHING, Knobs


def sglang_chunk_default(mem_gb: float) -> int:
    """`chunked_prefill_size` SGLang picks by GPU memory (srt/arg_groups/memory_hook.py 89-170).

    < 20 GiB: 2048; < 60 GiB (A10, RTX 4090, L40S, A100-40GB): 4096; < 160 GiB (H100, H200,
    A100-80GB): 8192; otherwise (B200, MI300): 16384.
    """
    mib = mem_gb * 1e9 / 2**20
    if mib < 20 * 1024:
        return 2048
    if mib < 60 * 1024:
        return 4096
    if mib < 160 * 1024:
        return 8192
    return 16384


def sglang_cuda_graph_max_bs(mem_gb: float, tensor_parallel: int) -> int:
    """The largest decode batch SGLang captures a CUDA graph for, by GPU memory (GiB) and TP
    (srt/arg_groups/memory_hook.py, handle_gpu_memory_settings, sglang commit 031ed82):
    < 20 GiB: 8; < 35: 48 (TP < 4) or 160; < 60: 32 or 160; < 160 (H100, H200): 256 or 512;
    otherwise (B200): 512."""
    mib = mem_gb * 1024
    small_tp = tensor_parallel < 4
    if mib < 20 * 1024:
        return 8
    if mib < 35 * 1024:
        return 48 if small_tp else 160
    if mib < 60 * 1024:
        return 32 if small_tp else 160
    if mib < 160 * 1024:
        return 256 if small_tp else 512
    return 512


def sglang_mem_fraction_static(
    mem_gb: float,
    tensor_parallel: int,
    activation_tokens: int,
    cuda_graph_max_bs: int | None = None,
) -> float:
    """`--mem-fraction-static` SGLang picks when it is not set: the share of GPU memory for the
    weights and the KV pool, the rest kept for activations and CUDA graphs.

    srt/arg_groups/memory_hook.py, handle_gpu_memory_settings (sglang commit 031ed82; the same
    formula since PR #10975, "General heuristics for --mem-fraction-static"): in MiB,
    reserved = 512 (metadata) + 1.5 x max(chunked_prefill_size, 2048) (activations)
             + tp x pp / 8 x 1024 (parallel slack) + 2 x cuda_graph_max_bs (decode graphs),
    at least 10 GiB on GPUs over 60 GiB; fraction = round((memory - reserved) / memory, 3).
    An H100 at TP 1 keeps 13.1 GiB back (0.836), where vLLM's gpu_memory_utilization keeps
    0.1. Left out: the prefill (piecewise) CUDA graphs' 8 MiB per captured size, and the DP
    attention, speculative decoding and DeepEP terms.
    """
    if cuda_graph_max_bs is None:
        cuda_graph_max_bs = sglang_cuda_graph_max_bs(mem_gb, tensor_parallel)
    mib = mem_gb * 1024  # datasheet GB are GiB (sim/cost/hardware.py)
    reserved = 512 + 1.5 * max(activation_tokens, 2048) + tensor_parallel / 8 * 1024
    reserved += 2 * cuda_graph_max_bs
    if mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((mib - reserved) / mib, 3)


@dataclass(frozen=True)
class SglangKnobs(Knobs):
    chunked_prefill_size: int = 0  # tokens per prefill batch; 0 = SGLang's default for the GPU
    max_prefill_tokens: int = 16384  # prompt tokens one prefill batch may take (SGLang default)
    max_running_requests: int = 0  # 0 = no cap but KV memory
    enable_mixed_chunk: bool = False  # decodes ride along in prefill batches
    enable_prefix_caching: bool = True  # the radix cache (SGLang: --disable-radix-cache off)
    schedule_policy: str = "fcfs"  # fcfs | lpm (longest cached prefix first)
    schedule_conservativeness: float = 1.0  # scales new_token_ratio's start value (SGLang 1.0)
    # Running fixed-length (ignore_eos) requests reserve all their remaining output: sglang
    # 0.5.23, schedule_policy.py 785-794 ("Fixed-length requests cannot benefit from the early-EOS
    # estimate"). False: scaled by new_token_ratio like any request, as 0.5.1-0.5.8 did (the same
    # function there: 0.5.6.post2 372-379, 0.5.8.post1 434-441). PD Lab's outputs are all fixed.
    reserve_fixed_output: bool = True
    # The overlap event loop (SGLang's server default; --disable-overlap-schedule turns it off):
    # off here, so that each step shows the scheduler's own decision and the differential test
    # can drive the real scheduler's normal loop; the replays of real servers turn it on
    # (bench/fidelity_aiconfigurator.py). See `Sglang.schedule`.
    overlap_schedule: bool = False

    MEANINGS: ClassVar[Mapping[str, str]] = {
        "chunked_prefill_size": "tokens per prefill batch, cut into chunks to fit",
        "max_prefill_tokens": "prompt tokens per prefill batch",
        "max_running_requests": "running requests at most",
        "enable_mixed_chunk": "decodes inside prefill batches",
        "enable_prefix_caching": PREFIX_CACHING,
        "schedule_policy": "SGLang's order of the waiting queue",
        "schedule_conservativeness": "how much future output the KV check reserves (x 0.7)",
        "reserve_fixed_output": "fixed-length requests reserve all their output (0.5.23)",
        "overlap_schedule": "overlap event loop: a request that arrives in a step waits one more",
    }

    def __post_init__(self) -> None:
        self.check_positive("max_prefill_tokens")
        if self.chunked_prefill_size < -1:
            raise ValueError("chunked_prefill_size must be -1 (no chunking), 0 (auto) or > 0")
        if self.max_running_requests < 0:
            raise ValueError("max_running_requests must be >= 0 (0 = no cap)")
        if not 0 <= self.schedule_conservativeness <= 100:
            raise ValueError("schedule_conservativeness must be in [0, 100] (SGLang: 1.0)")
        if self.schedule_policy not in ("fcfs", "lpm"):
            raise ValueError(f"schedule_policy must be fcfs or lpm, got {self.schedule_policy!r}")

    def for_gpu(self, gpu_name: str, mem_gb: float) -> SglangKnobs:
        if self.chunked_prefill_size:
            return self
        return replace(self, chunked_prefill_size=sglang_chunk_default(mem_gb))
