"""`python -m live replay`: send a workload to any OpenAI-compatible server and time every token.

    python -m live replay --endpoint http://127.0.0.1:8000 --workload trace.csv [--model NAME]
                          [--out DIR] [--json] [--max-concurrency 64] [--api completions|chat]
                          [--predict --gpu H100-SXM --sim-model Llama-3.1-8B --policy vllm ...]

It works against vLLM (`vllm serve`), SGLang (`python -m sglang.launch_server`) and this
project's `python -m live serve`; the README section "Real servers" has the command lines.

Notable features
- One asyncio task per request, on the official `openai` client (AsyncOpenAI, streaming). A
  dispatcher sleeps until each request's arrival time (`arrival_s` of the workload: our CSV, the
  Azure trace or Mooncake JSONL, via sim.trace_import.load_workload) and starts it;
  `--max-concurrency` caps open streams (a request over the cap waits, and its `arrival_s` in
  the table is when it was really sent).
- Exact lengths. The prompt is `prompt_tokens` token ids (vLLM and SGLang take ids as a
  completions prompt), cut from the server's own tokenization (`/tokenize`) of a text, so they
  are real tokens of its vocabulary; the first few ids spell the request's number, so no two
  prompts share a prefix the server could cache, unless the workload says they share one
  (prefix groups or Mooncake hash ids: those blocks get identical ids). A server without
  `/tokenize` (older SGLang) gets ids from SAFE_IDS instead, valid in any vocabulary: exact in
  length, not words. `--prompt-mode text`
  sends text instead, adjusted with `/tokenize` until it is exactly that many tokens. `--api chat`
  sends a user message fitted with vLLM's `/tokenize` of `messages`, so that the prompt the chat
  template makes of it (the template adds ~20 tokens) is exactly `prompt_tokens`. The output
  is `output_tokens` exactly: max_tokens = min_tokens = output_tokens and ignore_eos (vLLM's
  extensions, also SGLang's).
- Timing: `time.perf_counter()` when each chunk is parsed, `stream_options` asking for usage in
  every chunk (`continuous_usage_stats`), so a chunk carrying several tokens counts as several.
  Against `live serve`, `/pdlab/clock` gives the server's clock: the offset is estimated as in
  Cristian's algorithm (server time minus the midpoint of the round trip, best of 7), so the
  server's trace and the client's times can be put on one axis (`meta.server_clock_offset_s`).
- Bounded: connect and read timeouts (a read timeout is the longest wait for the next chunk),
  at most `--max-concurrency` open streams, and Ctrl-C cancels every stream and writes out what
  was measured so far (exit code 130).
- Errors (a dead or mute endpoint, a bad workload): one line on stderr, exit code 2. A run in
  which some requests failed is written out, then reported the same way.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import pandas as pd

from live.replay_trace import Measured, json_safe, tables
from sim.request import RequestSpec
from sim.trace import RunResult

# Text the prompts' token ids are cut from (any text of the server's language will do).
BASE_TEXT = (
    "An LLM server answers many people at once. For each request it first reads the whole "
    "prompt, which is called prefill, and then writes the answer one token at a time, which is "
    "called decode. Prefill keeps the arithmetic units busy, while decode mostly waits for "
    "memory. A scheduler decides, step by step, which requests run together and how many tokens "
    "each gets; when memory runs short it pauses someone. Long prompts, short questions, code, "
    "chat and documents arrive in bursts: 0123456789 the quick brown fox jumps over a lazy dog."
)
HASH_BLOCK = 512  # tokens per hash id in the Mooncake traces
ID_PATTERN = re.compile(r"(\d+)$")


class ReplayError(RuntimeError):
    """A replay that cannot start or did not finish cleanly: one line saying what to change."""


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


def root_url(endpoint: str) -> str:
    """http://host:port from what a user may type (with or without /v1, a trailing slash)."""
    text = endpoint.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ReplayError(
            f"endpoint must be an http(s) URL like http://127.0.0.1:8000, got {endpoint!r}"
        )
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


