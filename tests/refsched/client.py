"""Run the REAL vLLM schedulers from our pytest (which has no vLLM) through a subprocess.

vLLM's declared dependencies clash with the app's, so each reference engine lives in a
virtualenv of its own at the repository root, built by ``scripts/refsched_env.sh``:

- ``"v1"``: ``.venv-vllm-v1``, vllm 0.33.0, driven by ``tests/refsched/drive_vllm_v1.py``
- ``"v0"``: ``.venv-vllm-v0``, vllm 0.10.2 (last release with the V0 scheduler), driven by
  ``tests/refsched/drive_vllm_v0.py``

Protocol (both drivers): one JSON document on stdin, one on stdout, logs on stderr.

Input::

    {"cases": [{"name": str,
                "config": {"max_num_batched_tokens": 2048, "max_num_seqs": 256,
                           "max_model_len": 65536, "enable_chunked_prefill": true,
                           "long_prefill_token_threshold": 0,
                           "enable_prefix_caching": false, "num_gpu_blocks": 4096,
                           "block_size": 16, "scheduling_policy": "fcfs",
                           "scheduler_reserve_full_isl": true,  # V1 only
                           "max_num_partial_prefills": 1,    # V0 only
                           "max_long_partial_prefills": 1,   # V0 only
                           "num_cpu_blocks": 0,              # V0 only
                           "speculative": {"method": "ngram",   # V1 only, optional
                                           "num_speculative_tokens": 3}},
                "requests": [{"id": "0", "arrival_step": 0, "arrival_time": 0.0,
                              "priority": 0, "prompt_token_ids": [1, 2, 3],
                              "max_tokens": 4,
                              "spec": [[0, 3], [2, 3]]}],  # V1 only, optional
                "max_steps": 20000}]}

- ``num_gpu_blocks`` goes to vLLM as is. V1's pool keeps block 0 as its null block, so N
  blocks give N - 1 usable ones: compensate in the caller if needed.
- Before step k's ``schedule()`` the driver adds, in list order, every request whose
  ``arrival_step == k``. It stops when every request finished or after ``max_steps``
  steps; steps that schedule nothing are still reported.
- Every generated token is token id 7 with ``ignore_eos=True``: a request yields exactly
  ``max_tokens`` tokens.
- With chunked prefill off, both engines require ``max_num_batched_tokens >=
  max_model_len``: lower ``max_model_len`` in such a case.

Speculative decoding (V1 only; without ``speculative`` nothing below applies and the
``spec`` lists are ignored):

- ``speculative`` builds the ``SpeculativeConfig`` that ``vllm serve --speculative-config
  '{"method": ..., "num_speculative_tokens": k}'`` gives: ``"ngram"`` (method ngram;
  optional ``prompt_lookup_min``/``prompt_lookup_max``, scheduler-neutral, default 5/5),
  ``"draft"`` (method draft_model) and ``"eagle"`` (method eagle), the last two with the
  local tiny Llama as draft (EAGLE wraps its config: ``EagleLlamaForCausalLM``). Only the
  method and k reach the scheduler (``Scheduler.num_spec_tokens``,
  ``num_lookahead_tokens``, ``num_prefill_lookahead``, ``num_hash_lookahead_tokens``,
  ``use_eagle``, ``use_eagle_block_drop``, ``spec.max_num_new_slots_for_drafting``).
  With EAGLE and prefix caching, block hashes cover one token past each block (the
  driver builds the request hasher with ``num_hash_lookahead_tokens`` as EngineCore
  does). The loop is the synchronous one (``async_scheduling=False``).
- A request's ``spec`` is ``[[accepted_j, drafts_j], ...]`` indexed by its SAMPLING
  EVENTS j: the steps after whose ``schedule()`` its ``num_computed_tokens >=
  num_tokens`` (a partial prefill chunk is no event). At event j the fake runner returns
  ``1 + a`` tokens (id 7) for it, ``a = min(accepted_j, real drafts scheduled)``, the
  real drafts being ``scheduled_spec_decode_tokens[id]`` without its ``-1`` padding
  (padding is never accepted); ``update_from_output`` then rolls ``num_computed_tokens``
  back by the rejected drafts. Then, as ``EngineCore.post_step`` does after a step that
  scheduled tokens, ``update_draft_token_ids`` receives ``min(drafts_j, k)`` drafts (id 8)
  for it, and ``[]`` for the batch's requests that did not sample. Past the end of the
  list (or without one) an event is ``[0, 0]``: nothing accepted, no drafts proposed.

Output::

    {"engine": "vllm 0.33.0 V1",
     "results": [{"name": str, "error": null | "ExcType: message",
                  "steps": [{"scheduled": {"0": 2048}, "cached": {"0": 0},
                             "preempted": [], "finished": []}],
                  "outputs": {"0": 4}}]}

- ``scheduled``: request id -> tokens this step, in the engine's order (V1:
  ``SchedulerOutput.num_scheduled_tokens``, prefix-cache hits excluded; V0: each scheduled
  group's ``token_chunk_size``, which for a newly admitted prompt includes its cached
  tokens).
- ``cached``: for requests admitted (or resumed after a preemption) this step, the tokens
  the prefix cache supplied.
- ``preempted``: ids preempted while this step was scheduled; ``finished``: ids whose last
  token came at the end of this step; ``outputs``: tokens produced per request (exactly
  ``max_tokens``: a stop trims accepted drafts past it).
- With ``speculative`` only, two more keys per step: ``spec``: request id ->
  ``[num_scheduled_spec_tokens, num_padding, num_accepted]`` for the requests with
  ``scheduled_spec_decode_tokens`` this step (their length with the ``-1`` padding, the
  padding, the accepted drafts; the step's ``scheduled`` count includes all of them);
  ``computed``: request id -> its ``num_computed_tokens`` after ``update_from_output``
  (after the rollback of rejected drafts) for every request scheduled this step that the
  scheduler still holds (finished ones are gone).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

from sim.core.request import HASH_BLOCK, RequestSpec

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent

ENGINES = {
    "v1": (".venv-vllm-v1", "drive_vllm_v1.py"),
    "v0": (".venv-vllm-v0", "drive_vllm_v0.py"),
    "sglang": (".venv-sglang", "drive_sglang.py"),
}
INSTALL_CMD = "bash scripts/refsched_env.sh"


def _engine(engine: str) -> tuple[str, str]:
    try:
        return ENGINES[engine]
    except KeyError:
        raise ValueError(
            f"unknown reference engine {engine!r}: use one of {list(ENGINES)}"
        ) from None


def venv_python(engine: str) -> Path | None:
    """The python of the engine's venv, or None when the venv is not installed."""
    venv, _ = _engine(engine)
    python = ROOT / venv / "bin" / "python"
    return python if python.exists() else None


