"""Differential tests: PD Lab's vLLM policies decide every step as the real vLLM schedulers do.

The real schedulers run in virtualenvs of their own (scripts/refsched_env.sh): vLLM V1 from
vllm 0.33.0 (`vllm`, and `short-first` as vLLM's priority scheduling with priority = prompt
length, aging off) and vLLM V0 from vllm 0.10.2 (`vllm-v0` and `prefill-first`). Both
sides get the same requests at the same step indices (tests/refsched/client.py has the protocol)
and must schedule the same number of tokens for every request in every step, preempt the same
requests, take the same tokens from the prefix cache, and give every request all its tokens.

Where the two must differ, and why the comparison is still exact:
- The real scheduler has no clock: it is stepped with fake model outputs, and "time" is the step
  index. PD Lab's side is `sim.stepper.run_steps`, the same Engine and policy objects that
  `simulate()` prices with the cost model, stepped the same way. So these tests prove the step
  SEQUENCE; when each step ends is the cost model's business (tested elsewhere).
- Prompts have token ids on the vLLM side and only lengths (plus prefix groups / hash ids) on
  ours; the ids are built from the same description (shared prefix tokens per group, every other
  token unique to its request), so the prefix cache sees the same sharing on both sides.
- Both sides get the same `kv_blocks`; vLLM V1's block pool keeps block 0 as the null block, and
  so does PD Lab's `vllm` (`null_blocks`): N - 1 usable.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field

import pytest
from refsched.client import require_reference, run_reference, token_ids

from sim.config import SimConfig, with_overrides
from sim.core.request import HASH_BLOCK, RequestSpec
from sim.stepper import run_steps

V1_KNOBS = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "long_prefill_token_threshold",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "scheduler_reserve_full_isl",
    "scheduling_policy",
)
V1_POLICIES = ("vllm", "short-first")  # both run against the real V1 scheduler


@dataclass
class Case:
    """One workload and configuration, described once for both sides."""

    name: str
    policy: str  # vllm | short-first | vllm-v0 | prefill-first
    knobs: dict
    kv_blocks: int
    # (arrival step, prompt tokens, output tokens, priority, prefix group, prefix tokens, hashes)
    requests: list[tuple] = field(default_factory=list)
    cpu_blocks: int = 0  # V0: host blocks for preemption_mode=swap (vLLM's num_cpu_blocks)

    def specs(self) -> list[tuple[int, RequestSpec]]:
        out = []
        for i, (step, prompt, output, prio, group, prefix, hashes) in enumerate(self.requests):
            spec = RequestSpec(
                i, step + i * 1e-3, prompt, output, prio, group, prefix, tuple(hashes)
            )
            out.append((step, spec))
        return out


def R(step, prompt, output, prio=0, group="", prefix=0, hashes=()):  # noqa: N802 (a row)
    return (step, prompt, output, prio, group, prefix, tuple(hashes))


def to_reference(case: Case) -> dict:
    """The case in the drivers' JSON protocol."""
    k = case.knobs
    longest = max(p + o for _, p, o, *_ in case.requests)
    if case.policy in V1_POLICIES:
        chunked = k.get("enable_chunked_prefill", True)
        ours = with_overrides(SimConfig(policy=case.policy), k).knobs.for_gpu("H100-SXM", 80)
        # Defaults resolved as ours; short-first is vLLM's priority scheduling (below).
        config = {name: getattr(ours, name, "priority") for name in V1_KNOBS}
        config["num_gpu_blocks"] = case.kv_blocks  # both keep block 0 as the null block
        config["max_model_len"] = (
            k["max_num_batched_tokens"] if not chunked else max(longest + 16, 4096)
        )
    else:
        chunked = case.policy == "vllm-v0"
        config = {
            "max_num_batched_tokens": k["max_num_batched_tokens"],
            "max_num_seqs": k.get("max_num_seqs", 256),
            "enable_chunked_prefill": chunked,
            "enable_prefix_caching": False,
            "max_num_partial_prefills": k.get("max_num_partial_prefills", 1),
            "max_long_partial_prefills": k.get("max_long_partial_prefills", 1),
            "long_prefill_token_threshold": k.get("long_prefill_token_threshold", 0),
            "num_gpu_blocks": case.kv_blocks,
            "num_cpu_blocks": case.cpu_blocks,
            "preemption_mode": k.get("preemption_mode"),
            # V0's automatic "long" threshold is 4% of max_model_len: PD Lab assumes 131072.
            "max_model_len": 131072 if chunked else k["max_num_batched_tokens"],
        }
    config["block_size"] = 16

    def priority(spec: RequestSpec) -> int:  # short-first: priority = prompt length
        return spec.prompt_tokens if case.policy == "short-first" else spec.priority

    requests = [
        {
            "id": str(spec.request_id),
            "arrival_step": step,
            "arrival_time": spec.arrival_s,
            "priority": priority(spec),
            "prompt_token_ids": token_ids(spec),
            "max_tokens": spec.output_tokens,
        }
        for step, spec in case.specs()
    ]
    return {"name": case.name, "config": config, "requests": requests, "max_steps": 20000}


