"""Differential tests with speculative decoding: PD Lab's `vllm` policy against vLLM 0.33's own.

The real V1 scheduler (vllm 0.33.0, `.venv-vllm-v1`) is built with a real `SpeculativeConfig`
(ngram, draft_model or eagle; tests/refsched/drive_vllm_v1.py) and stepped with fake model
outputs. Acceptance is not something a scheduler decides, so both sides get the SAME draws: PD
Lab's `DrawnSpeculator` (sim/core/speculation.py) gives each request's j-th sampling event an
accepted count, and the driver hands exactly that to vLLM's `update_from_output` (1 + accepted
sampled tokens) and k drafts to `update_draft_token_ids`, as 0.33's V2 model runner does. From
there the schedulers are on their own: which drafts fit the budget, the draft model's input rows,
the lookahead KV slots (and the preemptions they cause), the padding of a waiting request to
1 + k, the rollback of rejected drafts, EAGLE's hash lookahead in the prefix cache.

Compared in every step: tokens scheduled per request, drafts scheduled (and how many are
padding) and accepted, computed tokens after the rollback, prefix-cache hits, preemptions; at
the end, every request's output tokens.
"""

from __future__ import annotations

import random

import pytest
from refsched.client import require_reference, run_reference
from test_vllm_differential import PLENTY, Case, R, run_ours, to_reference

from sim.config import SimConfig, with_overrides
from sim.core.speculation import speculator_for


def spec_case(name, method, knobs, blocks, rows, k=3, acceptance="", seed=0) -> Case:
    spec = {"speculative": method, "num_speculative_tokens": k, "spec_seed": seed}
    if acceptance:
        spec["spec_acceptance"] = acceptance
    return Case(name, "vllm", {**knobs, **spec}, blocks, rows)


def to_spec_reference(case: Case) -> dict:
    """The case in the driver's protocol, with the speculative config and every request's draws."""
    doc = to_reference(case)
    knobs = with_overrides(SimConfig(policy="vllm"), case.knobs).knobs
    doc["config"]["speculative"] = {
        "method": knobs.speculative,
        "num_speculative_tokens": knobs.num_speculative_tokens,
    }
    speculator = speculator_for(knobs)
    for request, (_step, spec) in zip(doc["requests"], case.specs(), strict=True):
        draws = speculator.draws_for(spec.request_id, spec.output_tokens)
        request["spec"] = [list(d) for d in draws]
    return doc


def compare_spec(case: Case, reference: dict) -> None:
    assert reference["error"] is None, f"{case.name}: the reference raised {reference['error']}"
    steps, outputs = run_ours(case)
    theirs = reference["steps"]
    assert len(steps) == len(theirs), f"{case.name}: {len(steps)} steps vs vLLM's {len(theirs)}"
    for k, (ours, real) in enumerate(zip(steps, theirs, strict=True)):
        where = f"{case.name}: step {k}"
        scheduled = {int(r): n for r, n in real["scheduled"].items()}
        assert ours.scheduled == scheduled, (
            f"{where}\n  PD Lab: {ours.scheduled}\n  vLLM: {scheduled}"
        )
        spec = {int(r): tuple(v) for r, v in real.get("spec", {}).items()}
        assert ours.spec == spec, (
            f"{where}: drafts (scheduled, padding, accepted) {ours.spec} != {spec}"
        )
        computed = {int(r): n for r, n in real.get("computed", {}).items()}
        assert ours.computed == computed, (
            f"{where}: computed after rollback {ours.computed} != {computed}"
        )
        cached = {int(r): n for r, n in real.get("cached", {}).items() if n}
        assert ours.cached == cached, f"{where}: cache hits {ours.cached} != {cached}"
        preempted = sorted(int(r) for r in real["preempted"])
        assert sorted(ours.preempted) == preempted, f"{where}: preemptions differ"
    assert outputs == {int(r): n for r, n in reference["outputs"].items()}


# ---- the workloads ------------------------------------------------------------------------

