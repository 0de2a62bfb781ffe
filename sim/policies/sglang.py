"""SGLang's default scheduler (sglang 0.5.23): prefill batches first, decodes wait (C5, C7, C9).

Mirrors python/sglang/srt/managers/scheduler.py and schedule_policy.py of the sglang 0.5.23
wheel:
- `Scheduler.get_next_batch_to_run` (scheduler.py 3894-4020): try to form a new PREFILL batch
  (`get_new_batch_prefill`); "Run prefill first if possible"; only when none can be formed run a
  DECODE batch of every running request (`update_running_batch`). Prefill and decode are separate
  forward passes, so running streams STALL during every prefill step: unlike vLLM V1, the
  decodes do not ride along with the chunks of a long prompt.
- `_get_new_batch_prefill_raw` (4079-4330) with a `PrefillAdder` (schedule_policy.py 607-1706):
  the one unfinished chunked request continues first (`add_chunked_req`), then waiting requests
  in order (`fcfs`, or `lpm`: longest cached prefix first while the queue holds at most 128).
  Each takes its uncached tokens while `chunked_prefill_size` (per batch) and
  `max_prefill_tokens` (per batch) last; one that does not fit whole is cut at the chunk budget
  and becomes the new chunked request (only one at a time). `max_running_requests` caps the
  running plus new requests (`get_num_allocatable_reqs`, 4027-4050). A request that does not
  fit (NO_TOKEN), or a full batch, sets `running_batch.batch_is_full`: no batch of new requests
  is formed again until it is cleared (below).
- KV admission (`add_one_req`, schedule_policy.py 1399-1412, prefill_budget.py 114-130 and
  156-168): a new request is admitted only while its uncached prompt + min(max_new_tokens, 4096)
  + one page is STRICTLY less than what remains, and each admitted one charges its page-ceiled
  extend + one page + its output. What remains starts at the free KV (free + evictable) less the
  mixed decode tokens less every running request's remaining output (at most 4096) times a
  ratio (`_get_running_request_total_token_offset` 785-794). For a fixed-length request
  (`ignore_eos`, as all of PD Lab's are) 0.5.23 takes 1.0: it reserves the rest in full. Up to
  0.5.8 (0.5.6.post2 schedule_policy.py 372-379) every request used `new_token_ratio`, SGLang's
  guess of how much of the rest will really be generated (`reserve_fixed_output=False`, which
  the replays of those releases' measurements set, and which equals 0.5.23 serving requests
  without ignore_eos): it starts at 0.7 (x
  `--schedule-conservativeness`), loses (0.7 - 0.098) / 600 at every decode batch that fits,
  and is reset when the server idles (0.5.23: scheduler_components/new_token_ratio_tracker.py;
  environ.py 646-649, SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
  SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS, SGLANG_RETRACT_DECODE_STEPS). So a long-running batch
  admits more and more until memory runs out, then retracts.
- With the radix cache off, fixed-length requests go through `add_one_req_ignore_eos`
  (1241-1390): the page-ceiled prompt + a page must fit now, and the PEAK of the future demand
  must fit (requests sorted by output left; each finish frees its tokens); it cuts chunks at
  any token and has no input cap on a batch's later prompts.
- Chunks (1636-1671): a request cut by the chunk budget ends on a page boundary of its prompt
  (page_size = PD Lab's KV block size); budgets are charged page-ceiled tokens. A continuing
  chunk (`add_chunked_req` 1140-1215) takes min(chunk budget, KV left) and is charged too.
- Radix cache: the tree is updated after a batch runs, so requests of one batch never hit each
  other's blocks; a retracted request's generated tokens are freed, not inserted.
- `lpm` (calc_priority, 213-252, 346-451): longest cached prefix first; a request with at most
  32 cached tokens that shares 32 or more with an earlier waiting one goes last.
- `--enable-mixed-chunk` (off by default): the running decodes join the prefill batch, each
  taking one token of the chunk budget (`num_mixed_decode_tokens`).
- The KV pool (not a knob here: the engine's `mem_utilization`): SGLang's default
  `--mem-fraction-static` keeps activations and CUDA graphs their share of memory
  (`sglang_knobs.sglang_mem_fraction_static`, 0.82-0.84 on an H100 where vLLM's default is 0.9);
  bench/fidelity_aiconfigurator.py replays SGLang runs with it.
- When a decode batch's next tokens do not fit (`update_running_batch` -> `check_decode_mem`),
  `retract_decode` (schedule_batch.py 3451-3540) sends back requests with the fewest output
  tokens (then the longest prompt) to the END of the waiting queue, to be recomputed: at least
  one, then more only while the next decode of the rest still does not fit (one always stays),
  and sets new_token_ratio to min(1, (their output tokens + 20 each) / (their max_new_tokens +
  1)) (SGLANG_RETRACT_DECODE_STEPS = 20 is only in that estimate).
- `running_batch.batch_is_full` (scheduler.py 3945-3968, 4093-4125, 4222-4284, 4408-4410): set
  by a full batch (max_running_requests) or NO_TOKEN when something can be served; cleared when
  a running request leaves, when the running batch is empty, and when the last prefill (or
  mixed) batch becomes the running batch because that was empty.

Proven: tests/test_sglang_differential.py runs SGLang 0.5.23's real Scheduler (.venv-sglang,
GPU kernels stubbed) and this policy on the same workloads (staggered arrivals, chunking,
mixed chunk, KV pressure with retraction, radix cache on and off, lpm and fcfs, page size 1
and 16, max_running_requests) and compares every step. Still differing (marked there): one
workload with new_token_ratio admission right after a retraction (requests without
ignore_eos, random-105). The overlap event loop (SGLang's server default: a request that
arrives during a busy step joins the batch after next) is the knob `overlap_schedule`, off by
default here: the differential test drives the real scheduler's normal loop, and a lesson's
step shows the scheduler's own decision; the replays of real servers turn it on. Not
modelled: EOS before max_new_tokens, prompt
sharing other than prefix groups in the lpm in-batch check (Mooncake hash ids), and the waiting
queue keeping lpm's order between steps (PD Lab re-sorts from arrival order: ties may differ).
"""

