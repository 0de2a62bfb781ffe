"""The answers of `live serve`'s generating endpoints: one JSON body, or an SSE stream of chunks.

Both read the request's event queue, which the engine thread fills (live.serve.engine: ("token",
id, t, finish_reason) per sampled token, or ("failed", why)). Shapes are OpenAI's, as vLLM
writes them: a chat stream opens with the assistant's role, each token is one chunk, the
finishing chunk carries `finish_reason`, `stream_options.include_usage` adds a last chunk with
`usage` (`continuous_usage_stats`, vLLM's: usage in every chunk), then `data: [DONE]`.
"""

from __future__ import annotations

import json
import time

from live.serve.limits import LimitError


def usage(handle, completion: int) -> dict:
    prompt = handle.spec.prompt_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


async def whole_answer(queue, handle, text, chat: bool, ident: str, model: str) -> dict:
    """Wait for every token; the non-streaming body (cancel it to stop waiting)."""
    reason = None
    while reason is None:
        event = await queue.get()
        if event[0] != "token":
            raise LimitError(500, f"the engine failed: {event[1]}", "InternalServerError")
        text.add(event[1], last=event[3] is not None)
        reason = event[3]
    body_text = text.text
    message = (
        {"message": {"role": "assistant", "content": body_text}} if chat else {"text": body_text}
    )
    return {
        "id": ident,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, **message, "logprobs": None, "finish_reason": reason}],
        "usage": usage(handle, len(text.ids)),
    }


async def stream_events(engine, queue, handle, text, chat, ident, model, options):
    """The SSE chunks; a stream closed before its end (the client left) aborts the request."""
    kind = "chat.completion.chunk" if chat else "text_completion"
    include_usage = bool(options and options.include_usage)
    continuous = include_usage and bool(options.continuous_usage_stats)

    def sse(choices: list, usage_now: dict | None = None) -> str:
        chunk = {
            "id": ident,
            "object": kind,
            "created": int(time.time()),
            "model": model,
            "choices": choices,
        }
        if usage_now is not None:
            chunk["usage"] = usage_now
        return f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n"

    def choice(delta: str, reason: str | None) -> dict:
        if chat:
            content = {"content": delta} if delta or reason is None else {}
            return {"index": 0, "delta": content, "logprobs": None, "finish_reason": reason}
        return {"index": 0, "text": delta, "logprobs": None, "finish_reason": reason}

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
                yield error_chunk(f"the engine failed: {event[1]}")
                break
            _tag, token, _t, reason = event
            done = reason is not None
            delta = text.add(token, last=done)
            yield sse([choice(delta, reason)], usage(handle, len(text.ids)) if continuous else None)
        if include_usage and done:
            yield sse([], usage(handle, len(text.ids)))
        yield "data: [DONE]\n\n"
    finally:
        if not done:  # the client went away (or the engine failed): stop its work
            engine.abort(handle)


def error_chunk(message: str) -> str:
    """An SSE chunk carrying an error (a stream that already said 200 cannot change status)."""
    err = {"message": message, "type": "InternalServerError", "param": None, "code": 500}
    return f"data: {json.dumps({'error': err})}\n\n"
