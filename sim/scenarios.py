"""The lessons' scenarios: one workload and one comparison per claim C1..C13 of the seed texts.

Notable features
- A `Scenario` names the claim it shows, says in one paragraph what to look at, and carries the
  workload plus the VARIANTS to compare (the first variant is what `python -m sim run --scenario`
  runs; `python -m sim compare --scenario` runs them all).
- Workloads are small and hand-made where the point is a mechanism (3 requests, one long prompt
  among chats), and drawn from the fitted Azure length distributions where the point is load.
- Default hardware: Llama-3.1-8B in BF16 on H100-SXM, as in the TNG measurements the seed cites,
  with the reference's textbook efficiencies (`profile=generic`, see `_cfg`).
- Default policy: `vllm` (vLLM V1 as of 0.33, whose step sequence the differential tests check
  against the real scheduler). Every variant label names the engine it shows where it is not V1:
  "V0" for vLLM's old engine (removed 2025-09), "SGLang", "static".
- PC1..PC3 are not seed claims: they show prefix caching (on by default in vLLM V1 and SGLang).
- tests/test_scenarios.py asserts each claim on the numbers these scenarios produce.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.policies import DEFAULT_POLICY
from sim.workloads.workload import WorkloadConfig, generate, load_mooncake, scale_to_rate, with_rate


@dataclass(frozen=True)
class Variant:
    """One configuration of a comparison, with a short label for tables and legends."""

    label: str
    config: SimConfig
    workload: WorkloadConfig | tuple[RequestSpec, ...] | None = None  # None = the scenario's
    aliases: tuple[str, ...] = ()  # earlier labels, so old scripts' --variant keeps working


@dataclass(frozen=True)
class Scenario:
    """A lesson's workload and the configurations it compares."""

    name: str
    claim: str  # C1..C13, the README's table "The lessons (claims C1..C13)"
    title: str
    description: str  # what it shows and what to compare
    workload: WorkloadConfig | tuple[RequestSpec, ...]
    variants: tuple[Variant, ...]
    window_s: tuple[float, float] | None = None  # a time window to count tokens in (C12)

    def requests(self, variant: Variant | None = None) -> list[RequestSpec]:
        """The workload (of `variant`, if it has its own) as a list of requests."""
        workload = self.workload
        if variant is not None and variant.workload is not None:
            workload = variant.workload
        if isinstance(workload, WorkloadConfig):
            return generate(workload)
        return list(workload)

    @property
    def config(self) -> SimConfig:
        """The default (first) variant's configuration."""
        return self.variants[0].config

    def variant(self, label: str) -> Variant:
        for v in self.variants:
            if label in (v.label, *v.aliases):
                return v
        raise ValueError(
            f"scenario {self.name} has no variant {label!r}; "
            f"choose one of: {', '.join(v.label for v in self.variants)}"
        )


def _cfg(policy: str = DEFAULT_POLICY, **knobs) -> SimConfig:
    # The lessons run on the reference's textbook efficiencies (§5.5: MFU 0.5, MBU 0.7, 3 ms a
    # step), not the profiles fitted to public benchmarks (sim/cost/profiles.py): each lesson is a
    # mechanism tuned to show itself clearly, and its claim (tests/test_scenarios.py) should not
    # move when a refit nudges an effective figure. The fitted ones serve user runs.
    return with_overrides(SimConfig(policy=policy), {"profile": "generic", **knobs})


def _v(label: str, policy: str = DEFAULT_POLICY, workload=None, aliases=(), **knobs) -> Variant:
    return Variant(label, _cfg(policy, **knobs), workload, tuple(aliases))


def requests_from_rows(rows) -> tuple[RequestSpec, ...]:
    """(arrival_s, prompt_tokens, output_tokens[, priority[, prefix_group, prefix_tokens]])
    rows -> specs, ids in arrival order."""
    rows = sorted(rows, key=lambda r: r[0])
    return tuple(RequestSpec(i, *row) for i, row in enumerate(rows))


