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
"""

from __future__ import annotations

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
