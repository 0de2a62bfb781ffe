"""What the HTTP server costs: output tokens/s through `live serve` vs the engine alone.

    .venv/bin/python bench/bench_serve.py [--model tiny --model smollm2-135m-shape]
                                          [--requests 8 --prompt 64 --output 128 --repeat 3]

Same workload both ways, one burst of identical requests at t = 0:
- engine alone: `live.engine.run.run_live` (the simulator's cluster, every step on the model, no
  HTTP); tokens/s = output tokens / wall time of the run;
- through HTTP: a `python -m live serve` subprocess with the same model, policy and KV size,
  replayed by `live.replay.replayer` (the official OpenAI client, streaming); tokens/s = output
  tokens / (last token received - first request sent), on the client's clock.
It also reads the server's own trace: the mean step time there vs in the engine-alone run (does
serving slow the forward passes?) and the time between steps (streaming and bookkeeping).
Best of --repeat runs each (the machine is shared; the best is the least disturbed).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def engine_alone(requests, model: str, config) -> dict:
    from live.engine.run import LiveOptions, load, run_live

    load(model, "auto")  # loaded once, outside the timing
    started = time.perf_counter()
    run, _info = run_live(requests, config, LiveOptions(model=model))
    wall = time.perf_counter() - started
    tokens = int(run.requests["output_tokens"].sum())
    steps = run.steps
    busy = float((steps["end_s"] - steps["start_s"]).sum())  # the forward passes alone
    return {
        "tokens_per_s": tokens / wall,
        "wall_s": wall,
        "steps": len(steps),
        "mean_step_ms": 1000 * busy / len(steps),
        "step_tokens_per_s": tokens / busy,
    }


def start_serve(model: str, policy: str, slots: int, max_len: int) -> tuple[subprocess.Popen, str]:
    """A `python -m live serve` subprocess on a free port: (process, base URL), read from the
    first line it prints."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "live",
            "serve",
            "--model",
            model,
            "--port",
            "0",
            "--policy",
            policy,
            "--max-num-requests",
            str(slots),
            "--max-model-len",
            str(max_len),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    line = proc.stdout.readline()
    found = re.search(r"http://[\d.]+:\d+", line)
    if found is None:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"live serve did not print its URL: {line!r}")
    return proc, found.group(0)


