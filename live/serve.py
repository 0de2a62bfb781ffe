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
  GET  /metrics                Prometheus text, vLLM's metric names (live/metrics_prom.py)
  GET  /pdlab/trace            PD Lab's own: the three tables of every request so far
                               ?format=json (default): {"meta", "requests", "segments", "steps",
                               "token_times"}; ?format=csv&table=requests|segments|steps;
                               ?last=N: only the last N requests (and the steps since)
  GET  /pdlab/clock            {"now_s": the server's clock} (for aligning a client's clock)

Request fields: `max_tokens` (completions default 16, as OpenAI's; chat default the rest of the
context up to --default-max-tokens), `stream`, `stream_options.include_usage` (a last chunk with
`usage`) and `.continuous_usage_stats` (usage in every chunk, as vLLM), vLLM's `ignore_eos` and
`min_tokens`, `priority`. Decoding is greedy whatever `temperature` says. Fields a greedy
single-answer server cannot honour (`n` > 1, `echo`, `logprobs`, `best_of` > 1) get a 400.
Errors are OpenAI's shape: {"error": {"message", "type", "param", "code"}}.

Each answer carries `id` "cmpl-<n>" / "chatcmpl-<n>" and the header X-PDLab-Request-Id: n, the
request's row in /pdlab/trace. Time in the trace is the server's monotonic clock, t = 0 at start.
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request),
# imported inside create_app so that the CLI can build its parser without FastAPI installed.
import argparse
import asyncio
import json
import socket
import sys
import time

DEFAULT_PORT = 8000
TRACE_TTL_S = 0.25  # /pdlab/trace answers are reused this long (see create_app)
SWITCH_INTERVAL_S = 0.0005  # the GIL hand-over interval in the server process (see cmd_serve)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The serve subcommand's options (shared with tests and the benchmark)."""
    from live.serve_engine import ServeLimits

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
    p.add_argument("--log-level", default="warning", help="uvicorn's log level")


# ---- request parsing ----------------------------------------------------------------------


def _error(status: int, message: str, kind: str = "BadRequestError", param: str | None = None):
    from fastapi.responses import JSONResponse

    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return JSONResponse(body, status_code=status)


async def _read_json(request, limit: int) -> dict:
    """The body as a JSON object, refusing more than `limit` bytes before reading them all."""
    from live.serve_engine import LimitError

    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise LimitError(
            413, f"the request body has {declared} bytes; at most {limit}", "RequestTooLargeError"
        )
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise LimitError(413, f"the request body is over {limit} bytes", "RequestTooLargeError")
    try:
        data = json.loads(body or b"{}")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise LimitError(400, f"the body is not valid JSON: {err}") from None
    if not isinstance(data, dict):
        raise LimitError(400, "the body must be a JSON object")
    return data


def _int(data: dict, name: str, default: int | None, low: int = 0) -> int | None:
    from live.serve_engine import LimitError

    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise LimitError(400, f"{name} must be a whole number >= {low}, got {value!r}", param=name)
    return value


def _unsupported(data: dict) -> None:
    """Refuse what a greedy, one-answer server cannot do, rather than silently ignore it."""
    from live.serve_engine import LimitError

    if data.get("n", 1) not in (1, None):
        raise LimitError(400, "n must be 1 (one answer per request)", param="n")
    if data.get("best_of", 1) not in (1, None):
        raise LimitError(400, "best_of must be 1", param="best_of")
    if data.get("echo"):
        raise LimitError(400, "echo is not supported", param="echo")
    if data.get("logprobs") not in (None, False, 0) or data.get("top_logprobs"):
        raise LimitError(400, "logprobs are not supported", param="logprobs")


def _prompt_ids(data: dict, codec) -> list[int]:
    """A completion prompt: text, token ids, or a list holding exactly one of them."""
    from live.serve_engine import LimitError

    prompt = data.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str):
        return codec.encode(prompt)
    if isinstance(prompt, list) and all(
        isinstance(i, int) and not isinstance(i, bool) for i in prompt
    ):
        return list(prompt)
    raise LimitError(
        400,
        "prompt must be a string or a list of token ids (one prompt per request)",
        param="prompt",
    )


def _messages(data: dict) -> list[dict]:
    from live.serve_engine import LimitError

    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        raise LimitError(400, "messages must be a non-empty list", param="messages")
    out = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise LimitError(400, "each message needs a role and a content", param="messages")
        content = m.get("content")
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            content = "".join(
                p.get("text", "")
                for p in content
                if isinstance(p, dict) and p.get("type") == "text"
            )
        if not isinstance(content, str):
            raise LimitError(400, "message content must be text", param="messages")
        out.append({"role": m["role"], "content": content})
    return out


# ---- the app ------------------------------------------------------------------------------