def run_ours(case: Case):
    config = with_overrides(SimConfig(policy=case.policy), case.knobs)
    return run_steps(case.specs(), config, case.kv_blocks, swap_blocks=case.cpu_blocks)


def compare(case: Case, reference: dict) -> None:
    assert reference["error"] is None, f"{case.name}: the reference raised {reference['error']}"
    steps, outputs = run_ours(case)
    theirs = reference["steps"]
    for k in range(max(len(steps), len(theirs))):
        ours_k = steps[k].scheduled if k < len(steps) else "(no step)"
        theirs_k = (
            {int(r): n for r, n in theirs[k]["scheduled"].items()}
            if k < len(theirs)
            else "(no step)"
        )
        assert ours_k == theirs_k, (
            f"{case.name}: step {k} differs\n  PD Lab: {ours_k}\n  vLLM:   {theirs_k}"
        )
        cached_theirs = {int(r): n for r, n in theirs[k].get("cached", {}).items() if n}
        assert steps[k].cached == cached_theirs, f"{case.name}: cache hits differ at step {k}"
        assert sorted(steps[k].preempted) == sorted(int(r) for r in theirs[k]["preempted"]), (
            f"{case.name}: preemptions differ at step {k}"
        )
    assert outputs == {int(r): n for r, n in reference["outputs"].items()}


# ---- the workloads ------------------------------------------------------------------------

DOC = [R(0, 3000, 4)] + [R(0, 300, 4) for _ in range(6)]  # the first workload run on the real V1
PLENTY = 20_000  # KV blocks: memory never binds


