"""The speculative decoding lesson's live measurement: TPOT off and on per batch, on a real model.

The live engine's n-gram speculation bench writes `assets/speculation/spec_crossover_cpu.json`:
{"model": str, "device": str, "k": int, "command": str,
 "rows": [{"batch": int, "tpot_off_ms": float, "tpot_on_ms": float,
           "acceptance_rate": float, "tokens_per_verify": float,
           # optional, in every row or none:
           "tpot_ratio": float,  # the median of repeats' paired on/off ratios
           "decode_time_ratio": float}, ...]}  # the whole batch's decode time, on / off
`load_live` reads and checks it (None where the file is absent; ValueError saying what is wrong
where it is malformed); `live_table` turns its rows into the table the lesson's ratio chart
draws (ui/charts_spec.py), as curve "live". Pure: no streamlit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

LIVE_PATH = (
    Path(__file__).resolve().parents[1] / "assets" / "speculation" / "spec_crossover_cpu.json"
)
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


def live_table(data: dict) -> pd.DataFrame:
    """The rows as the ratio chart's table: curve "live", ratio = TPOT on / TPOT off (the
    paired ratio where the file has it); and, where the file has it, curve "live_batch", the
    whole batch's decode time on / off (where a batch's throughput stops gaining)."""
    rows = data["rows"]
    frame = pd.DataFrame(rows, columns=list(ROW_FIELDS))
    frame.insert(0, "curve", "live")
    if "tpot_ratio" in rows[0]:
        frame["ratio"] = [r["tpot_ratio"] for r in rows]
    else:
        frame["ratio"] = frame["tpot_on_ms"] / frame["tpot_off_ms"]
    if "decode_time_ratio" not in rows[0]:
        return frame
    batch = frame.assign(curve="live_batch", ratio=[r["decode_time_ratio"] for r in rows])
    return pd.concat([frame, batch], ignore_index=True)
