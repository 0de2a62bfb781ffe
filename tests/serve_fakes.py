"""A stand-in for ServeEngine, and `live serve`'s HTTP app around it, in this process.

The HTTP layer's own duties (abort on disconnect, tokenize off the event loop, a bounded trace
cache, timeouts) do not depend on the model, so these tests drive the real app (live.serve.server's
create_app and uvicorn configuration) with an engine that emits tokens only when and as slowly
as a test wants: no torch, no timing races with a real model's steps.
"""

from __future__ import annotations

import socket
import threading
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd

from live.serve.limits import ServeLimits
from live.serve.text import ByteCodec
from sim.core.trace import REQUEST_COLUMNS, SEGMENT_COLUMNS, STEP_COLUMNS, RunResult


class RecordingCodec(ByteCodec):
    """Bytes, and the threads that tokenized (the event loop must not be one of them)."""

    def __init__(self) -> None:
        super().__init__(256)
        self.threads: set[int] = set()

    def encode(self, text: str) -> list[int]:
        self.threads.add(threading.get_ident())
        return super().encode(text)


class FakeHandle:
    def __init__(self, rid: int, max_tokens: int, sink) -> None:
        self.request_id, self.max_tokens, self.sink = rid, max_tokens, sink
        self.spec = SimpleNamespace(prompt_tokens=1, output_tokens=max_tokens)
        self.aborted = threading.Event()


class FakeEngine:
    """Accepts every request; emits one token every `token_s` until max_tokens or an abort."""

    def __init__(self, token_s: float = 0.02, trace_rows: int = 10, **limits) -> None:
        self.codec = RecordingCodec()
        self.limits = ServeLimits(**limits)
        self.options = SimpleNamespace(model="fake")
        self.metrics = SimpleNamespace(exposition=lambda: "")
        self.alive, self.failure, self.t0_unix = True, None, time.time()
        self.token_s, self.trace_rows = token_s, trace_rows
        self.handles: list[FakeHandle] = []
        self.snapshots = 0

    def now(self) -> float:
        return time.time() - self.t0_unix

    def submit(self, prompt_ids, max_tokens, sink, min_tokens=0, ignore_eos=False, priority=0):
        handle = FakeHandle(len(self.handles), max_tokens, sink)
        self.handles.append(handle)
        sink(("accepted",))
        threading.Thread(target=self._emit, args=(handle,), daemon=True).start()
        return handle

    def _emit(self, handle: FakeHandle) -> None:
        for i in range(handle.max_tokens):
            if handle.aborted.wait(self.token_s):
                return
            end = "length" if i == handle.max_tokens - 1 else None
            handle.sink(("token", 65, self.now(), end))

    def abort(self, handle: FakeHandle) -> None:
        handle.aborted.set()

    def snapshot(self, last=None) -> RunResult:
        """A trace of `trace_rows` requests (about 400 bytes of JSON each)."""
        self.snapshots += 1
        n = self.trace_rows if last is None else min(last, self.trace_rows)
        requests = pd.DataFrame({c: np.arange(n, dtype=float) for c in REQUEST_COLUMNS})
        segments = pd.DataFrame(columns=list(SEGMENT_COLUMNS))
        steps = pd.DataFrame(columns=list(STEP_COLUMNS))
        return RunResult(requests, segments, steps, {}, {"now_s": self.now()})


class InProcessServer:
    """uvicorn in a thread on a free loopback port, configured as `live serve` configures it."""

    def __init__(self, engine, **flags) -> None:
        import uvicorn

        from live.serve import server as serve
        from live.serve.options import parser_defaults

        args = parser_defaults(**flags)
        app = serve.create_app(engine, "fake", args)
        config = serve.uvicorn_config(app, args)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(2048)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.server.started, "the in-process server did not start"

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()
