"""The public-run fidelity harness (bench/) and the figures that show its report (ui/).

The public runs themselves are not in the project: these tests build two tiny runs in their
formats (an LLMServingSim folder, an aiconfigurator CSV row) and check that they load, replay,
score and summarise, and that the report's figures draw. With the real data present
(../shared/data/fidelity), one test also replays one real run of each source.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_fidelity_real as bench  # noqa: E402
import fidelity_aiconfigurator as aic  # noqa: E402
import fidelity_closed_loop as cl  # noqa: E402
import fidelity_replay as rp  # noqa: E402
import fidelity_runs as fr  # noqa: E402

from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.cost.hardware import get_gpu, get_model, kv_capacity_tokens  # noqa: E402
from ui.charts_fidelity import fidelity_scatter, fidelity_table  # noqa: E402
from ui.i18n import t as label  # noqa: E402

AIC_FIELDS = [
    "id",
    "silicon_data_source",
    "backend",
    "backend_version",
    "model_path",
    "system",
    "precision",
    "mode",
    "isl",
    "osl",
    "gemm_quant_mode",
    "moe_quant_mode",
    "batch_size",
    "tp_size",
    "pp_size",
    "attention_dp_size",
    "moe_tp_size",
    "moe_ep_size",
    "silicon_ttft_ms",
    "silicon_tpot_ms",
]


def _fake_data(root: Path, fp8: bool = False) -> Path:
    """One LLMServingSim-style trace and three aiconfigurator-style rows, made up (a fourth, FP8
    one with `fp8`)."""
    folder = root / "llmservingsim" / "RTXPRO6000" / "Llama-3.1-8B"
    folder.mkdir(parents=True)
    meta = {
        "model": "meta-llama/Llama-3.1-8B",
        "vllm_version": "0.19.0",
        "engine_kwargs": {
            "tensor_parallel_size": 1,
            "data_parallel_size": 1,
            "max_num_seqs": 16,
            "max_num_batched_tokens": 2048,
            "dtype": "bfloat16",
        },
    }
    (folder / "meta.json").write_text(json.dumps(meta))
    lines = []
    for i in range(12):
        q = 100.0 + 0.2 * i
        lines.append(
            json.dumps(
                {
                    "request_id": f"r{i}",
                    "input_toks": 300 + 10 * i,
                    "output_toks": 40,
                    "queued_ts": q,
                    "first_token_ts": q + 0.05,
                    "last_token_ts": q + 0.05 + 39 * 0.02,
                }
            )
        )
    (folder / "requests.jsonl").write_text("\n".join(lines) + "\n")
    aic = root / "aiconfigurator"
    aic.mkdir()
    with (aic / "silicon_sample.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, AIC_FIELDS)
        out.writeheader()
        base = {
            "backend": "vllm",
            "backend_version": "0.12.0",
            "model_path": "Qwen/Qwen3-32B",
            "system": "h100_sxm",
            "precision": "",
            "mode": "agg",
            "isl": "512",
            "osl": "64",
            "gemm_quant_mode": "",
            "moe_quant_mode": "",
            "tp_size": "2",
            "pp_size": "1",
            "attention_dp_size": "",
            "moe_tp_size": "1",
            "moe_ep_size": "1",
            "silicon_ttft_ms": "120",
            "silicon_tpot_ms": "20",
        }
        out.writerow(
            {
                **base,
                "id": "a",
                "batch_size": "4",
                "silicon_data_source": "x=1; silicon_concurrency=4",
            }
        )
        out.writerow(
            {**base, "id": "b", "batch_size": "8", "silicon_data_source": "silicon_concurrency=8"}
        )
        # No client count: skipped (fidelity_aiconfigurator.NO_CLIENT_COUNT).
        out.writerow({**base, "id": "e", "batch_size": "16", "silicon_data_source": "y"})
        out.writerow(
            {**base, "id": "c", "batch_size": "8", "silicon_data_source": "y", "backend": "trtllm"}
        )
        if fp8:
            out.writerow(
                {
                    **base,
                    "id": "d",
                    "batch_size": "4",
                    "silicon_data_source": "silicon_concurrency=4",
                    "precision": "fp8",
                    "gemm_quant_mode": "fp8",
                    "moe_quant_mode": "fp8",
                }
            )
    return root


def test_missing_data_says_where_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="LLMServingSim"):
        fr.data_dir(tmp_path / "nothing")


def test_loads_replays_scores_and_summarises(tmp_path: Path) -> None:
    runs, skipped = fr.load_runs(_fake_data(tmp_path))
    assert skipped == {
        "aiconfigurator: engine trtllm": 1,
        f"aiconfigurator: {aic.NO_CLIENT_COUNT}": 1,
    }
    trace = next(r for r in runs if r.kind == "trace")
    closed = [r for r in runs if r.kind == "closed-loop"]
    assert trace.fit and trace.gpu == "RTX-PRO-6000" and len(trace.specs) == 12
    assert trace.specs[3].arrival_s == pytest.approx(0.6)
    assert trace.measured.loc[0, "tpot_s"] == pytest.approx(0.02)
    assert sorted(r.concurrency for r in closed) == [4, 8]  # silicon_concurrency, not batch_size
    assert all(r.fit for r in closed)  # H100: the Qwen3-32B vLLM runs fit its profile
    scores = bench.score_runs(runs)
    assert set(scores["kind"]) == {"trace", "closed-loop"}
    row = scores[scores["kind"] == "trace"].iloc[0]
    assert row["ttft_mean_err"] == pytest.approx(
        100 * (row["ttft_predicted_mean"] / row["ttft_measured_mean"] - 1)
    )
    assert not scores[["ttft_mean_err", "tpot_mean_err", "e2e_mean_err"]].isna().any().any()
    summary = bench.summarize(scores)
    assert list(summary["runs"]) and summary["runs"].sum() == 3
    report = bench.report_json(scores, summary, skipped, 1.0)
    json.dumps(report)  # plain JSON: no NaN, no numpy types the app could not read back
    table = fidelity_table("H100-SXM", "en", report)
    assert len(table) == 1 and table.iloc[0]["runs"] == 2
    assert len(fidelity_table("L4", "ko", report)) == 2  # no runs on L4: every GPU's rows
    fig = fidelity_scatter("H100-SXM", "ko", report)
    assert any(tr.name and "Qwen3-32B" in tr.name for tr in fig.data)


def test_prompt_load_is_what_the_measurements_need_of_the_gpus(tmp_path: Path) -> None:
    # A closed loop of 4 clients, 512 tokens in, 64 out, TTFT 120 ms and TPOT 20 ms: each
    # request lives 0.12 + 63 x 0.02 = 1.38 s, so (Little) 4 / 1.38 req/s x 512 prompt tokens,
    # each 2 x Qwen3-32B's active parameters, against 2 H100s' BF16 peak.
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    closed = next(r for r in runs if r.key == "a")
    model = get_model("Qwen3-32B")
    want = 4 / 1.38 * 512 * 2 * model.params_active / (2 * 989e12)
    assert rp.prompt_load(closed) == pytest.approx(want, rel=1e-9)
    # A trace: its prompt tokens (300..410, 12 requests) over its span, first arrival to last
    # finish (2.2 s of arrivals + 0.05 + 39 x 0.02 s), on one RTX PRO 6000 at BF16.
    trace = next(r for r in runs if r.kind == "trace")
    span = 0.2 * 11 + 0.05 + 39 * 0.02
    tokens = sum(300 + 10 * i for i in range(12))
    want = tokens / span * 2 * get_model("Llama-3.1-8B").params_active / 503.8e12
    assert rp.prompt_load(trace) == pytest.approx(want, rel=1e-6)
    # The report carries it per run and, per group, its largest.
    scores = bench.score_runs(runs)
    assert scores.set_index("key").loc["a", "prompt_load"] == pytest.approx(rp.prompt_load(closed))
    summary = bench.summarize(scores)
    h100 = summary[summary["gpu"] == "H100-SXM"].iloc[0]
    assert h100["prompt_load_max"] == pytest.approx(
        scores[scores.gpu == "H100-SXM"]["prompt_load"].max()
    )


def test_kernel_load_prices_the_measured_prompts_with_the_measured_kernels(
    tmp_path: Path,
) -> None:
    """Run "a" (4 clients, 512 in, 64 out on 2 H100s; see above) needs 4 / 1.38 prompts a
    second, each costing a sixteenth of a step of sixteen 512-token prompts at the tables' own
    speed. Its measured rate scaled up until that exceeds a second per second is counted, named
    and left out of the "feasible" figures."""
    pytest.importorskip("aiconfigurator_core", reason="requirements-kernels.txt is not installed")
    import fidelity_load as fl

    from sim.cost.kernel_tables import kernel_times

    runs, _ = fr.load_runs(_fake_data(tmp_path))
    closed = next(r for r in runs if r.key == "a")
    per_prompt = fl.prompt_seconds(closed, 512)
    linear = kernel_times("H100-SXM", get_model("Qwen3-32B"), 2).linear(fl.PACK_TOKENS) / 16
    # The GEMMs are most of a prefill: the rest (attention, all-reduces, lm_head) adds < 40%.
    assert linear < per_prompt < 1.4 * linear
    assert fl.kernel_load(closed) == pytest.approx(4 / 1.38 * per_prompt, rel=1e-9)
    # Ten thousand times the TPOT-bound rate cannot be prefilled: "over", named, left out.
    fast = dataclasses.replace(
        closed, key="fast", measured_means={"ttft_s": 1.2e-5, "tpot_s": 2e-6}
    )
    assert fl.kernel_load(fast) > fl.INFEASIBLE
    scores = bench.score_runs([closed, fast])
    assert [r["key"] for r in bench.infeasible(scores)] == ["fast"]
    assert bench.summarize(scores).iloc[0]["over"] == 1
    both = bench.overall(scores)
    assert both["fit"]["runs"] == 2 and both["fit_feasible"]["runs"] == 1


def test_step_load_adds_the_decode_steps_a_measured_tpot_implies(tmp_path: Path) -> None:
    """Run "a" (4 clients, 512 in, 64 out, TTFT 0.12 s, TPOT 0.02 s on 2 H100s) ran 1 / TPOT
    steps a second; all but the 8192-token steps its prompts could have packed into read the
    weights and the KV of the clients decoding (Little: 4 x 63 x 0.02 / 1.38 -> 3, at 512 + 32
    tokens each). A TPOT the kernels cannot step flags a run whose prompts alone would pass."""
    pytest.importorskip("aiconfigurator_core", reason="requirements-kernels.txt is not installed")
    import fidelity_load as fl

    runs, _ = fr.load_runs(_fake_data(tmp_path))
    closed = next(r for r in runs if r.key == "a")
    trace = next(r for r in runs if r.kind == "trace")
    e2e = 0.12 + 63 * 0.02
    steps = 1 / 0.02 - 4 / e2e * 512 / fl.PACK_TOKENS
    want = steps * fl.decode_seconds(closed, 3, 512 + 32)
    assert fl.decode_load(closed) == pytest.approx(want, rel=1e-9)
    assert 0 < fl.decode_load(closed) < 1  # a real server's pace: feasible
    assert fl.step_load(closed) == pytest.approx(fl.kernel_load(closed) + want, rel=1e-9)
    # One decode step reads at least the GPU's share of the weights at its full bandwidth.
    gpu, model = get_gpu("H100-SXM"), get_model("Qwen3-32B")
    floor = model.params_body * 2 / 2 / (gpu.mem_bw_gb_s * 1e9)
    assert fl.decode_seconds(closed, 3, 544) > floor
    assert math.isnan(fl.decode_load(trace))  # traces: prompts only
    # Ten times faster decoding, prompts as measured: only the steps give it away.
    fast = dataclasses.replace(closed, key="fast", measured_means={"ttft_s": 0.12, "tpot_s": 2e-3})
    assert fl.kernel_load(fast) < fl.INFEASIBLE < fl.STEP_INFEASIBLE < fl.step_load(fast)
    assert fl.infeasible(fl.kernel_load(fast), fl.step_load(fast))
    assert not fl.infeasible(math.nan, math.nan)
    scores = bench.score_runs([closed, fast])
    assert [r["key"] for r in bench.infeasible(scores)] == ["fast"]


def test_fp8_deployments_replay_with_an_fp8_kv_cache(tmp_path: Path) -> None:
    # aiconfigurator deploys FP8/FP4 models with an FP8 KV cache; BF16 ones keep BF16.
    runs, _ = fr.load_runs(_fake_data(tmp_path, fp8=True))
    by_key = {r.key: r for r in runs}
    fp8, bf16 = by_key["d"], by_key["a"]
    assert fp8.model == "Qwen3-32B:fp8" and fp8.kv_dtype == "fp8" and bf16.kv_dtype == ""
    assert fp8.config().hardware.model == "Qwen3-32B:fp8:kv-fp8"
    assert bf16.config().hardware.model == "Qwen3-32B"
    assert fp8.group == "H100-SXM | Qwen3-32B:fp8 | vLLM"  # the report names the weights
    # The replay holds twice the KV tokens the same FP8 weights would leave room for in BF16.
    got = cl.closed_loop(fp8.config(), 512, 8, 1, 1).meta["workers"]["I0"]["kv_capacity_tokens"]
    gpu = get_gpu("H100-SXM")
    # Whole 16-token blocks, less vLLM V1's null block (block_pool.py:191; issue 29).
    # vLLM 0.12's profile run keeps its sort-path sampler peak off the cache (engine_memory.py)
    reserve = fp8.config().engine.activation_reserve_gb
    assert reserve == pytest.approx(6.63, abs=0.01)  # GB: 9.32 x 1024 x 151,936 x 4 B + 0.77 GiB
    kv = kv_capacity_tokens(gpu, get_model("Qwen3-32B:fp8:kv-fp8"), 2, 0.9, reserve)
    assert got == (kv // 16 - 1) * 16
    # Twice the BF16 cache's tokens, within two blocks (block rounding and the null block).
    bf16_tokens = kv_capacity_tokens(gpu, get_model("Qwen3-32B:fp8"), 2, 0.9, reserve)
    assert got == pytest.approx(2 * bf16_tokens, abs=32)


def test_closed_loop_keeps_concurrency(tmp_path: Path) -> None:
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8)
    res = cl.closed_loop(run.config(), run.isl, run.osl, 8, 24)
    req = res.requests.sort_values("arrival_s")
    # Never more than 8 in flight: each arrival finds at most 7 others unfinished.
    for _, r in req.iterrows():
        busy = ((req["arrival_s"] <= r["arrival_s"]) & (req["finish_s"] > r["arrival_s"])).sum()
        assert busy <= 8
    assert len(req) == 24 and (req["finish_s"] > 0).all()
    # Clients start spread over one request's life, not all at once.
    assert req["arrival_s"].iloc[:8].is_monotonic_increasing
    assert req["arrival_s"].iloc[1] > 0


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_table_fits_every_metric_in_one_cell_each(lang: str) -> None:
    # Six numeric error columns pushed E2E out of sight at the page's width: one cell per
    # metric, "signed mean (mean |error|)", and the GPU only where the rows are several GPUs'.
    def row(gpu: str, bias: float, mape: float) -> dict:
        return {
            "gpu": gpu,
            "model": "Qwen3-32B",
            "engine": "vLLM",
            "fit": False,
            "runs": 3,
            "ttft_bias": bias,
            "ttft_mape": mape,
            "tpot_bias": -0.4,
            "tpot_mape": 4.8,
            "e2e_bias": None,
            "e2e_mape": None,
        }

    report = {"summary": [row("H100-SXM", -25.4, 32.4), row("H200", 7.6, 11.0)], "runs": []}
    table = fidelity_table("H100-SXM", lang, report)
    assert list(table.columns) == [
        fr_col(k, lang) for k in ("model", "ttft", "tpot", "end", "runs")
    ]  # the errors first: a phone scrolls what follows them sideways
    held_out = label("charts.fid.held_out", lang)
    assert table.iloc[0][fr_col("model", lang)] == f"Qwen3-32B · vLLM · {held_out}"
    cells = table.iloc[0].tolist()[1:4]
    assert cells == ["-25% (32%)", "0% (5%)", "-"]  # rounded; no "-0"; a missing metric says so
    every = fidelity_table("L4", lang, report)  # no runs on L4: every GPU's rows, GPU named
    assert list(every[fr_col("gpu", lang)]) == ["H100-SXM", "H200"]
    assert every.iloc[1][fr_col("ttft", lang)] == "+8% (11%)"


def test_the_rtx_pro_6000_known_miss_quotes_both_reports() -> None:
    # The caption under the RTX PRO 6000's tables quotes Qwen3-30B-A3B's signed errors, measured
    # kernels and roofline: regenerating a report must not leave it quoting old figures.
    from ui.charts_fidelity import KERNELS_REPORT_PATH, load_report

    def qwen(report: dict) -> dict:
        rows = report["summary"]
        return next(r for r in rows if r["gpu"] == "RTX-PRO-6000" and "A3B" in r["model"])

    kernels, roofline = qwen(load_report(KERNELS_REPORT_PATH)), qwen(load_report())
    assert kernels["ttft_bias"] > 0 > roofline["ttft_bias"]  # "slow" with kernels, "fast" without
    quoted = (kernels["ttft_bias"], kernels["tpot_bias"], -roofline["ttft_bias"])
    quoted += (-roofline["tpot_bias"],)
    for lang in ("en", "ko"):
        text = label("pd.trust_known.RTX-PRO-6000", lang)
        assert all(f"{round(v)}%" in text for v in quoted), (lang, [round(v) for v in quoted])


def test_the_h100_known_miss_quotes_sglangs_own_kv_pool_and_the_report(tmp_path: Path) -> None:
    # pd.trust_known.H100-SXM: Qwen3-32B on one H100 under SGLang 0.5.8 is replayed with the KV pool
    # SGLang's own memory rule leaves (fidelity_aiconfigurator: sglang_mem_fraction_static from
    # 0.5.3 on), and the page quotes that pool and the kernel report's TTFT error for those runs.
    from sim.runs.memory import kv_blocks
    from ui.charts_fidelity import KERNELS_REPORT_PATH, load_report

    aic = tmp_path / "aiconfigurator"
    aic.mkdir()
    row = dict.fromkeys(AIC_FIELDS, "")
    row.update(
        id="q",
        silicon_data_source="source_file=made-up.csv; silicon_concurrency=16",
        backend="sglang",
        backend_version="0.5.8.post1",
        model_path="Qwen/Qwen3-32B",
        system="h100_sxm",
        mode="agg",
        isl="1024",
        osl="128",
        batch_size="16",
        tp_size="1",
        moe_tp_size="1",
        moe_ep_size="1",
        silicon_ttft_ms="6775",
        silicon_tpot_ms="25",
    )
    with (aic / "silicon_sample.csv").open("w", newline="") as f:
        out = csv.DictWriter(f, AIC_FIELDS)
        out.writeheader()
        out.writerow(row)
    (run,) = fr.load_runs(tmp_path)[0]
    config = run.config({"step_costs": "kernels"})
    pool = kv_blocks(config) * config.engine.block_size  # tokens, as the replay allocates them
    assert 15_000 < pool < 20_000  # ~4.5 GB beside 65.5 GB of weights, 256 KiB a token
    assert pool > 2 * 8_000  # twice the cache the measurements behave like (the text)
    reported = next(
        r
        for r in load_report(KERNELS_REPORT_PATH)["runs"]
        if r["gpu"] == "H100-SXM" and r["engine"] == "SGLang 0.5.8.post1"
    )
    assert reported["ttft_mean_err"] < -50  # the miss is still there
    for lang in ("en", "ko"):
        text = label("pd.trust_known.H100-SXM", lang)
        assert f"{pool:,}" in text and f"{round(-reported['ttft_mean_err'])}%" in text, lang


def fr_col(key: str, lang: str) -> str:
    return label(f"charts.fid.col.{key}", lang)


@pytest.mark.parametrize("policy", ["vllm", "sglang"])
def test_closed_loop_reuses_aiperfs_prompts(tmp_path: Path, policy: str) -> None:
    # aiperf draws every request from 100 synthetic prompts, so a repeated prompt is served from
    # the prefix cache (vLLM V1 and SGLang cache by default); with its own prompts nothing hits.
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8)
    config = with_overrides(
        SimConfig(policy=policy), {"gpu": run.gpu, "model": run.model, **run.settings}
    )
    own = cl.closed_loop(config, run.isl, run.osl, 8, 48).requests
    assert own["cached_tokens"].sum() == 0
    shared = cl.closed_loop(config, run.isl, run.osl, 8, 48, prompts=4).requests
    repeats = shared.sort_values("request_id").iloc[8:]  # every prompt was sent by then ...
    assert (repeats["cached_tokens"] >= run.isl - 16).mean() > 0.9  # ... all but its last block
    assert shared["ttft_s"].iloc[8:].mean() < 0.5 * own["ttft_s"].iloc[8:].mean()


def test_closed_loop_measures_the_middle_of_the_benchmarks_window() -> None:
    # Every prompt its own: three requests per client, the first one warm-up. From aiperf's
    # pool (the cache fills along the way): aiperf measures 20 x N requests after 2 x N warm-up
    # ones, the replay 2 x N around request 12 x N, or once all 100 prompts were sent (~460).
    # One more round is sent after the measured ones (its requests drain the server).
    assert cl.closed_loop_size(4, 100) == (16, 4, 12)
    assert cl.closed_loop_size(4, 100, prompt_pool=100) == (4 * 11 + 12, 44, 52)
    assert cl.closed_loop_size(64, 100, prompt_pool=100) == (460 + 192, 460, 588)
    assert cl.closed_loop_size(512, 100, 100) == (1024 + 1536, 1024, 2048)  # not under aiperf's


def test_the_measured_rounds_run_under_full_load_and_the_drain_is_left_out(
    tmp_path: Path,
) -> None:
    # A closed loop ends by draining: a client that has sent its last request sends no more,
    # so the last round finishes beside fewer and fewer others (and faster). The measured
    # rounds finish with every client busy: the finished request, the one its client sends at
    # that instant, and the other N - 1 clients' requests.
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.kind == "closed-loop" and r.concurrency == 8)
    n, first, end = cl.closed_loop_size(8, run.osl)
    req = cl.closed_loop(run.config(), run.isl, run.osl, 8, n).requests
    req = req.sort_values("request_id").reset_index(drop=True)

    def in_flight(t: float) -> int:
        return int(((req["arrival_s"] <= t) & (req["finish_s"] >= t)).sum())

    busy = [in_flight(t) for t in req["finish_s"]]
    assert busy[first:end] == [8 + 1] * (end - first)
    assert busy[end:] == sorted(busy[end:], reverse=True) and busy[-1] == 1
    measured, drained = req["e2e_s"].iloc[first:end].mean(), req["e2e_s"].iloc[end:].mean()
    assert drained < 0.95 * measured
    # The replay scores the measured rounds only.
    pred = rp.replay(run)
    assert len(pred[pred.index >= 0]) == end - first


def test_a_vllm_closed_loop_weighs_in_the_burst_that_starts_the_measured_phase(
    tmp_path: Path,
) -> None:
    # aiperf drains its warm-up before the measured phase, which then sends its N requests at
    # once: 1 of each client's 10 measured requests queues behind the others' prefills.
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.kind == "closed-loop" and r.concurrency == 8)
    pred = rp.replay(run)
    burst, steady = pred[pred.index < 0], pred[pred.index >= 0]
    assert len(burst) == 8 and pred["weight"].sum() == pytest.approx(cl.MEASURED_ROUNDS * 8)
    assert burst["ttft_s"].mean() > 2 * steady["ttft_s"].mean()  # eight prompts in one step
    mean = (burst["ttft_s"].sum() + (cl.MEASURED_ROUNDS - 1) * 8 * steady["ttft_s"].mean()) / (
        cl.MEASURED_ROUNDS * 8
    )
    assert rp.mean_of(pred, "ttft_s") == pytest.approx(mean, rel=1e-9)  # (two sums' rounding)
    assert rp.score(run, pred)["ttft_predicted_mean"] == pytest.approx(
        mean + fr.client_latency(run.gpu, "roofline", run.campaign), rel=1e-9
    )
    # SGLang's replay starts its clients together: its own first round is that burst, weighed
    # in the same way (1 of MEASURED_ROUNDS rounds), with mixed chunks or without.
    for knobs in ({}, {"enable_mixed_chunk": True, "max_prefill_tokens": run.isl + 1500}):
        sg = dataclasses.replace(run, policy="sglang", settings={**run.settings, **knobs})
        pred = rp.replay(sg)
        burst = pred[pred.index < 0]
        assert len(burst) == 8 and pred["weight"].sum() == pytest.approx(cl.MEASURED_ROUNDS * 8)
        n, _, _ = cl.closed_loop_size(8, run.osl)
        first = cl.closed_loop(sg.config(), run.isl, run.osl, 8, n, start="together").requests
        first = first.sort_values("request_id").iloc[:8]
        assert burst["ttft_s"].tolist() == pytest.approx(first["ttft_s"].tolist())


@pytest.mark.parametrize(
    ("policy", "start", "prompts", "kv_tokens"),
    [
        ("vllm", "even", 0, 0),
        ("vllm", "together", 0, 0),
        ("vllm", "even", 4, 0),
        ("sglang", "together", 0, 0),
        ("vllm-v0", "random", 0, 0),
        ("vllm", "even", 0, 3000),
    ],
)
def test_a_closed_loop_at_event_speed_is_the_step_by_step_one(
    tmp_path: Path, policy: str, start: str, prompts: int, kv_tokens: int
) -> None:
    # One instance takes its runs of decode steps at once, each run ending at a finish (where a
    # client sends again): every request, segment, step and token time as step by step, with
    # prefix-cache hits, clients in lockstep, and preemptions (3,000 KV tokens for 8 clients).
    from test_fastforward import assert_same_run

    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8)
    config = with_overrides(
        SimConfig(policy=policy), {"gpu": run.gpu, "model": run.model, **run.settings}
    )
    if kv_tokens:
        config = with_overrides(config, {"kv_capacity_tokens": kv_tokens})
    args = (config, run.isl, 200, 8, 40)
    fast = cl.closed_loop(*args, start=start, prompts=prompts)
    step = cl.closed_loop(*args, start=start, prompts=prompts, step_by_step=True)
    assert_same_run(fast, step)
    if kv_tokens:
        assert step.requests["preemptions"].sum() > 0


def test_sglang_clients_start_together(tmp_path: Path) -> None:
    # aiperf sends all N requests at once; under SGLang's prefill-first scheduler they stay one
    # wave (the replay of an SGLang run starts them together, a vLLM run's evenly).
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8)
    config = with_overrides(
        SimConfig(policy="sglang"), {"gpu": run.gpu, "model": run.model, **run.settings}
    )
    res = cl.closed_loop(config, run.isl, run.osl, 8, 24, start="together")
    req = res.requests.sort_values("request_id")
    assert (req["arrival_s"].iloc[:8] == 0).all()
    # The waves stay whole: each later request arrives with 7 others at the same instant.
    assert (req.groupby("arrival_s").size() == 8).all()
    assert cl.CLOSED_LOOP_START == {"sglang": "together"}
    with pytest.raises(ValueError, match="start"):
        cl.closed_loop(config, run.isl, run.osl, 8, 8, start="ramp")


def test_send_delays_split_a_wave_and_the_aiperf_phase_measures_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    # The what-if of AIPERF_PHASE: clients started together stay one wave without delays (SGLang
    # above; vLLM's mixed steps too, with equal prompts and outputs), and each send's random
    # delay splits it; "aiperf" replays the benchmark's whole measured phase, every request of
    # it counted, at event speed as step by step.
    from test_fastforward import assert_same_run

    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8)
    args = (run.config(), run.isl, 60, 8, 24)
    still = cl.closed_loop(*args, start="together").requests
    late = cl.closed_loop(*args, start="together", send_delay_s=0.05).requests
    later = late.sort_values("request_id").iloc[8:]
    assert still.sort_values("request_id").iloc[8:]["arrival_s"].nunique() < 8
    assert later["arrival_s"].nunique() == 16  # every send its own instant
    # Each later request arrives after some earlier one finished (a client's own), never before.
    finishes = np.sort(late["finish_s"].to_numpy())
    for k, t in enumerate(np.sort(later["arrival_s"].to_numpy())):
        assert finishes[k] < t
    fast = cl.closed_loop(*args, start="together", send_delay_s=0.05)
    step = cl.closed_loop(*args, start="together", send_delay_s=0.05, step_by_step=True)
    assert_same_run(fast, step)
    whole = rp.replay(run, start="aiperf")
    assert len(whole) == cl.MEASURED_ROUNDS * 8 and "weight" not in whole
    monkeypatch.setattr(sys, "argv", ["bench_fidelity_real.py", "--send-delay-ms", "-1"])
    with pytest.raises(SystemExit) as exit_:
        bench.main()
    assert exit_.value.code == 2 and "--send-delay-ms must be 0 or more" in capsys.readouterr().err


def test_sglang_rows_of_the_generator_get_its_flags(tmp_path: Path) -> None:
    # aiconfigurator's generator deploys SGLang (>= 0.5.6 rows) with --enable-mixed-chunk and
    # --max-prefill-tokens isl + 1500; older rows keep SGLang's defaults.
    root = _fake_data(tmp_path)
    path = root / "aiconfigurator" / "silicon_sample.csv"
    rows = list(csv.DictReader(path.open()))
    for i, version in enumerate(("0.5.1.post1", "0.5.6.post2", "0.5.23")):
        rows.append({**rows[0], "id": f"s{i}", "backend": "sglang", "backend_version": version})
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, AIC_FIELDS)
        out.writeheader()
        out.writerows(rows)
    by_key = {r.key: r for r in fr.load_runs(root)[0]}
    old, new, newest = by_key["s0"], by_key["s1"], by_key["s2"]
    assert old.policy == new.policy == "sglang" and not old.fit
    # All keep their release's SGLang memory fraction for the KV pool (H100, TP 2: 0.868 in
    # 0.5.1, 0.834 from 0.5.3), not 0.9, and its default overlap event loop; the releases
    # before 0.5.23 scale running fixed-length requests' output by new_token_ratio.
    assert old.settings == {
        "tensor_parallel": 2,
        "overlap_schedule": True,
        "mem_utilization": 0.868,
        "reserve_fixed_output": False,
    }
    assert new.settings == {
        "tensor_parallel": 2,
        "overlap_schedule": True,
        "mem_utilization": 0.834,
        "reserve_fixed_output": False,
        "enable_mixed_chunk": True,
        "max_prefill_tokens": 512 + 1500,
    }
    knobs = new.config().knobs
    assert knobs.enable_mixed_chunk and knobs.max_prefill_tokens == 2012 and knobs.overlap_schedule
    assert not knobs.reserve_fixed_output
    assert new.config().engine.mem_utilization == 0.834
    assert newest.config().knobs.reserve_fixed_output  # 0.5.23: in full, the default


def _public_runs_present() -> bool:
    """Where bench/fidelity_runs.py looks: $PDLAB_FIDELITY_DATA, else beside the checkout."""
    try:
        fr.data_dir()
    except SystemExit:
        return False
    return True


def test_a_runs_client_latency_is_its_campaigns() -> None:
    # The latency belongs to the measurement campaign (client, frontend, builds) and the GPU's
    # generation: a run takes the one fitted on a GPU of its campaign and generation, else its
    # own GPU's.
    assert aic.aic_campaign({"source_file": "/x/aic-auto-gap-analysis/data/h200_sxm/a.csv"}) == (
        "gap-analysis"
    )
    assert aic.aic_campaign(
        {"source_file": "2026-04-06.csv", "measured": "2025-10-29T00:00:00"}
    ) == ("inferencemax-2025")
    assert aic.aic_campaign({"measured": "2026-04-17T00:00:00.000Z"}) == "inferencex"
    table = fr.CLIENT_LATENCY_KERNELS_S
    assert fr.client_latency("H100-SXM", "kernels", "inferencemax-2025") == table["H200"]  # Hopper
    assert fr.client_latency("H200", "kernels", "gap-analysis") == table["H100-SXM"]
    assert fr.client_latency("B200", "kernels", "gap-analysis") == table["B200"]  # no Blackwell
    # A campaign no GPU was fitted on: the mean of the fitted ones; no campaign: the GPU's own.
    mean = sum(table[g] for g in ("H100-SXM", "H200", "B200")) / 3
    assert fr.client_latency("H100-SXM", "kernels", "inferencex") == pytest.approx(mean)
    assert fr.client_latency("H100-SXM", "kernels", "") == table["H100-SXM"]
    assert fr.client_latency("H200", "roofline", "gap-analysis") == fr.CLIENT_LATENCY_S["H100-SXM"]
    assert fr.client_latency("RTX-4090", "kernels", "") == 0.0


@pytest.mark.skipif(not _public_runs_present(), reason="public runs not present")
def test_each_gpus_fit_runs_are_of_the_campaign_its_latency_is_credited_to() -> None:
    runs, _ = fr.load_runs()
    for gpu, campaign in fr.FIT_CAMPAIGN.items():
        fit = [r for r in runs if r.gpu == gpu and r.fit]
        assert fit and {r.campaign for r in fit} == {campaign}, gpu


@pytest.mark.skipif(not _public_runs_present(), reason="public runs not present")
def test_real_runs_replay() -> None:
    runs, _ = fr.load_runs()
    some = [
        next(r for r in runs if r.kind == "trace"),
        next(r for r in runs if r.kind == "closed-loop" and r.osl <= 1024),
    ]
    for row in bench.score_runs(some).itertuples():
        assert abs(row.tpot_mean_err) < 100


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_scatter_keeps_engines_of_one_model_apart(lang: str) -> None:
    from ui.i18n import t

    # H200 has Llama-3.1-8B runs from vLLM and from SGLang, both held out: one series each,
    # named by engine (without its version) and drawn with its own marker.
    def row(engine: str, ttft: float) -> dict:
        return {
            "gpu": "H200",
            "model": "Llama-3.1-8B:fp8",
            "engine": engine,
            "fit": False,
            "parallel": "TP1",
            "n": 3,
            "ttft_measured_mean": 0.2,
            "ttft_predicted_mean": ttft,
            "tpot_measured_mean": 0.01,
            "tpot_predicted_mean": 0.012,
        }

    report = {"runs": [row("vLLM 0.12.0", 0.25), row("SGLang 0.5.6.post2", 0.1)], "summary": []}
    fig = fidelity_scatter("H200", lang, report)  # (TTFT)
    named = {tr.name: tr for tr in fig.data if tr.mode == "markers"}
    assert len(named) == 2
    lines = [tr.name for tr in fig.data if tr.mode == "lines" and tr.showlegend]
    assert lines == [t("charts.fid.scatter.exact", lang), t("charts.fid.scatter.band", lang)]
    tpot = fidelity_scatter("H200", lang, report, metric="tpot")
    assert t("charts.fid.scatter.tpot", lang) in tpot.layout.title.text
    assert sorted(y for tr in tpot.data if tr.mode == "markers" for y in tr.y) == [12.0, 12.0]
    with pytest.raises(ValueError, match="metric must be one of ttft, tpot"):
        fidelity_scatter("H200", lang, report, metric="e2e")
    (vllm,) = [tr for name, tr in named.items() if "vLLM" in name]
    (sglang,) = [tr for name, tr in named.items() if "SGLang" in name]
    assert "0.5.6" not in sglang.name and "0.5.6.post2" in sglang.text[0]  # version: in the hover
    assert vllm.marker.symbol != sglang.marker.symbol
    assert list(sglang.y) == [0.1] and list(vllm.y) == [0.25]  # each its own points
    # The legend starts well below the plot area: under the log axes' two rows of tick labels
    # and the axis title (in Korean the title sits lowest; at 87 px it overlapped the legend).
    layout = fig.layout
    plot_px = layout.height - layout.margin.t - layout.margin.b
    assert layout.legend.yanchor == "top" and -layout.legend.y * plot_px >= 110


def test_a_kernel_refit_starts_from_the_kernel_profile_in_use(monkeypatch) -> None:
    # A refit after a change to the replay (--from-fitted) starts where the last fit of the
    # same cost model ended: FITTED_KERNELS' kernel_scale and overheads for the kernel tables,
    # FITTED's figures for the roofline; --kernel-scale still says where kernel_scale starts.
    import fit_profiles as fp

    from sim.cost.profiles import FITTED, FITTED_KERNELS

    k = FITTED_KERNELS["H200"].for_layers(80)
    start = fp.start_point("H200", 80, kernels=True, from_fitted=True)
    assert start[1] == k.kernel_scale and start[3] == pytest.approx(k.overhead_s * 1000)
    r = FITTED["H200"].for_layers(80)
    roof = fp.start_point("H200", 80, kernels=False, from_fitted=True)
    assert roof[1] == r.mfu_attn and roof[3] == pytest.approx(r.overhead_s * 1000)
    assert fp.start_point("H200", 80, True, True, kernel_scale=1.0)[1] == 1.0
    assert fp.start_point("H200", 80, True, False)[1] == 1.3  # the generic start
    assert list(fp.start_point("H200", 80, False, False)) == list(fp.START)
    # A GPU's first kernel fit starts from its roofline profile (mfu, mbu, overheads).
    monkeypatch.setattr(fp, "FITTED_KERNELS", {})
    first = fp.start_point("H200", 80, kernels=True, from_fitted=True)
    assert first[0] == r.mfu and first[2] == r.mbu and first[1] == 1.3
    assert first[3] == pytest.approx(r.overhead_s * 1000)


def test_a_fit_on_tpot_alone_leaves_the_ttft_to_the_client_latency(tmp_path: Path) -> None:
    # --metrics tpot: the profile answers for the TPOTs (the work each step carries), the
    # client latency alone for the TTFTs (fit_profiles.METRICS_TPOT).
    import fit_profiles as fp

    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.kind == "closed-loop")
    results = [[("ttft", 0.2, 0.1), ("tpot", 0.011, 0.01)]]
    both = fp.loss(results, [run], 0.0)
    assert both == pytest.approx((math.log(2) ** 2 + math.log(1.1) ** 2) / 2)
    assert fp.loss(results, [run], 0.0, fp.METRICS_TPOT) == pytest.approx(math.log(1.1) ** 2)
    assert fp.loss(results, [run], 5.0, fp.METRICS_TPOT) == fp.loss(results, [run], 0.0, ("tpot",))
    assert fp.loss([[]], [run], 0.0, fp.METRICS_TPOT) == 9.0  # a replay that failed
    # The objective then searches no latency; fit_latency finds it on the TTFTs.
    f = fp.Objective([run], 1, 64, {"step_costs": "roofline"}, metrics=fp.METRICS_TPOT)
    x = fp.to_x(fp.START)
    value, latency = f.evaluate(x)
    assert latency == 0.0 and value == pytest.approx(
        fp.loss([fp.pairs(run, fp.at_depth(fp.to_params(x), run, 64))], [run], 0.0, ("tpot",))
    )
    best, overall = f.fit_latency(x)
    pred = dict((m, p) for m, p, _ in fp.pairs(run, fp.at_depth(fp.to_params(x), run, 64)))
    target = run.measured_means["ttft_s"] - pred["ttft"]
    assert abs(best - min(max(target, 0.0), 0.3)) <= 0.005 + 1e-9  # the grid's step


def test_the_client_latency_is_fitted_where_the_engine_adds_least(tmp_path: Path) -> None:
    # METRICS_TPOT: the latency comes from the shortest prompts at the fewest clients.
    import fit_profiles as fp

    runs, _ = fr.load_runs(_fake_data(tmp_path))
    closed = [r for r in runs if r.kind == "closed-loop"]
    longer = dataclasses.replace(closed[0], isl=4096, concurrency=1)
    picked = fp.intercept_runs([*runs, longer])
    assert picked == [r for r in closed if r.concurrency == 4]  # 512 tokens in, 4 clients
    assert fp.intercept_runs([r for r in runs if r.specs]) == []


def test_a_replay_that_serves_nothing_is_scored_as_failed(tmp_path: Path) -> None:
    """Prompts longer than the whole KV cache are rejected, every one: the run is scored as one
    the simulator could not replay (NaN errors, the reason kept), not a crash of the bench."""
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8)
    tiny = dataclasses.replace(run, settings={**run.settings, "kv_capacity_tokens": run.isl // 2})
    with pytest.raises(ValueError, match="no request of the measured window was served"):
        rp.replay(tiny)
    row = bench.score_runs([tiny]).iloc[0]
    assert math.isnan(row["ttft_mean_err"]) and "was served" in row["error"]


def test_the_clients_start_can_be_chosen_for_a_what_if(tmp_path: Path) -> None:
    """--closed-loop-start: a vLLM closed loop replayed with its clients sent together waits
    longer for its first tokens than one started at random phases (its default), since every
    round's prompts then meet; nothing else about the run changes."""
    runs, _ = fr.load_runs(_fake_data(tmp_path))
    run = next(r for r in runs if r.concurrency == 8 and r.policy == "vllm")
    default, together = (bench.score_runs([run], start=s).iloc[0] for s in (None, "together"))
    assert together["ttft_predicted_mean"] > default["ttft_predicted_mean"]
    assert together["ttft_measured_mean"] == default["ttft_measured_mean"]
    assert default["ttft_predicted_mean"] == pytest.approx(
        bench.score_runs([run], start=cl.CLOSED_LOOP_DEFAULT).iloc[0]["ttft_predicted_mean"]
    )


