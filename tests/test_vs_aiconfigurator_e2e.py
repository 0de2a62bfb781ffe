"""bench/vs_aiconfigurator_e2e.py: aiconfigurator-core's own end-to-end estimate of a public run
(`run_agg`), the baseline the report's errors are set beside."""

import math
import sys
from pathlib import Path

import pytest

pytest.importorskip("aiconfigurator_core", reason="requirements-kernels.txt is not installed")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import vs_aiconfigurator_e2e as e2e  # noqa: E402
from fidelity_runs import PublicRun  # noqa: E402

# Qwen3-32B bf16 on two H100s: 64 layers; 32.8e9 params x 2 bytes over 2 GPUs = 32.8 GB a GPU,
# read once per decode step from 3.35 TB/s of HBM: at least 9.8 ms a step.
WEIGHTS_READ_S = 32.8e9 / 3.35e12


def run(clients: int, isl: int = 4096, osl: int = 1024) -> PublicRun:
    return PublicRun(
        key=f"qwen32-tp2-{isl}x{osl}-c{clients}",
        source="aiconfigurator",
        gpu="H100-SXM",
        model="Qwen3-32B",
        engine="vLLM 0.12.0",
        policy="vllm",
        settings={"tensor_parallel": 2},
        parallel="TP2",
        isl=isl,
        osl=osl,
        concurrency=clients,
        measured_means={"ttft_s": 0.75, "tpot_s": 0.018},
    )


def test_a_closed_loop_that_fits_gets_a_physical_estimate():
    est = e2e.estimate(run(8))
    assert est["fits"]
    # a decode step reads every weight once; the estimate is a step, not a fraction of one,
    # and not several (8 requests of ~4.6k tokens add ~4 ms of KV reads, not tens of ms)
    assert WEIGHTS_READ_S < est["tpot"] < 3 * WEIGHTS_READ_S
    # the first token waits at least one 4,096-token prefill: 4096 x 2 x 32.8e9 FLOP over two
    # GPUs of 989 TFLOP/s bf16 dense is 136 ms at the peak
    assert est["ttft"] > 4096 * 2 * 32.8e9 / (2 * 989e12)
    assert est["e2e"] == pytest.approx(est["ttft"] + 1023 * est["tpot"])


def test_more_requests_than_the_kv_cache_holds_have_no_estimate():
    # 128 requests of up to 5,120 tokens at 256 KB a token (64 layers x 8 KV heads x 128 x 2 x
    # 2 bytes) need ~172 GB of KV: more than two H100s keep beside 65 GB of weights. The closed
    # formula has no queue to send the rest to, so it does not answer.
    est = e2e.estimate(run(128))
    assert est == {"fits": False, "why": "memory"}


def test_trace_runs_and_models_it_does_not_know_are_left_out():
    other = run(8)
    other.model = "Mixtral-8x7B"
    assert e2e.estimate(other) is None
    other = run(8)
    other.policy = "static"
    assert e2e.estimate(other) is None


def _row(split: str, fits: bool, ours: float, aic: float) -> dict:
    row = {"group": "g", "split": split, "fits": fits, "why": "" if fits else "memory"}
    for m in e2e.METRICS:
        row[f"ours_{m}"] = ours
        row[f"aic_{m}"] = aic if fits else math.nan
    return row


def test_both_models_are_scored_on_the_runs_the_estimator_prices():
    rows = [
        _row("held out", True, -10.0, 30.0),
        _row("held out", True, 20.0, -10.0),
        _row("held out", False, 90.0, math.nan),  # ours missed it; theirs did not answer
    ]
    (stats,) = e2e.summarize(rows, "split").values()
    assert stats["runs"] == 3 and stats["memory"] == 1 and stats["refused"] == 0
    assert stats["ours_e2e"] == pytest.approx(15.0)  # the 90% run is not in ours either
    assert stats["aic_e2e"] == pytest.approx(20.0)


def test_the_trust_panel_reads_what_the_script_writes():
    from ui.charts_fidelity import baseline_figures

    rows = [dict(_row("held out", True, -10.0, 30.0), gpu="H200")]
    rows.append(dict(_row("held out", False, 90.0, math.nan), gpu="H200"))
    rows.append(dict(_row("held out", False, 50.0, math.nan), gpu="B200", why="refused"))
    rows.append(dict(_row("fit", True, 1.0, 2.0), gpu="B200"))  # fit runs are not quoted
    report = e2e.baseline_report(rows)
    h200 = baseline_figures("H200", report)
    assert h200["gpu"] == "H200" and h200["priced"] == 1 and h200["memory"] == 1
    assert h200["aic_e2e"] == 30.0 and h200["ours_e2e"] == 10.0
    # B200's one held-out run is refused, a GPU without runs has none: both quote all GPUs
    for gpu in ("B200", "A100"):
        figures = baseline_figures(gpu, report)
        assert figures["gpu"] is None and figures["runs"] == 3 and figures["priced"] == 1
