"""The options of `python -m live serve` (also read by the app for its defaults, and by tests)."""

import argparse

from live.serve.limits import ServeLimits

DEFAULT_PORT = 8000
TRACE_TTL_S = 0.25  # /pdlab/trace answers are reused this long (see create_app)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The serve subcommand's options (shared with tests and the benchmark)."""
    d = ServeLimits()
    p.add_argument(
        "--model",
        default="SmolLM2-135M",
        help="SmolLM2-135M, tiny, smollm2-135m-shape, 1b-like, 8b-like or a folder",
    )
    p.add_argument("--served-model-name", help="the name clients use (default: --model)")
    p.add_argument(
        "--policy",
        help="a scheduling policy (python -m sim list); default: the simulator's default",
    )
    p.add_argument("--topology", help="colocated, router or disaggregated")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a knob")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--threads", type=int, default=1, help="CPU threads per step")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default loopback only; 0.0.0.0 for a classroom)",
    )
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="0 picks a free port")
    p.add_argument(
        "--max-num-requests",
        type=int,
        default=d.max_num_requests,
        help="requests in the engine at once (each gets a KV slot); more get 429",
    )
    p.add_argument(
        "--max-model-len",
        type=int,
        default=None,
        help=f"prompt + output tokens of one request; more get 400 (default {d.max_model_len}, "
        "or the model's own limit if smaller: tiny holds 256)",
    )
    p.add_argument(
        "--max-tokens-in-flight",
        type=int,
        default=0,
        help="prompt + output tokens over all requests (0 = slots x max-model-len)",
    )
    p.add_argument("--max-body-bytes", type=int, default=d.max_body_bytes)
    p.add_argument("--default-max-tokens", type=int, default=d.default_max_tokens)
    p.add_argument(
        "--trace-requests", type=int, default=d.trace_requests, help="requests kept in /pdlab/trace"
    )
    p.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        help="s for a request's line and headers to arrive (slow clients are cut off)",
    )
    p.add_argument("--body-timeout", type=float, default=30.0, help="s for a body (then 408)")
    p.add_argument(
        "--timeout-keep-alive",
        type=float,
        default=5.0,
        help="s an idle keep-alive connection stays open",
    )
    p.add_argument(
        "--max-header-bytes",
        type=int,
        default=16384,
        help="request line + headers, bytes (more get 400)",
    )
    p.add_argument(
        "--trace-cache-mb",
        type=float,
        default=64.0,
        help="MB of rendered /pdlab/trace answers kept for reuse (0.25 s each)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn's log level")


def parser_defaults(**overrides) -> argparse.Namespace:
    """serve's options at their defaults (for tests and the benchmark), with `overrides`."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args([])
    for name, value in overrides.items():
        if not hasattr(args, name):
            raise TypeError(f"serve has no option {name}")
        setattr(args, name, value)
    return args
