"""A run's configuration: frozen dataclasses, one per concern, validated on construction.

Notable features
- `SimConfig` = policy name + that policy's knobs + hardware + engine + topology + SLO targets.
  Frozen, so it is hashable: the same config (and workload) is the cache key of a run.
- `with_overrides(config, {"max_num_batched_tokens": "512", ...})` applies `--set key=value`
  strings (the CLI, URLs): the knob is found by name in whichever section owns it, converted to
  that field's type, and validated; a wrong name or value raises ONE clear ValueError.
- Knob names follow vLLM where vLLM has one (max_num_batched_tokens, max_num_seqs, ...).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

from sim.policies import DEFAULT_POLICY, POLICIES, Knobs, get_policy_class

TOPOLOGY_NAMES = ("colocated", "router", "disaggregated")
ROUTER_NAMES = ("round-robin", "least-loaded", "length")
DISAGG_PROTOCOLS = ("vllm", "distserve")


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


@dataclass(frozen=True)
class HardwareConfig:
    """Which GPU and model, and how efficiently the GPU runs (the device profile)."""

    gpu: str = "H100-SXM"  # a catalog name (sim/hardware.py) or "custom"
    model: str = "Llama-3.1-8B"
    tensor_parallel: int = 1  # GPUs per instance (weights and KV split across them)
    mfu: float = 0.5  # share of peak FLOP/s reached by the linear layers
    mfu_attn: float = 0.4  # share of peak FLOP/s reached by prefill attention
    mbu: float = 0.7  # share of peak memory bandwidth reached
    overhead_ms: float = 3.0  # per step: scheduling, launches, sampling (milliseconds)
    overhead_per_seq_ms: float = 0.0  # per request in a step (large on CPUs; milliseconds)
    gpu_tflops: float = 0.0  # custom GPU only: dense BF16 TFLOP/s
    gpu_bw_gb_s: float = 0.0  # custom GPU only: memory bandwidth, GB/s
    gpu_mem_gb: float = 0.0  # custom GPU only: memory, GB

    def __post_init__(self) -> None:
        _require(self.tensor_parallel >= 1, "tensor_parallel must be >= 1")
        for name in ("mfu", "mfu_attn", "mbu"):
            v = getattr(self, name)
            _require(0 < v <= 1, f"{name} must be in (0, 1], got {v}")
        _require(self.overhead_ms >= 0, f"overhead_ms must be >= 0, got {self.overhead_ms}")
        _require(self.overhead_per_seq_ms >= 0, "overhead_per_seq_ms must be >= 0")
        if self.gpu.lower() == "custom":
            for name in ("gpu_tflops", "gpu_bw_gb_s", "gpu_mem_gb"):
                v = getattr(self, name)
                _require(
                    math.isfinite(v) and v > 0,
                    f"gpu=custom needs {name} > 0 (e.g. --set {name}=...), got {v}",
                )


@dataclass(frozen=True)
class EngineConfig:
    """KV memory and what happens when it runs out."""

    kv_capacity_tokens: int = 0  # 0 = derive from GPU memory minus weights
    mem_utilization: float = 0.9  # share of GPU memory the engine may use (vLLM's default)
    block_size: int = 16  # tokens per KV block
    preemption_mode: str = "recompute"  # recompute | swap (KV to host memory over PCIe)
    swap_space_gb: float = 4.0  # host memory for swapped KV per instance (vLLM V0: 4 GiB)

    def __post_init__(self) -> None:
        _require(self.kv_capacity_tokens >= 0, "kv_capacity_tokens must be >= 0 (0 = auto)")
        _require(0 < self.mem_utilization <= 1, "mem_utilization must be in (0, 1]")
        _require(self.block_size >= 1, "block_size must be >= 1")
        _require(
            self.preemption_mode in ("recompute", "swap"),
            f"preemption_mode must be recompute or swap, got {self.preemption_mode!r}",
        )
        _require(self.swap_space_gb >= 0, "swap_space_gb must be >= 0")


@dataclass(frozen=True)
class TopologyConfig:
    """How many instances, and how requests reach them."""

    topology: str = "colocated"  # colocated | router | disaggregated
    num_instances: int = 2  # router: instances (the length router keeps the last for long prompts)
    router: str = "length"  # router: round-robin | least-loaded | length
    length_threshold: int = 8192  # router=length: prompts of at least this many tokens go long
    num_prefill: int = 1  # disaggregated: prefill-only instances (P)
    num_decode: int = 1  # disaggregated: decode-only instances (D)
    kv_bandwidth_gb_s: float = 50.0  # P->D KV link, GB/s one way (50 = InfiniBand NDR 400)
    kv_latency_ms: float = 1.0  # fixed cost per transfer (handshake), milliseconds
    disagg_mode: str = "always"  # always | conditional (Dynamo: remote prefill only if long)
    max_local_prefill_length: int = 1000  # conditional: prompts up to this prefill on D
    max_prefill_queue: int = 2  # conditional: remote prefill only while P's queue is shorter
    decode_gpu: str = ""  # disaggregated: another GPU kind for D workers ("" = same as P)
    disagg_protocol: str = "vllm"  # who samples token 1: vllm (on D, as vLLM) | distserve (on P)

    def __post_init__(self) -> None:
        _require(
            self.topology in TOPOLOGY_NAMES,
            f"unknown topology {self.topology!r}; choose one of: {', '.join(TOPOLOGY_NAMES)}",
        )
        _require(
            self.router in ROUTER_NAMES,
            f"unknown router {self.router!r}; choose one of: {', '.join(ROUTER_NAMES)}",
        )
        _require(self.num_instances >= 1, "num_instances must be >= 1")
        _require(
            self.num_prefill >= 1 and self.num_decode >= 1,
            "num_prefill and num_decode must be >= 1",
        )
        _require(self.length_threshold >= 1, "length_threshold must be >= 1 token")
        _require(self.kv_bandwidth_gb_s > 0, "kv_bandwidth_gb_s must be > 0 GB/s")
        _require(self.kv_latency_ms >= 0, "kv_latency_ms must be >= 0")
        _require(
            self.disagg_mode in ("always", "conditional"),
            "disagg_mode must be always or conditional",
        )
        _require(self.max_local_prefill_length >= 0, "max_local_prefill_length must be >= 0")
        _require(self.max_prefill_queue >= 1, "max_prefill_queue must be >= 1")
        _require(
            self.disagg_protocol in DISAGG_PROTOCOLS,
            f"disagg_protocol must be one of {', '.join(DISAGG_PROTOCOLS)}, "
            f"got {self.disagg_protocol!r}",
        )


@dataclass(frozen=True)
class SLOConfig:
    """Latency targets a request must BOTH meet to count for goodput (seconds)."""

    ttft_slo_s: float = 3.0  # TNG interactive: first token within 3 s
    tpot_slo_s: float = 0.3  # TNG interactive: 100-300 ms per output token

    def __post_init__(self) -> None:
        _require(self.ttft_slo_s > 0 and self.tpot_slo_s > 0, "SLO targets must be > 0 seconds")


def default_knobs(policy: str) -> Knobs:
    return get_policy_class(policy).Knobs()


@dataclass(frozen=True)
class SimConfig:
    """Everything a run needs besides the workload."""

    policy: str = DEFAULT_POLICY
    knobs: Knobs | None = None  # None = the policy's defaults
    hardware: HardwareConfig = field(default_factory=HardwareConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    topology: TopologyConfig = field(default_factory=TopologyConfig)
    slo: SLOConfig = field(default_factory=SLOConfig)

    def __post_init__(self) -> None:
        cls = get_policy_class(self.policy)  # raises on an unknown name
        object.__setattr__(self, "policy", cls.name)
        if self.knobs is None:
            object.__setattr__(self, "knobs", cls.Knobs())
        _require(
            type(self.knobs) is cls.Knobs,
            f"knobs of type {type(self.knobs).__name__} do not belong to policy {cls.name}",
        )
        _require(
            self.engine.preemption_mode != "swap" or cls.supports_swap,
            f"preemption_mode=swap: {cls.mirrors.split(' (')[0]} preempts by recompute only; "
            "swap is vLLM V0's (policy vllm-v0 or prefill-first)",
        )

    def flat(self) -> dict:
        """All knobs as one flat dict (for summaries and file names)."""
        out = {"policy": self.policy}
        for section in (self.knobs, self.hardware, self.engine, self.topology, self.slo):
            out.update(dataclasses.asdict(section))
        return out


_SECTIONS = ("knobs", "hardware", "engine", "topology", "slo")


def _convert(name: str, raw, default):
    """Turn a --set string into the type of the field's default value."""
    if not isinstance(raw, str):
        return raw
    try:
        if isinstance(default, bool):
            if raw.lower() in ("1", "true", "yes", "on"):
                return True
            if raw.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(default, int):
            as_float = float(raw)
            if not as_float.is_integer():
                raise ValueError
            return int(as_float)
        if isinstance(default, float):
            return float(raw)
    except ValueError:
        kind = {bool: "true/false", int: "whole number", float: "number"}[type(default)]
        raise ValueError(f"{name} must be a {kind}, got {raw!r}") from None
    return raw


