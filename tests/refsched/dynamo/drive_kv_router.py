"""Drive Dynamo 1.6.1's REAL KvRouter (indexer, ActiveSequences, DefaultWorkerSelector) in one
process on CPU, with no etcd/NATS, from a scripted list of operations; print one JSON line per
routed request. Run with .venv-dynamo's python (scripts/refsched_env.sh). Adapted from the probe
at ../shared/reference/probes/dynamo/drive_router.py.

  * discovery "file" (DYN_FILE_KV = a temp dir; "mem" is one runtime's own), request plane
    "tcp" on loopback, event plane "zmq"; N fake workers, each a DistributedRuntime that
    registers a model card (skip_model_assets) and serves a dummy handler (never called);
  * cache contents: KvEventPublisher.publish_stored, re-published until get_overlap_scores
    shows the blocks (a first event can be missed while the channel connects);
  * load: best_worker(tokens, request_id=...), mark_prefill_complete, free;
  * the picked worker's logit is parsed from the INFO log line "Selected worker ... logit=".

stdin: {"workers": N, "block_size": BS, "config": {...KvRouterConfig kwargs...},
        "ops": [["store", w, tokens] | ["route", rid, tokens] | ["prefill_done", rid] |
                ["free", rid]]}
stdout: {"rid", "worker", "logit", "overlap"} per route, then {"done": true}.
"""

import asyncio
import json
import os
import re
import sys
import tempfile
import time

os.environ["DYN_FILE_KV"] = tempfile.mkdtemp(prefix="dynkv-")
for _k in ("DYN_TCP_RPC_HOST", "DYN_TCP_RESPONSE_STREAM_HOST", "DYN_EVENT_PLANE_HOST"):
    os.environ.setdefault(_k, "127.0.0.1")
for _k in [k for k in os.environ if k.startswith("DYN_ROUTER_")]:
    del os.environ[_k]  # DYN_ROUTER_* would override KvRouterConfig
os.environ["DYN_LOG"] = "error,dynamo_kv_router::scheduling::selector=info"
_LOG = tempfile.NamedTemporaryFile(prefix="dynlog-", suffix=".txt", delete=False)  # noqa: SIM115
_OUT = os.fdopen(os.dup(1), "w")
os.dup2(_LOG.fileno(), 2)

from dynamo._core import (  # noqa: E402
    DistributedRuntime,
    KvEventPublisher,
    KvRouter,
    KvRouterConfig,
    ModelInput,
    ModelRuntimeConfig,
    ModelType,
    WorkerType,
    register_model,
)

EP = "pdlab.backend.generate"


def logged_logit(rid):
    deadline = time.time() + 2.0
    while time.time() < deadline:
        with open(_LOG.name, errors="replace") as f:
            txt = re.sub(r"\x1b\[[0-9;]*m", "", f.read())
        pat = rf'Selected worker.*?request_id="{re.escape(rid)}".*?logit=([0-9.eE+-]+)'
        hits = re.findall(pat, txt)
        if hits:
            return float(hits[-1])
        time.sleep(0.02)
    return None


async def dummy(request, context=None):
    yield {"token_ids": [0], "finish_reason": "stop"}


async def main(script):
    bs = script["block_size"]
    loop = asyncio.get_running_loop()
    workers = []
    for _ in range(script["workers"]):
        rt = DistributedRuntime(loop, "file", "tcp", event_plane="zmq")
        ep = rt.endpoint(EP)
        rc = ModelRuntimeConfig()
        rc.total_kv_blocks, rc.max_num_batched_tokens, rc.max_num_seqs = 100000, 8192, 256
        await register_model(
            ModelInput.Tokens,
            ModelType.Chat,
            ep,
            "fake",
            "fake",
            worker_type=WorkerType.Aggregated,
            kv_cache_block_size=bs,
            runtime_config=rc,
            skip_model_assets=True,
        )
        asyncio.ensure_future(ep.serve_endpoint(dummy))
        workers.append((rt, ep, KvEventPublisher(ep, kv_block_size=bs)))
    name = {ep.connection_id(): i for i, (_, ep, _) in enumerate(workers)}
    rrt = DistributedRuntime(loop, "file", "tcp", event_plane="zmq")
    router = KvRouter(rrt.endpoint(EP), bs, KvRouterConfig(**script.get("config", {})))
    await asyncio.sleep(1.5)  # discovery of the workers

    async def overlap_of(w, toks):
        scores = await router.get_overlap_scores(toks)
        for key, n in dict(scores).items():
            wid = key[0] if isinstance(key, (tuple, list)) else key
            if name.get(wid) == w:
                return n
        return 0

    for op in script["ops"]:
        kind = op[0]
        if kind == "store":
            _, w, toks = op
            nb = len(toks) // bs
            blocks = [tuple(toks[: (k + 1) * bs]) for k in range(nb)]
            want = nb
            deadline = time.time() + 3.0
            while True:
                workers[w][2].publish_stored(
                    toks[: nb * bs], [bs] * nb, [hash(b) & 0x7FFFFFFFFFFFFFFF for b in blocks]
                )
                await asyncio.sleep(0.15)
                if await overlap_of(w, toks[: nb * bs]) >= want or time.time() > deadline:
                    break
        elif kind == "route":
            _, rid, toks = op
            wid, _dp, ov = await router.best_worker(toks, request_id=rid)
            rec = {"rid": rid, "worker": name[wid], "logit": logged_logit(rid), "overlap": ov}
            _OUT.write(json.dumps(rec) + "\n")
            _OUT.flush()
        elif kind == "prefill_done":
            await router.mark_prefill_complete(op[1])
        elif kind == "free":
            await router.free(op[1])
    _OUT.write(json.dumps({"done": True}) + "\n")
    _OUT.flush()
    os._exit(0)


try:
    asyncio.run(main(json.load(sys.stdin)))
except BaseException:
    import traceback

    traceback.print_exc(file=_OUT)
    with open(_LOG.name, errors="replace") as f:
        _OUT.write(f.read()[-3000:])
    _OUT.flush()
    os._exit(1)