from __future__ import annotations

import math

from sim.core.request import RequestState
from sim.policies import register
from sim.policies.base import Policy
from sim.policies.sglang_knobs import SglangKnobs

CLIP_MAX_NEW_TOKENS = 4096  # schedule_policy.py line 89: output tokens reserved at most
# In-batch prefix caching (schedule_policy.py 108-119): IN_BATCH_PREFIX_CACHING_CHECK_THRESHOLD
# and IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD, both 32 tokens. PD Lab knows what two
# prompts share only through their prefix group: the shared length is the shorter group prefix.
IN_BATCH_PREFIX_CHECK = 32
IN_BATCH_PREFIX_DEPRIORITIZE = 32
LPM_MAX_QUEUE = 128  # schedule_policy.py: lpm falls back to fcfs beyond this many waiting
# How much of a running request's remaining output the KV check reserves: `new_token_ratio`
# (sglang/srt/environ.py: SGLANG_INIT_NEW_TOKEN_RATIO 0.7, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
# 0.14, SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS 600, SGLANG_RETRACT_DECODE_STEPS 20; the same
# figures as global_config.py's default_init_new_token_ratio & co. in the 0.4/0.5 releases).
INIT_NEW_TOKEN_RATIO = 0.7  # times --schedule-conservativeness (1.0), at most 1
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # the floor: 0.7 x 0.14 = 0.098
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # decode batches from the start value to the floor
IGNORE_EOS_RESERVE_TOKENS = 1  # schedule_policy.py line 122
RETRACT_DECODE_STEPS = 20  # only in the ratio estimated after a retraction


