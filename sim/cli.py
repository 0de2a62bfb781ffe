"""`python -m sim`: list, run, compare and sweep from a terminal (a contract scripts rely on).

    python -m sim list
    python -m sim run --scenario c5-long-prompt-freeze [--variant LABEL] [--policy NAME]
                      [--topology NAME] [--gpu NAME] [--model NAME] [--set key=value ...]
                      [--json] [--out DIR]
    python -m sim run --workload FILE.csv ...        (this project's CSV or the Azure trace's)
    python -m sim compare --scenario NAME [--set key=value ...]
    python -m sim sweep (--scenario NAME | --workload FILE.csv) --rate A:B:STEP [--slo NAME]
                        [--jobs N] [--backend processes|ray] [--address RAY_ADDRESS]

Errors print ONE line on stderr naming what to change, and exit with code 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap
from typing import TYPE_CHECKING

from sim.cluster.topologies import simulate
from sim.config import TOPOLOGY_NAMES, SimConfig, with_overrides
from sim.cost.hardware import GPUS, MODELS
from sim.cost.kernel_data import available as kernel_tables_available
from sim.policies import POLICIES, get_policy_class, make_policy
from sim.runs.export import json_text, to_json_dict, write_outputs
from sim.runs.memory import check_memory
from sim.runs.metrics import summarize
from sim.runs.parallel import BACKENDS, ClusterError, cpu_jobs
from sim.runs.slo import SLO_PRESETS, get_slo
from sim.workloads.workload import PRESETS, load_workload

if TYPE_CHECKING:
    import pandas as pd
# Imported where used: pandas (tables on the terminal), sim.scenarios and sim.runs.sweep. A
# `run --workload ... --json` needs none of them (see "Simulator speed" in the README).


class CliError(Exception):
    """A mistake in the command line: printed as one line, exit code 2."""


class CliParser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: one line, exit 2
        raise CliError(message)


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """{key: value} of --set key=value pairs (values as typed: with_overrides parses them)."""
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"--set expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def config_from_args(args, base: SimConfig) -> SimConfig:
    """The base config with --policy/--topology/--gpu/--model/--set applied."""
    config = base
    sets = parse_sets(args.set or [])
    if args.policy:
        cls = get_policy_class(args.policy)
        if cls.name != config.policy:
            # The base's chosen knobs (a scenario variant's) carry over only where the new
            # policy's knob of that name means the same (sim/policies/base.py, Knobs.MEANINGS):
            # prefill-first gets its own 131072 budget, not a chunking budget of 2048.
            knobs, dropped = config.knobs.carry_to(cls.Knobs)
            _dropped_note(config.policy, cls.name, [d for d in dropped if d.name not in sets])
            config = dataclasses.replace(config, policy=cls.name, knobs=knobs)
    topology = {"topology": args.topology, "gpu": args.gpu, "model": args.model}
    return with_overrides(config, {**{k: v for k, v in topology.items() if v}, **sets})


def _dropped_note(old: str, new: str, dropped) -> None:
    """ONE line on stderr naming the chosen knobs --policy left behind, and why."""
    if not dropped:
        return
    why = [
        f"{d.name}={d.value} ({old}: {d.meaning}; {new}: {d.new_meaning})"
        if d.new_meaning
        else f"{d.name}={d.value} ({new} has no such knob)"
        for d in dropped
    ]
    print(
        f"note: --policy {new} drops the {old} knobs {', '.join(why)}; {new}'s own defaults "
        "apply (python -m sim list)",
        file=sys.stderr,
    )


def _workload_and_base(args):
    """(requests, base config, label) from --scenario [--variant] or --workload."""
    if bool(args.scenario) == bool(args.workload):
        raise CliError("give exactly one of --scenario NAME or --workload FILE.csv")
    if args.workload:
        return load_workload(args.workload), SimConfig(), args.workload
    from sim.scenarios import get_scenario

    scenario = get_scenario(args.scenario)
    variant = scenario.variant(args.variant) if args.variant else scenario.variants[0]
    return scenario.requests(variant), variant.config, f"{scenario.name} [{variant.label}]"


REQUEST_VIEW = [
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "max_itl_s",
    "e2e_s",
    "slo_met",
    "preemptions",
    "worker",
    "status",
]
SUMMARY_VIEW = [
    "num_requests",
    "finished",
    "rejected",
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "max_itl_s",
    "output_tokens_per_s",
    "preemptions_total",
    "slo_attainment",
]
CACHE_VIEW = "prefix_cache_hit_rate"  # after SUMMARY_VIEW, when the policy keeps a prefix cache


SPEC_VIEW = ["spec_acceptance_rate", "spec_tokens_per_verify"]  # with speculative decoding on


def _summary_view(config: SimConfig) -> list[str]:
    """The summary keys to print: SUMMARY_VIEW, plus the cache hit rate with prefix caching on
    and the drafts' acceptance with speculative decoding on."""
    policy = make_policy(config.policy, config.knobs)
    view = [*SUMMARY_VIEW, CACHE_VIEW] if policy.prefix_caching else list(SUMMARY_VIEW)
    return view + SPEC_VIEW if getattr(policy.knobs, "speculative", "") else view


