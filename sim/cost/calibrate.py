"""Calibration: fit a DeviceProfile (MFU, MFU_attn, MBU, overhead) to measured step times.

Notable features
- The cost model is t = overhead + comm + Σ_ops max(X/MFU, Y/MBU) + KV_read/MBU, where X and Y
  are an operator's seconds at 100% efficiency (`StepCostModel.terms`). In the unknowns
  (overhead, 1/MFU, 1/MFU_attn, 1/MBU) it is linear except for WHICH side of each max wins.
- So the fit alternates: fix which side wins for every operator, solve the now-linear least
  squares, re-decide the winners, repeat until nothing changes (at most 50 rounds).
- Rows are weighted by 1/measured time, so the fit minimises RELATIVE error: a 2 ms decode step
  counts as much as a 200 ms prefill.
- Bounds are part of the solve (no clipping afterwards): overhead >= 0 and every efficiency in
  (0, 1], via an exact non-negative least squares over the 16 subsets of 4 unknowns (no scipy).
- A few starting profiles are tried and the best fit kept, so one bad start cannot trap it.
- Efficiencies are relative to the GpuSpec's NOMINAL peaks. For a device whose true peaks
  exceed the spec (e.g. a CPU described by a rough `custom_gpu`) the fit pins them at 1.0;
  describe such a device with realistic (or generous) peaks so the efficiencies stay below 1.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from sim.cost.hardware import GpuSpec, ModelSpec
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import Chunk, DeviceProfile

# One measured step: (prefill_chunks, num_decodes, decode_context_tokens, measured_seconds).
Sample = tuple[Sequence[Chunk], int, int, float]

MAX_ROUNDS = 50  # alternation rounds per starting profile
_STARTS = (DeviceProfile(0.2, 0.2, 0.3, 0.001), DeviceProfile(0.9, 0.9, 0.9, 0.0))
_OFFSET = np.r_[0.0, 1.0, 1.0, 1.0, 0.0]  # theta = offset + u with u >= 0 (1/eff >= 1)


def _measured(samples: Sequence[Sample]) -> np.ndarray:
    """Validated measured seconds as an array (ValueError says which sample is wrong)."""
    if len(samples) == 0:
        raise ValueError("need at least one measured step (prefill_chunks, decodes, ctx, seconds)")
    times = []
    for i, sample in enumerate(samples):
        if len(sample) != 4:
            raise ValueError(f"sample {i}: expected (prefill_chunks, decodes, ctx, seconds)")
        t = sample[3]
        if not (isinstance(t, int | float) and math.isfinite(t) and t > 0):
            raise ValueError(f"sample {i}: measured seconds must be positive and finite, got {t!r}")
        times.append(float(t))
    return np.asarray(times)


class _Problem:
    """All samples' operators flattened into arrays (seconds at 100% efficiency)."""

    def __init__(self, samples: Sequence[Sample], cost: StepCostModel) -> None:
        self.t = _measured(samples)
        rows, comp, mem, attn = [], [], [], []  # one entry per max(...) operator
        kv_read, comm, seqs = [], [], []
        for i, (chunks, decodes, ctx, _) in enumerate(samples):
            try:
                terms = cost.terms(chunks, decodes, ctx)
            except ValueError as err:
                raise ValueError(f"sample {i}: {err}") from err
            for is_attn, ops in ((False, terms.linear), (True, terms.attention)):
                for c, m in ops:
                    rows.append(i)
                    comp.append(c)
                    mem.append(m)
                    attn.append(is_attn)
            kv_read.append(terms.kv_read_s)
            comm.append(terms.comm_s)
            seqs.append(terms.num_seqs)
        self.rows, self.comp, self.mem = np.array(rows, int), np.array(comp), np.array(mem)
        self.attn = np.array(attn, bool)
        self.kv_read, self.comm = np.array(kv_read), np.array(comm)
        self.seqs = np.array(seqs, float)

    def predict(self, theta: np.ndarray) -> np.ndarray:
        """Step seconds for theta = (overhead, 1/MFU, 1/MFU_attn, 1/MBU, overhead per seq)."""
        scale = np.where(self.attn, theta[2], theta[1])
        ops = np.maximum(self.comp * scale, self.mem * theta[3])
        fixed = theta[0] + theta[4] * self.seqs
        return fixed + self.comm + self.kv_read * theta[3] + self._per_sample(ops)

    def _per_sample(self, values: np.ndarray) -> np.ndarray:
        """Sum operator values into their samples."""
        return np.bincount(self.rows, weights=values, minlength=len(self.t))

    def design(self, theta: np.ndarray) -> np.ndarray:
        """Columns (1, X_mfu, X_attn, Y_mbu, seqs) for the current winners of every max."""
        scale = np.where(self.attn, theta[2], theta[1])
        compute_wins = self.comp * scale >= self.mem * theta[3]
        x_mfu = self._per_sample(np.where(compute_wins & ~self.attn, self.comp, 0.0))
        x_attn = self._per_sample(np.where(compute_wins & self.attn, self.comp, 0.0))
        y_mbu = self._per_sample(np.where(compute_wins, 0.0, self.mem)) + self.kv_read
        return np.column_stack([np.ones_like(self.t), x_mfu, x_attn, y_mbu, self.seqs])

    def loss(self, theta: np.ndarray) -> float:
        """Sum of squared relative errors."""
        return float(np.sum((self.predict(theta) / self.t - 1.0) ** 2))


