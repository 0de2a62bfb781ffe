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
  ``ParallelConfig``, ``DeviceConfig(device="cpu")`` and, for speculative decoding,
  ``SpeculativeConfig`` built exactly as ``EngineArgs.create_speculative_config``
  (``engine/arg_utils.py``) builds it from ``--speculative-config``.

Speculative decoding (``config["speculative"]``) mirrors the synchronous engine loop,
``EngineCore.step`` then ``EngineCore.post_step`` (``v1/engine/core.py``):
``schedule()``, a fake ``ModelRunnerOutput`` whose ``sampled_token_ids`` hold ``1 + a``
tokens for a request that verified ``a`` drafts, ``update_from_output()`` (which rolls
``num_computed_tokens`` back by the rejected drafts), then, when the step scheduled any
token, ``update_draft_token_ids(DraftTokenIds(...))`` with the next drafts for every
request of the batch (``v1/outputs.py``).

This mirrors vLLM's own unit-test helpers ``tests/v1/core/utils.py::create_scheduler``
and ``create_requests`` in the vllm-project/vllm repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

from protocol import serve  # tests/refsched/protocol.py (this folder is on sys.path)

ENGINE = "vllm 0.33.0 V1"
SAMPLED_TOKEN = 7  # every generated token; ignore_eos=True so only max_tokens stops
DRAFT_TOKEN = 8  # every proposed draft token (-1 is vLLM's padding draft, never accepted)
# Protocol name -> SpeculativeConfig.method (config/speculative.py). The two drafters
# with a model are given the tiny Llama itself: EAGLE wraps its config in an EAGLEConfig
# (architecture EagleLlamaForCausalLM), as it does for any non-EAGLE checkpoint.
SPEC_METHODS = {"ngram": "ngram", "draft": "draft_model", "eagle": "eagle"}
TINY_MODEL = Path(__file__).resolve().parent / "tiny_llama"


