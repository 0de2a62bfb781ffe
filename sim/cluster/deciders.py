"""Conditional disaggregation: does a request prefill remotely (on P) or locally on its D worker?

Notable features
- Each decider is named by the system and version it mirrors, with the source's defaults:
  - Dynamo (ai-dynamo/dynamo lib/kv-router/src/conditional_disagg.rs @088ca50b, the 1.6.x
    policies): `isl_bounding`, `prefill_load`, `isl_or_load`; and the decode veto of
    lib/llm/src/kv_router/prefill_router/conditional_bypass.rs (`decode_gate_allows_bypass`).
    Tested against conditional_disagg.rs's own test vectors (tests/test_deciders.py).
  - llm-d (llm-d-inference-scheduler @06c08c08, pkg/plugins/profile/prefix_based_pd_decider.go):
    `llm-d-prefix`. Go is not run here: tested on hand traces that cite its lines.
  - `conditional`: PD Lab's own rule (prompt length and P's queue), kept as it was.
- A decider answers "disaggregate?" (True = remote prefill on P). Dynamo's policies answer the
  opposite question (bypass remote prefill), so `disaggregate = not bypass`.
"""

from __future__ import annotations

from dataclasses import dataclass

# conditional_disagg.rs: DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_THRESHOLD = 2048,
# DEFAULT_CONDITIONAL_DISAGG_EFF_ISL_RATIO_THRESHOLD = 0.7.
DYNAMO_EFF_ISL_THRESHOLD = 2048
DYNAMO_EFF_ISL_RATIO_THRESHOLD = 0.7
# prefix_based_pd_decider.go:49 (NonCachedTokens: 0 -> always disaggregate, line 94).
LLMD_NON_CACHED_TOKENS = 0
LLMD_CHARS_PER_TOKEN = 4  # pkg/plugins/profile/disagg_profile_handler.go:37

DECIDERS: dict[str, str] = {  # disagg_mode -> what it mirrors
    "always": "PD Lab's own (every request prefills on P)",
    "conditional": "PD Lab's own (prompt length and P's queue)",
    "isl_bounding": "Dynamo 1.6.1 (conditional_disagg.rs IslBoundingPolicy)",
    "prefill_load": "Dynamo 1.6.1 (conditional_disagg.rs PrefillLoadPolicy)",
    "isl_or_load": "Dynamo 1.6.1 (conditional_disagg.rs IslOrLoadPolicy)",
    "llm-d-prefix": "llm-d-inference-scheduler 06c08c08 (prefix_based_pd_decider.go)",
}


@dataclass(frozen=True)
class DisaggInput:
    """`ConditionalDisaggDecisionInput` (conditional_disagg.rs), plus the decode gate's signal."""

    prompt_tokens: int
    block_size: int
    decode_overlap_blocks: int = 0  # device-cache overlap on the decode worker the router picks
    prefill_busy: bool | None = None  # chosen P worker over its busy line; None = unknown
    decode_busy: bool | None = None  # chosen D worker over its busy line; None = unknown

    def net_new_tokens(self) -> int:
        """`net_new_tokens`: prompt minus the overlap, saturating at 0."""
        return max(0, self.prompt_tokens - self.decode_overlap_blocks * self.block_size)


def isl_bounding_bypass(
    inp: DisaggInput,
    enabled: bool = True,
    eff_isl_threshold: int = DYNAMO_EFF_ISL_THRESHOLD,
    eff_isl_ratio_threshold: float = DYNAMO_EFF_ISL_RATIO_THRESHOLD,
) -> bool:
    """`IslBoundingPolicy::should_bypass_remote_prefill`: bypass iff eff_isl < threshold and
    eff_isl / max(prompt, 1) < ratio threshold (both strict)."""
    if not enabled:
        return False
    eff = inp.net_new_tokens()
    if eff >= eff_isl_threshold:
        return False
    return eff / max(inp.prompt_tokens, 1) < eff_isl_ratio_threshold


def prefill_load_bypass(inp: DisaggInput, enabled: bool = True) -> bool:
    """`PrefillLoadPolicy`: bypass iff the chosen prefill worker is busy; unknown = calm."""
    return enabled and bool(inp.prefill_busy)


def isl_or_load_bypass(inp: DisaggInput, enabled: bool = True, **isl) -> bool:
    """`IslOrLoadPolicy`: either policy."""
    return isl_bounding_bypass(inp, enabled, **isl) or prefill_load_bypass(inp, enabled)


def decode_gate_allows_bypass(
    policy_says_bypass: bool, decode_gate_configured: bool, decode_busy: bool | None
) -> bool:
    """conditional_bypass.rs `decode_gate_allows_bypass`: with a decode-busy threshold set, a
    bypass also needs the decode worker known not busy (unknown vetoes)."""
    return policy_says_bypass and (not decode_gate_configured or decode_busy is False)


