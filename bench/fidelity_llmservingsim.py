"""LLMServingSim's public vLLM traces (casys-kaist/LLMServingSim, MIT), read into `PublicRun`s.

Each `bench/examples/<GPU>/<model>/vllm/` folder (meta.json, requests.jsonl) is vLLM 0.19
serving 300 ShareGPT requests at 10 req/s, with each request's lengths and timestamps (queued,
first token, last token). Copied to `<data>/llmservingsim/<GPU>/<model>/`, each becomes one run
replayed request by request: the same arrivals, lengths, max_num_seqs, max_num_batched_tokens,
parallelism and (where meta.json states it) KV capacity.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pandas as pd
from public_run import PublicRun

from sim.core.request import RequestSpec

LSS_GPUS = {"RTXPRO6000": "RTX-PRO-6000", "RTX4090": "RTX-4090"}
LSS_MODELS = {
    "meta-llama/Llama-3.1-8B": "Llama-3.1-8B",
    "Qwen/Qwen3-32B": "Qwen3-32B",
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "Qwen3-30B-A3B",
}


def load_llmservingsim(root: Path, skipped: Counter) -> list[PublicRun]:
    """Every <GPU>/<model>/ folder holding meta.json and requests.jsonl."""
    runs = []
    for meta_path in sorted((root / "llmservingsim").glob("*/*/meta.json")):
        folder = meta_path.parent
        meta = json.loads(meta_path.read_text())
        kw = meta["engine_kwargs"]
        gpu = LSS_GPUS.get(folder.parent.name)
        model = LSS_MODELS.get(meta["model"])
        if gpu is None or model is None or kw.get("dtype", "bfloat16") != "bfloat16":
            skipped[f"LLMServingSim {folder.parent.name}/{folder.name}: not in the catalog"] += 1
            continue
        rows = [
            json.loads(line)
            for line in (folder / "requests.jsonl").read_text().splitlines()
            if line.strip()
        ]
        # Timestamps share one monotonic clock; arrivals are the server's queued_ts (the source's
        # own validator anchors TTFT there too: bench/core/validate.py).
        t0 = min(r["queued_ts"] for r in rows)
        specs, measured = [], []
        for i, r in enumerate(sorted(rows, key=lambda r: r["queued_ts"])):
            specs.append(
                RequestSpec(i, r["queued_ts"] - t0, int(r["input_toks"]), int(r["output_toks"]))
            )
            out = int(r["output_toks"])
            tpot = (r["last_token_ts"] - r["first_token_ts"]) / (out - 1) if out > 1 else math.nan
            measured.append(
                (i, r["first_token_ts"] - r["queued_ts"], tpot, r["last_token_ts"] - r["queued_ts"])
            )
        tp, dp = int(kw.get("tensor_parallel_size") or 1), int(kw.get("data_parallel_size") or 1)
        settings = {
            "tensor_parallel": tp,
            "max_num_seqs": int(kw["max_num_seqs"]),
            "max_num_batched_tokens": int(kw["max_num_batched_tokens"]),
        }
        parallel = f"TP{tp}"
        if dp > 1:  # vLLM data parallel: one engine per rank behind a least-loaded balancer
            settings.update(topology="router", router="least-loaded", num_instances=dp)
            parallel = f"DP{dp}"
            if kw.get("enable_expert_parallel"):
                settings["expert_parallel"] = True
                parallel += "+EP"
        kv = (meta.get("kv_cache") or {}).get("num_kv_tokens")
        if kv:  # the server's own count, when meta.json records it
            settings["kv_capacity_tokens"] = int(kv)
        runs.append(
            PublicRun(
                key=f"lss/{folder.parent.name}/{folder.name}",
                source="LLMServingSim",
                gpu=gpu,
                model=model,
                engine=f"vLLM {meta.get('vllm_version', '?')}",
                policy="vllm",
                settings=settings,
                parallel=parallel,
                specs=specs,
                measured=pd.DataFrame(
                    measured, columns=["request_id", "ttft_s", "tpot_s", "e2e_s"]
                ).set_index("request_id"),
            )
        )
    return runs
