"""What a step costs, as data: the device profile, a step's cost breakdown and its operators.

Notable features
- `DeviceProfile`: the achieved fractions of a GPU's nominal peaks (MFU, attention MFU, MBU),
  the per-step and per-request overheads, and `kernel_scale` for measured kernel times.
- `StepCost`: one step's seconds split into compute-bound, memory-bound, communication and
  overhead, with its FLOP and bytes (the UI colours a step by what limited it).
- `RooflineTerms`: the same step as unscaled operator times, for calibration.
- `moe_rows`: the token rows a MoE grouped GEMM computes (whole tiles per picked expert).
- The model that produces them is `sim/cost/roofline.py`'s StepCostModel.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ACT_BYTES = 2  # activations are BF16 even when weights are FP8 (bytes per element)
# Sampling reads the fp32 logits a few times (softmax, penalties, top-k/top-p): bytes per logit.
SAMPLE_BYTES_PER_LOGIT = 16
# Routed experts run as a grouped GEMM that computes whole row tiles of this many token rows per
# expert: vLLM's and SGLang's Triton fused_moe sort the tokens by expert and pad each expert's
# count up to BLOCK_SIZE_M (`moe_align_block_size`; 64 in vLLM's `get_default_config` once a
# batch has more tokens than experts), DeepGEMM's contiguous layout to 128. Padded rows are
# multiplied like real ones (masked loads, full MMA tiles), so an expert that got 5 tokens costs
# the FLOPs of 64. Rows per expert, tokens.
MOE_BLOCK_ROWS = 64

# (tokens, offset = tokens already in KV, samples = positions sent to the lm_head: True/1 for a
# prompt's last chunk, every position (= tokens) for a speculative verify)
Chunk = tuple[int, int, int]


@dataclass(frozen=True, slots=True)
class DeviceProfile:
    """Achieved fractions of the GpuSpec's nominal peaks, plus a fixed per-step overhead."""

    mfu: float = 0.5  # linear layers and lm_head: achieved / peak FLOP/s
    mfu_attn: float = 0.4  # prefill attention (FlashAttention): achieved / peak FLOP/s
    mbu: float = 0.7  # achieved / peak memory bandwidth
    overhead_s: float = 0.003  # scheduling, input prep, kernel launches, sampling: seconds/step
    # Per request in the step (input packing, per-request attention calls, sampling): ~0 on a
    # GPU with fused kernels, but tens of ms per decode on a CPU running a small model.
    overhead_per_seq_s: float = 0.0
    # step_costs=kernels: the measured kernels' compute is stretched by this (prefill attention,
    # and the linear layers' and experts' time above their 1-token time: see
    # sim/cost/measured_step.py). Isolated kernels run at a short burst's clocks, a server that
    # prefills back to back at sustained-power ones; fitted with the overheads on fit runs
    # only, 1.0 = the tables as measured.
    kernel_scale: float = 1.0

    def __post_init__(self) -> None:
        if not (isinstance(self.kernel_scale, int | float) and 0.5 <= self.kernel_scale <= 5):
            raise ValueError(
                f"DeviceProfile: kernel_scale must be in [0.5, 5], got {self.kernel_scale!r}"
            )
        for key in ("mfu", "mfu_attn", "mbu"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and 0 < value <= 1):
                raise ValueError(f"DeviceProfile: {key} must be in (0, 1], got {value!r}")
        if not (math.isfinite(self.overhead_per_seq_s) and self.overhead_per_seq_s >= 0):
            raise ValueError("DeviceProfile: overhead_per_seq_s must be >= 0 seconds")
        if not (math.isfinite(self.overhead_s) and self.overhead_s >= 0):
            raise ValueError(
                f"DeviceProfile: overhead_s must be >= 0 seconds, got {self.overhead_s}"
            )


@dataclass(frozen=True, slots=True)
class StepCost:
    """One step's duration, split by what limited each operator (seconds; FLOP and bytes totals)."""

    seconds: float  # = overhead_s + compute_s + memory_s + comm_s
    compute_s: float  # operators where FLOP/s was the bottleneck
    memory_s: float  # operators where memory bandwidth was the bottleneck
    overhead_s: float  # fixed per-step cost
    comm_s: float  # tensor-parallel all-reduces
    flops: float  # FLOP of the step, summed over all GPUs
    bytes: float  # bytes read + written from device memory, summed over all GPUs


@dataclass(frozen=True, slots=True)
class RooflineTerms:
    """A step's operators in seconds at 100% efficiency; a DeviceProfile scales them."""

    linear: tuple[tuple[float, float], ...]  # (compute_s, memory_s): max(c/MFU, m/MBU) each
    attention: tuple[tuple[float, float], ...]  # per prefill chunk: max(c/MFU_attn, m/MBU)
    kv_read_s: float  # decode attention, memory-bound: kv_read_s / MBU
    comm_s: float  # tensor-parallel all-reduces (+ measured kernel seconds): not scaled
    num_seqs: int = 0  # requests in the step (each costs profile.overhead_per_seq_s)

    def seconds(self, profile: DeviceProfile) -> float:
        """Step duration under `profile` (the same number StepCostModel.step_cost gives)."""
        linear = sum(max(c / profile.mfu, m / profile.mbu) for c, m in self.linear)
        attention = sum(max(c / profile.mfu_attn, m / profile.mbu) for c, m in self.attention)
        overhead = profile.overhead_s + profile.overhead_per_seq_s * self.num_seqs
        return overhead + linear + attention + self.kv_read_s / profile.mbu + self.comm_s


def moe_rows(useful: float, touched: float, block: int = MOE_BLOCK_ROWS) -> float:
    """Token rows a grouped GEMM computes for `useful` rows spread over `touched` experts: each
    expert's rows rounded up to whole `block`-row tiles (on average half a tile more than it got,
    at least one tile). Never fewer than `useful`; ~`useful` once experts get many tiles each."""
    if touched <= 0:
        return useful
    per_expert = useful / touched
    return touched * block * max(1.0, per_expert / block + 0.5)
