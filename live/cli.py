"""`python -m live`: the simulator's CLI, but every step runs on a real model.

    python -m live run --scenario freeze --policy vllm [--topology disaggregated]
                       [--model SmolLM2-135M | tiny | 1b-like | FOLDER] [--device auto|cpu|cuda]
                       [--set key=value ...] [--json] [--out DIR]
    python -m live fidelity --scenario freeze --policy prefill-first,vllm,static,short-first
    python -m live serve --model tiny [--policy NAME] [--set key=value ...] [--port 8000]
    python -m live replay --endpoint http://127.0.0.1:8000 --workload FILE.csv [--predict]

`serve` puts the live engine behind an OpenAI-compatible HTTP API in real time
(live/serve/server.py);
`replay` sends a workload to an OpenAI-compatible server and times every token (live/replay/cli.py).

`--scenario` takes a live workload (freeze, three, blocking, chat; on a GPU also freeze-16k and
chat-gpu, sized so the effects show there) or a lesson scenario, scaled
down to the live engine's limits; `--workload FILE.csv` reads a CSV like `python -m sim run`.
Errors print one line on stderr and exit with code 2.
"""

from __future__ import annotations

import sys

import pandas as pd

from sim.cli import CliError, CliParser, emit_files_and_json, print_table
from sim.policies import DEFAULT_POLICY
from sim.workloads.workload import load_csv

REQUEST_VIEW = [
    "request_id",
    "arrival_s",
    "prompt_tokens",
    "output_tokens",
    "ttft_s",
    "tpot_s",
    "max_itl_s",
    "worker",
    "status",
]


def _requests(args):
    from live.engine.workloads import LIVE_WORKLOADS, live_workload

    if bool(args.scenario) == bool(args.workload):
        raise CliError(
            f"give exactly one of --scenario ({', '.join(LIVE_WORKLOADS)} or a lesson) "
            "or --workload FILE.csv"
        )
    return load_csv(args.workload) if args.workload else live_workload(args.scenario)


def _progress(worker: str, steps: int) -> None:
    print(f"\r  {steps} steps measured", end="", file=sys.stderr, flush=True)


def cmd_run(args) -> None:
    from live.engine.options import live_options, sim_config
    from live.engine.run import run_live

    requests = _requests(args)
    config = sim_config(args)
    run, info = run_live(requests, config, live_options(args), progress=_progress)
    print(file=sys.stderr)
    emit_files_and_json(run, args)
    if args.json:
        return
    device = run.meta.get("device", {})
    print(
        f"measured on {device.get('device')} ({device.get('dtype')}, {device.get('threads')} "
        f"threads), model {args.model}, policy {config.policy}, "
        f"topology {config.topology.topology}"
    )
    print_table(run.requests[REQUEST_VIEW].set_index("request_id"))
    if measured := run.meta.get("speculation", {}).get("measured"):
        rates = ", ".join(f"{r:.2f}" for r in measured["per_position"])
        print(
            f"n-gram speculation (k={measured['k']}): {measured['accepted']} of "
            f"{measured['drafted']} drafts accepted ({measured['acceptance_rate']:.0%}), "
            f"{measured['tokens_per_verify']:.2f} tokens per verify, per position {rates}; "
            f"drafts proposed after {measured['propose_share']:.0%} of sampling steps"
        )
    for rid, text in info["texts"].items():
        print(f"  R{rid}: …{info['prompt_text'][rid][-40:]!r} -> {text!r}")


