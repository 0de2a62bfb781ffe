"""Hardware and model catalog: the numbers the roofline cost model runs on.

Notable features
- `GpuSpec` and `ModelSpec` are frozen, validated dataclasses. Units live in the field names:
  TFLOP/s (1e12 FLOP per second), GB/s (1e9 bytes per second) and the memory size as the
  datasheets print it ("80 GB", which nvidia-smi shows to be 80 GiB).
- `ModelSpec` derives parameter counts, weight bytes, KV bytes per token and FLOPs per token from
  a Hugging Face style config: GQA attention or DeepSeek's MLA, SwiGLU MLPs, and mixture-of-experts
  layers (`MoeSpec`: routed experts, top-k, shared experts, leading dense layers). Norms, biases
  and routers' softmax are ignored.
- A MoE model keeps ALL its experts in memory but runs only top-k per token, and a step reads
  the weights of every expert that ANY of its tokens picked: `expected_experts(T)` answers "how
  many distinct experts does a batch of T tokens touch?" (top-k at batch 1, all at large batch).
- A catalog (`GPUS`, `MODELS`, read-only, in display order; every entry cites its source) with
  case-insensitive lookup. `get_model` also takes a path to a Hugging Face `config.json` (or its
  folder: read by `sim/hf_config.py`), and a `:fp8` / `:fp4` suffix for quantized weights
  (`Llama-3.1-70B:fp8`).
  `custom_gpu` builds any other device, e.g. a CPU for the live page.
- `kv_capacity_tokens` answers "how many tokens of KV fit next to the weights?" (tensor parallel
  splits weights and KV heads; expert parallel splits the experts) and `kv_transfer_s` answers
  "how long does moving a prompt's KV take?" (disaggregated serving).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

_T = TypeVar("_T")
GIB = 1024**3  # bytes in a GiB


def _check_positive(owner: str, **values: float) -> None:
    """Raise ValueError unless every value is a positive finite number."""
    for key, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{owner}: {key} must be a positive finite number, got {value!r}")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator's nominal peaks (dense tensor-core FLOP/s, memory, links)."""

    name: str
    bf16_tflops: float  # dense BF16 peak, 1e12 FLOP/s (no 2:4 sparsity)
    mem_bw_gb_s: float  # HBM/GDDR bandwidth, GB/s
    mem_gb: float  # device memory as the datasheet says it ("80 GB": in fact GiB, 2^30 bytes)
    interconnect_gb_s: float  # GPU-to-GPU, one direction, GB/s: NVLink, else what PCIe achieves
    host_link_gb_s: float  # PCIe to host memory, one direction (swap), GB/s
    fp8_tflops: float = 0.0  # dense FP8 peak; 0 = no FP8 tensor cores (FP8 weights run at BF16)
    fp4_tflops: float = 0.0  # dense FP4 peak (Blackwell); 0 = none
    # One hop of a ring collective (kernel launch + synchronisation), microseconds: a ring
    # all-reduce over n GPUs pays 2(n-1) hops. NVLink/NVSwitch ~1 us, PCIe several.
    link_latency_us: float = 5.0
    nvlink: bool = False  # GPUs of one server talk over NVLink (else PCIe)

    def __post_init__(self) -> None:
        _check_positive(
            f"GpuSpec {self.name!r}",
            bf16_tflops=self.bf16_tflops,
            mem_bw_gb_s=self.mem_bw_gb_s,
            mem_gb=self.mem_gb,
            interconnect_gb_s=self.interconnect_gb_s,
            host_link_gb_s=self.host_link_gb_s,
        )
        for key in ("fp8_tflops", "fp4_tflops", "link_latency_us"):
            value = getattr(self, key)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ValueError(f"GpuSpec {self.name!r}: {key} must be >= 0, got {value!r}")

    def matmul_tflops(self, bytes_per_param: float) -> float:
        """Dense peak for matmuls at this element width: FP4 and FP8 use the FP4 and FP8 tensor
        cores where the GPU has them; otherwise the weights are dequantized and multiplied at
        BF16 (vLLM's Marlin kernels run FP8 on an A100, FP4 on an H100, that way)."""
        if bytes_per_param <= 0.5:
            return self.fp4_tflops or self.bf16_tflops
        if bytes_per_param <= 1 and self.fp8_tflops:
            return self.fp8_tflops
        return self.bf16_tflops


