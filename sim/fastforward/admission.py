"""Admission steps inside a run of decode steps: the step after a run's end, formed by the policy.

Why
- On a busy server the quiet stretches are short: a request arrives every ten-odd steps, and
  the step after its arrival admits it (its prompt shares the step with everybody's decode).
  Ending the run there, taking that step the ordinary way and planning a new run costs five
  passes over the running requests (book them, the policy's running loop, the batch, complete,
  a new plan) for one step in which each of them still just decodes one token.
- So at a run's end (the instant step by step would ask the policy for the next step) the run
  asks the policy itself, for the part that matters: every running request decodes one token
  (their KV blocks are taken, as the policy's running loop takes them: first), and the policy's
  own ADMISSION code (`promises.admit_in_run`: vLLM V1's waiting loop, the same function its
  `schedule` calls) adds what it adds. If it adds nothing, the step is a plain decode step and
  the run plans on from it. If it adds whole prompts that each sample a token and do not end
  their request, the step joins the run as an admission step (priced by the clock, as any
  step), the prompts' segments and first tokens are booked now, and those requests join the
  run as decoders from the next step. Anything else (a chunk that leaves part of its prompt, a
  one-token request, a resumed request whose cache hit leaves a single token) is decided all
  the same, so it is handed back: the run ends before it and the step is taken the ordinary way,
  with exactly the plan the policy formed (`Engine.batch_of`).
- Only where nothing else can touch the worker mid-run (one colocated instance: its only outside
  event is an arrival, which bounds the plan) and for the policies whose promises admit in a
  run (sim/fastforward/promises.py).
  tests/test_fastforward.py compares every request, segment, step row and token time with step
  by step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.core.step import Batch, StepPlan
from sim.fastforward import promises

if TYPE_CHECKING:
    from sim.fastforward.decode_run import DecodeRun


def extend(run: DecodeRun) -> bool | StepPlan | None:
    """At the run's end (now == the end of its step k): take step k + 1 into the run (True),
    or end the run and hand back step k + 1's plan (a StepPlan), or end it (None: the engine
    forms the next step the ordinary way)."""
    worker, engine = run.worker, run.engine
    if run.touched or not run.next_b or engine.swapped or worker.inbox:
        return None
    run.count_taken()  # (a run budget stops a long run here)
    policy, kv = engine.policy, engine.kv
    k = run.k
    now = worker.env.now
    run._advance(k, k, book=False)  # step k's finishes leave, their blocks are freed
    margin = promises.kv_margin(policy)
    # The running loop: every running request decodes; a block each where its last one is full.
    if run.next_take > kv.free_blocks - margin or not promises.admits_in_run(policy, engine):
        return None  # a decode would preempt (or the policy decides steps otherwise)
    kv_after_k, free_before = kv.used_tokens, kv.free_blocks
    need_before = run.need[k - 1]
    if run.next_take:
        kv.take(run.next_take)
    run.taken_to = k + 1
    plan = StepPlan()
    plan.num_tokens = run.next_b
    engine._now = now
    promises.admit_in_run(policy, engine, plan, now)
    limit = worker.limit_s()
    if not plan.items:  # a plain decode step: plan on from it (its blocks are taken)
        horizon = promises.decode_horizon(policy, engine, now)
        blocked = bool(engine.waiting)
        cap = 1 if horizon is None else None
        limit = limit if horizon is None else min(horizon, limit)
        run._plan(limit, blocked, free_before - margin + need_before, decided=1, cap=cap)
        return True
    admitted = list(plan.items.items())
    if not all(
        req.num_computed + n == req.num_tokens  # the chunk ends its prompt and samples ...
        and not req.is_decoding  # ... it is a prefill ...
        and req.num_generated + 1 < req.output_tokens  # ... and the request goes on decoding
        for req, n in admitted
    ):
        run.kv_last = kv_after_k  # (the blocks of step k + 1 are already taken)
        run.allocated = k + 1
        whole = StepPlan()  # the step as the policy formed it: decodes first, in running order
        for req in engine.running:
            n = plan.items.get(req, 1)
            whole.items[req] = n
            whole.num_tokens += n
        return whole
    # An admission step: priced as any step, its prompts booked now, their requests join.
    step = run.first_step + k
    chunks = [(n, req.num_computed, True) for req, n in admitted]
    batch = Batch(engine.name, step, [], chunks, run.next_b, run.next_context)
    timing = worker.clock.step_timing(worker, batch)
    end = now + timing.seconds  # as simpy's now + delay
    for req, n in admitted:
        engine.complete_prompt(req, n, req.num_computed, now, end, step)
    run.admission_step(
        end, batch, timing, need_before + free_before - kv.free_blocks, [req for req, _ in admitted]
    )  # (its decodes' blocks and the prompts')
    # Plan on from step k + 2 (at least its shape: the next extend needs it), unless the policy
    # must look again there: it promises nothing, or requests still wait (this step's prompts
    # may have used the budget they needed, or its finishes may free what they wait for; a
    # step of decodes alone that still admits nobody is what a blocked run starts from).
    horizon = promises.decode_horizon(policy, engine, end)
    if horizon is not None and not engine.waiting:
        run._plan(min(horizon, limit), False, kv.free_blocks - margin + run.need[-1], min_steps=0)
    return True
