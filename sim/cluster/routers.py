"""Routers: pick the instance an arriving request goes to. One job, registered by name.

Notable features
- A router reads one `WorkerView` per instance (what a real router can see: cached prefix,
  queued and active work, KV use) and returns a `Pick`: the index it chose, each worker's
  score, and the workers tied with it. `sim/cluster/topologies.py` builds the views from its
  engines; the tests build them from scripted KV events, as the real routers get them.
- Each router says what it `mirrors`: a system and version, or "PD Lab's own".
- `dynamo-kv` is Dynamo 1.6.1's KV-aware cost (lib/kv-router selector, DefaultWorkerSelector)
  and is tested request by request against the real `KvRouter` (tests/refsched/dynamo/).
- `llm-d` is the llm-d scheduler's weighted scorers (gateway-api-inference-extension's prefix,
  queue and kv-utilization scorers; llm-d-inference-scheduler's load-aware scorer), mirrored
  line by line from the Go sources cited below and tested on hand traces (Go is not run here).
- Ties: Dynamo breaks them uniformly at random and the max-score picker shuffles; PD Lab takes
  the first tied worker so that a run is repeatable. `Pick.tied` lists them all.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

PD_LAB = "PD Lab's own"


@dataclass
class WorkerView:
    """One instance as a router sees it when a request arrives."""

    name: str
    load: int = 0  # requests queued or running (PD Lab's own routers)
    overlap_blocks: int = 0  # the request's leading blocks this worker has cached (device)
    active_prefill_tokens: int = 0  # uncached prompt tokens of requests not yet prefilled
    decode_blocks: int = 0  # distinct full prompt blocks of active requests + the new request's
    active_requests: int = 0
    waiting: int = 0  # requests in the waiting queue (vLLM's num_requests_waiting)
    kv_usage: float = 0.0  # fraction of KV blocks in use (vLLM's kv_cache_usage_perc)


@dataclass
class Pick:
    index: int
    scores: list[float]  # per worker: a cost (lower wins) or a score (higher wins)
    tied: list[int] = field(default_factory=list)


# ---- PD Lab's own -------------------------------------------------------------------------------


class RoundRobin:
    name = "round-robin"
    mirrors = PD_LAB

    def __init__(self, config=None) -> None:
        self._n = 0

    def pick(self, isl: int, views: list[WorkerView]) -> Pick:
        i = self._n % len(views)
        self._n += 1
        return Pick(i, [0.0] * len(views), [i])


class LeastLoaded:
    name = "least-loaded"
    mirrors = PD_LAB

    def __init__(self, config=None) -> None:
        pass

    def pick(self, isl: int, views: list[WorkerView]) -> Pick:
        loads = [float(v.load) for v in views]
        return _argmin(loads)


# The `length` router (short-prompt servers, one long server) needs the topology's long
# server and stays in topologies.py; it is registered here by name only.


# ---- Dynamo 1.6.1: KV-aware routing ----------------------------------------------------------


@dataclass(frozen=True)
class DynamoKvConfig:
    """`KvRouterConfig()` defaults of ai-dynamo-runtime 1.6.1 (checked on the wheel)."""

    block_size: int = 16  # KvRouter requires it (the frontend takes the worker card's)
    router_temperature: float = 0.0  # 0 = argmin
    overlap_score_credit: float = 1.0
    prefill_load_scale: float = 1.0
    decode_active_request_weight: float = 0.0


def dynamo_kv_logit(view: WorkerView, isl: int, cfg: DynamoKvConfig) -> float:
    """`DefaultWorkerScorer::worker_logit` over `WorkerSelectionInput::row` (selector/default.rs,
    selector/mod.rs): prefill blocks are fractional (the tail counts), cached device blocks are
    credited, decode blocks are whole. Host/disk tiers (0.75, 0.25) are not modelled: PD Lab
    has one tier. Credit 0 turns the cache off entirely (the overlap is reported as 0)."""
    overlap = view.overlap_blocks if cfg.overlap_score_credit > 0 else 0
    prefill_blocks = (view.active_prefill_tokens + isl) / cfg.block_size
    prefill = cfg.prefill_load_scale * max(0.0, prefill_blocks - cfg.overlap_score_credit * overlap)
    return prefill + view.decode_blocks + cfg.decode_active_request_weight * view.active_requests


class DynamoKv:
    name = "dynamo-kv"
    mirrors = "Dynamo 1.6.1 (KvRouter, DefaultWorkerSelector)"

    def __init__(self, config: DynamoKvConfig | None = None, seed: int = 0) -> None:
        self.cfg = config or DynamoKvConfig()
        self.rng = random.Random(seed)  # softmax sampling (Dynamo: unseeded fastrand)

    def pick(self, isl: int, views: list[WorkerView]) -> Pick:
        logits = [dynamo_kv_logit(v, isl, self.cfg) for v in views]
        best = _argmin(logits)
        t = self.cfg.router_temperature
        if t <= 0:
            return best  # pick_default_worker -> minimum_cost_index
        lo, hi = min(logits), max(logits)
        if hi == lo:
            return best
        weights = softmax_weights(logits, t)
        i = self.rng.choices(range(len(views)), weights)[0]
        return Pick(i, logits, best.tied)

    def route(self, req, workers) -> Pick:
        return self.pick(req.prompt_tokens, engine_views(workers, req))


def softmax_weights(logits: list[float], temperature: float) -> list[float]:
    """`softmax_sample_index`: p_i ∝ exp(-(c_i - c_min) / ((c_max - c_min) * T))."""
    lo, hi = min(logits), max(logits)
    span = (hi - lo) * temperature
    w = [math.exp(-(c - lo) / span) for c in logits]
    z = sum(w)
    return [x / z for x in w]


class DynamoKvModel:
    """The router-side state Dynamo's `KvRouter` keeps, fed the way Dynamo feeds it: KV
    `stored`/`removed` events per worker (the radix indexer) and the requests it routed
    (ActiveSequences: added on routing, prefill tokens gone at `mark_prefill_complete`, blocks
    gone at `free`). Block identity is the whole prefix up to the block's end, as Dynamo's
    chained sequence hash. The differential test drives this and the real KvRouter alike."""

    def __init__(self, names: list[str], config: DynamoKvConfig | None = None) -> None:
        self.names = list(names)
        self.router = DynamoKv(config)
        self.bs = self.router.cfg.block_size
        self.cached: dict[str, set] = {w: set() for w in names}
        self.active: dict[str, dict[str, list]] = {w: {} for w in names}

    def full_blocks(self, tokens) -> list[tuple]:
        bs = self.bs
        return [tuple(tokens[: (k + 1) * bs]) for k in range(len(tokens) // bs)]

    def store(self, worker: str, tokens) -> None:
        self.cached[worker].update(self.full_blocks(tokens))

    def remove(self, worker: str, tokens) -> None:
        self.cached[worker].difference_update(self.full_blocks(tokens))

    def overlap(self, worker: str, tokens) -> int:
        n = 0
        for b in self.full_blocks(tokens):  # the first miss ends the prefix
            if b not in self.cached[worker]:
                break
            n += 1
        return n

    def views(self, tokens) -> list[WorkerView]:
        out = []
        new = self.full_blocks(tokens)
        for w in self.names:
            blocks: set = set(new)  # router_assume_kv_reuse: shared blocks count once
            for bl, _ in self.active[w].values():
                blocks.update(bl)
            out.append(
                WorkerView(
                    name=w,
                    overlap_blocks=self.overlap(w, tokens),
                    active_prefill_tokens=sum(p for _, p in self.active[w].values()),
                    decode_blocks=len(blocks),
                    active_requests=len(self.active[w]),
                )
            )
        return out

    def best_worker(self, tokens, request_id: str | None = None) -> tuple[Pick, list[str]]:
        """Route; with a request_id the request joins the picked worker's active set. Returns
        the pick and the names of the minimum-cost workers."""
        views = self.views(tokens)
        pick = self.router.pick(len(tokens), views)
        if request_id is not None:
            w = self.names[pick.index]
            ov = views[pick.index].overlap_blocks if self.router.cfg.overlap_score_credit else 0
            self.active[w][request_id] = [self.full_blocks(tokens), len(tokens) - ov * self.bs]
        return pick, [self.names[i] for i in pick.tied]

    def assign(self, worker: str, request_id: str, tokens) -> None:
        """Record that `worker` took the request (when the real router broke a tie otherwise)."""
        for act in self.active.values():
            act.pop(request_id, None)
        ov = self.overlap(worker, tokens) if self.router.cfg.overlap_score_credit else 0
        self.active[worker][request_id] = [self.full_blocks(tokens), len(tokens) - ov * self.bs]

    def mark_prefill_complete(self, request_id: str) -> None:
        for act in self.active.values():
            if request_id in act:
                act[request_id][1] = 0

    def free(self, request_id: str) -> None:
        for act in self.active.values():
            act.pop(request_id, None)


# ---- llm-d: weighted scorers, max-score picker -----------------------------------------------
#
# Sources (Go; mirrored, not run):
#   GAIE = kubernetes-sigs/gateway-api-inference-extension @ fd30cb97714a (the version
#          llm-d-inference-scheduler @ 06c08c08 pins in go.mod), under
#          pkg/epp/framework/plugins/scheduling/scorer/
#   LLMD = llm-d/llm-d-inference-scheduler @ 06c08c08d5726662ae5a4bc40b45a458e45c22c2


@dataclass(frozen=True)
class LlmdConfig:
    # GAIE config/charts/inference-extension/templates/_config.yaml:47-52 (queue 2, kv 2,
    # prefix 3); load-aware 1.0: LLMD deploy/config/epp-estimate-prefix-cache-config.yaml
    # (weight 1.0) and GAIE pkg/epp/config/loader/defaults.go:32 (DefaultScorerWeight = 1.0).
    prefix_weight: float = 3.0
    queue_weight: float = 2.0
    kv_weight: float = 2.0
    load_weight: float = 1.0
    block_size: int = 16  # GAIE prefix/plugin.go:42 DefaultBlockSizeTokens (x4 chars = 64 bytes)
    max_prefix_blocks: int = 256  # GAIE prefix/plugin.go:48 DefaultMaxPrefixBlocks
    queue_threshold: int = 128  # LLMD pkg/plugins/scorer/load_aware.go:19 QueueThresholdDefault


def llmd_prefix_scores(matched: list[int], total: int) -> list[float]:
    """GAIE prefix/plugin.go:285-291: matched blocks / total blocks; 0 when the prompt has no
    full block."""
    return [0.0 if total == 0 else m / total for m in matched]


def llmd_queue_scores(waiting: list[int]) -> list[float]:
    """GAIE queue.go:79-99: (max - q) / (max - min); 1.0 for all when every queue is equal."""
    lo, hi = min(waiting), max(waiting)
    return [1.0 if hi == lo else (hi - q) / (hi - lo) for q in waiting]


def llmd_kv_scores(usage: list[float]) -> list[float]:
    """GAIE kvcache_utilization.go:79: 1 - KVCacheUsagePercent."""
    return [1 - u for u in usage]


def llmd_load_aware_scores(waiting: list[int], threshold: int = 128) -> list[float]:
    """LLMD load_aware.go:89-95: 0.5 with an empty queue, else 0.5 * (1 - min(q, thr) / thr)."""
    out = []
    for q in waiting:
        out.append(0.5 if q == 0 else 0.5 * (1.0 - min(q, threshold) / threshold))
    return out


class LlmdPrefixIndexer:
    """GAIE prefix/plugin.go's approximate index: the block hashes of each request routed to a
    server are recorded for that server (PreRequest); a new prompt's blocks are matched in
    order, and matching stops at the first block no server holds (matchLongestPrefix,
    plugin.go:344-363: every server holding block i counts it, even one that missed an earlier
    block). Prompts are hashed in 16-token blocks (hashPrompt, plugin.go:399-443: the last
    partial block is dropped, at most 256 blocks). The per-server LRU capacity is not
    modelled: entries are kept."""

    def __init__(self, cfg: LlmdConfig) -> None:
        self.cfg = cfg
        self.index: dict[object, set[str]] = {}

    def hashes(self, keys: list) -> list:
        return keys[: self.cfg.max_prefix_blocks]

    def match(self, keys: list) -> dict[str, int]:
        res: dict[str, int] = {}
        for h in self.hashes(keys):
            servers = self.index.get(h)
            if not servers:
                break
            for s in servers:
                res[s] = res.get(s, 0) + 1
        return res

    def record(self, server: str, keys: list) -> None:
        for h in self.hashes(keys):
            self.index.setdefault(h, set()).add(server)


class Llmd:
    name = "llm-d"
    mirrors = (
        "llm-d-inference-scheduler 06c08c08 + gateway-api-inference-extension fd30cb97 "
        "(prefix, queue, kv-utilization, load-aware scorers; max-score picker)"
    )

    def __init__(self, config: LlmdConfig | None = None) -> None:
        self.cfg = config or LlmdConfig()
        self.indexer = LlmdPrefixIndexer(self.cfg)

    def scores(self, keys: list, views: list[WorkerView]) -> list[float]:
        c = self.cfg
        matched = self.indexer.match(keys)
        total = len(self.indexer.hashes(keys))
        waiting = [v.waiting for v in views]
        parts = (
            (c.prefix_weight, llmd_prefix_scores([matched.get(v.name, 0) for v in views], total)),
            (c.queue_weight, llmd_queue_scores(waiting)),
            (c.kv_weight, llmd_kv_scores([v.kv_usage for v in views])),
            (c.load_weight, llmd_load_aware_scores(waiting, c.queue_threshold)),
        )
        return [sum(w * s[i] for w, s in parts) for i in range(len(views))]

    def pick_keys(self, keys: list, views: list[WorkerView]) -> Pick:
        """Score, take the highest (the max-score picker), and record the prompt's blocks for the
        chosen server (the prefix plugin's PreRequest)."""
        scores = self.scores(keys, views)
        best = max(scores)
        tied = [i for i, s in enumerate(scores) if s == best]
        self.indexer.record(views[tied[0]].name, keys)
        return Pick(tied[0], scores, tied)

    def route(self, req, workers) -> Pick:
        bs = self.cfg.block_size  # the prompt in 16-token (64-byte) blocks, chained keys
        n = min(req.prompt_tokens // bs, self.cfg.max_prefix_blocks)
        return self.pick_keys(req.spec.block_keys(0, n, bs), engine_views(workers, req))


# ---- what the simulator's engines show a router ----------------------------------------------


def engine_views(workers, req) -> list[WorkerView]:
    """One `WorkerView` per simulated worker (sim/cluster/worker.py), read at the arrival.

    Dynamo's router keeps its own books from KV events and the requests it routed; here the
    engines' own state stands in for them: the overlap is the worker's prefix-cache hit for this
    prompt (vLLM's lookup: at most prompt - 1 tokens), prefill tokens are the prompt tokens not
    yet computed of requests not decoding, decode blocks are the distinct full prompt blocks of
    the queued and running requests plus the new one's."""
    views = []
    for w in workers:
        eng = w.engine
        kv = eng.kv
        bs = kv.block_size
        active = [*eng.waiting, *eng.running]
        blocks = set(req.spec.block_keys(0, req.prompt_tokens // bs, bs))
        prefill = 0
        for r in active:
            blocks.update(r.spec.block_keys(0, r.prompt_tokens // bs, bs))
            if not r.is_decoding:
                prefill += max(0, r.prompt_tokens - r.num_computed)
        cap = kv.capacity_tokens
        views.append(
            WorkerView(
                name=w.name,
                load=w.load,
                overlap_blocks=len(kv.lookup(req)) if kv.caching else 0,
                active_prefill_tokens=prefill,
                decode_blocks=len(blocks),
                active_requests=len(active),
                waiting=len(eng.waiting),
                kv_usage=kv.used_tokens / cap if cap else 0.0,
            )
        )
    return views


def make_router(topo, block_size: int):
    """The router object for `TopologyConfig.router`, or None for PD Lab's own (which
    topologies.py runs itself: they read loads only)."""
    if topo.router == DynamoKv.name:
        return DynamoKv(
            DynamoKvConfig(
                block_size=block_size,
                router_temperature=topo.router_temperature,
                overlap_score_credit=topo.overlap_score_credit,
                prefill_load_scale=topo.prefill_load_scale,
                decode_active_request_weight=topo.decode_active_request_weight,
            )
        )
    if topo.router == Llmd.name:
        return Llmd(
            LlmdConfig(
                prefix_weight=topo.llmd_prefix_weight,
                queue_weight=topo.llmd_queue_weight,
                kv_weight=topo.llmd_kv_weight,
                load_weight=topo.llmd_load_weight,
            )
        )
    return None


# ---- the registry -----------------------------------------------------------------------------


def _argmin(costs: list[float]) -> Pick:
    best = min(costs)
    tied = [i for i, c in enumerate(costs) if abs(c - best) < 1e-9]
    return Pick(tied[0], costs, tied)


ROUTERS: dict[str, str] = {  # name -> what it mirrors (ui/engine_notes.py-style naming)
    "round-robin": PD_LAB,
    "least-loaded": PD_LAB,
    "length": PD_LAB,
    DynamoKv.name: DynamoKv.mirrors,
    Llmd.name: Llmd.mirrors,
}
