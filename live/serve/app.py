"""The FastAPI app of `python -m live serve` (the endpoints are listed in live/serve/server.py).

Notable features (what vLLM's server does, and so this one)
- Bad input is a 400 with OpenAI's error object {"error": {"message", "type", "param", "code"}}:
  bodies are typed pydantic models (live/serve/schema.py), and FastAPI's own validation errors
  (a query parameter such as ?last=abc) are answered 400 in the same shape, not FastAPI's 422,
  as vLLM's `validation_exception_handler` does. Anything unexpected is a 500 in that shape too.
- A full server answers 429 with `Retry-After` (live.serve.limits' `Admission`).
- A client that disconnects aborts its request, streaming or not (live/serve/transport.py).
- Tokenizing and the chat template run in a worker thread (`asyncio.to_thread`), never on the
  event loop: a 1 MB prompt takes ~0.4 s to tokenize here, and six of them on the loop stalled
  every running stream for 2.5 s (measured by the red team).
"""

# No `from __future__ import annotations`: FastAPI reads the handlers' annotations (Request).
import asyncio
import json
import time

RETRY_AFTER_S = 1  # what a 429 asks a client to wait: a request here lasts about that long


def _error(status: int, message: str, kind: str = "BadRequestError", param=None, headers=None):
    from fastapi.responses import JSONResponse

    body = {"error": {"message": message, "type": kind, "param": param, "code": status}}
    return JSONResponse(body, status_code=status, headers=headers)


