"""Speculative decoding on the Live page: what the model measured beside what the simulator drew.

A live run's `meta["speculation"]` holds the engine's totals (drafts verified and accepted,
verify steps) and, under "measured", what the n-gram drafter and the greedy verifies did on the
model (live/engine/speculation.py: per-position acceptance, the share of steps that proposed).
The calibrated simulation of the same workload holds the totals of its seeded draws from an
acceptance table (sim/core/speculation.py), named by its config. The speed-up compares a
speculating run with its twin: the same config without speculation, run right after it on the
same model (and both simulated). Pure: text comes through `T`.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from sim.config import with_overrides
from sim.core.speculation import acceptance_table, rates_text
from sim.core.trace import RunResult

METHODS = ("off", "ngram")  # the Live page's choice; ngram = vLLM's prompt lookup


def spec_overrides(method: str, knobs) -> dict:
    """The knobs that turn the chosen method on for a policy whose knobs have it (vLLM V1's);
    other policies run without speculation."""
    if method == "off" or not hasattr(knobs, "speculative"):
        return {}
    return {"speculative": method}


def speculating(config) -> bool:
    """Whether the config's policy speculates (only vLLM V1's knobs have the method)."""
    return bool(getattr(config.knobs, "speculative", ""))


def without_speculation(config):
    """The same config with speculation off: the twin run whose TPOT the speed-up divides by."""
    return with_overrides(config, {"speculative": ""})


def tpot_ratio(with_spec: RunResult, without: RunResult) -> float | None:
    """Median TPOT with speculation / without (the lesson's "with ÷ without": below 1 it pays),
    over the requests that decoded in both runs; None when none did."""
    a = with_spec.requests.set_index("request_id")["tpot_s"]
    b = without.requests.set_index("request_id")["tpot_s"]
    both = pd.concat([a, b], axis=1, keys=["on", "off"]).dropna()
    both = both[(both["on"] > 0) & (both["off"] > 0)]
    if both.empty:
        return None
    return float(both["on"].median() / both["off"].median())


def speedup_metric(run, twin, T: Callable[..., str]) -> tuple | None:
    """(label, value, delta, help): TPOT with ÷ without speculation, measured (the live run and
    its twin without speculation, same workload, one after the other on the same model) with the
    calibrated simulation's ratio of the same two runs as the delta; None if it cannot be told."""
    measured = tpot_ratio(run.live, twin.live)
    simulated = tpot_ratio(run.predicted, twin.predicted)
    if measured is None or simulated is None:
        return None
    return (
        T("live_spec.speedup"),
        T("live_spec.ratio", r=measured),
        T("live_spec.ratio_sim", r=simulated),
        T("live_spec.speedup_help"),
    )


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
