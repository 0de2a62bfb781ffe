"""PD Lab's simulator: serving policies, a roofline cost model, workloads and traces.

Pure Python + numpy/pandas/simpy. It never imports streamlit or torch, so the CLI, the tests and
the live engine can all use it.

The rooms, bottom to top (`lint-imports` checks that imports only go down; pyproject.toml):
- `core/`: one worker's engine (queues, KV blocks, preemption, step bookkeeping), requests, the
  recorder and the data contract (`trace.py`). What the lessons show, and nothing else.
- `policies/`: the schedulers, one file each, read beside the engine source they mirror.
- `cost/`: the GPU and model catalog, the roofline step cost, profiles and calibration.
- `workloads/`: arrivals, lengths and trace files into a list of requests.
- `fastforward/`: event speed, a second implementation of the step loop for plain decode runs
  (entered only through its package; tests/test_fastforward.py keeps it equal to stepping).
- `cluster/`: the simpy topologies (colocated, router, disaggregated) and the worker loop.
- `runs/`: what is done with runs: metrics and SLOs, goodput sweeps, budgets, export.
- `config.py`, `scenarios.py`, `stepper.py`, `cli.py`: a run's configuration, the lessons'
  scenarios, a clockless step-by-step run, and `python -m sim`.
"""