@dataclass(frozen=True, slots=True)
class MoeSpec:
    """Mixture-of-experts MLPs: each token's router picks `experts_per_token` of `num_experts`."""

    num_experts: int  # E routed experts per MoE layer
    experts_per_token: int  # k (top-k)
    expert_intermediate: int  # d_e, one expert's SwiGLU width (moe_intermediate_size)
    shared_intermediate: int = 0  # always-on shared expert(s), total width (0 = none)
    dense_layers: int = 0  # layers with a plain dense MLP of width `intermediate` instead

    def __post_init__(self) -> None:
        for key in ("num_experts", "experts_per_token", "expert_intermediate"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"MoeSpec: {key} must be an int >= 1, got {value!r}")
        for key in ("shared_intermediate", "dense_layers"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"MoeSpec: {key} must be an int >= 0, got {value!r}")
        if self.experts_per_token > self.num_experts:
            raise ValueError(
                f"MoeSpec: experts_per_token ({self.experts_per_token}) exceeds "
                f"num_experts ({self.num_experts})"
            )


@dataclass(frozen=True, slots=True)
class MlaSpec:
    """DeepSeek's multi-head latent attention: K and V are cached as one compressed latent.

    Simplified: the cache holds kv_lora_rank + qk_rope_head_dim values per token and layer (the
    latent and the shared RoPE key); attention FLOPs are counted in the decompressed form
    (q·k over qk_nope + qk_rope dims, a·v over v_head_dim), for prefill and decode alike, and
    decode attention stays bandwidth-bound on the latent. Weight absorption is not modelled.
    """

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0  # 0 = queries projected directly from the hidden state (V2-Lite)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A decoder-only transformer (GQA or MLA attention; dense SwiGLU or MoE MLP)."""

    name: str
    layers: int  # L
    hidden: int  # d
    heads: int  # H (query heads)
    kv_heads: int  # H_kv (GQA: several query heads share one K/V head)
    head_dim: int  # d_h
    intermediate: int  # d_ff, the SwiGLU width of dense MLP layers
    vocab: int  # V
    tied_embeddings: bool  # lm_head shares the embedding matrix
    bytes_per_param: float = 2  # b_w: 2 for BF16, 1 for FP8, 0.5 for FP4 (the element width)
    bytes_per_kv: int = 2  # b_kv: bytes per cached K or V element
    moe: MoeSpec | None = None  # None = every layer has a dense MLP
    mla: MlaSpec | None = None  # None = standard (GQA) attention
    # Block scales stored beside quantized weights, bytes per weight: NVFP4 keeps one FP8 scale
    # per 16 weights (1/16), MXFP4 one E8M0 scale per 32 (1/32); 0 for BF16 and FP8 (a scale
    # per tensor, channel or 128x128 block is too few bytes to count).
    scale_bytes_per_param: float = 0.0
    # The element width the matmuls multiply at, bytes: the wider of weights and activations.
    # 0 = the weights' own (FP8 W8A8 and NVFP4 W4A4 quantize the activations too); 2 for
    # weight-only formats (GPTQ/AWQ W4A16: the kernel dequantizes to BF16, so no FP4 or FP8
    # tensor cores, whatever the GPU has).
    matmul_bytes: float = 0.0
    source: str = field(default="", compare=False)  # where the numbers come from

    def __post_init__(self) -> None:
        ints = (
            "layers",
            "hidden",
            "heads",
            "kv_heads",
            "head_dim",
            "intermediate",
            "vocab",
            "bytes_per_kv",
        )
        for key in ints:
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"ModelSpec {self.name!r}: {key} must be an int >= 1, got {value!r}"
                )
        b = self.bytes_per_param
        if not (isinstance(b, int | float) and not isinstance(b, bool) and 0 < b <= 8):
            raise ValueError(
                f"ModelSpec {self.name!r}: bytes_per_param must be in (0, 8], got {b!r}"
            )
        sb = self.scale_bytes_per_param
        if not (isinstance(sb, int | float) and not isinstance(sb, bool) and 0 <= sb < b):
            raise ValueError(
                f"ModelSpec {self.name!r}: scale_bytes_per_param must be in "
                f"[0, bytes_per_param), got {sb!r}"
            )
        mb = self.matmul_bytes
        if not (
            isinstance(mb, int | float) and not isinstance(mb, bool) and (mb == 0 or b <= mb <= 8)
        ):
            raise ValueError(
                f"ModelSpec {self.name!r}: matmul_bytes must be 0 (the weights' "
                f"width) or in [bytes_per_param, 8], got {mb!r}"
            )
        if self.heads % self.kv_heads:
            raise ValueError(
                f"ModelSpec {self.name!r}: heads ({self.heads}) must be a multiple of kv_heads "
                f"({self.kv_heads})"
            )
        if self.moe is not None and self.moe.dense_layers > self.layers:
            raise ValueError(f"ModelSpec {self.name!r}: more dense layers than layers")

    # ---- parameters ---------------------------------------------------------------------------

    @property
    def params_attention_layer(self) -> int:
        """One layer's attention projections: Q, K, V, O (GQA) or MLA's down/up projections."""
        d, h = self.hidden, self.heads
        if self.mla is None:
            dh = self.head_dim
            return d * h * dh * 2 + d * self.kv_heads * dh * 2  # Q and O; K and V
        a = self.mla
        qk = a.qk_nope_head_dim + a.qk_rope_head_dim
        q = d * a.q_lora_rank + a.q_lora_rank * h * qk if a.q_lora_rank else d * h * qk
        kv_down = d * (a.kv_lora_rank + a.qk_rope_head_dim)  # latent + shared RoPE key
        kv_up = a.kv_lora_rank * h * (a.qk_nope_head_dim + a.v_head_dim)
        return q + kv_down + kv_up + h * a.v_head_dim * d

    @property
    def moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts (0 for a dense model)."""
        return 0 if self.moe is None else self.layers - self.moe.dense_layers

    @property
    def params_expert(self) -> int:
        """One routed expert's parameters summed over all MoE layers (3·d·d_e per layer)."""
        if self.moe is None:
            return 0
        return self.moe_layers * 3 * self.hidden * self.moe.expert_intermediate

    @property
    def params_experts(self) -> int:
        """All routed experts (what expert parallelism splits; read only when picked)."""
        return 0 if self.moe is None else self.moe.num_experts * self.params_expert

    def _mlp_params(self, experts: float) -> float:
        """MLP parameters of all layers, counting `experts` routed experts per MoE layer."""
        d = self.hidden
        if self.moe is None:
            return self.layers * 3 * d * self.intermediate
        m = self.moe
        dense = m.dense_layers * 3 * d * self.intermediate
        per_moe = d * m.num_experts + 3 * d * m.shared_intermediate  # router + shared experts
        return dense + self.moe_layers * per_moe + experts * self.params_expert

    @property
    def params_body(self) -> int:
        """Parameters of all transformer layers (attention + every MLP and expert), §5.1."""
        experts = 0 if self.moe is None else self.moe.num_experts
        return int(self.layers * self.params_attention_layer + self._mlp_params(experts))

    @property
    def params_active(self) -> int:
        """Body parameters one token runs through: attention, dense MLPs, top-k + shared experts."""
        k = 0 if self.moe is None else self.moe.experts_per_token
        return int(self.layers * self.params_attention_layer + self._mlp_params(k))

    @property
    def params_lm_head(self) -> int:
        """Parameters read to compute logits (V·d), whether or not tied to the embeddings."""
        return self.vocab * self.hidden

    @property
    def params_total(self) -> int:
        """All parameters: body + embeddings + lm_head (the V·d matrix counted once if tied)."""
        embeddings = self.vocab * self.hidden
        return self.params_body + embeddings + (0 if self.tied_embeddings else self.params_lm_head)

    @property
    def head_bytes_per_param(self) -> float:
        """Bytes per embedding / lm_head weight: quantized checkpoints keep them in BF16."""
        return max(self.bytes_per_param, 2)

    @property
    def matmul_bytes_per_param(self) -> float:
        """The width the tensor cores run this model's matmuls at (GpuSpec.matmul_tflops)."""
        return self.matmul_bytes or self.bytes_per_param

    @property
    def stored_bytes_per_param(self) -> float:
        """Bytes a body weight takes in memory, and so per step it is read: its element width
        plus its share of the block scales (NVFP4: 0.5 + 1/16 = 4.5 bits)."""
        return self.bytes_per_param + self.scale_bytes_per_param

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights held in device memory (all ranks together)."""
        head = (self.params_total - self.params_body) * self.head_bytes_per_param
        return int(self.params_body * self.stored_bytes_per_param + head)

    @property
    def expert_weight_bytes(self) -> int:
        """Bytes of the routed experts (the part expert parallelism spreads over instances)."""
        return int(self.params_experts * self.stored_bytes_per_param)

    def weight_bytes_held(self, expert_shards: int = 1) -> int:
        """Bytes one instance holds when its experts are split over `expert_shards` instances."""
        return (
            self.weight_bytes - self.expert_weight_bytes + self.expert_weight_bytes // expert_shards
        )

    # ---- MoE routing --------------------------------------------------------------------------

    def expected_experts(self, tokens: float) -> float:
        """Distinct routed experts a batch of `tokens` tokens touches per MoE layer, on average.

        Uniform routing: a token skips a given expert with probability 1 − k/E, so T tokens all
        skip it with probability (1 − k/E)^T and the expected count is E·(1 − (1 − k/E)^T):
        k at one token, every expert once T·k/E >> 1 (a 2048-token prefill, a big decode batch).
        """
        if self.moe is None or tokens <= 0:
            return 0.0
        e, k = self.moe.num_experts, self.moe.experts_per_token
        return e * (1.0 - (1.0 - k / e) ** tokens)

    # ---- KV cache and attention ---------------------------------------------------------------

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of KV cached per token over all layers: 2·L·H_kv·d_h·b_kv (MLA: the latent)."""
        if self.mla is not None:
            return (
                self.layers
                * (self.mla.kv_lora_rank + self.mla.qk_rope_head_dim)
                * self.bytes_per_kv
            )
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_kv

    def kv_replication(self, tensor_parallel: int) -> float:
        """How many copies of each KV head the `tensor_parallel` ranks hold together.

        Ranks split the KV heads; with more ranks than heads each rank keeps one head, copied
        (vLLM replicates them). MLA's latent is shared by all heads, so every rank holds it all.
        """
        if self.mla is not None:
            return float(tensor_parallel)
        per_rank = max(1, self.kv_heads // tensor_parallel)
        return tensor_parallel * per_rank / self.kv_heads

    @property
    def flops_per_token_body(self) -> int:
        """FLOP per token through the linear layers: 2·N_active (a multiply-add per weight)."""
        return 2 * self.params_active

    @property
    def flops_lm_head_per_token(self) -> int:
        """FLOP per sampled position for the logits: 2·d·V."""
        return 2 * self.hidden * self.vocab

    @property
    def attn_flops_per_ctx_token(self) -> int:
        """FLOP per (query, key) pair, all layers: 4·L·H·d_h (QKᵀ and A·V; GQA doesn't help).

        MLA: 2·L·H·(d_qk + d_v), with d_qk = nope + rope dims.
        """
        if self.mla is not None:
            a = self.mla
            return (
                2
                * self.layers
                * self.heads
                * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)
            )
        return 4 * self.layers * self.heads * self.head_dim

    @property
    def dtype(self) -> str:
        """The weights' format, by width: bf16, fp8, fp4 (or fp32)."""
        return DTYPE_NAMES.get(self.bytes_per_param, f"{self.bytes_per_param * 8:g}-bit")


