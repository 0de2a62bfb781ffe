"""bench/diagnose_fidelity.py's reading of token gaps: which statistic a measured TPOT follows.

README's bullet on H200 Llama-3.1-8B FP8 on vLLM rests on these two helpers: the median of the
replay's token gaps (a decode-only step) and where a measured TPOT sits between that median and
the replay's mean TPOT.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

from diagnose_fidelity import groups_on, median_gap_ms, statistic_position  # noqa: E402


def test_the_median_gap_pools_every_gap_of_the_chosen_requests():
    # Request 1: gaps 10, 10, 100 ms (a prompt chunk in its third step); request 2: 10, 10 ms;
    # request 3 is not chosen, and request 4 has one token (no gap).
    res = SimpleNamespace(
        token_times={
            1: np.array([0.0, 0.01, 0.02, 0.12]),
            2: np.array([1.0, 1.01, 1.02]),
            3: np.array([0.0, 5.0]),
            4: np.array([2.0]),
        }
    )
    assert math.isclose(median_gap_ms(res, [1, 2, 4]), 10.0, rel_tol=1e-9)
    assert math.isnan(median_gap_ms(res, [4]))


def test_the_position_is_zero_at_the_median_one_at_the_mean_and_log_scaled_between():
    assert math.isclose(statistic_position(8.0, 32.0, 8.0), 0.0, abs_tol=1e-12)
    assert math.isclose(statistic_position(32.0, 32.0, 8.0), 1.0, rel_tol=1e-12)
    assert math.isclose(statistic_position(16.0, 32.0, 8.0), 0.5, rel_tol=1e-12)  # geometric
    assert statistic_position(40.0, 32.0, 8.0) > 1.0  # above the mean stays readable
    # Closer than twofold, mean and median cannot be told apart: no position.
    assert math.isnan(statistic_position(10.0, 15.0, 8.0))
    assert math.isnan(statistic_position(10.0, 32.0, 0.0))


def test_a_selection_that_matches_nothing_is_told_the_names_there_are():
    def run(gpu, model, engine, trace=False):
        return SimpleNamespace(gpu=gpu, model=model, engine=engine, specs=[1] if trace else [])

    runs = [
        run("H200", "Llama-3.1-8B:fp8", "SGLang 0.5.6.post2"),
        run("H200", "Llama-3.1-8B:fp8", "SGLang 0.5.6.post2"),
        run("H200", "Llama-3.1-70B:fp8", "vLLM ?"),
        run("RTX-4090", "Llama-3.1-8B", "vLLM 0.19.0", trace=True),  # a trace: not diagnosed
    ]
    assert groups_on(runs, "H200") == (
        "on H200: --model Llama-3.1-70B:fp8 --engine 'vLLM ?'; "
        "--model Llama-3.1-8B:fp8 --engine 'SGLang 0.5.6.post2'"
    )
    assert groups_on(runs, "RTX-4090") == "--gpu takes H200"
