"""Run a workload live: the simulator's cluster and policies, each step executed on a real model.

Notable features
- `run_live(requests, config, options)` returns the same RunResult (requests / segments / steps)
  as `sim.cluster.topologies.simulate`, with measured step times (meta["clock"] == "measured").
- The model is loaded once per (model, device) and shared by the workers of a run; each worker
  gets its own KV store, so a disaggregated run really copies KV from the P to the D store.
- Prompts are real text cut to the workload's prompt lengths (or typed prompts), so with SmolLM2's
  real weights each request's continuation can be read (`texts` in the result info).
- Limits keep a shared CPU deployment responsive: at most MAX_REQUESTS requests and
  MAX_TOTAL_TOKENS tokens of prompt + output per run (MAX_TOTAL_TOKENS_CUDA on a GPU, where
  the GPU-sized workloads hold a 16k-token prompt).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from sim.cluster.topologies import simulate
from sim.config import SimConfig, with_overrides
from sim.core.request import RequestSpec
from sim.core.trace import RunResult

MAX_REQUESTS = 16
MAX_TOTAL_TOKENS = 12_000  # prompt + output tokens over the whole run
MAX_TOTAL_TOKENS_CUDA = 64_000  # the same on a GPU (live/engine/workloads.py GPU_WORKLOADS: <= 32k)
MODELS = ("SmolLM2-135M", "tiny", "smollm2-135m-shape", "1b-like", "8b-like")  # or a folder

# Text the prompts are cut from (repeated as needed), so real weights continue something sensible.
PROMPT_TEXT = (
    "An LLM server answers many people at once. For each request it first reads the whole prompt, "
    "which is called prefill, and then writes the answer one token at a time, which is called "
    "decode. Prefill keeps the arithmetic units busy, while decode mostly waits for memory. A "
    "scheduler decides, step by step, which requests run together and how many tokens each gets. "
)


@dataclass(frozen=True)
class LiveOptions:
    """Which real model, on which device."""

    model: str = "SmolLM2-135M"  # SmolLM2-135M (real weights), a random preset, or a folder
    device: str = "auto"  # auto | cpu | cuda
    threads: int = 1  # CPU threads per step (torch intra-op)
    seed: int = 0

    def __post_init__(self) -> None:
        if self.device not in ("auto", "cpu", "cuda"):
            raise ValueError(f"device must be auto, cpu or cuda, got {self.device!r}")
        if self.threads < 1:
            raise ValueError("threads must be >= 1")


@functools.cache
def load(model: str, device: str):
    """(LlamaModel, tokenizer or None, torch device, dtype), loaded once per process."""
    from pathlib import Path

    from live.engine.runner import default_device, default_dtype
    from live.model.weights import PRESETS, load_hf_checkpoint, load_smollm2, random_model

    dev = default_device() if device == "auto" else __import__("torch").device(device)
    dtype = default_dtype(dev)
    if model.lower() == "smollm2-135m":
        net, tokenizer = load_smollm2(device=dev, dtype=dtype)
        return net, tokenizer, dev, dtype
    if model in PRESETS:
        return random_model(model, device=dev, dtype=dtype), None, dev, dtype
    if Path(model).is_dir():
        return load_hf_checkpoint(model, device=dev, dtype=dtype), None, dev, dtype
    raise ValueError(
        f"unknown model {model!r}; use one of {', '.join(MODELS)} or a checkpoint "
        "folder (config.json + *.safetensors)"
    )


def check_size(
    requests: list[RequestSpec],
    max_tokens: int = MAX_TOTAL_TOKENS,
    max_requests: int = MAX_REQUESTS,
) -> None:
    """Refuse workloads too big for a shared live model, saying what to change."""
    if len(requests) > max_requests:
        raise ValueError(
            f"{len(requests)} requests: the live engine takes at most "
            f"{max_requests} per run; use fewer"
        )
    total = sum(r.prompt_tokens + r.output_tokens for r in requests)
    if total > max_tokens:
        raise ValueError(
            f"{total} prompt + output tokens: the live engine takes at most "
            f"{max_tokens} per run; use shorter prompts or outputs"
        )


def _cuda(device: str) -> bool:
    import torch

    return device == "cuda" or (device == "auto" and torch.cuda.is_available())


def store_capacity(config: SimConfig, slots: int, max_len: int) -> int:
    """KV tokens the engine accounts for `slots` store rows of `max_len`: each request's rows in
    whole blocks, plus one block for an engine that keeps one to itself (vLLM's null block).
    Exactly `slots * max_len` rejected a lone request whose length is not a whole number of
    blocks under vllm (139 tokens: 8 whole blocks, 7 usable)."""
    block = config.engine.block_size
    return slots * -(-max_len // block) * block + block


def lookahead_rows(config: SimConfig) -> int:
    """KV rows a request may need past its last token: k under speculative decoding, else 0."""
    if getattr(config.knobs, "speculative", ""):
        return config.knobs.num_speculative_tokens
    return 0


def without_prefix_cache(config: SimConfig) -> SimConfig:
    """The config with prefix caching off: the live engine keeps every request's KV in a store of
    its own (live/model/kvstore.py), so it cannot serve one request's prompt from another's blocks.
    Its predictions use the same setting, so live and simulated runs stay comparable."""
    if getattr(config.knobs, "enable_prefix_caching", False):
        return with_overrides(config, {"enable_prefix_caching": False})
    return config


def prompt_ids(requests, tokenizer, vocab: int, seed: int) -> dict[int, list[int]]:
    """Token ids of each prompt, exactly prompt_tokens long (text if there is a tokenizer)."""
    if tokenizer is None:  # random weights: random ids (timing does not depend on values)
        rng = np.random.default_rng(seed)
        return {r.request_id: rng.integers(0, vocab, r.prompt_tokens).tolist() for r in requests}
    base = tokenizer.encode(PROMPT_TEXT).ids
    longest = max(r.prompt_tokens for r in requests)
    ids = (base * (longest // len(base) + 1))[:longest]
    return {r.request_id: ids[: r.prompt_tokens] for r in requests}


def run_live(
    requests: list[RequestSpec],
    config: SimConfig,
    options: LiveOptions = LiveOptions(),
    typed: dict[int, list[int]] | None = None,
    progress=None,
    max_requests: int = MAX_REQUESTS,
) -> tuple[RunResult, dict]:
    """Serve `requests` with `config`'s policy and topology on a real model; measured tables.
    `max_requests` is for benches on a machine of their own (bench/bench_live_spec.py's batches
    past 16); what a visitor can reach (the app, `live serve`, `live replay`) keeps the default."""
    from live.engine.clock import MeasuredClock
    from live.engine.runner import ModelRunner
    from live.engine.speculation import check_live_speculation, merged_summary
    from live.model.kvstore import KVStore

    check_size(
        requests,
        MAX_TOTAL_TOKENS_CUDA if _cuda(options.device) else MAX_TOTAL_TOKENS,
        max_requests,
    )
    config = without_prefix_cache(config)
    if config.engine.preemption_mode != "recompute":
        raise ValueError(
            "the live engine preempts by recompute only (as vLLM V1); set preemption_mode=recompute"
        )
    check_live_speculation(config)
    net, tokenizer, dev, dtype = load(options.model, options.device)
    ids = prompt_ids(requests, tokenizer, net.shape.vocab, options.seed)
    ids.update(typed or {})
    max_len = max(r.prompt_tokens + r.output_tokens for r in requests)
    if max_len > net.shape.max_len:
        raise ValueError(
            f"a request needs {max_len} tokens; {options.model} holds at most {net.shape.max_len}"
        )
    slots = len(requests)
    # Speculation verifies up to k drafts past a request's last token (vLLM schedules drafts up to
    # max_model_len, not max_tokens): room for them, or the last verifies would be cut to the
    # store's rows here and preempt a request in the prediction, whose engine drafts k in full.
    rows = min(max_len + lookahead_rows(config), net.shape.max_len)
    if not config.engine.kv_capacity_tokens:  # the engine's block accounting = the real stores
        config = with_overrides(config, {"kv_capacity_tokens": store_capacity(config, slots, rows)})

    def make_runner(worker: str) -> ModelRunner:
        store = KVStore(net.shape, slots, rows, dev, dtype)
        runner = ModelRunner(net, store, dev, dtype, threads=options.threads)
        runner.warm_up()
        return runner

    if dev.type == "cuda":  # each run starts from the same memory: no earlier run's leftovers
        import gc

        import torch

        gc.collect()  # a finished run's stores and graphs may sit in reference cycles
        torch.cuda.empty_cache()
        retries = torch.cuda.memory_stats(dev).get("num_alloc_retries", 0)
    clock = MeasuredClock(make_runner, ids)
    clock.on_step = progress
    run = simulate(requests, config, clock=clock)
    info = next(iter(clock.runners.values())).device_info() if clock.runners else {}
    if dev.type == "cuda":  # allocations that had to free the cache and retry: slow steps
        info["alloc_retries"] = torch.cuda.memory_stats(dev).get("num_alloc_retries", 0) - retries
    run.meta.update({"live_model": options.model, "device": info, "model": options.model})
    generated, texts = {}, {}
    for r in requests:
        holders = [rn for rn in clock.runners.values() if r.request_id in rn._tokens]
        if holders:
            generated[r.request_id] = max((rn.generated(r.request_id) for rn in holders), key=len)
            if tokenizer is not None:
                texts[r.request_id] = tokenizer.decode(generated[r.request_id])
    speculators = [rn.speculator for rn in clock.runners.values() if rn.speculator is not None]
    if speculators:  # what the n-gram drafter and the verifies measured (all workers together)
        run.meta.setdefault("speculation", {})["measured"] = merged_summary(speculators)
    return run, {
        "samples": clock.samples,
        "generated": generated,
        "transfers": clock.transfers,
        "texts": texts,
        "prompt_text": {k: tokenizer.decode(v) for k, v in ids.items()}
        if tokenizer is not None
        else {},
    }
