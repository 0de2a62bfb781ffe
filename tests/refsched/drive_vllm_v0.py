"""Drive the REAL vLLM V0 scheduler (vllm==0.10.2) with fake model outputs.

Runs inside ``.venv-vllm-v0`` (see ``scripts/refsched_env.sh``), never in the app's venv.
Reads one JSON document ``{"cases": [...]}`` on stdin and writes one JSON document
``{"engine": ..., "results": [...]}`` on stdout; logs go to stderr. The protocol is
described in ``tests/refsched/client.py``. vllm 0.10.2 is the last release that ships
the V0 scheduler (``vllm/core/``); it was removed in 0.11.

What is driven, by path inside the installed wheel (``site-packages/vllm/``):

- ``core/scheduler.py``: ``Scheduler.__init__``, ``Scheduler.add_seq_group``,
  ``Scheduler.schedule`` (which calls ``_schedule_chunked_prefill`` or
  ``_schedule_default``, and through them ``_schedule_running``, ``_schedule_swapped``,
  ``_schedule_prefills``, ``_get_num_new_uncached_and_cached_tokens``,
  ``_chunk_new_tokens_to_schedule``, ``PartialPrefillMetadata.from_queues``, and
  ``_preempt``), ``Scheduler.free_seq`` and ``Scheduler.free_finished_seq_groups``.
  ``SchedulerOutputs.scheduled_seq_groups[i].token_chunk_size`` is what a step
  schedules for a group (for a newly admitted prompt it includes the prefix-cache
  tokens: see ``_schedule_prefills``, ``token_chunk_size=num_new_tokens``).
- ``engine/llm_engine.py``: ``LLMEngine._process_model_outputs`` is what a step does
  after the model ran, and what this driver reproduces synchronously (no async output
  processing): ``seq_group.update_num_computed_tokens(token_chunk_size)``; when
  ``seq_group_metadata.do_sample``, ``engine/output_processor/single_step.py``
  ``SingleStepOutputProcessor._process_sequence_group_outputs`` appends the sampled
  token (``Sequence.append_token_id``), runs
  ``engine/output_processor/stop_checker.py`` ``StopChecker.maybe_stop_sequence`` (the
  real one) and ``Scheduler.free_seq`` on a finished sequence; then
  ``Scheduler.free_finished_seq_groups``.
- ``sequence.py``: ``Sequence``, ``SequenceGroup``; ``inputs/data.py``:
  ``token_inputs``; ``config/scheduler.py``: ``SchedulerConfig``; ``config/cache.py``:
  ``CacheConfig``.

This mirrors vLLM's own V0 tests ``tests/core/test_chunked_prefill_scheduler.py`` and
``tests/core/utils.py`` (``create_dummy_prompt``, ``append_new_token``) in the
vllm-project/vllm repository at v0.10.2.

Reporting: ``preempted`` ids are recorded by wrapping ``Scheduler._preempt`` on the
instance (``SchedulerOutputs.preempted`` is only a count); ``cached`` is the
``num_new_tokens_cached`` that ``_get_num_new_uncached_and_cached_tokens`` returned for a
waiting group the step admitted (recorded by wrapping that method on the instance).
"""

from __future__ import annotations

import sys

from protocol import serve  # tests/refsched/protocol.py (this folder is on sys.path)

ENGINE = "vllm 0.10.2 V0"
SAMPLED_TOKEN = 7  # every generated token; ignore_eos=True so only max_tokens stops


def _imports():
    from vllm.config import CacheConfig, SchedulerConfig
    from vllm.core.scheduler import Scheduler
    from vllm.engine.output_processor.stop_checker import StopChecker
    from vllm.inputs import token_inputs
    from vllm.sampling_params import SamplingParams
    from vllm.sequence import Logprob, Sequence, SequenceGroup, SequenceStatus

    return {
        "CacheConfig": CacheConfig,
        "SchedulerConfig": SchedulerConfig,
        "Scheduler": Scheduler,
        "StopChecker": StopChecker,
        "token_inputs": token_inputs,
        "SamplingParams": SamplingParams,
        "Logprob": Logprob,
        "Sequence": Sequence,
        "SequenceGroup": SequenceGroup,
        "SequenceStatus": SequenceStatus,
    }