def create_app(engine, served_name: str):
    """The FastAPI app around a started ServeEngine."""
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

    from live.replay_trace import json_safe, records
    from live.serve_engine import LimitError
    from live.serve_text import StreamText

    app = FastAPI(title="PD Lab live serve", docs_url=None, redoc_url=None)
    codec, limits = engine.codec, engine.limits
    names = {served_name, engine.options.model}
    created = int(time.time())

    @app.exception_handler(LimitError)
    async def limit_error(_request, err: LimitError):
        return _error(err.status, err.message, err.kind, err.param)

    def check_model(data: dict) -> None:
        model = data.get("model")
        if model not in (None, "") and model not in names:
            raise LimitError(404, f"The model `{model}` does not exist.", "NotFoundError", "model")

    @app.get("/health")
    async def health():
        if not engine.alive:
            return _error(503, f"the engine stopped: {engine.failure}", "ServiceUnavailableError")
        return Response(status_code=200)

    @app.get("/v1/models")
    async def models():
        card = {
            "id": served_name,
            "object": "model",
            "created": created,
            "owned_by": "pdlab",
            "root": engine.options.model,
            "max_model_len": limits.max_model_len,
        }
        return {"object": "list", "data": [card]}

    @app.post("/tokenize")
    async def tokenize(request: Request):
        data = await _read_json(request, limits.max_body_bytes)
        check_model(data)
        if "messages" in data:  # vLLM's chat form: the prompt a chat request would get
            opening = data.get("add_generation_prompt", True)
            if not isinstance(opening, bool):
                raise LimitError(400, "add_generation_prompt must be true or false",
                                 param="add_generation_prompt")  # fmt: skip
            ids = codec.encode(codec.chat_text(_messages(data), opening))
        elif isinstance(data.get("prompt"), str):
            ids = codec.encode(data["prompt"])
        else:
            raise LimitError(400, "give prompt (text) or messages", param="prompt")
        return {"count": len(ids), "max_model_len": limits.max_model_len, "tokens": ids}

    @app.post("/detokenize")
    async def detokenize(request: Request):
        data = await _read_json(request, limits.max_body_bytes)
        check_model(data)
        ids = data.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            raise LimitError(400, "tokens must be a list of token ids", param="tokens")
        return {"prompt": codec.decode(ids)}

    @app.get("/metrics")
    async def metrics():
        from live.metrics_prom import CONTENT_TYPE

        return Response(engine.metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get("/pdlab/clock")
    async def clock():
        return {"now_s": engine.now(), "t0_unix": engine.t0_unix}

    # A classroom of pages polls the trace every second: build each (format, table, last)
    # answer at most every TRACE_TTL_S, so viewers do not take the engine's lock 30 times a
    # second (snapshot() holds it while it copies the tables).
    cache: dict[tuple, tuple[float, Response]] = {}

    def render(format: str, table: str, last: int | None) -> Response:
        run = engine.snapshot(last)
        if format == "csv":
            frames = {"requests": run.requests, "segments": run.segments, "steps": run.steps}
            return PlainTextResponse(frames[table].to_csv(index=False), media_type="text/csv")
        body = {
            "meta": json_safe(run.meta),
            "requests": records(run.requests),
            "segments": records(run.segments),
            "steps": records(run.steps),
            "token_times": {str(k): json_safe(v) for k, v in run.token_times.items()},
        }
        return JSONResponse(body)

    @app.get("/pdlab/trace")
    async def trace(format: str = "json", table: str = "segments", last: int | None = None):
        if last is not None and last < 1:
            raise LimitError(400, "last must be >= 1", param="last")
        if format not in ("json", "csv"):
            raise LimitError(400, "format must be json or csv", param="format")
        if format == "csv" and table not in ("requests", "segments", "steps"):
            raise LimitError(400, "table must be requests, segments or steps", param="table")
        key = (format, table if format == "csv" else "", last)
        hit = cache.get(key)
        if hit is not None and time.monotonic() - hit[0] < TRACE_TTL_S:
            return hit[1]
        response = await asyncio.to_thread(render, format, table, last)
        if len(cache) > 64:
            cache.clear()
        cache[key] = (time.monotonic(), response)
        return response

    async def submit(prompt_ids, data: dict, default_max: int):
        """Queue the request; (handle, event queue) once the engine took it, or an error."""
        _unsupported(data)
        max_tokens = _int(data, "max_completion_tokens", None, 1)
        max_tokens = _int(data, "max_tokens", max_tokens, 1) or default_max
        min_tokens = _int(data, "min_tokens", 0)
        priority = data.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise LimitError(400, "priority must be a whole number", param="priority")
        loop, queue = asyncio.get_running_loop(), asyncio.Queue()

        def sink(event):  # runs on the engine thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

        handle = engine.submit(
            prompt_ids, max_tokens, sink, min_tokens, bool(data.get("ignore_eos", False)), priority
        )
        try:
            first = await queue.get()  # accepted, or rejected by the engine (e.g. the policy)
        except asyncio.CancelledError:
            engine.abort(handle)
            raise
        if first[0] == "rejected":
            raise LimitError(400, f"the engine refused the request: {first[1]}")
        return handle, queue

    def usage(handle, completion: int) -> dict:
        prompt = handle.spec.prompt_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }

    async def serve(request: Request, chat: bool):
        data = await _read_json(request, limits.max_body_bytes)
        check_model(data)
        if chat:
            prompt_ids = codec.encode(codec.chat_text(_messages(data)))
            default_max = min(
                limits.default_max_tokens, max(1, limits.max_model_len - len(prompt_ids))
            )
        else:
            prompt_ids = _prompt_ids(data, codec)
            default_max = 16  # OpenAI's (legacy) completions default
        handle, queue = await submit(prompt_ids, data, default_max)
        rid = handle.request_id
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{rid}"
        kind = "chat.completion" if chat else "text_completion"
        headers = {"X-PDLab-Request-Id": str(rid)}
        options = data.get("stream_options") or {}
        text = StreamText(codec)

        def choice(delta: str, reason: str | None) -> dict:
            if chat:
                return {
                    "index": 0,
                    "delta": {"content": delta} if delta or reason is None else {},
                    "logprobs": None,
                    "finish_reason": reason,
                }
            return {"index": 0, "text": delta, "logprobs": None, "finish_reason": reason}

        if not data.get("stream"):
            reason = None
            try:
                while reason is None:
                    event = await queue.get()
                    if event[0] != "token":
                        raise LimitError(500, f"the engine failed: {event[1]}", "InternalError")
                    text.add(event[1], last=event[3] is not None)
                    reason = event[3]
            except asyncio.CancelledError:
                engine.abort(handle)
                raise
            n = len(text.ids)
            body_text = text.text
            message = (
                {"message": {"role": "assistant", "content": body_text}}
                if chat
                else {"text": body_text}
            )
            body = {
                "id": ident,
                "object": kind,
                "created": int(time.time()),
                "model": served_name,
                "choices": [{"index": 0, **message, "logprobs": None, "finish_reason": reason}],
                "usage": usage(handle, n),
            }
            return JSONResponse(body, headers=headers)

        chunk_kind = "chat.completion.chunk" if chat else "text_completion"
        include_usage = bool(options.get("include_usage"))
        continuous = include_usage and bool(options.get("continuous_usage_stats"))

        def sse(choices: list, usage_now: dict | None = None) -> str:
            chunk = {
                "id": ident,
                "object": chunk_kind,
                "created": int(time.time()),
                "model": served_name,
                "choices": choices,
            }
            if usage_now is not None:
                chunk["usage"] = usage_now
            return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"

        async def events():
            done = False
            try:
                if chat:  # the role first, as OpenAI and vLLM do
                    role = {
                        "index": 0,
                        "delta": {"role": "assistant", "content": ""},
                        "logprobs": None,
                        "finish_reason": None,
                    }
                    yield sse([role], usage(handle, 0) if continuous else None)
                while not done:
                    event = await queue.get()
                    if event[0] != "token":
                        err = {
                            "message": f"the engine failed: {event[1]}",
                            "type": "InternalError",
                            "param": None,
                            "code": 500,
                        }
                        yield f"data: {json.dumps({'error': err})}\n\n"
                        break
                    _tag, token, _t, reason = event
                    done = reason is not None
                    delta = text.add(token, last=done)
                    yield sse(
                        [choice(delta, reason)],
                        usage(handle, len(text.ids)) if continuous else None,
                    )
                if include_usage and done:
                    yield sse([], usage(handle, len(text.ids)))
                yield "data: [DONE]\n\n"
            finally:
                if not done:  # the client went away (or the engine failed): stop its work
                    engine.abort(handle)

        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await serve(request, chat=True)

    return app


# ---- the command --------------------------------------------------------------------------


def build(args):
    """(engine, app, limits) from parsed serve arguments: the model is loaded and warm."""
    from live.cli import _options, _sim_config
    from live.metrics_prom import ServeMetrics
    from live.serve_engine import ServeEngine, ServeLimits

    max_model_len = args.max_model_len
    if max_model_len is None:  # the default, cut to what the model holds
        from live.engine import load

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
    config = _sim_config(args)
    name = args.served_model_name or args.model
    metrics = ServeMetrics(name, limits.max_model_len)
    engine = ServeEngine(config, _options(args), limits, metrics, name)
    return engine, create_app(engine, name), limits


def cmd_serve(args) -> None:
    """Load the model, bind the port, print the URL, serve until Ctrl-C."""
    import ipaddress

    import uvicorn

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
    config = uvicorn.Config(
        app,
        log_level=args.log_level,
        timeout_graceful_shutdown=2,
        limit_concurrency=max(64, 4 * limits.max_num_requests),
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        engine.stop()
