"""Speculative decoding: which drafted tokens the target model accepts (vLLM V1's bookkeeping).

How vLLM 0.33 V1 runs it (vllm/v1/core/sched/scheduler.py, synchronous scheduling):
- After a step, the drafter proposes k tokens for every request that sampled in it
  (`EngineCore.post_step` -> `Scheduler.update_draft_token_ids`, 2862-2885: ignored for a request
  still mid-prefill). With 0.33's default V2 model runner the drafts stay on the GPU and the
  scheduler gets k placeholders for every request (vllm/v1/worker/gpu/spec_decode/utils.py
  82-89), so every decoding request verifies k draft rows each step, whatever the method:
  n-gram lookup that finds no earlier match fills its rows with the last token
  (vllm/v1/worker/gpu/spec_decode/ngram/speculator.py 145-147), drafts that fail. The V1 model
  runner (VLLM_USE_V2_MODEL_RUNNER=0; knob model_runner=v1) drafts only what lookup finds, so a
  miss verifies nothing: a plain decode.
- The next step schedules `num_tokens_with_spec - num_computed_tokens` = 1 + drafts tokens for it
  (793-1040): the target model VERIFIES the drafts in one forward pass, computing logits at all
  1 + drafts positions.
- The target accepts the longest prefix of drafts that match what it would have sampled, and
  adds one token of its own (the "bonus" or corrected token): 1 + accepted tokens per verify.
- `update_from_output` rolls the rejected ones back: `num_computed_tokens -= num_rejected`
  (2346-2363). Their KV slots stay allocated and are written over later.

Here the ACCEPTANCE is a model, not a model run: per-position rates from a public table (or the
user's), drawn per (request, sampling event) from a seed, so runs reproduce and a differential
test can hand the same draws to the real scheduler. The live engine (live/) replaces the draws by
a real n-gram proposer and a real greedy verification on its torch model.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from sim.core.engine import Engine
    from sim.core.request import Request

METHODS = ("ngram", "draft", "eagle")  # --set speculative=...; "" = off


@dataclass(frozen=True)
class AcceptanceTable:
    """Per-position acceptance of one drafter: `rates[i]` = share of verify steps in which draft
    position i+1 was accepted (vLLM's `spec_decode_num_accepted_tokens_per_pos / num_drafts`, so
    non-increasing: position i+1 is accepted only if position i was), among the steps where the
    drafter found drafts; `propose` = the share of steps where it did (n-gram lookup finds no
    match in the rest, and all k rows fail)."""

    name: str
    rates: tuple[float, ...]
    source: str
    propose: float = 1.0

    def __post_init__(self) -> None:
        if not self.rates:
            raise ValueError("an acceptance table needs at least one rate")
        last = 1.0
        for i, r in enumerate(self.rates, 1):
            if not 0.0 <= r <= 1.0:
                raise ValueError(f"acceptance rate at position {i} must be in [0, 1], got {r}")
            if r > last + 1e-12:
                raise ValueError(
                    f"acceptance rates must not increase with the position (a draft is accepted "
                    f"only after every earlier one): position {i} has {r} > {last}"
                )
            last = r
        if not 0.0 <= self.propose <= 1.0:
            raise ValueError(f"propose must be in [0, 1], got {self.propose}")

    def rate(self, position: int) -> float:
        """The rate at draft position `position` (1-based); past the table, each further
        position keeps the table's last ratio (a geometric tail)."""
        rates = self.rates
        if position <= len(rates):
            return rates[position - 1]
        ratio = rates[-1] / rates[-2] if len(rates) > 1 and rates[-2] > 0 else rates[-1]
        return rates[-1] * ratio ** (position - len(rates))

    def mean_accepted(self, k: int) -> float:
        """Expected accepted drafts per verify step with k drafts (acceptance length - 1)."""
        return sum(self.rate(i) for i in range(1, k + 1))


