"""Speculative decoding on the Live page: what the model measured beside what the simulator drew.

A live run's `meta["speculation"]` holds the engine's totals (drafts verified and accepted,
verify steps) and, under "measured", what the n-gram drafter and the greedy verifies did on the
model (live/engine/speculation.py: per-position acceptance, the share of steps that proposed).
The calibrated simulation of the same workload holds the totals of its seeded draws from an
acceptance table (sim/core/speculation.py), named by its config. Pure: text comes through `T`.
"""

from __future__ import annotations

from collections.abc import Callable

from sim.core.speculation import acceptance_table, rates_text

METHODS = ("off", "ngram")  # the Live page's choice; ngram = vLLM's prompt lookup


def spec_overrides(method: str, knobs) -> dict:
    """The knobs that turn the chosen method on for a policy whose knobs have it (vLLM V1's);
    other policies run without speculation."""
    if method == "off" or not hasattr(knobs, "speculative"):
        return {}
    return {"speculative": method}


def sim_table(meta: dict):
    """(acceptance table, k) the simulation drew from, or None when speculation was off."""
    config = meta.get("config", {})
    method = config.get("speculative", "")
    if not method:
        return None
    return acceptance_table(config.get("spec_acceptance", ""), method), int(
        config.get("num_speculative_tokens", 1)
    )


def metrics(live_meta: dict, sim_meta: dict, T: Callable[..., str]) -> list[tuple]:
    """(label, value, delta, help) of the acceptance rate and the tokens per verify step,
    measured, with the simulation's value as the delta; [] when speculation was off."""
    live, sim = live_meta.get("speculation"), sim_meta.get("speculation")
    if not live or not sim:
        return []
    return [
        (
            T("live_spec.acceptance"),
            T("live_spec.pct", pct=live["acceptance_rate"]),
            T("live_spec.acceptance_sim", pct=sim["acceptance_rate"]),
            T("live_spec.acceptance_help"),
        ),
        (
            T("live_spec.tpv"),
            T("live_spec.tokens", n=live["tokens_per_verify"]),
            T("live_spec.tpv_sim", n=sim["tokens_per_verify"]),
            T("live_spec.tpv_help", verifies=live["verify_steps"]),
        ),
    ]


def caption(live_meta: dict, sim_meta: dict, T: Callable[..., str]) -> str:
    """Per-position acceptance and propose share, measured vs the simulation's table, and the
    knob that would make the simulation draw from the measured rates."""
    measured = live_meta.get("speculation", {}).get("measured")
    drawn = sim_table(sim_meta)
    if not measured or drawn is None:
        return ""
    table, k = drawn
    rates = measured["per_position"]
    knob = f"spec_acceptance={','.join(f'{r:.2f}' for r in rates)}"  # (over all verifies)
    if not measured["verify_steps"]:
        return T("live_spec.none_proposed", lookups=measured["lookups"])
    return T(
        "live_spec.positions",
        measured=rates_text(rates),
        share=measured["propose_share"],
        table=table.name,
        rates=rates_text([table.rate(i) for i in range(1, k + 1)]),
        source=table.source,
        knob=knob,
    )