DTYPE_BYTES: Mapping[str, float] = MappingProxyType(
    {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "fp4": 0.5, "int4": 0.5}
)
DTYPE_NAMES = {4: "fp32", 2: "bf16", 1: "fp8", 0.5: "fp4"}
# Block scales per weight (bytes) of the formats that have them. `fp4` is NVFP4, what vLLM
# serves on Blackwell from ModelOpt checkpoints: E2M1 values with one E4M3 scale per 16 (and one
# FP32 scale per tensor), 4.5 bits a weight (NVIDIA, "Introducing NVFP4 for Efficient and
# Accurate Low-Precision Inference", 2025). `int4` is GPTQ/AWQ with one FP16 scale per group of
# 128 weights (their usual group_size; the 4-bit zero points are left out), and weight-only: its
# matmuls run at the BF16 rate (`DTYPE_MATMUL_BYTES`). `int8` is W8A8 (INT8 tensor cores, the
# FP8 rate on Hopper and Blackwell).
DTYPE_SCALE_BYTES: Mapping[str, float] = MappingProxyType({"fp4": 1 / 16, "int4": 2 / 128})
DTYPE_MATMUL_BYTES: Mapping[str, float] = MappingProxyType({"int4": 2})


def with_dtype(model: ModelSpec, dtype: str) -> ModelSpec:
    """`model` with its weights in `dtype` (fp8, fp4, bf16...); the KV cache stays BF16, as vLLM's
    kv_cache_dtype=auto keeps it for quantized checkpoints."""
    key = dtype.strip().lower()
    if key not in DTYPE_BYTES:
        raise ValueError(
            f"unknown weight format {dtype!r}; choose one of: {', '.join(DTYPE_BYTES)}"
        )
    return dataclasses.replace(
        model,
        name=f"{model.name.split(':')[0]}:{key}",
        bytes_per_param=DTYPE_BYTES[key],
        scale_bytes_per_param=DTYPE_SCALE_BYTES.get(key, 0.0),
        matmul_bytes=DTYPE_MATMUL_BYTES.get(key, 0.0),
    )


