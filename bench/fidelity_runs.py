"""Public measurements of real LLM servers, read into runs the simulator can replay.

Notable features
- Two public sources, read from a data folder outside the project (default
  `../shared/data/fidelity/` beside the checkout, or $PDLAB_FIDELITY_DATA); nothing of them is
  copied into the project. `data_dir()` says where to get them when they are missing.
  1. casys-kaist/LLMServingSim (MIT), `bench/examples/<GPU>/<model>/vllm/{meta.json,
     requests.jsonl}`: vLLM 0.19 serving 300 ShareGPT requests at 10 req/s, with each
     request's lengths and timestamps. Copy each example's `vllm/` folder to
     `<data>/llmservingsim/<GPU>/<model>/`; read by bench/fidelity_llmservingsim.py and replayed
     request by request.
  2. ai-dynamo/aiconfigurator (Apache-2.0), `aic-core/src/aiconfigurator_core/systems/
     silicon_sample.csv` (copy it to `<data>/aiconfigurator/`): mean TTFT and TPOT of vLLM and
     SGLang on H100/H200/B200 at a fixed input/output length and a fixed number of requests in
     flight (concurrency). Read by bench/fidelity_aiconfigurator.py; replayed as a closed loop
     (`bench/fidelity_closed_loop.py`: `concurrency` clients, each sending its next request when the
     last one finishes).
- Each run is a `PublicRun` (bench/public_run.py). This module gathers both sources' runs
  (`load_runs`), says which fit the GPUs' profiles, and holds the client-side latency fitted
  with them (`client_latency`).
- Each run carries `fit`: True for the runs `bench/fit_profiles.py` fits a GPU's profile on
  (`FIT_RULES`), False for the held-out runs the report validates on. A run is never both.
- Rows the simulator cannot represent are skipped with the reason counted (models outside the
  catalog such as DeepSeek-R1 or gpt-oss, GB200/B300 systems, TensorRT-LLM, disaggregated or
  attention-data-parallel deployments).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

from fidelity_aiconfigurator import load_aiconfigurator
from fidelity_llmservingsim import load_llmservingsim
from public_run import PublicRun

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "fidelity"
HOW_TO_GET = """\
The public runs are not part of PD Lab. Put them in {path} (or set PDLAB_FIDELITY_DATA):
  git clone https://github.com/casys-kaist/LLMServingSim   (MIT; tested at commit 5daddb2)
    for each bench/examples/<GPU>/<model>/ with a vllm/ folder (RTXPRO6000/Llama-3.1-8B,
    RTXPRO6000/Qwen3-32B, RTXPRO6000/Qwen3-30B-A3B-Instruct-2507, RTX4090/Llama-3.1-8B):
      mkdir -p {path}/llmservingsim/<GPU>/<model>
      cp bench/examples/<GPU>/<model>/vllm/{{meta.json,requests.jsonl}} \\
         {path}/llmservingsim/<GPU>/<model>/
  git clone https://github.com/ai-dynamo/aiconfigurator   (Apache-2.0; tested at commit 095f58a)
      mkdir -p {path}/aiconfigurator
      cp aic-core/src/aiconfigurator_core/systems/silicon_sample.csv {path}/aiconfigurator/
