"""Hardware and model catalog: the GPUs, links and models the roofline cost model runs on.

Notable features
- A catalog (`GPUS`, `MODELS`, `LINKS_GB_S`, read-only, in display order; every entry cites its
  source) with case-insensitive lookup. `get_model` also takes a path to a Hugging Face
  `config.json` (or its folder: read by `sim/cost/hf_config.py`), and a `:fp8` / `:fp4` suffix
  for quantized weights (`Llama-3.1-70B:fp8`). The types are in sim/cost/specs.py.
- `kv_capacity_tokens` answers "how many tokens of KV fit next to the weights?" (tensor parallel
  splits weights and KV heads; expert parallel splits the experts) and `kv_transfer_s` answers
  "how long does moving a prompt's KV take?" (disaggregated serving).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from sim.cost.hf_config import read_model_file
from sim.cost.specs import (  # noqa: F401  (the catalog's types, imported from here by callers)
    DTYPE_BYTES,
    DTYPE_NAMES,
    GIB,
    KV_DTYPE_BYTES,
    KV_SUFFIX,
    GpuSpec,
    MlaSpec,
    ModelSpec,
    MoeSpec,
    check_positive,
    custom_gpu,
    with_dtype,
    with_kv_dtype,
)

_T = TypeVar("_T")


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
            # nvidia.com/en-us/data-center/h100 (SXM5): 989 BF16, 1,979 FP8, 3.35 TB/s, NVLink4.
            # Visible: vLLM's logged total_gpu_memory on H100 80GB HBM3 is 79.11-79.25 GiB
            # (nvidia-smi: 81,559 MiB).
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
                visible_gib=79.15,
            ),
            # nvidia.com/en-us/data-center/h200: same die as H100, 141 GB HBM3e at 4.8 TB/s.
            # Visible: vLLM logs total_gpu_memory 139.81 GiB (nvidia-smi: 143,771 MiB, as on the
            # H200 of ../shared/data/gpu-h200-2026-12-04/env.txt).
            GpuSpec(
                "H200",
                989.0,
                4800.0,
                141.0,
                450.0,
                64.0,
                1979.0,
                link_latency_us=1.0,
                nvlink=True,
                visible_gib=139.81,
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
            # NVLink5 1.8 TB/s bidirectional. Visible: 182,642 MiB in a CUDA device query
            # (nvidia-smi: 183,359 MiB).
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
                visible_gib=178.36,
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
            # MiniMax-M2.5 (MiniMaxM2ForCausalLM): 62 layers, all full GQA attention (48 query
            # heads, 8 KV heads of 128), 256 routed experts of width 1,536, top-8, no shared
            # expert, in every layer; a 200,064-token vocabulary. Its checkpoint is FP8 with
            # 128 x 128 block scales (":fp8"). The config aiconfigurator-core ships
            # (model_configs/MiniMaxAI--MiniMax-M2.5_config.json) gives the same shape.
            ModelSpec(
                "MiniMax-M2.5",
                62,
                3072,
                48,
                8,
                128,
                1536,
                200064,
                False,
                moe=MoeSpec(256, 8, 1536),
                qk_norm_across_heads=True,
                source="MiniMaxAI/MiniMax-M2.5",
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

# Quantized checkpoints that keep the attention projections in BF16, by (catalog model, weight
# format): `get_model("MiniMax-M2.5:fp4")` is NVIDIA's NVFP4 checkpoint (nvidia/
# MiniMax-M2.5-NVFP4, the one InferenceX serves), whose quantization leaves out every layer's
# "self_attn*" and router gate (aiconfigurator-core 0.12.0, model_configs/
# nvidia--MiniMax-M2.5-NVFP4_hf_quant_config.json exclude_modules; its config.json's
# quantization_config "ignore" the same): experts in NVFP4, Q/K/V/O projections in BF16.
UNQUANTIZED_ATTENTION: Mapping[tuple[str, str], float] = MappingProxyType(
    {("MiniMax-M2.5", "fp4"): 2}
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
        config = path / "config.json" if path.is_dir() else path
        model = read_model_file(str(config.resolve()), config.stat().st_mtime_ns)
    if not suffix:
        return model
    attention = UNQUANTIZED_ATTENTION.get((model.name, suffix.lower()), 0.0)
    return dataclasses.replace(with_dtype(model, suffix), attention_bytes=attention)


ACTIVATION_RESERVE_GB = 1.0  # GB per GPU for activations, CUDA graphs and workspace (generic)


def kv_capacity_tokens(
    gpu: GpuSpec,
    model: ModelSpec,
    tensor_parallel: int = 1,
    mem_utilization: float = 0.9,
    activation_reserve_gb: float = ACTIVATION_RESERVE_GB,
    expert_shards: int = 1,
) -> int:
    """Tokens of KV cache that fit beside the weights on `tensor_parallel` GPUs.

    (mem_utilization·mem·tp − weights − reserve·tp) / (kv_bytes_per_token · replication), floored.
    Like vLLM's gpu_memory_utilization, `mem_utilization` is the share of memory the server may
    use, of what the CUDA runtime reports (`GpuSpec.usable_gib`); the activation reserve (GB per
    GPU) stands for activations, CUDA graphs and workspace: the engine's knobs say how much
    (`Knobs.kv_reserve_gb`: vLLM's profile run, sim/cost/engine_memory.py).
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
    per_gpu = mem_utilization * gpu.usable_gib * GIB - activation_reserve_gb * 1e9  # bytes/GPU
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
    check_positive("kv_transfer_s", bandwidth_gb_s=bandwidth_gb_s)
    if not (math.isfinite(latency_s) and latency_s >= 0):
        raise ValueError(f"latency_s must be >= 0 seconds, got {latency_s}")
    return tokens * model.kv_bytes_per_token / (bandwidth_gb_s * 1e9) + latency_s