def knob_names(policy: str) -> list[str]:
    """Every name `with_overrides` accepts for this policy."""
    names = [f.name for f in dataclasses.fields(get_policy_class(policy).Knobs)]
    for section in (HardwareConfig, EngineConfig, TopologyConfig, SLOConfig):
        names += [f.name for f in dataclasses.fields(section)]
    return names


def with_overrides(config: SimConfig, overrides: dict) -> SimConfig:
    """A copy of `config` with knobs set by name (values may be strings, as typed on a CLI)."""
    changes: dict[str, dict] = {s: {} for s in _SECTIONS}
    for name, raw in overrides.items():
        for section in _SECTIONS:
            obj = getattr(config, section)
            fields = {f.name for f in dataclasses.fields(obj)}
            if name in fields:
                changes[section][name] = _convert(name, raw, getattr(obj, name))
                break
        else:
            owners = [
                p
                for p, cls in POLICIES.items()
                if name in {f.name for f in dataclasses.fields(cls.Knobs)}
            ]
            if owners:
                raise ValueError(
                    f"knob {name!r} belongs to policy {' / '.join(owners)}, not {config.policy}"
                )
            raise ValueError(
                f"unknown knob {name!r}; known: {', '.join(knob_names(config.policy))}"
            )
    new = {s: dataclasses.replace(getattr(config, s), **c) for s, c in changes.items() if c}
    return dataclasses.replace(config, **new)
