"""PD Lab's simulator: serving policies, a roofline cost model, workloads and traces.

Pure Python + numpy/pandas/simpy. It never imports streamlit or torch, so the CLI, the tests and
the live engine can all use it.
"""
