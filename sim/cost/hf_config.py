"""Any Hugging Face model: a `config.json` read into the `ModelSpec` the cost model runs on.

Notable features
- `model_from_hf_config(config)`: the architecture fields of Llama, Mistral, Qwen2/Qwen3,
  Mixtral, Qwen2/Qwen3-MoE and DeepSeek-V2/V3 (MLA) configs: layers, widths, GQA heads, the
  vocabulary, and for mixture-of-experts models the routed experts (`num_local_experts`,
  `num_experts` or `n_routed_experts`), `num_experts_per_tok`, shared experts and the leading
  dense layers. A missing or bad field is a ValueError that names it.
- Weight bytes from `quantization_config` (FP8, NVFP4/MXFP4 with their block scales, 4/8-bit
  methods that state their bits) or `torch_dtype`; anything else is refused by name rather
  than guessed. Attention projections that its exclusion list keeps out of the quantization
  in every layer stay BF16 (`ModelSpec.attention_bytes`).
- `read_model_file(path, mtime_ns)`: one parse per file and modification time (the Playground
  and the CLI ask for the same file many times); `sim.cost.hardware.get_model` calls it for a path.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from pathlib import Path

from sim.cost.specs import MlaSpec, ModelSpec, MoeSpec

MAX_CONFIG_BYTES = 16 << 20  # the largest real config.json files are tens of kB


@functools.lru_cache(maxsize=64)
def read_model_file(path: str, _mtime_ns: int) -> ModelSpec:
    """Parse a config.json once per (path, modification time)."""
    try:
        with open(path, "rb") as f:  # a config.json is kB: a huge file (or /dev/zero) is not one
            raw = f.read(MAX_CONFIG_BYTES + 1)
        if len(raw) > MAX_CONFIG_BYTES:
            raise ValueError(f"{path} has more than {MAX_CONFIG_BYTES >> 20} MB: not a config.json")
        config = json.loads(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {path} as a JSON config: {err}") from None
    except RecursionError:  # JSON nested thousands deep: no config.json is
        raise ValueError(f"{path}: the JSON is nested too deep for a config.json") from None
    p = Path(path)
    folder = p.parent.name if p.name == "config.json" else p.stem
    return model_from_hf_config(config, name=None, default_name=folder or "hf-model", source=path)


def _weight_format(config: Mapping) -> tuple[float, float, float]:
    """(bytes per weight, bytes of block scales per weight, the width matmuls run at: 0 = the
    weights' own) from `quantization_config` or `torch_dtype`.

    - FP8 checkpoints: W8A8 (vLLM quantizes the activations per token), no scales to count.
    - NVFP4 (ModelOpt, compressed-tensors nvfp4-pack-quantized): W4A4, one FP8 scale per 16.
    - MXFP4 (gpt-oss): one E8M0 scale per 32 (OCP Microscaling Formats v1.0); weight-only, as
      vLLM's Marlin and Triton MoE kernels run it on Hopper and Ada (Blackwell's MXFP8 path
      would be faster).
    - Integer methods (GPTQ, AWQ, bitsandbytes, compressed-tensors without activation
      quantization): weight-only (the kernels dequantize to BF16), one FP16 scale per
      `group_size` weights (zero points left out); compressed-tensors W8A8 / W4A8 multiply at
      8 bits."""
    q = config.get("quantization_config") or {}
    if not isinstance(q, Mapping):
        raise ValueError(f"config.json: quantization_config must be a JSON object, got {q!r:.40}")
    method = str(q.get("quant_method", "")).lower()
    if q:
        if method == "fp8" or "fp8" in str(q.get("quant_algo", "")).lower():
            return 1, 0.0, 0.0
        if method == "mxfp4":
            return 0.5, 1 / 32, 2
        if method == "nvfp4" or "fp4" in str(q.get("quant_algo", "")).lower():
            return 0.5, 1 / 16, 0.0
        bits, group = q.get("bits") or q.get("w_bit"), q.get("group_size") or q.get("q_group_size")
        matmul = 2.0  # weight-only unless the activations are quantized too
        if method == "compressed-tensors":  # the first scheme's weights and activations
            for scheme in (q.get("config_groups") or {}).values():
                weights, acts = scheme.get("weights") or {}, scheme.get("input_activations")
                bits, group = weights.get("num_bits", bits), weights.get("group_size", group)
                if weights.get("type") == "float" and bits == 4:  # nvfp4-pack-quantized
                    return 0.5, 1 / 16, 0.0
                if isinstance(acts, Mapping) and isinstance(acts.get("num_bits"), int):
                    matmul = max(acts["num_bits"], bits or 0) / 8
                break
        if isinstance(bits, int | float) and not isinstance(bits, bool) and bits > 0:
            per_group = isinstance(group, int) and not isinstance(group, bool) and group > 0
            scales = 2 / group if per_group and bits < 8 else 0.0
            return bits / 8, scales, (0.0 if matmul == bits / 8 else matmul)
        raise ValueError(
            f"config.json: unsupported quantization {method or q!r}; weights must be BF16/FP16, "
            "FP8, FP4 or a 4/8-bit method that states its bits"
        )
    dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16").lower()
    # vLLM's dtype=auto serves FP32 checkpoints in 16 bits, so only 8-bit floats change b_w.
    return (1 if "float8" in dtype else 2), 0.0, 0.0


def _attention_left_out(config: Mapping, layers: int) -> bool:
    """Whether `quantization_config` leaves EVERY layer's attention projections unquantized:
    its exclusion list ("ignore" in config.json, "exclude_modules" in ModelOpt's
    hf_quant_config.json) names "self_attn*" for all `layers` layers, or with a wildcard for
    any layer (nvidia/MiniMax-M2.5-NVFP4: "model.layers.0.self_attn*" ... "model.layers.61...").
    Lists that name single projections (DeepSeek's MLA checkpoints) are not read."""
    q = config.get("quantization_config") or {}
    names = q.get("ignore") or q.get("exclude_modules") or []
    if not isinstance(names, list):
        return False
    prefix, covered = "model.layers.", set()
    for name in names:
        if not (isinstance(name, str) and name.endswith("self_attn*")):
            continue
        index = name.removesuffix(".self_attn*").removeprefix(prefix)
        if index in ("*", "model.layers.*", "") or name.startswith("*"):
            return True
        if index.isdigit():
            covered.add(int(index))
    return len(covered.intersection(range(layers))) == layers


def _architecture(config: Mapping) -> str:
    """The model class vLLM picks for this config (its first `architectures` entry), or ""."""
    names = config.get("architectures")
    return names[0] if isinstance(names, list) and names and isinstance(names[0], str) else ""


def model_from_hf_config(
    config: Mapping, name: str | None = None, default_name: str = "hf-model", source: str = ""
) -> ModelSpec:
    """A ModelSpec from a Hugging Face config.json dict (Llama, Mistral, Qwen2/3, Mixtral,
    Qwen2/3-MoE, DeepSeek-V2/V3 with MLA). ValueError names a missing or bad field."""
    try:
        return _model_from_hf_config(config, name, default_name, source)
    except (TypeError, AttributeError, OverflowError) as err:
        # A crafted file's other shapes (a list where an object goes, an object where a
        # number goes): one sentence, not a traceback (the app shows it beside the uploader).
        raise ValueError(f"config.json: a field has the wrong type ({err})") from None


# Whole-number fields above this are no model's (the largest have ~1e5 layers x width): a
# bound, so that a crafted 10**100 cannot overflow the cost model's floats.
MAX_FIELD = 2**31


def _model_from_hf_config(config, name, default_name, source) -> ModelSpec:
    if not isinstance(config, Mapping):
        raise ValueError("config.json must hold a JSON object")
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), Mapping):
        config = {**config["text_config"], "torch_dtype": config.get("torch_dtype")}

    def need(key: str) -> int:
        value = config.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value < MAX_FIELD:
            raise ValueError(
                f"config.json: {key} must be a whole number >= 1, got {value!r:.40} "
                "(is it a decoder-only language model's config?)"
            )
        return value

    def opt(*keys: str, default: int = 0) -> int:
        for key in keys:
            value = config.get(key)
            if value is not None:
                if (
                    not isinstance(value, int)
                    or isinstance(value, bool)
                    or not (0 <= value < MAX_FIELD)
                ):
                    raise ValueError(
                        f"config.json: {key} must be a whole number, got {value!r:.40}"
                    )
                return value
        return default

    layers, hidden, heads = (
        need("num_hidden_layers"),
        need("hidden_size"),
        need("num_attention_heads"),
    )
    kv_heads = opt("num_key_value_heads", default=heads) or heads
    head_dim = opt("head_dim") or hidden // heads
    vocab = need("vocab_size")
    intermediate = opt("intermediate_size")
    mla = None
    if config.get("kv_lora_rank"):
        mla = MlaSpec(
            need("kv_lora_rank"),
            need("qk_nope_head_dim"),
            need("qk_rope_head_dim"),
            need("v_head_dim"),
            opt("q_lora_rank"),
        )
        kv_heads, head_dim = heads, mla.v_head_dim
    moe = None
    experts = opt("num_local_experts", "num_experts", "n_routed_experts")
    if experts > 1:
        top_k = need("num_experts_per_tok")
        width = opt("moe_intermediate_size") or need("intermediate_size")
        shared = opt("shared_expert_intermediate_size")
        if config.get("n_shared_experts"):
            shared = opt("n_shared_experts") * width
        if "first_k_dense_replace" in config:  # DeepSeek: the first k layers are dense
            dense = min(layers, opt("first_k_dense_replace"))
        else:  # Qwen-MoE: layer i is sparse if (i + 1) % decoder_sparse_step == 0, unless listed
            step = opt("decoder_sparse_step", default=1) or 1
            listed = {i for i in config.get("mlp_only_layers") or () if isinstance(i, int)}
            # (counted, not looped over: a crafted num_hidden_layers would make a loop hang)
            listed_sparse = sum(1 for i in listed if 0 <= i < layers and not (i + 1) % step)
            sparse = layers // step - listed_sparse
            dense = layers - sparse
        if dense and not intermediate:
            raise ValueError("config.json: intermediate_size is needed for the dense layers")
        moe = MoeSpec(experts, top_k, width, shared, dense)
        intermediate = intermediate or width
    if not intermediate:
        intermediate = need("intermediate_size")
    label = (
        name or str(config.get("_name_or_path") or "").rstrip("/").split("/")[-1] or default_name
    )
    width, scales, matmul = _weight_format(config)
    return ModelSpec(
        label,
        layers,
        hidden,
        heads,
        kv_heads,
        head_dim,
        intermediate,
        vocab,
        bool(config.get("tie_word_embeddings", False)),
        width,
        2,
        moe,
        mla,
        source=source or label,
        scale_bytes_per_param=scales,
        matmul_bytes=matmul,
        attention_bytes=2 if width < 2 and _attention_left_out(config, layers) else 0.0,
        # vLLM serves this architecture with q/k norms over all heads (models/minimax_m2.py)
        qk_norm_across_heads=_architecture(config) == "MiniMaxM2ForCausalLM",
    )
