"""A Llama-style decoder in plain PyTorch that runs ONE forward pass for a mixed batch.

Notable features
- A step is a list of `Segment`s: (KV slot, new token ids, offset = tokens already cached).
  A prefill chunk has n > 1 tokens; a decode has exactly 1 (a 1-token chunk is computed exactly
  like a decode). Both kinds run in the same pass.
- All T scheduled tokens are packed into one (T, hidden) tensor, so every linear layer (QKV, O,
  MLP) is one matmul for the whole step. That is what makes batching pay: the weights are read
  once per step whatever T is.
- Only attention needs per-request structure. Two layouts are selectable (`attention=`):
  "flat" (live/model/flat_attention.py, the default on CUDA): decode rows are the KV slots, all
  decodes share ONE SDPA call per layer with static shapes (CUDA-graph friendly), metadata
  copied in one transfer; "grouped" (live/model/attention.py, the default on CPU): decodes split
  into slot-contiguous groups chosen to read the fewest keys. On a CPU a call costs ~50 us against
  ms of compute, so reading fewer keys wins: measured (SmolLM2 shape, fp32, 1 thread), 8
  decodes with contexts 40-1032 took 240 ms grouped vs 452 ms flat. On a GPU, launches and
  graph capture win. Same tokens, same logits up to float rounding (tests/test_live_flat.py).
- Positions are per request (offset + i), not the row in the packed tensor: RoPE, the KV write
  position and the causal mask all use them.
- K/V are written to the KVStore before attention reads them (a token attends to itself).
- Logits only for rows that sample: the last token of a chunk that completes its prompt, and
  every decode. For a small model the lm_head (hidden x vocab) is the largest single matmul.
  A speculative verify ([last token] + drafts, `Segment.sample_all`) is a chunk at a decode's
  position whose every row samples: the attention layouts run it as a chunk over its cached
  prefix (lower-right causal mask), so each draft sees the ones before it.
- RoPE in the Hugging Face "rotate_half" layout; GGUF weights are un-permuted to it on load.
- `use_column_major_weights()` (the runner calls it on CPU) stores every matmul weight
  transposed in memory, same shape: MKL then multiplies without a transpose and its small-batch
  kernels run faster. Measured (SmolLM2, fp32, 1 thread, median of 9): decode of 8 requests
  102 -> 87 ms, prefill of 128 tokens 243 -> 210 ms; the embedding lookup of 1024 tokens from
  the strided (tied) matrix costs 4.4 instead of 1.3 ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from live.model.attention import StepLayout
from live.model.flat_attention import FlatLayout

if TYPE_CHECKING:
    from live.model.kvstore import KVStore

Device = torch.device | str | None
Layout = StepLayout | FlatLayout  # a step's packed indices; `.attend` writes K/V and attends
ATTENTION = ("flat", "grouped")


def default_attention(device: torch.device) -> str:
    """ "flat" on CUDA (one kernel per layer, graph-capturable); "grouped" on CPU (fewest keys)."""
    return "flat" if device.type == "cuda" else "grouped"


@dataclass(frozen=True, slots=True)
class ModelShape:
    """The hyper-parameters that fix every tensor shape (and so the cost) of the model."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    rope_theta: float = 10_000.0
    tied: bool = True  # lm_head shares the embedding matrix
    max_len: int = 2048  # longest sequence (size of the RoPE tables)
    norm_eps: float = 1e-5
    qkv_bias: bool = False  # Qwen2 adds biases to q/k/v

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads")
        if self.head_dim % 2:
            raise ValueError(f"head_dim must be even for RoPE, got {self.head_dim}")

    @property
    def group(self) -> int:
        """Query heads per K/V head (grouped-query attention)."""
        return self.heads // self.kv_heads

    @property
    def num_params(self) -> int:
        """Parameter count (embedding counted once when tied)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        attn = self.hidden * (q + 2 * kv) + q * self.hidden + (q + 2 * kv) * self.qkv_bias
        mlp = 3 * self.hidden * self.intermediate
        per_layer = attn + mlp + 2 * self.hidden
        head = 0 if self.tied else self.vocab * self.hidden
        return self.layers * per_layer + self.vocab * self.hidden + head + self.hidden


@dataclass(frozen=True, slots=True)
class Segment:
    """One request's share of a step: new tokens for KV slot `slot`, starting at `offset`."""

    slot: int
    token_ids: Sequence[int]
    offset: int  # tokens of this request already in the KV store
    sample: bool  # compute logits for the last token (it completes the request's known tokens)
    # A speculative verify: logits at EVERY position (with `sample`), the target's choice after
    # each input token (live/engine/runner.py checks the drafts against them)
    sample_all: bool = False