def cmd_fidelity(args) -> None:
    """Calibrate, run every policy live, and predict each one with a profile fitted WITHOUT it.

    The profile for policy X is fitted on the calibration workload's steps plus the steps of the
    OTHER policies' live runs (leave-one-policy-out), so every prediction is out of sample.
    """
    from live.engine.calibrate import (
        calibration_samples,
        fidelity,
        fit,
        medians,
        predict,
        sim_model,
    )
    from live.engine.options import live_options, sim_config
    from live.engine.run import run_live

    requests, options = _requests(args), live_options(args)
    sim_model(options.model)  # a model the simulator cannot predict fails now, not after the runs
    print("calibrating on this device ...", file=sys.stderr)
    base, info = calibration_samples(options)
    lives, steps = {}, {}
    for policy in args.policy.split(","):
        args.policy = policy.strip()
        config = sim_config(args)
        live, extra = run_live(requests, config, options, progress=_progress)
        lives[config.policy], steps[config.policy] = (
            (config, live),
            [s[1:] for s in extra["samples"]],
        )
    print(file=sys.stderr)
    rows = {}
    for name, (config, live) in lives.items():
        others = [s for other, ss in steps.items() if other != name for s in ss]
        profile, gpu, report = fit(base + others, info, options.model)
        table = fidelity(live, predict(requests, config, profile, gpu, live))
        print(
            f"\n{name}: measured vs calibrated simulation, per request (profile fitted on "
            f"{report['kept']} steps without {name}'s: MFU {profile.mfu:.3f}, MBU "
            f"{profile.mbu:.3f}, {profile.overhead_s * 1000:.1f} ms/step + "
            f"{profile.overhead_per_seq_s * 1000:.1f} ms/request; step fit median error "
            f"{report['fit']['median_abs_pct_error']:.1f}%)"
        )
        print_table(table)
        rows[name] = medians(table)
    print("\nmedian absolute error (%):")
    print_table(pd.DataFrame.from_dict(rows, orient="index"))
    # The device profile from ALL measured steps: what the simulator should use for this machine.
    from live.engine.calibrate import save_profile
    from live.model.weights import cache_dir

    everything = base + [s for ss in steps.values() for s in ss]
    profile, gpu, report = fit(everything, info, options.model)
    path = cache_dir() / f"profile-{info.get('device', 'cpu')}-{options.model}.json"
    save_profile(path, profile, gpu, report)
    print(f"\nsaved the device profile fitted on all {report['kept']} steps to {path}")


def build_parser() -> CliParser:
    parser = CliParser(prog="python -m live", description="PD Lab live engine")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=CliParser)
    commands = (
        ("run", "serve a workload on a real model, measured"),
        ("fidelity", "calibrate the simulator here and compare it with live runs"),
    )
    for name, text in commands:
        p = sub.add_parser(name, help=text)
        p.add_argument(
            "--scenario",
            help="freeze, three, blocking, chat (GPU-sized: freeze-16k, "
            "chat-gpu), or a lesson scenario",
        )
        p.add_argument("--workload", help="a CSV, as for python -m sim run")
        p.add_argument(
            "--policy",
            default=DEFAULT_POLICY if name == "run" else "prefill-first,vllm,static,short-first",
        )
        p.add_argument("--topology")
        p.add_argument("--set", action="append", metavar="KEY=VALUE")
        p.add_argument(
            "--model",
            default="SmolLM2-135M",
            help="SmolLM2-135M, tiny, smollm2-135m-shape, 1b-like, 8b-like or a folder",
        )
        p.add_argument("--device", default="auto", help="auto, cpu or cuda")
        p.add_argument("--threads", type=int, default=1, help="CPU threads per step")
        if name == "run":
            p.add_argument("--json", action="store_true")
            p.add_argument("--out")
    from live.replay.cli import add_arguments as replay_arguments
    from live.serve.options import add_arguments as serve_arguments

    serve_arguments(sub.add_parser("serve", help="serve the live engine over the OpenAI API"))
    replay_arguments(sub.add_parser("replay", help="replay a workload against a server, timed"))
    return parser


def cmd_serve(args) -> None:
    from live.serve.server import cmd_serve as serve

    serve(args)


def cmd_replay(args) -> int:
    from live.replay.cli import cmd_replay as replay

    return replay(args)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        commands = {
            "run": cmd_run,
            "fidelity": cmd_fidelity,
            "serve": cmd_serve,
            "replay": cmd_replay,
        }
        return commands[args.command](args) or 0
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except ModuleNotFoundError as err:
        print(
            f"error: {err.name} is not installed: pip install -r requirements-live.txt",
            file=sys.stderr,
        )
        return 2
    except (CliError, ValueError, OSError, RuntimeError) as err:
        message = str(err).splitlines()[0] if str(err) else type(err).__name__
        print(f"error: {message}", file=sys.stderr)
        return 2
    return 0


__all__ = ["main"]
