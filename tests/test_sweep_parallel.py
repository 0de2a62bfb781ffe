"""Sweeps run their points side by side (sim/runs/parallel.py) and give the serial table.

Ray: the real backend is tested where `ray` is installed (test_parallel_ray.py); here,
everywhere, a missing Ray is one clear line, as the CLI prints it.
"""

import sys

import pandas as pd
import pytest

from sim.cli import main
from sim.config import SimConfig, with_overrides
from sim.runs.budget import Budget, sweep_within
from sim.runs.parallel import map_points
from sim.runs.sweep import sweep_rates
from sim.workloads.workload import WorkloadConfig

WORKLOAD = WorkloadConfig(num_requests=60, rate_per_s=4.0, seed=3)
RATES = [2.0, 6.0, 10.0, 14.0]


def _square(x: int) -> int:
    return x * x


def test_processes_give_the_serial_table():
    config = with_overrides(SimConfig(), {"ttft_slo_s": "0.2", "tpot_slo_s": "0.03"})
    serial = sweep_rates(WORKLOAD, config, RATES)
    done = []
    parallel = sweep_rates(WORKLOAD, config, RATES, jobs=2, progress=lambda d, n: done.append(d))
    pd.testing.assert_frame_equal(serial, parallel, check_exact=True)
    assert sorted(done) == [1, 2, 3, 4]


def test_budgeted_sweep_in_processes_gives_the_serial_table():
    budget = Budget()
    serial = sweep_within(WORKLOAD, SimConfig(), RATES, budget)
    parallel = sweep_within(WORKLOAD, SimConfig(), RATES, budget, jobs=2)
    pd.testing.assert_frame_equal(serial, parallel, check_exact=True)


def test_cli_sweep_jobs_prints_the_same(capsys):
    args = ["sweep", "--scenario", "c2", "--rate", "4:16:4"]
    assert main(args) == 0
    serial = capsys.readouterr().out
    assert main([*args, "--jobs", "2"]) == 0
    assert capsys.readouterr().out == serial


def test_map_points_keeps_order_and_rejects_bad_arguments():
    assert map_points(_square, [(i,) for i in range(7)], jobs=3) == [i * i for i in range(7)]
    assert map_points(_square, [(3,)], jobs=0) == [9]
    with pytest.raises(ValueError, match="jobs"):
        map_points(_square, [(1,)], jobs=-1)
    with pytest.raises(ValueError, match="--backend ray"):
        map_points(_square, [(1,)], address="ray://somewhere:10001")


def test_without_ray_the_ray_backend_says_what_to_do(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(ValueError, match=r"--backend ray needs Ray: pip install"):
        map_points(_square, [(1,)], backend="ray")
    assert main(["sweep", "--scenario", "c2", "--rate", "4:8:4", "--backend", "ray"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --backend ray needs Ray") and "\n" not in err
