"""The measured GEMM table of a GPU, from aiconfigurator-core (issue 30): one GEMM's time by
its shape (m, n, k), interpolated on the table's grid.

Split from sim/cost/kernel_tables.py (which prices a step's linear layers with it) so that the
routed experts' pricing (kernel_moe_deepgemm.py) can read GEMM rows too. The table's layout, the
interpolation and the timing-noise envelope are described in kernel_tables.py's docstring.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from sim.cost.kernel_data import (
    MS,
    TABLE_GPUS,
    VLLM,
    Tables,
    envelope,
    read,
    table_name,
    table_paths,
)


@dataclass(frozen=True)
class GemmTable:
    """Measured GEMM latency on a regular (m, n, k) grid, in seconds."""

    gpu: str
    version: str  # the engine and version the kernels were measured under ("vLLM 0.24.0")
    m: np.ndarray  # (M,) ascending
    n: np.ndarray  # (N,) ascending
    k: np.ndarray  # (K,) ascending
    seconds_grid: np.ndarray  # (M, N, K)

    def seconds(self, m: int, n: int, k: int) -> float:
        """Interpolated time of one (m x k) @ (k x n) GEMM, in seconds."""
        if min(m, n, k) < 1:
            raise ValueError(f"GEMM dimensions must be >= 1, got m={m}, n={n}, k={k}")
        scale = 1.0
        if m > self.m[-1]:  # beyond the grid: a GPU-filling GEMM's time grows with m
            scale, m = m / self.m[-1], int(self.m[-1])
        grid = self.seconds_grid
        for points, x in ((self.m, m), (self.n, n), (self.k, k)):  # m, then n, then k
            grid = _interp_first_axis(grid, points, x)
        return float(grid) * scale


def _interp_first_axis(grid: np.ndarray, points: np.ndarray, x: float) -> np.ndarray:
    """Linear interpolation of `grid` along its first axis at x (extrapolated past the last two
    points, clamped at the first); that axis is removed."""
    hi = int(np.clip(np.searchsorted(points, x), 1, len(points) - 1))
    lo = hi - 1
    w = (max(x, points[0]) - points[lo]) / (points[hi] - points[lo])
    return grid[lo] + w * (grid[hi] - grid[lo])


@functools.cache
def gemm_table(
    gpu_name: str, dtype: str = "bfloat16", tables: Tables = VLLM, kernel: str = ""
) -> GemmTable | None:
    """The measured GEMM table of this GPU holding `dtype` (and, given `kernel`, only the rows of
    a kernel_source containing it): `tables`' engine's newest (or nearest its release), vLLM's
    where the engine has none; None without the package or a table."""
    import pandas as pd

    system = TABLE_GPUS.get(gpu_name)
    paths = table_paths(system, "gemm", "gemm_perf.parquet", tables) if system else []
    for path in paths:
        df = read(path, ("m", "n", "k", "gemm_dtype", "kernel_source", "latency"))
        df = df[df["gemm_dtype"] == dtype]
        if kernel:
            df = df[df["kernel_source"].str.contains(kernel, regex=False)]
        if not df.empty:
            break
    else:
        return None
    # One latency per (m, n, k): the median where a shape was measured more than once.
    cube = df.groupby(["m", "n", "k"])["latency"].median()
    axes = [np.sort(df[c].unique()) for c in ("m", "n", "k")]
    full = cube.reindex(pd.MultiIndex.from_product(axes))
    while full.isna().any():  # a hole (H200: n = k = 65536 was not measured): drop the grid
        holes = full[full.isna()].index.to_frame(index=False)  # value with most holes, again
        worst = max(
            ((a, v, c) for a in range(3) for v, c in holes[a].value_counts().items()),
            key=lambda t: t[2],
        )
        axes[worst[0]] = axes[worst[0]][axes[worst[0]] != worst[1]]
        if min(len(a) for a in axes) < 2:
            return None
        full = cube.reindex(pd.MultiIndex.from_product(axes))
    m, n, k = axes
    grid = full.to_numpy(dtype=float).reshape(len(m), len(n), len(k)) * MS
    return GemmTable(gpu_name, table_name(path), m, n, k, envelope(grid))
