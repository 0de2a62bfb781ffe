"""Where aiconfigurator-core keeps its measured kernel tables, and how to read them (issue 30).

Notable features
- Source: NVIDIA's `aiconfigurator-core` 0.12.0 (Apache-2.0, an optional install:
  requirements-kernels.txt). Its tables time kernels on the GPUs themselves, per operator, engine
  and engine version: `aiconfigurator_core/systems/data/<gpu>/<op>/<engine>/<version>/<table>`.
  Latencies are in MILLISECONDS, per call (per layer for the per-layer operators).
- Whose kernels: a policy names the engine that prices its steps (`Policy.kernel_engine`): SGLang's
  scheduler steps are priced with SGLang's own kernels (sgl-kernel and DeepGEMM GEMMs, its
  FlashAttention-3 build, its fused MoE), everything else with vLLM's. An operator the engine's
  tables do not hold falls back to vLLM's, and its source line says so (`table_name`).
- `table_paths` lists one table's versions, newest first (the engine's, then vLLM's); `read`
  loads a parquet file once per process (~0.1 s each, lazily: nothing is read until a run asks
  for step_costs=kernels).
- Without the package every lookup answers None or nothing, and the callers keep the roofline.
- The readers: kernel_tables.py (GEMMs, and `kernel_times`, which gathers every reader),
  kernel_attention.py (prefill and decode attention), kernel_moe.py (routed experts),
  kernel_comm.py (tensor-parallel all-reduce).
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PACKAGE = "aiconfigurator_core"
# The engines whose kernels price a step (aiconfigurator-core's folder -> the name a breakdown
# shows): vLLM's torch/cuBLAS/Cutlass/Triton kernels, SGLang's sgl-kernel/DeepGEMM/FA3/Triton ones.
ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}
ENGINE = "vllm"  # the default, and every engine's fallback
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


def release(name: str) -> tuple[int, ...]:
    """'0.5.6.post2' -> (0, 5, 6, 0): a release's numbers, for ordering."""
    return tuple(int(x) if x.isdigit() else 0 for x in name.split("."))


def _nearness(version: str, wanted: str) -> tuple[int, ...]:
    """How far a table's version is from the wanted one, part by part (0.12 -> 0.19 is nearer
    than 0.24; 0.5.6.post2 -> 0.5.10 nearer than 0.5.14)."""
    a, b = release(version), release(wanted)
    size = max(len(a), len(b))
    a, b = a + (0,) * (size - len(a)), b + (0,) * (size - len(b))
    return tuple(abs(x - y) for x, y in zip(a, b, strict=True))


@dataclass(frozen=True)
class Tables:
    """Whose measured kernels price a step: an engine (a key of ENGINES) and, optionally, the
    release whose tables to prefer, the nearest one measured ("" = the newest)."""

    engine: str = ENGINE
    version: str = ""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            known = ", ".join(ENGINES)
            raise ValueError(f"kernel tables: engine must be one of {known}, got {self.engine!r}")


VLLM = Tables()


def table_paths(system: str, op: str, filename: str, tables: Tables = VLLM) -> list[Path]:
    """Every measured version of one table for one GPU system: the engine's, then (for another
    engine) vLLM's as the fallback; each engine's newest first, or with `tables.version` the
    one nearest it first (the kernels as that release ran them). Empty without the package or
    the table."""
    engine, version = tables.engine, tables.version
    if not available():
        return []
    root = Path(importlib.util.find_spec(PACKAGE).origin).parent / "systems" / "data"
    out = []
    for name in dict.fromkeys((engine, ENGINE)):
        folder = root / system / op / name
        found = [p / filename for p in folder.glob("*") if (p / filename).is_file()]
        found.sort(key=lambda p: release(p.parent.name), reverse=True)  # newest first, ...
        if version and name == engine:  # ... then (stable) nearest the wanted release first
            found.sort(key=lambda p: _nearness(p.parent.name, version))
        out += found
    return out


def table_name(path: Path) -> str:
    """The engine and version a table was measured under, as a breakdown names it: 'SGLang
    0.5.14' for .../<op>/sglang/0.5.14/<table>."""
    return f"{ENGINES[path.parent.parent.name]} {path.parent.name}"


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