# vLLM's own baselines (tests/v1/spec_decode/test_acceptance_length.py, vllm-project/vllm):
# EAGLE-3 speculators on MT-Bench, 80 prompts, 256 output tokens, temperature 0, k = 3.
EAGLE3_SOURCE = (
    "vLLM tests/v1/spec_decode/test_acceptance_length.py: EAGLE-3 on MT-Bench "
    "(80 prompts, 256 tokens, temperature 0, k=3)"
)
# PD Lab's own measurement of prompt lookup on its live model: bench/bench_live_spec.py
# --repeats 3 --out-tokens 64 (SmolLM2-135M, greedy, k=3, prompt_lookup_min = max = 5; prompts
# that copy, summarise or edit a passage), V1 runner: 2,928 verify steps. Rates are among the
# steps whose lookup matched; the lookup matched after 25.7% of sampling events.
NGRAM_SOURCE = (
    "PD Lab bench/bench_live_spec.py on SmolLM2-135M (copy, summarise, edit prompts; k=3, "
    "prompt lookup 5/5, greedy)"
)
TABLES: dict[str, AcceptanceTable] = {
    t.name: t
    for t in (
        AcceptanceTable("ngram-smollm2-135m", (0.902, 0.738, 0.736), NGRAM_SOURCE, 0.257),
        AcceptanceTable("eagle3-llama3.1-8b", (0.7296, 0.5208, 0.3545), EAGLE3_SOURCE),
        AcceptanceTable("eagle3-qwen3-8b", (0.6541, 0.3993, 0.2020), EAGLE3_SOURCE),
        AcceptanceTable("eagle3-gpt-oss-20b", (0.7165, 0.5120, 0.3337), EAGLE3_SOURCE),
    )
}
# The table each method uses when the user gives none. vLLM's tests publish per-position rates
# for EAGLE-3 only; a draft model borrows the Llama one (the page says so); n-gram lookup uses
# PD Lab's measurement on its live model.
DEFAULT_TABLE = {
    "eagle": "eagle3-llama3.1-8b",
    "draft": "eagle3-llama3.1-8b",
    "ngram": "ngram-smollm2-135m",
}


def acceptance_table(spec: str, method: str) -> AcceptanceTable:
    """The table `spec` names, or rates the user typed ("0.8,0.6,0.4", optionally with
    "@0.5" for the share of steps that propose), or the method's default for ""."""
    spec = spec.strip()
    if not spec:
        return TABLES[DEFAULT_TABLE[method]]
    if spec in TABLES:
        return TABLES[spec]
    body, _, propose = spec.partition("@")
    try:
        rates = tuple(float(x) for x in body.split(",") if x.strip())
        share = float(propose) if propose.strip() else 1.0
    except ValueError:
        raise ValueError(
            f"spec_acceptance must name a table ({', '.join(TABLES)}) or list rates like "
            f"0.8,0.6,0.4 (optionally @0.5 = share of steps that propose), got {spec!r}"
        ) from None
    return AcceptanceTable("custom", rates, "given by the user", share)


class Speculator(Protocol):
    """Who decides drafts and acceptance: the simulator's draws or a live model."""

    def accepted(self, req: Request, drafts: int) -> int:
        """Of the `drafts` real draft tokens verified for `req` in the step that just ran, how
        many the target accepted (0..drafts)."""

    def propose(self, req: Request) -> int:
        """How many draft tokens the drafter proposes for `req` after the step that just ran."""