def create_app(engine, served_name: str, args=None):
    """The FastAPI app around a started ServeEngine; `args`: serve's options (None: defaults)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

    from live.serve import schema
    from live.serve.limits import LimitError
    from live.serve.options import TRACE_TTL_S, parser_defaults
    from live.serve.text import StreamText
    from live.serve.transport import ClientGone, TraceCache, read_body, until_disconnected
    from sim.runs.export import json_safe, records

    args = args or parser_defaults()
    app = FastAPI(title="PD Lab live serve", docs_url=None, redoc_url=None)
    codec, limits = engine.codec, engine.limits
    names = {served_name, engine.options.model}
    created = int(time.time())

    @app.exception_handler(LimitError)
    async def limit_error(_request, err: LimitError):
        retry = {"Retry-After": str(RETRY_AFTER_S)} if err.status == 429 else None
        if err.status in (408, 413):  # the body was not (all) read: this connection is done
            retry = {"Connection": "close"}
        return _error(err.status, err.message, err.kind, err.param, retry)

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request, err: RequestValidationError):
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"][1:])
        return _error(400, f"{where}: {first['msg']}"[:500], param=where or None)

    @app.exception_handler(ClientGone)
    async def client_gone(_request, _err):
        return Response(status_code=499)  # nginx's "client closed request": nobody reads it

    @app.exception_handler(Exception)
    async def internal_error(_request, err: Exception):
        return _error(500, f"internal error: {type(err).__name__}", "InternalServerError")

    async def body_of(request: Request, kind):
        raw = await read_body(request, limits.max_body_bytes, args.body_timeout)
        data = schema.parse(kind, raw)
        if data.model not in (None, "") and data.model not in names:
            raise LimitError(
                404, f"The model `{data.model}` does not exist.", "NotFoundError", "model"
            )
        return data

    def tokenize_text(text: str) -> list[int]:
        return codec.encode(text)

    def tokenize_chat(messages: list, opening: bool = True) -> list[int]:
        return codec.encode(codec.chat_text(messages, opening))

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
        data = await body_of(request, schema.TokenizeRequest)
        if data.messages is not None:  # vLLM's chat form: the prompt a chat request would get
            turns = schema.messages_of(data.messages)
            ids = await asyncio.to_thread(tokenize_chat, turns, data.add_generation_prompt)
        elif data.prompt is not None:
            ids = await asyncio.to_thread(tokenize_text, data.prompt)
        else:
            raise LimitError(400, "give prompt (text) or messages", param="prompt")
        # A 1 MB prompt is a million ids: encode the answer in the thread too (FastAPI's own
        # encoder would walk them on the event loop).
        answer = {"count": len(ids), "max_model_len": limits.max_model_len, "tokens": ids}
        body = await asyncio.to_thread(json.dumps, answer, separators=(",", ":"))
        return Response(body, media_type="application/json")

    @app.post("/detokenize")
    async def detokenize(request: Request):
        data = await body_of(request, schema.DetokenizeRequest)
        bad = next((i for i in data.tokens if not 0 <= i < codec.vocab), None)
        if bad is not None:  # (the BPE tokenizer raises OverflowError for 10**30: a 500)
            raise LimitError(
                400,
                f"token id {bad} is outside the vocabulary (0..{codec.vocab - 1})",
                param="tokens",
            )
        return {"prompt": await asyncio.to_thread(codec.decode, data.tokens)}

    @app.get("/metrics")
    async def metrics():
        from live.serve.metrics import CONTENT_TYPE

        return Response(engine.metrics.exposition(), media_type=CONTENT_TYPE)

    @app.get("/pdlab/clock")
    async def clock():
        return {"now_s": engine.now(), "t0_unix": engine.t0_unix}

    # A classroom of pages polls the trace every second: build each (format, table, last)
    # answer at most every TRACE_TTL_S, so viewers do not take the engine's lock 30 times a
    # second (snapshot() holds it while it copies the tables). Bounded in bytes (a 5,000-request
    # trace is ~39 MB of JSON), stale answers dropped (live/serve/transport.py).
    cache = TraceCache(int(args.trace_cache_mb * 2**20), TRACE_TTL_S)

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
        return await cache.get(key, lambda: render(format, table, last))

    async def submit(prompt_ids, data, default_max: int):
        """Queue the request; (handle, event queue) once the engine took it, or an error."""
        schema.unsupported(data)
        max_tokens = data.max_tokens or data.max_completion_tokens or default_max
        loop, queue = asyncio.get_running_loop(), asyncio.Queue()

        def sink(event):  # runs on the engine thread
            loop.call_soon_threadsafe(queue.put_nowait, event)

        handle = engine.submit(
            prompt_ids, max_tokens, sink, data.min_tokens, bool(data.ignore_eos), data.priority
        )
        try:
            first = await queue.get()  # accepted, or rejected by the engine (e.g. the policy)
        except asyncio.CancelledError:
            engine.abort(handle)
            raise
        if first[0] == "rejected":
            raise LimitError(400, f"the engine refused the request: {first[1]}")
        return handle, queue

    async def serve(request: Request, chat: bool):
        data = await body_of(request, schema.ChatRequest if chat else schema.CompletionRequest)
        # From here on the client's disconnect cancels the work (and aborts the request).
        return await until_disconnected(request, answer(data, chat))

    async def answer(data, chat: bool):
        from live.serve.stream import stream_events, whole_answer

        if chat:
            prompt_ids = await asyncio.to_thread(tokenize_chat, schema.messages_of(data.messages))
            default_max = min(
                limits.default_max_tokens, max(1, limits.max_model_len - len(prompt_ids))
            )
        else:
            prompt = schema.prompt_of(data)
            is_text = isinstance(prompt, str)
            prompt_ids = await asyncio.to_thread(tokenize_text, prompt) if is_text else prompt
            default_max = 16  # OpenAI's (legacy) completions default
        handle, queue = await submit(prompt_ids, data, default_max)
        ident = f"{'chatcmpl' if chat else 'cmpl'}-{handle.request_id}"
        headers = {"X-PDLab-Request-Id": str(handle.request_id)}
        text = StreamText(codec)
        if not data.stream:
            try:
                body = await whole_answer(queue, handle, text, chat, ident, served_name)
            except asyncio.CancelledError:  # the client left (until_disconnected cancelled us)
                engine.abort(handle)
                raise
            return JSONResponse(body, headers=headers)
        events = stream_events(
            engine, queue, handle, text, chat, ident, served_name, data.stream_options
        )
        # Start the stream here, while a disconnect still cancels this handler: a generator that
        # never started has no `finally` to run, and Starlette may see the client leave before
        # it starts one (then nothing would abort the request). Once started, a dropped
        # generator is closed by asyncio, which runs its `finally`: the abort.
        try:
            first = await anext(events)
        except asyncio.CancelledError:
            await events.aclose()
            raise
        return StreamingResponse(
            _then(first, events), media_type="text/event-stream", headers=headers
        )

    @app.post("/v1/completions")
    async def completions(request: Request):
        return await serve(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request):
        return await serve(request, chat=True)

    return app


async def _then(first: str, rest):
    """`first`, then the rest of a started stream."""
    yield first
    async for chunk in rest:
        yield chunk
