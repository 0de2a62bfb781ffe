"""The harness that drives the REAL vLLM schedulers (tests/refsched/) reproduces the decisions
those schedulers were first seen to make when stepped by hand (the expected steps below).

The workload: one 3000-token prompt A and six 300-token prompts b0..b5,
all arriving at step 0, 4 output tokens each, budget 2048, plenty of KV blocks. Each engine
runs all its cases in one driver process (vLLM's import costs seconds). Skipped where the
venvs are missing (`bash scripts/refsched_env.sh` installs them); failed instead under CI.
"""

from __future__ import annotations

import pytest
from refsched import client

SHORTS = [f"b{j}" for j in range(6)]
ALL = ["A", *SHORTS]


def _prompt(seed: int, n: int) -> list[int]:
    return [(seed * 7919 + i) % 31000 + 1 for i in range(n)]


def doc_workload(name: str, max_tokens: int = 4, **config) -> dict:
    base = {
        "max_num_batched_tokens": 2048,
        "max_num_seqs": 256,
        "max_model_len": 65536,
        "enable_chunked_prefill": True,
        "long_prefill_token_threshold": 0,
        "enable_prefix_caching": False,
        "num_gpu_blocks": 4096,
        "block_size": 16,
        "scheduling_policy": "fcfs",
    }
    base.update(config)
    requests = [
        {
            "id": "A",
            "arrival_step": 0,
            "arrival_time": 0.0,
            "priority": 0,
            "prompt_token_ids": _prompt(1, 3000),
            "max_tokens": max_tokens,
        }
    ]
    for j, rid in enumerate(SHORTS):
        requests.append(
            {
                "id": rid,
                "arrival_step": 0,
                "arrival_time": 0.0,
                "priority": 0,
                "prompt_token_ids": _prompt(10 + j, 300),
                "max_tokens": max_tokens,
            }
        )
    return {"name": name, "config": base, "requests": requests, "max_steps": 200}


V1_CASES = [
    doc_workload("threshold 0"),
    doc_workload("threshold 256", long_prefill_token_threshold=256),
    # With chunking off vLLM requires max_num_batched_tokens >= max_model_len.
    doc_workload(
        "chunking off",
        enable_chunked_prefill=False,
        max_num_batched_tokens=4096,
        max_model_len=4096,
    ),
    {
        "name": "prefix caching",
        "config": {
            "enable_prefix_caching": True,
            "max_num_batched_tokens": 2048,
            "max_model_len": 4096,
            "num_gpu_blocks": 1024,
            "block_size": 16,
        },
        "requests": [
            {
                "id": "p0",
                "arrival_step": 0,
                "prompt_token_ids": list(range(100, 164)) + _prompt(2, 36),
                "max_tokens": 4,
            },
            {
                "id": "p1",
                "arrival_step": 1,
                "prompt_token_ids": list(range(100, 164)) + _prompt(3, 36),
                "max_tokens": 4,
            },
        ],
        "max_steps": 100,
    },
    {
        # 25 blocks = 24 usable (block 0 is V1's null block); each prompt needs 7 at
        # admission and 11 by its last token, so decoding runs out of blocks.
        "name": "preemption",
        "config": {"num_gpu_blocks": 25, "max_num_batched_tokens": 2048, "max_model_len": 4096},
        "requests": [
            {
                "id": str(i),
                "arrival_step": 0,
                "prompt_token_ids": _prompt(20 + i, 100),
                "max_tokens": 64,
            }
            for i in range(4)
        ],
        "max_steps": 1000,
    },
    {
        "name": "late arrival",
        "config": {"max_model_len": 4096},
        "requests": [
            {"id": "x", "arrival_step": 3, "prompt_token_ids": _prompt(5, 40), "max_tokens": 2}
        ],
        "max_steps": 50,
    },
    {
        "name": "invalid config",
        "config": {
            "enable_chunked_prefill": False,
            "max_num_batched_tokens": 100,
            "max_model_len": 4096,
        },
        "requests": [],
        "max_steps": 5,
    },
]

V0_CASES = [
    doc_workload("partial prefills 1", max_num_partial_prefills=1),
    doc_workload(
        "slots 4 long 1 threshold 1000",
        max_num_partial_prefills=4,
        max_long_partial_prefills=1,
        long_prefill_token_threshold=1000,
    ),
    doc_workload(
        "chunking off",
        enable_chunked_prefill=False,
        max_num_batched_tokens=4096,
        max_model_len=4096,
    ),
]


@pytest.fixture(scope="module")
def v1_results() -> dict[str, dict]:
    client.require_reference("v1")
    results = client.run_reference("v1", V1_CASES, timeout_s=300)
    return {r["name"]: r for r in results}


@pytest.fixture(scope="module")
def v0_results() -> dict[str, dict]:
    client.require_reference("v0")
    results = client.run_reference("v0", V0_CASES, timeout_s=300)
    return {r["name"]: r for r in results}


def _ok(result: dict) -> list[dict]:
    assert result["error"] is None, result["error"]
    return result["steps"]


def _all_finish(result: dict, max_tokens: int) -> None:
    outputs = result["outputs"]
    assert outputs == {rid: max_tokens for rid in outputs}, outputs
    finished = [rid for step in result["steps"] for rid in step["finished"]]
    assert sorted(finished) == sorted(outputs), "each request finishes exactly once"


# ---- vLLM V1 (0.33.0) ----------------------------------------------------------------------