def _imports():
    import torch
    from vllm.config import (
        CacheConfig,
        DeviceConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
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
    from vllm.v1.outputs import DraftTokenIds, ModelRunnerOutput
    from vllm.v1.request import Request
    from vllm.v1.structured_output import StructuredOutputManager

    init_none_hash(sha256)
    return {
        "torch": torch,
        "CacheConfig": CacheConfig,
        "DeviceConfig": DeviceConfig,
        "ModelConfig": ModelConfig,
        "ParallelConfig": ParallelConfig,
        "SchedulerConfig": SchedulerConfig,
        "SpeculativeConfig": SpeculativeConfig,
        "VllmConfig": VllmConfig,
        "SamplingParams": SamplingParams,
        "sha256": sha256,
        "get_request_block_hasher": get_request_block_hasher,
        "Scheduler": Scheduler,
        "FullAttentionSpec": FullAttentionSpec,
        "KVCacheConfig": KVCacheConfig,
        "KVCacheGroupSpec": KVCacheGroupSpec,
        "DraftTokenIds": DraftTokenIds,
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
    parallel_config = v["ParallelConfig"]()
    vllm_config = v["VllmConfig"](
        scheduler_config=scheduler_config,
        model_config=model_config,
        cache_config=cache_config,
        parallel_config=parallel_config,
        device_config=v["DeviceConfig"](device="cpu"),
        speculative_config=build_speculative_config(
            v, cfg.get("speculative"), model_config, parallel_config
        ),
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


def build_speculative_config(v, spec_cfg: dict | None, model_config, parallel_config):
    """The SpeculativeConfig that ``vllm serve --speculative-config '{"method": ...,
    "num_speculative_tokens": k}'`` gives (EngineArgs.create_speculative_config passes the
    dict plus the target's model and parallel configs), or None without ``speculative``."""
    if not spec_cfg:
        return None
    method = str(spec_cfg.get("method", ""))
    if method not in SPEC_METHODS:
        raise ValueError(f"unknown speculative method {method!r}: use one of {list(SPEC_METHODS)}")
    kwargs: dict = {
        "method": SPEC_METHODS[method],
        "num_speculative_tokens": int(spec_cfg["num_speculative_tokens"]),
        "target_model_config": model_config,
        "target_parallel_config": parallel_config,
    }
    if method == "ngram":
        # Scheduler-neutral; vLLM defaults both to 5 when neither is given.
        for key in ("prompt_lookup_min", "prompt_lookup_max"):
            if spec_cfg.get(key) is not None:
                kwargs[key] = int(spec_cfg[key])
    else:
        kwargs["model"] = str(TINY_MODEL)
    return v["SpeculativeConfig"](**kwargs)


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


def _spec_plan(spec: dict) -> list[tuple[int, int]]:
    """A request's ``spec`` list: ``[accepted_j, drafts_j]`` per sampling event j."""
    plan = []
    for pair in spec.get("spec") or []:
        accepted, drafts = pair
        if int(accepted) < 0 or int(drafts) < 0:
            raise ValueError(f"request {spec['id']}: negative spec entry {pair}")
        plan.append((int(accepted), int(drafts)))
    return plan


def run_case(v, case: dict) -> dict:
    cfg = case.get("config", {})
    scheduler, block_size = build_scheduler(v, cfg)
    # EngineCore builds the hasher with vllm_config.num_hash_lookahead_tokens (EAGLE with
    # prefix caching: each block hash also covers the token after the block).
    block_hasher = v["get_request_block_hasher"](
        block_size, v["sha256"], scheduler.vllm_config.num_hash_lookahead_tokens
    )
    use_spec = scheduler.vllm_config.speculative_config is not None
    num_spec_tokens = int(scheduler.num_spec_tokens)
    pending = sorted(
        enumerate(case["requests"]), key=lambda p: (int(p[1].get("arrival_step", 0)), p[0])
    )
    pending = [spec for _, spec in pending]
    ids = [str(spec["id"]) for spec in case["requests"]]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate request ids")
    plans = {str(spec["id"]): _spec_plan(spec) for spec in case["requests"]}
    events = {rid: 0 for rid in ids}  # sampling events so far, per request
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
        # computed samples (a sampling event); a partial prefill chunk samples none.
        # With drafts scheduled (SchedulerOutput.scheduled_spec_decode_tokens: the real
        # drafts, cut to the token budget, or [-1] * k padding for a new 1-token
        # request), the rejection sampler returns the a accepted drafts plus one token.
        req_ids = list(out.num_scheduled_tokens)
        sampled: list[list[int]] = []
        samples: dict[str, tuple[int, int]] = {}  # rid -> (accepted, drafts) of event j
        spec_info: dict[str, list[int]] = {}
        for rid in req_ids:
            req = scheduler.requests[rid]
            spec_tokens = out.scheduled_spec_decode_tokens.get(rid) or []
            num_padding = sum(1 for t in spec_tokens if t == -1)
            if req.num_computed_tokens < req.num_tokens:
                sampled.append([])
                if spec_tokens:
                    spec_info[rid] = [len(spec_tokens), num_padding, 0]
                continue
            plan = plans[rid]
            accepted, drafts = plan[events[rid]] if events[rid] < len(plan) else (0, 0)
            events[rid] += 1
            accepted = min(accepted, len(spec_tokens) - num_padding)
            samples[rid] = (accepted, drafts)
            sampled.append([SAMPLED_TOKEN] * (1 + accepted))
            if spec_tokens:
                spec_info[rid] = [len(spec_tokens), num_padding, accepted]
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
        record = {
            "scheduled": scheduled,
            "cached": cached,
            "preempted": preempted,
            "finished": finished,
        }
        if use_spec:
            # EngineCore.post_step (sync scheduling): after a step that ran the model,
            # the drafter's proposals for every request of the batch. A drafter never
            # proposes more than k; drafts for a prefill chunk are ignored by
            # update_draft_token_ids (and those for finished requests skipped).
            if out.total_num_scheduled_tokens > 0:
                draft_ids = [
                    [DRAFT_TOKEN] * min(samples[rid][1], num_spec_tokens) if rid in samples else []
                    for rid in req_ids
                ]
                scheduler.update_draft_token_ids(v["DraftTokenIds"](req_ids, draft_ids))
            record["spec"] = spec_info
            record["computed"] = {
                rid: int(scheduler.requests[rid].num_computed_tokens)
                for rid in req_ids
                if rid in scheduler.requests
            }
        steps.append(record)
    return {"name": case.get("name", ""), "error": None, "steps": steps, "outputs": outputs}


if __name__ == "__main__":
    sys.exit(serve(ENGINE, _imports, run_case))