# KV-cache formats (vLLM's --kv-cache-dtype): bytes per cached K or V element.
KV_DTYPE_BYTES: Mapping[str, int] = MappingProxyType({"bf16": 2, "fp16": 2, "fp8": 1})
KV_SUFFIX = "kv-"  # `:kv-fp8` at the end of a model name


def with_kv_dtype(model: ModelSpec, dtype: str) -> ModelSpec:
    """`model` with its KV cache stored as `dtype` (vLLM's `--kv-cache-dtype fp8`: half the bytes
    per cached token, so twice the tokens fit and decode attention reads half as much)."""
    key = dtype.strip().lower()
    if key not in KV_DTYPE_BYTES:
        raise ValueError(
            f"unknown KV cache format {dtype!r}; choose one of: {', '.join(KV_DTYPE_BYTES)}"
        )
    name = model.name.split(":" + KV_SUFFIX)[0]
    suffix = "" if KV_DTYPE_BYTES[key] == 2 else f":{KV_SUFFIX}{key}"
    return dataclasses.replace(model, name=name + suffix, bytes_per_kv=KV_DTYPE_BYTES[key])


def custom_gpu(
    bf16_tflops: float,
    mem_bw_gb_s: float,
    mem_gb: float,
    interconnect_gb_s: float = 32.0,
    host_link_gb_s: float = 32.0,
    name: str = "custom",
) -> GpuSpec:
    """A device with your own peaks (links default to PCIe Gen4, 32 GB/s one direction)."""
    return GpuSpec(name, bf16_tflops, mem_bw_gb_s, mem_gb, interconnect_gb_s, host_link_gb_s)


