"""A run's configuration: frozen dataclasses, one per concern, validated on construction.

Notable features
- `SimConfig` = policy name + that policy's knobs + hardware + engine + topology + SLO targets.
  Frozen, so it is hashable: the same config (and workload) is the cache key of a run.
- `with_overrides(config, {"max_num_batched_tokens": "512", ...})` applies `--set key=value`
  strings (the CLI, URLs): the knob is found by name in whichever section owns it, converted to
  that field's type, and validated; a wrong name or value raises ONE clear ValueError.
- Knob names follow vLLM where vLLM has one (max_num_batched_tokens, max_num_seqs, ...).
- Every number must be finite and within a range that still describes a server (`_within`):
  names that exist (GPUs, models), at most MAX_INSTANCES instances, a KV link no slower than
  1 MB/s (slower freezes the clock: t + a step == t in float64), and so on. The message is one
  line that names the knob and says what to change. A visitor's tighter limits (steps, requests,
  instances) are sim/runs/budget.py's.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
from dataclasses import dataclass, field

from sim.cost.hardware import GIB, get_gpu, get_model
from sim.policies import DEFAULT_POLICY, POLICIES, Knobs, get_policy_class

TOPOLOGY_NAMES = ("colocated", "router", "disaggregated")
PROFILE_NAMES = ("fitted", "generic")  # HardwareConfig.profile
STEP_COSTS = ("roofline", "kernels")  # HardwareConfig.step_costs
# Routers by name; what each mirrors (a system and version, or PD Lab's own) is in
# sim/cluster/routers.py ROUTERS.
ROUTER_NAMES = ("round-robin", "least-loaded", "length", "dynamo-kv", "llm-d")
# disagg_mode: who prefills where; what each mirrors is in sim/cluster/deciders.py DECIDERS.
DISAGG_MODES = (
    "always",
    "conditional",
    "isl_bounding",
    "prefill_load",
    "isl_or_load",
    "llm-d-prefix",
)
DISAGG_PROTOCOLS = ("vllm", "distserve")


MAX_INSTANCES = 1024  # per topology (instances, or P and D workers each)
MAX_WHOLE = 10**9  # the largest whole number a knob may take (token counts, queue lengths)


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _within(name: str, value, lo: float, hi: float, unit: str = "", lo_open: bool = False) -> None:
    """`value` is a finite number in [lo, hi] (or (lo, hi]); else one line saying what to set."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and value <= hi
    if not ok:
        unit = f" {unit}" if unit else ""
        span = f"more than {lo:g} and at most" if lo_open else f"between {lo:g} and"
        raise ValueError(
            f"{name} must be {span} {hi:g}{unit}, got {value!r}: set {name} within that range"
        )


def _known(knob: str, lookup, name: str) -> None:
    """`lookup(name)` finds a catalog entry; else one line naming the knob and the choices."""
    try:
        lookup(name)
    except ValueError as err:
        raise ValueError(f"{knob}: {err}") from None


@dataclass(frozen=True)
class HardwareConfig:
    """Which GPU and model, and how efficiently the GPU runs (the device profile)."""

    gpu: str = "H100-SXM"  # a catalog name (sim/cost/hardware.py) or "custom"
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
    # fitted: mfu, mfu_attn, mbu and the two overheads left at their defaults take the values
    # fitted for the GPU to public vLLM measurements (sim/cost/profiles.py); generic: the defaults.
    profile: str = "fitted"
    # MoE, vLLM's --enable-expert-parallel: each rank holds whole experts. On topology=router the
    # instances are one data-parallel group whose experts are split across them (False =
    # independent full replicas); one tensor-parallel instance splits its experts whole across
    # its ranks instead of slicing each (the kernel tables' moe_tp 1, moe_ep = TP).
    expert_parallel: bool = False
    # roofline: every operator at the profile's efficiencies. kernels: linear layers, attention,
    # routed experts and TP all-reduces from NVIDIA's measured tables (aiconfigurator-core,
    # requirements-kernels.txt; sim/cost/kernel_tables.py) where they cover the GPU, model and
    # dtype, the roofline elsewhere, with the GPU's kernel profile (profiles.FITTED_KERNELS).
    step_costs: str = "roofline"
    # step_costs=kernels: measured kernel compute x this (fitted; sim/cost/measured_step.py)
    kernel_scale: float = 1.0
    # step_costs=kernels: the engine release whose tables to read, the nearest one measured
    # (e.g. "0.12.0" reads vLLM 0.19's MoE table before 0.24's); "" = the newest.
    kernel_version: str = ""

    def __post_init__(self) -> None:
        _require(
            self.step_costs in STEP_COSTS,
            f"step_costs must be one of {', '.join(STEP_COSTS)}, got {self.step_costs!r}",
        )
        _require(
            self.profile in PROFILE_NAMES,
            f"profile must be one of {', '.join(PROFILE_NAMES)}, got {self.profile!r}",
        )
        _within("tensor_parallel", self.tensor_parallel, 1, 64, "GPUs")
        for name in ("mfu", "mfu_attn", "mbu"):  # below 0.1% a step lasts hours
            _within(name, getattr(self, name), 0.001, 1)
        _within("overhead_ms", self.overhead_ms, 0, 10_000, "ms")
        _within("overhead_per_seq_ms", self.overhead_per_seq_ms, 0, 1_000, "ms")
        _within("kernel_scale", self.kernel_scale, 0.5, 5)
        _require(
            not self.kernel_version or re.fullmatch(r"\d+(\.\w+){0,4}", self.kernel_version),
            f"kernel_version must be a release such as 0.12.0 or 0.5.6.post2, "
            f"got {self.kernel_version!r}",
        )
        if self.gpu.lower() == "custom":
            for name, lo, hi, unit in (
                ("gpu_tflops", 0.1, 1e5, "TFLOP/s"),
                ("gpu_bw_gb_s", 1, 1e6, "GB/s"),
                ("gpu_mem_gb", 1, 1e5, "GB"),
            ):
                v = getattr(self, name)
                _require(
                    isinstance(v, numbers.Real) and math.isfinite(v) and v > 0,
                    f"gpu=custom needs {name} > 0 (e.g. --set {name}=...), got {v}",
                )
                _within(name, v, lo, hi, unit)
        else:
            _known("gpu", get_gpu, self.gpu)
        _known("model", get_model, self.model)


