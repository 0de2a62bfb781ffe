"""`python -m live replay`: send a workload to any OpenAI-compatible server and time every token.

    python -m live replay --endpoint http://127.0.0.1:8000 --workload trace.csv [--model NAME]
                          [--out DIR] [--json] [--max-concurrency 64] [--api completions|chat]
                          [--predict --gpu H100-SXM --sim-model Llama-3.1-8B --policy vllm ...]

It works against vLLM (`vllm serve`), SGLang (`python -m sglang.launch_server`) and this
project's `python -m live serve`; the README section "Real servers" has the command lines. The
replay itself is live/replay/replayer.py.

Notable features
- Workloads: our CSV, the Azure trace or Mooncake JSONL (via
  sim.workloads.trace_import.load_workload);
  `--limit N` replays the first N requests.
- `--predict` also simulates the workload (`--gpu`, `--sim-model`, `--policy`, `--topology`,
  `--set`; its knobs are checked before any traffic) and compares, request by request.
- A text report (summary, then a table of requests), or `--json`: one JSON object. `--out DIR`
  writes the requests/segments/steps CSV, summary.json and trace.json (and predicted/,
  errors.csv with `--predict`).
- Ctrl-C cancels every stream and writes out what was measured so far (exit code 130).
- Errors (a dead or mute endpoint, a bad workload): one line on stderr, exit code 2. A run in
  which some requests failed is written out, then reported the same way.
"""

from __future__ import annotations

import json
import sys

from live.replay.replayer import ReplayOptions, ReplayResult, replay
from live.replay.report import errors, predict, summary_of
from sim.core.request import RequestSpec
from sim.runs.export import json_safe


def add_arguments(p) -> None:
    """The replay subcommand's options."""
    d = ReplayOptions("")
    p.add_argument("--endpoint", required=True, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument(
        "--workload",
        required=True,
        help="a CSV (arrival_s,prompt_tokens,output_tokens[,priority] or the Azure "
        "trace's TIMESTAMP,ContextTokens,GeneratedTokens), or Mooncake JSONL",
    )
    p.add_argument("--model", help="the model name to ask for (default: the server's first)")
    p.add_argument("--api", default=d.api, help="completions (token ids) or chat")
    p.add_argument("--prompt-mode", default=d.prompt_mode, help="auto, ids or text")
    p.add_argument("--max-concurrency", type=int, default=d.max_concurrency)
    p.add_argument("--connect-timeout", type=float, default=d.connect_timeout_s, help="s")
    p.add_argument(
        "--read-timeout",
        type=float,
        default=d.read_timeout_s,
        help="longest wait for the next chunk, s",
    )
    p.add_argument(
        "--stall-factor",
        type=float,
        default=d.stall_factor,
        help="a gap over this many median inter-token gaps is a stall",
    )
    p.add_argument("--ttft-slo", type=float, help="s (default: the simulator's)")
    p.add_argument("--tpot-slo", type=float, help="s (default: the simulator's)")
    p.add_argument("--limit", type=int, help="replay only the first N requests")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help="write requests/segments/steps CSV, summary, trace here")
    p.add_argument(
        "--predict",
        action="store_true",
        help="also simulate the workload and compare, request by request",
    )
    p.add_argument("--gpu", help="--predict: a GPU (python -m sim list)")
    p.add_argument("--sim-model", help="--predict: the simulator's model")
    p.add_argument("--policy", help="--predict: the policy (default: the simulator's)")
    p.add_argument("--topology", help="--predict: the topology")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="--predict: a knob")


def load_workload(path: str) -> list[RequestSpec]:
    """Our CSV or the Azure trace; Mooncake JSONL where sim can read it
    (sim.workloads.trace_import)."""
    import sim.workloads.trace_import as ti
    from sim.cli import CliError

    if hasattr(ti, "load_workload"):  # sim picks the reader by extension (.jsonl = Mooncake)
        return ti.load_workload(path)
    if path.lower().endswith((".jsonl", ".json")):
        raise CliError(
            "this version of sim cannot read Mooncake JSONL; convert it to CSV "
            "(arrival_s,prompt_tokens,output_tokens)"
        )
    return ti.load_csv(path)


