"""InferenceX's MiniMax-M2.5 rows (bench/fidelity_inferencex.py): each replays with its launch
script's flags and its client's drawn lengths, and nothing else changes."""

from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import fidelity_closed_loop as cl  # noqa: E402
import fidelity_inferencex as ix  # noqa: E402
import fidelity_runs as fr  # noqa: E402
import public_run  # noqa: E402
from test_fidelity_real import AIC_FIELDS  # noqa: E402

from sim.cost.hardware import get_model  # noqa: E402


def _rows(root: Path, rows: list[dict]) -> None:
    aic = root / "aiconfigurator"
    aic.mkdir(parents=True)
    with (aic / "silicon_sample.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, AIC_FIELDS)
        out.writeheader()
        for i, row in enumerate(rows):
            out.writerow({"id": f"r{i}", **row})


MINIMAX = {
    "backend": "vllm",
    "model_path": "MiniMaxAI/MiniMax-M2.5",
    "precision": "fp8",
    "mode": "agg",
    "isl": "1024",
    "osl": "1024",
    "batch_size": "64",
    "tp_size": "2",
    "pp_size": "1",
    "attention_dp_size": "",
    "moe_tp_size": "2",
    "moe_ep_size": "1",
    "silicon_ttft_ms": "100",
    "silicon_tpot_ms": "20",
}
B200_019 = {
    **MINIMAX,
    "backend_version": "0.19.0",
    "system": "b200_sxm",
    "silicon_data_source": "db-dump/2026-04-27; config_id=633; silicon_concurrency=64; "
    "measured=2026-04-08T00:00:00.000Z; workflow_run_id=725; vllm/vllm-openai:v0.19.0-cu130",
}
H200_018 = {
    **MINIMAX,
    "backend_version": "0.18.0",
    "system": "h200_sxm",
    "silicon_data_source": "source_file=2026-04-06.csv; model=MiniMax-M2.5; "
    "silicon_concurrency=64; measured=2026-03-28T00:00:00.000Z; wip=False; "
    "image=vllm/vllm-openai:v0.18.0",
}


def test_each_inferencex_row_replays_with_its_launch_scripts_flags(tmp_path: Path) -> None:
    _rows(tmp_path, [B200_019, {**B200_019, "isl": "8192"}, H200_018])
    runs, skipped = fr.load_runs(tmp_path)
    b200, b200_long, h200 = sorted(runs, key=lambda r: (r.gpu, r.isl))
    # B200 on v0.19.0: --max-num-batched-tokens $((ISL * 2)), --kv-cache-dtype fp8, 0.90, 32.
    assert b200.settings["max_num_batched_tokens"] == 2048
    assert b200_long.settings["max_num_batched_tokens"] == 16384
    cfg = b200.config()
    assert cfg.knobs.max_num_batched_tokens == 2048
    assert cfg.engine.mem_utilization == 0.90 and cfg.engine.block_size == 32
    assert b200.kv_dtype == "fp8"
    # H200 on v0.18.0: 0.95 and no --kv-cache-dtype: MiniMax-M2.5's checkpoint states no KV
    # scales, so the cache is BF16, twice the FP8 one's bytes, and vLLM's default token budget.
    assert h200.kv_dtype == "" and "max_num_batched_tokens" not in h200.settings
    assert h200.config().engine.mem_utilization == 0.95
    # Both images are vLLM 0.14 or later: asynchronous scheduling, their default.
    assert cfg.knobs.async_scheduling and h200.config().knobs.async_scheduling
    bf16 = get_model(h200.config().hardware.model).kv_bytes_per_token
    fp8 = get_model(b200.config().hardware.model).kv_bytes_per_token
    assert bf16 == 2 * fp8
    assert {r.range_ratio for r in runs} == {ix.RANGE_RATIO}
    assert not skipped


LLAMA_2025 = {
    **MINIMAX,
    "model_path": "meta-llama/Llama-3.1-70B",
    "backend_version": "",
    "system": "h200_sxm",
    "moe_tp_size": "1",
    "tp_size": "1",
    "batch_size": "4",
    "silicon_data_source": "source_file=2026-04-06.csv; model=Llama-3.1-70B; "
    "silicon_concurrency=4; measured=2025-10-29T00:00:00.000Z; wip=False",
}


def test_inferencemaxs_llama_70b_rows_of_2025_are_recognised_and_drawn(tmp_path: Path) -> None:
    # The same exports hold InferenceMAX's Llama 3.3 70B runs of 2025-10 (vLLM v0.10.2, no
    # release in the row): FP8 KV from --kv-cache-dtype fp8, vLLM's defaults otherwise, and the
    # client's drawn lengths; their campaign is the one the H200 and B200 latencies are fitted on.
    _rows(tmp_path, [LLAMA_2025])
    (run,), skipped = fr.load_runs(tmp_path)
    assert not skipped
    assert run.campaign == "inferencemax-2025" == fr.FIT_CAMPAIGN["H200"]
    assert public_run.CAMPAIGN_RELEASE[run.campaign] == ix.RELEASE_2025 == "0.10.2"
    assert run.kv_dtype == "fp8" and run.range_ratio == ix.RANGE_RATIO
    # Their scripts pass --async-scheduling (off by default in vLLM 0.10.2) and --max-num-seqs
    # $CONC: 4 seats, so vLLM's profile run samples 4 dummy requests, not its default 1,024, and
    # keeps 4.9 GB less off each GPU's KV cache (Llama's 128,256-token vocabulary, 9.32 fp32
    # copies while 0.10.2 sorts it: sim/cost/engine_memory.py).
    assert run.settings == {"tensor_parallel": 1, "async_scheduling": True, "max_num_seqs": 4}
    config = run.config()
    assert run.engine == "vLLM ?" and config.knobs.async_scheduling
    vllms_default = dataclasses.replace(run, settings={"tensor_parallel": 1}).config()
    assert config.knobs.max_num_seqs == 4 and vllms_default.knobs.max_num_seqs == 0  # = 1,024
    freed = vllms_default.engine.activation_reserve_gb - config.engine.activation_reserve_gb
    assert freed == pytest.approx(9.32 * (1024 - 4) * 128_256 * 4 / 1e9, rel=0.01)
    assert ix.is_inferencex(LLAMA_2025["silicon_data_source"])
    assert ix.is_inferencex(B200_019["silicon_data_source"])
    assert not ix.is_inferencex("source_file=/x/aic-auto-gap-analysis/data/h200_sxm/a.csv")


def test_a_deployment_whose_script_was_not_read_is_skipped_saying_so(tmp_path: Path) -> None:
    _rows(tmp_path, [{**B200_019, "backend_version": "0.20.0"}])
    runs, skipped = fr.load_runs(tmp_path)
    assert not runs
    assert skipped["aiconfigurator: an InferenceX deployment not read yet"] == 1


def test_other_rows_keep_fixed_lengths_and_vllms_defaults(tmp_path: Path) -> None:
    row = {
        **MINIMAX,
        "model_path": "Qwen/Qwen3-32B",
        "precision": "",
        "moe_tp_size": "1",
        "backend_version": "0.12.0",
        "system": "h100_sxm",
        "silicon_data_source": "source_file=/x/aic-auto-gap-analysis/data/h100_sxm/a.csv; "
        "silicon_concurrency=64",
    }
    _rows(tmp_path, [row])
    (run,), _ = fr.load_runs(tmp_path)
    assert run.range_ratio == 1.0 and run.mean_isl == run.isl == 1024
    assert run.settings == {"tensor_parallel": 2}
    assert not run.config().knobs.async_scheduling  # vLLM 0.12: synchronous by default


def test_the_clients_lengths_are_drawn_as_benchmark_serving_draws_them() -> None:
    # sample_uniform: np.random.randint(int(L * ratio), L + 1): both ends included.
    fixed = cl.request_lengths(1024, 1024, 5)
    assert fixed == [(1024, 1024)] * 5
    drawn = np.array(cl.request_lengths(1024, 8192, 4000, 0.8, seed=3))
    assert drawn[:, 0].min() == 819 and drawn[:, 0].max() == 1024
    assert drawn[:, 1].min() >= 6553 and drawn[:, 1].max() <= 8192
    # The mean the score's E2E takes: (819 + 1024) / 2; 4,000 draws land within 1% of it
    # (the standard error of a uniform over 206 integers is ~0.9 tokens).
    assert ix.mean_length(1024, 0.8) == 921.5
    assert drawn[:, 0].mean() == pytest.approx(921.5, rel=0.01)
    assert drawn[:, 1].mean() == pytest.approx(ix.mean_length(8192, 0.8), rel=0.01)
    assert cl.request_lengths(1024, 1024, 50, 0.8, seed=1) == cl.request_lengths(
        1024, 1024, 50, 0.8, seed=1
    )


def test_a_closed_loop_sends_the_drawn_lengths(tmp_path: Path) -> None:
    _rows(tmp_path, [{**B200_019, "isl": "256", "osl": "32", "batch_size": "4"}])
    (run,), _ = fr.load_runs(tmp_path)
    res = cl.closed_loop(run.config(), run.isl, run.osl, 4, 12, range_ratio=run.range_ratio)
    req = res.requests.sort_values("request_id")
    want = cl.request_lengths(256, 32, 12, run.range_ratio, seed=3)  # closed_loop's seed + 3
    assert list(zip(req.prompt_tokens, req.output_tokens, strict=True)) == want
    assert len(set(req.output_tokens)) > 1  # unequal outputs: the clients come apart


@pytest.mark.skipif(
    not (fr.DEFAULT_DATA / "aiconfigurator").is_dir(), reason="public runs not present"
)
def test_every_public_inferencex_row_has_its_script_read() -> None:
    runs, skipped = fr.load_runs()
    drawn = [r for r in runs if r.model.startswith(("MiniMax-M2.5", "Llama-3.1-70B"))]
    assert len(drawn) > 300 and all(r.range_ratio == ix.RANGE_RATIO for r in drawn)
    assert all(r.range_ratio == 1.0 for r in runs if r.campaign == "gap-analysis")
    assert not skipped["aiconfigurator: an InferenceX deployment not read yet"]
