"""vLLM V1's scheduler settings (vllm 0.33.0's names and defaults), for `vllm` and `short-first`.

Split from sim/policies/vllm_v1.py, which mirrors the scheduler itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import ClassVar

from sim.core.speculation import METHODS, acceptance_table
from sim.cost.engine_memory import vllm_profile_reserve_gb
from sim.policies import base
from sim.policies.base import Knobs

GIB = 1024**3
MAX_SPEC_TOKENS = 16  # a bound on k (vLLM's EAGLE heads use 1-7; DFlash 16)
MAX_MODEL_LEN = 131072  # Llama-3.1's context, the catalog models' max_model_len


def vllm_batch_defaults(gpu_name: str, mem_gb: float) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) that `vllm serve` picks for a GPU.

    vllm/engine/arg_utils.py, `EngineArgs.get_batch_defaults` (OPENAI_API_SERVER column):
    >= 160 GiB (B200, B300): 16384 / 1024; >= 70 GiB and not an A100 (H100, H200): 8192 / 1024;
    otherwise (A100, L40S, RTX 4090, ...): 2048 / 256. (The offline `LLM` class uses larger
    budgets; PD Lab models a server.)
    """
    mem = mem_gb * 1e9
    if mem >= 160 * GIB:
        return 16384, 1024
    if mem >= 70 * GIB and "a100" not in gpu_name.lower():
        return 8192, 1024
    return 2048, 256


@dataclass(frozen=True)
class VllmEngineKnobs(Knobs):
    """vLLM V1's scheduler settings shared by `vllm` and `short-first` (vLLM's names)."""

    max_num_batched_tokens: int = 0  # token budget per step; 0 = vLLM's default for the GPU
    max_num_seqs: int = 0  # running requests at most; 0 = vLLM's default for the GPU
    long_prefill_token_threshold: int = 0  # cap on one request's tokens per step (0 = none)
    enable_chunked_prefill: bool = True  # False: a prompt that does not fit whole waits
    enable_prefix_caching: bool = True  # vLLM V1's default
    scheduler_reserve_full_isl: bool = True  # admit only if the whole prompt's KV fits
    # --async-scheduling (on by default from vLLM 0.14): the next step is scheduled while this
    # one runs, so a request that arrives during a step joins the step after next. False is the
    # reference the differential tests drive (sim/policies/vllm_v1.py says why).
    async_scheduling: bool = False

    MEANINGS: ClassVar[Mapping[str, str]] = {
        "max_num_batched_tokens": base.STEP_BUDGET,  # without chunking: see meaning()
        "max_num_seqs": base.MAX_SEQS,
        "long_prefill_token_threshold": "a cap on one request's prefill tokens per step",
        "enable_chunked_prefill": "chunked prefill on or off",
        "enable_prefix_caching": base.PREFIX_CACHING,
        "scheduler_reserve_full_isl": "admission reserving KV for the whole prompt",
        "async_scheduling": "async scheduling: an arrival joins the step after next",
    }

    @classmethod
    def meaning(cls, name, values):
        if name == "max_num_batched_tokens" and not values["enable_chunked_prefill"]:
            return base.WHOLE_PROMPT_BUDGET  # vLLM then needs it >= max_model_len
        return super().meaning(name, values)

    def __post_init__(self) -> None:
        for name in ("max_num_batched_tokens", "max_num_seqs", "long_prefill_token_threshold"):
            if getattr(self, name) < 0:
                raise ValueError(
                    f"{name} must be >= 0 (0 = vLLM's default), got {getattr(self, name)}"
                )
        if 0 < self.max_num_batched_tokens < self.max_num_seqs:
            # vllm/config/scheduler.py refuses it too.
            raise ValueError(
                f"max_num_batched_tokens ({self.max_num_batched_tokens}) must be >= "
                f"max_num_seqs ({self.max_num_seqs})"
            )

    # Speculative decoding is off unless the knobs have it (VllmKnobs): vLLM's derived values.
    num_spec_tokens: ClassVar[int] = 0
    num_lookahead_tokens: ClassVar[int] = 0
    draft_slots: ClassVar[int] = 0
    num_hash_lookahead_tokens: ClassVar[int] = 0

    def kv_reserve_gb(self, model, tensor_parallel: int) -> float:
        """vLLM's profile run, as the release these knobs mirror runs it (sim/cost/
        engine_memory.py): its sampler samples one token for each of min(max_num_seqs,
        max_num_batched_tokens) dummy requests."""
        if not (self.max_num_seqs and self.max_num_batched_tokens):
            raise ValueError("kv_reserve_gb needs the knobs resolved for a GPU (for_gpu)")
        requests = min(self.max_num_seqs, self.max_num_batched_tokens)
        return vllm_profile_reserve_gb(model, tensor_parallel, requests)

    def for_gpu(self, gpu_name: str, mem_gb: float) -> VllmEngineKnobs:
        """These knobs with 0 ("vLLM's default") replaced by what vLLM picks on that GPU.

        vllm/engine/arg_utils.py `_set_default_max_num_seqs_and_batched_tokens_args`
        (3151-3240): without chunked prefill the default budget is at least max_model_len; a
        default max_num_seqs never exceeds the budget.
        """
        tokens, seqs = vllm_batch_defaults(gpu_name, mem_gb)
        if not self.max_num_batched_tokens and not self.enable_chunked_prefill:
            tokens = max(tokens, MAX_MODEL_LEN)
        budget = self.max_num_batched_tokens or tokens
        return replace(
            self,
            max_num_batched_tokens=budget,
            max_num_seqs=self.max_num_seqs or min(seqs, budget),
        )


