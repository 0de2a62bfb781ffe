"""The Ray backend (sim/runs/parallel.py) for real: the serial table, and the serial errors.

Skipped where Ray is not installed (CI). Where it is, the module starts a throwaway Ray cluster in
this process (`address="local"`, the path the CLI's `--address local` takes: the `sim` package is
shipped to its workers like to a remote cluster's) and stops it at the end. A missing Ray is
tested everywhere, in test_sweep_parallel.py.
"""

import sys

import pandas as pd
import pytest

ray = pytest.importorskip("ray")

import sim.runs.sweep  # noqa: E402
from sim.cli import main  # noqa: E402
from sim.config import SimConfig  # noqa: E402
from sim.runs.parallel import ClusterError, map_points  # noqa: E402
from sim.runs.sweep import parse_rates, sweep_rates  # noqa: E402
from sim.workloads.workload import WorkloadConfig  # noqa: E402

WORKLOAD = WorkloadConfig(num_requests=60, rate_per_s=4.0, seed=3)
RATES = [2.0, 6.0, 10.0, 14.0]
CLI_SWEEP = ["sweep", "--scenario", "c2", "--rate", "4:16:4"]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    map_points(parse_rates, [("1:2:1",)], backend="ray", address="local")  # joins, ships sim
    yield
    ray.shutdown()


def test_ray_gives_the_serial_table():
    serial = sweep_rates(WORKLOAD, SimConfig(), RATES)
    done = []
    on_ray = sweep_rates(
        WORKLOAD, SimConfig(), RATES, backend="ray", progress=lambda d, n: done.append((d, n))
    )
    pd.testing.assert_frame_equal(serial, on_ray, check_exact=True)
    assert done == [(1, 4), (2, 4), (3, 4), (4, 4)]


def test_a_failing_point_raises_what_it_raises_serially():
    items = [("1:4:1",), ("4:1:1",), ("1:2:1",)]  # the second is not a valid range
    with pytest.raises(ValueError) as serial:
        map_points(parse_rates, items)
    with pytest.raises(ValueError) as on_ray:
        map_points(parse_rates, items, backend="ray")
    assert type(on_ray.value) is ValueError  # the point's own error, not Ray's wrapper
    assert str(on_ray.value) == str(serial.value)


def test_cli_on_ray_prints_the_serial_table_and_the_serial_error(capsys, monkeypatch):
    assert main(CLI_SWEEP) == 0
    serial = capsys.readouterr().out
    assert main([*CLI_SWEEP, "--backend", "ray"]) == 0
    assert capsys.readouterr().out == serial

    real = sim.runs.sweep.sweep_point

    def broken(workload, config, rate, target):  # a local function: Ray pickles it by value
        if rate == 8:
            raise ValueError(f"no point at {rate:g} req/s")
        return real(workload, config, rate, target)

    monkeypatch.setattr(sim.runs.sweep, "sweep_point", broken)
    assert main(CLI_SWEEP) == 2
    serial = capsys.readouterr().err
    assert main([*CLI_SWEEP, "--backend", "ray"]) == 2
    assert capsys.readouterr().err == serial == "error: no point at 8 req/s\n"


def test_a_worker_that_cannot_import_the_point_is_one_cluster_error(tmp_path, monkeypatch):
    (tmp_path / "only_here.py").write_text("def point(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # importable here, not on the workers
    import only_here

    with pytest.raises(ClusterError, match="No module named 'only_here'"):
        map_points(only_here.point, [(1,)], backend="ray")
    sys.modules.pop("only_here")


def test_no_cluster_or_a_wrong_address_is_one_line(capsys, monkeypatch):
    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # as in a fresh `python -m sim`

    def no_cluster(**kwargs):  # what ray.init says with no `ray start` on this machine
        raise ConnectionError("Could not find any running Ray instance. Please specify ...")

    monkeypatch.setattr(ray, "init", no_cluster)
    assert main([*CLI_SWEEP, "--backend", "ray"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no Ray cluster runs here: start one with `ray start --head`")
    assert err.count("\n") == 1
    # Nothing listens on port 1: asked first, not retried by Ray for minutes.
    assert main([*CLI_SWEEP, "--backend", "ray", "--address", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.startswith("error: nothing answers at Ray address")
