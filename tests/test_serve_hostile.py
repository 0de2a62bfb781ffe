"""`python -m live serve` under hostile or careless use: what an attacker or a class would send.

Two kinds of server: the real one (`live serve --model tiny`, a subprocess, as in test_serve.py)
where the model matters, and the real HTTP app around a fake engine in this process
(tests/serve_fakes.py) where only the HTTP layer's behaviour does: a fake engine emits tokens
as slowly as the test wants, so nothing depends on how fast this machine runs a model. Waits
are generous upper bounds (20-30 s for what takes about a second) and never lower bounds.
"""

import asyncio
import contextlib
import json
import socket
import time

import pytest

pytest.importorskip("torch")
pytest.importorskip("fastapi")

from serve_fakes import FakeEngine, InProcessServer  # noqa: E402
from test_serve import Server  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    server = Server("--model", "tiny")
    yield server
    server.stop()


def raw(port: int, data: bytes, timeout: float = 30.0) -> tuple[int, dict, bytes]:
    """Send bytes on a fresh connection; (status, headers, body) of the answer (read to close)."""
    got = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        # A server may answer and close before it has read everything (huge headers).
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(data)
        try:
            while chunk := s.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def post_raw(port: int, path: str, body: bytes) -> tuple[int, dict, bytes]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return raw(port, head.encode() + body)


def closed_within(s: socket.socket, seconds: float) -> bool:
    """True if the server closes `s` within `seconds` (whatever it says first)."""
    s.settimeout(seconds)
    try:
        while s.recv(65536):
            pass
        return True
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


# ---- defect 1: idle connections, bursts ------------------------------------------------------


def test_idle_connections_do_not_crowd_out_other_clients(tiny):
    idle = []
    try:
        for _ in range(70):  # each asks once and keeps its connection open (keep-alive)
            s = socket.create_connection(("127.0.0.1", tiny.port), timeout=30)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200"), f"idle connection {len(idle)}"
            idle.append(s)
        assert tiny.post("/v1/completions", {"prompt": "hi", "max_tokens": 2}).status_code == 200
        statuses = asyncio.run(_burst(tiny.url, 120))
    finally:
        for s in idle:
            s.close()
    # Full means 429 with Retry-After (vLLM's and OpenAI's contract), never uvicorn's 503.
    assert {status for status, _ in statuses} <= {200, 429}, statuses
    assert all(retry for status, retry in statuses if status == 429)
    assert any(status == 200 for status, _ in statuses)


async def _burst(url: str, n: int) -> list[tuple[int, str | None]]:
    import httpx2

    limits = httpx2.Limits(max_connections=n)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as http:
        body = {"prompt": "hello", "max_tokens": 8}
        answers = await asyncio.gather(
            *(http.post(f"{url}/v1/completions", json=body) for _ in range(n))
        )
    return [(a.status_code, a.headers.get("retry-after")) for a in answers]


# ---- defect 4: wrongly typed input is a 400 error object -------------------------------------

NESTED = b'{"prompt": "x", "max_tokens": 1, "extra": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
BAD_BODIES = [
    ("/v1/completions", b'{"model": ["tiny"], "prompt": "x", "max_tokens": 1}'),
    (
        "/v1/completions",
        b'{"prompt": "x", "max_tokens": 1, "stream": true, "stream_options": "yes"}',
    ),
    (
        "/v1/chat/completions",
        b'{"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}',
    ),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": ' + b"9" * 5000 + b"}"),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": 1, "seed": ' + b"9" * 5000 + b"}"),
    ("/v1/completions", b'{"prompt": "\\ud800", "max_tokens": 1}'),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\udfff"}]}'),
    ("/tokenize", b'{"prompt": "\\ud800"}'),
    ("/v1/completions", NESTED),
    ("/tokenize", b'{"model": {"a": 1}, "prompt": "x"}'),
    ("/detokenize", b'{"tokens": [1, "2"]}'),
    ("/detokenize", b'{"tokens": [1, 1000000000000000000000000000000]}'),
    ("/v1/completions", b'{"prompt": [[1, 2], [3]], "max_tokens": 1}'),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": 1, "priority": "high"}'),
]


