"""What keeps `live serve`'s HTTP side bounded against slow, idle, leaving or greedy clients.

- `GuardedH11Protocol`: uvicorn's HTTP/1.1 with a deadline for each request's head. uvicorn
  only times out idle keep-alive connections (`timeout_keep_alive`, which any byte resets), so
  a client that connects and sends nothing, or one header byte at a time (slowloris), held its
  connection forever. Here the request line and headers must all arrive within
  `header_timeout_s` of the connection opening (or of the request's first byte, on a kept-alive
  connection), as nginx's `client_header_timeout`; otherwise the connection is closed.
  No cap on connections: uvicorn's `limit_concurrency` counted idle keep-alive connections and
  answered everyone else a plain-text 503 while 64 idle ones stayed open. vLLM sets no such cap
  (it raises the open-file limit instead, see `raise_open_files_limit`); a full engine answers
  429 (live.serve.engine), and the timeouts make idle connections go away.
- `read_body`: the body within `max_body_bytes` (413) and `timeout_s` (408).
- `until_disconnected`: vLLM's `with_cancellation` (vllm/entrypoints/utils.py): the handler
  races the client's `http.disconnect`; if the client goes first, the handler is cancelled, and
  its `except CancelledError` aborts the request in the engine. Streaming responses get the same
  from Starlette's StreamingResponse, which cancels the stream's generator on disconnect.
- `TraceCache`: /pdlab/trace answers, reused for `ttl_s`, at most `max_bytes` in all (least
  recently used dropped first), stale ones dropped on every call; concurrent callers of one key
  share one render.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable

from live.serve.limits import LimitError


def guarded_protocol(header_timeout_s: float):
    """uvicorn's H11Protocol class with a deadline for each request's head (see the docstring)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()  # a connection that never sends a byte is closed too

        def data_received(self, data: bytes) -> None:
            if self.conn.their_state is h11.IDLE:  # (the first bytes of) a request's head
                self._arm()
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the head is complete
                self._disarm()

        def on_response_complete(self) -> None:
            if self.conn.their_state is h11.SEND_BODY and not self.transport.is_closing():
                # Answered before the body was all read (/health, a 408 or 413): nobody will
                # read the rest, and each byte of it would reset uvicorn's keep-alive timer.
                self.transport.close()
            super().on_response_complete()
            self._disarm()  # idle now: uvicorn's keep-alive timer takes over

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout_s, self._too_slow)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _too_slow(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


def raise_open_files_limit(target: int = 65535) -> None:
    """Each connection is a file descriptor: raise the soft limit toward the hard one (vLLM's
    `set_ulimit`), so a burst of clients meets 429s, not a server out of descriptors."""
    with contextlib.suppress(ImportError, ValueError, OSError):
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = target if hard == resource.RLIM_INFINITY else min(target, hard)
        if soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


class ClientGone(Exception):
    """The client disconnected before its request was read or answered."""


async def read_body(request, limit: int, timeout_s: float) -> bytes:
    """The body, refusing more than `limit` bytes (413) or a body slower than `timeout_s` (408)."""
    from starlette.requests import ClientDisconnect

    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise LimitError(
            413,
            f"the request body has {declared} bytes; at most {limit} (--max-body-bytes)",
            "RequestTooLargeError",
        )
    body = bytearray()
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise LimitError(
                        413,
                        f"the request body is over {limit} bytes (--max-body-bytes)",
                        "RequestTooLargeError",
                    )
    except TimeoutError:
        raise LimitError(
            408,
            f"the request body did not arrive within {timeout_s:g} s (--body-timeout)",
            "RequestTimeoutError",
        ) from None
    except ClientDisconnect:
        raise ClientGone from None
    return bytes(body)


async def until_disconnected(request, work: Awaitable):
    """`work`'s result, or ClientGone once the client disconnects (then `work` is cancelled)."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(_disconnect(request))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        gone.cancel()
    if task.cancelled():
        raise ClientGone
    return task.result()


async def _disconnect(request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


class TraceCache:
    """Rendered /pdlab/trace answers: at most `ttl_s` old, `max_bytes` in all (see above)."""

    def __init__(self, max_bytes: int, ttl_s: float) -> None:
        self.max_bytes, self.ttl_s = max_bytes, ttl_s
        self.entries: OrderedDict[tuple, tuple[float, int, object]] = OrderedDict()
        self.pending: dict[tuple, asyncio.Future] = {}
        self.nbytes = 0

    async def get(self, key: tuple, render: Callable[[], object]):
        """The cached answer for `key`, or `render()` run in a worker thread (once per key)."""
        self._drop(lambda born: time.monotonic() - born >= self.ttl_s)
        hit = self.entries.get(key)
        if hit is not None:
            self.entries.move_to_end(key)
            return hit[2]
        task = self.pending.get(key)
        if task is None:  # the first caller renders; the others wait for the same answer
            task = asyncio.ensure_future(asyncio.to_thread(render))
            self.pending[key] = task
            task.add_done_callback(lambda done: self._store(key, done))
        return await asyncio.shield(task)

    def _store(self, key: tuple, task: asyncio.Future) -> None:
        self.pending.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        response = task.result()
        size = len(getattr(response, "body", b""))
        if size > self.max_bytes:
            return  # never kept: one answer over the whole budget
        if key in self.entries:
            self.nbytes -= self.entries.pop(key)[1]
        self.entries[key] = (time.monotonic(), size, response)
        self.nbytes += size
        while self.nbytes > self.max_bytes:  # least recently used first
            _key, (_born, dropped, _r) = self.entries.popitem(last=False)
            self.nbytes -= dropped

    def _drop(self, stale: Callable[[float], bool]) -> None:
        for key in [k for k, (born, _n, _r) in self.entries.items() if stale(born)]:
            self.nbytes -= self.entries.pop(key)[1]
