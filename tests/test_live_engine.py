"""The live engine drives the SAME engine core and policies as the simulator.

Fed the same workload and the measured step durations, the simulator must form the identical
sequence of batches: the only difference between the two is where a step's duration comes from.
"""

import pytest

pytest.importorskip("torch")

from live.engine.run import LiveOptions, check_size, run_live  # noqa: E402
from sim.cluster.topologies import simulate  # noqa: E402
from sim.cluster.worker import SimulatedClock  # noqa: E402
from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.core.request import RequestSpec  # noqa: E402
from sim.core.step import StepTiming  # noqa: E402

TINY = LiveOptions(model="tiny")  # random weights, real shapes of a small Llama: fast on CPU
WORKLOAD = [
    RequestSpec(0, 0.0, 40, 6),
    RequestSpec(1, 0.01, 90, 4),
    RequestSpec(2, 0.02, 12, 8),
    RequestSpec(3, 0.05, 60, 5),
]
CONFIGS = {
    "static": {"batch_size": 2},
    "prefill-first": {},
    "chunked": {"max_num_batched_tokens": 32},
    "chunked-fast-lane": {
        "max_num_batched_tokens": 32,
        "max_num_partial_prefills": 2,
        "long_prefill_token_threshold": 50,
    },
    "chunked-v1": {"max_num_batched_tokens": 32, "max_num_partial_prefills": 0},
    "vllm": {"max_num_batched_tokens": 32, "long_prefill_token_threshold": 20},
    "vllm-v0": {"max_num_batched_tokens": 32, "max_num_partial_prefills": 2},
    "sglang": {"chunked_prefill_size": 32},
    "sglang-mixed": {"chunked_prefill_size": 32, "enable_mixed_chunk": True},
    "short-first": {"max_num_batched_tokens": 64},
    "disaggregated": {"topology": "disaggregated"},
    "router": {"topology": "router", "router": "round-robin"},
    "preemption": {"max_num_batched_tokens": 32, "kv_capacity_tokens": 128},
}


class ReplayClock(SimulatedClock):
    """Steps last exactly as long as they did live (per worker, in order)."""

    name = "replay"

    def __init__(self, samples, transfers):
        self.steps = {}
        for worker, *_shape, seconds in samples:
            self.steps.setdefault(worker, []).append(seconds)
        self.transfers = {rid: seconds for rid, _tokens, seconds in transfers}

    def step_timing(self, worker, batch):
        return StepTiming(self.steps[worker.name][batch.step])

    def transfer_s(self, req, p, d, model, topology):
        return self.transfers[req.request_id]


def config_for(name):
    knobs = dict(CONFIGS[name])
    policy = name.split("-")[0] if name.split("-")[0] in ("static", "chunked", "sglang") else name
    policy = {"prefill": "prefill-first", "short": "short-first"}.get(policy, policy)
    if name in ("disaggregated", "router", "preemption"):
        policy = "chunked"
    return with_overrides(SimConfig(policy=policy), knobs)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_live_and_simulator_form_the_identical_batches(name):
    config = config_for(name)
    live, info = run_live(WORKLOAD, config, TINY)
    assert (live.requests.status == "finished").all()
    replay = simulate(
        WORKLOAD,
        with_overrides(config, {"kv_capacity_tokens": live.meta["config"]["kv_capacity_tokens"]}),
        clock=ReplayClock(info["samples"], info["transfers"]),
    )
    columns = [
        "worker",
        "step",
        "prefill_tokens",
        "decode_tokens",
        "batch_size",
        "num_prefills",
        "kv_used_tokens",
        "preempted",
    ]
    assert live.steps[columns].equals(replay.steps[columns])
    assert live.steps.start_s.tolist() == pytest.approx(replay.steps.start_s.tolist())
    assert live.requests.ttft_s.tolist() == pytest.approx(replay.requests.ttft_s.tolist())
    assert live.meta["clock"] == "measured" and replay.meta["clock"] == "replay"


def test_kv_is_never_over_committed_and_preemption_recomputes_for_real():
    # All at t=0, so the batches do not depend on how fast the steps run here.
    longer = [
        RequestSpec(0, 0.0, 40, 30),
        RequestSpec(1, 0.0, 90, 20),
        RequestSpec(2, 0.0, 12, 40),
        RequestSpec(3, 0.0, 60, 30),
    ]
    live, _ = run_live(longer, config_for("preemption"), TINY)  # 128 KV tokens: too few
    assert (live.steps.kv_used_tokens <= live.steps.kv_capacity_tokens).all()
    assert live.requests.preemptions.sum() > 0
    assert live.segments.recompute.any()
    assert (live.requests.status == "finished").all()


def test_disaggregated_transfer_moves_exactly_each_prompts_kv():
    live, info = run_live(WORKLOAD, config_for("disaggregated"), TINY)
    moved = {rid: tokens for rid, tokens, _seconds in info["transfers"]}
    assert moved == {r.request_id: r.prompt_tokens for r in WORKLOAD}
    seg = live.segments[live.segments.kind == "kv_transfer"]
    assert sorted(seg.tokens) == sorted(r.prompt_tokens for r in WORKLOAD)
    assert (seg.end_s > seg.start_s).all()  # the copy really took time
    assert set(live.requests.worker) == {"P0>D0"}


def test_swap_preemption_and_oversized_workloads_are_refused_with_a_reason():
    with pytest.raises(ValueError, match="recompute"):
        run_live(WORKLOAD, with_overrides(SimConfig(), {"preemption_mode": "swap"}), TINY)
    with pytest.raises(ValueError, match="at most"):
        check_size([RequestSpec(i, 0.0, 10, 2) for i in range(100)])
    with pytest.raises(ValueError, match="unknown model"):
        run_live(WORKLOAD, SimConfig(), LiveOptions(model="gpt-5"))


def test_live_cli_prints_the_measured_json_and_refuses_bad_input(capsys):
    import json

    from live.cli import main

    assert main(["run", "--model", "tiny", "--scenario", "chat", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["requests"]) == 8 and data["summary"]["finished"] == 8
    assert main(["run", "--model", "tiny", "--scenario", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "freeze" in err
    assert main(["run", "--model", "gpt-5", "--scenario", "chat"]) == 2
    assert "unknown model 'gpt-5'" in capsys.readouterr().err
    # fidelity needs a model the simulator knows: refused at once, before any live run
    assert main(["fidelity", "--model", "tiny", "--scenario", "chat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "measured, not predicted" in err and "steps measured" not in err


def test_a_lone_request_fits_the_stores_block_accounting():
    """139 tokens under vllm: whole blocks per store row plus vLLM's null block (it was
    rejected when the engine was given exactly slots x max_len tokens)."""
    live, _info = run_live([RequestSpec(0, 0.0, 91, 48)], SimConfig(policy="vllm"), TINY)
    assert live.requests.status.tolist() == ["finished"]
