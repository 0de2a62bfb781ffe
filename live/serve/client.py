"""What the app's Serve page needs to talk to a server: a guarded URL, the trace, a chat stream.

Notable features
- A URL typed by a visitor is fetched only as the operator allows, by the environment variable
  PDLAB_ALLOW_ENDPOINTS: `loopback` (the default: only this machine, e.g. a `live serve` started
  beside the app), `any` (every host except link-local and unspecified addresses, such as cloud
  metadata services), or `off`. Anything else counts as `off`: a typo fails closed.
- The host name is resolved and EVERY address it resolves to is checked before any request. For
  http the request then goes to the checked address itself (the URL is rewritten to the IP, the
  Host header keeps the name), so a second DNS answer cannot send it elsewhere; https keeps the
  name (TLS needs it), which leaves that gap to the operator who chose `any`.
- Redirects are refused (a redirect could point anywhere), bodies are read up to a cap, and every
  call has a timeout.
- Only the standard library (urllib): watching a server and chatting need no extra package; the
  replay (live/replay/replayer.py) needs the live requirements.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import numpy as np
import pandas as pd

from sim.core.trace import RunResult

ALLOW_ENV = "PDLAB_ALLOW_ENDPOINTS"
MODES = ("off", "loopback", "any")
MAX_BODY_BYTES = 32 << 20  # a trace of thousands of requests is a few MB


class EndpointError(ValueError):
    """A URL the app will not fetch, or a server that did not answer; one line."""


def allowed_mode() -> str:
    """The operator's choice: off | loopback | any (default loopback; unknown values = off)."""
    value = os.environ.get(ALLOW_ENV, "loopback").strip().lower()
    return value if value in MODES else "off"


@dataclass(frozen=True)
class Endpoint:
    """A checked server address."""

    url: str  # as typed, normalised: scheme://host:port (no path, no /v1)
    root: str  # what requests go to: the checked IP for http, the name for https
    host: str  # the Host header to send

    @property
    def label(self) -> str:
        return self.url


def check_endpoint(url: str, mode: str | None = None) -> Endpoint:
    """Parse, resolve and check `url` against the operator's mode; EndpointError if refused."""
    mode = allowed_mode() if mode is None else mode
    if mode == "off":
        raise EndpointError(f"fetching URLs is off on this app ({ALLOW_ENV}=off)")
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https"):
        raise EndpointError(f"use an http:// or https:// URL, not {parts.scheme}://")
    if parts.username or parts.password:
        raise EndpointError("a URL with a user name or password is not accepted")
    host = parts.hostname
    if not host:
        raise EndpointError("the URL has no host name, e.g. http://127.0.0.1:8000")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise EndpointError("the port must be a number 1..65535") from None
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise EndpointError(f"cannot resolve the host name {host!r}") from None
    addresses = sorted({info[4][0] for info in infos})
    for address in addresses:
        ip = ipaddress.ip_address(address.split("%")[0])
        if mode == "loopback" and not ip.is_loopback:
            raise EndpointError(
                f"{host} is {address}, not this machine: this app only fetches "
                f"loopback addresses (the operator can set {ALLOW_ENV}=any)"
            )
        if ip.is_link_local or ip.is_unspecified or ip.is_multicast:
            raise EndpointError(
                f"{host} is {address}: link-local, unspecified and multicast "
                "addresses are never fetched"
            )
    netloc = f"[{host}]" if ":" in host else host
    url_norm = f"{parts.scheme}://{netloc}:{port}"
    if parts.scheme == "https":
        return Endpoint(url_norm, url_norm, f"{netloc}:{port}")
    first = addresses[0]
    pinned = f"[{first}]" if ":" in first else first
    return Endpoint(url_norm, f"http://{pinned}:{port}", f"{netloc}:{port}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise EndpointError(f"the server redirected to {newurl}; redirects are not followed")


_OPENER = urllib.request.build_opener(_NoRedirect)


def _request(endpoint: Endpoint, path: str, body: dict | None = None, timeout: float = 3.0):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Host": endpoint.host, "Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(endpoint.root + path, data=data, headers=headers)
    try:
        return _OPENER.open(req, timeout=timeout)
    except urllib.error.HTTPError as err:
        detail = err.read(2000).decode("utf-8", "replace")
        with contextlib.suppress(ValueError, KeyError, TypeError):
            detail = json.loads(detail)["error"]["message"]
        raise EndpointError(f"{endpoint.url}{path} answered HTTP {err.code}: {detail}") from None
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise EndpointError(f"no answer from {endpoint.url}: {reason}") from None


def get_json(endpoint: Endpoint, path: str, timeout: float = 3.0):
    with _request(endpoint, path, timeout=timeout) as response:
        raw = response.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        raise EndpointError(f"{endpoint.url}{path} sent more than {MAX_BODY_BYTES >> 20} MB")
    try:
        return json.loads(raw)
    except ValueError:
        raise EndpointError(f"{endpoint.url}{path} did not answer JSON") from None


def fetch_trace(endpoint: Endpoint, last: int | None = None, timeout: float = 3.0) -> RunResult:
    """A `live serve`'s /pdlab/trace as a RunResult (seconds since that server started)."""
    path = "/pdlab/trace" + (f"?last={int(last)}" if last else "")
    data = get_json(endpoint, path, timeout)
    try:
        frames = {k: pd.DataFrame.from_records(data[k]) for k in ("requests", "segments", "steps")}
        times = {int(k): np.asarray(v, dtype=float) for k, v in data["token_times"].items()}
        meta = dict(data["meta"])
    except (KeyError, TypeError, ValueError):
        raise EndpointError(f"{endpoint.url} is not a PD Lab live serve") from None
    from sim.core.trace import REQUEST_COLUMNS, SEGMENT_COLUMNS, STEP_COLUMNS

    for name, columns in (
        ("requests", REQUEST_COLUMNS),
        ("segments", SEGMENT_COLUMNS),
        ("steps", STEP_COLUMNS),
    ):
        for c in columns:
            if c not in frames[name]:
                frames[name][c] = pd.Series(dtype=float)
    for c in ("start_s", "end_s"):
        frames["segments"][c] = frames["segments"][c].astype(float)
    frames["segments"]["slowed"] = frames["segments"]["slowed"].fillna(False).astype(bool)
    frames["segments"]["recompute"] = frames["segments"]["recompute"].fillna(False).astype(bool)
    for c in ("arrival_s", "first_token_s", "finish_s", "ttft_s", "tpot_s"):
        frames["requests"][c] = frames["requests"][c].astype(float)
    return RunResult(frames["requests"], frames["segments"], frames["steps"], times, meta)


def stream_chat(
    endpoint: Endpoint, text: str, max_tokens: int = 64, timeout: float = 60.0
) -> Iterator[str]:
    """Send one chat message (streaming) and yield the answer's text as it arrives."""
    body = {
        "messages": [{"role": "user", "content": text}],
        "max_tokens": max_tokens,
        "stream": True,
    }
    with _request(endpoint, "/v1/chat/completions", body, timeout) as response:
        for raw in response:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            payload = line[5:].strip()
            if payload == "[DONE]":
                return
            try:
                chunk = json.loads(payload)
            except ValueError:
                continue
            if "error" in chunk:
                raise EndpointError(str(chunk["error"].get("message", chunk["error"])))
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    yield piece
