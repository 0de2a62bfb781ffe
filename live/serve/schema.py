"""The request bodies `live serve` accepts, as pydantic models (vLLM's protocol.py does the same).

Why pydantic rather than `json.loads` and checks by hand: every field gets its type checked
before any code uses it, so a wrong type is a 400 naming the field, never a 500 from deep
inside (the red team's triggers: `model` as a list, `stream_options` as a string, a numeric text
part). The body is parsed by pydantic-core's own JSON parser (`model_validate_json`), which
also refuses, as invalid JSON, what Python's `json` lets through or crashes on:
- a lone UTF-16 surrogate ("\\ud800"): valid JSON for Python, but no tokenizer can encode it;
- integers over 4,300 digits (Python raises ValueError converting them);
- nesting deeper than 200 levels (Python's json recursed until RecursionError at ~100,000).

Types are strict (StrictInt: `true` or `"5"` is not a number of tokens), as this server's
hand-written checks were; unknown fields are allowed and ignored, as vLLM ignores them.
Fields a greedy, one-answer server cannot honour (`n` > 1, `best_of` > 1, `echo`, `logprobs`,
stop strings, non-text content) are refused by `unsupported` rather than silently ignored.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, ValidationError

from live.serve.limits import LimitError

Count = Annotated[StrictInt, Field(ge=1)]  # a number of tokens: whole, at least 1
Body = TypeVar("Body", bound=BaseModel)


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")  # vLLM ignores (and logs) fields it does not know

    model: StrictStr | None = None


class StreamOptions(BaseModel):
    include_usage: StrictBool | None = False
    continuous_usage_stats: StrictBool | None = False  # vLLM's: usage in every chunk


class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")

    type: StrictStr
    text: StrictStr | None = None


class Message(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: StrictStr
    content: StrictStr | list[ContentPart]


class _Generate(_Request):
    """What both generating endpoints share (OpenAI's fields, vLLM's extensions)."""

    max_tokens: Count | None = None
    max_completion_tokens: Count | None = None
    min_tokens: Annotated[StrictInt, Field(ge=0)] = 0
    stream: StrictBool | None = False
    stream_options: StreamOptions | None = None
    ignore_eos: StrictBool | None = False
    priority: StrictInt = 0
    temperature: float | None = None  # decoding is greedy whatever it says
    top_p: float | None = None
    seed: StrictInt | None = None
    n: StrictInt | None = 1
    best_of: StrictInt | None = None
    echo: StrictBool | None = False
    logprobs: StrictBool | StrictInt | None = None  # chat: a bool, completions: how many
    top_logprobs: StrictInt | None = None
    stop: StrictStr | list[StrictStr] | None = None
    stop_token_ids: list[StrictInt] | None = None


class CompletionRequest(_Generate):
    prompt: StrictStr | list[StrictInt] | list[StrictStr] | list[list[StrictInt]]


class ChatRequest(_Generate):
    messages: Annotated[list[Message], Field(min_length=1)]


class TokenizeRequest(_Request):
    prompt: StrictStr | None = None
    messages: Annotated[list[Message], Field(min_length=1)] | None = None
    add_generation_prompt: StrictBool = True
    add_special_tokens: StrictBool | None = None


class DetokenizeRequest(_Request):
    tokens: list[StrictInt]


def parse(kind: type[Body], body: bytes) -> Body:
    """The body as `kind`, or LimitError(400) naming the first field that is wrong."""
    try:
        return kind.model_validate_json(body or b"{}")
    except ValidationError as err:
        first = err.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        message = f"{where}: {first['msg']}" if where else first["msg"]
        more = err.error_count() - 1
        if more:
            message += f" (and {more} more)"
        param = str(first["loc"][0]) if first["loc"] else None
        raise LimitError(400, message[:500], param=param) from None


def unsupported(data: _Generate) -> None:
    """Refuse what a greedy, one-answer server cannot do, rather than silently ignore it."""
    if data.n not in (1, None):
        raise LimitError(400, "n must be 1 (one answer per request)", param="n")
    if data.best_of not in (1, None):
        raise LimitError(400, "best_of must be 1", param="best_of")
    if data.echo:
        raise LimitError(400, "echo is not supported", param="echo")
    if data.logprobs not in (None, False, 0) or data.top_logprobs:
        raise LimitError(400, "logprobs are not supported", param="logprobs")
    if data.stop or data.stop_token_ids:  # an empty list or "" asks for nothing
        raise LimitError(400, "stop strings are not supported (use max_tokens)", param="stop")


def prompt_of(data: CompletionRequest) -> str | list[int]:
    """A completion prompt: text or token ids, or a list holding exactly one of them."""
    prompt = data.prompt
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]  # a batch of one
    if isinstance(prompt, str) or all(isinstance(i, int) for i in prompt):
        return prompt
    raise LimitError(
        400, "send one prompt per request (a string or a list of token ids)", param="prompt"
    )


def messages_of(messages: list[Message]) -> list[dict]:
    """{"role", "content"} dicts for the chat template; content parts must be text."""
    out = []
    for m in messages:
        content = m.content
        if isinstance(content, list):  # [{"type": "text", "text": ...}, ...]
            if any(p.type != "text" or p.text is None for p in content):
                raise LimitError(400, "only text content parts are supported", param="messages")
            content = "".join(p.text for p in content)
        out.append({"role": m.role, "content": content})
    return out
