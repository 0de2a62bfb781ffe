"""Prompts of exactly `prompt_tokens` tokens, made before a replay's clock starts.

Notable features
- Token ids. The prompt is `prompt_tokens` token ids (vLLM and SGLang take ids as a
  completions prompt), cut from the server's own tokenization (`/tokenize`) of a text, so they
  are real tokens of its vocabulary; the first few ids spell the request's number, so no two
  prompts share a prefix the server could cache, unless the workload says they share one
  (prefix groups or Mooncake hash ids: those blocks get identical ids).
- A server without `/tokenize` (older SGLang) gets ids from SAFE_IDS instead, valid in any
  vocabulary: exact in length, not words.
- `--prompt-mode text` sends text instead, adjusted with `/tokenize` until it is exactly that
  many tokens.
- `--api chat` sends a user message fitted with vLLM's `/tokenize` of `messages`, so that the
  prompt the chat template makes of it (the template adds ~20 tokens) is exactly
  `prompt_tokens`.
- Where a prompt cannot be exact, a note on stderr says so; the method used goes into the
  summary (`prompt_method`).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from live.replay.preflight import ReplayError, json_object
from sim.core.request import RequestSpec

if TYPE_CHECKING:
    from live.replay.replayer import ReplayOptions

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
    tokens = (json_object(response) or {}).get("tokens")
    if not isinstance(tokens, list) or not all(type(i) is int for i in tokens):
        return None
    return tokens


async def _detokenize(http, root: str, model: str, ids: list[int]) -> str | None:
    try:
        response = await http.post(f"{root}/detokenize", json={"model": model, "tokens": ids})
    except Exception:  # no /detokenize
        return None
    if response.status_code != 200:
        return None
    body = json_object(response) or {}
    text = body.get("prompt", body.get("text"))  # vLLM says prompt, others text
    return text if isinstance(text, str) else None


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
    answer = json_object(response) or {}
    tokens, count = answer.get("tokens"), answer.get("count")
    if isinstance(tokens, list):
        return len(tokens)
    return count if type(count) is int else None


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


async def build_prompts(
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


__all__ = ["BASE_TEXT", "SAFE_IDS", "prompt_ids"]
