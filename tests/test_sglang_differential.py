"""Differential tests: PD Lab's `sglang` policy decides every step as SGLang 0.5.23's Scheduler.

The real Scheduler runs in `.venv-sglang` (scripts/refsched_env.sh), built by its own __init__ on
this CPU with the model runner and GPU kernels stubbed (tests/refsched/drive_sglang.py;
tests/refsched/sglang/ holds the stubs and the tiny model config). Both sides get the same
requests at the same step indices and must give the same tokens to every request in every step
(a prefill chunk's extend length, 1 per decode), retract the same requests, take the same tokens
from the radix cache, and give every request all its tokens.

How the two sides line up:
- No clock on either side: the step index is the time (sim.stepper.run_steps on ours, the body of
  Scheduler.event_loop_normal on SGLang's, overlap scheduling off).
- KV memory: SGLang's token pool holds `max_total_num_tokens` (read back from the real Scheduler,
  which rounds the requested `max_total_tokens` to its pages); PD Lab gets the same tokens in
  blocks of `page_size` tokens (`block_size` = page size, 1 or 16).
- `max_running_requests`: SGLang derives a cap from the pool when it is not set; PD Lab is given
  the cap the real Scheduler reports, so the two agree on it.
- Prompts: SGLang gets token ids, PD Lab lengths and prefix groups; ids are built from the same
  description (shared prefix tokens per group, every other token unique), so both radix caches
  see the same sharing.
- Every request is fixed-length (ignore_eos, max_new_tokens), as all of PD Lab's are.

Not expressible here: the overlap event loop (SGLang's server default; its one-step lag of result
processing is not a scheduling rule PD Lab models), EOS before max_new_tokens (PD Lab has none),
and new_token_ratio with variable-length requests (0.5.23 reserves fixed-length output in full).

Cases that still differ are marked `xfail(strict=True)` with the difference (issue #29's
numbering) as the reason: they fail the suite as soon as they start to agree, so the list
stays true.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest
from refsched.client import require_reference, run_reference, token_ids

from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.stepper import run_steps

ENGINE = "sglang"


@dataclass
class Case:
    name: str
    knobs: dict  # PD Lab's sglang knobs (SglangKnobs), the same names as SGLang's flags
    page_size: int = 1
    max_total_tokens: int = 65536
    # (arrival step, prompt tokens, output tokens, prefix group, prefix tokens)
    requests: list[tuple] = field(default_factory=list)
    # False: SGLang gets requests without ignore_eos (they still run to max_new_tokens: the
    # fake token is never EOS), so it reserves their output by new_token_ratio, admits more and
    # retracts; PD Lab's knob for that is reserve_fixed_output=False.
    ignore_eos: bool = True
    differs: str = ""  # why it is known to differ (xfail reason), "" = identical

    def specs(self) -> list[tuple[int, RequestSpec]]:
        return [
            (step, RequestSpec(i, step + i * 1e-3, prompt, output, 0, group, prefix))
            for i, (step, prompt, output, group, prefix) in enumerate(self.requests)
        ]


def R(step, prompt, output, group="", prefix=0):  # noqa: N802 (a row)
    return (step, prompt, output, group, prefix)


def to_reference(case: Case) -> dict:
    k = case.knobs
    config = {
        "chunked_prefill_size": k.get("chunked_prefill_size", 2048),
        "max_prefill_tokens": k.get("max_prefill_tokens", 16384),
        "max_running_requests": k.get("max_running_requests", 0),
        "enable_mixed_chunk": k.get("enable_mixed_chunk", False),
        "disable_radix_cache": not k.get("enable_prefix_caching", True),
        "schedule_policy": k.get("schedule_policy", "fcfs"),
        "page_size": case.page_size,
        "max_total_tokens": case.max_total_tokens,
        "ignore_eos": case.ignore_eos,
    }
    requests = [
        {
            "id": str(spec.request_id),
            "arrival_step": step,
            "prompt_token_ids": token_ids(spec),
            "max_tokens": spec.output_tokens,
        }
        for step, spec in case.specs()
    ]
    return {"name": case.name, "config": config, "requests": requests, "max_steps": 5000}


def run_ours(case: Case, info: dict):
    knobs = {"chunked_prefill_size": 2048, **case.knobs}
    knobs["max_running_requests"] = info["max_running_requests"]
    knobs["block_size"] = case.page_size
    knobs["reserve_fixed_output"] = case.ignore_eos
    config = with_overrides(SimConfig(policy="sglang"), knobs)
    blocks = info["max_total_num_tokens"] // case.page_size
    return run_steps(case.specs(), config, blocks, max_steps=5000)


def first_difference(case: Case, reference: dict) -> str | None:
    """None when both sides agree on every step, else a description of the first difference."""
    if reference["error"] is not None:
        return f"the reference raised {reference['error']}"
    steps, outputs = run_ours(case, reference["info"])
    theirs = reference["steps"]
    for k in range(max(len(steps), len(theirs))):
        ours_k = steps[k].scheduled if k < len(steps) else "(no step)"
        theirs_k = (
            {int(r): n for r, n in theirs[k]["scheduled"].items()}
            if k < len(theirs)
            else "(no step)"
        )
        if ours_k != theirs_k:
            return f"step {k} differs\n  PD Lab: {ours_k}\n  SGLang: {theirs_k}"
        cached = {int(r): n for r, n in theirs[k]["cached"].items() if n}
        if steps[k].cached != cached:
            return f"cache hits differ at step {k}: PD Lab {steps[k].cached}, SGLang {cached}"
        if sorted(steps[k].preempted) != sorted(int(r) for r in theirs[k]["preempted"]):
            return (
                f"retractions differ at step {k}: PD Lab {steps[k].preempted}, "
                f"SGLang {theirs[k]['preempted']}"
            )
    if outputs != {int(r): n for r, n in reference["outputs"].items()}:
        return f"outputs differ: PD Lab {outputs}, SGLang {reference['outputs']}"
    return None


# ---- the workloads ------------------------------------------------------------------------

DOC = [R(0, 3000, 4)] + [R(0, 300, 4) for _ in range(6)]  # the probe's first workload


def _random_case(seed: int, **force) -> Case:
    """Staggered arrivals of mixed lengths; some share prefixes or squeeze the KV pool."""
    rng = random.Random(seed)
    page = force.pop("page_size", rng.choice([1, 16]))
    tight = force.pop("tight", rng.random() < 0.4)
    ignore_eos = force.pop("ignore_eos", True)
    rows = []
    for _ in range(rng.randint(5, 12)):
        prompt = rng.choice([rng.randint(1, 60), rng.randint(60, 700), rng.randint(700, 2500)])
        group, prefix = "", 0
        if rng.random() < 0.4:
            group = rng.choice("ab")
            prefix = min(prompt, rng.choice([16, 100, 512]))
        output = rng.randint(1, 40) if ignore_eos else rng.randint(100, 500)
        rows.append(R(rng.randint(0, 25), prompt, output, group, prefix))
    knobs = {
        "chunked_prefill_size": rng.choice([64, 256, 512, 2048]),
        "max_prefill_tokens": rng.choice([16384, 16384, 1024]),
        "enable_mixed_chunk": rng.random() < 0.4,
        "enable_prefix_caching": rng.random() < 0.7,
        "schedule_policy": rng.choice(["fcfs", "lpm"]),
    }
    if rng.random() < 0.3:
        knobs["max_running_requests"] = rng.choice([2, 4, 8])
    knobs.update(force)
    longest = max(p + o for _, p, o, *_ in rows)
    total = (longest + rng.randint(64, 800)) if tight else 65536
    total = -(-total // page) * page
    return Case(f"random-{seed}", knobs, page, total, rows, ignore_eos=ignore_eos)


# Prompts of one batch that share prefixes nobody has cached yet: LPM defers them, FCFS does not
# (schedule_policy.py's in-batch prefix checks). The same requests under both orders.
IN_BATCH_PREFIX = [R(0, 500, 4, "q", 200), R(0, 300, 4), R(0, 450, 4, "q", 200)] + [
    R(0, 400, 4, "q", 100),
    R(0, 20, 4, "r", 20),
    R(0, 60, 4, "r", 40),
    R(6, 300, 3, "q", 200),
]

CASES: list[Case] = [
    Case("doc-fcfs", {"chunked_prefill_size": 2048}, requests=DOC),
    Case("doc-mixed", {"chunked_prefill_size": 2048, "enable_mixed_chunk": True}, requests=DOC),
    Case("doc-max-running-3", {"max_running_requests": 3}, requests=DOC),
    Case("doc-no-chunking", {"chunked_prefill_size": -1, "max_prefill_tokens": 4096}, requests=DOC),
    Case("doc-page-16", {"chunked_prefill_size": 2000}, page_size=16, requests=DOC),
    Case(
        "doc-no-chunking-no-radix",
        {"chunked_prefill_size": -1, "max_prefill_tokens": 4096, "enable_prefix_caching": False},
        requests=DOC,
    ),
    Case(
        "staggered-decodes",
        {"chunked_prefill_size": 512},
        requests=[R(0, 900, 12), R(2, 200, 8), R(3, 40, 20), R(9, 1300, 5), R(15, 70, 3)],
    ),
    Case(
        "prefix-lpm",
        {"schedule_policy": "lpm"},
        requests=[R(0, 1050, 2, "p", 1000)]
        + [R(4, 600, 2), R(4, 1200, 2, "p", 1000), R(4, 600, 2), R(4, 1200, 2, "p", 1000)],
    ),
    Case(
        "prefix-fcfs",
        {"schedule_policy": "fcfs"},
        requests=[R(0, 1050, 2, "p", 1000)]
        + [R(4, 600, 2), R(4, 1200, 2, "p", 1000), R(4, 600, 2), R(4, 1200, 2, "p", 1000)],
    ),
    Case(
        "lpm-in-batch-prefix",
        {"schedule_policy": "lpm", "chunked_prefill_size": 1024},
        requests=IN_BATCH_PREFIX,
    ),
    Case(
        "fcfs-in-batch-prefix",
        {"schedule_policy": "fcfs", "chunked_prefill_size": 1024},
        requests=IN_BATCH_PREFIX,
    ),
    Case(
        "kv-pressure-retract",
        {"chunked_prefill_size": 512},
        max_total_tokens=1200,
        requests=[R(0, 300, 200), R(0, 300, 200), R(0, 300, 200), R(1, 100, 150)],
    ),
    Case(
        "kv-pressure-no-radix",
        {"chunked_prefill_size": 512, "enable_prefix_caching": False},
        max_total_tokens=1200,
        requests=[R(0, 300, 200), R(0, 300, 200), R(0, 300, 200), R(1, 100, 150)],
    ),
]
CASES += [_random_case(seed) for seed in range(36)]
# KV pressure with retraction: with ignore_eos 0.5.23 reserves every running request's output in
# full and never retracts, so these use requests without it (see Case.ignore_eos).
RETRACT = [R(0, 10, 400), R(1, 10, 400), R(2, 10, 400), R(3, 10, 400), R(40, 50, 100)]
for page in (1, 16):
    for radix in (True, False):
        for mixed in (False, True):
            CASES.append(
                Case(
                    f"retract-p{page}-{'radix' if radix else 'noradix'}"
                    + ("-mixed" if mixed else ""),
                    {
                        "chunked_prefill_size": 256,
                        "enable_prefix_caching": radix,
                        "enable_mixed_chunk": mixed,
                    },
                    page_size=page,
                    max_total_tokens=1100,
                    requests=RETRACT,
                    # Radix cache off, SGLang takes ignore_eos requests through
                    # add_one_req_ignore_eos, whose exact peak check never over-admits: no
                    # retraction. PD Lab's requests are all ignore_eos, so without it there
                    # is nothing to compare; those cases run with it (KV pressure only).
                    ignore_eos=not radix,
                )
            )
CASES += [
    _random_case(
        100 + seed,
        tight=True,
        ignore_eos=False,
        page_size=(1, 16)[seed % 2],
        enable_prefix_caching=True,  # see the retract cases
    )
    for seed in range(8)
]

# Filled in from a run of the real Scheduler: case name -> the difference it shows.
KNOWN: dict[str, str] = {
    "random-105": "new_token_ratio admission after a retraction (requests without ignore_eos): "
    "at step 1126, the step after request 2 is retracted, PD Lab re-admits it where SGLang "
    "decodes; not yet explained",
}
for c in CASES:
    c.differs = KNOWN.get(c.name, "")


@pytest.fixture(scope="module")
def sglang_reference():
    require_reference(ENGINE)
    return {r["name"]: r for r in run_reference(ENGINE, [to_reference(c) for c in CASES])}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(c, marks=pytest.mark.xfail(strict=True, reason=c.differs)) if c.differs else c
        for c in CASES
    ],
    ids=lambda c: c.name,
)
def test_sglang_policy_matches_sglang_0523_scheduler(case, sglang_reference):
    diff = first_difference(case, sglang_reference[case.name])
    assert diff is None, f"{case.name}: {diff}"


def test_the_suite_is_as_wide_as_promised():
    """Issue #29: at least 40 workloads covering every axis it names."""
    assert len(CASES) >= 40
    knobs = [c.knobs for c in CASES]
    assert any(k.get("enable_mixed_chunk") for k in knobs)
    assert any(k.get("enable_prefix_caching") is False for k in knobs)
    assert any(k.get("schedule_policy") == "lpm" for k in knobs)
    assert any(k.get("max_running_requests") for k in knobs)
    assert {c.page_size for c in CASES} == {1, 16}
    assert any(c.max_total_tokens < 65536 for c in CASES)  # KV pressure
    assert any(not c.ignore_eos for c in CASES)  # retraction
    assert any(len({r[0] for r in c.requests}) > 1 for c in CASES)  # staggered arrivals
