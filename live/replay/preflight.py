"""Before a replay's clock starts: where to send, which model, and the server's clock.

Notable features
- The endpoint as a user may type it (with or without http://, /v1, a trailing slash) becomes
  http://host:port (root_url).
- /v1/models names the model to ask for (the server's first, unless one is named) and its
  max_model_len. A dead or mute endpoint, something that is not an OpenAI-compatible server, or a
  model it does not serve is a ReplayError: one line saying what to change.
- Clock offset: against `live serve`, `/pdlab/clock` gives the server's clock. The offset is
  estimated as in Cristian's algorithm (server time minus the midpoint of the round trip, best
  of 7), so the server's trace and the client's times can be put on one axis
  (`meta.server_clock_offset_s`). Other servers have no such endpoint: no offset, no error.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from live.replay.replayer import ReplayOptions


class ReplayError(RuntimeError):
    """A replay that cannot start or did not finish cleanly: one line saying what to change."""


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


async def preflight(http, root: str, options: ReplayOptions) -> tuple[str, int | None]:
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
    cards = (json_object(response) or {}).get("data")
    if not isinstance(cards, list):
        raise ReplayError(f"{url} did not answer a model list")
    cards = [c for c in cards if isinstance(c, dict) and isinstance(c.get("id"), str)]
    names = [c["id"] for c in cards]
    if options.model and options.model not in names:
        raise ReplayError(
            f"the server has no model {options.model!r}; it serves "
            f"{', '.join(map(str, names)) or 'nothing'}"
        )
    if not names:
        raise ReplayError(f"{url} lists no model")
    model = options.model or names[0]
    card = next(c for c in cards if c["id"] == model)
    max_len = card.get("max_model_len")
    return model, max_len if isinstance(max_len, int) and not isinstance(max_len, bool) else None


def json_object(response) -> dict | None:
    """The answer's JSON object, or None for anything else (HTML from a catch-all route, a list,
    a string): a server that is not what it seems is treated as one without that endpoint."""
    try:
        body = response.json()
    except ValueError:  # not JSON, or not UTF-8
        return None
    return body if isinstance(body, dict) else None


async def clock_offset(http, root: str) -> dict:
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
        server = (json_object(response) or {}).get("now_s") if response.status_code == 200 else None
        if isinstance(server, bool) or not isinstance(server, int | float):
            return {}
        if not math.isfinite(server):
            return {}
        if best is None or after - before < best[1]:
            best = (server - (before + after) / 2, after - before)
    return {"server_clock_offset_s": best[0], "server_clock_rtt_s": best[1]}


__all__ = ["ReplayError", "root_url"]