# Nominal peaks from each vendor's datasheet (§5.6 of the reference for the first five). FP8/FP4
# are dense tensor peaks with FP32 accumulation. GPU-to-GPU links, one direction: NVLink4 900
# GB/s bidirectional is 450 each way, NVLink5 1.8 TB/s -> 900, NVLink3 600 -> 300, with 1 us
# per ring hop. PCIe cards without NVLink get what NCCL's collectives reach between them, not
# the slot's nominal rate: about half of it with peer-to-peer (Gen5 x16: 32 GB/s, Gen4: 16) and
# 10 us per hop; GeForce cards have no peer-to-peer and bounce through host memory, ~8 GB/s and
# ~15 us (nccl-tests issues #117, #270, #307 and NCCL #1530: RTX 4090 all-reduce measurements).
GPUS: Mapping[str, GpuSpec] = MappingProxyType(
    {
        g.name: g
        for g in (
            # nvidia.com/en-us/data-center/a100 (SXM4 80GB): 312 BF16, 2,039 GB/s, NVLink3
            GpuSpec(
                "A100-80GB", 312.0, 2039.0, 80.0, 300.0, 32.0, link_latency_us=1.0, nvlink=True
            ),
            # nvidia.com/en-us/data-center/h100 (SXM5): 989 BF16, 1,979 FP8, 3.35 TB/s, NVLink4
            GpuSpec(
                "H100-SXM",
                989.0,
                3350.0,
                80.0,
                450.0,
                64.0,
                1979.0,
                link_latency_us=1.0,
                nvlink=True,
            ),
            # nvidia.com/en-us/data-center/h200: same die as H100, 141 GB HBM3e at 4.8 TB/s
            GpuSpec(
                "H200", 989.0, 4800.0, 141.0, 450.0, 64.0, 1979.0, link_latency_us=1.0, nvlink=True
            ),
            # nvidia.com/en-us/data-center/l4: 121 BF16 (242 sparse), 242 FP8, 300 GB/s
            GpuSpec("L4", 121.0, 300.0, 24.0, 16.0, 32.0, 242.0, link_latency_us=10.0),
            # RTX 4090 (Ada whitepaper): 165 BF16 / 330 FP8 with FP32 accumulate, 1,008 GB/s; no
            # NVLink and no peer-to-peer: GPUs talk through host memory over PCIe Gen4
            GpuSpec("RTX-4090", 165.0, 1008.0, 24.0, 8.0, 32.0, 330.0, link_latency_us=15.0),
            # nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000 and the
            # RTX Blackwell whitepaper: 503.8 BF16, 1,007.6 FP8, 2,015 FP4 dense, 96 GB GDDR7 at
            # 1,792 GB/s, PCIe Gen5 x16, no NVLink. GPU-to-GPU: 16 GB/s and 20 us per hop, the
            # link LLMServingSim's authors give the two-card testbed of its RTX PRO 6000 runs
            # (bench/examples/RTXPRO6000/*/config.json: link_bw 16, link_latency 20000 ns)
            GpuSpec(
                "RTX-PRO-6000",
                503.8,
                1792.0,
                96.0,
                16.0,
                64.0,
                1007.6,
                2015.0,
                link_latency_us=20.0,
            ),
            # HGX B200 (nvidia.com/en-us/data-center/hgx, 1,000 W; glennklockwood.com/garden/
            # processors/B200): 2,250 BF16, 4,500 FP8, 9,000 FP4 dense, 180 GB HBM3e at 8 TB/s,
            # NVLink5 1.8 TB/s bidirectional
            GpuSpec(
                "B200",
                2250.0,
                8000.0,
                180.0,
                900.0,
                64.0,
                4500.0,
                9000.0,
                link_latency_us=1.0,
                nvlink=True,
            ),
            # AWS G5's A10G (baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference): 24 GB
            # GDDR6 at 600 GB/s like the A10, ~70 TFLOP/s dense FP16/BF16 tensor; no FP8
            GpuSpec("A10G", 70.0, 600.0, 24.0, 16.0, 32.0, link_latency_us=10.0),
            # nvidia.com/en-us/data-center/l40s: 362 BF16, 733 FP8 dense, 48 GB GDDR6 at
            # 864 GB/s, PCIe Gen4 x16, no NVLink
            GpuSpec("L40S", 362.0, 864.0, 48.0, 16.0, 32.0, 733.0, link_latency_us=10.0),
        )
    }
)


