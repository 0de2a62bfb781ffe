"""The host's share of a live step: scheduler + bookkeeping time per step, batch 1..64 (issue 27).

On a GPU a decode step of a big model takes a few ms; if the Python around it (the policy, the
simulator's engine and trace, the runner packing inputs and reading ids) takes as long, the GPU
idles and every step looks the same. Target: at most 1 ms per step at batch 64.

What is measured, on the `tiny` model (its forward is cheap, so the host part is what shows):
- wall: the whole `simulate(...)` with a MeasuredClock (as `python -m live run`), per step;
- forward: inside `LlamaModel.forward_layout` (embedding .. logits, the device work proper);
- host = wall - forward, split into `runner` (a step's segments, the layout built on the host,
  the one transfer, argmax and reading the ids) and `scheduler` (everything outside the
  runner: policy, engine bookkeeping, KV block accounting, trace rows, simpy).
B requests arrive at t = 0 with 16-token prompts and 64-token outputs, so most steps decode B.

Run: .venv/bin/python bench/bench_host_share.py [--batches 1,8,64] [--device cpu] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import live/ and sim/

import torch  # noqa: E402

from live.engine.clock import MeasuredClock  # noqa: E402
from live.engine.run import load  # noqa: E402
from live.engine.runner import ModelRunner  # noqa: E402
from live.model.kvstore import KVStore  # noqa: E402
from sim.cluster.topologies import simulate  # noqa: E402
from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.core.request import RequestSpec  # noqa: E402

TARGET_MS = 1.0


def one_run(
    batch: int, model: str, device: str, prompt: int, output: int, attention: str | None = None
) -> dict[str, float]:
    net, _tok, dev, dtype = load(model, device)
    forward_s = [0.0]
    plain = type(net).forward_layout

    def timed_forward(layout, kv):  # the device work, synchronised so it is all counted here
        start = time.perf_counter()
        out = plain(net, layout, kv)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        forward_s[0] += time.perf_counter() - start
        return out

    requests = [RequestSpec(i, 0.0, prompt, output) for i in range(batch)]
    ids = {i: [(7 * i + j) % net.shape.vocab for j in range(prompt)] for i in range(batch)}
    cfg = with_overrides(
        SimConfig(policy="vllm"),
        {"kv_capacity_tokens": batch * (prompt + output), "max_num_seqs": max(batch, 1)},
    )

    # Built and warmed before the clock starts (one colocated worker uses it).
    runner = ModelRunner(
        net, KVStore(net.shape, batch, prompt + output, dev, dtype), dev, dtype, attention=attention
    )
    runner.warm_up()
    clock = MeasuredClock(lambda _worker: runner, ids)
    net.forward_layout = timed_forward  # instance attribute: forward_step calls it
    try:
        start = time.perf_counter()
        simulate(requests, cfg, clock=clock)
        wall = time.perf_counter() - start
    finally:
        del net.forward_layout
    steps = len(clock.samples)
    execute = sum(s[-1] for s in clock.samples)
    per = 1000 / steps
    return {
        "steps": steps,
        "wall_ms": wall * per,
        "forward_ms": forward_s[0] * per,
        "runner_ms": (execute - forward_s[0]) * per,
        "scheduler_ms": (wall - execute) * per,
        "host_ms": (wall - forward_s[0]) * per,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", default="1,2,4,8,16,32,64")
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3, help="runs per batch; the median is kept")
    parser.add_argument("--prompt", type=int, default=16)
    parser.add_argument("--output", type=int, default=64)
    parser.add_argument("--attention", help="flat or grouped (default: the device's default)")
    args = parser.parse_args(argv)
    print(
        f"host share per step, {args.model} on {args.device}, attention "
        f"{args.attention or 'default'} (torch {torch.__version__}), "
        f"median of {args.repeats}; target: host <= {TARGET_MS} ms at batch 64"
    )
    print(
        f"{'batch':>5} {'steps':>5} {'wall':>8} {'forward':>8} {'runner':>8} {'sched':>8} "
        f"{'host':>8} {'host/1ms':>8}   (ms per step)"
    )
    for b in (int(x) for x in args.batches.split(",")):
        runs = [
            one_run(b, args.model, args.device, args.prompt, args.output, args.attention)
            for _ in range(args.repeats)
        ]
        r = {k: sorted(run[k] for run in runs)[len(runs) // 2] for k in runs[0]}
        print(
            f"{b:>5} {r['steps']:>5.0f} {r['wall_ms']:>8.3f} {r['forward_ms']:>8.3f} "
            f"{r['runner_ms']:>8.3f} {r['scheduler_ms']:>8.3f} {r['host_ms']:>8.3f} "
            f"{r['host_ms'] / TARGET_MS:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
