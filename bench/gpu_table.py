"""The closing table of bench/gpu_figures.sh: each figure of issue 27 beside its target.

Reads what the script's steps wrote in one folder: `figures.json` (bench/bench_gpu_step.py:
decode steps and the prefill chunk) and `fidelity.json` (bench/bench_fidelity.py: calibration
fit, simulation vs live, live vs live). A figure whose step failed or timed out reads "missing".

Run: python3 bench/gpu_table.py OUT_FOLDER
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

LIVE_VS_LIVE_PCT = 10.0  # issue 27 item 4: two live runs within 10% median TTFT and TPOT
FIT_PCT = 10.0  # calibration step fit within 10%
SIM_VS_LIVE_PCT = 15.0  # calibrated simulation vs live within 15%, every policy and workload


def read(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def rows(folder: Path) -> list[tuple[str, str, str, str]]:
    """(figure, measured, target, verdict) rows."""
    out = []

    def add(name: str, value: float | None, target: float, fmt: str, le: bool = True) -> None:
        if value is None:
            goal = "-" if target != target else ("<= " if le else ">= ") + fmt.format(target)
            out.append((name, "missing", goal, "MISSING"))  # target NaN: set by the missing run
            return
        ok = value <= target if le else value >= target
        out.append(
            (
                name,
                fmt.format(value),
                ("<= " if le else ">= ") + fmt.format(target),
                "ok" if ok else "MISSED",
            )
        )

    fig = read(folder / "figures.json") or {}
    for d in fig.get("decode", []) or [{"batch": b, "ctx": 1024} for b in (1, 8, 32, 64)]:
        add(
            f"decode step B={d['batch']}, ctx {d['ctx']} (1.5x bytes/copy BW)",
            d.get("ms"),
            d.get("target_ms", float("nan")),
            "{:.2f} ms",
        )
    p = fig.get("prefill") or {}
    share = p.get("share_of_peak")
    add(
        f"prefill chunk {p.get('tokens', 2048)} tokens, share of matmul peak",
        None if share is None else 100 * share,
        60.0,
        "{:.0f} %",
        le=False,
    )
    fid = read(folder / "fidelity.json") or {}
    fit = ((fid.get("fit") or {}).get("fit") or {}).get("median_abs_pct_error")
    add("calibration step fit, median |error|", fit, FIT_PCT, "{:.1f} %")
    table = fid.get("rows") or []
    for key, name, target in (
        (
            "live_vs_live_ttft_pct",
            "two live runs, TTFT (worst workload x policy)",
            LIVE_VS_LIVE_PCT,
        ),
        ("live_vs_live_tpot_pct", "two live runs, TPOT (worst)", LIVE_VS_LIVE_PCT),
        ("ttft_err_pct", "simulation vs live, TTFT (worst)", SIM_VS_LIVE_PCT),
        ("tpot_err_pct", "simulation vs live, TPOT (worst)", SIM_VS_LIVE_PCT),
    ):
        values = [r[key] for r in table if r.get(key) is not None]
        worst = max(values) if values else None
        if worst is not None:
            at = max(table, key=lambda r, k=key: r.get(k) or -1)
            name += f": {at['workload']}/{at['policy']}"
        add(name, worst, target, "{:.1f} %")
    return out


def main(argv: list[str] | None = None) -> int:
    folder = Path((argv or sys.argv[1:] or ["."])[0])
    fig = read(folder / "figures.json") or {}
    dev = fig.get("device") or {}
    print(
        f"issue 27 figures: {fig.get('model', '?')} {fig.get('dtype', '')} on "
        f"{dev.get('gpu') or dev.get('cpu') or '?'}; copy {fig.get('copy_bw_gbs', 0):.0f} GB/s, "
        f"matmul peak {fig.get('matmul_peak_tflops', 0):.3g} TFLOP/s"
    )
    table = rows(folder)
    width = max(len(r[0]) for r in table)
    print(f"{'figure':<{width}}  {'measured':>10}  {'target':>12}  verdict")
    for name, value, target, verdict in table:
        print(f"{name:<{width}}  {value:>10}  {target:>12}  {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
