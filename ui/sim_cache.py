"""Simulations run once and shared: every run a page asks for, cached and within a budget.

- Runs are cached by (workload, config), so by (scenario, variant, knob overrides): moving a
  control reruns the simulation once; playing, pausing and scrubbing happen in the browser and
  never rerun anything. The cache is shared by all sessions (a class opening one link at once;
  ui/warmup.py fills it with every lesson's default view when the server starts).
- Cache keys are `fingerprint`s (one pickle and a hash) of the workload and config, not
  Streamlit's own hashing of them: the underscored arguments of the cached functions are not
  hashed.
- Bounded work per visitor: every run goes through `sim.runs.budget.simulate_within` under
  `limits()` (requests, instances, KV blocks, engine steps, CPU seconds per run); a refused run
  is cached as its Refusal (translated when shown), so reloading a hostile URL costs nothing the
  second time.
  The caches are shared by both languages, hold at most CACHE_MB of results each and drop an
  entry CACHE_TTL after it was made. A local install raises
  the limits with PDLAB_MAX_* variables or a [limits] table in .streamlit/secrets.toml (README).
- A refused run reaches the page as RunRefused (a ValueError) whose str() is one translated line
  saying what to change.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Sequence
from dataclasses import dataclass

import streamlit as st

from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.core.trace import RunResult
from sim.runs.budget import Budget, BudgetExceeded, simulate_within
from sim.scenarios import get_scenario
from sim.workloads.workload import WorkloadConfig, generate
from ui.errors import as_code
from ui.i18n import t
from ui.labels import sim_label
from ui.language import lang

Overrides = tuple[tuple[str, object], ...]  # hashable knob overrides, e.g. (("max_num_seqs", 8),)


Workload = WorkloadConfig | tuple[RequestSpec, ...]
RunSpec = tuple[str, Workload, SimConfig]  # (label, workload, config): one line of a comparison


CACHE_TTL = "2h"  # a visitor's runs are dropped 2 hours after they were made
CACHE_MB = 256  # at most this many MB of pickled runs per cache (Streamlit evicts the oldest)


@st.cache_resource(show_spinner=False)
def limits() -> Budget:
    """The budget of one run: the defaults of sim.runs.budget.Budget, raised or lowered by
    PDLAB_MAX_* environment variables, then by a [limits] table in .streamlit/secrets.toml."""
    extra = None
    try:
        extra = dict(st.secrets["limits"]) if "limits" in st.secrets else None
    except Exception:  # no secrets.toml at all: Streamlit raises instead of being empty
        extra = None
    return Budget.from_env(extra=extra)


class RunRefused(ValueError):
    """A run the budget or the simulator refused; str() is the one line to show."""


def _limit_line(limit: str, value: int | float, lang: str) -> str:
    shown = f"{value:,}" if isinstance(value, int) else f"{value:g}"
    return t(f"limits.{limit}", lang, limit=shown, env=f"PDLAB_{limit.upper()}")


def budget_message(err: BudgetExceeded) -> str:
    """The budget error in the visitor's language, with what to change."""
    return _limit_line(err.limit, err.value, lang())


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a run was refused, in no language yet: the caches below are shared by every visitor,
    English or Korean, so a run (or a refusal) costs once, not once per language."""

    limit: str | None = None  # the budget's limit that was reached (BudgetExceeded.limit) ...
    value: int | float = 0  # ... and its value
    line: str = ""  # or the simulator's own first line (it quotes the visitor's knobs)

    @staticmethod
    def of(err: ValueError) -> Refusal:
        if isinstance(err, BudgetExceeded):
            return Refusal(limit=err.limit, value=err.value)
        return Refusal(line=str(err).splitlines()[0] if str(err) else type(err).__name__)

    def message(self, lang: str) -> str:
        """One line in `lang` saying what to change."""
        if self.limit is not None:
            return _limit_line(self.limit, self.value, lang)
        return t("common.config_error", lang, message=as_code(self.line))  # knobs as text


def fingerprint(*objs) -> str:
    """A short key for cache arguments that are large but plain (a workload of hundreds of
    RequestSpecs, configs): one pickle and a hash, ~1 ms. Streamlit's own hashing walks every
    field of every dataclass in Python (~40 ms per 200-request workload, each call, on every
    rerun of every visitor: most of a warm lesson page's CPU before this)."""
    return hashlib.blake2b(pickle.dumps(objs, protocol=5), digest_size=16).hexdigest()


@st.cache_data(max_entries=256, max_size=f"{CACHE_MB}MB", ttl=CACHE_TTL, show_spinner=False)
def _simulate_or_refuse(key: str, _workload: Workload, _config: SimConfig) -> RunResult | Refusal:
    """A run, or the one line saying why it was refused (cached too: refusing costs once).
    Cached by `key` = fingerprint(workload, config); the _arguments are not hashed."""
    from sim.runs.metrics import summarize

    workload, config = _workload, _config
    try:
        requests = generate(workload) if isinstance(workload, WorkloadConfig) else list(workload)
        run = simulate_within(requests, config, limits())
        run.summary_cache = summarize(run)  # once, for runs_table on every later rerun
        return run
    except ValueError as err:  # the budget (BudgetExceeded) or the simulator refused it
        return Refusal.of(err)


def simulate_cached(workload: Workload, config: SimConfig) -> RunResult:
    """Simulate once per (workload, config), within the budget; every later view is a cache hit.
    RunRefused (a ValueError) says in one translated line why a run is not possible."""
    out = _simulate_or_refuse(fingerprint(workload, config), workload, config)
    if isinstance(out, Refusal):
        raise RunRefused(out.message(lang()))
    return out


def run_or_error(workload: Workload, config: SimConfig, where=None) -> RunResult | None:
    """The run, or None after an st.error (in `where`) saying why it was refused."""
    try:
        return simulate_cached(workload, config)
    except RunRefused as err:
        (where or st).error(str(err))
        return None


def variant_spec(scenario: str, label: str, overrides: Overrides = ()) -> RunSpec:
    """(label, workload, config) of a lesson scenario's variant with some knobs changed; the
    label comes back in the page's language (it is what the timeline and tables show)."""
    s = get_scenario(scenario)
    variant = s.variant(label)
    workload = variant.workload if variant.workload is not None else s.workload
    return sim_label(label, lang()), workload, with_overrides(variant.config, dict(overrides))


def run_variant(scenario: str, label: str, overrides: Overrides = ()) -> RunResult:
    """Simulate one variant of a lesson scenario with some knobs changed (cached)."""
    _, workload, config = variant_spec(scenario, label, overrides)
    return simulate_cached(workload, config)


def run_variants(scenario: str, labels: Sequence[str], overrides: Overrides = ()):
    """[(label, RunResult), ...] for several variants of one scenario (labels as given: ids;
    show them through sim_label)."""
    return [(label, run_variant(scenario, label, overrides)) for label in labels]


@st.cache_data(max_entries=32, max_size="64MB", ttl=CACHE_TTL, show_spinner=False)
def _sweep_or_refuse(key: str, _workload: Workload, _config: SimConfig, _rates: tuple[float, ...]):
    workload, config, rates = _workload, _config, _rates  # cached by key = their fingerprint
    from sim.runs.budget import sweep_within

    try:
        budget = limits()  # the rates run side by side, in up to sweep_jobs processes
        jobs = min(budget.sweep_jobs, len(os.sched_getaffinity(0)))
        return sweep_within(workload, config, list(rates), budget, jobs=jobs)
    except ValueError as err:  # the budget (BudgetExceeded) or the simulator refused it
        return Refusal.of(err)


def sweep_cached(workload: Workload, config: SimConfig, rates: tuple[float, ...]):
    """Attainment per arrival rate (sim.runs.sweep.sweep_rates, within the budget), cached.
    RunRefused says in one translated line why the sweep is not possible."""
    rates = tuple(rates)
    out = _sweep_or_refuse(fingerprint(workload, config, rates), workload, config, rates)
    if isinstance(out, Refusal):
        raise RunRefused(out.message(lang()))
    return out