def _random_case(seed: int, policy: str, tight: bool | None = None, **extra) -> Case:
    """Mixed lengths and staggered arrivals; some seeds share prefixes or squeeze the KV cache
    (`tight` forces it either way). `extra` knobs are added as given."""
    rng = random.Random(seed)
    v1 = policy in V1_POLICIES
    budget = rng.choice([64, 256, 512, 2048])
    rows = []
    for _ in range(rng.randint(6, 14)):
        prompt = rng.choice([rng.randint(1, 60), rng.randint(60, 700), rng.randint(700, 3000)])
        group, prefix = "", 0
        if v1 and rng.random() < 0.4:
            group = rng.choice("ab")
            prefix = min(prompt, rng.choice([16, 100, 512]))
        rows.append(
            R(rng.randint(0, 25), prompt, rng.randint(1, 40), rng.randint(0, 3), group, prefix)
        )
    longest = max(p + o for _, p, o, *_ in rows)
    drawn_tight = rng.random() < 0.4
    tight = drawn_tight if tight is None else tight
    blocks = (longest // 16 + 8) if tight else PLENTY
    if policy == "prefill-first":
        budget = 4096  # V0 without chunking: every prompt must fit the budget whole
    knobs = {
        "max_num_batched_tokens": budget,
        "max_num_seqs": min(budget, rng.choice([4, 16, 256])),
    }
    if policy == "prefill-first":
        pass
    elif v1:
        knobs["long_prefill_token_threshold"] = rng.choice([0, 0, 48, 300])
        if policy == "vllm":
            knobs["scheduling_policy"] = rng.choice(["fcfs", "priority"])
    else:
        slots = rng.choice([1, 1, 2, 4])
        knobs["max_num_partial_prefills"] = slots
        knobs["max_long_partial_prefills"] = rng.randint(1, slots)
        knobs["long_prefill_token_threshold"] = rng.choice([0, 200, 1000])
    knobs.update(extra)
    tag = "".join(f"-{k}-{v}" for k, v in extra.items())
    name = f"{policy}-random-{seed}{tag}{'-tight' if tight else ''}"
    return Case(name, policy, knobs, blocks, rows)


def _mooncake_rows(n: int, scale: int = 8) -> list[tuple]:
    """Multi-turn conversations in Mooncake's form (hash ids per 512-token block), shrunk."""
    rows, next_id = [], 1000
    for conv in range(n // 3):
        hashes: list[int] = []
        for turn in range(3):
            grow = 2 + (conv + turn) % 3
            hashes += list(range(next_id, next_id + grow))
            next_id += grow
            prompt = len(hashes) * HASH_BLOCK - 100 * ((conv + turn) % 2)
            rows.append(R(conv * 2 + turn * scale, prompt, 8 + turn, hashes=list(hashes)))
    return rows


V1_CASES = [
    Case("doc-threshold-0", "vllm", {"max_num_batched_tokens": 2048}, PLENTY, DOC),
    Case(
        "doc-threshold-256",
        "vllm",
        {"max_num_batched_tokens": 2048, "long_prefill_token_threshold": 256},
        PLENTY,
        DOC,
    ),
    Case(
        "doc-chunking-off",
        "vllm",
        {"max_num_batched_tokens": 4096, "enable_chunked_prefill": False},
        PLENTY,
        DOC,
    ),
    Case(
        "four-prompts-together",
        "vllm",
        {"max_num_batched_tokens": 2048},
        PLENTY,
        [R(0, 200, 5) for _ in range(4)],
    ),
    Case(
        "max-num-seqs-3",
        "vllm",
        {"max_num_batched_tokens": 2048, "max_num_seqs": 3},
        PLENTY,
        [R(0, 100 + 10 * i, 6) for i in range(8)],
    ),
    Case(
        "long-first-then-chats",
        "vllm",
        {"max_num_batched_tokens": 512},
        PLENTY,
        [R(0, 6000, 3)] + [R(1 + 2 * i, 120, 10) for i in range(10)],
    ),
    Case(
        "fast-lane-threshold",
        "vllm",
        {"max_num_batched_tokens": 2048, "long_prefill_token_threshold": 512},
        PLENTY,
        [R(0, 9000, 3), R(0, 7000, 3)] + [R(2 * i, 200, 12) for i in range(8)],
    ),
    Case(
        "tiny-budget",
        "vllm",
        {"max_num_batched_tokens": 48},
        PLENTY,
        [R(i, 30 + 7 * i, 5) for i in range(12)],
    ),
    Case(
        "chunking-off-seqs",
        "vllm",
        {"max_num_batched_tokens": 1024, "max_num_seqs": 4, "enable_chunked_prefill": False},
        PLENTY,
        [R(i // 3, 150 + 50 * (i % 4), 9) for i in range(12)],
    ),
    Case(
        "kv-pressure-recompute",
        "vllm",
        {"max_num_batched_tokens": 512},
        70,
        [R(0, 200, 120) for _ in range(6)],
    ),
    Case(
        "kv-pressure-priority",
        "vllm",
        {"max_num_batched_tokens": 512, "scheduling_policy": "priority"},
        70,
        [R(0, 200, 120, prio=i % 3) for i in range(6)],
    ),
    Case(
        "priority-order",
        "vllm",
        {"max_num_batched_tokens": 256, "scheduling_policy": "priority"},
        PLENTY,
        [R(0, 500, 5, prio=2)] + [R(1, 100, 5, prio=p) for p in (3, 0, 1, 0)],
    ),
    Case(
        "shared-system-prompt",
        "vllm",
        {"max_num_batched_tokens": 2048},
        PLENTY,
        [R(i, 700, 6, group="sys", prefix=512) for i in range(10)],
    ),
    Case(
        "shared-prefix-same-step",
        "vllm",
        {"max_num_batched_tokens": 4096},
        PLENTY,
        [R(0, 600, 4, group="sys", prefix=512) for _ in range(5)],
    ),
    Case(
        "prefix-caching-off",
        "vllm",
        {"max_num_batched_tokens": 2048, "enable_prefix_caching": False},
        PLENTY,
        [R(i, 700, 6, group="sys", prefix=512) for i in range(10)],
    ),
    Case(
        "prefix-eviction",
        "vllm",
        {"max_num_batched_tokens": 1024},
        120,
        [R(4 * i, 600, 30, group=f"g{i % 3}", prefix=480) for i in range(12)],
    ),
    Case(
        "preempt-then-cache-hit",
        "vllm",
        {"max_num_batched_tokens": 256},
        60,
        [R(0, 300, 200), R(0, 300, 200), R(5, 300, 50)],
    ),
    Case(
        "multi-turn-hash-ids", "vllm", {"max_num_batched_tokens": 2048}, PLENTY, _mooncake_rows(12)
    ),
    Case(
        "multi-turn-hash-ids-tight",
        "vllm",
        {"max_num_batched_tokens": 2048},
        700,
        _mooncake_rows(12),
    ),
    Case(
        "lone-request-ignores-threshold",
        "vllm",
        {"max_num_batched_tokens": 1024, "long_prefill_token_threshold": 100},
        PLENTY,
        [R(0, 3000, 2), R(12, 50, 2)],
    ),
    *[_random_case(seed, "vllm") for seed in range(40)],
    # scheduler_reserve_full_isl=false (vllm/config/scheduler.py 190): admission checks only the
    # first chunk's blocks, so under KV pressure more prompts start and preempt each other.
    Case(
        "no-full-isl-long-prompts",
        "vllm",
        {"max_num_batched_tokens": 256, "scheduler_reserve_full_isl": False},
        60,
        [R(0, 600, 40), R(0, 600, 40), R(1, 600, 40), R(3, 100, 20), R(4, 100, 20)],
    ),
    Case(
        "no-full-isl-priority",
        "vllm",
        {
            "max_num_batched_tokens": 256,
            "scheduling_policy": "priority",
            "scheduler_reserve_full_isl": False,
        },
        70,
        [
            R(0, 500, 60, prio=2),
            R(0, 500, 60, prio=0),
            R(2, 400, 30, prio=1),
            R(2, 300, 30, prio=3),
        ],
    ),
    Case(
        "no-full-isl-prefix-eviction",
        "vllm",
        {"max_num_batched_tokens": 512, "scheduler_reserve_full_isl": False},
        85,
        [R(2 * i, 700, 40, group=f"g{i % 3}", prefix=480) for i in range(10)],
    ),
    *[
        _random_case(seed, "vllm", tight=True, scheduler_reserve_full_isl=False)
        for seed in range(300, 310)
    ],
    # short-first = vLLM's --scheduling-policy priority with priority = prompt length, aging off.
    # Each hand-made case schedules differently from plain FCFS vllm on the real scheduler.
    Case(
        "short-first-order",
        "short-first",
        {"max_num_batched_tokens": 256},
        PLENTY,
        [
            R(0, 2000, 4),
            R(0, 300, 4),
            R(1, 50, 5),
            R(1, 400, 3),
            R(2, 20, 6),
            R(2, 120, 4),
            R(9, 10, 3),
            R(9, 900, 2),
        ],
    ),
    Case(
        "short-first-kv-pressure",
        "short-first",
        {"max_num_batched_tokens": 512},
        70,
        [R(0, p, 100) for p in (300, 100, 260, 140, 220, 180)],
    ),
    Case(
        "short-first-threshold",
        "short-first",
        {"max_num_batched_tokens": 256, "max_num_seqs": 3, "long_prefill_token_threshold": 128},
        PLENTY,
        [R(0, 5000, 3), R(0, 700, 5)] + [R(1 + i, 400 - 37 * i, 8) for i in range(8)],
    ),
    Case(
        "short-first-chunking-off",
        "short-first",
        {"max_num_batched_tokens": 1024, "max_num_seqs": 4, "enable_chunked_prefill": False},
        PLENTY,
        [R(i // 3, 900 - 70 * i, 9) for i in range(12)],
    ),
    Case(
        "short-first-shared-prefix",
        "short-first",
        {"max_num_batched_tokens": 512},
        150,
        [R(i // 4, 700 - 60 * (i % 4), 20, group=f"g{i % 2}", prefix=512) for i in range(10)],
    ),
    Case(
        "short-first-no-full-isl",
        "short-first",
        {"max_num_batched_tokens": 256, "scheduler_reserve_full_isl": False},
        60,
        [R(0, 600, 40), R(0, 450, 40), R(1, 300, 40), R(3, 100, 20)],
    ),
    *[_random_case(seed, "short-first") for seed in range(400, 410)],
    # The null block (vllm/v1/core/block_pool.py:191): both sides get the same N blocks and only
    # N - 1 hold KV. Each of these schedules differently when PD Lab counts all N as usable.
    Case(
        "null-block-exact-fit",
        "vllm",
        {"max_num_batched_tokens": 512},
        26,  # two requests of 13 blocks each: they fit in 26, not in 25
        [R(0, 200, 8), R(0, 200, 8)],
    ),
    Case(
        "null-block-kv-pressure",
        "vllm",
        {"max_num_batched_tokens": 512},
        64,
        [R(i, 180 + 10 * i, 90) for i in range(8)],
    ),
    Case(
        "null-block-prefix-cache",
        "vllm",
        {"max_num_batched_tokens": 1024},
        48,
        [R(2 * i, 300, 60, group=f"g{i % 2}", prefix=256) for i in range(6)],
    ),
    Case(
        "null-block-short-first",
        "short-first",
        {"max_num_batched_tokens": 512},
        33,  # 32 usable: the four requests of 8 blocks each fit exactly; with 33 they do not bind
        [R(0, 100 + 10 * i, 20) for i in range(5)],
    ),
]

V0_CASES = [
    Case("v0-doc-one-slot", "vllm-v0", {"max_num_batched_tokens": 2048}, PLENTY, DOC),
    Case(
        "v0-doc-fast-lane",
        "vllm-v0",
        {
            "max_num_batched_tokens": 2048,
            "max_num_partial_prefills": 4,
            "max_long_partial_prefills": 1,
            "long_prefill_token_threshold": 1000,
        },
        PLENTY,
        DOC,
    ),
    Case("v0-doc-chunking-off", "prefill-first", {"max_num_batched_tokens": 4096}, PLENTY, DOC),
    Case(
        "v0-two-long-fast-lane",
        "vllm-v0",
        {
            "max_num_batched_tokens": 1024,
            "max_num_partial_prefills": 4,
            "max_long_partial_prefills": 1,
            "long_prefill_token_threshold": 2000,
        },
        PLENTY,
        [R(0, 8000, 3), R(0, 8000, 3)] + [R(1 + i, 150, 6) for i in range(8)],
    ),
    Case(
        "v0-kv-pressure",
        "vllm-v0",
        {"max_num_batched_tokens": 512},
        80,
        [R(0, 200, 120) for _ in range(6)],
    ),
    Case(
        "v0-prefill-first-pressure",
        "prefill-first",
        {"max_num_batched_tokens": 4096},
        80,
        [R(i, 200, 120) for i in range(6)],
    ),
    Case(
        "v0-prefill-first-seqs",
        "prefill-first",
        {"max_num_batched_tokens": 2048, "max_num_seqs": 3},
        PLENTY,
        [R(i // 2, 300, 7) for i in range(9)],
    ),
    *[_random_case(seed, "vllm-v0") for seed in range(100, 124)],
    *[_random_case(seed, "prefill-first") for seed in range(200, 208)],
    # Swap (vllm/core/scheduler.py 1751-1790, preemption_mode="swap"): running requests first,
    # swap-in only in a step that preempted nothing, swapped-in decodes ahead of the others
    # (chunked) or at the end (default), the watermark on swap-in. CPU blocks never run out
    # (vLLM V0 aborts the engine when they do, scheduler.py 1829-1834).
    Case(
        "v0-swap-kv-pressure",
        "vllm-v0",
        {"max_num_batched_tokens": 512, "preemption_mode": "swap"},
        80,
        [R(0, 200, 120) for _ in range(6)],
        cpu_blocks=1000,
    ),
    Case(
        "v0-swap-staggered",
        "vllm-v0",
        {"max_num_batched_tokens": 256, "preemption_mode": "swap"},
        60,
        [R(3 * i, 100 + 40 * (i % 3), 80) for i in range(8)],
        cpu_blocks=1000,
    ),
    Case(
        "v0-swap-seqs",
        "vllm-v0",
        {"max_num_batched_tokens": 512, "max_num_seqs": 4, "preemption_mode": "swap"},
        50,
        [R(i, 150, 100) for i in range(7)],
        cpu_blocks=1000,
    ),
    Case(
        "v0-swap-partial-prefills",
        "vllm-v0",
        {
            "max_num_batched_tokens": 512,
            "max_num_partial_prefills": 2,
            "max_long_partial_prefills": 1,
            "long_prefill_token_threshold": 300,
            "preemption_mode": "swap",
        },
        90,
        [R(2 * i, 60 + 90 * (i % 4), 90) for i in range(9)],
        cpu_blocks=1000,
    ),
    Case(
        "v0-prefill-first-swap",
        "prefill-first",
        {"max_num_batched_tokens": 4096, "preemption_mode": "swap"},
        80,
        [R(i, 200, 120) for i in range(6)],
        cpu_blocks=1000,
    ),
    Case(
        "v0-prefill-first-swap-staggered",
        "prefill-first",
        {"max_num_batched_tokens": 2048, "max_num_seqs": 5, "preemption_mode": "swap"},
        60,
        [R(4 * i, 120 + 30 * (i % 4), 70) for i in range(8)],
        cpu_blocks=1000,
    ),
    *[
        dataclasses.replace(
            _random_case(seed, policy, tight=True, preemption_mode="swap"), cpu_blocks=2000
        )
        # seeds whose runs do preempt (most V0 runs reserve whole prompts and never do)
        for seed, policy in [(s, "vllm-v0") for s in (504, 508, 510, 511, 521, 582, 583)]
        + [(s, "prefill-first") for s in (612, 614, 621, 626, 645, 661)]
    ],
]


@pytest.fixture(scope="module")
def v1_reference():
    require_reference("v1")
    return {r["name"]: r for r in run_reference("v1", [to_reference(c) for c in V1_CASES])}


@pytest.fixture(scope="module")
def v0_reference():
    require_reference("v0")
    return {r["name"]: r for r in run_reference("v0", [to_reference(c) for c in V0_CASES])}


@pytest.mark.parametrize("case", V1_CASES, ids=lambda c: c.name)
def test_vllm_policy_matches_vllm_033_scheduler(case, v1_reference):
    compare(case, v1_reference[case.name])


@pytest.mark.parametrize("case", V0_CASES, ids=lambda c: c.name)
def test_v0_policies_match_vllm_0102_scheduler(case, v0_reference):
    compare(case, v0_reference[case.name])


def test_swap_is_tested():
    """V0 swap workloads (#29): CPU blocks and preemption_mode=swap, for both V0 policies."""
    swap = [c for c in V0_CASES if c.cpu_blocks and c.knobs.get("preemption_mode") == "swap"]
    assert len(swap) >= 15
    assert {c.policy for c in swap} == {"vllm-v0", "prefill-first"}


def test_the_suite_is_as_wide_as_promised():
    """At least 30 V1 workloads covering each mechanism the issue names."""
    assert len(V1_CASES) >= 30
    knobs = [c.knobs for c in V1_CASES]
    assert any(k.get("enable_chunked_prefill") is False for k in knobs)
    assert any(k.get("long_prefill_token_threshold") for k in knobs)
    assert any(k.get("scheduling_policy") == "priority" for k in knobs)
    assert any(c.kv_blocks < 200 for c in V1_CASES)  # preemption
    assert any(r[4] or r[6] for c in V1_CASES for r in c.requests)  # shared prefixes
    no_reserve = [c for c in V1_CASES if c.knobs.get("scheduler_reserve_full_isl") is False]
    assert sum(c.kv_blocks < PLENTY for c in no_reserve) >= 2  # KV pressure: where it matters
    assert sum(c.policy == "short-first" for c in V1_CASES) >= 5
