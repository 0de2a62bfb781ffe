"""`dynamo-kv` equals Dynamo 1.6.1's REAL KvRouter, request by request.

The same scripted KV events and loads go to the real router (drive_kv_router.py, run in
.venv-dynamo, which scripts/refsched_env.sh builds) and to PD Lab's `DynamoKvModel`
(sim/cluster/routers.py). Each routed request: Dynamo's pick is among PD Lab's minimum-cost
workers (Dynamo breaks ties at random) and Dynamo's logged logit equals PD Lab's logit for that
worker. With a temperature > 0 the pick is sampled, so only the logit is compared.
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path

import pytest

from sim.cluster.routers import DynamoKvConfig, DynamoKvModel

ROOT = Path(__file__).resolve().parents[3]
PY = ROOT / ".venv-dynamo" / "bin" / "python"
DRIVER = Path(__file__).with_name("drive_kv_router.py")
BS = 16

pytestmark = pytest.mark.skipif(
    not PY.exists(), reason=".venv-dynamo missing: run scripts/refsched_env.sh"
)


def scenario(seed: int, n_requests: int, workers: int = 3) -> list[list]:
    """Shared system prompts and documents, stored on some workers up front and again midway;
    requests of mixed lengths (partial tails too), prefills completing and requests leaving."""
    rng = random.Random(seed)
    systems = [
        list(range(1000 * (s + 1), 1000 * (s + 1) + BS * rng.randint(1, 6))) for s in range(3)
    ]
    ops: list[list] = []
    for w in range(workers):
        s = systems[rng.randrange(3)]
        ops.append(["store", w, s + list(range(50_000 + 100 * w, 50_000 + 100 * w + BS * w))])
    live: list[str] = []
    for r in range(n_requests):
        rid = f"r{r}"
        s = systems[rng.randrange(3)] if rng.random() < 0.8 else []
        tail = [rng.randrange(100_000, 200_000) for _ in range(rng.randint(1, 5 * BS))]
        toks = s + tail
        ops.append(["route", rid, toks])
        live.append(rid)
        if rng.random() < 0.5:
            ops.append(["prefill_done", rng.choice(live)])
        if len(live) > 4 and rng.random() < 0.4:
            gone = live.pop(rng.randrange(len(live)))
            ops.append(["free", gone])
        if r == n_requests // 2:  # a worker reports a request's blocks cached (as after prefill)
            ops.append(["store", rng.randrange(workers), toks])
    return ops


def run_real(ops: list[list], config: dict, workers: int = 3) -> list[dict]:
    script = {"workers": workers, "block_size": BS, "config": config, "ops": ops}
    out = subprocess.run(
        [str(PY), str(DRIVER)],
        input=json.dumps(script),
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert lines and lines[-1] == {"done": True}, out.stdout[-3000:] + out.stderr[-2000:]
    return lines[:-1]


def compare(ops, config: dict, sampled: bool = False, workers: int = 3) -> tuple[int, int]:
    """Replay `ops` on PD Lab's model beside the real router's decisions; returns
    (requests compared, ties)."""
    real = {rec["rid"]: rec for rec in run_real(ops, config, workers)}
    names = [f"w{i}" for i in range(workers)]
    model = DynamoKvModel(names, DynamoKvConfig(block_size=BS, **config))
    routed = ties = 0
    for op in ops:
        if op[0] == "store":
            model.store(names[op[1]], op[2])
        elif op[0] == "route":
            rid, toks = op[1], op[2]
            pick, argmin = model.best_worker(toks)  # query only: the real pick is recorded below
            rec = real[rid]
            got = names[rec["worker"]]
            logits = dict(zip(names, pick.scores, strict=True))
            assert rec["logit"] is not None, rid
            assert rec["logit"] == pytest.approx(logits[got], abs=1e-6), (rid, rec, logits)
            if not sampled:
                assert got in argmin, (rid, got, argmin, logits)
            ties += len(argmin) > 1
            model.assign(got, rid, toks)
            routed += 1
        elif op[0] == "prefill_done":
            model.mark_prefill_complete(op[1])
        elif op[0] == "free":
            model.free(op[1])
    return routed, ties


def test_defaults_request_by_request():
    routed, ties = compare(scenario(1, 40), {})
    assert routed == 40 and ties < routed


def test_knobs_credit_scale_and_request_weight():
    cfg = {
        "overlap_score_credit": 0.5,
        "prefill_load_scale": 2.0,
        "decode_active_request_weight": 1.5,
    }
    routed, _ = compare(scenario(2, 30, workers=4), cfg, workers=4)
    assert routed == 30


def test_temperature_samples_with_the_same_logits():
    routed, _ = compare(scenario(3, 20), {"router_temperature": 0.5}, sampled=True)
    assert routed == 20
