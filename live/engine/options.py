"""The live engine's settings from parsed options (`python -m live run` and `live serve`)."""

from __future__ import annotations

import argparse

from live.engine.run import LiveOptions
from sim.cli import config_from_args
from sim.config import SimConfig


def sim_config(args) -> SimConfig:
    """Policy, topology and knobs as `python -m sim run` reads them (the model is the live one)."""
    knobs = argparse.Namespace(
        policy=args.policy, topology=args.topology, gpu=None, model=None, set=args.set
    )
    return config_from_args(knobs, SimConfig())


def live_options(args) -> LiveOptions:
    """Model, device and CPU threads."""
    return LiveOptions(model=args.model, device=args.device, threads=args.threads)
