"""Why one group of public runs misses: per run, measured vs simulated, and what its steps cost.

Notable features
- Takes one report group (GPU, model, engine; bench/bench_fidelity_real.py's rows) and replays
  each of its closed-loop runs under each step-cost model asked for (roofline, kernels).
- Per run: measured and simulated mean TTFT and TPOT, the measured load (`prompt_load`: the
  share of the GPUs' matmul peak its measured throughput needs for the prompts' linear layers
  alone), and from the simulated steps of the steady state: mean step time split into what the
  tables or roofline booked (compute, memory, communication, per-step overhead), tokens per step,
  the share of steps carrying prefill and the share of time the engine was busy; and the
  median of the steady requests' token gaps (each output token's wait after the one before),
  beside their mean TPOT: a decode-only step, where the mean also pays for the steps that
  carry a prompt chunk. A measured TPOT near the median and far under the mean is not a mean
  over requests served at the row's concurrency.
- Per cost model, the decode-only step and a prefill chunk at the run's sizes, by operator
  (sim/cost StepCostModel.step_cost), so a miss can be put on the GEMMs at small m, the
  per-step overhead, or queueing at the capacity knee (busy ~100% with the measurement's
  throughput needing more than the priced steps allow).

- Per run and cost model, the report's own replay and score (bench/bench_fidelity_real.py: random
  phases, the opening burst weighed in, the client latency added): the errors the report shows.
- `--node-gpus 8`, a what-if: the deployment as 8 / TP instances behind a router, each with its
  share of the clients (for rows whose measurements one instance cannot reach).
- `--set KEY=VALUE`, a what-if: a simulator setting for every run shown (python -m sim's keys),
  e.g. `--set kv_capacity_tokens=7000` for a KV pool other than the one the release computes.

Run: PDLAB_FIDELITY_DATA=... .venv/bin/python bench/diagnose_fidelity.py --gpu H200
     --model Llama-3.1-8B:fp8 --engine vLLM [--costs roofline,kernels] [--prompt-pool 100]
     [--node-gpus 8] [--set kv_capacity_tokens=7000]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # import sim/
sys.path.insert(0, str(Path(__file__).resolve().parent))  # import fidelity_*

import numpy as np  # noqa: E402
from fidelity_closed_loop import closed_loop, closed_loop_size  # noqa: E402
from fidelity_replay import prompt_load, replay, score  # noqa: E402
from fidelity_runs import client_latency, load_runs, select  # noqa: E402

from sim.cli import CliError, parse_sets  # noqa: E402
from sim.cluster.topologies import Cluster  # noqa: E402
from sim.policies.vllm_v1_knobs import vllm_batch_defaults  # noqa: E402


def step_summary(steps, after_s: float, until_s: float = float("inf")) -> dict:
    """Means over the simulated steps that start in [after_s, until_s) (the steady state: from
    the first measured request's arrival to the last one's finish, before the drain)."""
    s = steps[(steps.start_s >= after_s) & (steps.start_s < until_s)]
    if s.empty:
        return {}
    dur = s.end_s - s.start_s
    span = s.end_s.max() - s.start_s.min()
    return {
        "step_ms": 1000 * dur.mean(),
        "compute_ms": 1000 * s.compute_s.mean(),
        "memory_ms": 1000 * s.memory_s.mean(),
        "comm_ms": 1000 * s.comm_s.mean(),
        "overhead_ms": 1000 * s.overhead_s.mean(),
        "tokens": (s.prefill_tokens + s.decode_tokens).mean(),
        "batch": s.batch_size.mean(),
        "prefill_share": float((s.prefill_tokens > 0).mean()),
        "busy": float(dur.sum() / span) if span > 0 else float("nan"),
    }


def median_gap_ms(res, request_ids) -> float:
    """The median wait between consecutive output tokens of these requests, all gaps pooled, ms."""
    gaps = [np.diff(res.token_times[i]) for i in request_ids if len(res.token_times.get(i, ())) > 1]
    return 1000 * float(np.median(np.concatenate(gaps))) if gaps else float("nan")


def statistic_position(measured: float, mean: float, median: float) -> float:
    """Where a measured TPOT sits between the replay's median token gap (0) and its mean TPOT
    (1), on a log scale; NaN unless the two differ at least twofold (else they cannot be told
    apart)."""
    if not (median > 0 and mean >= 2 * median and measured > 0):
        return float("nan")
    return float(np.log(measured / median) / np.log(mean / median))


def breakdown(cost, chunk: int, batch: int, context: int) -> str:
    """The decode-only step and a prefill chunk with batch-1 decodes, by booked side, ms."""
    out = []
    for name, step in (
        ("decode", ((), batch, batch * context)),
        ("mixed", (((chunk, 0, True),), batch - 1, (batch - 1) * context)),
    ):
        c = cost.step_cost(*step)
        out.append(
            f"{name} {1000 * c.seconds:6.2f} = compute {1000 * c.compute_s:6.2f} + memory "
            f"{1000 * c.memory_s:5.2f} + comm {1000 * c.comm_s:5.2f} + overhead "
            f"{1000 * c.overhead_s:4.2f}"
        )
    return " | ".join(out)


def groups_on(runs: list, gpu: str) -> str:
    """The --model and --engine values that have closed-loop runs on `gpu` (every GPU's
    names where it has none), for the message of a selection that matched nothing."""
    closed = [r for r in runs if not r.specs]
    on_gpu = [r for r in closed if r.gpu == gpu]
    if not on_gpu:
        return "--gpu takes " + ", ".join(sorted({r.gpu for r in closed}))
    pairs = sorted({(r.model, r.engine) for r in on_gpu})
    return f"on {gpu}: " + "; ".join(f"--model {m} --engine '{e}'" for m, e in pairs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data")
    ap.add_argument("--gpu", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--engine", default="vLLM")
    ap.add_argument("--costs", default="roofline,kernels")
    ap.add_argument("--prompt-pool", type=int, default=0)
    ap.add_argument("--fit", choices=["all", "fit", "held-out"], default="all")
    ap.add_argument(
        "--node-gpus",
        type=int,
        default=0,
        help="what-if: the node's GPUs all served, as node-gpus / TP instances that share the "
        "clients evenly (a router in front); 0 = one instance, as the report replays",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="what-if: a simulator setting for every run shown (python -m sim's --set keys)",
    )
    args = ap.parse_args()
    try:
        sets = parse_sets(args.set)  # (python -m sim's own reading of --set)
    except CliError as err:
        ap.error(str(err))
    all_runs, _ = load_runs(args.data)
    fit = {"all": None, "fit": True, "held-out": False}[args.fit]
    runs = [
        r
        for r in select(all_runs, gpu=args.gpu, fit=fit)
        if r.model == args.model and r.engine.startswith(args.engine) and not r.specs
    ]
    if not runs:  # say what there is, instead of an empty report
        ap.error(f"no runs match; {groups_on(all_runs, args.gpu)}")
    runs.sort(key=lambda r: (r.parallel, r.isl, r.osl, r.concurrency))
    print(f"{len(runs)} runs; simulated TTFTs include the client latency fitted per cost model")
    positions: dict[str, list[float]] = {c: [] for c in args.costs.split(",")}
    for r in runs:
        meas = r.measured_means
        print(
            f"\n{r.parallel} isl {r.isl} osl {r.osl} clients {r.concurrency}: measured TTFT "
            f"{1000 * meas['ttft_s']:.0f} ms, TPOT {1000 * meas['tpot_s']:.2f} ms, "
            f"prompt_load {prompt_load(r):.2f}"
        )
        for costs in args.costs.split(","):
            overrides = {"step_costs": costs, **sets}
            config = r.config(overrides)
            instances = max(1, args.node_gpus // config.hardware.tensor_parallel)
            clients = max(1, r.concurrency // instances)  # one instance's share of the clients
            n, warm, end = closed_loop_size(clients, r.osl, args.prompt_pool)
            res = closed_loop(
                config,
                r.isl,
                r.osl,
                clients,
                n,
                start="even",
                prompts=args.prompt_pool,
                range_ratio=r.range_ratio,  # (InferenceX's client draws the lengths)
            )
            req = res.requests.set_index("request_id")
            steady = req.loc[(req.index >= warm) & (req.index < end)]
            after = float(steady.arrival_s.min()) if "arrival_s" in steady else 0.0
            until = float(steady.finish_s.max()) if "finish_s" in steady else float("inf")
            s = step_summary(res.steps, after, until)
            ttft = 1000 * (np.nanmean(steady.ttft_s) + client_latency(args.gpu, costs, r.campaign))
            tpot = 1000 * np.nanmean(steady.tpot_s)
            gap = median_gap_ms(res, steady.index)
            positions[costs].append(statistic_position(1000 * meas["tpot_s"], tpot, gap))
            split = f"x{instances} " if instances > 1 else ""
            print(
                f"  {costs:8s} {split}TTFT {ttft:6.0f} ({ttft / 1000 / meas['ttft_s'] - 1:+4.0%}) "
                f"TPOT {tpot:6.2f} ({tpot / 1000 / meas['tpot_s'] - 1:+4.0%}) | steps: "
                f"{s.get('step_ms', 0):.2f} ms = c {s.get('compute_ms', 0):.2f} m "
                f"{s.get('memory_ms', 0):.2f} x {s.get('comm_ms', 0):.2f} o "
                f"{s.get('overhead_ms', 0):.2f}, {s.get('tokens', 0):.0f} tok, batch "
                f"{s.get('batch', 0):.0f}, prefill in {s.get('prefill_share', 0):.0%}, busy "
                f"{s.get('busy', 0):.0%}; token gaps: median {gap:.2f} ms"
            )
            cluster = Cluster(config)
            budget = (
                getattr(config.knobs, "max_num_batched_tokens", 0)
                or vllm_batch_defaults(cluster.gpu.name, cluster.gpu.mem_gb)[0]
            )
            chunk = min(budget, r.isl)
            print(f"           {breakdown(cluster.cost, chunk, r.concurrency, r.isl)}")
            row = score(r, replay(r, overrides), costs)  # as the report replays and scores it
            print(
                f"           report: TTFT {row['ttft_mean_err']:+4.0f}% TPOT "
                f"{row['tpot_mean_err']:+4.0f}% E2E {row['e2e_mean_err']:+4.0f}%"
            )
    for costs, pos in positions.items():  # which statistic the measured TPOTs behave like
        told = np.array([p for p in pos if not np.isnan(p)])
        if told.size:
            print(
                f"\n{costs}: in {told.size} runs the replay's mean TPOT is >= 2x its median "
                f"token gap; the measured TPOT sits at {told.min():.2f} to {told.max():.2f} "
                f"(median {np.median(told):.2f}) between them (0 = median gap, 1 = mean)"
            )


if __name__ == "__main__":
    main()