class DrawnSpeculator:
    """The simulator's speculator: seeded draws from an acceptance table.

    Draw j of a request (its j-th sampling event, `req.spec_samples`) is a pure function of
    (seed, request id, j), so the same draws can be handed to the real scheduler
    (`draws_for`): one uniform u decides the accepted count (positions whose rate exceeds u, the
    rates being non-increasing), another whether the drafter found drafts at all. It proposes k
    (vLLM's V2 model runner, above) or, with `fill_misses=False` (the V1 runner), nothing after a
    miss.
    """

    def __init__(
        self, table: AcceptanceTable, k: int, seed: int = 0, fill_misses: bool = True
    ) -> None:
        self.table, self.k, self.seed, self.fill_misses = table, k, seed, fill_misses
        self._rates = [table.rate(i) for i in range(1, k + 1)]

    def draw(self, request_id: int, j: int) -> tuple[int, int]:
        """(accepted drafts if k were verified, drafts proposed) of draw j of a request."""
        rng = random.Random(f"{self.seed}/{request_id}/{j}")
        u, v = rng.random(), rng.random()
        if v >= self.table.propose:  # a miss: filler drafts that all fail, or none
            return 0, (self.k if self.fill_misses else 0)
        return sum(1 for r in self._rates if r > u), self.k

    def accepted(self, req: Request, drafts: int) -> int:
        return min(self.draw(req.request_id, req.spec_samples)[0], drafts)

    def propose(self, req: Request) -> int:
        return self.draw(req.request_id, req.spec_samples)[1]

    def draws_for(self, request_id: int, events: int) -> list[tuple[int, int]]:
        """Draws 0..events-1 of one request (what the differential tests feed vLLM)."""
        return [self.draw(request_id, j) for j in range(events)]


def speculator_for(knobs) -> DrawnSpeculator | None:
    """The simulator's speculator for a policy's knobs (None: speculation off or unsupported)."""
    method = getattr(knobs, "speculative", "")
    if not method:
        return None
    table = acceptance_table(knobs.spec_acceptance, method)
    fill = knobs.model_runner == "v2" or method != "ngram"  # (a draft model always drafts k)
    return DrawnSpeculator(table, knobs.num_speculative_tokens, knobs.spec_seed, fill)


def settle_verify(
    engine: Engine,
    req: Request,
    n: int,
    drafts: int,
    padded: bool,
    start_s: float,
    end_s: float,
    step: int,
) -> None:
    """Apply a verify step of `n` = 1 + `drafts` tokens to `req` (`Engine.complete`).

    The speculator says how many real drafts the target accepted (padding drafts are always
    rejected); the rejected ones roll back (`num_computed_tokens -= num_rejected`, scheduler.py
    2346-2363) and 1 + accepted tokens are emitted at the step's end, fewer if the request
    reaches its length (`_update_request_with_output` trims, 2744-2770).
    """
    from sim.core.recorder import KIND_CODE  # (the recorder imports the trace, not this)

    real = 0 if padded else drafts
    accepted = engine.speculator.accepted(req, real) if real else 0
    rejected = drafts - accepted
    if req.num_generated == 0:  # a padded one-token prompt: this is its prefill
        engine.book_chunk(req, n, req.num_computed, start_s, end_s, step)
    else:
        rec, wid = engine.recorder, engine._worker_code
        if req.pending_cached:  # resumed after a preemption: the cache held its prompt
            rec.add(req, wid, KIND_CODE["cached"], start_s, end_s, req.pending_cached, 0, step)
            req.pending_cached = 0
        split = start_s + (end_s - start_s) * (accepted + 1) / n
        rec.add(req, wid, KIND_CODE["accepted"], start_s, split, accepted + 1, 0, step)
        if rejected:
            rec.add(req, wid, KIND_CODE["rejected"], split, end_s, rejected, 0, step)
    req.num_computed += n - rejected
    if req.num_computed > req.high_water:
        req.high_water = req.num_computed
    if real:
        req.spec_drafted += real
        req.spec_accepted += accepted
        req.spec_verifies += 1
    emit = min(accepted + 1, req.output_tokens - req.num_generated)
    if req.num_generated == 0:
        req.first_token_s = end_s
    for _ in range(emit):
        req.token_times.append(end_s)
    req.num_generated += emit
    req.is_decoding = True


def acceptance_summary(drafted: int, accepted: int, verifies: int) -> dict[str, float]:
    """Run totals: acceptance rate and mean tokens a verify step yields (1 + accepted)."""
    return {
        "drafted": drafted,
        "accepted": accepted,
        "verify_steps": verifies,
        "acceptance_rate": accepted / drafted if drafted else 0.0,
        "tokens_per_verify": 1 + accepted / verifies if verifies else 1.0,
    }


def rates_text(rates: Sequence[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in rates)