def shared_system_prompt(n: int = 60, rate_per_s: float = 4.0, system: int = 2000) -> tuple:
    """Chats that all start with the same `system`-token system prompt, then 300 tokens of their
    own; Poisson arrivals (seeded)."""
    times = generate(WorkloadConfig(rate_per_s=rate_per_s, num_requests=n, seed=5))
    return requests_from_rows(
        [(r.arrival_s, system + 300, 150, 0, "system", system) for r in times]
    )


def rotating_prefixes(groups: int = 8, per_group: int = 6, prefix: int = 4000) -> tuple:
    """Requests cycling through `groups` long shared documents (one question per visit)."""
    rows = [
        (0.25 * i, prefix + 200, 60, 0, f"doc{i % groups}", prefix)
        for i in range(groups * per_group)
    ]
    return requests_from_rows(rows)


EXCERPTS = Path(__file__).resolve().parent.parent / "assets" / "traces"


def mooncake_excerpt(rate_per_s: float = 0.5) -> tuple:
    """The shipped excerpt of Mooncake's conversation trace (assets/traces/README.md), replayed
    at `rate_per_s` requests per second (same order, gaps scaled)."""
    requests = load_mooncake(EXCERPTS / "mooncake_conversation_excerpt.jsonl")
    return tuple(scale_to_rate(requests, rate_per_s))


def chats_and_one_long(long_prompt: int, long_at_s: float, n_chats: int = 8) -> tuple:
    """n chats already streaming (500-token prompts, long answers) and one long prompt later."""
    chats = [(0.05 * i, 500, 400) for i in range(n_chats)]
    return requests_from_rows([*chats, (long_at_s, long_prompt, 50)])


def long_prompts_then_chats(long_prompts, n_short: int = 20, gap_s: float = 0.1) -> tuple:
    """Long prompts at the given times, then short chats every `gap_s` seconds."""
    shorts = [(0.05 + gap_s * i, 200, 100) for i in range(n_short)]
    return requests_from_rows([*((t, n, 50) for t, n in long_prompts), *shorts])


CHAT_MIX = WorkloadConfig(rate_per_s=4.0, num_requests=200, prompt="chat", output="chat", seed=7)
LONGDOC_MIX = WorkloadConfig(
    rate_per_s=6.0, num_requests=300, prompt="chat+longdoc", output="chat", seed=11
)

