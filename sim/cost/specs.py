"""What the roofline cost model runs on, as types: a GPU (`GpuSpec`) and a model (`ModelSpec`,
with `MoeSpec` and `MlaSpec`), frozen and validated, plus weight and KV-cache formats.

Notable features
- Units live in the field names: TFLOP/s (1e12 FLOP per second), GB/s (1e9 bytes per second)
  and the memory size as the datasheets print it ("80 GB", which nvidia-smi shows to be 80 GiB).
- `ModelSpec` derives parameter counts, weight bytes, KV bytes per token and FLOPs per token from
  a Hugging Face style config: GQA attention or DeepSeek's MLA, SwiGLU MLPs, and mixture-of-experts
  layers (`MoeSpec`: routed experts, top-k, shared experts, leading dense layers). Norms, biases
  and routers' softmax are ignored.
- A MoE model keeps ALL its experts in memory but runs only top-k per token, and a step reads
  the weights of every expert that ANY of its tokens picked: `expected_experts(T)` answers "how
  many distinct experts does a batch of T tokens touch?" (top-k at batch 1, all at large batch).
- `with_dtype` / `with_kv_dtype` give a model quantized weights or KV cache; `custom_gpu` builds
  any other device, e.g. a CPU for the live page.
- The catalog of real GPUs and models is sim/cost/hardware.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

GIB = 1024**3  # bytes in a GiB


def check_positive(owner: str, **values: float) -> None:
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
    # What the CUDA runtime reports as the device's total (cudaMemGetInfo, torch's
    # mem_get_info, vLLM's `total_gpu_memory`), GiB: a few hundred MiB under nvidia-smi's total
    # and ~1% under the datasheet. The engines take their share of THIS. 0 = not measured:
    # the datasheet's mem_gb.
    visible_gib: float = 0.0

    @property
    def usable_gib(self) -> float:
        """GiB the engines size their memory from: the measured visible total, else mem_gb."""
        return self.visible_gib or self.mem_gb

    def __post_init__(self) -> None:
        check_positive(
            f"GpuSpec {self.name!r}",
            bf16_tflops=self.bf16_tflops,
            mem_bw_gb_s=self.mem_bw_gb_s,
            mem_gb=self.mem_gb,
            interconnect_gb_s=self.interconnect_gb_s,
            host_link_gb_s=self.host_link_gb_s,
        )
        for key in ("fp8_tflops", "fp4_tflops", "link_latency_us", "visible_gib"):
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
    # The attention projections' width where the checkpoint leaves them out of its quantization,
    # bytes: vLLM then runs them unquantized, in the model's BF16 (ModelOpt's NVFP4 MoE
    # checkpoints list "model.layers.N.self_attn*" in exclude_modules). 0 = quantized like the
    # rest of the body.
    attention_bytes: float = 0.0
    # q and k RMS-normalised over ALL heads rather than per head (MiniMax-M2's attention): under
    # tensor parallel each rank holds some heads, so every layer all-reduces the two variances
    # (vLLM's MiniMaxText01RMSNormTP.forward_qk, model_executor/layers/mamba/linear_attn.py).
    qk_norm_across_heads: bool = False
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
        ab = self.attention_bytes
        if not (
            isinstance(ab, int | float) and not isinstance(ab, bool) and (ab == 0 or b <= ab <= 8)
        ):
            raise ValueError(
                f"ModelSpec {self.name!r}: attention_bytes must be 0 (quantized like the body) "
                f"or in [bytes_per_param, 8], got {ab!r}"
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
    def params_attention(self) -> int:
        """Every layer's attention projections together."""
        return self.layers * self.params_attention_layer

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
    def attention_stored_bytes(self) -> float:
        """Bytes an attention-projection weight takes in memory (`attention_bytes`, or the body's
        format with its scales)."""
        return self.attention_bytes or self.stored_bytes_per_param

    @property
    def attention_matmul_bytes(self) -> float:
        """The width the attention projections' matmuls run at (GpuSpec.matmul_tflops)."""
        return self.attention_bytes or self.matmul_bytes_per_param

    @property
    def dense_weight_bytes(self) -> float:
        """Bytes of the body's weights outside the routed experts (attention projections, dense
        MLPs, shared experts, routers), all ranks together: what every step reads in full."""
        rest = self.params_body - self.params_experts - self.params_attention
        return (
            rest * self.stored_bytes_per_param + self.params_attention * self.attention_stored_bytes
        )

    @property
    def weight_bytes(self) -> int:
        """Bytes of weights held in device memory (all ranks together)."""
        head = (self.params_total - self.params_body) * self.head_bytes_per_param
        experts = self.params_experts * self.stored_bytes_per_param
        return int(self.dense_weight_bytes + experts + head)

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
    """`model` with its weights in `dtype` (fp8, fp4, bf16...), attention projections included;
    the KV cache stays BF16, as vLLM's kv_cache_dtype=auto keeps it for quantized checkpoints."""
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
        attention_bytes=0.0,
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
