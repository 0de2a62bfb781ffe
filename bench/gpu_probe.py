"""Which CUDA call failed? Probes for the device-side assert of the H200 run of 2026-12-04.

That run's CUDA warm-up sweep (chunks of 16..4096 tokens, fresh and after a cached prefix, and
one chunk beside a decode) ended in "device-side assert triggered" for 8b-like, in stores of
4,096 and 16k+ tokens, while the same sweep in stores of <1k tokens passed. Each probe below runs
in its own process (an assert poisons the CUDA context) with CUDA_LAUNCH_BLOCKING=1, so the
traceback names the failing call. Prints one line per probe: ok, or the error's last line.

Run (GPU only): python3 bench/gpu_probe.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBES = {
    # flash attention's own GQA with the lower-right causal bias (32 query, 8 K/V heads)
    "flash-gqa-lower-right-2048-after-2048": """
from torch.nn.attention.bias import causal_lower_right
q = torch.randn(1, 32, 2048, 128, device="cuda", dtype=torch.bfloat16)
k, v = (torch.randn(1, 8, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
out = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(2048, 4096),
                                     enable_gqa=True)
ref = F.scaled_dot_product_attention(q, k.repeat_interleave(4, 1), v.repeat_interleave(4, 1),
                                     attn_mask=causal_lower_right(2048, 4096))
torch.cuda.synchronize()
print("max |gqa - repeated heads|", float((out - ref).abs().max()))
""",
    # a chunk of 2048 after 2048 cached, then a chunk beside a decode, in a small store
    "model-chunk-after-cached-and-mixed": """
from live.model.kvstore import KVStore
from live.model.llama import Segment
from live.model.weights import random_model
m = random_model("8b-like", device="cuda", dtype=torch.bfloat16)
kv = KVStore(m.shape, 2, 4096, "cuda", torch.bfloat16)
for c in (512, 1024, 2048):
    m.forward_step([Segment(0, [0] * c, 0, True)], kv); torch.cuda.synchronize()
    m.forward_step([Segment(0, [0] * c, c, True)], kv); torch.cuda.synchronize()
    print("chunk after cached ok", c, flush=True)
m.forward_step([Segment(0, [0] * 2048, 0, True), Segment(1, [0], 8, True)], kv)
torch.cuda.synchronize()
print("mixed ok", flush=True)
""",
    # the bench's store of 67 slots x 4,097 positions (9.0e9 elements > 2^33): decode writes
    "big-store-decode-writes": """
from live.model.kvstore import KVStore
from live.model.llama import Segment
from live.model.weights import random_model
m = random_model("8b-like", device="cuda", dtype=torch.bfloat16)
kv = KVStore(m.shape, 67, 4096, "cuda", torch.bfloat16)
m.forward_step([Segment(66, [0] * 16, 0, True)], kv); torch.cuda.synchronize()
m.forward_step([Segment(66, [0], 16, True)], kv); torch.cuda.synchronize()
print("decode in slot 66 ok", flush=True)
""",
    # Is a new token count's first eager step slow because of cuDNN attention's plans? Times
    # the first and second SDPA call at fresh shapes with cuDNN allowed, then with flash only.
    "sdpa-first-call-cost": """
import time
from torch.nn.attention import SDPBackend, sdpa_kernel
def first_second(n, backends):
    q = torch.randn(1, 32, n, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 8, n, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    out = []
    with sdpa_kernel(backends):
        for _ in range(2):
            torch.cuda.synchronize(); t = time.perf_counter()
            F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            torch.cuda.synchronize(); out.append(round((time.perf_counter() - t) * 1e3, 2))
    return out
everything = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
              SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
print("ms first/second, cuDNN allowed:", [first_second(n, everything) for n in (96, 112, 160)])
print("ms first/second, flash only:", [first_second(n, [SDPBackend.FLASH_ATTENTION])
                                       for n in (97, 113, 161)])
""",
}


def main() -> int:
    env = {**os.environ, "CUDA_LAUNCH_BLOCKING": "1", "PYTHONPATH": str(ROOT)}
    head = "import torch, torch.nn.functional as F\ntorch.set_grad_enabled(False)\n"
    for name, code in PROBES.items():
        try:
            done = subprocess.run(
                [sys.executable, "-c", head + code],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            lines = (done.stdout + done.stderr).strip().splitlines()
            errors = [ln for ln in lines if "Error" in ln or "Assert" in ln or "assert" in ln]
            tail = " | ".join(lines[-2:] if done.returncode == 0 else (errors[:3] or lines[-3:]))
            print(f"{name}: {'ok' if done.returncode == 0 else 'FAILED'}: {tail}", flush=True)
        except subprocess.TimeoutExpired:
            print(f"{name}: timed out after 60 s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