def _qwen3_moe(
    name: str,
    layers: int,
    hidden: int,
    heads: int,
    kv: int,
    intermediate: int,
    experts: int,
    top_k: int,
    expert_int: int,
    source: str,
) -> ModelSpec:
    """A Qwen3-MoE shape: head_dim 128, vocab 151,936, untied, every layer MoE, no shared expert
    (`intermediate` is the config's unused dense width, kept so a loaded config.json matches)."""
    moe = MoeSpec(experts, top_k, expert_int)
    return ModelSpec(
        name, layers, hidden, heads, kv, 128, intermediate, 151936, False, moe=moe, source=source
    )


# Hugging Face config.json values (§5.7 for the first seven), the repo named in `source`.
MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        m.name: m
        for m in (
            ModelSpec(
                "Llama-3.1-8B",
                32,
                4096,
                32,
                8,
                128,
                14336,
                128256,
                False,
                source="meta-llama/Llama-3.1-8B",
            ),
            ModelSpec(
                "Llama-3.3-70B",
                80,
                8192,
                64,
                8,
                128,
                28672,
                128256,
                False,
                source="meta-llama/Llama-3.3-70B-Instruct",
            ),
            ModelSpec(
                "Qwen2.5-0.5B", 24, 896, 14, 2, 64, 4864, 151936, True, source="Qwen/Qwen2.5-0.5B"
            ),
            ModelSpec(
                "Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, False, source="Qwen/Qwen2.5-7B"
            ),
            ModelSpec(
                "Mistral-7B",
                32,
                4096,
                32,
                8,
                128,
                14336,
                32768,
                False,
                source="mistralai/Mistral-7B-v0.3",
            ),  # v0.3 vocab
            ModelSpec(
                "Llama-3.2-1B",
                16,
                2048,
                32,
                8,
                64,
                8192,
                128256,
                True,
                source="meta-llama/Llama-3.2-1B",
            ),
            ModelSpec(
                "SmolLM2-135M",
                30,
                576,
                9,
                3,
                64,
                1536,
                49152,
                True,
                source="HuggingFaceTB/SmolLM2-135M",
            ),
            # Same shape as Llama-3.3-70B; the name public benchmarks use.
            ModelSpec(
                "Llama-3.1-70B",
                80,
                8192,
                64,
                8,
                128,
                28672,
                128256,
                False,
                source="meta-llama/Llama-3.1-70B",
            ),
            # Llama 2: multi-head attention at 7B (32 KV heads), GQA at 70B; 32,000-token vocab.
            ModelSpec(
                "Llama-2-7B",
                32,
                4096,
                32,
                32,
                128,
                11008,
                32000,
                False,
                source="meta-llama/Llama-2-7b-hf",
            ),
            ModelSpec(
                "Llama-2-70B",
                80,
                8192,
                64,
                8,
                128,
                28672,
                32000,
                False,
                source="meta-llama/Llama-2-70b-hf",
            ),
            # Qwen3 dense: head_dim 128 although hidden/heads differs (32B: 64·128 = 8192 > 5120).
            ModelSpec(
                "Qwen3-8B", 36, 4096, 32, 8, 128, 12288, 151936, False, source="Qwen/Qwen3-8B"
            ),
            ModelSpec(
                "Qwen3-32B", 64, 5120, 64, 8, 128, 25600, 151936, False, source="Qwen/Qwen3-32B"
            ),
            # Mixtral: 8 experts of width 14,336, top-2, in every layer.
            ModelSpec(
                "Mixtral-8x7B",
                32,
                4096,
                32,
                8,
                128,
                14336,
                32000,
                False,
                moe=MoeSpec(8, 2, 14336),
                source="mistralai/Mixtral-8x7B-v0.1",
            ),
            # Qwen3-MoE: 128 experts, top-8, moe_intermediate_size 768 / 1536.
            _qwen3_moe("Qwen3-30B-A3B", 48, 2048, 32, 4, 6144, 128, 8, 768, "Qwen/Qwen3-30B-A3B"),
            _qwen3_moe(
                "Qwen3-235B-A22B", 94, 4096, 64, 4, 12288, 128, 8, 1536, "Qwen/Qwen3-235B-A22B"
            ),
            # DeepSeek-V2-Lite: MLA (kv_lora_rank 512, no query LoRA), 64 routed experts of width
            # 1,408, top-6, 2 shared experts, layer 0 dense (first_k_dense_replace = 1).
            ModelSpec(
                "DeepSeek-V2-Lite",
                27,
                2048,
                16,
                16,
                128,
                10944,
                102400,
                False,
                moe=MoeSpec(64, 6, 1408, shared_intermediate=2 * 1408, dense_layers=1),
                mla=MlaSpec(512, 128, 64, 128),
                source="deepseek-ai/DeepSeek-V2-Lite",
            ),
        )
    }
)