"""


def data_dir(path: str | Path | None = None) -> Path:
    """The folder holding the public runs; SystemExit with instructions when it is missing."""
    d = Path(path or os.environ.get("PDLAB_FIDELITY_DATA") or DEFAULT_DATA)
    if not ((d / "llmservingsim").is_dir() or (d / "aiconfigurator").is_dir()):
        raise SystemExit(f"no public runs found at {d}\n" + HOW_TO_GET.format(path=d))
    return d


# ---- which runs fit each GPU's profile --------------------------------------------------------
# Everything else is held out. One rule per GPU with public runs; the RTX 4090 has none (it
# borrows the RTX PRO 6000's profile, so all its runs test that borrowing).
FIT_RULES: dict[str, Callable[[PublicRun], bool]] = {
    "RTX-PRO-6000": lambda r: r.model == "Llama-3.1-8B",
    "H100-SXM": lambda r: r.model == "Qwen3-32B" and r.engine.startswith("vLLM"),
    "H200": lambda r: (
        r.model == "Llama-3.1-70B:fp8" and r.engine.startswith("vLLM") and r.osl <= 1024
    ),
    "B200": lambda r: r.model == "Llama-3.1-70B:fp8" and r.osl <= 1024,
}


# Client-side latency of the aiconfigurator benchmark's closed loop (HTTP, tokenization, the
# serving frontend): the simulator models the engine only, so this is added to the simulated
# TTFT (and E2E) of that GPU's closed-loop runs. Fitted with each GPU's profile, on its fit runs
# only (bench/fit_profiles.py). LLMServingSim's traces time TTFT from the engine's queue: 0.
# Refitted alone (the roofline profiles as they are, the latency on the same grid and loss)
# when the replay started weighing the benchmark's opening burst as 1 of 10 rounds instead of
# 1 of 20 (fidelity_closed_loop.MEASURED_ROUNDS): 85, 50 and 90 ms -> 40, 20 and 65 ms.
CLIENT_LATENCY_S: dict[str, float] = {"H100-SXM": 0.040, "H200": 0.020, "B200": 0.065}
# The same, fitted with each GPU's step_costs=kernels profile (sim/cost/profiles.py
# FITTED_KERNELS) on the same fit runs. Held at the roofline's figures instead, that fit's RMS
# log error on H200 goes from 0.126 to 0.151 (B200's barely moves): the latency is a fitted
# figure like the others, not a measurement of the client. Refitted at the kernel profiles
# fitted on the fit runs' TPOT, on the TTFT of their shortest prompts at the fewest clients
# (fit_profiles.py METRICS_TPOT, intercept_runs): H100 Qwen3-32B 1024 tokens in at 8 clients,
# H200 and B200 Llama-3.1-70B FP8 1024 in at 4. On all their TTFTs: 140, 35 and 90 ms. Refitted
# the same way once the vLLM replays started their clients at random phases
# (fidelity_closed_loop.CLOSED_LOOP_DEFAULT): H100 65 -> 60 ms, H200 and B200 unchanged. Refitted
# with the kernel profiles' shared per-request overhead (bench/fit_shared_overhead.py): H200
# 10 -> 15 ms, H100 and B200 unchanged; and with the burst as 1 of 10 rounds
# (fidelity_closed_loop.MEASURED_ROUNDS): 50, 5 and 55 ms; and with InferenceMAX's 70B fit runs
# drawing their lengths (fidelity_inferencex.RANGE_RATIO): H200 20 ms, B200 60 ms; and once
# the replays admitted as async scheduling does (VLLM_ASYNC_DEFAULT_FROM, the 2025 recipes'
# --async-scheduling): H200 10 ms, B200 50 ms (the loss of their fit runs 0.0034 -> 0.0028 and
# 0.0255 -> 0.0253); H100's fit runs, vLLM 0.12 without it, unchanged.
CLIENT_LATENCY_KERNELS_S: dict[str, float] = {"H100-SXM": 0.050, "H200": 0.010, "B200": 0.050}

# The latency is the measurement's, not the GPU's: the benchmark client, the serving frontend
# (vLLM's own API server or Dynamo's) and the builds of one campaign. The silicon rows come from
# three campaigns (fidelity_aiconfigurator.aic_campaign), and each GPU's latency was fitted on ONE
# campaign's runs: its fit runs' (FIT_CAMPAIGN). So a run takes the latency fitted on a GPU of its
# own campaign and generation where there is one (H100 and H200 are both Hopper: same client,
# frontend and build), else its own GPU's. At 4-8 clients of 1024 tokens, eight GPUs, the 2025-10
# Llama-3.1-70B FP8 rows measure 70 ms of TTFT on H100 and 73 ms on H200, priced 43 and 39 ms a
# prefill; the 2026-01 Qwen3-32B rows on H100 91 ms, priced 24 ms: two campaigns, ~50 ms apart, on
# one GPU.
FIT_CAMPAIGN = {
    "H100-SXM": "gap-analysis",
    "H200": "inferencemax-2025",
    "B200": "inferencemax-2025",
}
GENERATION = {"H100-SXM": "Hopper", "H200": "Hopper", "B200": "Blackwell"}


def client_latency(gpu: str, step_costs: str = "roofline", campaign: str = "") -> float:
    """Seconds added to a closed-loop run's simulated TTFT, for the cost model it replays with:
    the latency fitted on a GPU of the run's campaign and generation (FIT_CAMPAIGN); for a
    campaign no GPU was fitted on (inferencex), the mean of the fitted ones: nothing says
    which of the known campaigns its client and frontend resemble; else the run's GPU's."""
    table = CLIENT_LATENCY_KERNELS_S if step_costs == "kernels" else CLIENT_LATENCY_S
    for fitted, fit_campaign in FIT_CAMPAIGN.items():
        same = campaign == fit_campaign and GENERATION[fitted] == GENERATION.get(gpu)
        if same and fitted in table:
            return table[fitted]
    if campaign and campaign not in FIT_CAMPAIGN.values():
        return sum(table[g] for g in FIT_CAMPAIGN) / len(FIT_CAMPAIGN)
    return table.get(gpu, 0.0)


def _mark(runs: list[PublicRun]) -> list[PublicRun]:
    for r in runs:
        rule = FIT_RULES.get(r.gpu)
        r.fit = bool(rule and rule(r))
    return runs


def load_runs(path: str | Path | None = None) -> tuple[list[PublicRun], Counter]:
    """Every public run found, marked fit or held out, and the count of rows skipped (why)."""
    root = data_dir(path)
    skipped: Counter = Counter()
    runs = load_llmservingsim(root, skipped) + load_aiconfigurator(root, skipped)
    return _mark(runs), skipped


def select(
    runs: Iterable[PublicRun],
    gpu: str | None = None,
    fit: bool | None = None,
    max_osl: int | None = None,
) -> list[PublicRun]:
    """Filter runs by GPU, fit/held-out and output length (long outputs cost the most)."""
    return [
        r
        for r in runs
        if (gpu is None or r.gpu == gpu)
        and (fit is None or r.fit == fit)
        and (max_osl is None or r.osl <= max_osl)
    ]
