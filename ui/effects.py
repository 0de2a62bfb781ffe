"""Effect contracts: the figure each lesson's text promises, computed at the page's defaults.

Each contract runs the SAME builders the page runs (ui/lesson_setups.py), with the page's
defaults, and says whether the promised effect is there (tests/test_effect_contracts.py checks
them all). `python -m ui.effects` prints every contract's figures: the table of a lesson's
effect at its defaults.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from sim.cluster.topologies import simulate
from sim.runs.metrics import summarize
from sim.runs.token_windows import compare_tokens_in_window
from ui import lesson_setups as ls


@dataclass(frozen=True)
class Contract:
    page: str  # url path, and the tab where the page has tabs
    promise: str  # what the lesson's text promises, with the threshold
    measure: Callable[[], dict]  # the figures, at the page's defaults
    holds: Callable[[dict], bool]


def _runs(specs) -> dict:
    return {run_id: simulate(list(workload), config) for run_id, workload, config in specs}


def home(window: float = ls.HOME["window"]) -> dict:
    runs = _runs(ls.home_specs())
    tokens = compare_tokens_in_window(runs, 0.0, window)
    gain = tokens[ls.HOME_RUNS[1]] - tokens[ls.HOME_RUNS[0]]
    gaps = {k: float(r.requests.max_itl_s.max()) for k, r in runs.items()}
    gpus = {k: int(r.meta["num_gpus"]) for k, r in runs.items()}
    return {
        "first_gain": int(gain.iloc[0]),
        "best": int(gain.idxmax()),
        "worst_gap_colocated_s": gaps[ls.HOME_RUNS[0]],
        "worst_gap_disaggregated_s": gaps[ls.HOME_RUNS[1]],
        "gpus": tuple(gpus.values()),
    }


def prefill_decode() -> dict:
    from ui.charts_steps import cost_model

    d = ls.PREFILL_DECODE
    cm = cost_model(d["gpu"], d["model"])
    decode = {b: cm.step_cost((), b, b * d["ctx"]).seconds for b in (1, 64)}
    prefill = {n: cm.step_cost(((n, 0, True),), 0, 0).seconds for n in (512, 8192)}
    return {
        "decode_64_over_1": decode[64] / decode[1],
        "prefill_8192_over_512": prefill[8192] / prefill[512],
    }


def batching() -> dict:
    runs = {k: summarize(r) for k, r in _runs(ls.batching_specs(**ls.BATCHING)).items()}
    return {
        "ttft_p50_static_s": runs["static"]["ttft_p50_s"],
        "ttft_p50_continuous_s": runs["continuous"]["ttft_p50_s"],
        "tpot_p50_static_s": runs["static"]["tpot_p50_s"],
        "tpot_p50_continuous_s": runs["continuous"]["tpot_p50_s"],
    }


def tgi(ratio: float = ls.TGI["ratio"]) -> dict:
    d = ls.BATCHING
    runs = {k: summarize(r) for k, r in _runs(ls.tgi_specs(ratio, d["rate"], d["n"])).items()}
    out = {f"ttft_p50_{k}_s": s["ttft_p50_s"] for k, s in runs.items()}
    out.setdefault("ttft_p50_tgi_low_s", out["ttft_p50_tgi_s"])  # ratio 0: one TGI run
    return out


def chunked() -> dict:
    gaps = {}
    for run_id, run in _runs(ls.chunked_specs(**ls.CHUNKED)).items():
        q = run.requests
        gaps[run_id] = float(q[q.prompt_tokens < q.prompt_tokens.max()].max_itl_s.max())
    return {
        "chat_worst_gap_prefill_first_s": gaps["prefill_first"],
        "chat_worst_gap_chunked_s": gaps["chunked"],
    }


def blocking(**params) -> dict:
    out = {}
    for run_id, run in _runs(ls.blocking_specs(**{**ls.BLOCKING, **params})).items():
        q = run.requests
        out[f"chat_ttft_p50_{run_id}_s"] = float(q[q.prompt_tokens < 10000].ttft_s.median())
    return out


def starvation(**params) -> dict:
    out = {}
    for run_id, run in _runs(ls.starvation_specs(**{**ls.STARVATION, **params})).items():
        q, long = run.requests, run.requests.prompt_tokens > ls.LONG_PROMPT
        out[f"chat_ttft_p50_{run_id}_s"] = float(q[~long].ttft_s.median())
        out[f"long_ttft_max_{run_id}_s"] = float(q[long].ttft_s.max())
    return out


def memory(kv: int = ls.MEMORY["kv"]) -> dict:
    from sim.scenarios import get_scenario

    s = get_scenario("c11-memory-pressure")
    from sim.config import with_overrides

    config = with_overrides(s.variant("recompute").config, {"kv_capacity_tokens": kv})
    return {"preemptions": int(simulate(list(s.workload), config).requests.preemptions.sum())}


def _on_off(specs) -> dict:
    s = {k: summarize(r) for k, r in _runs(specs).items()}
    return {
        "ttft_p50_on_s": s["on"]["ttft_p50_s"],
        "ttft_p50_off_s": s["off"]["ttft_p50_s"],
        "hit_rate": s["on"]["prefix_cache_hit_rate"],
    }


def prefix_system(**params) -> dict:
    return _on_off(ls.system_prompt_specs(**{**ls.PREFIX_SYSTEM, **params}))


def prefix_trace() -> dict:
    return _on_off(ls.trace_specs(**ls.PREFIX_TRACE))


def prefix_evict(kv: int = ls.PREFIX_EVICT["kv"]) -> dict:
    out = {}
    for size in sorted({kv, min(ls.EVICT_SIZES), max(ls.EVICT_SIZES)}):
        workload, config = ls.evict_spec(size)
        out[f"hit_rate_{size}"] = summarize(simulate(list(workload), config))[
            "prefix_cache_hit_rate"
        ]
    out["hit_rate_default"] = out[f"hit_rate_{kv}"]
    return out


def disagg_goodput(preset_key: str, seed: int | None = None) -> dict:
    """Goodput per GPU of the three ways on the page's default split (sim.runs.sweep, as the page);
    `seed` draws the preset's requests anew (does the verdict hang on one draw?)."""
    import dataclasses

    from sim.runs.sweep import goodput_of, sweep_rates

    preset = ls.DISAGG_PRESETS[preset_key]
    workload = preset.workload
    if seed is not None:
        workload = dataclasses.replace(workload, seed=seed)
    out = {}
    for run_id, config in ls.preset_configs(preset).items():
        g = goodput_of(sweep_rates(workload, config, preset.rates))
        out[run_id] = g["goodput_per_gpu_per_s"]
    return out


