"""What one `live serve` accepts, and how it refuses: the limits and the refusal, no engine.

The HTTP side (schema, transport, stream, app) raises `LimitError` and the options read
`ServeLimits`' defaults, so they live apart from the engine thread (live.serve.engine):
parsing and refusing a request imports neither the simulator nor pandas (an import-linter
contract in pyproject.toml).

Notable features
- `LimitError(status, message, kind, param)`: the server's refusal, answered as an OpenAI-style
  error object with that HTTP status (400 bad input, 429 full, 500 the engine failed).
- `ServeLimits`: the bounds that keep a hosted server's work finite (requests at once, tokens
  per request and in flight, body bytes, trace length), validated on construction.
- `Admission`: those bounds applied to each request, from any thread: `check` refuses what can
  never be served (400), `take` what does not fit now (429), `give_back` returns a closed
  request's share. vLLM checks a prompt's length the same way before it queues it
  (vllm/entrypoints/openai/serving_engine.py, `_validate_input`: "This model's maximum
  context length is ...").
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass


class LimitError(Exception):
    """A request the server refuses: HTTP status, OpenAI error type, one-line message."""

    def __init__(
        self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param


@dataclass(frozen=True)
class ServeLimits:
    """What one server accepts (validated on construction)."""

    max_num_requests: int = 8  # requests in the engine at once (waiting + running): KV slots
    max_model_len: int = 1024  # prompt + output tokens of one request
    max_tokens_in_flight: int = 0  # prompt + max_tokens summed over the engine; 0 = slots x len
    max_body_bytes: int = 1 << 20  # HTTP request body
    default_max_tokens: int = 256  # chat requests that give no max_tokens (capped by the context)
    trace_requests: int = 5000  # requests kept in the downloadable trace

    def __post_init__(self) -> None:
        for name in (
            "max_num_requests",
            "max_model_len",
            "max_body_bytes",
            "default_max_tokens",
            "trace_requests",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_tokens_in_flight < 0:
            raise ValueError("max_tokens_in_flight must be >= 0 (0 = slots x max_model_len)")

    @property
    def tokens_in_flight(self) -> int:
        return self.max_tokens_in_flight or self.max_num_requests * self.max_model_len


class Admission:
    """The limits applied to requests as they come and go (thread-safe counters).

    `active`: requests submitted and not yet closed; `tokens`: their prompt + max_tokens, summed.
    """

    def __init__(self, limits: ServeLimits, vocab: int) -> None:
        self.limits, self.vocab = limits, vocab
        self.active = 0
        self.tokens = 0
        self._lock = threading.Lock()

    def check(self, prompt_ids: Sequence[int], max_tokens: int, min_tokens: int = 0) -> None:
        """Raise LimitError(400) if this request can never be served here."""
        n, lim = len(prompt_ids), self.limits
        if n < 1:
            raise LimitError(400, "the prompt is empty: send at least one token", param="prompt")
        if max_tokens < 1:
            raise LimitError(400, f"max_tokens must be >= 1, got {max_tokens}", param="max_tokens")
        if not 0 <= min_tokens <= max_tokens:
            raise LimitError(
                400,
                f"min_tokens must be between 0 and max_tokens ({max_tokens}), got {min_tokens}",
                param="min_tokens",
            )
        if n + max_tokens > lim.max_model_len:
            raise LimitError(
                400,
                f"This model's maximum context length is {lim.max_model_len} "
                f"tokens. However, you requested {n + max_tokens} tokens ({n} in "
                f"the prompt, {max_tokens} for the completion). Please reduce the "
                "prompt or max_tokens.",
                param="max_tokens",
            )
        bad = next((i for i in prompt_ids if not 0 <= i < self.vocab), None)
        if bad is not None:
            raise LimitError(
                400,
                f"token id {bad} is outside the vocabulary (0..{self.vocab - 1})",
                param="prompt",
            )

    def take(self, budget: int) -> None:
        """Count a request of `budget` prompt + output tokens in, or raise LimitError(429)."""
        with self._lock:
            if self.active >= self.limits.max_num_requests:
                raise LimitError(
                    429,
                    f"the server already has {self.active} requests (at most "
                    f"{self.limits.max_num_requests}); retry later",
                    "RateLimitError",
                )
            if self.tokens + budget > self.limits.tokens_in_flight:
                raise LimitError(
                    429,
                    f"{self.tokens} prompt + output tokens are in flight; "
                    f"{budget} more would pass the limit of "
                    f"{self.limits.tokens_in_flight}; retry later",
                    "RateLimitError",
                )
            self.active += 1
            self.tokens += budget

    def give_back(self, budget: int) -> None:
        """A request counted in by `take` is closed (finished, rejected or aborted)."""
        with self._lock:
            self.active -= 1
            self.tokens -= budget