def _describe(err: BaseException, url: str, read_s: float) -> str:
    """One line for a transport error."""
    import httpx2

    if isinstance(err, httpx2.ConnectTimeout):
        return f"no connection to {url} within the connect timeout"
    if isinstance(err, httpx2.TimeoutException):
        return f"{url} sent nothing for {read_s:g} s (read timeout; raise --read-timeout?)"
    if isinstance(err, httpx2.ConnectError):
        return f"cannot connect to {url} ({err}); is the server running?"
    return f"{url}: {type(err).__name__}: {err}"


# ---- before the clock starts: model, prompts, clock offset ---------------------------------


async def _preflight(http, root: str, options: ReplayOptions) -> tuple[str, int | None]:
    """The model to ask for and the server's max_model_len (if it says), or ReplayError."""
    import httpx2

    url = f"{root}/v1/models"
    try:
        response = await http.get(url)
    except httpx2.HTTPError as err:
        raise ReplayError(_describe(err, root, options.read_timeout_s)) from None
    if response.status_code != 200:
        raise ReplayError(
            f"{url} answered HTTP {response.status_code}; is this an OpenAI-compatible server?"
        )
    try:
        cards = response.json()["data"]
    except (ValueError, KeyError, TypeError):
        raise ReplayError(f"{url} did not answer a model list") from None
    names = [c.get("id") for c in cards if isinstance(c, dict)]
    if options.model and options.model not in names:
        raise ReplayError(
            f"the server has no model {options.model!r}; it serves "
            f"{', '.join(map(str, names)) or 'nothing'}"
        )
    if not names:
        raise ReplayError(f"{url} lists no model")
    model = options.model or names[0]
    card = next(c for c in cards if c.get("id") == model)
    return model, card.get("max_model_len")


async def _tokenize(http, root: str, model: str, text: str) -> list[int] | None:
    """The server's token ids for a text, or None if it has no /tokenize."""
    try:
        response = await http.post(
            f"{root}/tokenize", json={"model": model, "prompt": text, "add_special_tokens": False}
        )
    except Exception:  # any failure means: no tokenizer endpoint
        return None
    if response.status_code != 200:
        return None
    tokens = response.json().get("tokens")
    return tokens if isinstance(tokens, list) else None


async def _detokenize(http, root: str, model: str, ids: list[int]) -> str | None:
    try:
        response = await http.post(f"{root}/detokenize", json={"model": model, "tokens": ids})
    except Exception:  # no /detokenize
        return None
    if response.status_code != 200:
        return None
    body = response.json()
    return body.get("prompt", body.get("text"))  # vLLM says prompt, others text


def _spell(number: int, alphabet: Sequence[int]) -> list[int]:
    """`number` written in base len(alphabet) with the alphabet's ids (at least one id)."""
    k, out = len(alphabet), []
    while True:
        number, digit = divmod(number, k)
        out.append(alphabet[digit])
        if not number:
            return out


def prompt_ids(spec: RequestSpec, base: list[int]) -> list[int]:
    """Exactly spec.prompt_tokens ids: unique to the request unless the workload shares a prefix.

    A Mooncake `hash_ids` block i gets ids that depend only on its hash (blocks of HASH_BLOCK
    tokens); a prefix group's first `prefix_tokens` ids depend only on the group; the rest starts
    with the request's number spelled in ids, so its prompt shares no block with any other.
    """
    alphabet = sorted(set(base))
    n = spec.prompt_tokens

    def stretch(seed: int, length: int) -> list[int]:
        head = _spell(seed, alphabet)
        start = (seed * 7919) % len(base)
        body = [base[(start + i) % len(base)] for i in range(max(0, length - len(head)))]
        return (head + body)[:length]

    ids: list[int] = []
    hashes = tuple(getattr(spec, "hash_ids", ()) or ())
    for i, h in enumerate(hashes):
        ids += stretch(1_000_003 + int(h), min(HASH_BLOCK, n - len(ids)))
        if len(ids) >= n or i == len(hashes) - 1:
            break
    group, shared = getattr(spec, "prefix_group", ""), getattr(spec, "prefix_tokens", 0)
    if not ids and group and shared:
        seed = 2_000_003 + sum(ord(c) * 31**i for i, c in enumerate(group)) % 1_000_000
        ids = stretch(seed, shared)
    return (ids + stretch(spec.request_id, n - len(ids)))[:n]


