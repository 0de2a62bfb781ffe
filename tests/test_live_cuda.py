"""The live engine on a CUDA GPU: the same correctness checks as on CPU, in bf16.

Skipped where there is no GPU (CI has none); bench/gpu_figures.sh runs them on a GPU machine.
bf16 rounds at every layer, so logits are compared with a tolerance relative to their scale, and
the greedy token, not whole greedy paths. PD_LAB_TEST_DEVICE=cpu runs the same checks on the CPU
(in bf16), to try the tests themselves on a machine without a GPU.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch", reason="the live engine needs torch")
CUDA = torch.device(os.environ.get("PD_LAB_TEST_DEVICE", "cuda"))
if CUDA.type == "cuda" and not torch.cuda.is_available():
    pytest.skip("no CUDA GPU here", allow_module_level=True)

from types import SimpleNamespace  # noqa: E402

from live.engine.run import LiveOptions, run_live  # noqa: E402
from live.engine.runner import ModelRunner, copy_kv, default_dtype  # noqa: E402
from live.model.kvstore import KVStore  # noqa: E402
from live.model.llama import Segment  # noqa: E402
from live.model.weights import random_model  # noqa: E402
from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.core.request import RequestSpec  # noqa: E402


def close(a: torch.Tensor, b: torch.Tensor) -> bool:
    """bf16: max |a - b| within 3% of the largest |logit|, and the same greedy token."""
    a, b = a.float(), b.float()
    return bool((a - b).abs().max() <= 0.03 * b.abs().max()) and int(a.argmax()) == int(b.argmax())


@pytest.fixture(scope="module")
def model():
    assert default_dtype(CUDA) == (torch.bfloat16 if CUDA.type == "cuda" else torch.float32)
    return random_model("smollm2-135m-shape", seed=1, device=CUDA, dtype=torch.bfloat16)


def test_chunked_prefill_equals_full_prefill_on_the_gpu(model):
    gen = torch.Generator().manual_seed(2)  # fixed ids: a near-tie argmax must not flake
    ids = torch.randint(0, model.shape.vocab, (300,), generator=gen).tolist()
    full_kv = KVStore(model.shape, 1, 512, CUDA, torch.bfloat16)
    full = model.forward_step([Segment(full_kv.allocate(), ids, 0, True)], full_kv)
    kv = KVStore(model.shape, 1, 512, CUDA, torch.bfloat16)
    slot = kv.allocate()
    for start in range(0, 300, 128):  # chunks of 128 over a growing cached prefix
        out = model.forward_step(
            [Segment(slot, ids[start : start + 128], start, start + 128 >= 300)], kv
        )
    assert close(out[0], full[0])


def test_mixed_step_equals_separate_steps_on_the_gpu(model):
    gen = torch.Generator().manual_seed(3)
    x, y = (torch.randint(0, model.shape.vocab, (n,), generator=gen).tolist() for n in (200, 40))
    kv = KVStore(model.shape, 2, 256, CUDA, torch.bfloat16)
    sx, sy = kv.allocate(), kv.allocate()
    model.forward_step([Segment(sy, y[:-1], 0, False)], kv)
    mixed = model.forward_step([Segment(sx, x, 0, True), Segment(sy, y[-1:], 39, True)], kv)
    alone_kv = KVStore(model.shape, 2, 256, CUDA, torch.bfloat16)
    ax, ay = alone_kv.allocate(), alone_kv.allocate()
    want_x = model.forward_step([Segment(ax, x, 0, True)], alone_kv)
    model.forward_step([Segment(ay, y[:-1], 0, False)], alone_kv)
    want_y = model.forward_step([Segment(ay, y[-1:], 39, True)], alone_kv)
    assert close(mixed[0], want_x[0]) and close(mixed[1], want_y[0])


def test_kv_copy_between_gpu_stores_is_exact_and_timed(model):
    src = ModelRunner(model, KVStore(model.shape, 1, 128, CUDA, torch.bfloat16))
    dst = ModelRunner(model, KVStore(model.shape, 1, 128, CUDA, torch.bfloat16))
    src.add_prompt(0, list(range(1, 65)))
    slot = src.kv.allocate()
    src._slot[0], src._cached[0] = slot, 64
    model.forward_step([Segment(slot, list(range(1, 65)), 0, True)], src.kv)
    k = src.kv.k[:, slot, :, :64].clone()
    seconds = copy_kv(0, src, dst)
    assert seconds > 0 and torch.equal(dst.kv.k[:, dst._slot[0], :, :64], k)


@pytest.mark.parametrize("topology", ["colocated", "disaggregated"])
def test_a_live_run_on_the_gpu_finishes_every_request(topology):
    requests = [RequestSpec(i, 0.01 * i, 64 + 32 * i, 8) for i in range(4)]
    knobs = {"topology": topology, "max_num_batched_tokens": 96}
    config = with_overrides(SimConfig(policy="chunked"), knobs)
    options = LiveOptions(model="smollm2-135m-shape", device=CUDA.type)
    run, info = run_live(requests, config, options)
    assert (run.requests["status"] == "finished").all()
    assert run.meta["device"]["device"].startswith(CUDA.type)
    assert CUDA.type == "cpu" or run.meta["device"]["gpu"]
    assert all(s[-1] > 0 for s in info["samples"])  # every step timed after synchronising
    if topology == "disaggregated":
        assert len(info["transfers"]) == len(requests)


# Issue 27's path: flat attention (one SDPA call per layer for all decodes) and CUDA graphs.
# In fp32 (TF32 off, torch's default for matmuls) the paths differ only by kernel rounding.


def test_flat_attention_equals_grouped_on_the_gpu():
    from test_live_flat import SHAPE, drive

    net = random_model(SHAPE, seed=3, device=CUDA, dtype=torch.float32)
    flat, flat_tokens, _ = drive(net, "flat")
    grouped, grouped_tokens, _ = drive(net, "grouped")
    assert flat_tokens == grouped_tokens
    for a, b in zip(flat, grouped, strict=True):
        assert (a - b).abs().max() <= 1e-3 * b.abs().max()


@pytest.mark.skipif(CUDA.type != "cuda", reason="CUDA graphs need a GPU")
def test_cuda_graph_decodes_equal_eager_decodes():
    """Ragged contexts, a freed slot in the middle, buckets crossed: same ids as eager."""
    from test_live_flat import SHAPE, ids

    net = random_model(SHAPE, seed=4, device=CUDA, dtype=torch.float32)
    out = {}
    for graphs in (False, True):
        runner = ModelRunner(
            net,
            KVStore(SHAPE, 8, 320, CUDA, torch.float32),
            CUDA,
            torch.float32,
            attention="flat",
            graphs=graphs,
        )
        reqs = [SimpleNamespace(request_id=i) for i in range(5)]
        for r, n in zip(reqs, (40, 7, 250, 3, 90), strict=True):
            runner.add_prompt(r.request_id, ids(20 + r.request_id, n))
            runner.execute(SimpleNamespace(items=[(r, n, 0, False)]))
        for step in range(12):
            if step == 4:
                runner.release(1)  # a hole at slot 1
            live = [r for r in reqs if r.request_id != 1 or step < 4]
            items = [(r, 1, len(runner.tokens(r.request_id)) - 1, True) for r in live]
            runner.execute(SimpleNamespace(items=items))
        out[graphs] = {r.request_id: runner.generated(r.request_id) for r in reqs}
        if graphs:
            assert runner.graphs.graphs  # the decodes did replay captured graphs
    assert out[True] == out[False]