def _sim_config(args):
    from sim.cli import config_from_args
    from sim.config import SimConfig, with_overrides

    knobs = type(
        "Args",
        (),
        {
            "policy": args.policy,
            "topology": args.topology,
            "gpu": args.gpu,
            "model": args.sim_model,
            "set": args.set,
        },
    )()
    config = config_from_args(knobs, SimConfig())
    if args.ttft_slo or args.tpot_slo:
        config = with_overrides(
            config,
            {k: v for k, v in (("ttft_slo_s", args.ttft_slo), ("tpot_slo_s", args.tpot_slo)) if v},
        )
    return config


VIEW = [
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "output_tokens_received",
    "ttft_s",
    "tpot_s",
    "max_itl_s",
    "status",
]


def cmd_replay(args) -> int:
    """Run a replay from parsed arguments; the exit code (0, 2 or 130)."""
    from pathlib import Path

    from sim.cli import CliError
    from sim.runs.export import write_outputs

    requests = load_workload(args.workload)
    if args.limit is not None:
        if args.limit < 1:
            raise CliError("--limit must be >= 1")
        requests = requests[: args.limit]
    config = _sim_config(args)  # validates --predict's knobs before any traffic
    options = ReplayOptions(
        args.endpoint,
        args.model,
        args.api,
        args.prompt_mode,
        args.max_concurrency,
        args.connect_timeout,
        args.read_timeout,
        args.stall_factor,
        config.slo.ttft_slo_s,
        config.slo.tpot_slo_s,
    )

    def progress(done: int, total: int) -> None:
        if not args.json:
            print(f"\r  {done}/{total} requests done", end="", file=sys.stderr, flush=True)

    result = replay(requests, options, progress)
    if not args.json:
        print(file=sys.stderr)
    summary = summary_of(result)
    prediction = table = None
    if args.predict:
        prediction = predict(requests, config)
        table = errors(result.run, prediction)
    if args.out:
        write_outputs(result.run, args.out, summary)
        if prediction is not None:
            write_outputs(prediction, Path(args.out) / "predicted")
            table.to_csv(Path(args.out) / "errors.csv")
    if args.json:
        document = {
            "summary": json_safe(summary),
            "requests": json.loads(result.run.requests.to_json(orient="records")),
        }
        if prediction is not None:
            from sim.runs.metrics import summarize

            document["predicted"] = {
                "summary": json_safe(summarize(prediction)),
                "errors": json.loads(table.reset_index().to_json(orient="records")),
            }
        print(json.dumps(document, allow_nan=False))
    else:
        _report(result, summary, table, args)
    if result.interrupted:
        kept = int((result.run.requests["status"] == "finished").sum())
        where = f"; wrote {args.out}" if args.out else ""
        print(f"interrupted: {kept} of {len(requests)} requests measured{where}", file=sys.stderr)
        return 130
    if result.failed:
        first = result.failed[0]
        raise CliError(
            f"{len(result.failed)} of {len(requests)} requests failed; request "
            f"{first.spec.request_id}: {first.error}"
        )
    return 0


def _report(result: ReplayResult, summary: dict, table, args) -> None:
    from sim.cli import print_table

    run = result.run
    print(
        f"{run.meta['endpoint']} ({run.meta['model']}): {summary['finished']} of "
        f"{summary['num_requests']} requests finished, {summary['exact_output']} with exactly "
        f"the tokens asked, {summary['exact_prompt']} with prompts of exactly prompt_tokens "
        f"({summary['prompt_method']})"
    )
    for key in (
        "ttft_p50_s",
        "ttft_p90_s",
        "ttft_p99_s",
        "tpot_p50_s",
        "tpot_p90_s",
        "tpot_p99_s",
        "itl_p50_s",
        "itl_p90_s",
        "itl_p99_s",
        "max_itl_s",
        "output_tokens_per_s",
        "slo_attainment",
        "goodput_req_per_s",
        "send_late_p99_s",
        "server_clock_offset_s",
    ):
        if key in summary:
            value = summary[key]
            print(
                f"  {key:22s} {value:.4g}" if isinstance(value, float) else f"  {key:22s} {value}"
            )
    print()
    print_table(run.requests[VIEW].set_index("request_id"))
    if table is not None:
        print("\nmeasured vs predicted (s, %):")
        print_table(
            table[
                [
                    "ttft_measured_s",
                    "ttft_predicted_s",
                    "ttft_err_pct",
                    "tpot_measured_s",
                    "tpot_predicted_s",
                    "tpot_err_pct",
                ]
            ]
        )
    if args.out:
        print(
            f"\nwrote requests.csv, segments.csv, steps.csv, summary.json, trace.json to {args.out}"
        )


__all__ = ["add_arguments", "cmd_replay", "load_workload"]
