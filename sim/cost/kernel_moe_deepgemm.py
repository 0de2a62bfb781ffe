"""vLLM 0.12's DeepGEMM experts on Hopper, priced from DeepGEMM's measured GEMMs (issue 30).

Which releases and deployments (vllm 0.12.0's source):
- A block-FP8 checkpoint's routed experts run on DeepGEMM on Hopper whenever DeepGEMM is
  installed and the experts' tensor-parallel size is under 8 (with expert parallel it is 1):
  model_executor/layers/quantization/fp8.py `get_fp8_moe_backend`, 169-188 (VLLM_USE_DEEP_GEMM
  and VLLM_MOE_USE_DEEP_GEMM default on; "DeepGEMM MoE is disabled by default when TP size is
  >= 8").
- With E8M0 scales (VLLM_USE_DEEP_GEMM_E8M0, default on) at EVERY batch size, under DeepGEMM's
  128-row alignment too: fused_moe/triton_deep_gemm_moe.py 98-99 and 140-141
  (`is_deep_gemm_e8m0_used() or _valid_deep_gemm(...)`).
What runs (fused_moe/deep_gemm_moe.py `DeepGemmExperts.apply`, 223-310):
- The tokens are laid out contiguously, each expert's rows padded to 128, in a buffer sized for
  the worst case: M_sum = round_up(tokens x top-k + local experts x 127, 128)
  (fused_moe/deep_gemm_utils.py `compute_aligned_M`, 26-44; no per-expert counts on the host).
- The rows no token fills keep expert id 0: `deepgemm_moe_permute` allocates the ids with
  torch.zeros (deep_gemm_utils.py 369-374). DeepGEMM skips only negative ids, so it computes
  every padded block as expert 0's: each MoE layer runs its gate+up GEMM (M_sum x hidden ->
  2 x width) and its down GEMM (M_sum x width -> hidden) over all M_sum rows, however few tokens
  the step has. Qwen3-235B-A22B on two GPUs: 16,384 rows for 4 to 16 decodes (16,640 at 48), a step
  that hardly moves with the batch, as the public runs measured it (52 ms from 4 to 20 clients).
- vLLM 0.13 fills the ids with -1 (0.13.0 deep_gemm_utils.py 375-384: "so any row that is not
  explicitly written by the scatter kernel will be treated as invalid and skipped by DeepGEMM's
  scheduler"), so this pricing stops at 0.13 (`PADDED_RELEASES`).
Priced: those two GEMMs of M_sum rows per MoE layer, from the GEMM table's DeepGEMM block-FP8
rows (`DeepGemmFp8BlockScaledMMKernel`: DeepGEMM's dense kernel; aiconfigurator-core times no
grouped one for vLLM). A grouped GEMM reads one weight matrix per expert where the dense one
reads one: at M_sum rows the GEMM is bound by its arithmetic, so that is left out, as are the
permute, activation, quantisation and gather kernels around it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sim.cost.kernel_data import VLLM, Tables, release
from sim.cost.kernel_gemm import GemmTable, gemm_table
from sim.cost.specs import ModelSpec

ALIGN = 128  # get_mk_alignment_for_contiguous_layout()[0]: rows per expert block
PADDED_RELEASES = ((0, 12), (0, 13))  # [from, until): the padded blocks computed as expert 0
MAX_MOE_TP = 8  # the experts' tensor-parallel size from which 0.12 keeps Triton by default
HOPPER_SYSTEMS = frozenset({"h100_sxm", "h200_sxm"})  # aiconfigurator's compute capability 9.0
KERNEL = "DeepGemm"  # the GEMM table's kernel_source for DeepGEMM's block-FP8 GEMM


def runs_padded_deepgemm(system: str, dtype: str, tables: Tables, moe_tp: int, width: int) -> bool:
    """Whether vLLM (`tables`' release) runs these experts on DeepGEMM with padded blocks
    computed: a block-FP8 model on Hopper, experts split fewer than 8 ways, a release in
    PADDED_RELEASES, and an expert slice (`width` rows per rank) on DeepGEMM's 128 grid."""
    if tables.engine != "vllm" or dtype != "fp8_block" or system not in HOPPER_SYSTEMS:
        return False
    if not tables.version:
        return False
    first, until = PADDED_RELEASES
    return first <= release(tables.version) < until and moe_tp < MAX_MOE_TP and width % ALIGN == 0


def padded_rows(tokens: float, topk: int, local_experts: int) -> int:
    """M_sum: the rows DeepGEMM computes for `tokens` tokens entering a MoE layer."""
    rows = math.ceil(tokens) * topk + local_experts * (ALIGN - 1)
    return -(-rows // ALIGN) * ALIGN


@dataclass(frozen=True)
class PaddedDeepGemmTimes:
    """Measured seconds of a step's routed experts on vLLM 0.12's DeepGEMM path, all MoE
    layers, one rank (the same call as kernel_moe.MoeTimes)."""

    table: GemmTable  # DeepGEMM's block-FP8 rows
    hidden: int
    width: int  # each expert's intermediate rows on this rank
    topk: int
    local_experts: int  # experts held by this rank
    layers: int  # MoE layers
    source: str

    def __call__(self, tokens: float) -> float:
        """All MoE layers for `tokens` tokens entering each, seconds."""
        if tokens <= 0:
            return 0.0
        rows = padded_rows(tokens, self.topk, self.local_experts)
        gate_up = self.table.seconds(rows, 2 * self.width, self.hidden)
        down = self.table.seconds(rows, self.hidden, self.width)
        return float(self.layers * (gate_up + down))


def padded_deepgemm_times(
    gpu_name: str, model: ModelSpec, moe_tp: int, moe_ep: int, tables: Tables = VLLM
) -> PaddedDeepGemmTimes | None:
    """The pricing for `model`'s experts split `moe_tp` ways and spread over `moe_ep` ranks, or
    None where the GPU's GEMM table has no DeepGEMM rows."""
    m = model.moe
    table = gemm_table(gpu_name, "fp8_block", tables, kernel=KERNEL)
    if m is None or table is None:
        return None
    width, local = m.expert_intermediate // moe_tp, m.num_experts // moe_ep
    par = f"TP{moe_tp}" if moe_ep == 1 else f"EP{moe_ep}"
    source = (
        f"{table.version} GEMMs, DeepGEMM fp8_block {par}: vLLM {tables.version}'s grouped "
        f"experts, {local} x {ALIGN - 1} padded rows computed"
    )
    return PaddedDeepGemmTimes(
        table, model.hidden, width, m.experts_per_token, local, model.moe_layers, source
    )
