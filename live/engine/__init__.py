"""The simulator's policies on the torch model: the runner (`runner`), the measured clock
(`clock`), `run_live` (`run`), calibration, sim-vs-live comparison, recordings, workloads."""