async def _exact_text(http, root: str, model: str, ids: list[int]) -> str:
    """A text the server tokenizes into exactly len(ids) tokens (or as close as 4 tries get)."""
    n, cut = len(ids), len(ids)
    text = await _detokenize(http, root, model, ids) or ""
    for _ in range(4):
        got = await _tokenize(http, root, model, text)
        if got is None or len(got) == n:
            break
        cut = max(1, cut - (len(got) - n))
        text = await _detokenize(http, root, model, (ids * 2)[:cut]) or text
    return text


async def _chat_count(http, root: str, model: str, content: str) -> int | None:
    """Tokens of the prompt a chat request with this one user message gets: vLLM's /tokenize
    with `messages` applies the chat template as its chat endpoint does. None if the server's
    /tokenize takes no messages (SGLang's takes a prompt only)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "add_generation_prompt": True,  # vLLM's default, and what a chat request gets
    }
    try:
        response = await http.post(f"{root}/tokenize", json=body)
    except Exception:  # any failure means: no chat tokenization
        return None
    if response.status_code != 200:
        return None
    answer = response.json()
    tokens, count = answer.get("tokens"), answer.get("count")
    if isinstance(tokens, list):
        return len(tokens)
    return count if isinstance(count, int) else None


async def _exact_chat_text(
    http, root: str, model: str, ids: list[int], n: int, template: int
) -> tuple[str, int]:
    """A user message whose templated prompt is n tokens: (its text, the tokens it makes).

    Starts from n - template ids of content and corrects by the measured difference: a BPE may
    merge the content's first or last token with the template's, so the sum is not always exact
    at once (a byte codec is). The closest of at most 6 tries wins.
    """
    cut, best = max(0, n - template), None
    for _ in range(6):
        text = (await _detokenize(http, root, model, (ids * 2)[:cut]) or "") if cut else ""
        got = await _chat_count(http, root, model, text)
        if got is None:
            break
        if best is None or abs(got - n) < abs(best[1] - n):
            best = (text, got)
        if got == n or (cut == 0 and got > n):
            break
        cut = max(0, cut + n - got)
    return best if best is not None else ("", -1)


async def _chat_prompts(http, root: str, model: str, requests, out: dict) -> str:
    """Turn out's token ids into user messages whose templated prompts are exactly N tokens;
    the method used (for the summary)."""
    template = await _chat_count(http, root, model, "")
    probe = await _chat_count(http, root, model, BASE_TEXT[:200])
    if template is None or probe is None or probe <= template:  # messages not understood
        print(
            "note: the server's /tokenize takes no chat messages; each chat prompt is "
            "prompt_tokens tokens of text plus the chat template (the table's "
            "prompt_tokens_server says how long)",
            file=sys.stderr,
        )
        await _text_prompts(http, root, model, out)
        return "chat: text measured with /tokenize, plus the template"
    short = sorted(r.prompt_tokens for r in requests if r.prompt_tokens < template)
    if short:
        print(
            f"note: the chat template alone is {template} tokens, more than {len(short)} "
            f"request(s) ask for (from {short[0]}); they get an empty message ({template} tokens)",
            file=sys.stderr,
        )
    semaphore = asyncio.Semaphore(8)
    sizes = {r.request_id: r.prompt_tokens for r in requests}

    async def fit(rid):
        async with semaphore:
            text, _n = await _exact_chat_text(http, root, model, out[rid], sizes[rid], template)
            out[rid] = text

    await asyncio.gather(*(fit(rid) for rid in out))
    return "chat: message fitted with /tokenize of messages"


async def _text_prompts(http, root: str, model: str, out: dict) -> None:
    """Turn out's token ids into texts the server tokenizes into as many tokens."""
    semaphore = asyncio.Semaphore(8)

    async def text_of(rid):
        async with semaphore:
            out[rid] = await _exact_text(http, root, model, out[rid])

    await asyncio.gather(*(text_of(rid) for rid in out))


