"""`python -m live serve`: the live engine behind an OpenAI-compatible HTTP API (FastAPI, uvicorn).

    python -m live serve --model tiny --policy prefill-first --port 8000
    curl -N localhost:8000/v1/completions -H 'content-type: application/json' \\
         -d '{"prompt": "Hello", "max_tokens": 16, "stream": true}'

Endpoints (vLLM's, so its clients and dashboards work unchanged):
  GET  /health                 200 while the engine thread runs
  GET  /v1/models              the one served model (with max_model_len)
  POST /v1/completions         prompt = text, a list of token ids, or a list of one of them
  POST /v1/chat/completions    messages -> the model's chat template
  POST /tokenize, /detokenize  {"prompt"|"messages"} -> {"tokens", "count", "max_model_len"};
                               {"tokens"} -> {"prompt"}. With messages (and vLLM's
                               add_generation_prompt, default true) the count is exactly the
                               usage.prompt_tokens a chat request with them gets.
  GET  /metrics                Prometheus text, vLLM's metric names (live/serve/metrics.py)
  GET  /pdlab/trace            PD Lab's own: the three tables of every request so far
                               ?format=json (default): {"meta", "requests", "segments", "steps",
                               "token_times"}; ?format=csv&table=requests|segments|steps;
                               ?last=N: only the last N requests (and the steps since)
  GET  /pdlab/clock            {"now_s": the server's clock} (for aligning a client's clock)

Request fields: `max_tokens` (completions default 16, as OpenAI's; chat default the rest of the
context up to --default-max-tokens), `stream`, `stream_options.include_usage` (a last chunk with
`usage`) and `.continuous_usage_stats` (usage in every chunk, as vLLM), vLLM's `ignore_eos` and
`min_tokens`, `priority`. Decoding is greedy whatever `temperature` says. Fields a greedy
single-answer server cannot honour (`n` > 1, `echo`, `logprobs`, `best_of` > 1, stop strings)
get a 400. Errors are OpenAI's shape: {"error": {"message", "type", "param", "code"}}: 400 for
bad input (typed bodies, live/serve/schema.py), 429 with Retry-After when full.

The app is live/serve/app.py (answers: live/serve/stream.py); what bounds a connection (header,
body and keep-alive timeouts, abort on disconnect, the trace cache) is live/serve/transport.py.

Each answer carries `id` "cmpl-<n>" / "chatcmpl-<n>" and the header X-PDLab-Request-Id: n, the
request's row in /pdlab/trace. Time in the trace is the server's monotonic clock, t = 0 at start.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request),
# imported inside create_app so that the CLI can build its parser without FastAPI installed.
import socket
import sys

SWITCH_INTERVAL_S = 0.0005  # the GIL hand-over interval in the server process (see cmd_serve)


def uvicorn_config(app, args):
    """uvicorn's configuration for the app: the timeouts and sizes that bound a connection."""
    import uvicorn

    from live.serve.transport import guarded_protocol

    return uvicorn.Config(
        app,
        http=guarded_protocol(args.header_timeout),
        log_level=args.log_level,
        timeout_graceful_shutdown=2,
        timeout_keep_alive=args.timeout_keep_alive,  # vLLM's TIMEOUT_KEEP_ALIVE is 5 s too
        h11_max_incomplete_event_size=args.max_header_bytes,
        # No limit_concurrency: uvicorn counts idle keep-alive connections against it and answers
        # a plain-text 503 to everyone else (see live/serve/transport.py). vLLM sets none either.
    )


def create_app(engine, served_name: str, args=None):
    """The FastAPI app around a started ServeEngine (live/serve/app.py)."""
    from live.serve.app import create_app as make

    return make(engine, served_name, args)


# ---- the command --------------------------------------------------------------------------


def build(args):
    """(engine, app, limits) from parsed serve arguments: the model is loaded and warm."""
    from live.engine.options import live_options, sim_config
    from live.serve.engine import ServeEngine
    from live.serve.limits import ServeLimits
    from live.serve.metrics import ServeMetrics

    max_model_len = args.max_model_len
    if max_model_len is None:  # the default, cut to what the model holds
        from live.engine.run import load

        net = load(args.model, args.device)[0]  # cached: the engine gets the same model
        max_model_len = min(ServeLimits().max_model_len, net.shape.max_len)
    limits = ServeLimits(
        args.max_num_requests,
        max_model_len,
        args.max_tokens_in_flight,
        args.max_body_bytes,
        args.default_max_tokens,
        args.trace_requests,
    )
    config = sim_config(args)
    name = args.served_model_name or args.model
    metrics = ServeMetrics(name, limits.max_model_len)
    engine = ServeEngine(config, live_options(args), limits, metrics, name)
    return engine, create_app(engine, name), limits


def cmd_serve(args) -> None:
    """Load the model, bind the port, print the URL, serve until Ctrl-C."""
    import ipaddress

    import uvicorn

    from live.serve.transport import raise_open_files_limit

    for name in ("header_timeout", "body_timeout", "timeout_keep_alive", "max_header_bytes"):
        if not getattr(args, name) > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0")
    if args.trace_cache_mb < 0:
        raise ValueError("--trace-cache-mb must be >= 0")
    if not 0 <= args.port < 65536:
        raise ValueError(f"--port must be 0..65535, got {args.port}")
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # proto=IPPROTO_TCP matters: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
    # sockets that say they are TCP. Without it, each keep-alive answer written in two parts
    # waited ~40 ms for the client's delayed ACK (measured).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((args.host, args.port))
        sock.listen(2048)  # from now on a client's connection waits in the backlog, not refused
    except OSError as err:
        raise OSError(f"cannot listen on {args.host}:{args.port}: {err.strerror}") from None
    # Two threads share the GIL: the engine (Python between torch calls) and the event loop that
    # streams tokens. CPython hands the GIL over every 5 ms by default, so a streamed token could
    # wait that long, several times, behind a busy engine; 0.5 ms keeps the stream within about
    # a millisecond of the step that sampled it (measured; see the README's "Real servers").
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    print(f"loading {args.model} ...", file=sys.stderr, flush=True)
    engine, app, limits = build(args)
    engine.start()
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    c = engine.config
    print(
        f"PD Lab live serve: http://{host}:{port}  model {engine.model_name} "
        f"({engine.device_info.get('device')}), policy {c.policy}, topology "
        f"{c.topology.topology}, {limits.max_num_requests} requests x {limits.max_model_len} "
        "tokens",
        flush=True,
    )
    try:
        if not ipaddress.ip_address(args.host.strip("[]")).is_loopback:
            print(
                "note: listening beyond this machine; anyone who can reach it can use the model",
                file=sys.stderr,
                flush=True,
            )
    except ValueError:
        pass
    raise_open_files_limit()
    try:
        uvicorn.Server(uvicorn_config(app, args)).run(sockets=[sock])
    finally:
        engine.stop()
