"""The live engine in REAL time: requests join as they arrive over HTTP, tokens leave as sampled.

This is the third driver of the one engine (README.md, "How it is built": one engine, two
clocks). The simulator's `instance_loop` lets simpy time pass for each batch; `live run` composes
measured step times in simpy's virtual time. Here nothing is composed: the wall clock is the
clock.

    HTTP handlers (asyncio thread)            engine thread (this module)
    submit() -> inbox (deque) ----------->    drain inbox: route each request to a worker
                                              for each worker: schedule(now) -> Batch
                                                run the Batch on the model (MeasuredClock)
                                                complete(batch, start, end) -> tokens
    asyncio.Queue per request  <-- call_soon_threadsafe(put_nowait, token event)

Notable features
- The SAME objects decide every batch as in `sim` and `live run`: `sim.cluster.topologies.Cluster`
  builds the workers (an `Engine` each, with the configured policy, KV blocks and trace recorder)
  and routes arrivals (`Cluster.route`: colocated, router or disaggregated);
  `live.engine.clock.MeasuredClock` runs each batch on a `ModelRunner`. Only the loop that drives
  them is new: it never lets simpy run.
- One thread drives every worker, round robin, one step at a time: on one CPU (or one GPU) the
  workers of a disaggregated topology really take turns, unlike `live run`, which gives each
  worker its own clock as if each had its own device.
- Times are `time.perf_counter()` (monotonic) in seconds since the server started, so the trace
  (`snapshot()`: the usual requests / segments / steps tables) lines up with the step times. A
  request's arrival is the moment its HTTP body was read; it may wait for the step in flight to
  end before the engine sees it, and that wait is part of its `queued` segment (as in vLLM).
- A step's `start_s` is taken just before `schedule()`, its `end_s` right after the forward pass
  and sampling, so a step's duration includes the policy's decision.
- End of sequence: a request that samples EOS (and has its `min_tokens`) gets
  `output_tokens = tokens so far` BEFORE `Engine.complete`, so the engine finishes it normally.
- Bounded: at most `max_num_requests` requests in the engine (each owns one KV slot of
  `max_model_len` tokens in the real store), `max_model_len` tokens per request, and
  `max_tokens_in_flight` prompt + output tokens summed over the requests in the engine; beyond
  them `submit` raises `LimitError` (HTTP 400 or 429; live/serve/limits.py `Admission`). The
  trace keeps the last `trace_requests` requests: when the engine is idle it folds finished
  requests into an archive and trims it.
- A client that disconnects aborts its request: it leaves the queues and frees its KV (the
  engine has no abort of its own; see `_abort`).
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence

from live.serve.limits import Admission, LimitError, ServeLimits
from live.serve.snapshot import IN_FLIGHT, concat_runs, fix_in_flight, keep_last
from sim.cluster.topologies import Cluster
from sim.cluster.worker import Worker
from sim.config import SimConfig, with_overrides
from sim.core.recorder import TraceRecorder
from sim.core.request import Request, RequestSpec, RequestState
from sim.core.trace import RunResult

ROTATE_AT = 256  # fold the current trace into the archive once this many requests (when idle)


Sink = Callable[[tuple], None]  # receives ("accepted",) ("rejected", why) ("token", id, t, end)


class Handle:
    """One request as the server tracks it between HTTP and the engine."""

    __slots__ = (
        "spec",
        "prompt_ids",
        "min_tokens",
        "ignore_eos",
        "sink",
        "req",
        "sent",
        "finish_reason",
        "started_s",
        "closed",
        "budget",
    )

    def __init__(
        self,
        spec: RequestSpec,
        prompt_ids: list[int],
        min_tokens: int,
        ignore_eos: bool,
        sink: Sink,
    ) -> None:
        self.spec, self.prompt_ids, self.sink = spec, prompt_ids, sink
        self.min_tokens, self.ignore_eos = min_tokens, ignore_eos
        self.req: Request | None = None
        self.sent = 0  # tokens handed to the sink
        self.finish_reason = ""  # stop | length | abort
        self.started_s = math.nan  # start of its first step (queue time ends)
        self.closed = False
        self.budget = spec.prompt_tokens + spec.output_tokens  # counted against tokens in flight

    @property
    def request_id(self) -> int:
        return self.spec.request_id


class ServeEngine:
    """The engine thread and everything it owns (see the module docstring)."""

    def __init__(
        self,
        config: SimConfig,
        options,
        limits: ServeLimits = ServeLimits(),
        metrics=None,
        model_name: str | None = None,
    ) -> None:
        from live.engine.clock import MeasuredClock
        from live.engine.run import load, without_prefix_cache
        from live.engine.runner import ModelRunner
        from live.engine.speculation import check_live_speculation
        from live.model.kvstore import KVStore
        from live.serve.text import codec_for

        if config.engine.preemption_mode != "recompute":
            raise ValueError(
                "the live engine preempts by recompute only (as vLLM V1); "
                "set preemption_mode=recompute"
            )
        check_live_speculation(config)
        net, tokenizer, dev, dtype = load(options.model, options.device)
        if limits.max_model_len > net.shape.max_len:
            raise ValueError(
                f"max_model_len {limits.max_model_len} exceeds what {options.model} "
                f"holds ({net.shape.max_len}); use --max-model-len "
                f"{net.shape.max_len} or less"
            )
        slots, max_len = limits.max_num_requests, limits.max_model_len
        # Each request's KV lives in a store slot of its own, so no prompt can be served from
        # another's blocks: say so in the config the trace and /metrics report (as run_live does).
        config = without_prefix_cache(config)
        if not config.engine.kv_capacity_tokens:  # block accounting = the real stores' size
            config = with_overrides(config, {"kv_capacity_tokens": slots * max_len})
        self.config, self.options, self.limits, self.metrics = config, options, limits, metrics
        self.model_name = model_name or options.model
        self.vocab = net.shape.vocab
        self.codec = codec_for(tokenizer, self.vocab)
        self.eos_ids = self.codec.eos_ids

        def make_runner(worker: str) -> ModelRunner:
            runner = ModelRunner(
                net,
                KVStore(net.shape, slots, max_len, dev, dtype),
                dev,
                dtype,
                threads=options.threads,
            )
            runner.warm_up()
            return runner

        self.clock = MeasuredClock(make_runner, {})
        self.cluster = Cluster(config, clock=self.clock)
        self.workers: list[Worker] = self.cluster.workers
        for w in self.workers:  # load and warm every worker's runner before the first request
            self.clock.runner(w.name)
        self.device_info = self.clock.runner(self.workers[0].name).device_info()
        self._lock = threading.Lock()  # engine state: queues, requests, recorder
        self._inbox: deque[tuple[str, Handle]] = deque()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._ids = itertools.count()
        self.admission = Admission(limits, self.vocab)  # what is accepted, counted in and out
        self.handles: dict[int, Handle] = {}
        self.requests: list[Request] = []  # the current trace epoch
        self.archive: RunResult | None = None  # earlier epochs (finished requests only)
        self.failure: BaseException | None = None
        self._last_end: float | None = None  # end of the last step, while steps run back to back
        self.t0 = time.perf_counter()  # the server's t = 0
        self.t0_unix = time.time()
        self.thread = threading.Thread(target=self._run, name="pdlab-engine", daemon=True)

    # ---- the clock ---------------------------------------------------------------------------

    def now(self) -> float:
        """Seconds since the server started (monotonic)."""
        return time.perf_counter() - self.t0

    # ---- what the HTTP side calls (any thread) -----------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    @property
    def alive(self) -> bool:
        """Taking requests: not failed, not stopped (before start() they wait in the inbox)."""
        started = self.thread.ident is not None
        return (
            self.failure is None
            and not self._stop.is_set()
            and (not started or self.thread.is_alive())
        )

    def submit(
        self,
        prompt_ids: Sequence[int],
        max_tokens: int,
        sink: Sink,
        min_tokens: int = 0,
        ignore_eos: bool = False,
        priority: int = 0,
    ) -> Handle:
        """Queue a request for the engine; events go to `sink` (called on the engine thread)."""
        if not self.alive:
            raise LimitError(503, "the engine is not running", "ServiceUnavailableError")
        self.admission.check(prompt_ids, max_tokens, min_tokens)
        self.admission.take(len(prompt_ids) + max_tokens)
        spec = RequestSpec(next(self._ids), self.now(), len(prompt_ids), max_tokens, priority)
        handle = Handle(spec, list(prompt_ids), min_tokens, ignore_eos, sink)
        self._inbox.append(("add", handle))
        self._wake.set()
        return handle

    def abort(self, handle: Handle) -> None:
        """The client went away: stop working on its request (at the next step boundary)."""
        if not handle.closed:
            self._inbox.append(("abort", handle))
            self._wake.set()

    def load(self) -> dict:
        """Running, waiting and KV use over all workers, right now."""
        with self._lock:
            return self._load()

    # ---- the engine thread ---------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._wake.clear()
                self._drain()
                ran = False
                for worker in self.workers:
                    ran = self._step(worker) or ran
                if not ran:
                    self._last_end = None  # idle: the next step starts when it starts
                    self._maybe_rotate()
                    self._wake.wait(timeout=0.5)
        except BaseException as err:  # a crash must not leave clients waiting forever
            self.failure = err
            with self._lock:
                for handle in list(self.handles.values()):
                    self._close(handle, "abort", notify=("rejected", f"engine failed: {err}"))
            raise

    def _drain(self) -> None:
        """Take in the requests that arrived (and the aborts) since the last step."""
        if not self._inbox:
            return
        self._last_end = None  # the next step starts after these arrivals, not before
        with self._lock:
            while self._inbox:
                kind, handle = self._inbox.popleft()
                if kind == "abort":
                    self._abort(handle)
                    continue
                req = handle.req = Request(handle.spec)
                self.requests.append(req)
                self.handles[req.request_id] = handle
                # The simulator's routing (colocated, router, P/D). The wait began at the
                # arrival, even if the engine only looks now, after the step in flight.
                self.cluster.route(req, now=req.arrival_s)
                if req.state is RequestState.REJECTED:
                    self._close(handle, "abort", notify=("rejected", req.reject_reason))
                    continue
                self.clock.prompt_ids[req.request_id] = handle.prompt_ids
                self._send(handle, ("accepted",))
            self._publish_load()

    def _step(self, worker: Worker) -> bool:
        """One step of one worker: schedule, run on the model, complete, stream. False if idle."""
        engine = worker.engine
        with self._lock:
            # Back to back with the previous step (nothing arrived, nobody slept): this step
            # starts where that one ended, so the bookkeeping between steps (streaming, metrics)
            # counts in the engine's cycle and a decode stretch is one unbroken bar, as in sim.
            start = self._last_end if self._last_end is not None else self.now()
            batch = engine.schedule(start)
            if batch is None:
                return engine.retry_now  # preempted, ran nothing: the next step can progress
            for req, *_ in batch.items:
                handle = self.handles.get(req.request_id)
                if handle is not None and math.isnan(handle.started_s):
                    handle.started_s = start
        timing = self.clock.step_timing(worker, batch)  # the forward pass: no lock held
        runner = self.clock.runner(worker.name)
        with self._lock:
            end = self._last_end = self.now()
            for req, *_ in batch.items:  # end of sequence: finish it at this token
                handle = self.handles.get(req.request_id)
                generated = runner.generated(req.request_id)
                if handle is None or handle.ignore_eos or len(generated) <= req.num_generated:
                    continue  # no token sampled for it in this step
                # (a speculative verify may have sampled several: the first end counts)
                for i in range(req.num_generated, len(generated)):
                    if generated[i] in self.eos_ids and i + 1 >= handle.min_tokens:
                        req.output_tokens = i + 1
                        handle.finish_reason = "stop"
                        break
            handoffs = engine.complete(batch, start, end, timing)
            self.clock.after_step(worker, batch)
            if self.metrics is not None:
                self.metrics.prompt_tokens.inc(batch.prefill_tokens)
                self.metrics.preemptions.inc(batch.preempted)
            for req, *_ in batch.items:
                self._emit(req, runner)
            for req in handoffs:
                self._handoff(req, end)
            self._start_transfers()
            self._publish_load()
            if len(self.clock.samples) > 20_000:  # calibration samples: keep memory bounded
                del self.clock.samples[:10_000]
        return True

    def _emit(self, req: Request, runner) -> None:
        """Send the request's new tokens to its client; close it when it finished."""
        handle = self.handles.get(req.request_id)
        if handle is None:
            return
        generated = runner.generated(req.request_id)
        while handle.sent < min(len(generated), req.num_generated):
            k = handle.sent
            t = req.token_times[k]
            handle.sent += 1
            done = req.state is RequestState.FINISHED and handle.sent == req.num_generated
            reason = (handle.finish_reason or "length") if done else None
            if self.metrics is not None:
                first = k == 0
                self.metrics.token(
                    None if first else t - req.token_times[k - 1],
                    t - req.arrival_s if first else None,
                )
            self._send(handle, ("token", generated[k], t, reason))
        if req.state is RequestState.FINISHED:
            self._close(handle, handle.finish_reason or "length")

    def _handoff(self, req: Request, now: float) -> None:
        """P finished a prompt: queue it for the least-loaded D worker (as Cluster._handoff)."""
        decode = min(self.cluster.decode, key=lambda w: w.load)
        req.wait_kind, req.wait_since = "queued", now
        p = next(w for w in self.cluster.prefill if w.name == req.workers[-1])
        decode.inbox.append((req, p))

    def _start_transfers(self) -> None:
        """Copy prompts' KV from P to D workers whose blocks are free (Cluster._transfer, live).

        The copy really happens (`MeasuredClock.transfer_s`), one at a time on this thread.
        """
        if self.config.topology.topology != "disaggregated":
            return
        for d in self.cluster.decode:
            for req, p in self.cluster.reserve_transfers(d):
                start = self.now()
                self.clock.transfer_s(req, p, d, self.cluster.model, self.config.topology)
                self.cluster.finish_transfer(req, p, d, start, self.now())

    def _abort(self, handle: Handle) -> None:
        """Take an unfinished request out of whichever engine or transfer queue holds it."""
        req = handle.req
        if handle.closed or req is None or req.state not in IN_FLIGHT:
            return
        now = self.now()
        for w in self.workers:
            for item in list(w.inbox):  # waiting for a P -> D transfer: P still holds its KV
                if item[0] is req:
                    w.inbox.remove(item)
                    item[1].engine.release(req)
            w.engine.abort(req, now, "aborted: the client disconnected")
        self._close(handle, "abort")

    def _close(self, handle: Handle, reason: str, notify: tuple | None = None) -> None:
        """The request is done (finished, rejected or aborted): free everything it held."""
        if handle.closed:
            return
        handle.closed = True
        handle.finish_reason = handle.finish_reason or reason
        rid = handle.request_id
        for runner in self.clock.runners.values():
            runner.release(rid, forget=True)
        self.clock.prompt_ids.pop(rid, None)
        self.handles.pop(rid, None)
        self.admission.give_back(handle.budget)
        req = handle.req
        if self.metrics is not None and req is not None and req.state is RequestState.FINISHED:
            n = req.num_generated
            tpot = (req.finish_s - req.first_token_s) / (n - 1) if n > 1 else None
            started = handle.started_s if not math.isnan(handle.started_s) else req.finish_s
            self.metrics.finished(
                handle.finish_reason,
                req.finish_s - req.arrival_s,
                started - req.arrival_s,
                req.prompt_tokens,
                n,
                tpot,
            )
        elif self.metrics is not None and reason == "abort" and notify is None:
            self.metrics.success["abort"].inc()
        if notify is not None:
            self._send(handle, notify)

    def _send(self, handle: Handle, event: tuple) -> None:
        with contextlib.suppress(Exception):  # the client's loop is gone (shutting down)
            handle.sink(event)

    def _load(self) -> dict:
        running = sum(len(w.engine.running) for w in self.workers)
        waiting = sum(
            len(w.engine.waiting) + len(w.engine.swapped) + len(w.inbox) for w in self.workers
        )
        used = sum(w.engine.kv.used_tokens for w in self.workers)
        capacity = sum(w.engine.kv.capacity_tokens for w in self.workers)
        return {
            "running": running,
            "waiting": waiting + len(self._inbox),
            "kv_used_tokens": used,
            "kv_capacity_tokens": capacity,
            "kv_usage": used / capacity if capacity else 0.0,
        }

    def _publish_load(self) -> None:
        if self.metrics is not None:
            load = self._load()
            self.metrics.running.set(load["running"])
            self.metrics.waiting.set(load["waiting"])
            self.metrics.kv_usage.set(load["kv_usage"])

    # ---- the trace -----------------------------------------------------------------------------

    def meta(self) -> dict:
        """What the tables describe (as sim's RunResult.meta, plus the server's own fields)."""
        c = self.config
        workers = {
            w.name: {
                "role": w.role,
                "gpus": w.gpus,
                "gpu": str(self.device_info.get("device")),
                "kv_capacity_tokens": w.engine.kv.capacity_tokens,
            }
            for w in self.workers
        }
        return {
            "policy": c.policy,
            "topology": c.topology.topology,
            "model": self.model_name,
            "live_model": self.options.model,
            "gpu": str(self.device_info.get("device")),
            "num_gpus": len(self.workers),
            "ttft_slo_s": c.slo.ttft_slo_s,
            "tpot_slo_s": c.slo.tpot_slo_s,
            "workers": workers,
            "config": c.flat(),
            "clock": "real-time",
            "device": self.device_info,
            "t0_unix": self.t0_unix,
            "limits": {k: getattr(self.limits, k) for k in ServeLimits.__dataclass_fields__},
        }

    def _maybe_rotate(self) -> None:
        """Idle with a long trace: fold it into the archive and start a fresh recorder."""
        with self._lock:
            if (
                len(self.requests) < ROTATE_AT
                or any(w.engine.has_work or w.inbox for w in self.workers)
                or self._inbox
            ):
                return
            done = self.cluster.recorder.result(self.requests, self.meta())
            fresh = TraceRecorder()
            for name in self.cluster.recorder.worker_names:  # same codes as the engines hold
                fresh.worker_code(name)
            self.cluster.recorder = fresh
            for w in self.workers:
                w.engine.recorder = fresh
            self.requests = []
        merged = done if self.archive is None else concat_runs(self.archive, done)
        self.archive = keep_last(merged, self.limits.trace_requests)

    def snapshot(self, last: int | None = None) -> RunResult:
        """The trace so far: requests, segments, steps and token times (seconds since start).

        Requests still in the engine have status waiting / running / transferring / swapped,
        their first_token_s and ttft_s once they have a first token, and an open `queued` (or
        `preempted`) segment up to now while they wait; aborted ones have status `aborted`.
        `last` keeps the last N requests, their segments, and the steps since the first of
        them arrived.
        """
        with self._lock:
            now = self.now()
            reqs = self.requests[-last:] if last else list(self.requests)
            run = self.cluster.recorder.result(reqs, self.meta())
            live = {
                r.request_id: (r.state, r.first_token_s, r.num_generated, r.reject_reason)
                for r in reqs
            }
            handles = {rid: h.finish_reason for rid, h in self.handles.items()}
            open_waits = [
                (r.request_id, r.workers[-1] if r.workers else "", r.wait_kind, r.wait_since, now)
                for r in reqs
                if r.state is RequestState.WAITING and r.workers
            ]
            load = self._load()
        fix_in_flight(run, live, handles, open_waits)
        run = keep_last(run, len(reqs))  # the recorder holds every request's segments
        if self.archive is not None and (last is None or len(reqs) < last):
            run = concat_runs(self.archive, run)
        if last:
            run = keep_last(run, last)
        run.meta.update({"now_s": now, "load": load})
        return run