# Token ids for a server that cannot tokenize: every served vocabulary has at least 256 ids
# (byte-level BPEs start with their 256 byte tokens, SentencePiece has its byte fallback at
# 3..258, this project's tiny model has exactly 256), and the lowest ids are where special
# tokens (BOS, EOS, padding, chat markers) usually sit. A prompt's content does not change a
# step's cost, only its length does, so any ids of the range time the same.
SAFE_IDS = range(32, 256)


async def _prompts(
    http, root: str, model: str, requests, options: ReplayOptions
) -> tuple[dict, str]:
    """(request id -> the prompt to send: token ids or text, the method used)."""
    base = await _tokenize(http, root, model, BASE_TEXT * 4)
    if not base:
        ids_allowed = options.api == "completions" and options.prompt_mode in ("auto", "ids")
        if ids_allowed:  # completions take token ids, vLLM's and SGLang's alike
            print(
                f"note: the server has no /tokenize; prompts are token ids "
                f"{SAFE_IDS.start}..{SAFE_IDS.stop - 1}, exactly prompt_tokens long",
                file=sys.stderr,
            )
            base = list(SAFE_IDS)
            method = f"ids {SAFE_IDS.start}-{SAFE_IDS.stop - 1} (no /tokenize)"
            return {r.request_id: prompt_ids(r, base) for r in requests}, method
        if options.prompt_mode != "auto":
            raise ReplayError(
                f"{root}/tokenize does not answer, so text prompts cannot be measured; use "
                "--prompt-mode auto (token ids, or approximate text for chat)"
            )
        print(
            "note: the server has no /tokenize; prompts are text of about the right length "
            "(the table's prompt_tokens_server says how long)",
            file=sys.stderr,
        )
        prompts = {r.request_id: " ".join(["a"] * r.prompt_tokens) for r in requests}
        return prompts, "approximate text (no /tokenize)"
    out = {r.request_id: prompt_ids(r, base) for r in requests}
    if options.api == "chat":
        return out, await _chat_prompts(http, root, model, requests, out)
    if options.prompt_mode == "text":
        await _text_prompts(http, root, model, out)
        return out, "text measured with /tokenize"
    return out, "ids from /tokenize"


async def _clock_offset(http, root: str) -> dict:
    """The server's clock minus perf_counter() (s), from /pdlab/clock (live serve only), else {}.

    Cristian's algorithm: the server read its clock somewhere inside our round trip, so
    offset = server time - midpoint, within +- half the round trip; the fastest of 7 wins.
    """
    best = None
    for _ in range(7):
        try:
            before = time.perf_counter()
            response = await http.get(f"{root}/pdlab/clock")
            after = time.perf_counter()
        except Exception:  # another server: no clock to align with
            return {}
        if response.status_code != 200:
            return {}
        server = response.json()["now_s"]
        if best is None or after - before < best[1]:
            best = (server - (before + after) / 2, after - before)
    return {"server_clock_offset_s": best[0], "server_clock_rtt_s": best[1]}


# ---- the replay --------------------------------------------------------------------------


