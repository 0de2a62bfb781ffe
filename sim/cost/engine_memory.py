"""What vLLM keeps off its KV cache beside the weights: the profile run's peak (issue 30).

Notable features
- vLLM sizes its KV cache at start-up (vllm/v1/worker/gpu_worker.py `determine_available_memory`,
  the same from 0.11 to 0.19): total_gpu_memory x gpu_memory_utilization, minus the weights,
  minus the torch peak of a profile run (a dummy forward of max_num_batched_tokens tokens, then
  `_dummy_sampler_run`), minus the non-torch memory that run adds (NCCL and cuBLAS buffers).
  (The CUDA-graph estimate is subtracted only with VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1.)
- The peak is the SAMPLER's, not the forward's: `_dummy_sampler_run` (gpu_model_runner.py
  4121-4167 at 0.12.0, 5556-5600 at 0.19.0) samples one token for each of
  min(max_num_seqs, max_num_batched_tokens) dummy requests with top-p 0.9 and top-k vocab - 1:
  several (requests x vocabulary) matrices at once, whatever the model's size.
- Up to vLLM 0.16 top-k/top-p SORTS the vocabulary (v1/sample/ops/topk_topp_sampler.py
  `apply_top_k_top_p` at 0.12.0 258-279: fp32 logits, sorted values, int64 indices, softmax and
  cumsum, masks, the scattered result). Measured (llm-d/llm-d-benchmark config_explorer/
  empirical-vllm-memory-results.md: vLLM 0.11.0 logs on one and two H100s, max_num_seqs 1024):
  a torch peak of 4.76 GiB for Llama-3.1-8B and 4.84 for Llama-3.3-70B FP8 (vocabulary
  128,256), 5.56 and 5.64 for Qwen3-0.6B and Qwen3-32B (151,936), 7.38 for gpt-oss-20b and
  -120b (201,088); non-torch 0.13 GiB on one GPU, 0.54-0.55 on two. A least-squares line
  through those six peaks: 9.32 fp32 matrices (requests x vocabulary), plus 0.22 GiB (the
  forward's own activations), within 0.07 GiB of each. vLLM V0's logs (256 requests; 8B
  Llama models, 1.19-1.40 GiB) fit it too (1.36).
- From vLLM 0.17 a Triton kernel filters top-k/top-p in place for 8 requests or more
  (topk_topp_triton.py, `apply_top_k_top_p` at 0.19.0 245-255; absent from 0.16.0): what stays
  alive is the bf16 logits, their fp32 copy, the softmax and the exponential noise
  (`random_sample` 325-346 divides in place), 3.5 fp32 matrices. That figure is read off the
  code, not measured.
- What it leaves out: CUDA graphs (captured after the KV cache is allocated; llm-d measured -0.9
  to +1.0 GiB), and more than two GPUs' NCCL buffers (held at the two-GPU figure).
"""

from __future__ import annotations

from sim.cost.specs import GIB, ModelSpec

SORT_COPIES = 9.32  # fp32 (requests x vocabulary) matrices at the peak, sort path (<= 0.16)
TRITON_COPIES = 3.5  # the same with the Triton top-k/top-p filter (>= 0.17)
TRITON_FROM = (0, 17)  # the first release that filters without sorting
FORWARD_GIB = 0.22  # the rest of the profile run's torch peak
NON_TORCH_GIB = {1: 0.13, 2: 0.55}  # NCCL, cuBLAS: one GPU, two or more (measured at two)


def release_tuple(release: str) -> tuple[int, ...]:
    """(0, 5, 6) of "0.5.6.post2", (0, 12) of "0.12"; () for "" (the release PD Lab mirrors:
    the newest) and for a name that does not start with numbers ("nightly-5b8c30d6")."""
    parts = []
    for p in release.split(".")[:3]:
        if not p.isdigit():
            break
        parts.append(int(p))
    return tuple(parts)


def vllm_profile_reserve_gb(
    model: ModelSpec, tensor_parallel: int, sampler_requests: int, release: str = ""
) -> float:
    """GB (1e9 bytes) per GPU that vLLM's profile run keeps off the KV cache: the sampler's peak
    over `sampler_requests` dummy requests (min of max_num_seqs and max_num_batched_tokens), the
    forward's activations and the non-torch buffers, for vLLM `release` ("" = the newest).
    Every rank samples the full vocabulary (the logits are all-gathered: `use_all_gather`), so
    tensor parallelism does not divide it."""
    if sampler_requests < 1:
        raise ValueError(f"sampler_requests must be >= 1, got {sampler_requests}")
    version = release_tuple(release)
    copies = SORT_COPIES if version and version < TRITON_FROM else TRITON_COPIES
    sampler = copies * sampler_requests * model.vocab * 4  # bytes
    non_torch = NON_TORCH_GIB[1 if tensor_parallel == 1 else 2]
    return (sampler + (FORWARD_GIB + non_torch) * GIB) / 1e9
