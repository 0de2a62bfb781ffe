"""Drive the REAL vLLM V1 scheduler (vllm==0.33.0) with fake model outputs.

Runs inside ``.venv-vllm-v1`` (see ``scripts/refsched_env.sh``), never in the app's venv.
Reads one JSON document ``{"cases": [...]}`` on stdin and writes one JSON document
``{"engine": ..., "results": [...]}`` on stdout; logs go to stderr. The protocol is
described in ``tests/refsched/client.py``.

What is driven, by path inside the installed wheel (``site-packages/vllm/``):

- ``v1/core/sched/scheduler.py``: ``Scheduler.__init__``, ``Scheduler.add_request``,
  ``Scheduler.schedule`` (running loop, then waiting loop; recompute preemption in
  ``_preempt_request``) and ``Scheduler.update_from_output`` (appends the sampled token,
  checks the stop condition, frees finished requests).
- ``v1/core/sched/output.py``: ``SchedulerOutput.num_scheduled_tokens`` (tokens per
  request this step), ``SchedulerOutput.scheduled_new_reqs[i].num_computed_tokens``
  (``NewRequestData``: prefix-cache hit of a newly admitted request, taken before
  ``_update_after_schedule`` advances it), ``SchedulerOutput.scheduled_cached_reqs``
  (``CachedRequestData``: ``resumed_req_ids`` and ``num_computed_tokens`` for requests
  resumed after a preemption; with the V2 model runner 0.33 moves resumed requests into
  ``scheduled_new_reqs`` instead, see ``Scheduler.schedule`` "Construct the scheduler
  output"), ``SchedulerOutput.preempted_req_ids``.
- ``v1/outputs.py``: ``ModelRunnerOutput(req_ids, req_id_to_index, sampled_token_ids)``.
- ``v1/request.py``: ``Request(...)``; ``v1/core/kv_cache_utils.py``:
  ``init_none_hash``, ``get_request_block_hasher``; ``utils/hashing.py``: ``sha256``.
- ``v1/kv_cache_interface.py``: ``KVCacheConfig``, ``KVCacheGroupSpec``,
  ``FullAttentionSpec``; ``v1/structured_output/__init__.py``:
  ``StructuredOutputManager``.
- ``config/``: ``VllmConfig``, ``ModelConfig`` (a tiny hand-written Llama
  ``config.json``, ``skip_tokenizer_init=True``), ``SchedulerConfig``, ``CacheConfig``,
  ``DeviceConfig(device="cpu")``.

This mirrors vLLM's own unit-test helpers ``tests/v1/core/utils.py::create_scheduler``
and ``create_requests`` in the vllm-project/vllm repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

from protocol import serve  # tests/refsched/protocol.py (this folder is on sys.path)

ENGINE = "vllm 0.33.0 V1"
SAMPLED_TOKEN = 7  # every generated token; ignore_eos=True so only max_tokens stops
TINY_MODEL = Path(__file__).resolve().parent / "tiny_llama"


def _imports():
    import torch
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        ModelConfig,
        SchedulerConfig,
        VllmConfig,
    )
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import (
        FullAttentionSpec,
        KVCacheConfig,
        KVCacheGroupSpec,
    )
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager

    init_none_hash(sha256)
    return {
        "torch": torch,
        "CacheConfig": CacheConfig,
        "DeviceConfig": DeviceConfig,
        "ModelConfig": ModelConfig,
        "SchedulerConfig": SchedulerConfig,
        "VllmConfig": VllmConfig,
        "SamplingParams": SamplingParams,
        "sha256": sha256,
        "get_request_block_hasher": get_request_block_hasher,
        "Scheduler": Scheduler,
        "FullAttentionSpec": FullAttentionSpec,
        "KVCacheConfig": KVCacheConfig,
        "KVCacheGroupSpec": KVCacheGroupSpec,
        "ModelRunnerOutput": ModelRunnerOutput,
        "Request": Request,
        "StructuredOutputManager": StructuredOutputManager,
    }


def build_scheduler(v, cfg: dict):
    block_size = int(cfg.get("block_size", 16))
    max_model_len = int(cfg.get("max_model_len", 65536))
    num_blocks = int(cfg.get("num_gpu_blocks", 4096))
    scheduler_config = v["SchedulerConfig"](
        max_num_seqs=int(cfg.get("max_num_seqs", 256)),
        max_num_batched_tokens=int(cfg.get("max_num_batched_tokens", 2048)),
        max_model_len=max_model_len,
        long_prefill_token_threshold=int(cfg.get("long_prefill_token_threshold", 0)),
        enable_chunked_prefill=bool(cfg.get("enable_chunked_prefill", True)),
        policy=cfg.get("scheduling_policy", "fcfs"),
        scheduler_reserve_full_isl=bool(cfg.get("scheduler_reserve_full_isl", True)),
        async_scheduling=False,
        is_encoder_decoder=False,
    )
    model_config = v["ModelConfig"](
        model=str(TINY_MODEL),
        skip_tokenizer_init=True,
        max_model_len=max_model_len,
        dtype="float32",
        seed=0,
    )
    cache_config = v["CacheConfig"](
        block_size=block_size,
        enable_prefix_caching=bool(cfg.get("enable_prefix_caching", False)),
    )
    vllm_config = v["VllmConfig"](
        scheduler_config=scheduler_config,
        model_config=model_config,
        cache_config=cache_config,
        device_config=v["DeviceConfig"](device="cpu"),
    )
    # Passed AS IS: the pool reserves block 0 as its null block, so num_blocks - 1 are
    # usable (v1/core/block_pool.py); the caller compensates if it wants N usable.
    cache_config.num_gpu_blocks = num_blocks
    kv_cache_config = v["KVCacheConfig"](
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            v["KVCacheGroupSpec"](
                ["layer"],
                v["FullAttentionSpec"](
                    block_size=block_size,
                    num_kv_heads=1,
                    head_size=1,
                    dtype=v["torch"].float32,
                ),
            )
        ],
    )
    scheduler = v["Scheduler"](
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=v["StructuredOutputManager"](vllm_config),
        block_size=block_size,
        log_stats=False,
    )
    return scheduler, block_size


def make_request(v, spec: dict, block_hasher):
    return v["Request"](
        request_id=str(spec["id"]),
        prompt_token_ids=[int(t) for t in spec["prompt_token_ids"]],
        sampling_params=v["SamplingParams"](ignore_eos=True, max_tokens=int(spec["max_tokens"])),
        pooling_params=None,
        arrival_time=float(spec.get("arrival_time", 0.0)),
        priority=int(spec.get("priority", 0)),
        block_hasher=block_hasher,
    )


def run_case(v, case: dict) -> dict:
    cfg = case.get("config", {})
    scheduler, block_size = build_scheduler(v, cfg)
    block_hasher = v["get_request_block_hasher"](block_size, v["sha256"])
    pending = sorted(
        enumerate(case["requests"]), key=lambda p: (int(p[1].get("arrival_step", 0)), p[0])
    )
    pending = [spec for _, spec in pending]
    ids = [str(spec["id"]) for spec in case["requests"]]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate request ids")
    outputs = {rid: 0 for rid in ids}
    unfinished = set(ids)
    steps: list[dict] = []
    max_steps = int(case.get("max_steps", 20000))
    cursor = 0
    for step in range(max_steps):
        if not unfinished:
            break
        while cursor < len(pending) and int(pending[cursor].get("arrival_step", 0)) <= step:
            scheduler.add_request(make_request(v, pending[cursor], block_hasher))
            cursor += 1

        out = scheduler.schedule()
        scheduled = {rid: int(n) for rid, n in out.num_scheduled_tokens.items()}
        # Cache hits at admission. NewRequestData.num_computed_tokens is the request's
        # num_computed_tokens when the output is built, i.e. before
        # _update_after_schedule adds this step's tokens: exactly the tokens the prefix
        # cache supplied. Resumed (preempted) requests are listed in
        # scheduled_cached_reqs.resumed_req_ids with the same number in
        # scheduled_cached_reqs.num_computed_tokens (or in scheduled_new_reqs when the
        # V2 model runner is in use).
        cached: dict[str, int] = {}
        for new in out.scheduled_new_reqs:
            cached[new.req_id] = int(new.num_computed_tokens)
        cached_reqs = out.scheduled_cached_reqs
        for i, rid in enumerate(cached_reqs.req_ids):
            if rid in cached_reqs.resumed_req_ids:
                cached[rid] = int(cached_reqs.num_computed_tokens[i])
        preempted = sorted(out.preempted_req_ids)

        # Fake model run: every request whose prompt (and earlier outputs) is now fully
        # computed samples one token; a partial prefill chunk samples none.
        req_ids = list(out.num_scheduled_tokens)
        sampled = []
        for rid in req_ids:
            req = scheduler.requests[rid]
            sampled.append([SAMPLED_TOKEN] if req.num_computed_tokens >= req.num_tokens else [])
        runner_out = v["ModelRunnerOutput"](
            req_ids=req_ids,
            req_id_to_index={rid: i for i, rid in enumerate(req_ids)},
            sampled_token_ids=sampled,
        )
        engine_outputs = scheduler.update_from_output(out, runner_out)
        finished: list[str] = []
        for eco in engine_outputs.values():
            for o in eco.outputs:
                outputs[o.request_id] = outputs.get(o.request_id, 0) + len(o.new_token_ids)
                if o.finish_reason is not None:
                    finished.append(o.request_id)
                    unfinished.discard(o.request_id)
        steps.append(
            {"scheduled": scheduled, "cached": cached, "preempted": preempted, "finished": finished}
        )
    return {"name": case.get("name", ""), "error": None, "steps": steps, "outputs": outputs}


if __name__ == "__main__":
    sys.exit(serve(ENGINE, _imports, run_case))
