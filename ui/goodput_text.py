"""Goodput as a page shows it: "≥ 24" when every rate tried met the target.

sim.runs.slo.goodput returns the highest rate tried when every rate passed; that is a lower
bound, not the goodput, so a page must not print it as if it were the limit.
"""

from __future__ import annotations


def goodput_cell(g: dict, per_gpu: bool = False) -> str:
    """One goodput (from sim.runs.sweep.goodput_of) as text: "3", "2.67", or "≥ 24"."""
    value = g["goodput_per_gpu_per_s"] if per_gpu else g["goodput_per_s"]
    text = f"{value:.3g}"
    return f"≥ {text}" if g.get("all_rates_met") else text


def goodput_frame(sweeps: dict):
    """Goodput, GPUs and goodput per GPU of each swept configuration (one column each), as
    text, with "≥" where every rate tried met the target."""
    import pandas as pd

    from sim.runs.sweep import goodput_of

    columns = {}
    for label, table in sweeps.items():
        g = goodput_of(table)
        columns[label] = {
            "goodput_per_s": goodput_cell(g),
            "num_gpus": str(g["num_gpus"]),
            "goodput_per_gpu_per_s": goodput_cell(g, per_gpu=True),
        }
    return pd.DataFrame(columns)
