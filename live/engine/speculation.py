"""Real n-gram (prompt lookup) speculation for the live engine: what sim's draws stand in for.

The simulator decides drafts and acceptance by seeded draws from a table
(sim/core/speculation.py, `DrawnSpeculator`). Here they are what the model really does:
- PROPOSE: after a step in which a request sampled, vLLM's n-gram proposer looks its own token
  ids (prompt + generated so far) up for the longest suffix that appeared before, and drafts the
  tokens that followed it: k of them, the last sampled token filling what no match gives
  (`ngram_draft`, a port of 0.33's default V2-runner GPU kernel; `ngram_propose`, the V1
  runner's numba proposer, is kept as the oracle its tests check it against). The runner calls
  `lookup` inside its timed step, as vLLM's model runner drafts inside `execute_model`
  (`propose_draft_token_ids`, vllm/v1/worker/gpu_model_runner.py 4714-4747).
- VERIFY: the next step feeds [last sampled token] + drafts to the target, which accepts the
  longest prefix of drafts equal to its own greedy choice and adds one token of its own
  (live/engine/runner.py, `ModelRunner.execute`); the runner reports what it measured here
  (`verified`).
- The engine asks through sim's `Speculator` protocol, inside `Engine.complete`:
  `accepted(req, drafts)` (what the runner measured in the verify that just ran) and
  `propose(req)` (how many drafts `lookup` found for its next step).

`SpecStats` counts what the benchmark and the Live page report: per-position acceptance
(accepted at position i / verify steps with drafts, vLLM's `num_accepted_tokens_per_pos /
num_drafts`) and the propose share (lookups that found a match / lookups), the two things
`sim.core.speculation.AcceptanceTable` holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sim.core.request import Request

# vLLM's defaults for method=ngram when neither is given (vllm/config/speculative.py 1302-1305:
# "TODO(woosuk): Tune these values. They are arbitrarily chosen.").
PROMPT_LOOKUP_MIN = 5
PROMPT_LOOKUP_MAX = 5
LIVE_METHODS = ("ngram",)  # what the live engine can run (no draft model, no EAGLE head)


def ngram_propose(
    tokens: Sequence[int], min_n: int, max_n: int, k: int, max_model_len: int
) -> list[int]:
    """Draft ids for a request whose token ids so far are `tokens` (vLLM's prompt lookup).

    A line-by-line port of `_find_longest_matched_ngram_and_propose_tokens`
    (vllm/v1/spec_decode/ngram_proposer.py 209-295, vllm 0.33.0), numba removed:
    - no drafts if the text is shorter than `min_n` (222-225) or has no room left before
      `max_model_len` (227-230: k = min(k, max_model_len - len(tokens)));
    - KMP over the REVERSED tokens finds the longest n-gram (capped at `max_n`) that ends the
      text and also occurs earlier; among equally long matches the EARLIEST one in the text wins
      (`prev_lps >= longest_ngram` moves `position` on, 263-265);
    - no drafts if that n-gram is shorter than `min_n` (285-287);
    - else the up to k tokens that followed the match, fewer if the text ends first (293-295).
    """
    total_token = len(tokens)
    if total_token < min_n:
        return []
    k = min(k, max_model_len - total_token)
    if k <= 0:
        return []
    rev = tokens[::-1]
    lps = [0] * max_n  # lps[i] for the first max_n prefixes only
    longest_ngram = position = 0
    prev_lps, i = 0, 1
    while i < total_token:
        if rev[prev_lps] == rev[i]:
            prev_lps += 1
            if prev_lps >= longest_ngram:  # the latest i = the earliest match in the text
                longest_ngram, position = prev_lps, i
            if i < max_n:
                lps[i] = prev_lps
            if prev_lps == max_n:  # never match longer than max_n
                prev_lps = lps[max_n - 1]
            i += 1
        elif prev_lps != 0:
            prev_lps = lps[prev_lps - 1]
        else:
            i += 1
    if longest_ngram < min_n:
        return []
    start = total_token - 1 - position + longest_ngram
    k = min(k, total_token - start)
    return list(tokens[start : start + k])


def ngram_draft(
    tokens: Sequence[int], min_n: int, max_n: int, k: int, max_model_len: int
) -> tuple[list[int], int]:
    """(k draft ids, how many came from a match) as vLLM 0.33's DEFAULT runner drafts them.

    A port of the V2 model runner's GPU n-gram speculator (`_ngram_scan_kernel` and
    `_ngram_finalize_kernel`, vllm/v1/worker/gpu/spec_decode/ngram/speculator.py 20-148), which
    0.33 uses unless VLLM_USE_V2_MODEL_RUNNER=0:
    - for every n from min_n to max_n, every earlier position where the last n tokens occur
      (a match must end before the text's last token, 73-83); the score n * (L + 1) + pos + 1
      picks the LONGEST n, then the RIGHTMOST position (86-88; `ngram_propose`, the V1 runner's
      proposer, takes the earliest);
    - the drafts are the tokens after the match; slots past the text's end, or all k when
      nothing matches, hold the last sampled token: "verified as ordinary (rejectable) drafts,
      so the fill value only affects efficiency" (145-147). So every decoding request verifies
      k rows each step, as sim/core/speculation.py schedules them.
    Here k is also cut to the rows left before `max_model_len` (the KV store's rows): vLLM's
    scheduler cuts the drafts it schedules there (scheduler.py 851-857).
    """
    k = min(k, max_model_len - len(tokens))
    if k <= 0 or not tokens:
        return [], 0
    seq_len, last = len(tokens), tokens[-1]
    best_n = best_pos = -1
    for n in range(min_n, min(max_n, seq_len - 1) + 1):
        suffix = list(tokens[seq_len - n :])
        for pos in range(seq_len - n - 1, -1, -1):  # rightmost first: the first found wins
            if tokens[pos] == suffix[0] and list(tokens[pos : pos + n]) == suffix:
                best_n, best_pos = n, pos  # a longer n found later replaces it
                break
    if best_n < 0:
        return [last] * k, 0
    start = best_pos + best_n
    matched = list(tokens[start : start + k])
    return matched + [last] * (k - len(matched)), len(matched)


@dataclass
class SpecStats:
    """What a run's speculation did, counted as vLLM's spec-decode metrics count it."""

    k: int
    lookups: int = 0  # sampling events after which the drafter looked (requests not finished)
    proposed: int = 0  # ... and found a match (drafts > 0)
    verifies: int = 0  # verify steps with real drafts
    drafted: int = 0  # real drafts verified
    accepted: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)  # position i+1 accepted, counts
    drafts_hist: list[int] = field(default_factory=list)  # verifies with d drafts, d = 0..k

    def __post_init__(self) -> None:
        self.accepted_per_pos = self.accepted_per_pos or [0] * self.k
        self.drafts_hist = self.drafts_hist or [0] * (self.k + 1)

    def summary(self) -> dict:
        """Rates: acceptance, tokens per verify, per-position acceptance, propose share."""
        v = self.verifies
        return {
            "k": self.k,
            "lookups": self.lookups,
            "proposed": self.proposed,
            "propose_share": self.proposed / self.lookups if self.lookups else 0.0,
            "verify_steps": v,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "acceptance_rate": self.accepted / self.drafted if self.drafted else 0.0,
            "tokens_per_verify": 1 + self.accepted / v if v else 1.0,
            "per_position": [a / v if v else 0.0 for a in self.accepted_per_pos],
            "drafts_hist": list(self.drafts_hist),
        }


def merged_summary(speculators) -> dict:
    """`SpecStats.summary` over several workers' speculators (a routed run's instances)."""
    k = max(sp.stats.k for sp in speculators)
    total = SpecStats(k)
    for sp in speculators:
        st = sp.stats
        for name in ("lookups", "proposed", "verifies", "drafted", "accepted"):
            setattr(total, name, getattr(total, name) + getattr(st, name))
        for i, a in enumerate(st.accepted_per_pos):
            total.accepted_per_pos[i] += a
        for i, d in enumerate(st.drafts_hist):
            total.drafts_hist[i] += d
    return total.summary()


class NgramSpeculator:
    """sim's `Speculator` protocol on a real model: the runner's lookups and measured verifies.

    One per engine (worker); its runner calls `lookup` and `verified`, the engine `propose` and
    `accepted`, in that order within each step.
    """

    method = "ngram"

    def __init__(
        self,
        k: int,
        max_model_len: int,
        min_n: int = PROMPT_LOOKUP_MIN,
        max_n: int = PROMPT_LOOKUP_MAX,
        fill_misses: bool = True,
    ) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(
                f"prompt_lookup_min ({min_n}) must be >= 1 and <= prompt_lookup_max ({max_n})"
            )
        if k < 1:
            raise ValueError(f"num_speculative_tokens must be >= 1, got {k}")
        self.k, self.min_n, self.max_n, self.max_model_len = k, min_n, max_n, max_model_len
        # vLLM 0.33's default V2 runner drafts k every step (`ngram_draft`); the V1 runner
        # (model_runner=v1) only what lookup finds (`ngram_propose`).
        self.fill_misses = fill_misses
        self.drafts: dict[int, list[int]] = {}  # request id -> draft ids for its next verify
        self._accepted: dict[int, int] = {}  # request id -> accepted in the verify just run
        self.stats = SpecStats(k)

    # ---- the runner's side (inside the timed step) ---------------------------------------

    def lookup(self, request_id: int, tokens: Sequence[int]) -> int:
        """Draft for a request that just sampled and goes on (vLLM 0.33's default runner: k
        drafts, matched or filled; the V1 runner: the matched ones); returns how many drafts."""
        if self.fill_misses:
            drafts, matched = ngram_draft(
                tokens, self.min_n, self.max_n, self.k, self.max_model_len
            )
        else:
            drafts = ngram_propose(tokens, self.min_n, self.max_n, self.k, self.max_model_len)
            matched = len(drafts)
        self.drafts[request_id] = drafts
        self.stats.lookups += 1
        self.stats.proposed += matched > 0
        return len(drafts)

    def draft_ids(self, request_id: int, n: int) -> list[int]:
        """The first `n` drafts proposed for a request (the scheduler may cut them)."""
        drafts = self.drafts.get(request_id, [])
        if len(drafts) < n:
            raise ValueError(
                f"request {request_id}: {n} drafts scheduled, {len(drafts)} were proposed"
            )
        return drafts[:n]

    def verified(self, request_id: int, drafts: int, accepted: int) -> None:
        """The runner verified `drafts` real drafts of a request and the target took `accepted`."""
        self._accepted[request_id] = accepted
        self.drafts.pop(request_id, None)
        s = self.stats
        s.verifies += 1
        s.drafted += drafts
        s.accepted += accepted
        s.drafts_hist[drafts] += 1
        for i in range(accepted):
            s.accepted_per_pos[i] += 1

    def forget(self, request_id: int) -> None:
        self.drafts.pop(request_id, None)
        self._accepted.pop(request_id, None)

    # ---- the engine's side (sim.core.speculation.Speculator) ------------------------------

    def accepted(self, req: Request, drafts: int) -> int:
        accepted = self._accepted.pop(req.request_id, None)
        if accepted is None:
            raise RuntimeError(f"request {req.request_id}: no verify of its drafts was run")
        return min(accepted, drafts)

    def propose(self, req: Request) -> int:
        return len(self.drafts.get(req.request_id, ()))


def live_speculator(knobs, max_model_len: int) -> NgramSpeculator | None:
    """The live speculator for a policy's knobs (None: speculation off); ValueError for a method
    the live engine cannot run."""
    method = getattr(knobs, "speculative", "")
    if not method:
        return None
    if method not in LIVE_METHODS:
        raise ValueError(
            f"the live engine runs speculative=ngram only (prompt lookup on the model's own "
            f"tokens); speculative={method} needs a draft model it does not have"
        )
    fill = getattr(knobs, "model_runner", "v2") == "v2"
    return NgramSpeculator(knobs.num_speculative_tokens, max_model_len, fill_misses=fill)


def check_live_speculation(config) -> None:
    """Refuse, before the model is taken, a speculative config the live engine cannot run."""
    method = getattr(config.knobs, "speculative", "")
    if not method:
        return
    live_speculator(config.knobs, 1)  # the method
    if config.topology.topology == "disaggregated":
        raise ValueError(
            "the live engine runs speculative decoding on colocated or routed instances only; "
            "use topology=colocated (or speculative= to turn it off)"
        )