def stop_serve(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(10)


def through_http(requests, model: str, policy: str, slots: int, max_len: int) -> dict:
    from live.replay.replayer import ReplayOptions, replay

    proc, url = start_serve(model, policy, slots, max_len)
    try:
        replay(requests[:1], ReplayOptions(url))  # warm the server's path once
        result = replay(requests, ReplayOptions(url))
        import httpx2

        trace = httpx2.get(url + "/pdlab/trace", timeout=30).json()
    finally:
        stop_serve(proc)
    table = result.run.requests
    tokens = int(table["output_tokens_received"].sum())
    span = float(table["finish_s"].max() - table["arrival_s"].min())
    steps = trace["steps"][-_count_steps(trace, len(requests)) :]
    busy = sum(s["end_s"] - s["start_s"] for s in steps)
    first = min(r["arrival_s"] for r in trace["requests"][-len(requests) :])
    last = max(r["finish_s"] for r in trace["requests"][-len(requests) :])
    return {
        "tokens_per_s": tokens / span,
        "span_s": span,
        "steps": len(steps),
        "mean_step_ms": 1000 * busy / max(len(steps), 1),
        "server_tokens_per_s": tokens / (last - first),
        "exact": bool((table["output_tokens_received"] == table["output_tokens"]).all()),
    }


def precision(model: str, policy: str, n: int = 24, output: int = 64) -> dict:
    """How well the replay client times tokens: its clock vs the server's, token by token.

    A tiny server and requests arriving every 40 ms. Every streamed token has two times: when
    the server's step sampled it (server clock) and when the client parsed its chunk (client
    clock); `live replay` aligns the clocks (Cristian's algorithm on /pdlab/clock, uncertainty =
    half the best round trip). delay = client time + offset - server time: the streaming
    path's latency plus the client's timestamping error. Lateness = sent - scheduled.
    """
    import numpy as np

    from live.replay.replayer import ReplayOptions, replay
    from sim.core.request import RequestSpec

    proc, url = start_serve(model, policy, 16, 256)
    try:
        specs = [RequestSpec(i, 0.04 * i, 32, output) for i in range(n)]
        result = replay(specs, ReplayOptions(url))
        import httpx2

        trace = httpx2.get(url + "/pdlab/trace", timeout=30).json()
    finally:
        stop_serve(proc)
    offset = result.run.meta["server_clock_offset_s"]
    delays = []
    for m in result.measured:
        server = np.asarray(trace["token_times"][str(int(m.server_request_id))])
        delays.append(np.asarray(m.token_times) + offset - server)
    d = np.concatenate(delays) * 1000
    table = result.run.requests
    late = (table["arrival_s"] - table["scheduled_s"]).to_numpy() * 1000
    pct = lambda a, q: float(np.percentile(a, q))  # noqa: E731
    return {
        "tokens": int(d.size),
        "rtt_ms": 1000 * result.run.meta["server_clock_rtt_s"],
        "delay_ms": {q: pct(d, q) for q in (1, 50, 90, 99)} | {"max": float(d.max())},
        "send_late_ms": {q: pct(late, q) for q in (50, 99)} | {"max": float(late.max())},
    }


def _count_steps(trace: dict, n: int) -> int:
    """Steps of the last n requests' run: those that ended after the first of them arrived."""
    first = min(r["arrival_s"] for r in trace["requests"][-n:])
    return sum(s["end_s"] > first for s in trace["steps"])


def main() -> None:
    from sim.config import SimConfig, with_overrides
    from sim.core.request import RequestSpec

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", action="append", help="default: tiny and smollm2-135m-shape")
    p.add_argument("--requests", type=int, default=8)
    p.add_argument("--prompt", type=int, default=64)
    p.add_argument("--output", type=int, default=128)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--skip-precision", action="store_true")
    args = p.parse_args()
    policy = SimConfig().policy
    rows = {}
    if not args.skip_precision:
        rows["precision"] = prec = precision("tiny", policy)
        print(
            f"replay timing, {prec['tokens']} tokens (tiny server; clocks aligned to "
            f"+-{prec['rtt_ms'] / 2:.2f} ms):"
        )
        print(
            "  token arrival - server step end (ms): "
            + ", ".join(
                f"p{k} {v:.2f}" if k != "max" else f"max {v:.2f}"
                for k, v in prec["delay_ms"].items()
            )
        )
        print(
            "  sent - scheduled (ms): "
            + ", ".join(
                f"p{k} {v:.2f}" if k != "max" else f"max {v:.2f}"
                for k, v in prec["send_late_ms"].items()
            )
        )
    for model in args.model or ["tiny", "smollm2-135m-shape"]:
        max_len = args.prompt + args.output
        requests = [RequestSpec(i, 0.0, args.prompt, args.output) for i in range(args.requests)]
        config = with_overrides(SimConfig(), {"kv_capacity_tokens": args.requests * max_len})
        alone = max(
            (engine_alone(requests, model, config) for _ in range(args.repeat)),
            key=lambda r: r["tokens_per_s"],
        )
        http = max(
            (
                through_http(requests, model, policy, args.requests, max_len)
                for _ in range(args.repeat)
            ),
            key=lambda r: r["tokens_per_s"],
        )
        rows[model] = {
            "engine_alone": alone,
            "http": http,
            "ratio": http["tokens_per_s"] / alone["tokens_per_s"],
        }
        print(
            f"{model}: {args.requests} requests x ({args.prompt} prompt + {args.output} output)"
            f" tokens, policy {policy}"
        )
        print(
            f"  engine alone  {alone['tokens_per_s']:8.1f} output tokens/s  "
            f"({alone['steps']} steps, {alone['mean_step_ms']:.2f} ms each; forward passes "
            f"alone {alone['step_tokens_per_s']:.1f} tokens/s)"
        )
        print(
            f"  through HTTP  {http['tokens_per_s']:8.1f} output tokens/s  "
            f"({http['steps']} steps, {http['mean_step_ms']:.2f} ms each on the server; "
            f"exact tokens: {http['exact']})"
        )
        print(f"  ratio HTTP / alone = {rows[model]['ratio']:.3f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
