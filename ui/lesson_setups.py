"""Each lesson's default controls and the runs it compares, defined once.

A lesson page takes its controls' defaults from here and builds its runs with the functions
here; ui/effects.py computes the effect each lesson's text promises from the SAME functions at
the SAME defaults, and tests/test_effect_contracts.py checks it. So a change of defaults that
leaves a lesson showing nothing fails a test instead of reaching a class.

Builders return (id, workload, config) triples; the page turns the id into a label in the
visitor's language. No streamlit here: the contracts run without a browser.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.config import SimConfig, with_overrides
from sim.scenarios import (
    long_prompts_then_chats,
    mooncake_excerpt,
    requests_from_rows,
    shared_system_prompt,
)
from sim.workloads.lengths import Uniform
from sim.workloads.workload import WorkloadConfig

# ---- Home: three requests on the same two GPUs, colocated vs disaggregated -------------------
HOME = {"window": 5.0}
HOME_RUNS = ("colocated x2", "1P1D")  # ids (labels.json)


def home_specs() -> list:
    """The seed's worked example (three 2048-token prompts, 1 s apart, on L4s), served by vLLM
    V1 on TWO GPUs either way: two colocated instances behind a router, or one prefill and one
    decode GPU joined by an NVLink-class link, handing off as DistServe does."""
    requests = requests_from_rows([(0.0, 2048, 200), (1.0, 2048, 200), (2.0, 2048, 200)])
    base = with_overrides(SimConfig(), {"profile": "generic", "gpu": "L4"})
    colocated = with_overrides(
        base, {"topology": "router", "router": "least-loaded", "num_instances": 2}
    )
    split = with_overrides(
        base,
        {"topology": "disaggregated", "kv_bandwidth_gb_s": 450, "disagg_protocol": "distserve"},
    )
    return [(HOME_RUNS[0], requests, colocated), (HOME_RUNS[1], requests, split)]


# ---- Prefill vs decode, batching, chunked prefill --------------------------------------------
PREFILL_DECODE = {"gpu": "H100-SXM", "model": "Llama-3.1-8B", "ctx": 2048}
BATCHING = {"batch": 8, "rate": 4.0, "n": 24, "long": False}
CHUNKED = {"chunk": 2048, "gpu": "H100-SXM"}


def batching_specs(batch, rate, n, long) -> list:
    """The same arrivals under static batching and continuous batching, prefill-first."""
    from sim.core.request import RequestSpec
    from sim.workloads.workload import generate

    requests = generate(WorkloadConfig(rate_per_s=rate, num_requests=n, seed=3))
    if long:  # C5: one 16k-token prompt arrives while the others stream
        t_long = requests[len(requests) // 3].arrival_s
        requests = [*requests, RequestSpec(len(requests), t_long, 16384, 50)]
    workload = tuple(requests)
    static = with_overrides(SimConfig(policy="static"), {"batch_size": batch})
    return [
        ("static", workload, static),
        ("continuous", workload, SimConfig(policy="prefill-first")),
    ]


# TGI v3's join rule on the same arrivals: a running batch takes waiting requests only when they
# are waiting_served_ratio times as many as it runs, or after max_waiting_tokens decode steps.
TGI = {"ratio": 1.2}  # TGI's default (backends/v3/src/main.rs)
TGI_RATIOS = (0.0, 0.5, 1.2, 2.0, 4.0)
TGI_LOW = 0.0  # the comparison's low ratio: any waiting request joins at the next step


def tgi_specs(ratio, rate, n) -> list:
    """The batching lesson's arrivals (without the long prompt) under TGI v3 at `ratio`, TGI
    v3 at ratio 0, and vLLM V1's continuous batching (chunked prefill mixed into decodes)."""
    (_, workload, _), _ = batching_specs(BATCHING["batch"], rate, n, False)
    tgi = SimConfig(policy="tgi")
    runs = [("tgi", workload, with_overrides(tgi, {"waiting_served_ratio": ratio}))]
    if ratio != TGI_LOW:  # (at ratio 0 the two TGI runs are one)
        low = with_overrides(tgi, {"waiting_served_ratio": TGI_LOW})
        runs.append(("tgi_low", workload, low))
    return [*runs, ("vllm", workload, SimConfig(policy="vllm"))]