@pytest.mark.parametrize("path,body", BAD_BODIES, ids=range(len(BAD_BODIES)))
def test_wrongly_typed_fields_get_a_400_error_object(tiny, path, body):
    status, headers, answer = post_raw(tiny.port, path, body)
    assert status == 400, (status, answer[:300])
    error = json.loads(answer)["error"]
    assert error["type"] == "BadRequestError" and error["code"] == 400
    assert error["message"] and len(error["message"]) < 2000


# ---- attacker's pass: request bodies -----------------------------------------------------------

ABUSE = [
    ({"prompt": "x", "max_tokens": 1, "n": 10**6}, "n"),
    ({"prompt": "x", "max_tokens": 10**30}, "max_tokens"),
    ({"prompt": "x", "max_tokens": -1}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 2, "stop": ["a"] * 10_000}, "stop"),
    ({"prompt": "x", "max_tokens": 2, "logprobs": 5}, "logprobs"),
    ({"prompt": [10**40], "max_tokens": 2}, "prompt"),
    ({"prompt": "x", "max_tokens": 2, "min_tokens": 3}, "min_tokens"),
]


@pytest.mark.parametrize("body,param", ABUSE, ids=[p for _, p in ABUSE])
def test_abusive_values_are_refused_with_the_field_named(tiny, body, param):
    answer = tiny.post("/v1/completions", body)
    assert answer.status_code == 400, answer.text[:300]
    assert answer.json()["error"]["param"] == param, answer.text[:300]


def test_a_huge_priority_leaves_the_trace_working(tiny):
    # priority is any whole number (vLLM's too): one far beyond 64 bits must not break the
    # trace's tables, which every viewer of the class downloads.
    body = {"prompt": "x", "max_tokens": 2, "priority": 10**30}
    assert tiny.post("/v1/completions", body).status_code == 200
    assert tiny.get("/pdlab/trace").status_code == 200
    assert tiny.get("/pdlab/trace?format=csv&table=requests").status_code == 200


def test_any_unicode_prompt_is_served_and_counted_in_bytes(tiny):
    prompt = "naïve 日本語 🚀 \u202eRTL\u0000 end"  # accents, CJK, emoji, bidi override, NUL
    answer = tiny.post("/v1/completions", {"prompt": prompt, "max_tokens": 3})
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["prompt_tokens"] == len(prompt.encode("utf-8"))
    turns = [{"role": "user", "content": prompt}]
    chat = tiny.post("/v1/chat/completions", {"messages": turns, "max_tokens": 3})
    assert chat.status_code == 200 and chat.json()["usage"]["completion_tokens"] == 3


# ---- the HTTP layer around a fake engine (in this process) -----------------------------------


@pytest.fixture
def fake():
    engine = FakeEngine(token_s=0.05)
    server = InProcessServer(engine, header_timeout=1.0, timeout_keep_alive=1.0, body_timeout=1.0)
    yield engine, server
    server.stop()


def _completion(stream: bool, max_tokens: int = 100_000) -> bytes:
    body = json.dumps({"prompt": "hi", "max_tokens": max_tokens, "stream": stream}).encode()
    return (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
    )


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_aborts_its_request(fake, stream):
    """Defect 2: vLLM aborts a request whose client disconnects, streaming or not."""
    engine, server = fake
    s = server.connect()
    s.sendall(_completion(stream))
    deadline = time.monotonic() + 30
    while not engine.handles and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.handles, "the request never reached the engine"
    s.close()
    assert engine.handles[0].aborted.wait(30), "the request kept running after its client left"


def test_many_clients_that_leave_at_once_abort_every_request(fake):
    engine, server = fake
    sockets = [server.connect() for _ in range(40)]
    for i, s in enumerate(sockets):
        s.sendall(_completion(stream=bool(i % 2)))
    deadline = time.monotonic() + 30
    while len(engine.handles) < 40 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(engine.handles) == 40
    for s in sockets:
        s.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not all(h.aborted.is_set() for h in engine.handles):
        time.sleep(0.1)
    assert all(h.aborted.is_set() for h in engine.handles)


