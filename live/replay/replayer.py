"""Replay a workload against any OpenAI-compatible server, streaming, and time every token.

    result = replay(requests, ReplayOptions("http://127.0.0.1:8000"))  # result.run: the tables

Around it: live/replay/preflight.py (the endpoint, the model, the server's clock) and
live/replay/prompts.py (prompts of exact lengths) before the clock starts; live/replay/stream.py
(one streamed answer: its tokens, and whether it really ended);
live/replay/report.py (the summary, the simulator's prediction and its errors) after;
live/replay/cli.py, the `python -m live replay` command.

Notable features
- One asyncio task per request, on the official `openai` client (AsyncOpenAI, streaming). A
  dispatcher sleeps until each request's arrival time (`arrival_s` of the workload) and starts
  it; `max_concurrency` caps open streams (a request over the cap waits, and its `arrival_s` in
  the table is when it was really sent).
- The output is `output_tokens` exactly: max_tokens = min_tokens = output_tokens and ignore_eos
  (vLLM's extensions, also SGLang's).
- Timing: `time.perf_counter()` when each chunk is parsed, `stream_options` asking for usage in
  every chunk (`continuous_usage_stats`), so a chunk carrying several tokens counts as several.
  Before the clock starts, the client lists the models (imports, connection pool) and the SDK
  parses one canned stream offline, so that the first request is not timed late.
- A request fails alone: an HTTP error, a timeout, a stream cut short (no `[DONE]`), a stream
  with no tokens, or a chunk that is not JSON (the error names the URL; the run goes on, its
  tables are written, and the command exits 2 naming the first failed request).
- Bounded: connect and read timeouts (a read timeout is the longest wait for the next chunk),
  at most `max_concurrency` open streams, at most 4 chunks per token asked (+64) and never more
  tokens than asked (a lying server fails its request, not the client's memory), and Ctrl-C
  cancels every stream and returns what was measured so far (`interrupted`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from live.replay.preflight import ReplayError, clock_offset, preflight, root_url
from live.replay.prompts import build_prompts
from live.replay.stream import (
    StreamError,
    count_tokens,
    error_text,
    how_it_ended,
    warm_streaming,
    watch_for_done,
)
from live.replay.trace import Measured, tables
from sim.core.request import RequestSpec
from sim.core.trace import RunResult


@dataclass(frozen=True)
class ReplayOptions:
    """Where to send, how, and how long to wait."""

    endpoint: str
    model: str | None = None  # default: the first model the server lists
    api: str = "completions"  # completions | chat
    prompt_mode: str = "auto"  # auto (ids; chat: text, approximate without /tokenize) | ids | text
    max_concurrency: int = 64
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 60.0
    stall_factor: float = 3.0  # a gap over this many median inter-token gaps is a stall
    ttft_slo_s: float = 3.0
    tpot_slo_s: float = 0.3
    api_key: str = ""  # default $OPENAI_API_KEY, else "EMPTY"

    def __post_init__(self) -> None:
        if self.api not in ("completions", "chat"):
            raise ValueError(f"api must be completions or chat, got {self.api!r}")
        if self.prompt_mode not in ("auto", "ids", "text"):
            raise ValueError(f"prompt mode must be auto, ids or text, got {self.prompt_mode!r}")
        if self.max_concurrency < 1:
            raise ValueError("max concurrency must be >= 1")
        if not (self.connect_timeout_s > 0 and self.read_timeout_s > 0):
            raise ValueError("timeouts must be > 0 seconds")
        if not self.stall_factor > 1:
            raise ValueError("stall factor must be > 1 (a multiple of the median gap)")


@dataclass
class ReplayResult:
    """The measured run (client clock) and how the replay itself went."""

    run: RunResult
    measured: list[Measured]
    interrupted: bool = False

    @property
    def failed(self) -> list[Measured]:
        return [m for m in self.measured if m.status in ("failed", "rejected")]


async def _one(client, m: Measured, prompt, model: str, options: ReplayOptions, t0: float):
    """Send one request, stream its answer, record each token's arrival time."""
    import openai

    s = m.spec
    extra = {
        "ignore_eos": True,
        "min_tokens": s.output_tokens,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    common = {
        "model": model,
        "max_tokens": s.output_tokens,
        "temperature": 0,
        "stream": True,
        "extra_body": extra,
    }
    m.sent_s = time.perf_counter() - t0
    seen = 0  # tokens counted so far
    url = (
        f"{str(client.base_url).rstrip('/')}/{'chat/' if options.api == 'chat' else ''}completions"
    )
    stream = None
    try:
        if options.api == "chat":
            stream = await client.chat.completions.create(
                messages=[{"role": "user", "content": prompt}], **common
            )
        else:
            stream = await client.completions.create(prompt=prompt, **common)
        chunks, most = 0, 4 * s.output_tokens + 64  # a real server sends ~1 chunk per token
        async for chunk in stream:
            seen = count_tokens(m, chunk, seen, options.api, t0)
            chunks += 1
            if chunks > most:  # chunks forever, and no tokens: the read timeout never fires
                raise StreamError(
                    f"more than {most} chunks for {s.output_tokens} tokens "
                    f"({seen} received): stopped reading"
                )
        m.status, m.error = how_it_ended(stream, seen, s.output_tokens, url)
    except asyncio.CancelledError:
        m.status, m.error = "cancelled", "cancelled (Ctrl-C)"
        raise
    except openai.APIStatusError as err:
        m.status = "rejected" if 400 <= err.status_code < 500 else "failed"
        m.error = f"HTTP {err.status_code}: {error_text(err)}"
    except openai.APITimeoutError:
        m.status, m.error = "failed", f"read timeout: nothing for {options.read_timeout_s:g} s"
    except openai.APIConnectionError as err:
        m.status, m.error = "failed", f"connection error: {err.__cause__ or err}"
    except openai.OpenAIError as err:
        m.status, m.error = "failed", f"{type(err).__name__}: {err}"
    except StreamError as err:
        m.status, m.error = "failed", f"{url}: {err}"
    except Exception as err:  # noqa: BLE001 - a chunk the SDK could not parse fails this request only
        what = "malformed SSE chunk" if isinstance(err, ValueError) else type(err).__name__
        first = (str(err).splitlines() or [""])[0][:200]
        m.status, m.error = "failed", f"{what} from {url} after {seen} tokens: {first}"
    finally:
        m.done_s = time.perf_counter() - t0
        if stream is not None:
            with contextlib.suppress(Exception):
                await stream.response.aclose()


async def replay_async(
    requests: Sequence[RequestSpec],
    options: ReplayOptions,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay `requests` against options.endpoint; measured tables (live/replay/trace.py)."""
    import httpx2
    import openai

    if not requests:
        raise ReplayError("the workload has no requests")
    root = root_url(options.endpoint)
    timeout = httpx2.Timeout(options.read_timeout_s, connect=options.connect_timeout_s)
    key = options.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(timeout=timeout, headers=headers) as http:
        model, max_len = await preflight(http, root, options)
        prompts, method = await build_prompts(http, root, model, requests, options)
        limits = httpx2.Limits(
            max_connections=options.max_concurrency + 4,
            max_keepalive_connections=options.max_concurrency,
        )
        hooks = {"response": [watch_for_done]}
        async with httpx2.AsyncClient(
            timeout=timeout, limits=limits, event_hooks=hooks
        ) as stream_http:
            client = openai.AsyncOpenAI(
                base_url=f"{root}/v1",
                api_key=key,
                max_retries=0,
                timeout=timeout,
                http_client=stream_http,
            )
            try:  # warm the client up (imports, connection pool) before the clock starts
                await client.models.list()
            except openai.OpenAIError as err:
                raise ReplayError(f"{root}/v1/models through the OpenAI client: {err}") from None
            await warm_streaming(options.api)
            offset = await clock_offset(http, root)  # vs perf_counter(), made relative below
            t0 = time.perf_counter()
            if offset:
                offset["server_clock_offset_s"] += t0
            measured = [
                Measured(r) for r in sorted(requests, key=lambda r: (r.arrival_s, r.request_id))
            ]
            interrupted = await _dispatch(client, measured, prompts, model, options, t0, progress)
    meta = {
        "endpoint": root,
        "model": model,
        "max_model_len": max_len,
        "clock": "client",
        "policy": "",
        "topology": "",
        "api": options.api,
        "prompt_method": method,
        "interrupted": interrupted,
        **offset,
    }
    run = tables(
        measured,
        urlsplit(root).netloc,
        meta,
        options.stall_factor,
        options.ttft_slo_s,
        options.tpot_slo_s,
    )
    return ReplayResult(run, measured, interrupted)


async def _dispatch(client, measured, prompts, model, options, t0, progress) -> bool:
    """Start each request at its arrival time; True if Ctrl-C (cancellation) cut it short."""
    semaphore = asyncio.Semaphore(options.max_concurrency)
    tasks: list[asyncio.Task] = []
    done = 0

    async def guarded(m: Measured):
        nonlocal done
        async with semaphore:
            await _one(client, m, prompts[m.spec.request_id], model, options, t0)
        done += 1
        if progress is not None:
            progress(done, len(measured))

    try:
        for m in measured:
            delay = t0 + m.spec.arrival_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(guarded(m)))
        await asyncio.gather(*tasks)
        return False
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for m in measured:
            if m.status == "pending":
                m.status, m.error = "cancelled", "not sent before Ctrl-C"
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        return True


def replay(requests: Sequence[RequestSpec], options: ReplayOptions, progress=None) -> ReplayResult:
    """`replay_async` in a fresh event loop (Ctrl-C returns what was measured)."""
    return asyncio.run(replay_async(requests, options, progress))


__all__ = ["ReplayError", "ReplayOptions", "ReplayResult", "replay", "replay_async"]
