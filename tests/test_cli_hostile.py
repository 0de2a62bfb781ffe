"""`python -m sim` under hostile or careless use: one line and exit 2, never a traceback, a
swapped machine, a half-written --out folder or orphaned workers (issue 32, defects 8-11)."""

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
from conftest import ROOT

from sim.cli import main

HUGE = ["--topology", "router", "--model", "SmolLM2-135M", "--gpu", "B200"]


def cli(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# ---- 8: memory, estimated before the run ----------------------------------------------------


def test_the_issues_1024_instances_are_estimated_at_tens_of_gb():
    from sim.config import SimConfig, with_overrides
    from sim.runs.memory import needed_bytes

    big = with_overrides(
        SimConfig(),
        {"topology": "router", "num_instances": "1024", "model": "SmolLM2-135M", "gpu": "B200"},
    )
    assert needed_bytes(big) > 20 * 2**30
    plain = with_overrides(big, {"enable_prefix_caching": "false"})  # a counter: no books
    assert needed_bytes(plain) < 2**30


def test_a_run_that_would_not_fit_in_memory_is_refused_before_it_starts(capsys, monkeypatch):
    # 64 instances need ~1.8 GB: refused on a machine with 1 GB free (and cheap if it runs).
    monkeypatch.setenv("PDLAB_CLI_MEMORY_GB", "1")
    started = time.perf_counter()
    code, _, err = cli(
        capsys, "run", "--scenario", "c2", *HUGE, "--set", "num_instances=64", "--json"
    )
    line = one_line_error(code, err)
    assert "GB" in line and "num_instances" in line
    assert time.perf_counter() - started < 5  # refused, not run
    code, _, err = cli(
        capsys, "sweep", "--scenario", "c2", "--rate", "1:2:1", *HUGE, "--set", "num_instances=64"
    )
    assert "num_instances" in one_line_error(code, err)


# ---- 9: one line, not a traceback -----------------------------------------------------------


def test_a_rate_range_of_infinitely_many_points_is_one_line(capsys):
    code, _, err = cli(capsys, "sweep", "--scenario", "c2", "--rate", "1:1e308:1e-300")
    assert "--rate" in one_line_error(code, err)


def deep(n=5000) -> str:
    return "[" * n + "]" * n


def test_json_nested_5000_deep_is_one_line(capsys, tmp_path):
    trace = tmp_path / "deep.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 5, "x": ' + deep() + "}\n"
    )
    code, _, err = cli(capsys, "run", "--workload", str(trace), "--json")
    assert "line 1" in one_line_error(code, err)
    config = tmp_path / "m" / "config.json"
    config.parent.mkdir()
    config.write_text('{"a": ' + deep() + "}")
    code, _, err = cli(capsys, "run", "--scenario", "c2", "--model", str(config.parent))
    assert "config.json" in one_line_error(code, err)


@pytest.mark.parametrize("bad", [[1, 2], "fp8", 8])
def test_a_quantization_config_that_is_not_an_object_is_one_line(capsys, tmp_path, bad):
    config = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "intermediate_size": 128,
        "vocab_size": 100,
        "quantization_config": bad,
    }
    path = tmp_path / f"q{len(str(bad))}.json"
    path.write_text(json.dumps(config))
    code, _, err = cli(capsys, "run", "--scenario", "c2", "--model", str(path))
    assert "quantization_config" in one_line_error(code, err)


# ---- 10: --out is written whole or not at all ------------------------------------------------


def written(out) -> tuple[int, int, int]:
    """(rows of requests.csv, summary's num_requests, request tracks in trace.json)."""
    trace = json.loads((out / "trace.json").read_text())
    events = trace["traceEvents"]
    (requests,) = [e["pid"] for e in events if e.get("args", {}).get("name") == "requests"]
    tracks = {e["tid"] for e in events if e.get("ph") == "X" and e["pid"] == requests}
    summary = json.loads((out / "summary.json").read_text())["summary"]
    return len(pd.read_csv(out / "requests.csv")), summary["num_requests"], len(tracks)


def test_a_run_killed_while_writing_leaves_the_last_whole_output(capsys, tmp_path, monkeypatch):
    import sim.runs.export

    out = tmp_path / "out"
    assert main(["run", "--scenario", "c5", "--out", str(out), "--json"]) == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def killed(run):  # the process dies after the CSVs, before trace.json is done
        raise KeyboardInterrupt

    monkeypatch.setattr(sim.runs.export, "chrome_trace", killed)
    with pytest.raises(KeyboardInterrupt):
        main(["run", "--scenario", "c12", "--out", str(out), "--json"])
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # untouched, whole
    assert [p.name for p in tmp_path.iterdir()] == ["out"] or all(
        p.name.startswith(".") for p in tmp_path.iterdir() if p.name != "out"
    )
    monkeypatch.undo()
    assert main(["run", "--scenario", "c12", "--out", str(out), "--json"]) == 0  # next run: ok
    assert len({*written(out)}) == 1 and written(out)[0] == 3
    capsys.readouterr()