async def _warm_streaming(api: str) -> None:
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
    try:
        if options.api == "chat":
            stream = await client.chat.completions.create(
                messages=[{"role": "user", "content": prompt}], **common
            )
        else:
            stream = await client.completions.create(prompt=prompt, **common)
        async for chunk in stream:
            t = time.perf_counter() - t0
            usage = getattr(chunk, "usage", None)
            if usage is not None and usage.prompt_tokens is not None:
                m.prompt_tokens_server = usage.prompt_tokens
                details = getattr(usage, "prompt_tokens_details", None)
                if details is not None and details.cached_tokens is not None:
                    m.cached_tokens = details.cached_tokens  # vLLM, with prompt details on
            if usage is not None and usage.completion_tokens is not None:
                new = usage.completion_tokens - seen
            elif chunk.choices:
                c = chunk.choices[0]
                text = getattr(c.delta, "content", None) if options.api == "chat" else c.text
                new = 1 if text or (options.api != "chat" and c.finish_reason is None) else 0
                # (a fallback: vLLM, SGLang and live serve all report usage in every chunk)
            else:
                new = 0
            if new > 0:
                m.token_times += [t] * new
                seen += new
            if chunk.choices:
                c = chunk.choices[0]
                m.text += (
                    getattr(c.delta, "content", None) if options.api == "chat" else c.text
                ) or ""
            if chunk.id and math.isnan(m.server_request_id):
                found = ID_PATTERN.search(chunk.id)
                if found and len(found.group(1)) < 12:
                    m.server_request_id = int(found.group(1))
        m.status = "finished"
    except asyncio.CancelledError:
        m.status, m.error = "cancelled", "cancelled (Ctrl-C)"
        raise
    except openai.APIStatusError as err:
        m.status = "rejected" if 400 <= err.status_code < 500 else "failed"
        m.error = f"HTTP {err.status_code}: {_message(err)}"
    except openai.APITimeoutError:
        m.status, m.error = "failed", f"read timeout: nothing for {options.read_timeout_s:g} s"
    except openai.APIConnectionError as err:
        m.status, m.error = "failed", f"connection error: {err.__cause__ or err}"
    except openai.OpenAIError as err:
        m.status, m.error = "failed", f"{type(err).__name__}: {err}"
    finally:
        m.done_s = time.perf_counter() - t0


def _message(err) -> str:
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"]).splitlines()[0]
    return str(err).splitlines()[0]


async def replay_async(
    requests: Sequence[RequestSpec],
    options: ReplayOptions,
    progress: Callable[[int, int], None] | None = None,
) -> ReplayResult:
    """Replay `requests` against options.endpoint; the measured tables (see live/replay_trace)."""
    import httpx2
    import openai

    if not requests:
        raise ReplayError("the workload has no requests")
    root = root_url(options.endpoint)
    timeout = httpx2.Timeout(options.read_timeout_s, connect=options.connect_timeout_s)
    key = options.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx2.AsyncClient(timeout=timeout, headers=headers) as http:
        model, max_len = await _preflight(http, root, options)
        prompts, method = await _prompts(http, root, model, requests, options)
        limits = httpx2.Limits(
            max_connections=options.max_concurrency + 4,
            max_keepalive_connections=options.max_concurrency,
        )
        async with httpx2.AsyncClient(timeout=timeout, limits=limits) as stream_http:
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
            await _warm_streaming(options.api)
            offset = await _clock_offset(http, root)  # vs perf_counter(), made relative below
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


# ---- summary and prediction ----------------------------------------------------------------


def summary_of(result: ReplayResult) -> dict:
    """sim.metrics.summarize of the measured run, plus what only a replay knows."""
    from sim.metrics import percentiles, summarize

    run = result.run
    req = run.requests
    out = summarize(run)
    duration = out.get("duration_s") or math.nan
    late = (req["arrival_s"] - req["scheduled_s"]).dropna()
    out.update(
        {
            "failed": int(req["status"].isin(["failed", "cancelled"]).sum()),
            "exact_output": int((req["output_tokens_received"] == req["output_tokens"]).sum()),
            # usage.prompt_tokens == prompt_tokens (0 from a server that reports no usage)
            "exact_prompt": int((req["prompt_tokens_server"] == req["prompt_tokens"]).sum()),
            "goodput_req_per_s": (out.get("slo_met", 0) / duration) if duration else math.nan,
            "median_itl_s": run.meta.get("median_itl_s", math.nan),
            "stall_threshold_s": run.meta.get("stall_threshold_s", math.nan),
            "send_late_p50_s": percentiles(late)["p50"],
            "send_late_p99_s": percentiles(late)["p99"],
            "send_late_max_s": float(late.max()) if len(late) else math.nan,
            "interrupted": int(result.interrupted),
        }
    )
    for key in ("prompt_method", "server_clock_offset_s", "server_clock_rtt_s"):
        if key in run.meta:
            out[key] = run.meta[key]
    return out


def predict(requests: Sequence[RequestSpec], config) -> RunResult:
    """The simulator's run of the same workload (arrivals as scheduled)."""
    from sim.cluster import simulate

    return simulate(list(requests), config)