def _nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min ||a·x − b|| subject to x >= 0, exactly, by trying every support (fine for 5 columns)."""
    best, best_res = np.zeros(a.shape[1]), float(np.sum(b**2))
    for k in range(1, a.shape[1] + 1):
        for support in itertools.combinations(range(a.shape[1]), k):
            cols = list(support)
            x, *_ = np.linalg.lstsq(a[:, cols], b, rcond=None)
            if np.any(x < 0):
                continue
            res = float(np.sum((a[:, cols] @ x - b) ** 2))
            if res < best_res:
                best, best_res = np.zeros(a.shape[1]), res
                best[cols] = x
    return best


def _refit(problem: _Problem, theta: np.ndarray) -> np.ndarray:
    """One linear solve with the winners fixed by theta; returns the new theta."""
    x = problem.design(theta)
    # Unknowns are overhead >= 0 and 1/eff = 1 + u with u >= 0, so efficiencies stay in (0, 1].
    rhs = problem.t - problem.comm - x[:, 1:4].sum(axis=1)
    free = np.any(x != 0, axis=0)  # a column that is all zero cannot be fitted: keep its value
    free[0] = True
    w = 1.0 / problem.t  # relative errors
    u = _nnls(x[:, free] * w[:, None], rhs * w)
    new = theta.copy()
    new[free] = u + _OFFSET[free]
    return new


def _theta(p: DeviceProfile) -> np.ndarray:
    return np.array([p.overhead_s, 1 / p.mfu, 1 / p.mfu_attn, 1 / p.mbu, p.overhead_per_seq_s])


def fit_profile(
    samples: Sequence[Sample],
    gpu: GpuSpec,
    model: ModelSpec,
    tensor_parallel: int = 1,
    initial: DeviceProfile | None = None,
) -> DeviceProfile:
    """The DeviceProfile whose roofline best matches measured step times (relative least squares).

    Efficiencies are relative to `gpu`'s nominal peaks and capped at 1.0; see the module notes.
    """
    initial = initial or DeviceProfile()
    problem = _Problem(samples, StepCostModel(gpu, model, tensor_parallel, initial))
    best, best_loss = _theta(initial), problem.loss(_theta(initial))
    for start in (initial, *_STARTS):
        theta = _theta(start)
        winners = None
        for _ in range(MAX_ROUNDS):
            theta = _refit(problem, theta)
            loss = problem.loss(theta)
            if loss < best_loss - 1e-12:  # strictly better: ties keep the earlier (caller's) start
                best, best_loss = theta, loss
            now = problem.design(theta)
            if winners is not None and np.array_equal(now, winners):
                break  # the winners of every max are stable: converged
            winners = now
    overhead, a, c, b, per_seq = (float(v) for v in best)
    return DeviceProfile(
        mfu=1 / a, mfu_attn=1 / c, mbu=1 / b, overhead_s=overhead, overhead_per_seq_s=per_seq
    )


def fit_report(
    samples: Sequence[Sample],
    profile: DeviceProfile,
    gpu: GpuSpec,
    model: ModelSpec,
    tensor_parallel: int = 1,
) -> dict[str, float]:
    """How well `profile` predicts the samples: median / mean / max absolute % error."""
    measured = _measured(samples)
    cost = StepCostModel(gpu, model, tensor_parallel, profile)
    predicted = np.array([cost.step_cost(ch, n, ctx).seconds for ch, n, ctx, _ in samples])
    pct = np.abs(predicted / measured - 1.0) * 100.0
    return {
        "samples": float(len(measured)),
        "median_abs_pct_error": float(np.median(pct)),
        "mean_abs_pct_error": float(np.mean(pct)),
        "max_abs_pct_error": float(np.max(pct)),
    }
