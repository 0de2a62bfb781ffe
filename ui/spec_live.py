"""The speculative decoding lesson's live measurement: TPOT off and on per batch, on a real model.

The live engine's n-gram speculation bench (bench/bench_live_spec.py --lesson) writes one file
per prompt set into `assets/speculation/`: `spec_crossover_cpu.json` (all six prompts) and
`spec_crossover_cpu_code.json` (the code edits, whose drafts are accepted less often):
{"model": str, "device": str, "k": int, "command": str,
 # optional: "model_runner": str, "prompts": "all" | "code", "acceptance_rate": float,
 "rows": [{"batch": int, "tpot_off_ms": float, "tpot_on_ms": float,
           "acceptance_rate": float, "tokens_per_verify": float,
           # optional, in every row or none:
           "tpot_ratio": float,  # the median of repeats' paired on/off ratios
           "decode_time_ratio": float}, ...]}  # the whole batch's decode time, on / off
`load_live` reads and checks one (None where the file is absent; ValueError saying what is
wrong where it is malformed); `live_table` turns its rows into the table the lesson's ratio chart
draws (ui/charts_spec.py), as one curve id per file (LIVE_CURVES). Pure: no streamlit.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

LIVE_DIR = Path(__file__).resolve().parents[1] / "assets" / "speculation"
LIVE_PATH = LIVE_DIR / "spec_crossover_cpu.json"  # all six prompts (bench --prompts all)
# The same sweep on the prompts whose drafts are accepted less often (bench --prompts code).
LIVE_CODE_PATH = LIVE_DIR / "spec_crossover_cpu_code.json"
PROMPT_SETS = ("all", "code")  # bench_live_spec.py --prompts, named in the lesson's words
LIVE_CURVES = {"live": LIVE_PATH, "live_code": LIVE_CODE_PATH}  # chart curve id -> its file
ROW_FIELDS = ("batch", "tpot_off_ms", "tpot_on_ms", "acceptance_rate", "tokens_per_verify")
OPTIONAL_RATIOS = ("tpot_ratio", "decode_time_ratio")  # in every row or in none
MAX_ROWS = 64  # a bench sweeps a few batch sizes; more is not a file of this format


def _number(row: dict, name: str, i: int) -> float:
    value = row.get(name)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if not ok:
        raise ValueError(f"row {i}: {name} must be a finite number, got {value!r}")
    return float(value)


def load_live(path: Path | str | None = None) -> dict | None:
    """The measurement at `path` (LIVE_PATH by default), checked; None if there is no file."""
    path = Path(path) if path is not None else LIVE_PATH
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"not a JSON file ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise ValueError("the file must hold one JSON object")
    for name in ("model", "device", "command"):
        if not isinstance(data.get(name), str):
            raise ValueError(f"{name} must be a string")
    if not isinstance(data.get("k"), int) or isinstance(data.get("k"), bool) or data["k"] < 1:
        raise ValueError("k must be a whole number >= 1")
    rows = data.get("rows")
    if not isinstance(rows, list) or not 1 <= len(rows) <= MAX_ROWS:
        raise ValueError(f"rows must be a list of 1 to {MAX_ROWS} objects")
    clean = []
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise ValueError(f"row {i} must be an object")
        values = {name: _number(row, name, i) for name in ROW_FIELDS}
        for name in OPTIONAL_RATIOS:
            if name in rows[0]:
                values[name] = _number(row, name, i)
                if values[name] <= 0:
                    raise ValueError(f"row {i}: {name} must be > 0")
        if values["batch"] < 1 or values["batch"] != int(values["batch"]):
            raise ValueError(f"row {i}: batch must be a whole number >= 1")
        if values["tpot_off_ms"] <= 0 or values["tpot_on_ms"] <= 0:
            raise ValueError(f"row {i}: TPOTs must be > 0 ms")
        clean.append({**values, "batch": int(values["batch"])})
    return {**data, "rows": sorted(clean, key=lambda r: r["batch"])}


def plain_name(text: str, limit: int = 60) -> str:
    """A name from the file as a chart may show it: no markup (plotly reads <b>, <a href=...>
    in trace names), one line, at most `limit` characters."""
    text = " ".join(str(text).split()).replace("<", "‹").replace(">", "›")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def live_table(data: dict, curve: str = "live", batch_time: bool = True) -> pd.DataFrame:
    """The rows as the ratio chart's table: `curve`, ratio = TPOT on / TPOT off (the paired
    ratio where the file has it); and, with `batch_time` where the file has it, curve
    `curve` + "_batch", the whole batch's decode time on / off (where a batch's throughput
    stops gaining)."""
    rows = data["rows"]
    frame = pd.DataFrame(rows, columns=list(ROW_FIELDS))
    frame.insert(0, "curve", curve)
    if "tpot_ratio" in rows[0]:
        frame["ratio"] = [r["tpot_ratio"] for r in rows]
    else:
        frame["ratio"] = frame["tpot_on_ms"] / frame["tpot_off_ms"]
    if not batch_time or "decode_time_ratio" not in rows[0]:
        return frame
    batch = frame.assign(curve=f"{curve}_batch", ratio=[r["decode_time_ratio"] for r in rows])
    return pd.concat([frame, batch], ignore_index=True)


def acceptance(data: dict) -> float:
    """The file's acceptance rate over every batch (drafts accepted / drafted); files written
    before it was recorded: the rows' mean."""
    value = data.get("acceptance_rate")
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return sum(r["acceptance_rate"] for r in data["rows"]) / len(data["rows"])


def numbers_table(table: pd.DataFrame) -> pd.DataFrame:
    """The live chart's table with one row per prompt set and batch: its TPOT curve's columns,
    plus the whole batch's decode-time ratio (`batch_ratio`, NaN where the file has none)."""
    batch = table[table.curve.str.endswith("_batch")]
    tpot = table[~table.curve.str.endswith("_batch")]
    times = batch.assign(curve=batch.curve.str.removesuffix("_batch"))
    times = times[["curve", "batch", "ratio"]].rename(columns={"ratio": "batch_ratio"})
    return tpot.merge(times, on=["curve", "batch"], how="left")


def live_labels(docs: dict[str, dict], T: Callable[..., str]) -> dict[str, str]:
    """Chart and sentence names of each file's curves: its TPOT curve by prompt set and
    acceptance, its batch-time curve by prompt set. A prompt set the lesson does not know is
    shown by its name, cut to letters, digits, spaces and dashes (it lands in Markdown too)."""
    labels = {}
    for cid, doc in docs.items():
        name = str(doc.get("prompts", "all"))  # bench --prompts
        if name in PROMPT_SETS:
            prompts = T(f"spec.prompts.{name}")
        else:
            prompts = re.sub(r"[^\w \-]", "", name)[:30] or "?"
        labels[cid] = T("spec.curve.live", prompts=prompts, acc=acceptance(doc))
        labels[f"{cid}_batch"] = T("spec.curve.live_batch", prompts=prompts)
    return labels