def prefill_busy(active_tokens: int, threshold: float, max_num_batched_tokens: int) -> bool:
    """Dynamo's prefill-busy line: active_tokens > threshold * max_num_batched_tokens."""
    return active_tokens > threshold * max_num_batched_tokens


def llmd_prefix_disaggregate(
    input_tokens: int,
    match_blocks: int,
    block_size_tokens: int,
    non_cached_tokens: int = LLMD_NON_CACHED_TOKENS,
) -> bool:
    """prefix_based_pd_decider.go `decide` (lines 93-136): True = run prefill on P.

    - NonCachedTokens <= 0: always disaggregate (line 94).
    - input shorter than NonCachedTokens: decode only (line 106).
    - non-cached suffix = input - matched blocks * block size (lines 124-126); shorter than
      NonCachedTokens: decode only (line 132); else disaggregate.
    The input length is estimated as prompt bytes / 4 (lines 151, 160); PD Lab knows the
    token count and passes it."""
    if non_cached_tokens <= 0:
        return True
    if input_tokens < non_cached_tokens:
        return False
    non_cached = input_tokens - match_blocks * block_size_tokens
    return non_cached >= non_cached_tokens


def dynamo_disaggregate(
    mode: str,
    inp: DisaggInput,
    eff_isl_threshold: int = DYNAMO_EFF_ISL_THRESHOLD,
    eff_isl_ratio_threshold: float = DYNAMO_EFF_ISL_RATIO_THRESHOLD,
    decode_gate_configured: bool = False,
) -> bool:
    """One of Dynamo's three policies, then the decode veto: True = remote prefill on P."""
    isl = {
        "eff_isl_threshold": eff_isl_threshold,
        "eff_isl_ratio_threshold": eff_isl_ratio_threshold,
    }
    if mode == "isl_bounding":
        bypass = isl_bounding_bypass(inp, **isl)
    elif mode == "prefill_load":
        bypass = prefill_load_bypass(inp)
    elif mode == "isl_or_load":
        bypass = isl_or_load_bypass(inp, **isl)
    else:
        raise ValueError(f"not a Dynamo policy: {mode!r}")
    return not decode_gate_allows_bypass(bypass, decode_gate_configured, inp.decode_busy)


# ---- Why: one request's decision with the figures it was made on ---------------------------
@dataclass(frozen=True)
class Decision:
    """What a decider answered for one request, and the inputs it compared (the run keeps them:
    `run.meta["decisions"]`). The functions above stay plain booleans, as their sources are;
    `decide` calls them and writes down what they read."""

    request_id: int
    mode: str  # the disagg_mode that decided
    remote: bool  # True = prefill on P, KV copied to D; False = prefill locally on D
    prompt_tokens: int
    cached_tokens: int  # the decode worker's prefix-cache hit, whole blocks
    uncached_tokens: int  # prompt - cached: what a local prefill would compute
    token_threshold: float  # Dynamo: eff_isl_threshold; llm-d: non_cached_tokens; nan = none
    ratio_threshold: float  # Dynamo: eff_isl_ratio_threshold (uncached / prompt); nan = none
    prefill_busy: bool | None = None  # Dynamo prefill_load's signal (None = unknown = calm)


def decide(
    request_id: int,
    mode: str,
    inp: DisaggInput,
    eff_isl_threshold: int = DYNAMO_EFF_ISL_THRESHOLD,
    eff_isl_ratio_threshold: float = DYNAMO_EFF_ISL_RATIO_THRESHOLD,
    non_cached_tokens: int = LLMD_NON_CACHED_TOKENS,
) -> Decision:
    """`mode`'s answer for one request (the named deciders above; `always` = remote), with the
    figures a student needs to see why."""
    nan = float("nan")
    token_t, ratio_t = nan, nan
    if mode == "always":
        remote = True
    elif mode == "llm-d-prefix":
        remote = llmd_prefix_disaggregate(
            inp.prompt_tokens, inp.decode_overlap_blocks, inp.block_size, non_cached_tokens
        )
        token_t = float(non_cached_tokens)
    else:
        remote = dynamo_disaggregate(mode, inp, eff_isl_threshold, eff_isl_ratio_threshold)
        if mode != "prefill_load":
            token_t, ratio_t = float(eff_isl_threshold), float(eff_isl_ratio_threshold)
    cached = min(inp.prompt_tokens, inp.decode_overlap_blocks * inp.block_size)
    return Decision(
        request_id,
        mode,
        remote,
        inp.prompt_tokens,
        cached,
        inp.net_new_tokens(),
        token_t,
        ratio_t,
        inp.prefill_busy,
    )
