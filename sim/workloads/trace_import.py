"""Read and write workload files: PD Lab's CSV, the Azure LLM inference trace, Mooncake JSONL.

Notable features
- `load_csv(source)` takes a path or an open file (text or bytes, e.g. a Streamlit upload) and
  detects the schema from the header (names match ignoring case and spaces, in any order):
    PD Lab  arrival_s,prompt_tokens,output_tokens[,priority][,prefix_group,prefix_tokens]
            (seconds, tokens; the first prefix_tokens tokens of every request of one
            prefix_group are the same tokens, e.g. a shared system prompt)
    Azure   TIMESTAMP,ContextTokens,GeneratedTokens            (date-times, tokens)
- `load_mooncake(source)` reads the Mooncake FAST'25 traces (JSON lines: timestamp in ms,
  input_length, output_length, hash_ids = one chained hash per 512-token prompt block).
  `load_workload(path)` picks the reader by the file's extension (.jsonl = Mooncake).
- `max_rows` stops reading after that many requests (a hosted page never parses more than it
  will simulate; the rest of the file is not read).
- Azure timestamps become seconds since the earliest row; rows may come in any order and are
  sorted by arrival (ties keep file order), then numbered 0..n-1.
- Every problem raises `WorkloadError` with ONE line naming the file line (header = line 1) and
  the field, e.g. "line 7: prompt_tokens must be a whole number >= 1, got '-3'".
- Odd-data rule: an Azure row with GeneratedTokens = 0 is kept, with output_tokens = 1. Such rows
  are real (a request the service answered with nothing) and still cost a prefill, which always
  yields one token. The 2023 Azure files have none (smallest GeneratedTokens: 7 conv, 6 code).
  In PD Lab files output_tokens must be >= 1, like `RequestSpec`.
- `save_csv` / `to_csv_text` write the PD Lab schema; loading the file back gives equal requests.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from sim.core.request import RequestSpec
from sim.workloads.arrivals import build_requests
from sim.workloads.lengths import MAX_TOKENS

MAX_ARRIVAL_S = 30 * 24 * 3600.0  # 30 days: a later arrival is a unit mix-up (ms? us?)
PDLAB_HEADER = "arrival_s,prompt_tokens,output_tokens,priority"
ACCEPTED_HEADERS = (
    "'arrival_s,prompt_tokens,output_tokens[,priority]' (PD Lab) or "
    "'TIMESTAMP,ContextTokens,GeneratedTokens' (Azure LLM inference trace)"
)
# schema -> (required columns, optional columns)
_SCHEMAS = {
    "pdlab": (
        ("arrival_s", "prompt_tokens", "output_tokens"),
        ("priority", "prefix_group", "prefix_tokens"),
    ),
    "azure": (("TIMESTAMP", "ContextTokens", "GeneratedTokens"), ()),
}

Source = str | os.PathLike[str] | IO[str] | IO[bytes]


class WorkloadError(ValueError):
    """A workload file PD Lab cannot use; the message names the line and the field."""

    def __init__(self, line: int, field: str, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line  # 1-based; the header is line 1
        self.field = field
        self.problem = problem

    def __reduce__(self) -> tuple:  # so it survives pickling (e.g. from a worker process)
        return (WorkloadError, (self.line, self.field, self.problem))


def _match_header(cells: list[str], line: int) -> tuple[str, dict[str, int]]:
    names = [c.strip().lower() for c in cells]
    for schema, (required, optional) in _SCHEMAS.items():
        canonical = {c.lower(): c for c in required + optional}
        if (
            len(set(names)) == len(names)
            and set(names) <= canonical.keys()
            and all(c.lower() in names for c in required)
        ):
            return schema, {canonical[n]: i for i, n in enumerate(names)}
    raise WorkloadError(
        line, "header", f"unrecognised header {','.join(cells)!r}; accepted: {ACCEPTED_HEADERS}"
    )


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


def _tokens(text: str, line: int, field: str, *, zero_means_one: bool = False) -> int:
    lowest = 0 if zero_means_one else 1
    if text.isdigit() and text.isascii():  # plain digits (every row of a trace): as an int
        count = int(text)
        if lowest <= count <= MAX_TOKENS:
            return count or 1
    value = _float(text)
    if not (math.isfinite(value) and value >= lowest and value == int(value)):
        problem = f"{field} must be a whole number >= {lowest}, got {text!r}"
        raise WorkloadError(line, field, problem)
    if value > MAX_TOKENS:
        raise WorkloadError(line, field, f"{field} must be at most {MAX_TOKENS:,}, got {text!r}")
    return max(int(value), 1)


def _priority(text: str, line: int) -> int:
    value = _float(text)
    if not (math.isfinite(value) and value == int(value) and abs(value) < 2**31):
        raise WorkloadError(line, "priority", f"priority must be a whole number, got {text!r}")
    return int(value)


def _arrival(text: str, line: int) -> float:
    value = _float(text)
    if not (math.isfinite(value) and value >= 0):
        raise WorkloadError(line, "arrival_s", f"arrival_s must be seconds >= 0, got {text!r}")
    if value > MAX_ARRIVAL_S:
        problem = f"arrival_s must be at most {MAX_ARRIVAL_S:,.0f} (30 days), got {text!r}"
        raise WorkloadError(line, "arrival_s", problem)
    return value


def _timestamp(text: str, line: int) -> datetime:
    try:
        ts = datetime.fromisoformat(text.strip())
        # compare as naive UTC; a time zone can push year 1 or 9999 out of range (OverflowError)
        ts = ts.astimezone(UTC).replace(tzinfo=None) if ts.tzinfo else ts
    except OverflowError:
        problem = f"TIMESTAMP {text.strip()!r} is out of range once converted to UTC"
        raise WorkloadError(line, "TIMESTAMP", problem) from None
    except ValueError:
        raise WorkloadError(
            line,
            "TIMESTAMP",
            f"TIMESTAMP must be a date-time like '2023-11-16 18:15:46.6805900', got {text!r}",
        ) from None
    return ts


def _prefix(cells: list[str], col: dict[str, int], line: int, prompt: int) -> tuple:
    """(prefix_group, prefix_tokens, ()) of a PD Lab row (both columns, or neither)."""
    if "prefix_group" not in col and "prefix_tokens" not in col:
        return ("", 0, ())
    if not ("prefix_group" in col and "prefix_tokens" in col):
        raise WorkloadError(
            line, "prefix_group", "prefix_group and prefix_tokens go together: add both columns"
        )
    group = cells[col["prefix_group"]].strip()
    text = cells[col["prefix_tokens"]]
    value = _float(text) if text.strip() else 0.0
    if not (math.isfinite(value) and value == int(value) and 0 <= value <= prompt):
        raise WorkloadError(
            line,
            "prefix_tokens",
            "prefix_tokens must be a whole number between "
            f"0 and prompt_tokens ({prompt}), got {text!r}",
        )
    if value and not group:
        raise WorkloadError(line, "prefix_group", "prefix_tokens > 0 needs a prefix_group")
    return (group, int(value), ())


def _lines_of(source: Source, max_bytes: int | None = None):
    """The text, line by line, read lazily from a path or decoded from a file-like object."""
    if isinstance(source, str | os.PathLike):
        with open(source, encoding="utf-8-sig", errors="strict", newline="") as fh:
            try:
                yield from fh
            except UnicodeDecodeError:
                raise WorkloadError(
                    1, "encoding", "the text encoding is not UTF-8; save the file as CSV UTF-8"
                ) from None
        return
    data = source.getvalue() if hasattr(source, "getvalue") else source.read()
    if isinstance(data, str):
        yield from io.StringIO(data.removeprefix("\ufeff"), newline="")
        return
    # Bytes (a Streamlit upload): decoded line by line as the rows are read, so that a reader
    # stopping at max_rows never decodes (or holds as text) the rest of a large file.
    for number, raw in enumerate(io.BytesIO(data), start=1):
        try:
            text = raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError:
            raise WorkloadError(
                number, "encoding", "the text encoding is not UTF-8; save the file as CSV UTF-8"
            ) from None
        yield from io.StringIO(text, newline="")  # a lone \r still ends a line


def load_csv(source: Source, max_rows: int | None = None) -> list[RequestSpec]:
    """Read a PD Lab or Azure-trace CSV (path or file-like) into sorted, numbered RequestSpecs.

    With `max_rows`, only the first `max_rows` request rows are read.
    """
    reader = csv.reader(_lines_of(source))
    schema, col, width = "", {}, 0
    arrivals, stamps, lines, prompts, outputs, priorities = [], [], [], [], [], []
    prefixes = []
    try:
        for cells in reader:
            line = reader.line_num
            if not "".join(cells).strip():
                continue  # blank line (every cell blank)
            if not col:
                schema, col = _match_header(cells, line)
                width = len(cells)
                continue
            if max_rows is not None and len(lines) >= max_rows:
                break
            if len(cells) != width:
                problem = f"row has {len(cells)} values, expected {width} ({', '.join(col)})"
                raise WorkloadError(line, "row", problem)
            if schema == "azure":
                stamps.append(_timestamp(cells[col["TIMESTAMP"]], line))
                prompts.append(_tokens(cells[col["ContextTokens"]], line, "ContextTokens"))
                generated = cells[col["GeneratedTokens"]]
                outputs.append(_tokens(generated, line, "GeneratedTokens", zero_means_one=True))
            else:
                arrivals.append(_arrival(cells[col["arrival_s"]], line))
                prompts.append(_tokens(cells[col["prompt_tokens"]], line, "prompt_tokens"))
                outputs.append(_tokens(cells[col["output_tokens"]], line, "output_tokens"))
                if "priority" in col:
                    priorities.append(_priority(cells[col["priority"]], line))
                prefixes.append(_prefix(cells, col, line, prompts[-1]))
            lines.append(line)
    except csv.Error as e:
        raise WorkloadError(reader.line_num, "csv", f"malformed CSV: {e}") from None
    if not col:
        problem = f"the file is empty; expected a header: {ACCEPTED_HEADERS}"
        raise WorkloadError(1, "header", problem)
    if not lines:
        raise WorkloadError(reader.line_num + 1, "rows", "no request rows after the header")
    if schema == "azure":
        start = min(stamps)
        arrivals = [(ts - start).total_seconds() for ts in stamps]
        last = max(range(len(arrivals)), key=arrivals.__getitem__)
        if arrivals[last] > MAX_ARRIVAL_S:
            raise WorkloadError(
                lines[last], "TIMESTAMP", "TIMESTAMP is more than 30 days after the earliest row"
            )
    return build_requests(arrivals, prompts, outputs, priorities or None, prefixes or None)


def load_mooncake(source: Source, max_rows: int | None = None) -> list[RequestSpec]:
    """Read a Mooncake trace (JSON lines) into sorted, numbered RequestSpecs with hash ids."""
    arrivals, prompts, outputs, prefixes = [], [], [], []
    for line, text in enumerate(_lines_of(source), start=1):
        if not text.strip():
            continue
        if max_rows is not None and len(arrivals) >= max_rows:
            break
        try:
            row = json.loads(text)
            stamp, n_in, n_out = row["timestamp"], row["input_length"], row["output_length"]
            hashes = tuple(int(h) for h in row.get("hash_ids", ()))
        except RecursionError:  # a row nested thousands deep is no Mooncake row
            raise WorkloadError(line, "json", "the JSON is nested too deep") from None
        except (ValueError, KeyError, TypeError, OverflowError) as e:  # (int(1e400): Overflow)
            problem = f"expected timestamp, input_length, output_length, hash_ids ({e})"
            raise WorkloadError(line, "json", problem) from None
        arrivals.append(_arrival(str(stamp / 1000 if _is_number(stamp) else stamp), line))
        prompts.append(_tokens(str(n_in), line, "input_length"))
        outputs.append(_tokens(str(n_out), line, "output_length", zero_means_one=True))
        prefixes.append(("", 0, hashes))
    if not arrivals:
        raise WorkloadError(1, "rows", "no requests in the file")
    start = min(arrivals)
    return build_requests([a - start for a in arrivals], prompts, outputs, None, prefixes)


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def load_workload(source: Source, max_rows: int | None = None) -> list[RequestSpec]:
    """A workload file by its extension: .jsonl = Mooncake trace, anything else = CSV."""
    name = str(source) if isinstance(source, str | os.PathLike) else getattr(source, "name", "")
    if name.lower().endswith((".jsonl", ".json")):
        return load_mooncake(source, max_rows)
    return load_csv(source, max_rows)


def to_csv_text(requests: Iterable[RequestSpec]) -> str:
    """The requests as PD Lab CSV text (e.g. for a download button)."""
    requests = list(requests)
    shared = any(r.prefix_tokens for r in requests)
    rows = [PDLAB_HEADER + (",prefix_group,prefix_tokens" if shared else "")]
    for r in requests:
        row = f"{float(r.arrival_s)!r},{r.prompt_tokens},{r.output_tokens},{r.priority}"
        rows.append(row + (f",{r.prefix_group},{r.prefix_tokens}" if shared else ""))
    return "\n".join(rows) + "\n"


def save_csv(requests: Iterable[RequestSpec], path: str | os.PathLike[str]) -> None:
    """Write the requests to `path` in PD Lab's schema (load_csv reads it back unchanged)."""
    Path(path).write_text(to_csv_text(requests), encoding="utf-8")