def test_one_measurement_counts_once_and_work_in_progress_rows_stay_out(tmp_path: Path) -> None:
    """The silicon sample gathers several exports: a row equal to an earlier one in deployment,
    workload and measured means is the same run (skipped, counted); a rerun with other means is
    a second measurement (kept); a row its source marks wip=True is left out. A MoE row with
    moe_ep = TP on one instance replays with its ranks holding whole experts."""
    root = _fake_data(tmp_path)
    path = root / "aiconfigurator" / "silicon_sample.csv"
    rows = list(csv.DictReader(path.open()))
    first = rows[0]
    rows += [
        {**first, "id": "a-again", "silicon_data_source": "db-dump; silicon_concurrency=4"},
        {**first, "id": "a-rerun", "silicon_ttft_ms": "125"},
        {**first, "id": "a-wip", "silicon_ttft_ms": "130", "silicon_data_source": "wip=True"},
        {
            **first,
            "id": "moe-ep",
            "model_path": "MiniMaxAI/MiniMax-M2.5",
            "system": "h200_sxm",
            "precision": "fp8",
            "tp_size": "4",
            "moe_tp_size": "1",
            "moe_ep_size": "4",
        },
    ]
    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, AIC_FIELDS)
        out.writeheader()
        out.writerows(rows)
    runs, skipped = fr.load_runs(root)
    keys = {r.key for r in runs}
    assert {"a", "a-rerun", "moe-ep"} <= keys and not keys & {"a-again", "a-wip"}
    assert skipped["aiconfigurator: the same measurement as an earlier row"] == 1
    assert skipped["aiconfigurator: a row its source marks work in progress"] == 1
    ep = next(r for r in runs if r.key == "moe-ep")
    assert ep.model == "MiniMax-M2.5:fp8" and ep.kv_dtype == "fp8" and ep.parallel == "TP4+EP4"
    assert ep.settings == {"tensor_parallel": 4, "expert_parallel": True}
    assert ep.config().hardware.expert_parallel and not ep.fit


def test_sglang_051_rows_keep_that_release_s_memory_fraction() -> None:
    # sglang 0.5.1.post1 server_args.py 352-393: nvidia-smi's 81,559 MiB on an H100, less
    # (9.5 + TP / 2) GiB, as a share rounded to 3 places; the formula of 0.5.3 on keeps more back
    assert aic.sglang_051_mem_fraction_static("H100-SXM", 2) == round((81559 - 10752) / 81559, 3)
    assert aic.sglang_051_mem_fraction_static("H100-SXM", 8) == 0.831
    assert aic.sglang_051_mem_fraction_static("B200", 4) == round((183359 - 32768) / 183359, 3)
