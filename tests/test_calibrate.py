"""Calibration: recover a known DeviceProfile from noisy synthetic step times."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cost.calibrate import fit_profile, fit_report
from sim.cost.hardware import custom_gpu, get_gpu, get_model
from sim.cost.roofline import StepCostModel
from sim.cost.step_terms import DeviceProfile

TRUE = DeviceProfile(mfu=0.6, mfu_attn=0.45, mbu=0.8, overhead_s=0.002)


def make_steps(rng: np.random.Generator) -> list:
    """Decode batches 1..64, prefills 16..4096 (some at an offset), and mixed steps."""
    steps = []
    for batch in (1, 2, 4, 8, 16, 24, 32, 48, 64):
        for context in (128, 512, 1024, 2048, 4096):
            steps.append(((), batch, batch * int(context * rng.uniform(0.5, 1.5))))
    for tokens in (16, 32, 64, 128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096):
        steps.append((((tokens, 0, True),), 0, 0))
        for _ in range(2):
            # Later chunks of long prompts: attention over a long prefix is what pins MFU_attn.
            steps.append((((tokens, int(rng.integers(0, 32768)), False),), 0, 0))
    for tokens in (64, 256, 1024, 2048):
        for batch in (4, 16, 64):
            chunk = (tokens, int(rng.integers(0, 4096)), bool(rng.integers(0, 2)))
            steps.append(((chunk,), batch, batch * 1500))
    return steps


def noisy_samples(cost: StepCostModel, seed: int, noise: float = 0.03) -> list:
    """Synthetic measurements: the model's step time × (1 ± noise), seeded."""
    rng = np.random.default_rng(seed)
    samples = []
    for chunks, n, ctx in make_steps(rng):
        seconds = cost.step_cost(chunks, n, ctx).seconds
        samples.append((chunks, n, ctx, seconds * (1 + noise * rng.standard_normal())))
    return samples


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(
    ("gpu_name", "model_name"), [("H100-SXM", "Llama-3.1-8B"), ("L4", "Qwen2.5-0.5B")]
)
def test_recovers_known_profile(seed: int, gpu_name: str, model_name: str) -> None:
    gpu, model = get_gpu(gpu_name), get_model(model_name)
    samples = noisy_samples(StepCostModel(gpu, model, profile=TRUE), seed)
    fit = fit_profile(samples, gpu, model)
    for key in ("mfu", "mfu_attn", "mbu", "overhead_s"):
        assert getattr(fit, key) == pytest.approx(getattr(TRUE, key), rel=0.10), key
    report = fit_report(samples, fit, gpu, model)
    assert report["median_abs_pct_error"] < 5.0
    assert report["samples"] == len(samples)


def test_exact_data_is_fitted_exactly() -> None:
    gpu, model = get_gpu("A100-80GB"), get_model("Mistral-7B")
    samples = noisy_samples(StepCostModel(gpu, model, profile=TRUE), seed=3, noise=0.0)
    fit = fit_profile(samples, gpu, model, initial=DeviceProfile(0.3, 0.9, 0.4, 0.01))
    for key in ("mfu", "mfu_attn", "mbu", "overhead_s"):
        assert getattr(fit, key) == pytest.approx(getattr(TRUE, key), rel=1e-6), key
    assert fit_report(samples, fit, gpu, model)["max_abs_pct_error"] < 1e-6


def test_tensor_parallel_fit() -> None:
    gpu, model = get_gpu("H100-SXM"), get_model("Llama-3.3-70B")
    samples = noisy_samples(StepCostModel(gpu, model, 4, TRUE), seed=4)
    fit = fit_profile(samples, gpu, model, tensor_parallel=4)
    assert fit.mbu == pytest.approx(TRUE.mbu, rel=0.10)
    assert fit.mfu == pytest.approx(TRUE.mfu, rel=0.10)


def test_efficiencies_are_capped_at_one_for_an_understated_device() -> None:
    # Peaks set 4× too low: the "true" efficiencies would be 2.4 / 3.2; the fit pins them at 1.
    real = get_gpu("H100-SXM")
    slow = custom_gpu(real.bf16_tflops / 4, real.mem_bw_gb_s / 4, real.mem_gb)
    model = get_model("Llama-3.1-8B")
    samples = noisy_samples(StepCostModel(real, model, profile=TRUE), seed=5, noise=0.0)
    fit = fit_profile(samples, slow, model)
    assert 0 < fit.mfu <= 1 and 0 < fit.mbu <= 1 and 0 < fit.mfu_attn <= 1
    assert fit.mbu == 1.0


def test_decode_only_data_keeps_unidentified_efficiencies() -> None:
    # Decode steps never make the linear layers compute-bound: MFU can't be seen, so it stays put.
    gpu, model = get_gpu("H100-SXM"), get_model("Llama-3.1-8B")
    cost = StepCostModel(gpu, model, profile=TRUE)
    samples = [((), b, b * 1000, cost.decode_step_s(b, 1000)) for b in (1, 4, 16, 64)]
    samples += [((), b, b * 3000, cost.decode_step_s(b, 3000)) for b in (2, 8, 32)]
    initial = DeviceProfile(mfu=0.33, mfu_attn=0.22, mbu=0.5, overhead_s=0.0)
    fit = fit_profile(samples, gpu, model, initial=initial)
    assert fit.mbu == pytest.approx(TRUE.mbu, rel=1e-6)
    assert fit.overhead_s == pytest.approx(TRUE.overhead_s, rel=1e-6)
    assert fit.mfu_attn == pytest.approx(initial.mfu_attn)


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ([], "at least one"),
        ([((), 4, 400, -0.01)], "positive"),
        ([((), 4, 400, float("nan"))], "positive"),
        ([((), 4, 400, 0.0)], "positive"),
        ([((), 0, 0, 0.01)], "empty step"),
        ([((), 4, 400)], "expected"),
    ],
)
def test_bad_input_raises(samples: list, message: str) -> None:
    gpu, model = get_gpu("L4"), get_model("Qwen2.5-0.5B")
    with pytest.raises(ValueError, match=message):
        fit_profile(samples, gpu, model)
    if samples and len(samples[0]) == 4 and samples[0][3] <= 0:
        with pytest.raises(ValueError, match=message):
            fit_report(samples, DeviceProfile(), gpu, model)