def errors(measured: RunResult, predicted: RunResult) -> pd.DataFrame:
    """Per request: TTFT, TPOT and E2E measured vs predicted (s), and the errors (s and %)."""
    a = measured.requests.set_index("request_id")
    b = predicted.requests.set_index("request_id")
    out = pd.DataFrame(index=a.index)
    for name in ("ttft", "tpot", "e2e"):
        out[f"{name}_measured_s"] = a[f"{name}_s"]
        out[f"{name}_predicted_s"] = b[f"{name}_s"].reindex(a.index)
        diff = out[f"{name}_predicted_s"] - out[f"{name}_measured_s"]
        out[f"{name}_err_s"] = diff
        out[f"{name}_err_pct"] = diff.abs() / out[f"{name}_measured_s"] * 100
    return out


# ---- the command ---------------------------------------------------------------------------


def add_arguments(p) -> None:
    """The replay subcommand's options."""
    d = ReplayOptions("")
    p.add_argument("--endpoint", required=True, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument(
        "--workload",
        required=True,
        help="a CSV (arrival_s,prompt_tokens,output_tokens[,priority] or the Azure "
        "trace's TIMESTAMP,ContextTokens,GeneratedTokens), or Mooncake JSONL",
    )
    p.add_argument("--model", help="the model name to ask for (default: the server's first)")
    p.add_argument("--api", default=d.api, help="completions (token ids) or chat")
    p.add_argument("--prompt-mode", default=d.prompt_mode, help="auto, ids or text")
    p.add_argument("--max-concurrency", type=int, default=d.max_concurrency)
    p.add_argument("--connect-timeout", type=float, default=d.connect_timeout_s, help="s")
    p.add_argument(
        "--read-timeout",
        type=float,
        default=d.read_timeout_s,
        help="longest wait for the next chunk, s",
    )
    p.add_argument(
        "--stall-factor",
        type=float,
        default=d.stall_factor,
        help="a gap over this many median inter-token gaps is a stall",
    )
    p.add_argument("--ttft-slo", type=float, help="s (default: the simulator's)")
    p.add_argument("--tpot-slo", type=float, help="s (default: the simulator's)")
    p.add_argument("--limit", type=int, help="replay only the first N requests")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help="write requests/segments/steps CSV, summary, trace here")
    p.add_argument(
        "--predict",
        action="store_true",
        help="also simulate the workload and compare, request by request",
    )
    p.add_argument("--gpu", help="--predict: a GPU (python -m sim list)")
    p.add_argument("--sim-model", help="--predict: the simulator's model")
    p.add_argument("--policy", help="--predict: the policy (default: the simulator's)")
    p.add_argument("--topology", help="--predict: the topology")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="--predict: a knob")


def load_workload(path: str) -> list[RequestSpec]:
    """Our CSV or the Azure trace; Mooncake JSONL where sim can read it (sim.trace_import)."""
    import sim.trace_import as ti
    from sim.cli import CliError

    if hasattr(ti, "load_workload"):  # sim picks the reader by extension (.jsonl = Mooncake)
        return ti.load_workload(path)
    if path.lower().endswith((".jsonl", ".json")):
        raise CliError("this version of sim cannot read Mooncake JSONL; convert it to CSV "
                       "(arrival_s,prompt_tokens,output_tokens)")  # fmt: skip
    return ti.load_csv(path)


def _sim_config(args):
    from sim.cli import _config
    from sim.config import SimConfig, with_overrides

    knobs = type(
        "Args",
        (),
        {
            "policy": args.policy,
            "topology": args.topology,
            "gpu": args.gpu,
            "model": args.sim_model,
            "set": args.set,
        },
    )()
    config = _config(knobs, SimConfig())
    if args.ttft_slo or args.tpot_slo:
        config = with_overrides(
            config,
            {k: v for k, v in (("ttft_slo_s", args.ttft_slo), ("tpot_slo_s", args.tpot_slo)) if v},
        )
    return config


VIEW = [
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "output_tokens_received",
    "ttft_s",
    "tpot_s",
    "max_itl_s",
    "status",
]