def chunked_specs(chunk, gpu) -> list:
    """vLLM V0 prefill-first (reference) and vLLM V1 with a token budget of `chunk`."""
    from sim.scenarios import get_scenario

    out = []
    for run_id, scenario, label, knobs in (
        ("prefill_first", "c5-long-prompt-freeze", "prefill-first (V0)", {}),
        ("chunked", "c6-chunk-size", "chunk 2048", {"max_num_batched_tokens": chunk}),
    ):
        s = get_scenario(scenario)
        variant = s.variant(label)
        workload = variant.workload if variant.workload is not None else s.workload
        out.append((run_id, workload, with_overrides(variant.config, {"gpu": gpu, **knobs})))
    return out


# ---- Long prompts ----------------------------------------------------------------------------
LONG_BUDGET = 2048  # the step's token budget in this lesson (vLLM's default on an A100 or L40S)
BLOCKING = {
    "long_len": 20000,
    "n_long": 2,
    "v1_threshold": 512,
    "partial": 4,
    "max_long": 1,
    "threshold": 10000,
}
STARVATION = {"chat_rate": 50, "aging": 0.0}  # aging 0 = never: the starvation shows at once


def blocking_specs(long_len, n_long, v1_threshold, partial, max_long, threshold) -> list:
    """Long prompts first, then chats: V1 default, V1's fast lane, V0's fast lane."""
    workload = long_prompts_then_chats([(0.02 * i, long_len) for i in range(n_long)])
    v1_default = with_overrides(SimConfig(), {"max_num_batched_tokens": LONG_BUDGET})
    v1_lane = with_overrides(v1_default, {"long_prefill_token_threshold": v1_threshold})
    v0_lane = with_overrides(
        SimConfig(policy="vllm-v0"),
        {
            "max_num_batched_tokens": LONG_BUDGET,
            "max_num_partial_prefills": partial,
            "max_long_partial_prefills": max_long,
            "long_prefill_token_threshold": threshold,
        },
    )
    return [
        ("v1_default", workload, v1_default),
        ("v1_lane", workload, v1_lane),
        ("v0_lane", workload, v0_lane),
    ]


def starvation_specs(chat_rate, aging) -> list:
    """A steady stream of chats plus three 12k-token prompts: FCFS vs short-first."""
    rows = [(i / chat_rate, 600, 30) for i in range(int(8 * chat_rate))]
    rows += [(1.0, 12000, 20), (2.0, 12000, 20), (3.0, 12000, 20)]
    workload = requests_from_rows(rows)
    knobs = {"max_num_batched_tokens": LONG_BUDGET}
    fcfs = with_overrides(SimConfig(), knobs)
    short = with_overrides(SimConfig(policy="short-first"), {**knobs, "aging_s": aging})
    return [("fcfs", workload, fcfs), ("short_first", workload, short)]


LONG_PROMPT = 10000  # prompt tokens above which the starvation tab counts a prompt as long


# ---- Prefix caching --------------------------------------------------------------------------
PREFIX_SYSTEM = {"system": 8000, "rate": 4.0}
PREFIX_TRACE = {"trace_rate": 0.25}
PREFIX_EVICT = {"kv": 32000}  # room for some documents: hits, and evictions
EVICT_SIZES = (12000, 24000, 32000, 48000, 100000, 200000)


def caching_on_off(workload, base: SimConfig) -> list:
    return [
        ("on", workload, base),
        ("off", workload, with_overrides(base, {"enable_prefix_caching": False})),
    ]


def prefix_base() -> SimConfig:
    from sim.scenarios import get_scenario

    return get_scenario("pc1-shared-system-prompt").variant("caching on").config


def system_prompt_specs(system, rate) -> list:
    return caching_on_off(shared_system_prompt(60, rate, system), prefix_base())


def trace_specs(trace_rate) -> list:
    return caching_on_off(mooncake_excerpt(trace_rate), prefix_base())


def evict_spec(kv) -> tuple:
    """(workload, config): 48 questions over 8 documents, with a KV cache of `kv` tokens."""
    from sim.scenarios import get_scenario

    s = get_scenario("pc3-cache-eviction")
    return s.workload, with_overrides(s.variant("KV 24k tokens").config, {"kv_capacity_tokens": kv})