@dataclass(frozen=True)
class EngineConfig:
    """KV memory and what happens when it runs out."""

    kv_capacity_tokens: int = 0  # 0 = derive from GPU memory minus weights
    mem_utilization: float = 0.9  # share of GPU memory the engine may use (vLLM's default)
    block_size: int = 16  # tokens per KV block
    preemption_mode: str = "recompute"  # recompute | swap (KV to host memory over PCIe)
    swap_space_gb: float = 4.0  # host memory for swapped KV per instance (vLLM V0: 4 GiB)
    # GB per GPU kept off the KV cache beside the weights (activations, sampler, buffers);
    # 0 = the engine's own (vLLM: its start-up profile run; others 1 GB): Knobs.kv_reserve_gb
    activation_reserve_gb: float = 0.0

    def __post_init__(self) -> None:
        _within("kv_capacity_tokens", self.kv_capacity_tokens, 0, 10**8, "tokens (0 = auto)")
        _within("activation_reserve_gb", self.activation_reserve_gb, 0, 1000, "GB (0 = auto)")
        _require(
            self.kv_capacity_tokens == 0 or self.kv_capacity_tokens >= self.block_size,
            f"kv_capacity_tokens={self.kv_capacity_tokens} is less than one KV block "
            f"({self.block_size} tokens): set kv_capacity_tokens to 0 (auto) or at least "
            f"{self.block_size}",
        )
        _within("mem_utilization", self.mem_utilization, 0, 1, lo_open=True)
        _within("block_size", self.block_size, 1, 1024, "tokens")
        _require(
            self.preemption_mode in ("recompute", "swap"),
            f"preemption_mode must be recompute or swap, got {self.preemption_mode!r}",
        )
        _within("swap_space_gb", self.swap_space_gb, 0, 10_000, "GB")