def test_tokenizing_runs_off_the_event_loop(fake):
    """Defect 5: a 1 MB prompt is tokenized in a worker thread, so streams keep flowing."""
    engine, server = fake
    loop_thread = server.thread.ident
    for path, body in (
        ("/v1/completions", {"prompt": "x" * 1000, "max_tokens": 1}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_tokens": 1}),
        ("/tokenize", {"prompt": "x" * 1000}),
    ):
        status, _h, answer = post_raw(server.port, path, json.dumps(body).encode())
        assert status == 200, answer
    assert engine.codec.threads and loop_thread not in engine.codec.threads


def test_the_trace_cache_drops_stale_answers(fake):
    """Defect 3: one cached answer per ?last= value was kept forever (39 MB each)."""
    import gc
    import tracemalloc

    engine, server = fake
    engine.trace_rows = 2000  # about 1 MB of JSON per answer
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for last in range(1000, 1030):
            assert (
                raw(
                    server.port,
                    b"GET /pdlab/trace?last=%d HTTP/1.1\r\nHost: x\r\n"
                    b"Connection: close\r\n\r\n" % last,
                )[0]
                == 200
            )
        time.sleep(1.0)  # every answer is stale now (a trace is reused for a quarter second)
        fresh = b"GET /pdlab/trace?last=5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        raw(server.port, fresh)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 4e6, f"{kept / 1e6:.0f} MB still held after 30 answers went stale"


# ---- attacker's pass: connections that never finish --------------------------------------------


def test_a_connection_that_sends_nothing_is_closed(fake):
    _engine, server = fake
    with server.connect() as s:
        assert closed_within(s, 30)


def dribbled_until_closed(s, limit_s: float = 30.0) -> bool:
    """Send one byte every 0.3 s until the server closes the connection (or `limit_s` passes)."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        try:
            s.sendall(b"X")
            s.settimeout(0.3)
            if s.recv(1) == b"":
                return True
        except TimeoutError:
            pass
        except (BrokenPipeError, ConnectionResetError):
            return True
    return False


def test_headers_sent_a_byte_at_a_time_are_cut_off(fake):
    """Slowloris: each byte resets no timer; the whole head must come within --header-timeout."""
    _engine, server = fake
    with server.connect() as s:
        s.sendall(b"GET /health HTTP/1.1\r\n")
        assert dribbled_until_closed(s)


def test_a_body_that_never_finishes_gets_408(fake):
    _engine, server = fake
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 1000\r\n\r\n{"
    )
    status, _headers, body = raw(server.port, head)
    assert status == 408 and json.loads(body)["error"]["code"] == 408


def test_an_idle_keep_alive_connection_is_closed(fake):
    _engine, server = fake
    with server.connect() as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        assert closed_within(s, 30)


def test_huge_headers_are_refused(fake):
    _engine, server = fake
    status, _headers, _body = raw(
        server.port, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"
    )
    assert status in (400, 431)


def test_bad_query_parameters_get_a_400_error_object_not_422(fake):
    _engine, server = fake
    for query in (b"last=abc", b"last=" + b"9" * 5000, b"format=xml"):
        status, _h, body = raw(
            server.port,
            b"GET /pdlab/trace?%s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % query,
        )
        assert status == 400 and json.loads(body)["error"]["code"] == 400, (query[:20], body)


def test_the_trace_cache_stays_within_its_bytes_and_renders_once_per_key():
    from types import SimpleNamespace

    from live.serve.transport import TraceCache

    renders = []

    def render(n: int):
        renders.append(n)
        time.sleep(0.05)  # long enough for the other callers to find the render under way
        return SimpleNamespace(body=b"x" * n)

    async def main() -> TraceCache:
        cache = TraceCache(max_bytes=1000, ttl_s=60)
        same = await asyncio.gather(*(cache.get(("a",), lambda: render(300)) for _ in range(20)))
        assert len({id(r) for r in same}) == 1  # twenty callers, one answer
        for key in range(10):  # 300 bytes each: at most three fit
            await cache.get((key,), lambda: render(300))
        assert await cache.get(("big",), lambda: render(5000))  # answered, never kept
        return cache

    cache = asyncio.run(main())
    assert renders.count(300) == 11 and cache.nbytes <= 1000 and len(cache.entries) == 3


def test_a_body_nobody_reads_cannot_hold_the_connection(fake):
    """/health ignores bodies: one dribbled a byte at a time reset uvicorn's keep-alive timer."""
    _engine, server = fake
    with server.connect() as s:
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
        assert s.recv(4096).startswith(b"HTTP/1.1 200")
        assert dribbled_until_closed(s)