_SCENARIOS = (
    Scenario(
        "c1-prefill-vs-decode",
        "C1",
        "Prefill is compute-bound, decode is bandwidth-bound",
        "Sixteen chats decode together, then an 8k-token prompt arrives. In the steps table the "
        "decode-only steps spend their time reading weights and KV (memory_s), while steps with a "
        "big prefill chunk spend it on arithmetic (compute_s): compare the two columns.",
        chats_and_one_long(8192, 0.6, n_chats=16),
        (_v("vLLM 2048", max_num_batched_tokens=2048, aliases=["chunked 2048"]),),
    ),
    Scenario(
        "c2-ttft-tpot",
        "C2",
        "TTFT = queueing + prefill; TPOT = the decode step",
        "A Poisson stream of chat requests (lengths fitted to the Azure conversation trace). Each "
        "request's TTFT splits into time queued and time prefilling; its TPOT is the decode step "
        "time. At the higher rate queueing grows TTFT; both are judged against the interactive "
        "targets TTFT <= 3 s and TPOT <= 0.3 s.",
        CHAT_MIX,
        (_v("4 req/s"), _v("24 req/s", workload=with_rate(CHAT_MIX, 24.0))),
    ),
    Scenario(
        "c3-concurrency",
        "C3",
        "Throughput grows with concurrency, then saturates",
        "128 requests wait at once; max_num_seqs caps how many run together. Total tokens/s grows "
        "almost linearly while decode is bandwidth-bound and flattens once prefill compute "
        "saturates the GPU; 1500-token prompts saturate later than 3000-token ones (TNG's "
        "Llama-3.1-8B/H100 measurement).",
        requests_from_rows([(0.0, 3000, 100)] * 128),
        tuple(
            _v(
                f"{prompt} tok x {c}",
                workload=requests_from_rows([(0.0, prompt, 100)] * 128),
                max_num_seqs=c,
                max_num_batched_tokens=8192,
            )
            for prompt in (3000, 1500)
            for c in (1, 2, 4, 8, 16, 32, 64, 128)
        ),
    ),
    Scenario(
        "c4-static-vs-continuous",
        "C4",
        "Static batching: smooth decodes, long waits",
        "The same arrivals under static batching (batch of 8, nobody joins mid-batch) and under "
        "continuous batching prefill-first. Static never interrupts a decode (best TPOT) but new "
        "requests wait for the whole batch (worst TTFT) and finished slots sit idle.",
        WorkloadConfig(rate_per_s=4.0, num_requests=32, prompt="chat", output="chat", seed=3),
        (_v("static", "static", batch_size=8), _v("prefill-first", "prefill-first")),
    ),
    Scenario(
        "c5-long-prompt-freeze",
        "C5",
        "Prefill-first freezes every stream for a long prompt",
        "Eight chats are streaming when a 16k-token prompt arrives. vLLM V0's default scheduler "
        "(chunked prefill off, like TGI) runs the whole prefill as one step: every stream stops "
        "for that long (white stall bars). vLLM V1 always chunks: the streams advance one token "
        "per 2048-token chunk instead.",
        chats_and_one_long(16384, 1.0),
        (
            _v("prefill-first (V0)", "prefill-first", aliases=["prefill-first"]),
            _v("vLLM 2048", max_num_batched_tokens=2048, aliases=["chunked 2048"]),
        ),
    ),
    Scenario(
        "c6-chunk-size",
        "C6",
        "The chunk size trades the long prompt's TTFT against ITL",
        "The C5 workload under vLLM V1 with budgets from 512 to 8192 tokens. Smaller "
        "chunks: the streaming chats' worst inter-token gap shrinks, the long prompt's TTFT grows "
        "(each chunk pays the step overhead and re-reads the KV before it).",
        chats_and_one_long(16384, 1.0),
        tuple(_v(f"chunk {b}", max_num_batched_tokens=b) for b in (512, 1024, 2048, 4096, 8192)),
    ),
    Scenario(
        "c7-prefill-queue-blocking",
        "C7",
        "One long prompt blocks the prefill queue",
        "A 32k-token prompt arrives first, then short chats every 100 ms. In today's vLLM (V1, "
        "long_prefill_token_threshold 0) the long prompt, first in line, takes the whole "
        "2048-token "
        "budget step after step, so every chat waits for the whole long prefill. Ordering the "
        "queue by length (short-first) does not help: the long prompt is already running. V1's "
        "fast lane caps the long prompt's share of each step (long_prefill_token_threshold below "
        "the budget); V0's fast lane (4 partial prefills, at most 1 long) did it with slots.",
        long_prompts_then_chats([(0.0, 32768)]),
        (
            _v("vLLM, threshold 0", max_num_batched_tokens=2048, aliases=["one prefill at a time"]),
            _v("short-first", "short-first", max_num_batched_tokens=2048),
            _v(
                "vLLM, threshold 512", max_num_batched_tokens=2048, long_prefill_token_threshold=512
            ),
            _v(
                "V0 fast lane",
                "vllm-v0",
                aliases=["fast lane"],
                max_num_partial_prefills=4,
                max_long_partial_prefills=1,
                long_prefill_token_threshold=10000,
            ),
        ),
    ),
    Scenario(
        "c8-fast-lane",
        "C8",
        "Parallel prefill with a long-prompt limit (vLLM V0)",
        "Two 20k-token prompts and a stream of chats under vLLM V0's chunked scheduler (vllm "
        "0.10.2; V0 was removed in 2025-09). Four partial prefills let chats start, but if both "
        "long prompts prefill together they slow each other; allowing at most one prompt over "
        "10,000 tokens (PR #10235) keeps a fast lane for the chats. Chats still decode slowly "
        "while a long prefill shares their steps. Today's vLLM ignores these two knobs: its fast "
        "lane is long_prefill_token_threshold (see C7).",
        long_prompts_then_chats([(0.0, 20000), (0.02, 20000)]),
        (
            _v("V0: 1 partial prefill", "vllm-v0", aliases=["1 partial prefill"]),
            _v(
                "V0: 4 partial, 4 long",
                "vllm-v0",
                aliases=["4 partial, 4 long"],
                max_num_partial_prefills=4,
                max_long_partial_prefills=4,
                long_prefill_token_threshold=10000,
            ),
            _v(
                "V0: 4 partial, 1 long",
                "vllm-v0",
                aliases=["4 partial, 1 long"],
                max_num_partial_prefills=4,
                max_long_partial_prefills=1,
                long_prefill_token_threshold=10000,
            ),
        ),
    ),
    Scenario(
        "c9-mixing-flaw",
        "C9",
        "Mixing prefill and decode in one step slows every decode",
        "Chats are streaming when a 16k-token prompt arrives. Even chunked (vLLM V1), the steps "
        "that carry its chunks are several times longer than decode-only steps, so every running "
        "stream "
        "slows (flagged 'slowed'). Disaggregated prefill/decode moves the prompt to another GPU.",
        chats_and_one_long(16384, 1.0),
        (
            _v("colocated", max_num_batched_tokens=2048, aliases=["colocated chunked"]),
            _v("1P1D", max_num_batched_tokens=2048, topology="disaggregated"),
        ),
    ),
    Scenario(
        "c10a-short-first-starvation",
        "C10a",
        "Penalising long prompts, and starvation",
        "A steady stream of short chats close to the server's capacity plus a few 12k-token "
        "prompts, under vLLM V1 (budget 2048). "
        "Short-first (vLLM's priority scheduling with priority = prompt length) serves chats "
        "before any waiting long prompt: chats gain, long prompts wait much longer. Aging (PD "
        "Lab's addition: a prompt waiting over 2 s jumps the queue) bounds it.",
        requests_from_rows(
            [(0.02 * i, 600, 30) for i in range(400)]
            + [(1.0, 12000, 20), (2.0, 12000, 20), (3.0, 12000, 20)]
        ),
        (
            _v("fcfs", max_num_batched_tokens=2048),
            _v("short-first", "short-first", max_num_batched_tokens=2048),
            _v("short-first + aging 2 s", "short-first", max_num_batched_tokens=2048, aging_s=2.0),
        ),
    ),
    Scenario(
        "c10b-length-router",
        "C10b",
        "A separate server for long prompts",
        "Two GPUs serve chats plus 5% long documents. Round-robin mixes long prompts into every "
        "server; the length router sends prompts of 8k+ tokens to one long-context server (which "
        "also takes chats when it has nothing else to do), so the chats' streams stay smooth.",
        LONGDOC_MIX,
        (
            _v("round-robin x2", topology="router", router="round-robin", num_instances=2),
            _v(
                "length router",
                topology="router",
                router="length",
                num_instances=2,
                length_threshold=8192,
            ),
        ),
    ),
    Scenario(
        "c10c-disaggregation",
        "C10c",
        "Disaggregated prefill and decode",
        "The same two GPUs as C10b, as two colocated instances or as one prefill and one decode "
        "worker joined by a 50 GB/s KV link (green). Decodes are no longer disturbed by prefills: "
        "worst-case inter-token gaps collapse; the prefill worker saturates first.",
        LONGDOC_MIX,
        (
            _v("colocated x2", topology="router", router="least-loaded", num_instances=2),
            _v("1P1D", topology="disaggregated"),
        ),
    ),
    Scenario(
        "c11-memory-pressure",
        "C11",
        "Out of KV memory: preemption by recompute or swap",
        "A KV cache of only 24k tokens and chats with long answers. New prefills take memory at "
        "once; when a running request cannot grow, the last admitted one is preempted: its KV is "
        "dropped and recomputed later (vLLM V1's only mode; its prefix cache may still hold the "
        "dropped blocks), or swapped to host memory over PCIe and back (vLLM V0).",
        requests_from_rows([(0.1 * i, 1500, 600) for i in range(24)]),
        (
            _v("recompute", kv_capacity_tokens=24000),
            _v(
                "swap (V0)",
                "vllm-v0",
                kv_capacity_tokens=24000,
                preemption_mode="swap",
                aliases=["swap"],
            ),
        ),
    ),
    Scenario(
        "c12-three-requests",
        "C12",
        "Three staggered requests, colocated vs disaggregated",
        "The seed's worked example: three requests arrive 1 s apart on L4 GPUs (P and D joined "
        "by NVLink-class bandwidth, as DistServe places them in one node), served prefill-first "
        "(vLLM V0's default) with DistServe's hand-off (token 1 made on P). Colocated, "
        "each new prefill interrupts the streams already running; disaggregated, the decode "
        "worker never stops. Count the tokens each request makes in the first 5 seconds: every "
        "request makes more when disaggregated, and the first one gains most.",
        requests_from_rows([(0.0, 2048, 200), (1.0, 2048, 200), (2.0, 2048, 200)]),
        (
            _v("colocated", "prefill-first", gpu="L4"),
            _v(
                "disaggregated",
                "prefill-first",
                gpu="L4",
                topology="disaggregated",
                kv_bandwidth_gb_s=450,
                disagg_protocol="distserve",
            ),
        ),
        window_s=(0.0, 5.0),
    ),
    Scenario(
        "c13-heterogeneous",
        "C13",
        "What next: different GPUs for P and D, and the network",
        "Disaggregation lets prefill and decode use different hardware: decode wants memory "
        "bandwidth (H200), prefill wants FLOPs (H100). The KV link matters too: over 25 GbE "
        "each hand-off of a long prompt takes a noticeable share of the latency.",
        LONGDOC_MIX,
        (
            _v("H100 + H100, IB", topology="disaggregated", kv_bandwidth_gb_s=50),
            _v(
                "H100 + H200, IB", topology="disaggregated", kv_bandwidth_gb_s=50, decode_gpu="H200"
            ),
            _v("H100 + H100, 25GbE", topology="disaggregated", kv_bandwidth_gb_s=3.1),
        ),
    ),
    Scenario(
        "pc1-shared-system-prompt",
        "PC1",
        "Prefix caching: a shared system prompt is prefilled once",
        "Sixty chats at 4 req/s, each starting with the same 2,000-token system prompt. With "
        "vLLM V1's automatic prefix caching (on by default) the system prompt's KV blocks are "
        "computed by the first request and found by every later one: only their own 300 tokens "
        "are prefilled (pale segments = tokens served from the cache), and TTFT drops.",
        shared_system_prompt(),
        (_v("caching on"), _v("caching off", enable_prefix_caching=False)),
    ),
    Scenario(
        "pc2-multi-turn",
        "PC2",
        "Prefix caching on real conversations (Mooncake trace)",
        "194 requests of Mooncake's conversation trace (FAST'25) that share long prefixes with "
        "earlier ones (multi-turn chats, shared documents), replayed at 0.25 req/s on one H100. "
        "About 70% of their prompt blocks were seen before: with caching the GPU prefills a "
        "fraction of the tokens and keeps up; without it the queue grows.",
        mooncake_excerpt(0.25),
        (_v("caching on"), _v("caching off", enable_prefix_caching=False)),
    ),
    Scenario(
        "pc3-cache-eviction",
        "PC3",
        "Prefix caching under memory pressure: eviction",
        "48 questions rotate over 8 long documents (4,000 tokens each). With room for every "
        "document's KV, each document is prefilled once. With a KV cache of 24k tokens the "
        "least recently used cached blocks are evicted before their document comes round again, "
        "and the hit rate collapses.",
        rotating_prefixes(),
        (
            _v("KV 200k tokens", kv_capacity_tokens=200_000),
            _v("KV 24k tokens", kv_capacity_tokens=24_000),
        ),
    ),
)

SCENARIOS: dict[str, Scenario] = {s.name: s for s in _SCENARIOS}


def get_scenario(name: str) -> Scenario:
    """The scenario called `name` (case-insensitive; 'c5' alone also works)."""
    key = name.strip().lower()
    if key in SCENARIOS:
        return SCENARIOS[key]
    matches = [s for s in SCENARIOS.values() if s.claim.lower() == key]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"unknown scenario {name!r}; choose one of: {', '.join(SCENARIOS)}")