def run_reference(engine: str, cases: list[dict], timeout_s: float = 600.0) -> list[dict]:
    """Run every case in ONE driver process (vLLM's import costs seconds) and return the
    driver's ``results`` list, one dict per case, in order."""
    _, driver = _engine(engine)
    python = venv_python(engine)
    if python is None:
        raise RuntimeError(f"reference engine {engine!r} is not installed: run {INSTALL_CMD}")
    env = dict(os.environ)
    env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["HF_HUB_OFFLINE"] = "1"  # nothing is ever downloaded
    env["VLLM_NO_USAGE_STATS"] = "1"
    env.pop("PYTHONPATH", None)  # the app's modules must not shadow the venv's packages
    try:
        proc = subprocess.run(
            [str(python), str(HERE / driver)],
            input=json.dumps({"cases": cases}),
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
            cwd=str(ROOT),
        )
    except subprocess.TimeoutExpired as exc:
        tail = _tail(exc.stderr)
        raise RuntimeError(
            f"reference driver {driver} timed out after {timeout_s}s; stderr tail:\n{tail}"
        ) from exc
    if proc.returncode != 0:
        raise RuntimeError(
            f"reference driver {driver} exited with {proc.returncode}; stderr tail:\n"
            f"{_tail(proc.stderr)}"
        )
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(
            f"reference driver {driver} wrote no JSON ({exc}); stdout head:\n"
            f"{proc.stdout[:2000]}\nstderr tail:\n{_tail(proc.stderr)}"
        ) from exc
    results = doc.get("results")
    if not isinstance(results, list) or len(results) != len(cases):
        raise RuntimeError(
            f"reference driver {driver} answered {len(results or [])} results for "
            f"{len(cases)} cases; stderr tail:\n{_tail(proc.stderr)}"
        )
    return results


def require_reference(engine: str) -> Path:
    """Skip the calling test when the engine's venv is missing, with the command that
    installs it; under CI (``CI`` set non-empty) fail instead: CI must never skip the
    differential suite silently."""
    import pytest

    python = venv_python(engine)
    if python is None:
        venv, _ = _engine(engine)
        msg = f"{venv} is missing: run `{INSTALL_CMD}` to install the real scheduler {engine}"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return python


def _tail(text: str | bytes | None, n: int = 4000) -> str:
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-n:]


def token_ids(spec: RequestSpec) -> list[int]:
    """Token ids matching the spec's description of what it shares with other prompts."""
    ids: list[int] = []
    if spec.hash_ids:  # Mooncake: block j's tokens are a function of its (chained) hash id
        for h in spec.hash_ids:
            rng = random.Random(f"hash:{h}")
            ids += [rng.randrange(1000, 31000) for _ in range(HASH_BLOCK)]
        ids = ids[: spec.prompt_tokens]
    elif spec.prefix_tokens:
        rng = random.Random(f"group:{spec.prefix_group}")
        ids = [rng.randrange(1000, 31000) for _ in range(spec.prefix_tokens)]
    rng = random.Random(f"request:{spec.request_id}")
    ids += [rng.randrange(1000, 31000) for _ in range(spec.prompt_tokens - len(ids))]
    return ids
