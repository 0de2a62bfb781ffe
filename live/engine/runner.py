"""Run the engine's steps on a real model and time them: the live counterpart of sim's cost model.

Notable features
- `ModelRunner.execute(batch)` takes the very `sim.core.step.Batch` a policy produced, turns its
  items (request, n tokens, offset, is_decode) into model `Segment`s, runs ONE forward pass and
  returns the greedily sampled token per sampling request plus the measured seconds.
- The runner keeps each request's token ids (prompt given at admission, generated ones appended)
  and maps request ids to KV slots. A request samples when its step reaches the end of its known
  tokens: the same rule as sim/core/request.py. EOS is ignored: outputs run to the requested length.
- Timing: `time.perf_counter` around input packing, the forward pass and sampling. On a GPU the
  step ends when the sampled ids reach the host (`.tolist()`): that read is the step's one sync.
- Attention layout (live/model/llama.py): "flat" on CUDA (one SDPA call per layer for all decodes,
  live/model/flat_attention.py), "grouped" on CPU (fewest keys read); `attention=` forces either.
  On CUDA, decode-only steps replay CUDA graphs (live/model/decode_graphs.py; `graphs=False` turns
  them off), each captured before the clock of the first step that needs it starts.
- Device choice: CUDA + bf16 when present. On CPU, float32 and ONE thread by default. Measured
  on the 2-core box (SmolLM2, best of 5): bf16 without AMX has half the matmul peak (64 vs 139
  GFLOP/s), prefill 512 took 1541 ms vs 1030 ms in fp32 (decode B=8 was faster: 77 vs 117 ms).
  2 threads were faster on an idle box (prefill 512: 597-919 ms vs 1030-1123 ms) but with one
  other busy process they collapsed (2042 ms vs 941 ms; medians up to 5x worse), and the app,
  the tests and the UI share these cores: stable step times matter more than speed here.
- `copy_kv` really copies a request's prompt KV between two runners' stores (disaggregated
  prefill/decode) and times it; `swap_out`/`swap_in` move it to host memory and back.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from torch import Tensor

from live.model.kvstore import KVStore
from live.model.llama import LlamaModel, Segment, default_attention
from sim.core.step import Batch

PAD_ID = 0  # input id of a padding row (vLLM's -1 draft placeholders)
DEFAULT_CPU_THREADS = 1  # measured: 2 threads on the 2-core box were slower and noisier
WARM_CHUNKS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)  # CUDA warm-up: chunk size classes


def default_device() -> torch.device:
    """CUDA when present, else CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_dtype(device: torch.device | str) -> torch.dtype:
    """bf16 on GPUs; float32 on CPU (bf16 without AMX lost on decode here)."""
    return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ModelRunner:
    """Executes sim Batches on one model with its own KV store (one worker)."""

    def __init__(
        self,
        model: LlamaModel,
        kv_store: KVStore,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        threads: int | None = None,
        attention: str | None = None,
        graphs: bool | None = None,
    ) -> None:
        self.device = torch.device(device) if device is not None else kv_store.device
        self.dtype = dtype or kv_store.dtype
        if (kv_store.device.type, kv_store.dtype) != (self.device.type, self.dtype):
            raise ValueError(
                f"KV store is {kv_store.device}/{kv_store.dtype}, runner {device}/{dtype}"
            )
        if self.device.type == "cpu":  # a process-wide setting, made on purpose here
            torch.set_num_threads(threads or DEFAULT_CPU_THREADS)
        self.model = model.to(device=self.device, dtype=self.dtype)
        if self.device.type == "cpu":  # faster small-batch matmuls on MKL (see live/model/llama.py)
            self.model.use_column_major_weights()
        if self.device.type == "cuda":  # a process-wide setting, made on purpose here
            # SDPA may pick cuDNN's attention, which builds a plan for every new shape. Suspected
            # (not yet measured in isolation; bench/gpu_probe.py does) as the cause of what the
            # H200 run of 2026-12-04 showed: an eager step's FIRST use of a token count (96, 112,
            # 160, 208...) took 40-50 ms more than its later uses. Flash attention plans nothing.
            torch.backends.cuda.enable_cudnn_sdp(False)
        self.kv = kv_store
        self.attention = attention or default_attention(self.device)  # "flat" or "grouped"
        self.graphs = None  # CUDA graphs for decode-only steps (None: eager forward)
        if (self.device.type == "cuda" if graphs is None else graphs) and self.attention == "flat":
            from live.model.decode_graphs import DecodeGraphs

            self.graphs = DecodeGraphs(self.model, kv_store)
        self._tokens: dict[int, list[int]] = {}  # request id -> prompt + generated ids
        self._prompt_len: dict[int, int] = {}
        self._slot: dict[int, int] = {}  # request id -> KV slot
        self._cached: dict[int, int] = {}  # request id -> positions held in its slot
        self._swapped: dict[int, tuple[Tensor, Tensor]] = {}  # request id -> host K, V
        # Speculative decoding: live/engine/speculation.py's NgramSpeculator (None: off); the
        # MeasuredClock installs it as the worker's engine speculator too.
        self.speculator = None

    def device_info(self) -> dict[str, str | int]:
        """Device, dtype, CPU threads and torch version, for reports and the UI."""
        info: dict[str, str | int] = {
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "threads": torch.get_num_threads(),
            "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        }
        if self.device.type == "cuda":  # which GPU: model, memory, driver, CUDA
            from live.engine.provenance import device_provenance

            prov = device_provenance(self.device)
            info.update({k: prov[k] for k in ("gpu", "gpu_memory_gb", "driver", "cuda")})
            info["attention"], info["cuda_graphs"] = self.attention, self.graphs is not None
        return info

    def add_prompt(self, request_id: int, token_ids: Sequence[int]) -> None:
        """Register a request's prompt ids (at admission, before its first step)."""
        self._tokens[request_id] = list(token_ids)
        self._prompt_len[request_id] = len(token_ids)

    def tokens(self, request_id: int) -> list[int]:
        """Prompt plus generated ids so far."""
        return self._tokens[request_id]

    def generated(self, request_id: int) -> list[int]:
        """The ids generated so far."""
        return self._tokens[request_id][self._prompt_len[request_id] :]

    def execute(self, batch: Batch) -> tuple[dict[int, int], float]:
        """Run one step: (request id -> last token sampled, measured seconds).

        A verify item (speculative decoding, `batch.spec`) feeds the request's last sampled
        token and its drafts, greedy-verifies them (`_settle`) and appends 1 + accepted tokens;
        after the step the drafter looks up drafts for every request that sampled and goes on.
        """
        graph_key = None
        if self.graphs is not None:  # capture a new bucket's graph before the clock starts
            graph_key = self._graph_key(batch)
            if graph_key is not None:
                self.graphs.prepare(graph_key)
        spec = getattr(batch, "spec", None) or {}
        padded = getattr(batch, "padded", None) or ()
        start = time.perf_counter()
        # sampling: (request, rows sampled, drafts verified, known rows of a padded verify)
        segments, sampling = [], []
        for req, n, offset, _is_decode in batch.items:  # 1 token = decode for the model anyway
            rid = req.request_id
            if rid not in self._tokens:
                raise KeyError(f"request {rid}: call add_prompt() before its first step")
            toks = self._tokens[rid]
            if rid not in self._slot:
                self._slot[rid] = self.kv.allocate()
            if req in spec:
                ids = self._verify_input(req, n, offset, spec[req], req in padded)
                segments.append(Segment(self._slot[rid], ids, offset, True, sample_all=True))
                known = len(toks) - offset if req in padded else 0
                sampling.append((req, len(ids), 0 if known else spec[req], known))
                continue
            if offset + n > min(len(toks), self.kv.max_len):
                raise ValueError(
                    f"request {rid}: step wants tokens up to {offset + n}, but it has "
                    f"{len(toks)} tokens and the KV store holds {self.kv.max_len} per request"
                )
            sample = offset + n == len(toks)
            segments.append(Segment(self._slot[rid], toks[offset : offset + n], offset, sample))
            if sample:
                sampling.append((req, 1, 0, 0))
            self._cached[rid] = offset + n
        next_ids = self.forward_sample(segments, graph_key)
        sampled, row = {}, 0
        for req, rows, drafts, known in sampling:
            targets = next_ids[row : row + rows]
            row += rows
            new = self._settle(req, targets, drafts, known) if rows > 1 else targets
            toks = self._tokens[req.request_id]
            toks.extend(new)
            if rows > 1:  # a verify: the KV of its rejected rows is stale, written over later
                self._cached[req.request_id] = len(toks) - 1
            sampled[req.request_id] = new[-1]
            if self.speculator is not None:  # the drafter, inside the step (as vLLM's)
                self._propose(req, len(new))
        seconds = time.perf_counter() - start
        return sampled, seconds

    def _verify_input(self, req, n: int, offset: int, drafts: int, padded: bool) -> list[int]:
        """The input ids of a verify: the last sampled token, then its drafts. A padded one
        (vLLM's -1 placeholders, scheduler.py 1578-1582) has the known tokens, then padding rows
        (never accepted; only as many as the KV store has room for)."""
        rid, toks = req.request_id, self._tokens[req.request_id]
        if padded:
            known = toks[offset:]
            if not 1 <= len(known) <= n:
                raise ValueError(f"request {rid}: padded verify of {n} at {offset}, {len(toks)}")
            rows = min(n, self.kv.max_len - offset)
            return known + [PAD_ID] * (rows - len(known))
        if self.speculator is None:
            raise ValueError(f"request {rid}: a verify step, but this runner has no speculator")
        if offset != len(toks) - 1 or n != 1 + drafts or offset + n > self.kv.max_len:
            raise ValueError(
                f"request {rid}: a verify of {n} tokens at {offset} needs offset = its "
                f"{len(toks)} tokens - 1 and room in the KV store ({self.kv.max_len})"
            )
        return [toks[-1], *self.speculator.draft_ids(rid, drafts)]

    def _settle(self, req, targets: list[int], drafts: int, known: int) -> list[int]:
        """A verify's new tokens from the target's greedy choices at each of its rows.

        Greedy rejection sampling: draft i is accepted if the target's own choice after the
        input before it (row i-1) equals it, the first mismatch ends the run, and the target's
        choice at the last accepted row is the bonus (or corrected) token: 1 + accepted tokens.
        A padded verify (`known` rows of real tokens, then padding) has no real drafts: the
        token after its known ones only. Trimmed to what the request still needs (vLLM's
        `_update_request_with_output` stops at its length).
        """
        rid = req.request_id
        if known:  # padded: the row of its last known token samples
            new = [targets[known - 1]]
        else:
            proposed = self.speculator.draft_ids(rid, drafts)
            accepted = 0
            while accepted < drafts and targets[accepted] == proposed[accepted]:
                accepted += 1
            self.speculator.verified(rid, drafts, accepted)
            new = targets[: accepted + 1]
        left = getattr(req, "output_tokens", len(new)) - getattr(req, "num_generated", 0)
        return new[: max(1, left)]

    def _propose(self, req, emitted: int) -> None:
        """n-gram lookup for a request that sampled and has tokens left to write."""
        left = req.output_tokens - req.num_generated - emitted
        if left > 0:
            self.speculator.lookup(req.request_id, self._tokens[req.request_id])
        else:  # it finishes here: no drafts (its verify's result stays for the engine)
            self.speculator.drafts.pop(req.request_id, None)

    def forward_sample(self, segments: list[Segment], graph_key=None) -> list[int]:
        """The device part of a step: greedy ids of the sampling segments, read on the host."""
        if graph_key is not None:
            return self.graphs.run(segments, graph_key)
        logits = self.model.forward_step(segments, self.kv, self.attention)  # (S, vocab)
        return logits.argmax(dim=-1).tolist()  # greedy; .tolist() waits for the device

    def _graph_key(self, batch: Batch) -> tuple[int, int] | None:
        """The (rows, ctx) bucket of a decode-only batch (no tokens needed: offsets suffice)."""
        from live.model.decode_graphs import decode_shape

        slots = [self._slot.get(req.request_id) for req, n, _o, _d in batch.items if n == 1]
        if len(slots) != len(batch.items) or None in slots:
            return None
        fake = [
            Segment(slot, (0,), offset, True)
            for slot, (_r, _n, offset, _d) in zip(slots, batch.items, strict=True)
        ]
        return decode_shape(fake, self.kv)

    def release(self, request_id: int, forget: bool = False) -> None:
        """Free a request's KV slot (when it finishes or leaves); `forget` drops its ids too."""
        if (slot := self._slot.pop(request_id, None)) is not None:
            self.kv.free(slot)
        self._cached.pop(request_id, None)
        self._swapped.pop(request_id, None)
        if self.speculator is not None:
            self.speculator.forget(request_id)
        if forget:
            self._tokens.pop(request_id, None)
            self._prompt_len.pop(request_id, None)

    def swap_out(self, request_id: int) -> float:
        """Copy a request's KV to host memory and free its slot; returns seconds."""
        start = time.perf_counter()
        slot, n = self._slot.pop(request_id), self._cached[request_id]
        self._swapped[request_id] = self.kv.export(slot, n, device="cpu")
        _sync(self.device)
        self.kv.free(slot)
        return time.perf_counter() - start

    def swap_in(self, request_id: int) -> float:
        """Copy a swapped request's KV back into a fresh slot; returns seconds."""
        start = time.perf_counter()
        k, v = self._swapped.pop(request_id)
        self._slot[request_id] = slot = self.kv.allocate()
        self.kv.load(slot, k, v)
        _sync(self.device)
        return time.perf_counter() - start

    def warm_up(self, sweep: bool | None = None) -> float:
        """Run each attention kind once (fresh chunk, chunk with past, decode); returns seconds.

        With `sweep` (default: on CUDA), also one chunk per size class (WARM_CHUNKS), fresh and
        after a cached prefix: a kernel's first launch costs extra
        (CUDA loads kernels lazily, cuBLAS picks kernels by size, the allocator grows), and that
        belongs to set-up, not to a measured step. Seen on an H200 (8b-like, 2026-12-04): a
        run's first prefill steps took 3-5x what the same steps took in the run after it.
        """
        start = time.perf_counter()
        n = min(8, self.kv.max_len // 3)
        steps = [(0, n), (n, n), (2 * n, 1)]  # (offset, tokens) of each warm-up step
        if self.device.type == "cuda" if sweep is None else sweep:
            sizes = [c for c in WARM_CHUNKS if 2 * c <= self.kv.max_len]
            steps += [(0, c) for c in sizes] + [(c, c) for c in sizes]
        slot = self.kv.allocate()
        try:
            for offset, length in steps:
                self.model.forward_step(
                    [Segment(slot, [0] * length, offset, True)], self.kv, self.attention
                )
            _sync(self.device)
        finally:
            self.kv.free(slot)
        return time.perf_counter() - start


def copy_kv(request_id: int, src: ModelRunner, dst: ModelRunner, free_source: bool = True) -> float:
    """Copy a request's cached KV (and its token ids) from src's store to dst's; returns seconds."""
    n = src._cached[request_id]
    dst_slot = dst._slot.get(request_id)
    if dst_slot is None:
        dst_slot = dst._slot[request_id] = dst.kv.allocate()
    _sync(src.device)
    start = time.perf_counter()
    src.kv.copy_slot(src._slot[request_id], dst.kv, dst_slot, n)
    _sync(src.device)
    _sync(dst.device)
    seconds = time.perf_counter() - start
    dst._tokens[request_id] = list(src._tokens[request_id])
    dst._prompt_len[request_id] = src._prompt_len[request_id]
    dst._cached[request_id] = n
    if free_source:
        src.release(request_id)
    return seconds


def generate(model: LlamaModel, prompt_ids: Sequence[int], max_new_tokens: int) -> list[int]:
    """Greedy generation for one request (EOS ignored): one prefill, then one decode per token."""
    p = next(model.parameters())
    kv = KVStore(model.shape, 1, len(prompt_ids) + max_new_tokens, p.device, p.dtype)
    slot, out = kv.allocate(), []
    segment = Segment(slot, list(prompt_ids), 0, True)
    for _ in range(max_new_tokens):
        out.append(int(model.forward_step([segment], kv).argmax(dim=-1)[0]))
        segment = Segment(slot, [out[-1]], len(prompt_ids) + len(out) - 1, True)
    return out