def build_scheduler(v, cfg: dict):
    block_size = int(cfg.get("block_size", 16))
    max_model_len = int(cfg.get("max_model_len", 65536))
    scheduler_config = v["SchedulerConfig"](
        runner_type="generate",
        max_num_batched_tokens=int(cfg.get("max_num_batched_tokens", 2048)),
        max_num_seqs=int(cfg.get("max_num_seqs", 256)),
        max_model_len=max_model_len,
        enable_chunked_prefill=bool(cfg.get("enable_chunked_prefill", True)),
        max_num_partial_prefills=int(cfg.get("max_num_partial_prefills", 1)),
        max_long_partial_prefills=int(cfg.get("max_long_partial_prefills", 1)),
        long_prefill_token_threshold=int(cfg.get("long_prefill_token_threshold", 0)),
        policy=cfg.get("scheduling_policy", "fcfs"),
        preemption_mode=cfg.get("preemption_mode"),  # None: recompute for one sequence
    )
    cache_config = v["CacheConfig"](
        block_size=block_size,
        gpu_memory_utilization=1.0,
        swap_space=0,
        cache_dtype="auto",
        enable_prefix_caching=bool(cfg.get("enable_prefix_caching", False)),
    )
    cache_config.num_gpu_blocks = int(cfg.get("num_gpu_blocks", 4096))
    cache_config.num_cpu_blocks = int(cfg.get("num_cpu_blocks", 0))
    scheduler = v["Scheduler"](scheduler_config, cache_config, None)
    stop_checker = v["StopChecker"](max_model_len, lambda seq: None)
    return scheduler, stop_checker, block_size


def make_seq_group(v, spec: dict, seq_id: int, block_size: int):
    seq = v["Sequence"](
        seq_id,
        v["token_inputs"]([int(t) for t in spec["prompt_token_ids"]]),
        block_size,
    )
    return v["SequenceGroup"](
        request_id=str(spec["id"]),
        seqs=[seq],
        arrival_time=float(spec.get("arrival_time", 0.0)),
        sampling_params=v["SamplingParams"](
            max_tokens=int(spec["max_tokens"]), ignore_eos=True, detokenize=False
        ),
        priority=int(spec.get("priority", 0)),
    )


def run_case(v, case: dict) -> dict:
    cfg = case.get("config", {})
    scheduler, stop_checker, block_size = build_scheduler(v, cfg)
    RUNNING = v["SequenceStatus"].RUNNING
    WAITING = v["SequenceStatus"].WAITING
    Logprob = v["Logprob"]

    # Record preemption victims and the cached-token split of waiting groups.
    step_preempted: list[str] = []
    waiting_cached: dict[str, int] = {}
    orig_preempt = scheduler._preempt
    orig_split = scheduler._get_num_new_uncached_and_cached_tokens

    def preempt(seq_group, *args, **kwargs):
        step_preempted.append(seq_group.request_id)
        return orig_preempt(seq_group, *args, **kwargs)

    def split(seq_group, status, *args, **kwargs):
        uncached, cached = orig_split(seq_group, status, *args, **kwargs)
        if status == WAITING:
            waiting_cached[seq_group.request_id] = int(cached)
        return uncached, cached

    scheduler._preempt = preempt
    scheduler._get_num_new_uncached_and_cached_tokens = split

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
    next_seq_id = 0
    for step in range(max_steps):
        if not unfinished:
            break
        while cursor < len(pending) and int(pending[cursor].get("arrival_step", 0)) <= step:
            scheduler.add_seq_group(make_seq_group(v, pending[cursor], next_seq_id, block_size))
            next_seq_id += 1
            cursor += 1

        was_waiting = {sg.request_id for sg in scheduler.waiting}
        step_preempted.clear()
        waiting_cached.clear()
        metas, sched_out, _ = scheduler.schedule()
        scheduled: dict[str, int] = {}
        cached: dict[str, int] = {}
        for ssg in sched_out.scheduled_seq_groups:
            rid = ssg.seq_group.request_id
            scheduled[rid] = int(ssg.token_chunk_size)
            if rid in was_waiting and rid in waiting_cached:
                cached[rid] = waiting_cached[rid]
        for sg in sched_out.ignored_seq_groups:
            # Prompts V0 refuses (too long for max_model_len or the KV pool) finish
            # with FINISHED_IGNORED; report them as finished with no output.
            unfinished.discard(sg.request_id)
        preempted = list(step_preempted)

        # Fake model run, as LLMEngine._process_model_outputs does it synchronously.
        finished: list[str] = [sg.request_id for sg in sched_out.ignored_seq_groups]
        for meta, ssg in zip(metas, sched_out.scheduled_seq_groups, strict=True):
            seq_group = ssg.seq_group
            if seq_group.is_finished():
                continue
            seq_group.update_num_computed_tokens(meta.token_chunk_size or 0)
            if meta.do_sample:
                for seq in seq_group.get_seqs(status=RUNNING):
                    seq.append_token_id(SAMPLED_TOKEN, {SAMPLED_TOKEN: Logprob(0.0)})
                    outputs[seq_group.request_id] += 1
                    stop_checker.maybe_stop_sequence(
                        seq, 0, seq_group.sampling_params, lora_req=None
                    )
                    if seq.is_finished():
                        scheduler.free_seq(seq)
            if seq_group.is_finished():
                finished.append(seq_group.request_id)
                unfinished.discard(seq_group.request_id)
        scheduler.free_finished_seq_groups()
        steps.append(
            {"scheduled": scheduled, "cached": cached, "preempted": preempted, "finished": finished}
        )
    return {"name": case.get("name", ""), "error": None, "steps": steps, "outputs": outputs}


if __name__ == "__main__":
    sys.exit(serve(ENGINE, _imports, run_case))