def rope_tables(shape: ModelShape, device: Device = None) -> Tensor:
    """cos and SIGNED sin for every position, stacked: (2, max_len, head_dim), float32.

    The sin table carries rotate_half's sign (-sin on the first half, +sin on the second), so
    that `apply_rope` is a roll and a multiply-add: 3 kernels instead of 5 (neg, cat, 2 mul, add).
    """
    hd = shape.head_dim
    inv_freq = 1.0 / shape.rope_theta ** (torch.arange(0, hd, 2, device=device) / hd)  # (hd/2,)
    angles = torch.outer(torch.arange(shape.max_len, device=device).float(), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)  # (max_len, hd): HF layout, halves repeated
    sign = torch.ones(hd, device=device)
    sign[: hd // 2] = -1
    return torch.stack((angles.cos(), angles.sin() * sign))


def apply_rope(x: Tensor, cos: Tensor, signed_sin: Tensor) -> Tensor:
    """Rotate dims (i, i + hd/2) by position-dependent angles. x (T, heads, hd), cos (T, 1, hd).

    Hugging Face's x * cos + rotate_half(x) * sin, with rotate_half(x) = cat(-x2, x1) =
    roll(x, hd/2) * sign and the sign already in `signed_sin`.
    """
    return torch.addcmul(x * cos, x.roll(x.shape[-1] // 2, dims=-1), signed_sin)


class DecoderLayer(nn.Module):
    """Pre-norm attention block + pre-norm SwiGLU MLP block, both with residuals."""

    def __init__(
        self, s: ModelShape, device: Device = None, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.shape = s
        self.q_dim, self.kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim
        self.attn_norm = nn.RMSNorm(s.hidden, eps=s.norm_eps, **kw)
        # Fused projections: one matmul instead of three (q, k, v) or two (gate, up).
        self.qkv = nn.Linear(s.hidden, self.q_dim + 2 * self.kv_dim, bias=s.qkv_bias, **kw)
        self.o = nn.Linear(self.q_dim, s.hidden, bias=False, **kw)
        self.mlp_norm = nn.RMSNorm(s.hidden, eps=s.norm_eps, **kw)
        self.gate_up = nn.Linear(s.hidden, 2 * s.intermediate, bias=False, **kw)
        self.down = nn.Linear(s.intermediate, s.hidden, bias=False, **kw)

    def forward(
        self, x: Tensor, rope: tuple[Tensor, Tensor], layout: Layout, kv: KVStore, layer: int
    ) -> Tensor:
        """x: (T, hidden) -> (T, hidden)."""
        s, t = self.shape, x.shape[0]
        qkv = self.qkv(self.attn_norm(x))  # (T, q_dim + 2 kv_dim)
        qk, v = qkv.split((self.q_dim + self.kv_dim, self.kv_dim), dim=-1)
        # q and k rotated in ONE call (3 kernels a layer, not 6): they sit side by side in qkv
        qk = apply_rope(qk.view(t, s.heads + s.kv_heads, s.head_dim), *rope)  # (T, H + KV, hd)
        q, k = qk.split((s.heads, s.kv_heads), dim=1)  # (T, H, hd), (T, KV, hd): views
        v = v.view(t, s.kv_heads, s.head_dim)
        o = layout.attend(q, k, v, kv, layer)  # (T, H, hd)
        x = x + self.o(o.reshape(t, self.q_dim))
        gate, up = self.gate_up(self.mlp_norm(x)).chunk(2, dim=-1)  # (T, inter) each
        return x + self.down(F.silu(gate) * up)


class LlamaModel(nn.Module):
    """Embedding, decoder layers, final norm and lm_head (tied to the embedding or not)."""

    def __init__(
        self, shape: ModelShape, device: Device = None, dtype: torch.dtype | None = None
    ) -> None:
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.shape = shape
        self.embed = nn.Embedding(shape.vocab, shape.hidden, **kw)
        self.layers = nn.ModuleList(DecoderLayer(shape, **kw) for _ in range(shape.layers))
        self.norm = nn.RMSNorm(shape.hidden, eps=shape.norm_eps, **kw)
        self.lm_head = None if shape.tied else nn.Linear(shape.hidden, shape.vocab, False, **kw)
        self.register_buffer("rope", rope_tables(shape, device), persistent=False)

    def reset_rope(self) -> None:
        """Recompute the RoPE tables (after `to_empty`, which leaves buffers uninitialised)."""
        self.rope = rope_tables(self.shape, self.embed.weight.device)

    def use_column_major_weights(self) -> None:
        """Store each (out, in) matmul weight column-major (strides (1, out)); values unchanged."""
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, nn.Linear | nn.Embedding):  # the tied lm_head is embed
                    w = module.weight
                    if w.stride(0) != 1:
                        w.data = w.data.t().contiguous().t()

    def logits(self, h: Tensor) -> Tensor:
        """(S, hidden) -> (S, vocab)."""
        h = self.norm(h)
        return self.lm_head(h) if self.lm_head is not None else F.linear(h, self.embed.weight)

    @torch.inference_mode()
    def forward_step(
        self, segments: Sequence[Segment], kv: KVStore, attention: str | None = None
    ) -> Tensor:
        """Run one mixed step; return logits (S, vocab) of the sampling segments, in input order."""
        attention = attention or default_attention(kv.device)
        if attention == "flat":
            layout: Layout = FlatLayout.build(segments, kv, self.shape)
        elif attention == "grouped":
            layout = StepLayout.build(segments, self.shape, kv.device, kv.call_keys)
        else:
            raise ValueError(f"attention must be one of {ATTENTION}, got {attention!r}")
        return self.forward_layout(layout, kv)

    def forward_layout(self, layout: Layout, kv: KVStore) -> Tensor:
        """The forward pass proper: (S, vocab) logits. Only device ops: no host sync, and with a
        FlatLayout of fixed (rows, ctx) the same kernels every call (CUDA-graph capturable)."""
        x = self.embed(layout.token_ids)  # (T, hidden)
        cos, sin = self.rope[:, layout.positions].to(x.dtype).unsqueeze(2)  # (T, 1, hd) each
        for i, layer in enumerate(self.layers):
            x = layer(x, (cos, sin), layout, kv, i)
        return self.logits(x[layout.sample_rows])  # only S rows go through the lm_head
