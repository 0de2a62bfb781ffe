"""Issue 27's step figures: decode at the memory's pace, prefill at the compute's pace.

Notable features
- Peaks measured in the same run (bench/bench_live_model.py): the copy bandwidth (bytes read +
  written by a large device copy) and the bf16 (GPU) or fp32 (CPU) matmul peak.
- Decode: B requests with C-token contexts, timed IN THE SERVING LOOP: `ModelRunner.execute`,
  from the step's start until the sampled ids are on the host (the host packing, the one
  transfer, the CUDA graph replay and the read-back all inside). Target:
  1.5 x (weight bytes + KV bytes read) / copy bandwidth. Weight bytes = every parameter once
  (tied embedding once); KV bytes = B x C x layers x 2 x kv_heads x head_dim x element size.
- Prefill: one fresh chunk of N tokens through the same runner; achieved FLOP/s (2 per weight
  per token + causal attention + the sampled row's lm_head) against the matmul peak.
  Target: >= 60 %.
- A mixed step (the chunk + B decodes) is reported beside the two parts: a long prefill must
  visibly stretch the decodes' step.
- The same chunk after as many cached tokens (lower-right causal attention: flash's own mask on
  CUDA) and, for an eager step (a 128-token chunk + B decodes, no CUDA graph), the share of its
  time the host spends launching kernels: near 100% means the step waits on Python, not the GPU.
- KV is zero-filled: timing does not depend on values. Random weights of the preset's shape.
- Writes every figure to --json (bench/gpu_table.py makes the closing table from it).

Run: python3 bench/bench_gpu_step.py --device cuda --model 8b-like --json figures.json
     .venv/bin/python bench/bench_gpu_step.py --device cpu --model tiny --batches 1,8 --ctx 64 \
         --chunk 128          (the CPU smoke of bench/gpu_figures.sh)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import live/ and sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench_live_model's peaks

import bench_live_model as peaks  # noqa: E402
import torch  # noqa: E402

from live.engine.provenance import device_provenance  # noqa: E402
from live.engine.runner import ModelRunner, default_dtype  # noqa: E402
from live.model.kvstore import KVStore  # noqa: E402
from live.model.weights import random_model  # noqa: E402

DECODE_SLACK = 1.5  # issue 27: a decode step within 1.5x the bytes' copy time
PREFILL_SHARE = 0.60  # issue 27: a 2,048-token chunk at >= 60% of the matmul peak


def weight_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())  # tied counted once


class Steps:
    """Times runner.execute on hand-made batches (a batch only needs `.items`)."""

    def __init__(self, runner: ModelRunner, ctx: int) -> None:
        self.runner, self.ctx, self.next_id = runner, ctx, 0

    def request(self, prompt: int) -> SimpleNamespace:
        req = SimpleNamespace(request_id=self.next_id)
        self.next_id += 1
        self.runner.add_prompt(req.request_id, [1] * prompt)
        return req

    def time(self, items, reps: int) -> float:
        """Median seconds of `reps` executions of the same batch (after one untimed)."""
        times = []
        for i in range(reps + 1):
            for req, n, offset, _d in items:  # same context every time: drop sampled ids
                toks = self.runner._tokens[req.request_id]
                del toks[offset + n :]
            _ids, seconds = self.runner.execute(SimpleNamespace(items=items))
            if i:
                times.append(seconds)
        return statistics.median(times)


def launch_share(runner: ModelRunner, decoders: list, args) -> dict:
    """Host time to launch an eager mixed step's kernels vs the whole step (median of 5)."""
    from live.model.llama import Segment

    chunk_slot = runner.kv.allocate()
    segs = [Segment(chunk_slot, [1] * 128, 0, True)]
    segs += [Segment(runner._slot[r.request_id], [1], args.ctx - 1, True) for r in decoders]
    launch, total = [], []
    for _ in range(6):
        _sync = torch.cuda.synchronize if runner.device.type == "cuda" else (lambda: None)
        _sync()
        t0 = time.perf_counter()
        runner.model.forward_step(segs, runner.kv, runner.attention)
        t1 = time.perf_counter()
        _sync()
        launch.append(t1 - t0)
        total.append(time.perf_counter() - t0)
    runner.kv.free(chunk_slot)
    return {
        "batch": len(decoders),
        "launch_ms": statistics.median(launch[1:]) * 1e3,
        "total_ms": statistics.median(total[1:]) * 1e3,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--model", default="8b-like")
    ap.add_argument("--batches", default="1,8,32,64")
    ap.add_argument("--ctx", type=int, default=1024, help="decode context (tokens)")
    ap.add_argument("--chunk", type=int, default=2048, help="prefill chunk (tokens)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--attention", help="flat or grouped (default: flat on CUDA, grouped on CPU)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    dev = peaks.DEVICE = torch.device(args.device)
    gpu = dev.type == "cuda"
    dtype = default_dtype(dev)
    if not gpu:
        torch.set_num_threads(1)
    copy_bw, _read_bw = peaks.peak_bandwidth(4096 if gpu else 256)
    peak = peaks.peak_flops(dtype, 8192 if gpu else 1024)
    batches = [int(b) for b in args.batches.split(",")]
    model = random_model(args.model, device=dev, dtype=dtype)
    s, elem = model.shape, torch.finfo(dtype).bits // 8
    kv = KVStore(s, max(batches) + 2, max(args.ctx, args.chunk) + 1, dev, dtype)  # + chunk, eager
    runner = ModelRunner(model, kv, dev, dtype, attention=args.attention)
    runner.warm_up()
    steps = Steps(runner, args.ctx)
    w_bytes = weight_bytes(model)
    kv_token = 2 * s.layers * s.kv_heads * s.head_dim * elem
    out = {
        "device": device_provenance(dev),
        "model": args.model,
        "dtype": str(dtype)[6:],
        "attention": runner.attention,
        "cuda_graphs": runner.graphs is not None,
        "copy_bw_gbs": copy_bw / 1e9,
        "matmul_peak_tflops": peak / 1e12,
        "weight_gb": w_bytes / 1e9,
        "decode": [],
        "prefill": {},
        "mixed": [],
    }
    print(
        f"{args.model} {out['dtype']} on {args.device}: copy {copy_bw / 1e9:.0f} GB/s, "
        f"matmul {peak / 1e12:.1f} TFLOP/s, weights {w_bytes / 1e9:.2f} GB, "
        f"attention {runner.attention}, graphs {out['cuda_graphs']}"
    )
    reqs = [steps.request(args.ctx) for _ in range(max(batches))]
    for b in batches:  # decodes at offset ctx - 1: each reads ctx keys
        items = [(r, 1, args.ctx - 1, True) for r in reqs[:b]]
        ms = steps.time(items, args.reps) * 1e3
        target = DECODE_SLACK * (w_bytes + b * args.ctx * kv_token) / copy_bw * 1e3
        out["decode"].append({"batch": b, "ctx": args.ctx, "ms": ms, "target_ms": target})
        print(
            f"decode B={b:<3} ctx={args.ctx}: {ms:8.2f} ms   target <= {target:7.2f} ms   "
            f"{'ok' if ms <= target else 'MISSED'}"
        )
    chunk_req = steps.request(args.chunk)
    flops = peaks.prefill_cost(s, args.chunk, elem)[0]
    chunk = [(chunk_req, args.chunk, 0, False)]
    ms = steps.time(chunk, max(3, args.reps // 3)) * 1e3
    share = flops / (ms / 1e3) / peak
    out["prefill"] = {
        "tokens": args.chunk,
        "ms": ms,
        "tflops": flops / ms / 1e9,
        "share_of_peak": share,
        "target_share": PREFILL_SHARE,
    }
    print(
        f"prefill {args.chunk} tokens: {ms:8.2f} ms, {flops / ms / 1e9:.1f} TFLOP/s = "
        f"{100 * share:.0f}% of peak (target >= {100 * PREFILL_SHARE:.0f}%)"
    )
    for b in batches[1:2] + batches[-1:]:  # a long chunk stretches the decodes' step
        items = chunk + [(r, 1, args.ctx - 1, True) for r in reqs[:b]]
        mixed = steps.time(items, max(3, args.reps // 3)) * 1e3
        alone = next(d["ms"] for d in out["decode"] if d["batch"] == b)
        out["mixed"].append({"batch": b, "ms": mixed, "chunk_ms": ms, "decode_ms": alone})
        print(
            f"mixed: chunk + {b} decodes {mixed:8.2f} ms (chunk alone {ms:.2f}, "
            f"decodes alone {alone:.2f})"
        )
    # The chunk again after as many cached tokens, in a store of its own (1 slot, 2 chunks long)
    kv_len = min(2 * args.chunk, s.max_len)
    cached = kv_len - args.chunk
    past = Steps(ModelRunner(model, KVStore(s, 1, kv_len, dev, dtype), dev, dtype), cached)
    past_req = past.request(kv_len)
    after = past.time([(past_req, args.chunk, cached, False)], max(3, args.reps // 3)) * 1e3
    out["prefill_after_cached"] = {"tokens": args.chunk, "cached": cached, "ms": after}
    print(f"prefill {args.chunk} tokens after {cached} cached: {after:8.2f} ms")
    out["eager_launch"] = launch_share(runner, reqs[: batches[1 if len(batches) > 1 else 0]], args)
    print(
        "eager step (128-token chunk + {batch} decodes): launch {launch_ms:.2f} ms of "
        "{total_ms:.2f} ms".format(**out["eager_launch"])
    )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
