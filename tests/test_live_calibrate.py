"""live.engine.calibrate.fit: a robust fit of the device profile to measured steps (no torch
needed).

The measured steps are synthetic here (a known profile's step times with noise), so the test can
say what the fit must recover: the few long prefills are kept even though they are rare, and the
steps a busy machine stalled are dropped instead of bending the profile.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from live.engine.calibrate import REFERENCE_CPU, fit, sim_model
from sim.cost.hardware import get_model
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile

CPU_LIKE = DeviceProfile(
    mfu=0.28, mfu_attn=0.18, mbu=0.18, overhead_s=0.006, overhead_per_seq_s=0.007
)


def measured_steps(seed: int, stalls: int) -> list:
    """~130 steps like a CPU run (decodes 1..10, prompts 32..1024, chunks), 3% noise."""
    rng = np.random.default_rng(seed)
    cost = StepCostModel(REFERENCE_CPU, get_model("SmolLM2-135M"), 1, CPU_LIKE)
    shapes = [((), b, b * int(rng.integers(40, 1100))) for b in range(1, 11) for _ in range(9)]
    shapes += [(((p, 0, True),), 0, 0) for p in (32, 48, 64, 96, 128, 192, 256, 384)]
    shapes += [(((1024, 0, True),), 0, 0), (((768, 0, True), (96, 0, True)), 0, 0)]  # rare, long
    shapes += [(((160, s, False),), b, b * 200) for s in (0, 160, 320, 480, 640) for b in (2, 5)]
    steps = []
    for chunks, n, ctx in shapes:
        seconds = cost.step_cost(chunks, n, ctx).seconds * (1 + 0.03 * rng.standard_normal())
        steps.append((chunks, n, ctx, seconds))
    for i in rng.choice(len(steps) - 12, stalls, replace=False):  # another process took the core
        chunks, n, ctx, seconds = steps[i]
        steps[i] = (chunks, n, ctx, seconds * 2.5)
    return steps


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_drops_stalled_steps_and_keeps_the_rare_long_prefills(seed):
    steps = measured_steps(seed, stalls=6)
    profile, gpu, report = fit(steps, {"device": "cpu"}, "SmolLM2-135M")
    assert len(steps) - 13 <= report["kept"] < len(steps)  # stalls dropped, not 10% of all
    cost = StepCostModel(gpu, get_model("SmolLM2-135M"), 1, profile)
    long_prefill = cost.step_cost(((1024, 0, True),), 0, 0).seconds
    truth = StepCostModel(gpu, get_model("SmolLM2-135M"), 1, CPU_LIKE)
    assert long_prefill == pytest.approx(
        truth.step_cost(((1024, 0, True),), 0, 0).seconds, rel=0.05
    )
    for batch in (1, 5, 10):  # decode steps, what TPOT is made of
        want = truth.step_cost((), batch, batch * 500).seconds
        assert cost.step_cost((), batch, batch * 500).seconds == pytest.approx(want, rel=0.05)
    assert report["fit"]["median_abs_pct_error"] < 4


def test_fit_without_stalls_keeps_every_step():
    steps = measured_steps(3, stalls=0)
    _profile, _gpu, report = fit(steps, {"device": "cpu"}, "SmolLM2-135M")
    assert report["kept"] >= len(steps) - 2  # 3% noise is not an outlier


def test_every_live_model_is_predicted_with_its_catalog_twin():
    pytest.importorskip("torch")
    from live.model.weights import PRESETS

    for preset, shape in PRESETS.items():
        if preset == "tiny":
            with pytest.raises(ValueError, match="measured, not predicted"):
                sim_model(preset)
            continue
        m = get_model(sim_model(preset))  # same shape = same FLOPs and bytes per step
        assert (
            m.layers,
            m.hidden,
            m.heads,
            m.kv_heads,
            m.head_dim,
            m.intermediate,
            m.vocab,
            m.tied_embeddings,
        ) == (
            shape.layers,
            shape.hidden,
            shape.heads,
            shape.kv_heads,
            shape.head_dim,
            shape.intermediate,
            shape.vocab,
            shape.tied,
        )
    assert sim_model("SmolLM2-135M") == "SmolLM2-135M"


def test_a_checkpoint_folder_is_matched_by_its_config(tmp_path):
    (tmp_path / "config.json").write_text(
        json.dumps(
            {
                "model_type": "llama",
                "num_hidden_layers": 16,
                "hidden_size": 2048,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 8192,
                "vocab_size": 128256,
                "tie_word_embeddings": True,
            }
        )
    )
    assert sim_model(str(tmp_path)) == "Llama-3.2-1B"
