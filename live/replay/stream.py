"""Reading one streamed answer for `live replay` (live/replay/replayer.py): tokens, times, how it
ended.

- `count_tokens`: the tokens a chunk brings, from `usage.completion_tokens` (vLLM's
  `continuous_usage_stats`: usage in every chunk, so a chunk of several tokens counts as several),
  else one per chunk with text.
- `DoneWatch`: the SDK ends its iteration quietly when the connection closes, whether `data:
  [DONE]` came or not, so a server that died mid-answer looked finished. An httpx response hook
  passes every streamed body through a DoneWatch, which notes the mark; `how_it_ended` fails a
  stream without it, or one with no tokens where tokens were asked. It also refuses a line
  over 1 MiB (the SDK would hold an endless line in memory).
- `warm_streaming`: the SDK's stream parsing, warmed up offline before the clock starts.
"""

from __future__ import annotations

import functools
import json
import math
import re
import time

from live.replay.trace import Measured

ID_PATTERN = re.compile(r"(\d+)$")


async def warm_streaming(api: str) -> None:
    """Parse one canned stream with the SDK, offline, so the first real one is not slower.

    Measured: without this the first request's first token was timed 6-11 ms late (the SDK
    builds its chunk types and SSE decoder on first use); the others within ~0.3 ms.
    """
    import httpx2
    import openai

    chunk = {
        "id": "warm",
        "object": "text_completion",
        "created": 0,
        "model": "warm",
        "choices": [
            {
                "index": 0,
                "text": "x",
                "delta": {"content": "x"},
                "logprobs": None,
                "finish_reason": None,
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()

    def handler(_request):
        return httpx2.Response(200, content=body, headers={"content-type": "text/event-stream"})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as http:
        client = openai.AsyncOpenAI(base_url="http://warm/v1", api_key="x", http_client=http)
        common = {"model": "warm", "max_tokens": 1, "stream": True}
        if api == "chat":
            stream = await client.chat.completions.create(
                messages=[{"role": "user", "content": "x"}], **common
            )
        else:
            stream = await client.completions.create(prompt=[1], **common)
        async for _chunk in stream:
            pass


class StreamError(Exception):
    """A stream that says something impossible (the request fails, the run goes on)."""


def count_tokens(m: Measured, chunk, seen: int, api: str, t0: float) -> int:
    """Record the tokens one chunk brings (their arrival time: now); the new count."""
    t = time.perf_counter() - t0
    usage = getattr(chunk, "usage", None)
    if usage is not None and usage.prompt_tokens is not None:
        m.prompt_tokens_server = usage.prompt_tokens
        details = getattr(usage, "prompt_tokens_details", None)
        if details is not None and details.cached_tokens is not None:
            m.cached_tokens = details.cached_tokens  # vLLM, with prompt details on
    if usage is not None and usage.completion_tokens is not None:
        new = usage.completion_tokens - seen
        if usage.completion_tokens > m.spec.output_tokens:  # a token time each: bound the list
            raise StreamError(
                f"the server reported {usage.completion_tokens} completion tokens, "
                f"more than the {m.spec.output_tokens} asked"
            )
    elif chunk.choices:
        c = chunk.choices[0]
        text = getattr(c.delta, "content", None) if api == "chat" else c.text
        new = 1 if text or (api != "chat" and c.finish_reason is None) else 0
        # (a fallback: vLLM, SGLang and live serve all report usage in every chunk)
    else:
        new = 0
    if new > 0:
        m.token_times += [t] * new
        seen += new
    if chunk.choices:
        c = chunk.choices[0]
        m.text += (getattr(c.delta, "content", None) if api == "chat" else c.text) or ""
    if chunk.id and math.isnan(m.server_request_id):
        found = ID_PATTERN.search(chunk.id)
        if found and len(found.group(1)) < 12:
            m.server_request_id = int(found.group(1))
    return seen


def how_it_ended(stream, seen: int, asked: int, url: str) -> tuple[str, str]:
    """(status, error) of a stream that ended without an exception.

    The SDK ends its iteration quietly when the connection closes, [DONE] or not, so a server
    that died mid-answer (or never answered) looked finished. vLLM, SGLang, OpenAI and live
    serve all end a complete stream with `data: [DONE]`: without it the request failed.
    """
    watch = getattr(stream.response, "stream", None)
    if isinstance(watch, DoneWatch) and not watch.done:
        return "failed", f"{url}: the stream ended without [DONE] after {seen} of {asked} tokens"
    if seen == 0 and asked > 0:
        return "failed", f"{url}: the stream ended with no tokens ({asked} asked)"
    return "finished", ""


class DoneWatch:
    """A response body passed through unchanged, noting whether `data: [DONE]` came by, and
    refusing a line over MAX_LINE bytes (the SDK would hold an endless line in memory, and its
    bytes keep the read timeout from firing; a real chunk is a few hundred bytes).

    (Made an httpx2.AsyncByteStream by `_watching`, which httpx requires of a body.)"""

    MARK = b"data: [DONE]"
    MAX_LINE = 1 << 20

    def __init__(self, stream) -> None:
        self.stream, self.done, self.tail, self.line = stream, False, b"", 0

    async def __aiter__(self):
        async for chunk in self.stream:
            if not self.done:  # the mark may straddle two reads: keep the last few bytes
                seen = self.tail + chunk
                self.done = self.MARK in seen
                self.tail = seen[-len(self.MARK) :]
            end = chunk.rfind(b"\n")
            self.line = len(chunk) - end - 1 if end >= 0 else self.line + len(chunk)
            if self.line > self.MAX_LINE:
                raise StreamError(f"an SSE line over {self.MAX_LINE} bytes: stopped reading")
            yield chunk

    async def aclose(self) -> None:
        await self.stream.aclose()


@functools.cache
def _watching() -> type:
    import httpx2

    return type("AsyncDoneWatch", (DoneWatch, httpx2.AsyncByteStream), {})


async def watch_for_done(response) -> None:
    """httpx response hook: streamed answers (POST) go through a DoneWatch."""
    if response.request.method == "POST":
        response.stream = _watching()(response.stream)


def error_text(err) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"]).splitlines()[0]
    return str(err).splitlines()[0]
