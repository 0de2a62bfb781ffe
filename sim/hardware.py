"""Hardware and model catalog: the numbers the roofline cost model runs on.

Notable features
- `GpuSpec` and `ModelSpec` are frozen, validated dataclasses. Units live in the field names:
  TFLOP/s (1e12 FLOP per second), GB/s and GB (GB = 1e9 bytes, like the datasheets).
- `ModelSpec` derives parameter counts, weight bytes, KV bytes per token and FLOPs per token from
  a Hugging Face style config (dense decoder, GQA attention, SwiGLU MLP; norms and biases ignored).
- A small catalog (`GPUS`, `MODELS`, read-only, in display order) with case-insensitive lookup;
  `custom_gpu` builds any other device, e.g. a CPU for the live page.
- `kv_capacity_tokens` answers "how many tokens of KV fit next to the weights?" and
  `kv_transfer_s` answers "how long does moving a prompt's KV take?" (disaggregated serving).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

_T = TypeVar("_T")


def _check_positive(owner: str, **values: float) -> None:
    """Raise ValueError unless every value is a positive finite number."""
    for key, value in values.items():
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{owner}: {key} must be a positive finite number, got {value!r}")


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One accelerator's nominal peaks (dense BF16 tensor-core FLOP/s, memory, links)."""

    name: str
    bf16_tflops: float  # dense BF16 peak, 1e12 FLOP/s (no 2:4 sparsity)
    mem_bw_gb_s: float  # HBM/GDDR bandwidth, GB/s
    mem_gb: float  # device memory, GB (datasheet "GB", taken as 1e9 bytes: slightly conservative)
    interconnect_gb_s: float  # GPU-to-GPU, one direction: NVLink if present, else PCIe, GB/s
    host_link_gb_s: float  # PCIe to host memory, one direction (swap), GB/s

    def __post_init__(self) -> None:
        _check_positive(
            f"GpuSpec {self.name!r}",
            bf16_tflops=self.bf16_tflops,
            mem_bw_gb_s=self.mem_bw_gb_s,
            mem_gb=self.mem_gb,
            interconnect_gb_s=self.interconnect_gb_s,
            host_link_gb_s=self.host_link_gb_s,
        )


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """A dense decoder-only transformer (GQA attention, SwiGLU MLP), sized for the roofline."""

    name: str
    layers: int  # L
    hidden: int  # d
    heads: int  # H (query heads)
    kv_heads: int  # H_kv (GQA: several query heads share one K/V head)
    head_dim: int  # d_h
    intermediate: int  # d_ff, the SwiGLU width
    vocab: int  # V
    tied_embeddings: bool  # lm_head shares the embedding matrix
    bytes_per_param: int = 2  # b_w: 2 for BF16, 1 for FP8
    bytes_per_kv: int = 2  # b_kv: bytes per cached K or V element

    def __post_init__(self) -> None:
        ints = (
            "layers",
            "hidden",
            "heads",
            "kv_heads",
            "head_dim",
            "intermediate",
            "vocab",
            "bytes_per_param",
            "bytes_per_kv",
        )
        for key in ints:
            value = getattr(self, key)
            if not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"ModelSpec {self.name!r}: {key} must be an int >= 1, got {value!r}"
                )
        if self.heads % self.kv_heads:
            raise ValueError(
                f"ModelSpec {self.name!r}: heads ({self.heads}) must be a multiple of kv_heads "
                f"({self.kv_heads})"
            )

    @property
    def params_body(self) -> int:
        """Parameters of all transformer layers (attention q,k,v,o + gate, up, down), §5.1."""
        d, dh = self.hidden, self.head_dim
        attention = d * self.heads * dh * 2 + d * self.kv_heads * dh * 2  # Q and O; K and V
        mlp = 3 * d * self.intermediate
        return self.layers * (attention + mlp)

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
    def weight_bytes(self) -> int:
        """Bytes of weights held in device memory."""
        return self.params_total * self.bytes_per_param

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V cached per token over all layers: 2·L·H_kv·d_h·b_kv."""
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_kv

    @property
    def flops_per_token_body(self) -> int:
        """FLOP per token through the linear layers: 2·N_body (a multiply and an add per weight)."""
        return 2 * self.params_body

    @property
    def flops_lm_head_per_token(self) -> int:
        """FLOP per sampled position for the logits: 2·d·V."""
        return 2 * self.hidden * self.vocab

    @property
    def attn_flops_per_ctx_token(self) -> int:
        """FLOP per (query, key) pair, all layers: 4·L·H·d_h (QKᵀ and A·V; GQA doesn't help)."""
        return 4 * self.layers * self.heads * self.head_dim


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


# Values from §5.6 of the reference (NVIDIA datasheets). Links are one direction: NVLink4 900 GB/s
# bidirectional is 450 each way, NVLink3 600 -> 300, PCIe Gen5 x16 64, PCIe Gen4 x16 32.
GPUS: Mapping[str, GpuSpec] = MappingProxyType(
    {
        g.name: g
        for g in (
            GpuSpec("A100-80GB", 312.0, 2039.0, 80.0, 300.0, 32.0),
            GpuSpec("H100-SXM", 989.0, 3350.0, 80.0, 450.0, 64.0),
            GpuSpec("H200", 989.0, 4800.0, 141.0, 450.0, 64.0),
            GpuSpec("L4", 121.0, 300.0, 24.0, 32.0, 32.0),
            GpuSpec("RTX-4090", 165.0, 1008.0, 24.0, 32.0, 32.0),  # no NVLink: GPUs talk over PCIe
        )
    }
)

# Hugging Face config.json values (§5.7).
MODELS: Mapping[str, ModelSpec] = MappingProxyType(
    {
        m.name: m
        for m in (
            ModelSpec("Llama-3.1-8B", 32, 4096, 32, 8, 128, 14336, 128256, False),
            ModelSpec("Llama-3.3-70B", 80, 8192, 64, 8, 128, 28672, 128256, False),
            ModelSpec("Qwen2.5-0.5B", 24, 896, 14, 2, 64, 4864, 151936, True),
            ModelSpec("Qwen2.5-7B", 28, 3584, 28, 4, 128, 18944, 152064, False),
            ModelSpec("Mistral-7B", 32, 4096, 32, 8, 128, 14336, 32768, False),  # v0.3 vocab
            ModelSpec("Llama-3.2-1B", 16, 2048, 32, 8, 64, 8192, 128256, True),
            ModelSpec("SmolLM2-135M", 30, 576, 9, 3, 64, 1536, 49152, True),
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
    """The catalog model called `name` (case-insensitive)."""
    return _lookup(MODELS, name, "model")


def kv_capacity_tokens(
    gpu: GpuSpec,
    model: ModelSpec,
    tensor_parallel: int = 1,
    mem_utilization: float = 0.9,
    activation_reserve_gb: float = 1.0,
) -> int:
    """Tokens of KV cache that fit beside the weights on `tensor_parallel` GPUs.

    (mem_utilization·mem·tp − weights − reserve·tp) / kv_bytes_per_token, floored. Like vLLM's
    gpu_memory_utilization, `mem_utilization` is the share of memory the server may use; the
    activation reserve (GB per GPU) stands for activations, CUDA graphs and workspace.
    """
    if not isinstance(tensor_parallel, int) or tensor_parallel < 1:
        raise ValueError(f"tensor_parallel must be an int >= 1, got {tensor_parallel!r}")
    if not 0 < mem_utilization <= 1:
        raise ValueError(f"mem_utilization must be in (0, 1], got {mem_utilization}")
    if not (math.isfinite(activation_reserve_gb) and activation_reserve_gb >= 0):
        raise ValueError(f"activation_reserve_gb must be >= 0, got {activation_reserve_gb}")
    per_gpu = (mem_utilization * gpu.mem_gb - activation_reserve_gb) * 1e9  # usable bytes per GPU
    free = per_gpu * tensor_parallel - model.weight_bytes  # bytes left for KV on all GPUs
    tokens = math.floor(free / model.kv_bytes_per_token) if free > 0 else 0
    if tokens <= 0:
        needed = model.weight_bytes + model.kv_bytes_per_token
        hint = (
            f"set tensor_parallel to {max(2, math.ceil(needed / per_gpu))} or more"
            if per_gpu > 0
            else "raise mem_utilization or lower activation_reserve_gb"
        )
        raise ValueError(
            f"{model.name} ({model.weight_bytes / 1e9:.0f} GB of weights) does not fit on "
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
