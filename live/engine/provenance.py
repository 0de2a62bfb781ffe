"""Which device made a measurement: GPU model, memory, driver, CUDA and torch; or the CPU.

A recording (live/engine/recording.py) or a report is only worth its provenance: the same engine
decodes 8b-like in 5 ms on one GPU and 50 ms on another. `device_provenance()` asks torch (and
`nvidia-smi` for the driver, which torch does not expose) at measurement time; `describe()`
turns the stored dict into one line without importing torch (the hosted Live page has none).
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

NOT_RECORDED = "not recorded"


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what platform says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or NOT_RECORDED


def nvidia_driver() -> str:
    """The NVIDIA driver version (nvidia-smi), or NOT_RECORDED."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return NOT_RECORDED


def device_provenance(device=None) -> dict:
    """kind, torch, cpu, cores; on CUDA also gpu, gpu_memory_gb, driver, cuda, capability."""
    import torch

    dev = (
        torch.device(device)
        if device is not None
        else torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    out = {
        "kind": dev.type,
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
    }
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        out.update(
            {
                "gpu": props.name,
                "gpu_memory_gb": round(props.total_memory / 1e9, 1),
                "driver": nvidia_driver(),
                "cuda": torch.version.cuda,
                "capability": f"{props.major}.{props.minor}",
                "gpus": torch.cuda.device_count(),
            }
        )
    return out


def describe(dev: dict | None) -> str:
    """One line: 'NVIDIA H200 (141.0 GB, driver 570.86, CUDA 13.0, torch 2.11.0) on AMD EPYC
    (16 cores)' or 'AMD EPYC (2 cores, torch 2.13.0+cpu)'. Missing fields read 'not recorded'."""
    dev = dev or {}
    get = lambda key: dev.get(key) or NOT_RECORDED  # noqa: E731
    host = f"{get('cpu')} ({get('cores')} cores"
    if dev.get("kind") == "cuda":
        mem = dev.get("gpu_memory_gb")
        mem = f"{mem:g} GB" if isinstance(mem, int | float) else f"memory {NOT_RECORDED}"
        return (
            f"{get('gpu')} ({mem}, driver {get('driver')}, CUDA {get('cuda')}, "
            f"torch {get('torch')}) on {host})"
        )
    return f"{host}, torch {get('torch')})"