def deciders(non_cached: int = ls.DECIDE["non_cached"]) -> dict:
    """How many prompts each decider prefilled on P, and the median TTFT (one trace, 1P1D)."""
    out = {}
    for mode, run in _runs(ls.decider_specs(non_cached)).items():
        out[f"remote_{mode}"] = sum(d["remote"] for d in run.meta["decisions"])
        out[f"ttft_p50_{mode}_s"] = float(run.requests.ttft_s.median())
    out["requests"] = len(ls.decider_trace())
    return out


def speculative(**params) -> dict:
    """TPOT with speculation / without, at the sweep's smallest and largest batch, for the
    visitor's default acceptance ("chosen": vLLM's EAGLE-3 Llama-3.1-8B table) and the low
    reference rate; and where each stops paying (NaN: it never does)."""
    d = {**ls.SPECULATIVE, **params}
    specs = ls.spec_sweep_specs(d["method"], d["k"], d["accept"], d["alpha"], d["gpu"], d["model"])
    rows = ls.spec_table(specs, [simulate(list(wl), cfg) for _, _, wl, cfg in specs])
    ratio = {(r["curve"], r["batch"]): r["ratio"] for r in rows}
    batches = sorted({r["batch"] for r in rows})
    first, last = batches[0], batches[-1]
    crossing = {}
    for cid in ("chosen", "low"):
        at = ls.crossover_batch(batches, [ratio[cid, b] for b in batches])
        crossing[cid] = float("nan") if at is None else at
    return {
        "ratio_first_chosen": ratio["chosen", first],
        "ratio_last_chosen": ratio["chosen", last],
        "ratio_first_low": ratio["low", first],
        "ratio_last_low": ratio["low", last],
        "crossover_chosen": crossing["chosen"],
        "crossover_low": crossing["low"],
        "batches": (first, last),
    }


def _ratio(a, b) -> float:
    return float(a) / float(b) if b else np.inf