def cmd_replay(args) -> int:
    """Run a replay from parsed arguments; the exit code (0, 2 or 130)."""
    from pathlib import Path

    from sim.cli import CliError
    from sim.export import write_outputs

    requests = load_workload(args.workload)
    if args.limit is not None:
        if args.limit < 1:
            raise CliError("--limit must be >= 1")
        requests = requests[: args.limit]
    config = _sim_config(args)  # validates --predict's knobs before any traffic
    options = ReplayOptions(
        args.endpoint,
        args.model,
        args.api,
        args.prompt_mode,
        args.max_concurrency,
        args.connect_timeout,
        args.read_timeout,
        args.stall_factor,
        config.slo.ttft_slo_s,
        config.slo.tpot_slo_s,
    )

    def progress(done: int, total: int) -> None:
        if not args.json:
            print(f"\r  {done}/{total} requests done", end="", file=sys.stderr, flush=True)

    result = replay(requests, options, progress)
    if not args.json:
        print(file=sys.stderr)
    summary = summary_of(result)
    prediction = table = None
    if args.predict:
        prediction = predict(requests, config)
        table = errors(result.run, prediction)
    if args.out:
        write_outputs(result.run, args.out, summary)
        if prediction is not None:
            write_outputs(prediction, Path(args.out) / "predicted")
            table.to_csv(Path(args.out) / "errors.csv")
    if args.json:
        document = {
            "summary": json_safe(summary),
            "requests": json.loads(result.run.requests.to_json(orient="records")),
        }
        if prediction is not None:
            from sim.metrics import summarize

            document["predicted"] = {
                "summary": json_safe(summarize(prediction)),
                "errors": json.loads(table.reset_index().to_json(orient="records")),
            }
        print(json.dumps(document, allow_nan=False))
    else:
        _report(result, summary, table, args)
    if result.interrupted:
        kept = int((result.run.requests["status"] == "finished").sum())
        where = f"; wrote {args.out}" if args.out else ""
        print(f"interrupted: {kept} of {len(requests)} requests measured{where}", file=sys.stderr)
        return 130
    if result.failed:
        first = result.failed[0]
        raise CliError(
            f"{len(result.failed)} of {len(requests)} requests failed; request "
            f"{first.spec.request_id}: {first.error}"
        )
    return 0


def _report(result: ReplayResult, summary: dict, table, args) -> None:
    from sim.cli import _print_table

    run = result.run
    print(
        f"{run.meta['endpoint']} ({run.meta['model']}): {summary['finished']} of "
        f"{summary['num_requests']} requests finished, {summary['exact_output']} with exactly "
        f"the tokens asked, {summary['exact_prompt']} with prompts of exactly prompt_tokens "
        f"({summary['prompt_method']})"
    )
    for key in (
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p90_s",
        "tpot_p99_s",
        "itl_p50_s",
        "itl_p90_s",
        "itl_p99_s",
        "max_itl_s",
        "output_tokens_per_s",
        "slo_attainment",
        "goodput_req_per_s",
        "send_late_p99_s",
        "server_clock_offset_s",
    ):
        if key in summary:
            value = summary[key]
            print(
                f"  {key:22s} {value:.4g}" if isinstance(value, float) else f"  {key:22s} {value}"
            )
    print()
    _print_table(run.requests[VIEW].set_index("request_id"))
    if table is not None:
        print("\nmeasured vs predicted (s, %):")
        _print_table(
            table[
                [
                    "ttft_measured_s",
                    "ttft_predicted_s",
                    "ttft_err_pct",
                    "tpot_measured_s",
                    "tpot_predicted_s",
                    "tpot_err_pct",
                ]
            ]
        )
    if args.out:
        print(
            f"\nwrote requests.csv, segments.csv, steps.csv, summary.json, trace.json to {args.out}"
        )


__all__ = [
    "ReplayError",
    "ReplayOptions",
    "ReplayResult",
    "cmd_replay",
    "errors",
    "predict",
    "prompt_ids",
    "replay",
    "replay_async",
    "root_url",
    "summary_of",
]
