"""The Serve page's URL check, stricter than live.serve.client.check_endpoint (issue 32, #14-15).

`check_endpoint` resolves the host and refuses addresses by Python's `ipaddress` flags. Two gaps
remained, closed here before the page fetches anything:

- A malformed URL (`http://[::1`) made `urlsplit` raise a plain ValueError, which took the
  whole page down. Here it is one EndpointError saying what a URL looks like.
- With PDLAB_ALLOW_ENDPOINTS=any, a cloud's metadata service (instance credentials!) was still
  reachable under other spellings. `ipaddress` only calls fe80::/10 and 169.254.0.0/16
  link-local, so these passed: an IPv4-mapped IPv6 address (`[::ffff:169.254.169.254]`, the
  same socket as 169.254.169.254 on a dual-stack host), AWS's IPv6 endpoint `fd00:ec2::254`,
  Alibaba's `100.100.100.200`, Azure's `168.63.129.16`, Oracle's `192.0.0.192`, and IPv6 forms
  that carry an IPv4 address inside (6to4 `2002::/16`, Teredo, NAT64 `64:ff9b::/96`).

Every address the host resolves to is normalised (`ipaddress.ip_address`, scope id dropped)
and refused if it is any of those: the name is resolved again here, and the address the page
will really connect to (http pins it: `Endpoint.root`) is checked too.
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from live.serve.client import Endpoint, EndpointError, check_endpoint

MAX_URL_CHARS = 2_000  # a server address is short; a megabyte of URL is not one

# Cloud metadata services that are NOT in a link-local range (those are refused as such).
METADATA = [
    ipaddress.ip_network(n)
    for n in (
        "fd00:ec2::/32",  # AWS IMDS over IPv6 (fd00:ec2::254) and its other services there
        "100.100.100.200/32",  # Alibaba Cloud ECS metadata
        "168.63.129.16/32",  # Azure WireServer / host agent
        "192.0.0.192/32",  # Oracle Cloud (OCI) metadata
    )
]
NAT64 = ipaddress.ip_network("64:ff9b::/96")  # reaches an IPv4 address through a gateway
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # the old ::a.b.c.d form (not :: and ::1)


def refusal(address: str) -> str | None:
    """Why `address` is never fetched, or None if it may be (the mode's own rule aside)."""
    ip = ipaddress.ip_address(address.split("%")[0])
    if ip.is_link_local or ip.is_unspecified or ip.is_multicast:
        return "link-local, unspecified and multicast addresses are never fetched"
    if any(ip in net for net in METADATA):
        return "a cloud metadata service's address is never fetched"
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour or (ip.teredo[1] if ip.teredo else None)
        if inner is not None or ip in NAT64 or (ip in IPV4_COMPATIBLE and int(ip) > 1):
            return (
                "an IPv6 address with an IPv4 address inside is never fetched: write the IPv4 "
                "address itself"
            )
    return None


def checked_endpoint(url: str, mode: str) -> Endpoint:
    """check_endpoint(url, mode), plus the checks above; EndpointError (one line) if refused."""
    if len(url) > MAX_URL_CHARS:
        raise EndpointError(
            f"the URL is {len(url):,} characters long; a server's address is "
            "short, e.g. http://127.0.0.1:8000"
        )
    try:
        endpoint = check_endpoint(url, mode)
    except EndpointError:
        raise
    except ValueError as err:  # urlsplit: "Invalid IPv6 URL", a bad port, ...
        raise EndpointError(
            f"the URL is malformed ({err}); write it like "
            "http://127.0.0.1:8000 or http://[::1]:8000"
        ) from None
    parts = urlsplit(endpoint.url)
    addresses = {urlsplit(endpoint.root).hostname or ""}  # what an http fetch connects to
    try:
        infos = socket.getaddrinfo(parts.hostname, parts.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise EndpointError(f"cannot resolve the host name {parts.hostname!r}") from None
    addresses |= {info[4][0] for info in infos}
    for address in sorted(a for a in addresses if _is_ip(a)):  # (https keeps the name)
        why = refusal(address)
        if why:
            raise EndpointError(f"{parts.hostname} is {address}: {why}")
    return endpoint


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%")[0])
    except ValueError:
        return False
    return True


def probe(endpoint: Endpoint, timeout_s: float = 2.0) -> str | None:
    """None if something accepts a TCP connection at the endpoint; else why not, as a catalog
    key's ending (errors.serve_refused, _timeout, _unreachable). The page says which in the
    visitor's language, instead of the operating system's "[Errno 111] Connection refused"."""
    parts = urlsplit(endpoint.root)  # the checked address itself (http), or the name (https)
    try:
        with socket.create_connection((parts.hostname, parts.port), timeout=timeout_s):
            return None
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return "timeout"
    except OSError:
        return "unreachable"