# Nominal one-direction bandwidths in GB/s (§2.5), for labelling the KV-transfer slider.
LINKS_GB_S: Mapping[str, float] = MappingProxyType(
    {
        "NVLink4": 450.0,
        "PCIe Gen5": 64.0,
        "PCIe Gen4": 32.0,
        "IB NDR": 50.0,
        "100GbE": 12.5,
        "25GbE": 3.1,
    }
)


def _lookup(catalog: Mapping[str, _T], name: str, kind: str) -> _T:
    """Case-insensitive catalog lookup with an error that lists the valid names."""
    for key, value in catalog.items():
        if key.lower() == str(name).strip().lower():
            return value
    raise ValueError(f"unknown {kind} {name!r}; choose one of: {', '.join(catalog)}")


def get_gpu(name: str) -> GpuSpec:
    """The catalog GPU called `name` (case-insensitive)."""
    return _lookup(GPUS, name, "GPU")


def get_model(name: str) -> ModelSpec:
    """The model called `name`: a catalog name (case-insensitive) or a path to a Hugging Face
    `config.json` or its folder; a `:fp8` (`:fp4`, `:bf16`, ...) suffix sets the weight format,
    and a last `:kv-fp8` the KV cache's (`Llama-3.1-70B:fp8:kv-fp8`)."""
    text = str(name).strip()
    kv = ""
    head, _, last = text.rpartition(":")
    if head and last.lower().startswith(KV_SUFFIX):
        text, kv = head, last[len(KV_SUFFIX) :]
    model = _get_model(text)
    return with_kv_dtype(model, kv) if kv else model


