"""How much memory a run's KV bookkeeping takes, known before it runs (the command line's guard).

The simulator keeps no KV *data*, only the books of it. A plain `sim.core.kv.KVCache` is a counter
of free blocks: any size costs nothing. A prefix-caching one
(`sim.core.prefix_cache.PrefixCachingKV`,
vLLM V1's and SGLang's default) keeps a reference count, a key and a spare id PER BLOCK: three
list slots (8 bytes each) and an int object for most ids, measured at ~55 bytes a block (32
SmolLM2-135M instances on B200s, 15M blocks: 830 MB). A tiny model on a large GPU has hundreds
of thousands of blocks per instance, so in-range knobs can ask for tens of GB
(`--topology router --set num_instances=1024 --model SmolLM2-135M --gpu B200`: 480M blocks,
~30 GB). `check_memory` refuses such a run before it allocates anything, with one line saying
what to change, instead of letting it swap the machine or be killed by the kernel.

The app has its own, smaller bound (`sim.runs.budget.Budget.max_kv_blocks`); this module holds the
block count both use (`kv_blocks`), without pandas, so `python -m sim run --json` stays light.
"""

from __future__ import annotations

import os

from sim.config import SimConfig
from sim.cost.hardware import custom_gpu, get_gpu, get_model, kv_capacity_tokens

KV_BLOCK_BYTES = 64  # a prefix-caching block's bookkeeping, rounded up from the ~55 measured
BASE_BYTES = 300 * 2**20  # the interpreter, numpy, the workload and the run's tables, roughly
MEMORY_ENV = "PDLAB_CLI_MEMORY_GB"  # overrides what this machine has free (tests, containers)


def num_workers(config: SimConfig) -> int:
    topo = config.topology
    if topo.topology == "router":
        return topo.num_instances
    if topo.topology == "disaggregated":
        return topo.num_prefill + topo.num_decode
    return 1


def kv_blocks(config: SimConfig) -> int:
    """KV blocks of all the run's workers (what the engines allocate before the first step)."""
    hw, eng, topo = config.hardware, config.engine, config.topology
    if hw.gpu.lower() == "custom":
        gpu = custom_gpu(hw.gpu_tflops, hw.gpu_bw_gb_s, hw.gpu_mem_gb)
    else:
        gpu = get_gpu(hw.gpu)
    model = get_model(hw.model)

    def per_worker(g) -> int:
        reserve = config.kv_reserve_gb(g.name, g.mem_gb)
        tokens = eng.kv_capacity_tokens or kv_capacity_tokens(
            g, model, hw.tensor_parallel, eng.mem_utilization, reserve
        )
        return tokens // eng.block_size

    if topo.topology == "disaggregated":
        decode = get_gpu(topo.decode_gpu) if topo.decode_gpu else gpu
        return topo.num_prefill * per_worker(gpu) + topo.num_decode * per_worker(decode)
    return num_workers(config) * per_worker(gpu)


def needed_bytes(config: SimConfig, copies: int = 1) -> int:
    """Roughly the most memory `copies` runs of `config` at once hold (a sweep's processes: the
    interpreter's pages are shared by the forked workers, each builds its own KV books)."""
    from sim.policies import make_policy

    caching = make_policy(config.policy, config.knobs).prefix_caching
    return BASE_BYTES + max(1, copies) * (kv_blocks(config) * KV_BLOCK_BYTES if caching else 0)


def available_bytes() -> int:
    """Memory this process may still take: $PDLAB_CLI_MEMORY_GB, else the kernel's MemAvailable
    (free memory plus caches it can drop), else all physical memory."""
    raw = os.environ.get(MEMORY_ENV, "").strip()
    if raw:
        try:
            return int(float(raw) * 2**30)
        except ValueError:
            raise ValueError(f"{MEMORY_ENV} must be a number of GB, got {raw!r}") from None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_memory(config: SimConfig, copies: int = 1) -> None:
    """ValueError (one line, what to change) when `copies` runs of `config` at once (a sweep's
    worker processes) would need more memory than this machine has free."""
    need = needed_bytes(config, copies)
    have = available_bytes()
    if need <= have:
        return
    blocks = kv_blocks(config)
    where = f" in each of {copies} processes" if copies > 1 else ""
    raise ValueError(
        f"this run would need ~{need / 2**30:.1f} GB of memory ({blocks:,} KV blocks over "
        f"{num_workers(config)} instance(s) with prefix caching{where}), more than the "
        f"{have / 2**30:.1f} GB free here: lower num_instances, num_prefill or num_decode, set "
        f"kv_capacity_tokens or enable_prefix_caching=false"
        + (", or use fewer --jobs" if copies > 1 else "")
    )
