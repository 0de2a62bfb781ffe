"""`python -m live replay` against a server that misbehaves: streams cut short, malformed chunks.

The server is a few lines of `http.server` in this process: it answers /v1/models, nothing else
of PD Lab's (no /tokenize, no /pdlab/clock, as a bare OpenAI-compatible server), and streams each
completion in the way its `max_tokens` asks for (see `BEHAVIOUR`). HTTP/1.0: each answer ends
when the server closes the connection, so "a stream cut short" is exactly that.
"""

import contextlib
import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("openai")

ROOT = Path(__file__).resolve().parents[1]


def _chunk(text: str, n: int, finish: str | None) -> bytes:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
    usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": 8 + n}
    body = {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 0,
        "model": "fake",
        "choices": [choice],
        "usage": usage,
    }
    return b"data: " + json.dumps(body).encode() + b"\n\n"


def _tokens(n: int, finish: bool = True) -> bytes:
    return b"".join(
        _chunk("a", i + 1, "length" if finish and i == n - 1 else None) for i in range(n)
    )


BEHAVIOUR = {  # max_tokens -> the SSE body the server sends
    3: _tokens(3) + b"data: [DONE]\n\n",  # as it should be
    4: b"",  # 200, then nothing: no token, no [DONE]
    5: _tokens(2, finish=False),  # two tokens, then the connection closes: no [DONE]
    6: _tokens(1, finish=False) + b"data: {this is not json\n\n" + b"data: [DONE]\n\n",
    7: b"data: [DONE]\n\n",  # [DONE] and not a single token of the 7 asked
    8: _chunk("a", 10**12, "length") + b"data: [DONE]\n\n",  # claims 10**12 tokens of 8
    9: _chunk("", 0, None) * 5000 + b"data: [DONE]\n\n",  # chunks without tokens (as forever)
    10: _tokens(1, finish=False) + b"data: " + b"x" * 3_000_000,  # one line with no end
}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            cards = [{"id": "fake", "object": "model", "owned_by": "x", "max_model_len": 4096}]
            self._send(200, json.dumps({"object": "list", "data": cards}).encode())
        else:
            self._send(404, b'{"detail": "Not Found"}')

    def do_POST(self) -> None:
        data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if self.path != "/v1/completions":
            self._send(404, b'{"detail": "Not Found"}')
            return
        self._send(200, BEHAVIOUR[data["max_tokens"]], "text/event-stream")


@contextlib.contextmanager
def serving(handler):
    """A loopback HTTP server with `handler` in a thread; yields its URL, shuts it down after."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def url():
    with serving(Handler) as address:
        yield address


def replay(url: str, tmp_path: Path, outputs: list[int], *args: str):
    workload = tmp_path / "w.csv"
    rows = [f"{0.05 * i},8,{n}" for i, n in enumerate(outputs)]
    workload.write_text("arrival_s,prompt_tokens,output_tokens\n" + "\n".join(rows) + "\n")
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "live",
            "replay",
            "--endpoint",
            url,
            "--workload",
            str(workload),
            "--out",
            str(out),
            "--read-timeout",
            "30",
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done, out


def test_a_stream_that_ends_without_done_or_tokens_has_failed(url, tmp_path):
    """Defect 6: a stream with no tokens and no [DONE] counted as finished; the run exited 0."""
    done, out = replay(url, tmp_path, [3, 4, 5, 7])
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]  # one line, after the progress
    assert last.startswith("error: 3 of 4 requests failed; request 1:"), done.stderr
    table = pd.read_csv(out / "requests.csv").set_index("request_id")
    assert table["status"].tolist() == ["finished", "failed", "failed", "failed"]
    assert "without [DONE]" in table.loc[1, "reject_reason"]
    assert "after 2 of 5 tokens" in table.loc[2, "reject_reason"]
    assert "no tokens" in table.loc[3, "reject_reason"]
    assert table["output_tokens_received"].tolist() == [3, 0, 2, 0]


def test_a_malformed_chunk_fails_only_its_request_and_the_run_is_written(url, tmp_path):
    """Defect 7: one malformed chunk ended the run with an anonymous JSON error, nothing written."""
    done, out = replay(url, tmp_path, [3, 6, 3])
    assert done.returncode == 2, done.stderr
    assert "1 of 3 requests failed; request 1:" in done.stderr, done.stderr
    assert f"{url}/v1/completions" in done.stderr and "malformed" in done.stderr, done.stderr
    table = pd.read_csv(out / "requests.csv")
    assert table["status"].tolist() == ["finished", "failed", "finished"]
    assert table["output_tokens_received"].tolist() == [3, 1, 3]
    assert (out / "summary.json").exists() and (out / "trace.json").exists()


def test_a_server_claiming_more_tokens_or_sending_endless_chunks_fails_that_request(url, tmp_path):
    """A lying usage count once meant a list of 10**12 token times (MemoryError, nothing kept)."""
    done, out = replay(url, tmp_path, [3, 8, 9, 10])
    assert done.returncode == 2, done.stderr
    assert "3 of 4 requests failed; request 1:" in done.stderr, done.stderr
    assert "more than the 8 asked" in done.stderr, done.stderr
    table = pd.read_csv(out / "requests.csv").set_index("request_id")
    assert table["status"].tolist() == ["finished", "failed", "failed", "failed"]
    assert "an SSE line over 1048576 bytes" in table.loc[3, "reject_reason"]
    # A server that streams chunks without tokens would hold the replay forever (each chunk
    # resets the read timeout): it is cut off after 4 chunks per token asked (+ 64).
    assert "more than 100 chunks for 9 tokens (0 received)" in table.loc[2, "reject_reason"]


class LiarHandler(Handler):
    """Answers 200 to everything, as a catch-all proxy or web app may: HTML, or JSON of the
    wrong shape, where live serve's /pdlab/clock, /tokenize and /detokenize would be."""

    models = {"object": "list", "data": [{"id": "fake"}]}

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(200, json.dumps(self.models).encode())
        else:
            self._send(200, b"<html>hello</html>", "text/html")

    def do_POST(self) -> None:
        if self.path == "/v1/completions":
            super().do_POST()
        else:
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send(200, b"[1, 2, 3]" if self.path == "/tokenize" else b'"text"')


@pytest.fixture
def liar():
    with serving(LiarHandler) as address:
        yield address
    LiarHandler.models = {"object": "list", "data": [{"id": "fake"}]}


@pytest.mark.parametrize("mode", ["auto", "text"])
def test_answers_of_the_wrong_shape_are_taken_as_no_such_endpoint(liar, tmp_path, mode):
    done, out = replay(liar, tmp_path, [3, 3], "--prompt-mode", mode)
    if mode == "text":  # text prompts need a /tokenize: one line saying so
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        assert "/tokenize does not answer" in done.stderr.strip().splitlines()[-1]
        return
    assert done.returncode == 0, done.stderr
    assert pd.read_csv(out / "requests.csv")["status"].tolist() == ["finished", "finished"]


def test_a_model_list_of_the_wrong_shape_is_one_line_and_exit_2(liar, tmp_path):
    LiarHandler.models = {"object": "list", "data": 5}
    done, _out = replay(liar, tmp_path, [3])
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("error: "), done.stderr
    assert "model list" in done.stderr and "Traceback" not in done.stderr, done.stderr
