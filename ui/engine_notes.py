"""What a lesson says under a picture: which real engine a policy mirrors, and how we know.

A picture drawn with a policy gets `engine_note`: in a "How do we know?" expander, one caption
naming the engine and version the policy mirrors, and how we know (VERIFIED: checked step by
step against the real scheduler by tests/test_vllm_differential.py or
tests/test_sglang_differential.py, or how else). What those checks leave out (a router, a P->D
hand-off: TOPOLOGY_CAVEATS) follows as caveats, so a student knows which part of the picture is
PD Lab's own model. `policy_note` translates a policy's remark. `step_costs_note` says what
priced a run's steps when its configuration asked for measured kernels (`step_costs=kernels`),
or that the tables are not installed here and the roofline priced them.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from ui.i18n import DEFAULT_LANG, catalog
from ui.language import translator

# Which real scheduler each policy's step sequence is checked against (tests/test_vllm_differential
# .py, tests/test_sglang_differential.py), or how else we know; the key of the sentence a lesson
# shows under a picture drawn with that policy.
VERIFIED = {
    "vllm": "common.verified_v1",
    "short-first": "common.verified_v1",
    "vllm-v0": "common.verified_v0",
    "chunked": "common.verified_v0",
    "prefill-first": "common.verified_v0",
    "sglang": "common.verified_sglang",
    "tgi": "common.tgi_source",
    "static": "common.static_own",  # an idea, not a version: hand traces only
}


# What the differential suite does not cover where several workers serve: it steps ONE scheduler,
# so the router and the P->D hand-off are PD Lab's own models (a sentence each).
TOPOLOGY_CAVEATS = {"router": "common.caveat_router", "disaggregated": "common.caveat_disagg"}


def topology_caveats(*topologies: str) -> tuple[str, ...]:
    """The caveat keys (for `engine_note`) of the topologies a picture shows."""
    return tuple(dict.fromkeys(TOPOLOGY_CAVEATS[t] for t in topologies if t in TOPOLOGY_CAVEATS))


def engine_note(
    *policies: str, caveat_key: str | Sequence[str] | None = None, expander: bool = True
) -> None:
    """One caption per policy shown: which engine and version it is, and how we know.

    `caveat_key` names the sentence(s) saying what of this picture the checks do NOT cover; they
    follow a policy's "checked" sentence (a policy never checked says so, and needs none).
    The captions sit in a closed "How do we know?" expander (issue 26: provenance where a
    curious student finds it, not in everyone's way); expander=False writes them in place (for
    a caller already inside an expander, where Streamlit allows no second one)."""
    T = translator()
    if expander:
        with st.expander(T("view.how_we_know"), icon=":material/verified:"):
            engine_note(*policies, caveat_key=caveat_key, expander=False)
        return
    from sim.policies import get_policy_class

    caveats = (caveat_key,) if isinstance(caveat_key, str) else tuple(caveat_key or ())
    seen = set()
    for name in policies:
        cls = get_policy_class(name)
        if cls.name in seen:
            continue
        seen.add(cls.name)
        proof_key = VERIFIED.get(cls.name, "")
        proof = T(proof_key) if proof_key else ""
        if proof_key.startswith("common.verified_"):
            # "That check covers each worker's own scheduler" once, then what it leaves out.
            scope = ["common.caveat_scope"] if set(caveats) & set(TOPOLOGY_CAVEATS.values()) else []
            proof = " ".join([proof, *(T(c) for c in [*scope, *caveats])])
        key = f"label.mirrors.{cls.name}"  # the policy's `mirrors`, in the page's language
        mirrors = T(key) if key in catalog(DEFAULT_LANG) else cls.mirrors
        st.caption(T("common.engine_note", policy=cls.name, mirrors=mirrors, proof=proof))


def policy_note(note) -> str:
    """A policy's remark (sim.policies.base.Note) in the page's language; its English text if
    the catalogs have no key for it."""
    key = f"policy_note.{note.key}"
    return translator()(key) if key in catalog(DEFAULT_LANG) else str(note)


def step_costs_note(config, run, where=None) -> None:
    """Under a run whose configuration set step_costs=kernels: which table priced which operator
    (the run's own `kernel_source`), or, where aiconfigurator-core is not installed (a hosted
    app installs requirements.txt alone), that the roofline priced every step. Nothing for the
    default roofline."""
    if config.hardware.step_costs != "kernels":
        return
    from sim.cost.kernel_data import available

    T, place = translator(), where or st
    sources = run.meta.get("kernel_sources") or {}  # operator -> its table, or "roofline"
    measured = [
        T("kernel_op.priced", op=T("kernel_op." + op), table=table)
        for op, table in sources.items()
        if table != "roofline"
    ]
    rest = [T("kernel_op." + op) for op, s in sources.items() if s == "roofline"]
    if not available():
        place.info(T("common.kernels_missing"))
    elif not measured:  # installed, but no table covers this GPU and model
        place.info(T("common.kernels_uncovered", gpu=run.meta.get("gpu", "")))
    else:
        place.caption(
            T(
                "common.kernels_source",
                gpu=run.meta.get("gpu", ""),
                measured="; ".join(measured),
                rest=", ".join(rest),
            )
        )