@register
class Sglang(Policy):
    """SGLang: prefill batches whenever one can be formed; decode batches otherwise."""

    name = "sglang"
    Knobs = SglangKnobs
    requeue_preempted_first = False  # retracted requests join the END of the waiting queue
    kernel_engine = "sglang"  # sgl-kernel/DeepGEMM GEMMs, its FA3 build, its fused MoE
    mirrors = "SGLang scheduler (sglang 0.5.23, python/sglang/srt/managers/scheduler.py)"

    def __init__(self, knobs=None) -> None:
        super().__init__(knobs)
        self.chunked = None  # the one request whose prompt is being prefilled in chunks
        # new_token_ratio (scheduler_components/new_token_ratio_tracker.py, NewTokenRatioTracker;
        # the same in scheduler.py __init__ of earlier releases): starts at 0.7 x
        # schedule_conservativeness, loses (start - floor) / 600 at every decode batch that
        # fits (update_running_batch -> decay_step), jumps to an estimate after a retraction,
        # and goes back to the start when the server idles (self_check_during_idle).
        self.ratio_init = min(INIT_NEW_TOKEN_RATIO * self.knobs.schedule_conservativeness, 1.0)
        self.ratio_min = min(self.ratio_init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        self.ratio_decay = (self.ratio_init - self.ratio_min) / NEW_TOKEN_RATIO_DECAY_STEPS
        self._anchor = (self.ratio_init, 0, 0)  # (ratio, engine step, our prefill steps) then
        self._prefill_steps = 0  # prefill (extend or mixed) batches this policy formed
        # running_batch.batch_is_full (scheduler.py _get_new_batch_prefill_raw): set when a
        # request does not fit (NO_TOKEN) or the batch holds max_running_requests; while set,
        # get_new_batch_prefill forms no batch of new requests (the chunked one goes on). It is
        # cleared only when the running batch loses a request, finished or retracted
        # (update_running_batch: `if batch.batch_size() < initial_bs: batch_is_full = False`;
        # get_next_batch_to_run does the same for the last prefill batch). So a request turned
        # away for memory is not retried at every step as the ratio decays: at the next finish.
        self.batch_is_full = False
        self._running_ids: set[int] = set()  # who was running after the last step formed
        self._waited: set[int] = set()  # who was waiting after the last step formed
        self._busy = False  # the last step formed a batch: the GPU ran until now
        self._last_prefill_merged = False  # the last step's prefill batch joins the running one
        self._running_before_merge = False  # ... and the running batch was not empty then

    def new_token_ratio(self, engine) -> float:
        """The ratio now: decayed once per decode batch since the last reset or retraction.

        Counted from the engine's step counter, so that decode steps taken at once
        (sim/fastforward/steps.py) decay it too: steps since then minus the prefill ones formed
        here.
        """
        ratio, step, prefills = self._anchor
        decodes = max(0, (engine.num_steps - step) - (self._prefill_steps - prefills))
        return max(ratio - self.ratio_decay * decodes, self.ratio_min)

    def _set_ratio(self, engine, ratio: float, after_this_step: bool = False) -> None:
        self._anchor = (ratio, engine.num_steps + after_this_step, self._prefill_steps)

    def pick_victim(self, running):
        # retract_decode: the fewest output tokens, then the longest prompt, goes first.
        return min(running, key=lambda r: (r.num_generated, -r.prompt_tokens, -r.admit_seq))

    def _order(self, engine):
        waiting = list(engine.waiting)
        holding = [r for r in waiting if r.kv_holding]
        rest = [r for r in waiting if not r.kv_holding]
        if (
            self.knobs.schedule_policy == "lpm"
            and self.knobs.enable_prefix_caching
            and len(rest) <= LPM_MAX_QUEUE
        ):
            # calc_priority -> _compute_prefix_matches, _sort_by_longest_prefix
            # (schedule_policy.py 213-252, 346-396, 441-451): longest cached prefix first; a
            # request whose cached prefix is at most 32 tokens but which shares at least 32
            # tokens with an earlier waiting request (a radix tree of the waiting queue) goes
            # last, so that one of them computes the prefix and the others hit it later.
            block = engine.kv.block_size
            cached = {id(r): len(engine.kv.lookup(r)) * block for r in rest}
            deferred: set[int] = set()
            seen: dict[str, int] = {}  # prefix group -> longest prefix inserted so far
            for r in rest:
                if cached[id(r)] > IN_BATCH_PREFIX_CHECK:
                    continue
                shared = min(seen.get(r.spec.prefix_group, 0), r.spec.prefix_tokens)
                if r.spec.prefix_group and shared >= IN_BATCH_PREFIX_DEPRIORITIZE:
                    deferred.add(id(r))
                elif r.spec.prefix_group:
                    group = r.spec.prefix_group
                    seen[group] = max(seen.get(group, 0), r.spec.prefix_tokens)
            rest.sort(key=lambda r: math.inf if id(r) in deferred else -cached[id(r)])
        return holding + rest

    def schedule(self, engine, plan, now):
        k, kv = self.knobs, engine.kv
        if self.chunked is not None and self.chunked.state is not RequestState.RUNNING:
            self.chunked = None  # retracted meanwhile
        # A disaggregated decode worker takes handed-over requests (KV already transferred)
        # straight into its running batch, as SGLang's decode-mode scheduler does: they need one
        # token, not a prefill batch that would make the other streams wait.
        while engine.waiting and engine.waiting[0].kv_holding and engine.waiting[0].remaining == 1:
            if k.max_running_requests and len(engine.running) >= k.max_running_requests:
                break
            engine.admit(engine.waiting[0])
        now_running = {id(r) for r in engine.running}
        decodes = [r for r in engine.running if r is not self.chunked]
        # running_batch.batch_is_full is cleared (scheduler.py get_next_batch_to_run 3945-3968,
        # _get_new_batch_prefill_raw 4093-4096) when a running request left (filter_batch), when
        # the running batch is empty, and when the last step was a prefill batch merged into an
        # EMPTY running batch: running_batch becomes that batch, whose flag is False. A mixed
        # step empties the running batch (4408-4410), so it loses the flag the same way.
        if (
            not self._running_ids <= now_running
            or not decodes
            or (self._last_prefill_merged and not self._running_before_merge)
        ):
            self.batch_is_full = False
        if (
            not engine.running
            and self.chunked is None
            and not any(id(r) in self._waited for r in engine.waiting)
        ):
            # Nothing running and nothing left waiting from before: between the last finish and
            # this arrival the real server idled (the clients' round trip at least), and a fully
            # idle SGLang resets the ratio (scheduler.py on_idle 5241-5320, only when
            # is_fully_idle: requests still waiting keep it).
            self._set_ratio(engine, self.ratio_init)
        mixed = len(decodes) if k.enable_mixed_chunk else 0
        chunk = k.chunked_prefill_size if k.chunked_prefill_size > 0 else None
        # PrefillAdder.__init__ (schedule_policy.py 633-647): the mixed decode tokens come off
        # the chunk and input budgets AND start the KV offset (prefill_budget.py 72-73,
        # total_offset = num_mixed_decode_tokens).
        rem_chunk = None if chunk is None else chunk - mixed
        rem_input = k.max_prefill_tokens - mixed
        # KV tokens free for new work after the running requests' future output: each reserves
        # its remaining output (at most 4096) TIMES a ratio (schedule_policy.py 785-794,
        # PrefillAdder._get_running_request_total_token_offset). In sglang 0.5.23 a fixed-length
        # request's ratio is 1.0, and every PD Lab request has a fixed length
        # (`reserve_fixed_output`); releases up to 0.5.8 used new_token_ratio for all of them.
        full = k.reserve_fixed_output or not k.enable_prefix_caching
        ratio = 1.0 if full else self.new_token_ratio(engine)
        block = kv.block_size  # = SGLang's page_size
        rem_total = (
            kv.free_blocks * block
            - mixed
            - ratio
            * sum(min(r.output_tokens - r.num_generated, CLIP_MAX_NEW_TOKENS) for r in decodes)
        )

        # remaining_current (prefill_budget.py 104-106): the same without the output reserves.
        rem_current = kv.free_blocks * block - mixed
        self._kv_block, self._eos_states = block, None

        def paged(n: int) -> int:  # ceil_paged_tokens (schedule_policy.py 860-861)
            return -(-n // block) * block

        new = []
        fresh: set[int] = set()  # keys of the blocks this batch computes (not cached before it)
        prefill_reqs = 0  # requests of this prefill batch that join the running batch after it

        if self.chunked is not None:  # add_chunked_req (schedule_policy.py 1140-1215)
            req = self.chunked
            # available_chunk_tokens (prefill_budget.py 142-145): at most the KV left, but a
            # continuation always makes progress.
            avail = rem_chunk if rem_chunk is not None else req.remaining
            if rem_total > 0:
                avail = min(avail, int(rem_total))
            n = min(req.remaining, avail)
            start = req.num_computed
            if engine.allocate_or_preempt(req, n, plan):
                plan.add(req, n)
                new.append(req)
                if k.enable_prefix_caching:
                    fresh.update(req.spec.block_keys(start // block, (start + n) // block, block))
                finishing = n == req.remaining
                # _update_prefill_budget (schedule_policy.py 927-960) and
                # PrefillBudget.reserve (prefill_budget.py 156-168): the page-ceiled extend plus
                # one page, and the output when this chunk finishes the prompt.
                rem_input -= paged(n)
                if rem_chunk is not None:
                    rem_chunk -= paged(n)
                rem_total -= paged(n) + block
                rem_current -= paged(n) + block
                if finishing:
                    self.chunked = None
                    prefill_reqs += 1
                    rem_total -= min(req.output_tokens, CLIP_MAX_NEW_TOKENS)

        # The overlap event loop (scheduler.py event_loop_overlap; 0.5.6.post2 1005-1063): the
        # batch that runs next was formed while the last one ran, from the requests received
        # before it started, so a request that arrived during a busy step joins the batch after
        # next: one step later than in the normal loop, when that next batch holds anything
        # (running decodes, a chunked prompt, requests received before). Otherwise, and on an
        # idle server (the last step formed no batch), the loop receives and launches at once.
        # Not modelled: a request that finished in the last step decodes once more in the
        # next, wasted; so when the last requests just finished, the new ones go at once
        # instead of after that one short decode step.
        late = (
            k.overlap_schedule
            and self._busy
            and bool(decodes or self.chunked or any(id(r) in self._waited for r in engine.waiting))
        )
        for req in [] if self.batch_is_full else self._order(engine):
            if late and id(req) not in self._waited:
                continue  # not received when the running batch was formed
            # budget_state (schedule_policy.py 871-893): NO_TOKEN before OTHER.
            if rem_total <= 0:
                break  # NO_TOKEN from budget_state: the loop just stops (4262-4264)
            if rem_input <= 0 or (rem_chunk is not None and rem_chunk <= 0):
                break  # budget_state: OTHER
            running = (
                len(decodes) + len(new) + (self.chunked is not None and self.chunked not in new)
            )
            if k.max_running_requests and running >= k.max_running_requests:
                self.batch_is_full = True  # the batch is full (scheduler.py 4222-4232)
                break
            hits = kv.lookup(req) if k.enable_prefix_caching and req.num_computed == 0 else []
            if hits:
                hits = self._hits_before_this_batch(req, hits, fresh, block)
            prefix = req.num_computed + len(hits) * block
            extend = req.num_tokens - prefix
            max_new = min(req.output_tokens - req.num_generated, CLIP_MAX_NEW_TOKENS)
            if not k.enable_prefix_caching:
                # Radix cache off (PD Lab's requests are all ignore_eos): add_one_req_ignore_eos
                # (schedule_policy.py 1241-1390).
                verdict = self._ignore_eos_fits(req, extend, decodes, new, rem_current, rem_total)
                if not verdict:
                    self.batch_is_full = bool(new) or bool(decodes)  # NO_TOKEN
                    break
                n, chunked = extend, False
                max_new = min(req.output_tokens, CLIP_MAX_NEW_TOKENS)
                if rem_chunk is not None and extend > rem_chunk:
                    if self.chunked is not None:
                        break  # only one chunked request at a time
                    n, chunked = rem_chunk, True  # this path cuts anywhere (1352-1358)
            else:
                # add_one_req (schedule_policy.py 1404-1412) -> check_prefill (prefill_budget.py
                # 114-130): admitted only while extend + max_new + one page is STRICTLY less
                # than what remains.
                if not extend + max_new + block < rem_total:
                    # NO_TOKEN (scheduler.py 4280-4284): full only if something can be served.
                    self.batch_is_full = bool(new) or bool(decodes)
                    break
                # Without chunking only the first prompt may reach the input cap (1636-1641).
                if rem_chunk is None and new and paged(extend) >= rem_input:
                    break
                n, chunked = extend, False
                if rem_chunk is not None and paged(extend) > rem_chunk:
                    if self.chunked is not None:
                        break  # only one chunked request at a time
                    # Page-aligned cut (schedule_policy.py 1664-1671): the chunk ends on a
                    # page boundary of the whole prompt.
                    n = rem_chunk // block * block
                    n = (prefix + n) // block * block - prefix
                    if n <= 0:
                        break  # OTHER
                    chunked = True
            if not engine.admit_with_cache(req, n, hits):
                self.batch_is_full = True  # its blocks do not fit: NO_TOKEN
                break
            plan.add(req, n)
            new.append(req)
            if k.enable_prefix_caching:
                fresh.update(req.spec.block_keys(prefix // block, (prefix + n) // block, block))
            rem_input -= paged(n)
            if rem_chunk is not None:
                rem_chunk -= paged(n)
            rem_total -= paged(n) + block + (0 if chunked else max_new)
            rem_current -= paged(n) + block
            if chunked:
                self.chunked = req
            else:
                prefill_reqs += 1

        self._running_ids = {id(r) for r in engine.running}
        self._waited = {id(r) for r in engine.waiting}
        self._busy = bool(plan.items) or bool(decodes)
        # What get_next_batch_to_run's merge will see at the next step.
        self._last_prefill_merged = bool(plan.items) and (
            prefill_reqs > 0 or (k.enable_mixed_chunk and bool(decodes))
        )
        self._running_before_merge = bool(decodes) and not (plan.items and k.enable_mixed_chunk)
        if plan.items:
            self._prefill_steps += 1  # no decay: update_running_batch runs for decode batches
            if k.enable_mixed_chunk:  # mix_with_running: decodes join the prefill batch
                self._decode(engine, plan, decodes)
            return  # a prefill (extend) batch: running decodes wait
        self._retract_if_full(engine, plan, decodes)
        self._decode(engine, plan, decodes)

    @staticmethod
    def _hits_before_this_batch(req, hits, fresh, block):
        """The radix tree is updated after a batch runs (cache_unfinished_req in
        process_batch_result_prefill, scheduler_output_processor_mixin.py), so a request never
        hits blocks that another request of the same batch computes: cut the hit at the first
        such block. A retracted request's generated tokens were freed without being inserted
        (ScheduleBatch.retract_decode -> release_kv_cache(is_insert=False), schedule_batch.py
        3451-3540): it hits its prompt at most."""
        n = len(hits)
        if req.num_generated:
            n = min(n, req.prompt_tokens // block)
        if fresh:
            keys = req.spec.block_keys(0, n, block)
            for i, key in enumerate(keys):
                if key in fresh:
                    n = i
                    break
        return hits[:n]

    def _ignore_eos_fits(self, req, extend, decodes, new, rem_current, rem_total) -> bool:
        """add_one_req_ignore_eos (schedule_policy.py 1241-1305), the radix cache off: the
        prompt (page-ceiled, plus a page) must fit what remains now, and the PEAK of the future
        demand must fit: requests sorted by output left, each finishing frees its tokens, and at
        every finish the rest must keep more than 1 token each (IGNORE_EOS_RESERVE_TOKENS).
        The states are this request first, then the running batch, then this batch's requests,
        sorted by output left (stable); a later request of the same batch is inserted before the
        first state with as much output left or more, or else before the LAST one (1274-1278:
        the loop's index stops at the last item)."""
        block = self._kv_block
        paged_input = -(-extend // block) * block + block
        if paged_input > min(rem_current, rem_total):
            return False

        def state(r):
            left = r.output_tokens - r.num_generated
            return None if left <= 0 else (left, r.prompt_tokens + r.num_generated)

        # The list is built at the first add_one_req_ignore_eos call of the batch: that call's
        # request, the running batch, then what the adder already took (a chunk continuation).
        if self._eos_states is None:
            states = [x for x in (state(r) for r in [req, *decodes, *new]) if x]
            states.sort(key=lambda x: x[0])
        else:
            states = list(self._eos_states)
            mine = state(req)
            if mine:
                i = 0
                for i in range(len(states)):
                    if mine[0] <= states[i][0]:
                        break
                states.insert(i, mine)
        self._eos_states = states
        cur = rem_current - paged_input
        freed = 0
        for i, (left, occupied) in enumerate(states):
            bs = len(states) - i
            if cur + freed - left * bs <= IGNORE_EOS_RESERVE_TOKENS * bs:
                return False
            freed += occupied
        return True

    def _retract_if_full(self, engine, plan, decodes):
        """update_running_batch: when the next token of every running request does not fit
        (check_decode_mem), retract_decode (schedule_batch.py) sends requests back, fewest output
        tokens (then longest prompt) first: one, then more while the next decode of the rest still
        does not fit (3459-3461), one always left, and sets new_token_ratio = min(1, (their output
        tokens + 20 each) / (their max_new_tokens + 1)). Otherwise the ratio decays (counted in
        `new_token_ratio`)."""
        kv = engine.kv
        live = [r for r in decodes if r.state is RequestState.RUNNING]
        if sum(kv.extra_blocks(r, r.num_computed + 1) for r in live) <= kv.free_blocks:
            return
        # retract_decode (schedule_batch.py 3451-3475): at least one goes, then more only while
        # the next decode of the rest still does not fit (check_decode_mem); one always stays.
        first = True
        while len(live) > 1 and (
            first or sum(kv.extra_blocks(r, r.num_computed + 1) for r in live) > kv.free_blocks
        ):
            first = False
            victim = self.pick_victim(live)
            live.remove(victim)
            engine.preempt(victim, plan)  # back of the waiting queue, to be recomputed
        done = sum(r.num_generated for r in live)
        total = sum(r.output_tokens for r in live)
        ratio = min(1.0, (done + RETRACT_DECODE_STEPS * len(live)) / (total + 1))
        self._set_ratio(engine, ratio, after_this_step=True)  # this batch does not decay it

    def _decode(self, engine, plan, decodes):
        for req in decodes:
            if req.state is not RequestState.RUNNING or req in plan.items:
                continue
            if engine.allocate_or_preempt(req, 1, plan):
                plan.add(req, 1)