@dataclass(frozen=True)
class TopologyConfig:
    """How many instances, and how requests reach them."""

    topology: str = "colocated"  # colocated | router | disaggregated
    num_instances: int = 2  # router: instances (the length router keeps the last for long prompts)
    router: str = "length"  # router: round-robin | least-loaded | length | dynamo-kv | llm-d
    length_threshold: int = 8192  # router=length: prompts of at least this many tokens go long
    # router=dynamo-kv: Dynamo 1.6.1's KvRouterConfig knobs, at its defaults
    router_temperature: float = 0.0  # 0 = lowest cost; > 0 = softmax sampling over costs
    overlap_score_credit: float = 1.0  # cached blocks credited off prefill (0 = cache ignored)
    prefill_load_scale: float = 1.0  # weight of the prefill term against decode blocks
    decode_active_request_weight: float = 0.0  # per active request
    # router=llm-d: scorer weights of the llm-d / gateway-api-inference-extension defaults
    llmd_prefix_weight: float = 3.0
    llmd_queue_weight: float = 2.0
    llmd_kv_weight: float = 2.0
    llmd_load_weight: float = 1.0
    num_prefill: int = 1  # disaggregated: prefill-only instances (P)
    num_decode: int = 1  # disaggregated: decode-only instances (D)
    kv_bandwidth_gb_s: float = 50.0  # P->D KV link, GB/s one way (50 = InfiniBand NDR 400)
    kv_latency_ms: float = 1.0  # fixed cost per transfer (handshake), milliseconds
    # always | conditional (PD Lab's own) | isl_bounding | prefill_load | isl_or_load (Dynamo
    # 1.6.1) | llm-d-prefix (llm-d's prefix-based decider)
    disagg_mode: str = "always"
    max_local_prefill_length: int = 1000  # conditional: prompts up to this prefill on D
    max_prefill_queue: int = 2  # conditional: remote prefill only while P's queue is shorter
    eff_isl_threshold: int = 2048  # isl_bounding: local only if uncached prompt < this
    eff_isl_ratio_threshold: float = 0.7  # isl_bounding: ... and uncached / prompt < this
    # prefill_load: P busy = active prompt tokens > this x max_num_batched_tokens (0 = unset,
    # Dynamo's default: the signal is unknown, read as calm, so it never goes local)
    prefill_busy_threshold: float = 0.0
    non_cached_tokens: int = 0  # llm-d-prefix: remote only if uncached >= this (0 = always)
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
        for name in ("num_instances", "num_prefill", "num_decode"):
            _within(name, getattr(self, name), 1, MAX_INSTANCES)
        _within("length_threshold", self.length_threshold, 1, MAX_WHOLE, "tokens")
        # 1 MB/s at the slowest: a slower link's transfers outgrow float64's resolution of a step
        _within("kv_bandwidth_gb_s", self.kv_bandwidth_gb_s, 0.001, 1e6, "GB/s")
        _within("kv_latency_ms", self.kv_latency_ms, 0, 60_000, "ms")
        _require(
            self.disagg_mode in DISAGG_MODES,
            f"disagg_mode must be one of {', '.join(DISAGG_MODES)}, got {self.disagg_mode!r}",
        )
        _within("router_temperature", self.router_temperature, 0, 1000)
        for name in ("overlap_score_credit", "prefill_load_scale", "decode_active_request_weight"):
            _within(name, getattr(self, name), 0, 1000)
        for name in (
            "llmd_prefix_weight",
            "llmd_queue_weight",
            "llmd_kv_weight",
            "llmd_load_weight",
        ):
            _within(name, getattr(self, name), 0, 1000)
        _within("eff_isl_threshold", self.eff_isl_threshold, 0, MAX_WHOLE, "tokens")
        _within("eff_isl_ratio_threshold", self.eff_isl_ratio_threshold, 0, 1)
        _within("prefill_busy_threshold", self.prefill_busy_threshold, 0, 1000)
        _within("non_cached_tokens", self.non_cached_tokens, 0, MAX_WHOLE, "tokens")
        _within("max_local_prefill_length", self.max_local_prefill_length, 0, MAX_WHOLE, "tokens")
        _within("max_prefill_queue", self.max_prefill_queue, 1, MAX_WHOLE)
        if self.decode_gpu:
            _known("decode_gpu", get_gpu, self.decode_gpu)
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
        _within("ttft_slo_s", self.ttft_slo_s, 0, 1e6, "s", lo_open=True)
        _within("tpot_slo_s", self.tpot_slo_s, 0, 1e6, "s", lo_open=True)


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
        if self.engine.kv_capacity_tokens == 0:  # auto: the share of memory must exceed the reserve
            hw = self.hardware
            gpu = None if hw.gpu.lower() == "custom" else get_gpu(hw.gpu)
            mem = gpu.usable_gib if gpu else hw.gpu_mem_gb
            usable = self.engine.mem_utilization * mem * GIB / 1e9  # GB
            reserve = self.kv_reserve_gb(hw.gpu, gpu.mem_gb if gpu else hw.gpu_mem_gb)
            _require(
                usable > reserve,
                f"mem_utilization={self.engine.mem_utilization:g} leaves {usable:.3g} GB of the "
                f"GPU's {mem:g} GiB, not more than the {reserve:.3g} GB kept for activations: "
                f"raise mem_utilization (vLLM's default is 0.9) or set kv_capacity_tokens",
            )

    def kv_reserve_gb(self, gpu_name: str, mem_gb: float) -> float:
        """GB per GPU this run keeps off the KV cache beside the weights on that GPU: the
        engine setting, else what the policy's engine keeps with its knobs resolved there."""
        if self.engine.activation_reserve_gb:
            return self.engine.activation_reserve_gb
        knobs = self.knobs.for_gpu(gpu_name, mem_gb)
        return knobs.kv_reserve_gb(get_model(self.hardware.model), self.hardware.tensor_parallel)

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
            if not as_float.is_integer() or abs(as_float) > MAX_WHOLE:
                raise ValueError
            return int(as_float)
        if isinstance(default, float):
            value = float(raw)
            if not math.isfinite(value):
                raise ValueError
            return value
    except ValueError:
        kind = {
            bool: "true/false",
            int: f"whole number up to {MAX_WHOLE:,}",
            float: "finite number",
        }[type(default)]
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