# ---- KV memory -------------------------------------------------------------------------------
MEMORY = {"kv": 24000, "mode": "recompute"}


# ---- Disaggregation: two presets, the same comparison on each --------------------------------
@dataclass(frozen=True)
class DisaggPreset:
    """A workload, a model, latency targets and a P:D split: one regime of the comparison."""

    key: str  # URL value; the visible name is disagg.preset.<key>
    workload: WorkloadConfig
    ttft_slo_s: float
    tpot_slo_s: float
    rates: tuple[float, ...]  # the goodput sweep's arrival rates (requests/s)


DISAGG_PRESETS = {
    # DistServe's regime: long prompts, short answers, a token pace close to a bare decode step.
    "wins": DisaggPreset(
        "wins",
        WorkloadConfig(
            rate_per_s=6.0,
            num_requests=200,
            prompt=Uniform(4000, 8000),
            output=Uniform(100, 300),
            seed=11,
        ),
        ttft_slo_s=3.0,
        tpot_slo_s=0.02,
        rates=(2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 12.0),
    ),
    # Chats with a few long documents at interactive targets: colocation shares the prefills.
    "loses": DisaggPreset(
        "loses",
        WorkloadConfig(rate_per_s=6.0, num_requests=200, prompt="chat+longdoc", seed=11),
        ttft_slo_s=3.0,
        tpot_slo_s=0.3,
        rates=tuple(float(r) for r in range(4, 41, 4)),
    ),
}
DISAGG = {
    "preset": "wins",
    "p": 2,
    "d": 1,
    "link": "IB NDR",
    "dgpu": "H100-SXM",
    "protocol": "vllm",
    "rate": 6.0,
    "timeline_requests": 36,
}
DISAGG_RUNS = ("colocated", "router", "disaggregated")  # ids of the three ways, in order


def disagg_configs(
    preset: DisaggPreset, n_p: int, n_d: int, link_gb_s: float, decode_gpu: str, protocol: str
) -> dict:
    """The three ways to use n_p + n_d GPUs, with the preset's latency targets."""
    gpus = n_p + n_d
    slo = {"ttft_slo_s": preset.ttft_slo_s, "tpot_slo_s": preset.tpot_slo_s}
    return {
        "colocated": with_overrides(
            SimConfig(),
            {**slo, "topology": "router", "router": "least-loaded", "num_instances": gpus},
        ),
        "router": with_overrides(
            SimConfig(), {**slo, "topology": "router", "router": "length", "num_instances": gpus}
        ),
        "disaggregated": with_overrides(
            SimConfig(),
            {
                **slo,
                "topology": "disaggregated",
                "num_prefill": n_p,
                "num_decode": n_d,
                "kv_bandwidth_gb_s": link_gb_s,
                "decode_gpu": decode_gpu,
                "disagg_protocol": protocol,
            },
        ),
    }


# ---- Disaggregation: one trace under three deciders (who prefills where, and why) ------------
DECIDE = {"non_cached": 1024}  # llm-d's `non_cached_tokens` here (its default 0 = always remote)
NON_CACHED_CHOICES = (0, 512, 1024, 2048)
DECIDE_RUNS = ("always", "isl_bounding", "llm-d-prefix")  # the disagg_mode of each run


def decider_trace() -> tuple:
    """Ten requests, 0.3 s apart, on one P and one D: a 6,000-token document asked about three
    times (D caches it after the first), a 1,800-token system prompt used twice, short chats, a
    1,500-token and a 9,000-token prompt without a shared prefix. Each decider has requests it
    keeps local and the others send to P."""
    return requests_from_rows(
        [
            (0.0, 6200, 100, 0, "doc", 6000),
            (0.3, 300, 100),
            (0.6, 1500, 100),
            (1.2, 6400, 100, 0, "doc", 6000),
            (1.5, 400, 100),
            (1.8, 3000, 100, 0, "system", 1800),
            (2.4, 3200, 100, 0, "system", 1800),
            (2.7, 9000, 100),
            (3.0, 6300, 100, 0, "doc", 6000),
            (3.3, 250, 100),
        ]
    )


