"""Scheduling policies, registered by name (one module each).

`POLICIES` maps a name to its class; `make_policy(name, knobs=None)` builds one from a `Knobs`
object of that policy's own class (None: its defaults). The CLI, the lesson pages and the live
engine all pick policies from here, so adding a module and decorating its class with `@register`
is all it takes to offer a new one everywhere.
"""

from __future__ import annotations

from sim.policies.base import Knobs, Policy

POLICIES: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator: make a policy available by its `name`."""
    POLICIES[cls.name] = cls
    return cls


DEFAULT_POLICY = "vllm"  # vLLM V1, what a student who types `vllm serve` gets


def get_policy_class(name: str) -> type[Policy]:
    """The policy class called `name` (case-insensitive); ValueError listing the known names."""
    key = name.strip().lower()
    if key not in POLICIES:
        raise ValueError(f"unknown policy {name!r}; choose one of: {', '.join(POLICIES)}")
    return POLICIES[key]


def make_policy(name: str, knobs: Knobs | None = None) -> Policy:
    """A fresh policy object (policies may keep per-run state, so never share one)."""
    return get_policy_class(name)(knobs)


# Importing the modules registers them, in the order lessons introduce them; `chunked` (in
# vllm_v0) is the old name of `vllm-v0`, kept for shared links and scripts.
from sim.policies import vllm_v1, vllm_v0, prefill_first, static, short_first, sglang, tgi  # noqa: E402, F401, I001

__all__ = ["POLICIES", "Knobs", "Policy", "get_policy_class", "make_policy", "register"]