CONTRACTS = (
    Contract(
        "home",
        "same GPU count; the first request makes more tokens disaggregated, its "
        "worst gap at least 3x shorter",
        home,
        lambda f: (
            f["gpus"][0] == f["gpus"][1]
            and f["first_gain"] > 0
            and f["best"] == 0
            and _ratio(f["worst_gap_colocated_s"], f["worst_gap_disaggregated_s"]) >= 3
        ),
    ),
    Contract(
        "prefill-vs-decode",
        "a decode step of 64 requests costs < 2x one of 1; a prefill "
        "of 8192 tokens > 8x one of 512",
        prefill_decode,
        lambda f: f["decode_64_over_1"] < 2 and f["prefill_8192_over_512"] > 8,
    ),
    Contract(
        "batching",
        "static: TTFT p50 >= 2x continuous, TPOT p50 lower",
        batching,
        lambda f: (
            _ratio(f["ttft_p50_static_s"], f["ttft_p50_continuous_s"]) >= 2
            and f["tpot_p50_static_s"] < f["tpot_p50_continuous_s"]
        ),
    ),
    Contract(
        "batching/tgi",
        "TGI at its default ratio: TTFT p50 >= 2x TGI at ratio 0 and >= 2x vLLM V1",
        tgi,
        lambda f: (
            _ratio(f["ttft_p50_tgi_s"], f["ttft_p50_tgi_low_s"]) >= 2
            and _ratio(f["ttft_p50_tgi_s"], f["ttft_p50_vllm_s"]) >= 2
        ),
    ),
    Contract(
        "chunked-prefill",
        "the chats' worst gap >= 3x shorter chunked than prefill-first",
        chunked,
        lambda f: _ratio(f["chat_worst_gap_prefill_first_s"], f["chat_worst_gap_chunked_s"]) >= 3,
    ),
    Contract(
        "long-prompts/blocking",
        "both fast lanes cut the chats' median TTFT >= 5x",
        blocking,
        lambda f: (
            min(
                _ratio(f["chat_ttft_p50_v1_default_s"], f[f"chat_ttft_p50_{lane}_s"])
                for lane in ("v1_lane", "v0_lane")
            )
            >= 5
        ),
    ),
    Contract(
        "long-prompts/starvation",
        "short-first: chats' median TTFT >= 2x better, the worst long prompt waits >= 2x longer",
        starvation,
        lambda f: (
            _ratio(f["chat_ttft_p50_fcfs_s"], f["chat_ttft_p50_short_first_s"]) >= 2
            and _ratio(f["long_ttft_max_short_first_s"], f["long_ttft_max_fcfs_s"]) >= 2
        ),
    ),
    Contract("memory", "the default capacity preempts", memory, lambda f: f["preemptions"] > 0),
    Contract(
        "prefix-caching/system",
        "caching cuts TTFT p50 >= 5x",
        prefix_system,
        lambda f: _ratio(f["ttft_p50_off_s"], f["ttft_p50_on_s"]) >= 5,
    ),
    Contract(
        "prefix-caching/trace",
        "caching cuts TTFT p50 >= 3x (several-fold)",
        prefix_trace,
        lambda f: _ratio(f["ttft_p50_off_s"], f["ttft_p50_on_s"]) >= 3,
    ),
    Contract(
        "prefix-caching/eviction",
        "the default capacity has cache hits, fewer than with "
        "room for all, and the smallest has fewer still",
        prefix_evict,
        lambda f: (
            0 < f["hit_rate_default"] < f[f"hit_rate_{max(ls.EVICT_SIZES)}"]
            and f[f"hit_rate_{min(ls.EVICT_SIZES)}"] < f["hit_rate_default"]
        ),
    ),
    Contract(
        "speculative-decoding/crossover",
        "at batch 1 speculation cuts TPOT >= 1.5x with vLLM's EAGLE-3 rates and cuts it with "
        "the low rates too; at the largest batch the low rates make TPOT worse (a crossover "
        "between) while the EAGLE-3 rates still do better than the low ones",
        speculative,
        lambda f: (
            f["batches"][0] == 1
            and f["ratio_first_chosen"] <= 1 / 1.5
            and f["ratio_first_low"] < 1 < f["ratio_last_low"]
            and f["ratio_last_chosen"] < f["ratio_last_low"]
        ),
    ),
    Contract(
        "disaggregation/wins",
        "disaggregated goodput per GPU >= 1.3x the best other way",
        lambda: disagg_goodput("wins"),
        lambda f: f["disaggregated"] >= 1.3 * max(f["colocated"], f["router"]),
    ),
    Contract(
        "disaggregation/loses",
        "disaggregated goodput per GPU below colocated's",
        lambda: disagg_goodput("loses"),
        lambda f: f["disaggregated"] < f["colocated"],
    ),
    Contract(
        "disaggregation/deciders",
        "always sends every prompt to P; Dynamo and llm-d each keep a different number local, "
        "and both cut the median TTFT below always's",
        deciders,
        lambda f: (
            f["remote_always"] == f["requests"]
            and len({f["remote_always"], f["remote_isl_bounding"], f["remote_llm-d-prefix"]}) == 3
            and max(f["ttft_p50_isl_bounding_s"], f["ttft_p50_llm-d-prefix_s"])
            < f["ttft_p50_always_s"]
        ),
    ),
)


def _fmt(figures: dict) -> str:
    return ", ".join(
        f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in figures.items()
    )


if __name__ == "__main__":
    for c in CONTRACTS:
        f = c.measure()
        print(f"{'ok  ' if c.holds(f) else 'FAIL'} {c.page}: {c.promise}\n     {_fmt(f)}")