LOW = "0.5,0.25,0.12"  # a weak drafter: many rollbacks
HIGH = "0.95,0.9,0.85,0.8,0.75"  # a strong one: long accepted runs, requests end mid-verify
THREE = [R(0, 40, 20), R(0, 100, 20), R(2, 300, 20)]


def _random_spec_case(seed: int, method: str) -> Case:
    """Mixed prompts and arrivals, a random budget, k, acceptance and (sometimes) tight KV,
    shared prefixes and one-token prompts (the padding path)."""
    rng = random.Random(1000 + seed)
    rows = []
    for _ in range(rng.randint(5, 12)):
        prompt = rng.choice([1, rng.randint(2, 60), rng.randint(60, 700), rng.randint(700, 2000)])
        group, prefix = "", 0
        if rng.random() < 0.3:
            group, prefix = rng.choice("ab"), min(prompt, rng.choice([16, 64, 100]))
        rows.append(
            R(rng.randint(0, 20), prompt, rng.randint(1, 40), rng.randint(0, 3), group, prefix)
        )
    longest = max(p + o for _, p, o, *_ in rows)
    tight = rng.random() < 0.4
    budget = rng.choice([32, 64, 256, 2048])
    knobs = {
        "max_num_batched_tokens": budget,
        "max_num_seqs": min(budget, rng.choice([4, 16, 256])),
        "long_prefill_token_threshold": rng.choice([0, 0, 48, 300]),
        "scheduling_policy": rng.choice(["fcfs", "priority"]),
        "enable_prefix_caching": rng.random() < 0.7,
    }
    k = rng.choice([1, 2, 3, 5])
    acceptance = rng.choice(["", LOW, HIGH])
    blocks = (longest // 16 + 12) if tight else PLENTY
    name = f"spec-{method}-random-{seed}{'-tight' if tight else ''}"
    return spec_case(name, method, knobs, blocks, rows, k, acceptance, seed)


SPEC_CASES = [
    spec_case("ngram-three-requests", "ngram", {"max_num_batched_tokens": 64}, PLENTY, THREE),
    spec_case("draft-three-requests", "draft", {"max_num_batched_tokens": 64}, PLENTY, THREE),
    spec_case("eagle-three-requests", "eagle", {"max_num_batched_tokens": 64}, PLENTY, THREE),
    spec_case(
        "budget-cuts-drafts",  # 6 decoders x (1 + 3) > 18: the last ones get fewer drafts
        "ngram",
        {"max_num_batched_tokens": 18, "max_num_seqs": 16},
        PLENTY,
        [R(0, 3, 30) for _ in range(6)],
    ),
    spec_case(
        "draft-model-input-rows",  # a draft model takes one more row per request
        "draft",
        {"max_num_batched_tokens": 18, "max_num_seqs": 16},
        PLENTY,
        [R(0, 3, 30) for _ in range(6)],
    ),
    spec_case(
        "one-token-prompt-padded",  # a 1-token prompt arrives while others decode: 1 + k
        "eagle",
        {"max_num_batched_tokens": 64},
        PLENTY,
        [R(0, 40, 30), R(0, 50, 30), R(3, 1, 10), R(6, 1, 10)],
    ),
    spec_case(
        "padding-does-not-fit",  # no room for 1 + k: the waiting loop stops, no 1-token fallback
        "ngram",
        {"max_num_batched_tokens": 18, "max_num_seqs": 16},
        PLENTY,
        [R(0, 3, 20) for _ in range(4)] + [R(2, 1, 5)],
    ),
    spec_case(
        "lookahead-preempts-eagle",  # KV slots for k more tokens: eagle preempts before ngram
        "eagle",
        {"max_num_batched_tokens": 64},
        13,
        [R(0, 60, 40) for _ in range(3)],
    ),
    spec_case(
        "lookahead-preempts-ngram",
        "ngram",
        {"max_num_batched_tokens": 64},
        13,
        [R(0, 60, 40) for _ in range(3)],
    ),
    spec_case(
        "kv-pressure-priority-draft",
        "draft",
        {"max_num_batched_tokens": 512, "scheduling_policy": "priority"},
        70,
        [R(0, 200, 120, prio=i % 3) for i in range(6)],
    ),
    spec_case(
        "eagle-prefix-hash-lookahead",  # a 64-token shared prefix hits 48 under eagle
        "eagle",
        {"max_num_batched_tokens": 256},
        PLENTY,
        [R(i, 100, 8, group="sys", prefix=64) for i in range(6)],
    ),
    spec_case(
        "preempt-then-cache-hit-resumes-padded",  # resumed with all but 1 token cached: padded
        "ngram",
        {"max_num_batched_tokens": 256},
        60,
        [R(0, 300, 200), R(0, 300, 200), R(5, 300, 50)],
    ),
    spec_case(
        "weak-drafter-rollbacks",
        "eagle",
        {"max_num_batched_tokens": 512},
        PLENTY,
        [R(i, 200, 60) for i in range(8)],
        4,
        LOW,
    ),
    spec_case(
        "strong-drafter-ends-mid-verify",  # accepted tokens past max_tokens are trimmed
        "draft",
        {"max_num_batched_tokens": 512},
        PLENTY,
        [R(i, 50, 7 + i) for i in range(8)],
        5,
        HIGH,
    ),
    spec_case(
        "long-prompt-blocks-verifies",
        "ngram",
        {"max_num_batched_tokens": 256, "long_prefill_token_threshold": 64},
        PLENTY,
        [R(0, 3000, 4)] + [R(1 + i, 80, 25) for i in range(6)],
    ),
    spec_case(
        "chunking-off",
        "eagle",
        {"max_num_batched_tokens": 4096, "enable_chunked_prefill": False},
        PLENTY,
        [R(i // 2, 300 + 100 * (i % 3), 15) for i in range(8)],
    ),
    *[_random_spec_case(seed, m) for seed in range(6) for m in ("ngram", "draft", "eagle")],
    # vLLM's V1 model runner: an n-gram miss drafts nothing (the next step is a plain decode)
    *[
        spec_case(
            f"v1-runner-ngram-{seed}",
            "ngram",
            {"max_num_batched_tokens": budget, "model_runner": "v1"},
            PLENTY,
            [R(i % 5, 30 + 40 * i, 20 + 3 * i) for i in range(8)],
            k,
            "",
            seed,
        )
        for seed, budget, k in ((0, 64, 3), (1, 256, 5), (2, 32, 2))
    ],
]


@pytest.fixture(scope="module")
def spec_reference():
    require_reference("v1")
    docs = [to_spec_reference(c) for c in SPEC_CASES]
    return {r["name"]: r for r in run_reference("v1", docs)}


@pytest.mark.parametrize("case", SPEC_CASES, ids=lambda c: c.name)
def test_speculative_vllm_matches_vllm_033_scheduler(case, spec_reference):
    compare_spec(case, spec_reference[case.name])


def test_the_speculative_suite_is_wide():
    """At least 15 workloads (issue 31), every method, and every path the mirror has: drafts
    cut by the budget, padding, preemption under lookahead, rollbacks and trimmed ends."""
    assert len(SPEC_CASES) >= 15
    assert any(c.knobs.get("model_runner") == "v1" for c in SPEC_CASES)
    methods = {
        with_overrides(SimConfig(policy="vllm"), c.knobs).knobs.speculative for c in SPEC_CASES
    }
    assert methods == {"ngram", "draft", "eagle"}
    paths = {"padded": False, "preempted": False, "rolled back": False, "cut": False}
    for case in SPEC_CASES:
        steps, _ = run_ours(case)
        for step in steps:
            for drafts, padding, accepted in step.spec.values():
                paths["padded"] |= padding > 0
                paths["rolled back"] |= accepted < drafts - padding
            paths["preempted"] |= bool(step.preempted)
            k = with_overrides(SimConfig(policy="vllm"), case.knobs).knobs.num_speculative_tokens
            paths["cut"] |= any(0 < d < k for d, _, _ in step.spec.values())
    assert all(paths.values()), paths