@dataclass(frozen=True)
class VllmKnobs(VllmEngineKnobs):
    scheduling_policy: str = "fcfs"  # fcfs | priority (lower priority value first)
    # Speculative decoding (vLLM's --speculative-config; sim/core/speculation.py).
    speculative: str = ""  # "" (off) | ngram | draft | eagle: vLLM's method ngram/draft_model/eagle
    num_speculative_tokens: int = 3  # k: draft tokens proposed per step
    spec_acceptance: str = ""  # a table name or rates "0.8,0.6,0.4[@propose]"; "" = the default
    spec_seed: int = 0  # seed of the acceptance draws
    draft_model: str = "Llama-3.2-1B"  # speculative=draft: the catalog model that drafts
    # vLLM's model runner (VLLM_USE_V2_MODEL_RUNNER): v2, 0.33's default, drafts k tokens every
    # step (an n-gram miss fills them with the last token); v1 drafts only what n-gram finds.
    model_runner: str = "v2"

    MEANINGS: ClassVar[Mapping[str, str]] = {
        **VllmEngineKnobs.MEANINGS,
        "scheduling_policy": "vLLM's order of the waiting queue",
        "speculative": "the speculative decoding method",
        "num_speculative_tokens": "draft tokens per step",
        "spec_acceptance": "the drafts' acceptance rates per position",
        "spec_seed": "the seed of the acceptance draws",
        "draft_model": "the draft model of speculative=draft",
        "model_runner": "vLLM's model runner (how an n-gram miss is drafted)",
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.scheduling_policy not in ("fcfs", "priority"):
            raise ValueError(
                f"scheduling_policy must be fcfs or priority, got {self.scheduling_policy!r}"
            )
        if self.speculative not in ("", *METHODS):
            raise ValueError(
                f"speculative must be one of {', '.join(METHODS)} (or empty for off), "
                f"got {self.speculative!r}"
            )
        if not 1 <= self.num_speculative_tokens <= MAX_SPEC_TOKENS:
            raise ValueError(
                f"num_speculative_tokens must be between 1 and {MAX_SPEC_TOKENS}, "
                f"got {self.num_speculative_tokens}"
            )
        if self.model_runner not in ("v1", "v2"):
            raise ValueError(f"model_runner must be v1 or v2, got {self.model_runner!r}")
        if self.speculative:
            acceptance_table(self.spec_acceptance, self.speculative)  # raises if malformed

    # What vLLM derives from the speculative config (vllm/config/vllm.py, speculative.py).

    @property
    def num_spec_tokens(self) -> int:
        """k, or 0 with speculation off (`VllmConfig.num_speculative_tokens`)."""
        return self.num_speculative_tokens if self.speculative else 0

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots reserved past the scheduled tokens, for the drafter's own KV
        (`VllmConfig.num_lookahead_tokens`, vllm/config/vllm.py 626-653): k for a draft model or
        EAGLE, 0 for n-gram (it has no KV)."""
        return self.num_speculative_tokens if self.speculative in ("draft", "eagle") else 0

    @property
    def num_hash_lookahead_tokens(self) -> int:
        """Tokens after each KV block that its prefix-cache hash covers
        (`VllmConfig.num_hash_lookahead_tokens`, vllm/config/vllm.py 678-692): 1 under EAGLE
        with prefix caching (its drafter reads the next token), else 0. It also turns off
        EAGLE's older rule of dropping the last hit block (scheduler.py 345)."""
        return 1 if self.speculative == "eagle" and self.enable_prefix_caching else 0

    @property
    def draft_slots(self) -> int:
        """Extra input rows per scheduled request (`max_num_new_slots_for_drafting`,
        vllm/config/speculative.py 2058-2097): 1 for a (non-parallel) draft model, else 0."""
        return 1 if self.speculative == "draft" else 0
