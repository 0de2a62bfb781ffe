"""The engine core of one worker: queues, KV blocks, preemption and the step bookkeeping.

Notable features
- Clock-agnostic: nothing here knows about simpy or torch. A driver calls
  `schedule(now) -> Batch`, runs the batch however it likes (a cost model and simpy in sim/,
  a real forward pass in live/), then calls `complete(batch, start_s, end_s, cost)`.
- The POLICY (sim/policies/) decides which requests run and how many tokens each gets; the engine
  supplies the mechanics every policy shares: admission, KV allocation, preemption (recompute or
  swap, victim = last admitted or the policy's lowest priority) and the trace.
- One token rule for everybody (see sim/core/request.py): a step gives a request n tokens to
  compute;
  when its KV catches up with its tokens, the step samples one new output token at the step's END.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from sim.core.kv import KVCache
from sim.core.recorder import KIND_CODE, RECOMPUTE, SLOWED, TraceRecorder
from sim.core.request import Request, RequestState
from sim.core.speculation import settle_verify, speculator_for
from sim.core.step import Batch, StepPlan, StepTiming

if TYPE_CHECKING:
    from sim.policies.base import Policy

DECODE, PREFILL, STALL = KIND_CODE["decode"], KIND_CODE["prefill"], KIND_CODE["stall"]
CACHED = KIND_CODE["cached"]


class Engine:
    """One serving instance (a worker): waiting queue, running list, KV cache and a policy."""

    def __init__(
        self,
        name: str,
        policy: Policy,
        kv: KVCache,
        recorder: TraceRecorder,
        preemption_mode: str = "recompute",
        swap_capacity_tokens: int = 0,
    ) -> None:
        if preemption_mode not in ("recompute", "swap"):
            raise ValueError(f"preemption_mode must be recompute or swap, got {preemption_mode!r}")
        self.name = name
        self.policy = policy
        self.kv = kv
        self.recorder = recorder
        self.preemption_mode = preemption_mode
        self.swap_capacity_tokens = swap_capacity_tokens  # host memory for swapped KV
        self.swap_used_tokens = 0
        self.waiting: deque[Request] = deque()  # arrival order; preempted ones go to the front
        self.running: list[Request] = []  # admission order (the FCFS preemption victim is last)
        self.swapped: deque[Request] = deque()
        self.num_steps = 0
        self._worker_code = recorder.worker_code(name)
        self.hands_off = False  # a disaggregated prefill (P) worker: prompts leave for D
        self.retry_now = False  # the last schedule() preempted but ran nothing: ask again now
        self._admit_counter = 0
        self._now = 0.0
        # Speculative decoding (sim/core/speculation.py): who proposes drafts and accepts them;
        # None = off. The policy schedules the drafts, `complete` settles them.
        self.speculator = speculator_for(policy.knobs)
        if kv.caching:  # EAGLE: each block's hash covers the token after it (vllm/config/vllm.py)
            kv.hash_lookahead = getattr(policy.knobs, "num_hash_lookahead_tokens", 0)

    # ---- what drivers call ------------------------------------------------------------------

    def add_request(self, req: Request, now: float) -> None:
        """A request arrives (or is routed) here; rejected at once if it can never fit."""
        req.workers.append(self.name)
        need = req.prompt_tokens + (0 if req.remote_decode else req.output_tokens)
        reason = self.policy.reject_reason(req, self) or self.capacity_reason(need)
        if reason:
            req.state = RequestState.REJECTED
            req.reject_reason = reason
            return
        req.state = RequestState.WAITING
        req.wait_kind, req.wait_since = "queued", now
        self.waiting.append(req)

    def add_prefilled(self, req: Request, now: float) -> None:
        """A request whose prompt KV was transferred here (disaggregated decode side).

        Its blocks were reserved by `reserve_transfer` before the copy began; the request takes
        them over now (the prefill worker has released its own). It waits to be admitted like
        any request (so `max_num_seqs`, a static batch and the token budget still apply), ahead
        of requests that hold no KV yet: vLLM V1 drains its KV-holding waiting queue first
        (vllm/v1/core/sched/scheduler.py, `schedule`, "Requests holding KV blocks are always
        drained first").

        vLLM's protocol (`remote_decode == "vllm"`): the prompt's KV arrives, the LAST prompt
        token is computed again here to sample token 1 (`_update_waiting_for_remote_kv`:
        num_computed_tokens = num_tokens - 1). DistServe's: P made token 1; D only decodes.
        """
        incoming, req.incoming = req.incoming, None
        if incoming is not None:  # the blocks reserved here become the request's own
            req.blocks, req.block_ids = incoming.blocks, incoming.block_ids
            req.num_cached_blocks, req.cache_keys = incoming.num_cached_blocks, incoming.cache_keys
        req.high_water = req.prompt_tokens
        req.num_computed = req.prompt_tokens - (1 if req.remote_decode == "vllm" else 0)
        req.sync_phase()
        req.state = RequestState.WAITING
        req.kv_holding = True
        req.wait_kind, req.wait_since = "queued", now
        i = 0
        while i < len(self.waiting) and self.waiting[i].kv_holding:
            i += 1
        self.waiting.insert(i, req)

    def reserve_transfer(self, req: Request) -> bool:
        """Reserve blocks here for an incoming prompt's KV (vLLM reserves D's blocks before the
        read). The prefill worker still holds its own copy until the transfer ends, so the
        reservation is kept apart (`req.incoming`) until `add_prefilled`."""
        incoming = Request(req.spec)
        if not self.kv.grow(incoming, self.policy.transfer_tokens(req)):
            return False
        incoming.workers.append(self.name)  # whose blocks these are
        req.incoming = incoming
        return True

    def reject(self, req: Request, reason: str) -> None:
        """Drop a waiting request the policy can never serve (it holds no KV here)."""
        self.waiting.remove(req)
        self.recorder.segment(req, self.name, req.wait_kind, req.wait_since, self._now)
        req.state = RequestState.REJECTED
        req.reject_reason = reason

    def abort(self, req: Request, now: float, reason: str) -> None:
        """Take a request that will not finish (its client left) out of this engine and free
        what it holds here; it ends as rejected with `reason`."""
        if req in self.waiting:
            self.waiting.remove(req)
            self.recorder.segment(req, self.name, req.wait_kind, req.wait_since, now)
            if req.kv_holding:
                self.kv.free(req, gone=True)
        elif req in self.running:
            self.running.remove(req)
            self.kv.free(req, gone=True)
        elif req in self.swapped:
            self.swapped.remove(req)
            self.swap_used_tokens -= req.swapped_tokens
            req.swapped_tokens = 0
        if req.incoming is not None and req.incoming.workers == [self.name]:
            self.kv.free(req.incoming, gone=True)  # reserved here for a transfer never made
            req.incoming = None
        req.state = RequestState.REJECTED
        req.reject_reason = reason

    def release(self, req: Request) -> None:
        """Free the blocks a request held here after it left (its KV was read by a D worker)."""
        self.kv.free(req, gone=True)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self.swapped)

    @property
    def load(self) -> int:
        """Requests this worker still owes work to (used by routers)."""
        return len(self.waiting) + len(self.running) + len(self.swapped)

    def schedule(self, now: float) -> Batch | None:
        """Ask the policy for the next step. None when nothing can run now.

        A step may preempt every running request and schedule nothing: vLLM admits nobody in a
        step that preempted, and its engine simply asks again for the next step. Then
        `retry_now` is True: the driver must call again at once instead of waiting for an event.
        """
        self._now = now
        plan = StepPlan()
        if self.swapped and not self.policy.schedules_swap_in:
            self._swap_in(plan)
        self.policy.schedule(self, plan, now)
        self.retry_now = not plan.items and plan.preempted > 0
        if not plan.items:
            return None
        return self.batch_of(plan)

    def batch_of(self, plan: StepPlan) -> Batch:
        """The Batch of a step whose plan is complete (and not empty)."""
        items, chunks = [], []
        num_decodes = decode_ctx = 0
        spec = plan.spec
        for req, n in plan.items.items():
            is_decode = n == 1 and req.is_decoding
            items.append((req, n, req.num_computed, is_decode))
            if is_decode:
                num_decodes += 1
                decode_ctx += req.num_computed
            elif spec and req in spec:  # a verify: logits at every one of its positions
                chunks.append((n, req.num_computed, n))
            else:
                samples = req.num_computed + n == req.num_tokens
                chunks.append((n, req.num_computed, samples))
        items_set = plan.items
        if len(items_set) == len(self.running):
            stalled = []  # everybody runs (the common case): no need to look
        else:
            stalled = [r for r in self.running if r not in items_set]
        return Batch(
            self.name,
            self.num_steps,
            items,
            chunks,
            num_decodes,
            decode_ctx,
            plan.swap_in_tokens,
            plan.swap_out_tokens,
            plan.preempted,
            stalled,
            spec,
            plan.padded,
        )

    def complete(self, batch: Batch, start_s: float, end_s: float, timing: StepTiming) -> list:
        """Apply a finished step: KV grows, tokens are emitted, requests finish or hand off.

        Returns the requests that finished their prefill here and must move to a decode worker.
        """
        rec, step, add = self.recorder, batch.step, self.recorder.add
        wid = self._worker_code
        slowed = SLOWED if batch.prefill_chunks else 0  # decodes sharing a step with a prefill
        handoffs, hands_off = [], self.hands_off
        speculator, spec = self.speculator, batch.spec
        for req, n, offset, is_decode in batch.items:
            if spec and req in spec:  # a verify step: drafts accepted, rejected, rolled back
                settle_verify(self, req, n, spec[req], req in batch.padded, start_s, end_s, step)
                if req.num_generated >= req.output_tokens:
                    self._finish(req, end_s)
                else:
                    req.spec_drafts = speculator.propose(req)
                req.spec_samples += 1
                continue
            if is_decode:
                if req.pending_cached:  # resumed: the cache held all but its newest token
                    add(req, wid, CACHED, start_s, end_s, req.pending_cached, 0, step)
                    req.pending_cached = 0
                add(req, wid, DECODE, start_s, end_s, n, slowed, step)  # extends its stretch
            else:
                self.book_chunk(req, n, offset, start_s, end_s, step)
            req.num_computed += n
            if req.num_computed > req.high_water:
                req.high_water = req.num_computed
            if req.num_computed != req.prompt_tokens + req.num_generated:
                req.sync_phase()  # a chunk that samples nothing (a recompute may end as decode)
                continue
            # A prefill worker finished this prompt. vLLM: P ran with max_tokens=1 and its token
            # is dropped (D samples token 1); DistServe: P's token is token 1.
            if hands_off and (
                req.remote_decode == "vllm"
                or (req.remote_decode == "distserve" and req.output_tokens > 1)
            ):
                if req.remote_decode == "distserve":
                    req.num_generated = 1
                    req.token_times.append(end_s)
                    req.first_token_s = end_s
                self.running.remove(req)  # keeps its blocks until D has read them
                req.state = RequestState.TRANSFERRING
                handoffs.append(req)
                continue
            req.num_generated += 1  # the model samples a token at the end of this step
            req.is_decoding = True  # (until it finishes or is preempted)
            req.token_times.append(end_s)
            if req.num_generated == 1:
                req.first_token_s = end_s
            if req.num_generated >= req.output_tokens:
                self._finish(req, end_s)
            elif speculator is not None:  # the drafter proposes for its next step
                req.spec_drafts = speculator.propose(req)
            if speculator is not None:
                req.spec_samples += 1
        for req in batch.stalled:
            if req.state is RequestState.RUNNING:
                add(req, wid, STALL, start_s, end_s, 0, 0, step)
        rec.step(
            (
                self.name,
                step,
                start_s,
                end_s,
                batch.prefill_tokens,
                batch.num_decodes,
                len(batch.items),
                len(batch.prefill_chunks),
                self.kv.used_tokens,
                self.kv.capacity_tokens,
                timing.compute_s,
                timing.memory_s,
                timing.overhead_s,
                timing.comm_s,
                timing.swap_s,
                batch.preempted,
            )
        )
        self.num_steps += 1
        return handoffs

    def book_chunk(
        self, req: Request, n: int, offset: int, start_s: float, end_s: float, step: int
    ) -> None:
        """The trace of a prefill chunk of `n` tokens at `offset`: the prompt's start the prefix
        cache gave it (once), then the chunk (a recompute if its KV had been computed before)."""
        add, wid = self.recorder.add, self._worker_code
        if req.pending_cached:
            add(req, wid, CACHED, start_s, end_s, req.pending_cached, 0, step)
            req.pending_cached = 0
        flags = RECOMPUTE if offset < req.high_water else 0
        add(req, wid, PREFILL, start_s, end_s, n, flags, step)

    def complete_prompt(
        self, req: Request, n: int, offset: int, start_s: float, end_s: float, step: int
    ) -> None:
        """`complete` for one chunk that ends its prompt here and samples a token that does not
        finish the request (what a run of decode steps admits: sim/fastforward/admission.py)."""
        self.book_chunk(req, n, offset, start_s, end_s, step)
        req.num_computed += n
        if req.num_computed > req.high_water:
            req.high_water = req.num_computed
        req.num_generated += 1  # as in complete: the token sampled at the step's end
        req.is_decoding = True
        req.token_times.append(end_s)
        if req.num_generated == 1:
            req.first_token_s = end_s

    # ---- what policies call -----------------------------------------------------------------

    def admit(self, req: Request) -> None:
        """Move a waiting request into the running batch (its wait ends now)."""
        if self.waiting and self.waiting[0] is req:
            self.waiting.popleft()
        else:
            self.waiting.remove(req)
        self.recorder.segment(req, self.name, req.wait_kind, req.wait_since, self._now)
        req.state = RequestState.RUNNING
        req.admit_seq = self._next_admit()
        self.running.append(req)

    def admit_with_cache(
        self,
        req: Request,
        tokens: int,
        hits=(),
        full_sequence_must_fit: bool = False,
        lookahead: int = 0,
    ) -> bool:
        """Admit `req` with `tokens` to compute this step after the prefix-cache `hits` (block
        ids from `kv.lookup`), with `lookahead` KV slots past them for a drafter. False, with
        nothing changed, if its blocks do not fit."""
        hit_tokens = len(hits) * self.kv.block_size
        if not self.kv.allocate_slots(req, tokens, hits, full_sequence_must_fit, lookahead):
            return False
        req.sync_phase()  # a resumed request whose cache hit leaves one token is a decode
        if hit_tokens:
            req.pending_cached = hit_tokens
            if req.preemptions == 0:
                req.cached_tokens = hit_tokens  # what the cache saved its first prefill
        self.admit(req)
        return True

    def allocate(self, req: Request, tokens: int) -> bool:
        """Blocks for `tokens` more tokens of `req`; False if memory is short (nothing changes)."""
        return self.kv.grow(req, req.num_computed + tokens)

    def reserve_total(self, req: Request, total_tokens: int) -> bool:
        """Blocks for a request's whole life at once (static batching)."""
        return self.kv.grow(req, total_tokens)

    def allocate_or_preempt(
        self, req: Request, tokens: int, plan: StepPlan, lookahead: int = 0
    ) -> bool:
        """Like `allocate`, preempting victims until it fits. False if `req` itself was preempted.

        This is vLLM's rule: a RUNNING request that cannot grow evicts the last-admitted request
        (or the policy's lowest-priority one); if that is itself, it stops. `lookahead`: KV slots
        a drafter needs past the step's tokens (vLLM's `num_lookahead_tokens`).
        """
        kv = self.kv
        total = req.num_computed + tokens
        if total + lookahead <= req.blocks * kv.block_size and (
            not kv.caching or total // kv.block_size <= req.num_cached_blocks
        ):
            return True  # fast path: its last block has room, and fills no block to cache
        while not kv.grow(req, total, lookahead):
            victim = self.policy.pick_victim(self.running)
            self.preempt(victim, plan)
            if victim is req:
                return False
        return True

    def preempt(self, victim: Request, plan: StepPlan) -> None:
        """Evict a running request: swap its KV to host memory, or drop it for recompute."""
        if victim in plan.items:
            plan.remove(victim)  # its tokens go back to the step's budget (vLLM V1 does this)
        self.running.remove(victim)
        victim.spec_drafts = 0  # _preempt_request drops its drafts (scheduler.py 1823)
        victim.preemptions += 1
        plan.preempted += 1
        tokens = victim.num_computed
        if (
            self.preemption_mode == "swap"
            and self.swap_used_tokens + tokens <= self.swap_capacity_tokens
        ):
            self.swap_used_tokens += tokens
            victim.swapped_tokens = tokens
            plan.swap_out_tokens += tokens
            victim.state = RequestState.SWAPPED
            self.swapped.append(victim)
        else:  # recompute (also the fallback when host swap space is full)
            victim.num_computed = 0
            victim.is_decoding = False
            victim.kv_holding = False
            victim.state = RequestState.WAITING
            if self.policy.requeue_preempted_first:
                # First in line to come back (vLLM's prepend_request), but behind requests
                # whose prompt KV already arrived from a prefill worker: vLLM keeps those in a
                # queue of their own that is drained first (they need no new blocks).
                i = 0
                while i < len(self.waiting) and self.waiting[i].kv_holding:
                    i += 1
                self.waiting.insert(i, victim)
            else:
                self.waiting.append(victim)  # SGLang: back of the line
        self.kv.free(victim)
        victim.wait_kind, victim.wait_since = "preempted", self._now

    # ---- internals --------------------------------------------------------------------------

    def swap_in(self, req: Request, plan: StepPlan) -> None:
        """Bring a swapped request's KV back (its blocks are the caller's business); the policy
        puts it into `running` where its engine does."""
        self.swapped.remove(req)
        self.swap_used_tokens -= req.swapped_tokens
        plan.swap_in_tokens += req.swapped_tokens
        req.swapped_tokens = 0
        self.recorder.segment(req, self.name, "preempted", req.wait_since, self._now)
        req.state = RequestState.RUNNING
        req.admit_seq = self._next_admit()

    def _swap_in(self, plan: StepPlan) -> None:
        """Swapped requests come back first, as soon as their KV fits again (for a policy that
        does not schedule swap-ins itself)."""
        while self.swapped:
            req = self.swapped[0]
            if not self.kv.grow(req, req.swapped_tokens + 1):
                break
            self.swap_in(req, plan)
            self.running.append(req)

    def _finish(self, req: Request, now: float) -> None:
        self.running.remove(req)
        self.kv.free(req, gone=True)
        req.state = RequestState.FINISHED
        req.finish_s = now

    def capacity_reason(self, tokens: int) -> str:
        if self.kv.blocks_for(tokens) > self.kv.num_blocks:
            return (
                f"needs {tokens} tokens of KV cache but {self.name} holds only "
                f"{self.kv.capacity_tokens}: raise kv_capacity_tokens or tensor_parallel"
            )
        return ""

    def _next_admit(self) -> int:
        self._admit_counter += 1
        return self._admit_counter
