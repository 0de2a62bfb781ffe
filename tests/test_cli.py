"""The command line is a contract: lessons, docs and outside scripts rely on it."""

import json
import subprocess
import sys

import pandas as pd
import pytest
from conftest import ROOT, azure_trace

from sim.cli import main
from sim.core.trace import REQUEST_COLUMNS


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_names_every_scenario_policy_topology_gpu_and_model(capsys):
    code, out, _ = cli(capsys, "list")
    assert code == 0
    for name in (
        "c12-three-requests",
        "static",
        "prefill-first",
        "chunked",
        "short-first",
        "colocated",
        "router",
        "disaggregated",
        "A100-80GB",
        "H100-SXM",
        "H200",
        "L4",
        "RTX-4090",
        "Llama-3.1-8B",
        "Llama-3.3-70B",
        "Qwen2.5-0.5B",
        "Qwen2.5-7B",
        "Mistral-7B",
        "SmolLM2-135M",
    ):
        assert name in out


def test_run_json_gives_summary_and_the_requests_columns(capsys):
    code, out, _ = cli(capsys, "run", "--scenario", "c5", "--variant", "prefill-first", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"summary", "requests"}
    assert len(data["requests"]) == 9
    assert set(REQUEST_COLUMNS) <= set(data["requests"][0])
    assert data["summary"]["max_itl_s"] > 0.5  # the freeze of C5, visible from the CLI


def test_knobs_and_flags_change_the_result(capsys):
    _, base, _ = cli(capsys, "run", "--scenario", "c6", "--json")
    _, small, _ = cli(
        capsys, "run", "--scenario", "c6", "--json", "--set", "max_num_batched_tokens=256"
    )
    _, h200, _ = cli(capsys, "run", "--scenario", "c6", "--json", "--gpu", "h200")
    itl = lambda out: json.loads(out)["summary"]["max_itl_s"]  # noqa: E731
    assert itl(small) < itl(base)
    assert itl(h200) < itl(base)


def test_text_summary_shows_the_prefix_cache_hit_rate_when_caching_is_on(capsys):
    code, out, _ = cli(capsys, "run", "--scenario", "pc1")  # vllm: prefix caching on
    assert code == 0
    (line,) = [x for x in out.splitlines() if x.strip().startswith("prefix_cache_hit_rate")]
    # 2,000 of each 2,300-token prompt are shared; the first request computes them itself.
    assert float(line.split()[1]) == pytest.approx(2000 / 2300 * 59 / 60, abs=1e-3)
    code, out, _ = cli(capsys, "run", "--scenario", "pc1", "--set", "enable_prefix_caching=false")
    assert code == 0 and "prefix_cache_hit_rate" not in out
    code, out, _ = cli(capsys, "run", "--scenario", "c5", "--variant", "prefill-first (V0)")
    assert code == 0 and "prefix_cache_hit_rate" not in out  # V0: no prefix cache


def test_out_writes_the_five_files(tmp_path, capsys):
    code, _, _ = cli(
        capsys, "run", "--scenario", "c12", "--topology", "disaggregated", "--out", str(tmp_path)
    )
    assert code == 0
    names = {"requests.csv", "segments.csv", "steps.csv", "summary.json", "trace.json"}
    assert names <= {p.name for p in tmp_path.iterdir()}
    segments = pd.read_csv(tmp_path / "segments.csv")
    assert "kv_transfer" in set(segments.kind)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])


def test_run_imports_the_azure_trace(capsys, tmp_path):
    sample = tmp_path / "azure.csv"
    lines = azure_trace("code").read_text().splitlines()[:101]
    sample.write_text("\n".join(lines) + "\n")
    code, out, _ = cli(capsys, "run", "--workload", str(sample), "--json")
    assert code == 0
    assert len(json.loads(out)["requests"]) == 100


def test_sweep_prints_attainment_per_rate_and_the_goodput(capsys):
    code, out, _ = cli(capsys, "sweep", "--scenario", "c2", "--rate", "10:40:10")
    assert code == 0
    assert "goodput:" in out and "per GPU" in out
    for rate in ("10.0", "20.0", "30.0", "40.0"):
        assert rate in out


def test_compare_shows_every_variant_and_the_window_table(capsys):
    code, out, _ = cli(capsys, "compare", "--scenario", "c12")
    assert code == 0
    assert "colocated" in out and "disaggregated" in out and "Output tokens" in out