def decider_specs(non_cached: int) -> list:
    """The trace on 1P1D (vLLM V1, prefix caching on, H100s) under each decider at its
    source's defaults, except llm-d's `non_cached_tokens` (0 would send everything to P)."""
    base = with_overrides(
        SimConfig(), {"topology": "disaggregated", "num_prefill": 1, "num_decode": 1}
    )
    knobs = {"llm-d-prefix": {"non_cached_tokens": non_cached}}
    workload = decider_trace()
    return [
        (mode, workload, with_overrides(base, {"disagg_mode": mode, **knobs.get(mode, {})}))
        for mode in DECIDE_RUNS
    ]


def preset_configs(preset: DisaggPreset) -> dict:
    """The three ways on the page's default split, link, decode GPU and protocol."""
    from sim.cost.hardware import LINKS_GB_S

    d = DISAGG
    return disagg_configs(preset, d["p"], d["d"], LINKS_GB_S[d["link"]], d["dgpu"], d["protocol"])


# ---- Speculative decoding: when it pays ------------------------------------------------------
SPECULATIVE = {
    "method": "eagle",
    "k": 3,
    "accept": "eagle3-llama3.1-8b",  # a table of sim/core/speculation.py TABLES, or "geometric"
    "alpha": 0.7,  # "geometric": each draft accepted with this probability, given the ones before
    "gpu": "H100-SXM",
    "model": "Llama-3.1-8B",
}
SPEC_ACCEPT = ("eagle3-llama3.1-8b", "eagle3-qwen3-8b", "eagle3-gpt-oss-20b", "geometric")
SPEC_BATCHES = (1, 8, 32, 64, 128, 256, 512)  # requests decoding together (the chart's x)
SPEC_PROMPT, SPEC_OUTPUT = 256, 48  # tokens per request of the batch sweep
SPEC_HIGH, SPEC_LOW = 0.9, 0.5  # per-draft acceptance of the chart's two reference curves
SPEC_TIMELINE = {"requests": 4, "prompt": 256, "output": 24, "gap_s": 0.0}
SPEC_CURVES = ("high", "chosen", "low")  # the chart's speculative curves, top to bottom


def geometric_rates(alpha: float, k: int) -> str:
    """vLLM's per-position rates when each draft is accepted with probability `alpha` once the
    ones before it were: alpha, alpha², ..., alpha^k (as `spec_acceptance` writes rates)."""
    return ",".join(f"{alpha**i:.6g}" for i in range(1, k + 1))


def spec_acceptance(accept: str, alpha: float, k: int) -> str:
    """The `spec_acceptance` knob: a table's name, or the geometric rates of `alpha`."""
    return geometric_rates(alpha, k) if accept == "geometric" else accept


def spec_knobs(method: str, k: int, acceptance: str) -> dict:
    return {"speculative": method, "num_speculative_tokens": k, "spec_acceptance": acceptance}


def spec_curves(accept: str, alpha: float, k: int) -> list[tuple[str, str]]:
    """(curve id, spec_acceptance) of the chart's speculative curves: a high and a low
    geometric rate around the visitor's choice (a curve equal to the choice is left out)."""
    chosen = spec_acceptance(accept, alpha, k)
    curves = [
        ("high", geometric_rates(SPEC_HIGH, k)),
        ("chosen", chosen),
        ("low", geometric_rates(SPEC_LOW, k)),
    ]
    return [(cid, acc) for cid, acc in curves if cid == "chosen" or acc != chosen]


def spec_batches(gpu: str, model: str, k: int) -> tuple[int, ...]:
    """The sweep's batch sizes whose KV (prompt + answer + k lookahead slots, per request) fits
    on the GPU; ValueError where the model itself does not fit."""
    from sim.cost.hardware import get_gpu, get_model, kv_capacity_tokens

    g, m = get_gpu(gpu), get_model(model)
    per_request = SPEC_PROMPT + SPEC_OUTPUT + k + 16  # + a KV block's rounding
    fits = []
    for b in SPEC_BATCHES:
        # the reserve the run keeps (vLLM's sampler peak grows with its max_num_seqs, here b)
        config = spec_batch_spec(b, gpu, model, {})[1]
        reserve = config.kv_reserve_gb(g.name, g.mem_gb)
        capacity = kv_capacity_tokens(g, m, 1, config.engine.mem_utilization, reserve)
        if b * per_request <= capacity:
            fits.append(b)
    return tuple(fits)