def print_table(frame: pd.DataFrame, limit: int = 40) -> None:
    import pandas as pd

    with pd.option_context(
        "display.width", 160, "display.max_columns", 30, "display.float_format", "{:.4f}".format
    ):
        if len(frame) > limit:
            print(frame.head(limit // 2).to_string())
            print(f"... {len(frame) - limit} more rows (use --out DIR or --json for all) ...")
            print(frame.tail(limit // 2).to_string(header=False))
        else:
            print(frame.to_string())


def emit_files_and_json(run, args) -> dict:
    """--out writes the five files, --json prints the one JSON object; returns the summary."""
    summary = summarize(run)
    if args.out:
        write_outputs(run, args.out, summary)
    if args.json:
        print(json_text(to_json_dict(run, summary)))
    return summary


def cmd_list(args) -> None:
    from sim.scenarios import SCENARIOS

    print("Scenarios (python -m sim run --scenario NAME):")
    for s in SCENARIOS.values():
        print(f"  {s.name:30s} {s.claim:5s} {s.title}")
        print(f"  {'':30s}       variants: {' | '.join(v.label for v in s.variants)}")
    print("\nPolicies (--policy NAME) and their knobs (--set knob=value):")
    for name, cls in POLICIES.items():
        knobs = ", ".join(
            f"{f.name}={getattr(cls.Knobs(), f.name)}" for f in dataclasses.fields(cls.Knobs)
        )
        alias = "   (old name of vllm-v0)" if name == "chunked" else ""
        print(f"  {name:14s} mirrors {cls.mirrors}{alias}\n  {'':14s} {knobs}")
    print(
        "  (0 = the engine's own default for the GPU, e.g. vLLM on an H100: 8192 tokens and "
        "1024 sequences; SGLang: chunked_prefill_size 8192)"
    )
    print(f"\nTopologies (--topology NAME): {', '.join(TOPOLOGY_NAMES)}")
    print("  routers (--set router=NAME): round-robin, least-loaded, length")
    print(
        f"\nGPUs (--gpu NAME): {', '.join(GPUS)}, custom (--set gpu_tflops=.. gpu_bw_gb_s=.. "
        "gpu_mem_gb=..)"
    )
    print(f"Models (--model NAME): {', '.join(MODELS)}")
    print(
        "  or --model PATH: a Hugging Face config.json or its folder (Llama, Mistral, Qwen2/3, "
        "Mixtral, Qwen-MoE, DeepSeek-V2/V3); NAME:fp8 or NAME:fp4 for quantized weights"
    )
    print(f"SLO presets (sweep --slo NAME): {', '.join(SLO_PRESETS)}")
    print(f"Length presets (workloads): {', '.join(PRESETS)}")


def _notes(config: SimConfig) -> None:
    """Remarks about the configuration (e.g. an old spelling), on stderr."""
    for note in make_policy(config.policy, config.knobs).notes():
        print(f"note: {note}", file=sys.stderr)
    if config.hardware.step_costs == "kernels" and not kernel_tables_available():
        print(
            "note: step_costs=kernels reads aiconfigurator-core's tables, which are not "
            "installed (pip install -r requirements-kernels.txt): every step is priced by the "
            "roofline",
            file=sys.stderr,
        )


def _step_costs_line(config: SimConfig, run) -> str | None:
    """With step_costs=kernels, what priced which operator of a step (wrapped), else None."""
    if config.hardware.step_costs != "kernels":
        return None
    source = run.meta.get("kernel_source", "roofline")
    return textwrap.fill(
        f"step costs: {source}", width=100, initial_indent="  ", subsequent_indent="    "
    )


def cmd_run(args) -> None:
    requests, base, label = _workload_and_base(args)
    config = config_from_args(args, base)
    check_memory(config)  # before anything is allocated: one line, not a swapped machine
    _notes(config)
    run = simulate(requests, config, step_by_step=args.step_by_step)
    summary = emit_files_and_json(run, args)
    if args.json:
        return
    print(
        f"{label}: policy {config.policy}, topology {config.topology.topology}, "
        f"{run.meta['num_gpus']}x {run.meta['gpu']}, {run.meta['model']}"
    )
    if (line := _step_costs_line(config, run)) is not None:
        print(line)
    for key in _summary_view(config):
        value = summary.get(key)
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        print(f"  {key:22s} {text}")
    print()
    print_table(run.requests[REQUEST_VIEW].set_index("request_id"))
    if args.out:
        print(
            f"\nwrote requests.csv, segments.csv, steps.csv, summary.json, trace.json to {args.out}"
        )


def cmd_compare(args) -> None:
    import pandas as pd

    from sim.runs.token_windows import compare_tokens_in_window
    from sim.scenarios import get_scenario

    scenario = get_scenario(args.scenario)
    print(f"{scenario.name} ({scenario.claim}): {scenario.title}\n{scenario.description}\n")
    rows, runs = {}, {}
    sets = parse_sets(args.set or [])
    for v in scenario.variants:
        config = with_overrides(v.config, sets)
        check_memory(config)
        run = simulate(scenario.requests(v), config)
        runs[v.label] = run
        s = summarize(run)
        rows[v.label] = {k: s.get(k) for k in _summary_view(config)}  # no hit rate: cache off
    print_table(pd.DataFrame.from_dict(rows, orient="index"))
    if scenario.window_s:
        t0, t1 = scenario.window_s
        print(f"\nOutput tokens per request between {t0:g} s and {t1:g} s:")
        print_table(compare_tokens_in_window(runs, t0, t1))


def cmd_sweep(args) -> None:
    from sim.runs.sweep import goodput_of, parse_rates, sweep_rates
    from sim.scenarios import get_scenario

    rates = parse_rates(args.rate)
    if args.workload:
        workload, base = load_workload(args.workload), SimConfig()
    else:
        if not args.scenario:
            raise CliError("give exactly one of --scenario NAME or --workload FILE.csv")
        scenario = get_scenario(args.scenario)
        variant = scenario.variant(args.variant) if args.variant else scenario.variants[0]
        workload, base = variant.workload or scenario.workload, variant.config
    config = config_from_args(args, base)
    if args.slo:
        slo = get_slo(args.slo)
        config = with_overrides(config, {"ttft_slo_s": slo.ttft_s, "tpot_slo_s": slo.tpot_s})
    if args.backend == "processes":  # each worker process holds one run at a time
        check_memory(config, copies=min(cpu_jobs(args.jobs), len(rates)))
    table = sweep_rates(
        workload, config, rates, jobs=args.jobs, backend=args.backend, address=args.address
    )
    print(f"SLO: TTFT <= {config.slo.ttft_slo_s:g} s and TPOT <= {config.slo.tpot_slo_s:g} s")
    print_table(table.set_index("rate_per_s"), limit=200)
    g = goodput_of(table)
    at_least = ">= " if g["all_rates_met"] else ""  # every rate passed: a lower bound only
    print(
        f"goodput: {at_least}{g['goodput_per_s']:g} req/s on {g['num_gpus']} GPU(s) = "
        f"{at_least}{g['goodput_per_gpu_per_s']:g} req/s per GPU (highest rate with >= 90% "
        "attainment" + ("; every rate tried met it: try higher rates)" if at_least else ")")
    )


def build_parser() -> argparse.ArgumentParser:
    parser = CliParser(prog="python -m sim", description="PD Lab simulator")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CliParser)
    sub.add_parser("list", help="scenarios, policies, topologies, GPUs, models")
    for name, text in (
        ("run", "simulate one configuration"),
        ("compare", "run every variant of a scenario"),
        ("sweep", "attainment per arrival rate, and the goodput"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("--scenario", help="a scenario name (see list), or its claim id, e.g. C5")
        if name != "compare":
            p.add_argument(
                "--workload",
                help="a CSV (arrival_s,prompt_tokens,output_tokens[,priority][,prefix_group,"
                "prefix_tokens], or the Azure trace's TIMESTAMP,ContextTokens,GeneratedTokens) "
                "or a Mooncake trace (.jsonl)",
            )
            p.add_argument("--variant", help="which of the scenario's variants (default: first)")
            p.add_argument("--policy", help=f"one of: {', '.join(POLICIES)}")
            p.add_argument("--topology", help=f"one of: {', '.join(TOPOLOGY_NAMES)}")
            p.add_argument("--gpu", help="a GPU name (see list)")
            p.add_argument(
                "--model", help="a model name (see list), or a Hugging Face config.json / folder"
            )
        p.add_argument("--set", action="append", metavar="KEY=VALUE", help="set a knob")
        if name == "run":
            p.add_argument("--json", action="store_true", help="print one JSON object")
            p.add_argument("--out", help="write requests/segments/steps CSV, summary, trace")
            p.add_argument(
                "--step-by-step",
                action="store_true",
                help="take every engine step one by one (same trace, slower; the "
                "default takes runs of decode-only steps at once)",
            )
        if name == "sweep":
            p.add_argument("--rate", required=True, help="arrival rates A:B:STEP (req/s)")
            p.add_argument("--slo", help=f"an SLO preset: {', '.join(SLO_PRESETS)}")
            p.add_argument(
                "--jobs",
                type=int,
                default=1,
                help="run the rates in N processes (0: one per core; same table)",
            )
            p.add_argument(
                "--backend",
                choices=BACKENDS,
                default="processes",
                help="where the points run: local processes, or a Ray cluster",
            )
            p.add_argument(
                "--address",
                help="the Ray cluster's address, HOST:6379 or "
                "ray://HOST:10001 (--backend ray; default: the one `ray start "
                "--head` runs here; 'local': start one for this sweep)",
            )
    return parser


COMMANDS = {"list": cmd_list, "run": cmd_run, "compare": cmd_compare, "sweep": cmd_sweep}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        if argv and argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
            # (argparse would take the first option's value for the command: "invalid choice")
            raise CliError(
                f"name a command before the options: python -m sim {{{','.join(COMMANDS)}}} "
                f"{' '.join(argv)}"
            )
        args = build_parser().parse_args(argv)
        COMMANDS[args.command](args)
    except BrokenPipeError:  # e.g. piped into `head`: not an error of the user's
        sys.stderr.close()
        return 0
    except (CliError, ValueError, OSError, ClusterError) as err:  # WorkloadError: a ValueError
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"error: {message}", file=sys.stderr)
        return 2
    except (RecursionError, OverflowError) as err:  # a crafted input's last resort: one line
        print(
            f"error: an input is too deep or too large to read ({type(err).__name__})",
            file=sys.stderr,
        )
        return 2
    return 0