def test_a_second_writer_of_the_same_out_fails_clearly_and_nothing_mixes(
    capsys, tmp_path, monkeypatch
):
    import sim.runs.export

    out, seen = tmp_path / "out", {}
    real = sim.runs.export.chrome_trace

    def meanwhile(run):  # while this run writes, another run writes the same folder
        if not seen:
            seen["code"] = main(["run", "--scenario", "c12", "--out", str(out), "--json"])
            seen["err"] = capsys.readouterr().err
        return real(run)

    monkeypatch.setattr(sim.runs.export, "chrome_trace", meanwhile)
    assert main(["run", "--scenario", "c5", "--out", str(out), "--json"]) == 0
    assert "another" in one_line_error(seen["code"], seen["err"])
    assert written(out) == (9, 9, 9)  # the first writer's run, whole


# ---- 11: sweep workers die with their parent; Ctrl-C and SIGTERM are one line ----------------


def children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    fields = f.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != b"Z":
                kids.append(int(entry))
    return kids


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def start_sweep():
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sim",
            "sweep",
            "--scenario",
            "c2",
            "--rate",
            "1:200:1",
            "--jobs",
            "2",
            # stepped one by one (speculation has no event speed): ~30 s of work, not the ~2 s
            # the plain sweep takes, which could end before the signal on a busy machine
            "--policy",
            "vllm",
            "--set",
            "speculative=eagle",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        # Ctrl-C as a terminal delivers it: a suite started in the background by a shell without
        # job control (`cmd &` in a script, nohup) inherits SIGINT ignored, and Python keeps an
        # ignored SIGINT ignored, so the sweep would run to its end and exit 0.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 60
    while len(children(proc.pid)) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the workers never started"
        time.sleep(0.1)
    time.sleep(0.5)  # the workers are at work
    return proc, children(proc.pid)


def gone(pids, within_s=30.0) -> bool:
    deadline = time.monotonic() + within_s
    while any(alive(p) for p in pids):
        if time.monotonic() > deadline:
            for p in pids:  # (no orphans left behind by the test either)
                if alive(p):
                    os.kill(p, signal.SIGKILL)
            return False
        time.sleep(0.1)
    return True


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_and_sigterm_stop_a_parallel_sweep_with_one_line(sig, code):
    proc, workers = start_sweep()
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == code, text
    assert "Traceback" not in text and len(text.strip().splitlines()) == 1, text
    assert gone(workers)


def test_workers_die_with_a_killed_sweep():
    proc, workers = start_sweep()
    proc.kill()
    proc.wait(timeout=30)
    assert gone(workers), "SIGKILL left the sweep's workers running"


# ---- found on a further pass ---------------------------------------------------------------


def test_a_hash_id_too_large_for_an_integer_names_its_line(capsys, tmp_path):
    trace = tmp_path / "h.jsonl"
    trace.write_text(
        '{"timestamp": 0, "input_length": 5, "output_length": 5, "hash_ids": [1e400]}\n'
    )
    code, _, err = cli(capsys, "run", "--workload", str(trace), "--json")
    assert "line 1" in one_line_error(code, err)


def test_a_model_file_of_gigabytes_is_not_read_in_full(capsys, tmp_path):
    huge = tmp_path / "config.json"
    with open(huge, "wb") as f:
        f.truncate(17 << 20)  # (sparse: 17 MB of zeros, written in no time)
    code, _, err = cli(capsys, "run", "--scenario", "c2", "--model", str(huge))
    assert "MB" in one_line_error(code, err)


def test_a_parallel_sweep_counts_each_workers_kv_books(monkeypatch):
    from sim.config import SimConfig, with_overrides
    from sim.runs.memory import check_memory, needed_bytes

    config = with_overrides(
        SimConfig(),
        {"topology": "router", "num_instances": "16", "model": "SmolLM2-135M", "gpu": "B200"},
    )
    one, eight = needed_bytes(config), needed_bytes(config, copies=8)
    assert 7 * (one - 300 * 2**20) < eight - 300 * 2**20 < 9 * (one - 300 * 2**20)
    monkeypatch.setenv("PDLAB_CLI_MEMORY_GB", str(2 * one / 2**30))
    check_memory(config)
    with pytest.raises(ValueError, match="--jobs"):
        check_memory(config, copies=8)