def spec_batch_spec(batch: int, gpu: str, model: str, knobs: dict) -> tuple:
    """(workload, config): `batch` requests arriving together, all prompts prefilled in ONE
    step (a token budget of batch x prompt), so their TPOT counts decode (verify) steps only."""
    workload = requests_from_rows([(0.0, SPEC_PROMPT, SPEC_OUTPUT)] * batch)
    config = with_overrides(
        SimConfig(),
        {
            "gpu": gpu,
            "model": model,
            "max_num_seqs": batch,
            "max_num_batched_tokens": max(batch * SPEC_PROMPT, 2048),
            **knobs,
        },
    )
    return workload, config


def spec_sweep_specs(method, k, accept, alpha, gpu, model) -> list:
    """(curve id, batch, workload, config) of every point of the chart: speculation off ("off")
    and each curve of `spec_curves`, at each batch size of `spec_batches`."""
    curves = [("off", {})] + [
        (cid, spec_knobs(method, k, acc)) for cid, acc in spec_curves(accept, alpha, k)
    ]
    return [
        (cid, batch, *spec_batch_spec(batch, gpu, model, knobs))
        for cid, knobs in curves
        for batch in spec_batches(gpu, model, k)
    ]


def spec_table(specs, runs) -> list[dict]:
    """One row per speculative point: its mean TPOT, the same batch's TPOT without speculation,
    their ratio (< 1: speculation pays), and the run's acceptance figures."""
    tpot = {}
    for (cid, batch, _, _), run in zip(specs, runs, strict=True):
        tpot[cid, batch] = (float(run.requests.tpot_s.mean()), run.meta.get("speculation") or {})
    rows = []
    for (cid, batch), (seconds, spec) in tpot.items():
        if cid == "off":
            continue
        off = tpot["off", batch][0]
        rows.append(
            {
                "curve": cid,
                "batch": batch,
                "tpot_off_ms": 1000 * off,
                "tpot_on_ms": 1000 * seconds,
                "ratio": seconds / off,
                "acceptance_rate": spec.get("acceptance_rate"),
                "tokens_per_verify": spec.get("tokens_per_verify"),
            }
        )
    return rows


def crossover_batch(batches, ratios) -> float | None:
    """The batch size at which speculation stops paying: where the ratio first reaches 1,
    interpolated on log2(batch); None if it stays below 1 (and the first batch if it never was)."""
    import math

    pairs = list(zip(batches, ratios, strict=True))
    if pairs and pairs[0][1] >= 1:
        return float(pairs[0][0])
    for (b0, r0), (b1, r1) in zip(pairs[:-1], pairs[1:], strict=True):
        if r0 < 1 <= r1:
            x0, x1 = math.log2(b0), math.log2(b1)
            return float(2 ** (x0 + (1 - r0) * (x1 - x0) / (r1 - r0)))
    return None


def crossover_lines(table, labels: dict[str, str], T) -> list[str]:
    """One sentence per curve of a ratio table (curve, batch, ratio): where speculation stops
    paying, that it still pays at the largest batch, or that it costs from the smallest."""
    lines = []
    for cid in dict.fromkeys(table.curve):
        rows = table[table.curve == cid].sort_values("batch")
        at = crossover_batch(rows.batch.tolist(), rows.ratio.tolist())
        name, last, first = labels[cid], rows.iloc[-1], rows.iloc[0]
        if at is None:
            lines.append(T("spec.cross.none", curve=name, batch=int(last.batch), ratio=last.ratio))
        elif at <= first.batch:
            lines.append(
                T("spec.cross.first", curve=name, batch=int(first.batch), ratio=first.ratio)
            )
        else:
            lines.append(T("spec.cross.at", curve=name, batch=at))
    return lines


def spec_timeline_specs(method, k, accept, alpha, gpu, model) -> list:
    """A few requests arriving together, speculation off and on (vLLM's default budget)."""
    d = SPEC_TIMELINE
    rows = [(i * d["gap_s"], d["prompt"], d["output"]) for i in range(d["requests"])]
    workload = requests_from_rows(rows)
    base = with_overrides(SimConfig(), {"gpu": gpu, "model": model})
    on = with_overrides(base, spec_knobs(method, k, spec_acceptance(accept, alpha, k)))
    return [("off", workload, base), ("on", workload, on)]