def _get_model(text: str) -> ModelSpec:
    """get_model without the KV-cache suffix."""
    base, _, suffix = text.rpartition(":")
    if not (base and suffix.lower() in DTYPE_BYTES):
        base, suffix = text, ""
    try:
        model = _lookup(MODELS, base, "model")
    except ValueError as unknown:
        path = Path(base).expanduser()
        if not (path.is_file() or (path / "config.json").is_file()):
            raise ValueError(
                f"{unknown}; or give a path to a Hugging Face config.json (or its folder)"
            ) from None
        from sim.hf_config import read_model_file  # (it builds on this module's specs)

        config = path / "config.json" if path.is_dir() else path
        model = read_model_file(str(config.resolve()), config.stat().st_mtime_ns)
    return with_dtype(model, suffix) if suffix else model


def kv_capacity_tokens(
    gpu: GpuSpec,
    model: ModelSpec,
    tensor_parallel: int = 1,
    mem_utilization: float = 0.9,
    activation_reserve_gb: float = 1.0,
    expert_shards: int = 1,
) -> int:
    """Tokens of KV cache that fit beside the weights on `tensor_parallel` GPUs.

    (mem_utilization·mem·tp − weights − reserve·tp) / (kv_bytes_per_token · replication), floored.
    Like vLLM's gpu_memory_utilization, `mem_utilization` is the share of memory the server may
    use; the activation reserve (GB per GPU) stands for activations, CUDA graphs and workspace.
    The ranks split the weights and the KV heads (`ModelSpec.kv_replication`: heads are copied
    when ranks outnumber them). With expert parallelism over `expert_shards` instances each
    instance holds 1/expert_shards of the routed experts.
    """
    if not isinstance(tensor_parallel, int) or tensor_parallel < 1:
        raise ValueError(f"tensor_parallel must be an int >= 1, got {tensor_parallel!r}")
    if not isinstance(expert_shards, int) or expert_shards < 1:
        raise ValueError(f"expert_shards must be an int >= 1, got {expert_shards!r}")
    if not 0 < mem_utilization <= 1:
        raise ValueError(f"mem_utilization must be in (0, 1], got {mem_utilization}")
    if not (math.isfinite(activation_reserve_gb) and activation_reserve_gb >= 0):
        raise ValueError(f"activation_reserve_gb must be >= 0, got {activation_reserve_gb}")
    # Datasheets' "80 GB" of HBM or GDDR is 80 GiB (nvidia-smi shows 81,559 MiB on an H100).
    per_gpu = mem_utilization * gpu.mem_gb * GIB - activation_reserve_gb * 1e9  # usable bytes/GPU
    weights = model.weight_bytes_held(expert_shards)
    free = per_gpu * tensor_parallel - weights  # bytes left for KV on all GPUs
    per_token = model.kv_bytes_per_token * model.kv_replication(tensor_parallel)
    tokens = math.floor(free / per_token) if free > 0 else 0
    if tokens <= 0:
        needed = weights + model.kv_bytes_per_token
        hint = (
            f"set tensor_parallel to {max(2, math.ceil(needed / per_gpu))} or more"
            if per_gpu > 0
            else "raise mem_utilization or lower activation_reserve_gb"
        )
        raise ValueError(
            f"{model.name} ({weights / 1e9:.0f} GB of weights) does not fit on "
            f"{tensor_parallel}×{gpu.name}; {hint}"
        )
    return tokens


def kv_transfer_s(
    tokens: int, model: ModelSpec, bandwidth_gb_s: float, latency_s: float = 0.0
) -> float:
    """Seconds to ship `tokens` tokens of KV over a link: bytes / (GB/s · 1e9) + fixed latency.

    GB = 1e9 bytes. With tensor parallelism each rank sends its share in parallel, so pass the
    aggregate bandwidth of all the ranks' links.
    """
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens}")
    _check_positive("kv_transfer_s", bandwidth_gb_s=bandwidth_gb_s)
    if not (math.isfinite(latency_s) and latency_s >= 0):
        raise ValueError(f"latency_s must be >= 0 seconds, got {latency_s}")
    return tokens * model.kv_bytes_per_token / (bandwidth_gb_s * 1e9) + latency_s
