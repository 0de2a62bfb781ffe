"""Where aiconfigurator-core keeps its measured kernel tables, and how to read them (issue 30).

Notable features
- Source: NVIDIA's `aiconfigurator-core` 0.12.0 (Apache-2.0, an optional install:
  requirements-kernels.txt). Its tables time kernels on the GPUs themselves, per operator, engine
  and engine version: `aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/<table>`.
  Latencies are in MILLISECONDS, per call (per layer for the per-layer operators).
- `table_paths` lists one table's versions, newest first; `read` loads a parquet file once per
  process (~0.1 s each, lazily: nothing is read until a run asks for step_costs=kernels).
- Without the package every lookup answers None or nothing, and the callers keep the roofline.
- The readers: kernel_tables.py (GEMMs, and `kernel_times`, which gathers every reader),
  kernel_attention.py (prefill and decode attention), kernel_moe.py (routed experts),
  kernel_comm.py (tensor-parallel all-reduce).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

PACKAGE = "aiconfigurator_core"
ENGINE = "vllm"  # the engine whose kernels were measured (its torch/cuBLAS/Triton kernels)
ENGINE_NAME = "vLLM"  # as the breakdown names it
# Our catalog's GPU names -> aiconfigurator's system folders (those it has tables for).
TABLE_GPUS = {
    "A100-80GB": "a100_sxm",
    "H100-SXM": "h100_sxm",
    "H200": "h200_sxm",
    "B200": "b200_sxm",
    "L4": "l4",
    "L40S": "l40s",
    "RTX-PRO-6000": "rtx_pro_6000_server",
}
MS = 1e-3  # the tables' unit, in seconds
# Timing noise: a grid point may take at most this x the fastest LARGER shape (a smaller kernel
# can always run as a padded larger one); see `envelope`.
ENVELOPE_SLACK = 1.1


def available() -> bool:
    """Is aiconfigurator-core installed (requirements-kernels.txt)?"""
    return importlib.util.find_spec(PACKAGE) is not None


def _version_key(path: Path) -> tuple[int, ...]:
    return tuple(int(x) if x.isdigit() else 0 for x in path.name.split("."))


def table_paths(system: str, op: str, filename: str, engine: str = ENGINE) -> list[Path]:
    """Every measured version of one table for one GPU system, newest version first (empty
    without the package or the table)."""
    if not available():
        return []
    root = Path(importlib.util.find_spec(PACKAGE).origin).parent / "systems" / "data"
    folder = root / system / op / engine
    found = [p / filename for p in folder.glob("*") if (p / filename).is_file()]
    return sorted(found, key=lambda p: _version_key(p.parent), reverse=True)


@functools.cache
def read(path: Path, columns: tuple[str, ...] | None = None):
    """One table as a pandas DataFrame (cached per process: treat it as read-only)."""
    import pandas as pd

    return pd.read_parquet(path, columns=list(columns) if columns else None)


def envelope(grid: np.ndarray, slack: float = ENVELOPE_SLACK) -> np.ndarray:
    """`grid` with each value capped at `slack` x the smallest value at a larger index, along
    every axis in turn (times that must not fall as the shape grows: timing spikes removed)."""
    out = grid.copy()
    for axis in range(grid.ndim):
        flipped = np.flip(out, axis)
        larger = np.flip(np.minimum.accumulate(flipped, axis=axis), axis)
        out = np.minimum(out, slack * larger)
    return out