def test_policy_on_a_scenario_drops_a_chunking_budget_and_says_so(capsys):
    # C7's variant chose a 2048-token CHUNK budget; prefill-first cannot chunk, so that value
    # would reject the 32,768-token prompt. It runs on prefill-first's own budget instead.
    code, out, err = cli(capsys, "run", "--scenario", "c7", "--policy", "prefill-first", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["summary"]["rejected"] == 0
    assert max(r["prompt_tokens"] for r in data["requests"]) == 32768
    assert all(r["status"] == "finished" for r in data["requests"])
    assert err.count("\n") == 1 and err.startswith("note: --policy prefill-first")
    assert "max_num_batched_tokens=2048" in err and "whole prompts" in err


def test_policy_on_a_v0_variant_drops_its_v0_knobs_and_names_them(capsys):
    code, out, err = cli(
        capsys,
        "run",
        "--scenario",
        "c8",
        "--variant",
        "V0: 4 partial, 1 long",
        "--policy",
        "vllm",
        "--json",
    )
    assert code == 0, err
    assert err.count("\n") == 1 and err.startswith("note: --policy vllm")
    assert "max_num_partial_prefills=4 (vllm has no such knob)" in err
    # Same name, other meaning: V0's "what counts as long" is not V1's per-step cap.
    assert "long_prefill_token_threshold=10000 (vllm-v0: the length above which" in err
    # What runs is plain vllm on the same workload: C8's first variant chose no knob, so it
    # carries nothing over and says nothing.
    code, plain, quiet = cli(capsys, "run", "--scenario", "c8", "--policy", "vllm", "--json")
    assert code == 0 and quiet == ""
    assert json.loads(out)["requests"] == json.loads(plain)["requests"]


def test_policy_keeps_knobs_that_mean_the_same_and_set_wins_silently(capsys):
    # short-first is vLLM V1 too: the threshold of 512 means the same there and carries over.
    variant = "vLLM, threshold 512"
    code, carried, err = cli(
        capsys, "run", "--scenario", "c7", "--variant", variant, "--policy", "short-first", "--json"
    )
    assert code == 0 and err == ""
    code, explicit, _ = cli(
        capsys,
        "run",
        "--scenario",
        "c7",
        "--variant",
        "short-first",
        "--set",
        "long_prefill_token_threshold=512",
        "--json",
    )
    assert code == 0
    assert json.loads(carried)["requests"] == json.loads(explicit)["requests"]
    # A knob the user sets again is the user's: the note does not list it.
    code, _, err = cli(
        capsys,
        "run",
        "--scenario",
        "c8",
        "--variant",
        "V0: 4 partial, 1 long",
        "--policy",
        "vllm",
        "--set",
        "long_prefill_token_threshold=512",
        "--json",
    )
    assert code == 0
    assert "max_num_partial_prefills=4" in err and "long_prefill_token_threshold" not in err


def test_every_knob_declares_its_meaning():
    """carry_to keeps a knob only where both sides declare the same meaning (Knobs.MEANINGS)."""
    import dataclasses

    from sim.policies import POLICIES

    for name, cls in POLICIES.items():
        values = dataclasses.asdict(cls.Knobs())
        for f in dataclasses.fields(cls.Knobs):
            assert cls.Knobs.meaning(f.name, values), (name, f.name)


@pytest.mark.parametrize(
    "args, words",
    [
        (["run", "--scenario", "nope"], "unknown scenario"),
        (["run", "--scenario", "c5", "--set", "bogus=1"], "unknown knob 'bogus'"),
        (["run", "--scenario", "c5", "--set", "max_num_seqs=abc"], "whole number"),
        (["run", "--scenario", "c5", "--set", "max_num_seqs"], "key=value"),
        (["run", "--scenario", "c5", "--policy", "chunked", "--set", "batch_size=4"], "static"),
        (["run", "--scenario", "c5", "--gpu", "TPU"], "unknown GPU"),
        (["run", "--scenario", "c5", "--set", "mbu=2"], "mbu"),
        (["run", "--scenario", "c5", "--set", "topology=mesh"], "unknown topology"),
        (["run", "--scenario", "c5", "--model", "Llama-3.3-70B"], "tensor_parallel"),
        (["run"], "--scenario"),
        (["run", "--workload", "/no/such/file.csv"], "No such file"),
        (["sweep", "--scenario", "c2", "--rate", "5:1:1"], "--rate"),
        (["frobnicate"], "invalid choice"),
        (["--policy", "vllm"], "name a command before the options: python -m sim {list,run,"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(capsys, args, words):
    code, out, err = cli(capsys, *args)
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1
    assert words in err


def test_bad_csv_names_the_line_and_field(capsys, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0,100,10\n0.5,-3,10\n")
    code, _, err = cli(capsys, "run", "--workload", str(bad))
    assert code == 2
    assert "line 3" in err and "prompt_tokens" in err


def test_python_dash_m_sim_exits_2_without_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "sim", "run", "--scenario", "nope"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.startswith("error:")


AZURE_YEAR_ONE = "TIMESTAMP,ContextTokens,GeneratedTokens\n0001-01-01T00:00:00+05:00,10,5\n"


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["sweep", "--scenario", "c2", "--rate", "1:inf:1"], "--rate"),
        (["sweep", "--scenario", "c2", "--rate", "nan:2:1"], "--rate"),
        (["run", "--workload", "AZURE"], "TIMESTAMP"),
        (["run", "--scenario", "c10b", "--set", "num_instances=40000"], "num_instances"),
        (["run", "--scenario", "c11", "--set", "swap_space_gb=inf"], "swap_space_gb"),
        (["run", "--scenario", "c2", "--set", "mem_utilization=1e-9"], "mem_utilization"),
        (
            [
                "run",
                "--scenario",
                "c12",
                "--topology",
                "disaggregated",
                "--set",
                "kv_bandwidth_gb_s=1e-15",
            ],
            "kv_bandwidth_gb_s",
        ),
        (["run", "--scenario", "c2", "--set", "overhead_ms=inf"], "overhead_ms"),
        (["run", "--scenario", "c2", "--set", "kv_latency_ms=inf"], "kv_latency_ms"),
        (["run", "--scenario", "c2", "--set", "kv_capacity_tokens=1"], "kv_capacity_tokens"),
        (["run", "--scenario", "c2", "--set", "decode_gpu=nope"], "decode_gpu"),
        (["run", "--scenario", "c2", "--gpu", "RTX9090"], "gpu"),
        (["run", "--scenario", "c2", "--model", "nope"], "model"),
        (["run", "--scenario", "c2", "--set", "max_num_seqs=1e300"], "max_num_seqs"),
        (["run", "--scenario", "c2", "--set", "mfu=1e-300"], "mfu"),
    ],
)
def test_extremes_exit_2_with_one_line_naming_the_knob(capsys, tmp_path, args, names):
    azure = tmp_path / "azure.csv"
    azure.write_text(AZURE_YEAR_ONE)
    args = [str(azure) if a == "AZURE" else a for a in args]
    code, out, err = cli(capsys, *args)
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one line, no traceback
    assert names in err
    if "--set" in args:  # the knob it names exists: the message's first word that is a knob
        from sim.config import SimConfig, knob_names

        knob = args[args.index("--set") + 1].split("=")[0]
        assert knob in knob_names(SimConfig().policy)
        assert "activation_reserve_gb" not in err  # a knob that does not exist (issue 9)


def test_measured_kernels_say_what_priced_each_operator_or_that_the_tables_are_missing(
    capsys, monkeypatch
):
    pytest.importorskip("aiconfigurator_core")
    args = ("run", "--scenario", "c5", "--gpu", "H200", "--set", "step_costs=kernels")
    code, out, err = cli(capsys, *args)
    assert code == 0 and "note:" not in err
    said = " ".join(out.split())  # the line is wrapped at 100 columns
    assert "step costs: aiconfigurator-core, H200: linear layers (vLLM 0.24.0 GEMMs" in said
    assert (
        "lm_head (vLLM 0.24.0 GEMMs, bfloat16)" in said and "roofline: sampling, KV write" in said
    )
    _, roofline, _ = cli(capsys, "run", "--scenario", "c5", "--gpu", "H200")
    assert "step costs" not in roofline  # the default prices every step by the roofline
    # Without the package (a host installed from requirements.txt alone) the run still works,
    # on the roofline, and says so once on stderr.
    import sim.cli

    monkeypatch.setattr(sim.cli, "kernel_tables_available", lambda: False)
    code, _, err = cli(capsys, *args)
    assert code == 0
    assert "requirements-kernels.txt" in err and "priced by the roofline" in err
