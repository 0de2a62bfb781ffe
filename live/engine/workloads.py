"""Small workloads for the live engine: the lessons' mechanisms, sized for a CPU and SmolLM2.

A 135M-parameter model on a laptop-class CPU prefills ~400 tokens/s and decodes a step in
~50-150 ms, so the lessons' H100 workloads (16k-token prompts, hundreds of requests) would take
hours. These keep each mechanism visible in a few seconds of measured time.
"""

from __future__ import annotations

from sim.core.request import RequestSpec
from sim.scenarios import get_scenario


def _rows(rows) -> list[RequestSpec]:
    rows = sorted(rows, key=lambda r: r[0])
    return [RequestSpec(i, *row) for i, row in enumerate(rows)]


LIVE_WORKLOADS = {
    # C5/C6: four chats streaming, then one long prompt: prefill-first freezes them, vllm not.
    "freeze": lambda: _rows([(0.1 * i, 96, 24) for i in range(4)] + [(0.6, 768, 8)]),
    # C12: three staggered requests.
    "three": lambda: _rows([(0.0, 256, 32), (0.6, 256, 32), (1.2, 256, 32)]),
    # C7: a long prompt first, then short chats queue behind it (one partial prefill at a time).
    "blocking": lambda: _rows([(0.0, 1024, 8)] + [(0.2 + 0.2 * i, 48, 12) for i in range(5)]),
    # C2/C4: a few chats arriving over time.
    "chat": lambda: _rows([(0.3 * i, 64 + 48 * (i % 4), 16 + 4 * (i % 3)) for i in range(8)]),
}


# Sized for a GPU (offered by the Live page when CUDA is present, with 2048-token chunks): on an
# H200 `8b-like` prefills ~30k tokens/s and decodes a step in a few ms, so the CPU workloads
# above are over in a blink. These make the lessons' effects last long enough to see.
GPU_WORKLOADS = {
    # C5 at full size: four chats stream, then a 16k-token prompt. Under prefill-first its
    # whole prefill (~0.5 s for 8b-like on an H200) freezes them; vllm's chunks keep them going.
    "freeze-16k": lambda: _rows([(0.05 * i, 512, 96) for i in range(4)] + [(0.3, 16_384, 8)]),
    # C2/C4 at GPU scale: sixteen chats of 256..2048-token prompts arriving over 1.5 s.
    "chat-gpu": lambda: _rows([(0.1 * i, 256 * (1 + i % 8), 64 + 16 * (i % 5)) for i in range(16)]),
}


def live_workload(name: str, max_requests: int = 16, max_tokens: int = 6000) -> list[RequestSpec]:
    """A named live workload, or a lesson scenario scaled down to fit the live engine's caps."""
    if name in LIVE_WORKLOADS or name in GPU_WORKLOADS:
        return {**LIVE_WORKLOADS, **GPU_WORKLOADS}[name]()
    try:
        scenario = get_scenario(name)
    except ValueError:
        raise ValueError(
            f"unknown workload {name!r}; choose a live one ({', '.join(LIVE_WORKLOADS)})"
            " or a lesson scenario (python -m sim list)"
        ) from None
    reqs = scenario.requests()[:max_requests]
    total = sum(r.prompt_tokens + min(r.output_tokens, 32) for r in reqs)
    scale = min(1.0, max_tokens / total)
    return [
        RequestSpec(
            i,
            r.arrival_s,
            max(1, int(r.prompt_tokens * scale)),
            max(1, min(r.output_tokens, 32)),
            r.priority,
        )
        for i, r in enumerate(reqs)
    ]