def test_v1_threshold_0_last_chunk_shares_the_step_with_short_prompts(v1_results):
    res = v1_results["threshold 0"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == {"A": 2048}
    assert list(steps[1]["scheduled"].items()) == [
        ("A", 952),
        ("b0", 300),
        ("b1", 300),
        ("b2", 300),
        ("b3", 196),
    ]
    assert steps[2]["scheduled"] == {
        "A": 1,
        "b0": 1,
        "b1": 1,
        "b2": 1,
        "b3": 104,
        "b4": 300,
        "b5": 300,
    }
    assert steps[0]["cached"] == {"A": 0}
    assert all(not s["preempted"] for s in steps)
    _all_finish(res, 4)


def test_v1_threshold_256_caps_every_prompt_until_a_request_is_alone(v1_results):
    res = v1_results["threshold 256"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == dict.fromkeys(ALL, 256)
    for k in range(1, 5):
        assert steps[k]["scheduled"]["A"] == 256, k
    assert sorted(rid for k in range(5) for rid in steps[k]["finished"]) == SHORTS
    # Alone, the cap is not applied (PR #57951): the rest of A in one chunk.
    assert steps[5]["scheduled"] == {"A": 3000 - 5 * 256}
    _all_finish(res, 4)


def test_v1_chunking_off_admits_whole_prompts_that_fit_the_budget(v1_results):
    res = v1_results["chunking off"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == {"A": 3000, "b0": 300, "b1": 300, "b2": 300}
    assert steps[1]["scheduled"] == {
        "A": 1,
        "b0": 1,
        "b1": 1,
        "b2": 1,
        "b3": 300,
        "b4": 300,
        "b5": 300,
    }
    _all_finish(res, 4)


def test_v1_prefix_cache_hit_is_reported_in_cached(v1_results):
    res = v1_results["prefix caching"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == {"p0": 100}
    assert steps[1]["cached"] == {"p1": 64}
    assert steps[1]["scheduled"]["p1"] == 100 - 64  # cached tokens are not scheduled
    _all_finish(res, 4)


def test_v1_preemption_is_reported_and_every_request_still_finishes(v1_results):
    res = v1_results["preemption"]
    steps = _ok(res)
    preempted = [(k, rid) for k, s in enumerate(steps) for rid in s["preempted"]]
    assert preempted, "25 blocks must force a preemption"
    k, victim = preempted[0]
    assert victim == "2", "fcfs preempts the last running request"
    assert victim not in steps[k]["scheduled"]
    # It comes back as one prefill of its prompt plus the tokens it had generated.
    resumed = next(j for j in range(k + 1, len(steps)) if victim in steps[j]["scheduled"])
    assert victim in steps[resumed]["cached"]
    generated = sum(1 for s in steps[:k] if victim in s["scheduled"])
    assert steps[resumed]["scheduled"][victim] == 100 + generated
    _all_finish(res, 64)


def test_v1_steps_before_the_first_arrival_are_reported_empty(v1_results):
    steps = _ok(v1_results["late arrival"])
    assert steps[:3] == [{"scheduled": {}, "cached": {}, "preempted": [], "finished": []}] * 3
    assert steps[3]["scheduled"] == {"x": 40}
    assert len(steps) == 5 and steps[4]["finished"] == ["x"]


def test_v1_a_failing_case_reports_its_error_and_the_others_still_run(v1_results):
    res = v1_results["invalid config"]
    assert res["error"] and "max_num_batched_tokens" in res["error"]
    assert res["steps"] == []


# ---- vLLM V0 (0.10.2) ----------------------------------------------------------------------


def test_v0_one_partial_prefill_does_not_serialise_prompts(v0_results):
    res = v0_results["partial prefills 1"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == {"A": 2048}
    assert list(steps[1]["scheduled"].items()) == [
        ("b0", 300),
        ("b1", 300),
        ("b2", 300),
        ("b3", 196),
        ("A", 952),
    ]
    assert list(steps[2]["scheduled"].items())[:3] == [("b4", 300), ("b5", 300), ("b3", 104)]
    assert {rid: n for rid, n in steps[2]["scheduled"].items() if n == 1} == {
        "A": 1,
        "b0": 1,
        "b1": 1,
        "b2": 1,
    }
    _all_finish(res, 4)


def test_v0_partial_prefill_slots_split_the_budget(v0_results):
    res = v0_results["slots 4 long 1 threshold 1000"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == {
        "A": 512,
        "b0": 300,
        "b1": 300,
        "b2": 300,
        "b3": 300,
        "b4": 300,
        "b5": 36,
    }
    assert steps[1]["scheduled"] == {
        "A": 1024,
        "b5": 264,
        "b0": 1,
        "b1": 1,
        "b2": 1,
        "b3": 1,
        "b4": 1,
    }
    _all_finish(res, 4)


def test_v0_chunking_off_runs_no_decodes_in_a_step_that_admits_prompts(v0_results):
    res = v0_results["chunking off"]
    steps = _ok(res)
    assert steps[0]["scheduled"] == {"A": 3000, "b0": 300, "b1": 300, "b2": 300}
    assert steps[1]["scheduled"] == {"b3": 300, "b4": 300, "b5": 300}
    _all_finish(res, 4)


# ---- the client itself (no venv needed) ------------------------------------------------------


def test_require_reference_skips_locally_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(client, "venv_python", lambda engine: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="refsched_env.sh"):
        client.require_reference("v1")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="refsched_env.sh"):
        client.require_reference("v0")
    monkeypatch.setenv("CI", "")
    with pytest.raises(pytest.skip.Exception):
        client.require_reference("v0")


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown reference engine"):
        client.venv_python("v2")
