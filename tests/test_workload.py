"""Tests for workloads: arrival processes, length distributions, presets, config and CSV import."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import FULL_TRACES, NEEDS_FULL_TRACES, azure_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.workloads.lengths import MAX_TOKENS
from sim.workloads.workload import (
    PRESETS,
    Fixed,
    LogNormal,
    Mixture,
    Uniform,
    WorkloadConfig,
    WorkloadError,
    build_requests,
    gamma_arrivals,
    generate,
    head,
    load_csv,
    mean_rate,
    poisson_arrivals,
    save_csv,
    scale_to_rate,
    time_window,
    to_csv_text,
    with_rate,
)


@pytest.fixture(scope="module")
def azure() -> dict[str, list]:
    """The full hour from ../shared where it is there, else the first 1,000 rows (tests/data)."""
    return {"chat": load_csv(azure_trace("conv")), "code": load_csv(azure_trace("code"))}


def _valid(requests: list) -> None:
    assert [r.request_id for r in requests] == list(range(len(requests)))
    arrivals = [r.arrival_s for r in requests]
    assert arrivals == sorted(arrivals)
    assert all(1 <= r.prompt_tokens <= MAX_TOKENS and r.output_tokens >= 1 for r in requests)


# --- generation ----------------------------------------------------------------------------------


def test_same_seed_same_list_different_seed_differs() -> None:
    config = WorkloadConfig(arrival="gamma", cv=2.0, num_requests=200, seed=7)
    assert generate(config) == generate(
        WorkloadConfig(arrival="gamma", cv=2.0, num_requests=200, seed=7)
    )
    assert generate(config) != generate(
        WorkloadConfig(arrival="gamma", cv=2.0, num_requests=200, seed=8)
    )
    _valid(generate(config))


def test_with_rate_replays_the_same_requests_faster() -> None:
    slow = generate(WorkloadConfig(rate_per_s=1.0, num_requests=50))
    fast = generate(with_rate(WorkloadConfig(rate_per_s=1.0, num_requests=50), 4.0))
    assert [(r.prompt_tokens, r.output_tokens) for r in slow] == [
        (r.prompt_tokens, r.output_tokens) for r in fast
    ]
    assert [f.arrival_s for f in fast] == pytest.approx([s.arrival_s / 4 for s in slow])


def test_poisson_mean_rate() -> None:
    times = poisson_arrivals(20_000, 5.0, seed=1)
    assert len(times) / times[-1] == pytest.approx(5.0, rel=0.03)


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 3.0])
def test_gamma_cv_and_rate(cv: float) -> None:
    gaps = np.diff(gamma_arrivals(20_001, 10.0, cv, seed=np.random.default_rng(2)))
    assert 1 / gaps.mean() == pytest.approx(10.0, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.1)


def test_burst_fixed_and_duration_cap() -> None:
    burst = generate(WorkloadConfig(arrival="burst", num_requests=20))
    assert len(burst) == 20 and all(r.arrival_s == 0 for r in burst)
    fixed = WorkloadConfig(arrival="fixed", arrival_times=[2.0, 0.0, 1.0], num_requests=3)
    assert [r.arrival_s for r in generate(fixed)] == [0.0, 1.0, 2.0]
    capped = generate(WorkloadConfig(rate_per_s=10.0, num_requests=1000, duration_s=5.0))
    assert 0 < len(capped) < 1000 and capped[-1].arrival_s <= 5.0
    _valid(capped)


@pytest.mark.parametrize(
    ("dist", "lo", "hi"),
    [
        (Fixed(7), 7, 7),
        (Uniform(10, 20), 10, 20),
        (LogNormal(100.0, 2.0, lo=50, hi=300), 50, 300),
        (Mixture(((1.0, Fixed(1)), (3.0, Uniform(5, 9)))), 1, 9),
    ],
)
def test_lengths_within_bounds(dist, lo: int, hi: int) -> None:
    x = dist.sample(5000, np.random.default_rng(0))
    assert x.dtype == np.int64 and x.min() >= lo and x.max() <= hi
    assert x.min() == lo and x.max() == hi  # both ends are reached (clipped mass, endpoints)


def test_length_specs_are_validated_and_hashable() -> None:
    for bad in (lambda: Fixed(0), lambda: Uniform(5, 3), lambda: LogNormal(100.0, -1.0)):
        with pytest.raises(ValueError):
            bad()
    mix = Mixture([[0.5, Fixed(3)], [0.5, Uniform(1, 2)]])  # lists become tuples
    config = WorkloadConfig(prompt=mix, output=LogNormal(50.0, 0.5))
    assert {config: 1}[WorkloadConfig(prompt=mix, output=LogNormal(50.0, 0.5))] == 1


@pytest.mark.skipif(not FULL_TRACES, reason=NEEDS_FULL_TRACES)  # the fit is to the whole hour
@pytest.mark.parametrize("preset", ["chat", "code"])
@pytest.mark.parametrize("field", ["prompt", "output"])
def test_presets_match_the_azure_trace(azure, preset: str, field: str) -> None:
    data = np.array([getattr(r, f"{field}_tokens") for r in azure[preset]])
    dist = PRESETS[preset][0 if field == "prompt" else 1]
    sample = dist.sample(50_000, np.random.default_rng(0))
    for q in (50, 90):
        assert np.percentile(sample, q) == pytest.approx(np.percentile(data, q), rel=0.15)


def test_chat_longdoc_has_about_5_percent_long_documents() -> None:
    prompts = PRESETS["chat+longdoc"][0].sample(20_000, np.random.default_rng(0))
    assert np.mean(prompts >= 8192) == pytest.approx(0.05, abs=0.01)
    assert prompts.max() <= 32768


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"arrival": "weird"}, "arrival"),
        ({"rate_per_s": 0}, "rate_per_s"),
        ({"rate_per_s": math.nan}, "rate_per_s"),
        ({"cv": 0.0}, "cv"),
        ({"num_requests": 0}, "num_requests"),
        ({"num_requests": 2.5}, "num_requests"),
        ({"num_requests": True}, "num_requests"),
        ({"prompt": "novel"}, "prompt"),
        ({"output": 5}, "output"),
        ({"seed": -1}, "seed"),
        ({"duration_s": 0.0}, "duration_s"),
        ({"arrival": "fixed", "arrival_times": (0.0, 1.0)}, "num_requests"),
        ({"arrival_times": (0.0,)}, "arrival_times"),
    ],
)
def test_config_rejects_bad_values_naming_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        WorkloadConfig(**kwargs)


@settings(max_examples=40, deadline=None)
@given(
    arrival=st.sampled_from(["poisson", "gamma", "burst"]),
    rate=st.floats(0.05, 500.0),
    cv=st.floats(0.2, 5.0),
    n=st.integers(1, 300),
    prompt=st.sampled_from([*PRESETS, Fixed(5), Uniform(1, 4000), LogNormal(300.0, 1.5)]),
    output=st.sampled_from([*PRESETS, Fixed(1), Uniform(1, 10)]),
    seed=st.integers(0, 2**32),
    duration=st.none() | st.floats(0.1, 100.0),
)
def test_any_sane_config_gives_valid_sorted_requests(
    arrival, rate, cv, n, prompt, output, seed, duration
) -> None:
    config = WorkloadConfig(arrival, rate, cv, n, prompt, output, seed, duration)
    requests = generate(config)
    _valid(requests)
    assert len(requests) == n if duration is None else len(requests) <= n


# --- CSV import / export -------------------------------------------------------------------------


def test_azure_traces_load(azure) -> None:
    for preset, rows in (("chat", 19_366), ("code", 8_819)):
        requests = azure[preset]
        assert len(requests) == (rows if FULL_TRACES else 1_000)
        _valid(requests)
        last = (3000, 3600) if FULL_TRACES else (200, 600)  # one hour; its first minutes
        assert requests[0].arrival_s == 0.0 and last[0] < requests[-1].arrival_s < last[1]
    first = azure["chat"][0]  # 2023-11-16 18:15:46.6805900,374,44
    assert (first.prompt_tokens, first.output_tokens) == (374, 44)


def test_azure_rows_are_sorted_zero_output_becomes_one_timezones(tmp_path: Path) -> None:
    path = tmp_path / "azure.csv"
    path.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:00:02.5,30,0\n"
        "2023-11-16 18:00:00.0000000,10,5\n"
        "2023-11-16T18:00:01+00:00,20,6\n"
    )
    requests = load_csv(path)
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens) for r in requests] == [
        (0.0, 10, 5),
        (1.0, 20, 6),
        (2.5, 30, 1),  # GeneratedTokens = 0 -> 1 token (documented rule)
    ]


def test_own_schema_round_trip(tmp_path: Path) -> None:
    requests = generate(WorkloadConfig(arrival="gamma", cv=3.0, num_requests=300, seed=3))
    requests = build_requests(
        [r.arrival_s for r in requests],
        [r.prompt_tokens for r in requests],
        [r.output_tokens for r in requests],
        [r.request_id % 4 for r in requests],
    )
    save_csv(requests, tmp_path / "w.csv")
    assert load_csv(tmp_path / "w.csv") == requests
    assert load_csv(io.StringIO(to_csv_text(requests))) == requests  # text upload
    assert load_csv(io.BytesIO(to_csv_text(requests).encode())) == requests  # Streamlit upload


def test_header_is_case_and_order_insensitive_priority_optional() -> None:
    text = "\ufeff Output_Tokens , arrival_s,prompt_tokens\n4,1.5,3\n\n2,0.5,9\n"
    requests = load_csv(io.StringIO(text))
    assert [(r.arrival_s, r.prompt_tokens, r.output_tokens, r.priority) for r in requests] == [
        (0.5, 9, 2, 0),
        (1.5, 3, 4, 0),
    ]


OWN = "arrival_s,prompt_tokens,output_tokens\n"
AZ = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        ("", 1, "header"),
        ("   \n", 1, "header"),
        ("time,prompt,output\n0,1,1\n", 1, "header"),
        (OWN, 2, "rows"),
        (OWN + "0,5,5\n0,5\n", 3, "row"),
        (OWN + "0,5,5\n1,abc,5\n", 3, "prompt_tokens"),
        (OWN + "0,-3,5\n", 2, "prompt_tokens"),
        (OWN + "0,5,0\n", 2, "output_tokens"),
        (OWN + "0,5,2.5\n", 2, "output_tokens"),
        (OWN + "0,nan,5\n", 2, "prompt_tokens"),
        (OWN + "0,5,inf\n", 2, "output_tokens"),
        (OWN + "0,2000000,5\n", 2, "prompt_tokens"),
        (OWN + "0,5,1048577\n", 2, "output_tokens"),
        (OWN + "-1,5,5\n", 2, "arrival_s"),
        (OWN + "nan,5,5\n", 2, "arrival_s"),
        (OWN + "1e9,5,5\n", 2, "arrival_s"),
        (OWN.strip() + ",priority\n0,5,5,high\n", 2, "priority"),
        (AZ + "2023-11-16 18:00:00,5,5\nyesterday,5,5\n", 3, "TIMESTAMP"),
        (AZ + "2023-11-16 18:00:00,0,5\n", 2, "ContextTokens"),
        (AZ + "2023-11-16 18:00:00,5,-1\n", 2, "GeneratedTokens"),
        (AZ + "2023-11-16 18:00:00,5,5\n2024-11-16 18:00:00,5,5\n", 3, "TIMESTAMP"),
    ],
)
def test_bad_csv_names_line_and_field(tmp_path: Path, text: str, line: int, field: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(WorkloadError) as caught:
        load_csv(path)
    message = str(caught.value)
    assert message.startswith(f"line {line}: ") and field in message and "\n" not in message
    assert (caught.value.line, caught.value.field) == (line, field)


def test_error_message_format_and_uploads() -> None:
    upload = io.StringIO(OWN + "0,5,5\n" * 5 + "0,-3,5\n")
    with pytest.raises(
        WorkloadError, match=r"^line 7: prompt_tokens must be a whole number >= 1, got '-3'$"
    ):
        load_csv(upload)
    with pytest.raises(WorkloadError, match="line 3: .*encoding"):
        load_csv(io.BytesIO(OWN.encode() + b"0,5,5\n0,\xff,5\n"))
    with pytest.raises(ValueError, match="arrival_s"):  # WorkloadError is a ValueError
        load_csv(io.BytesIO(b"\xef\xbb\xbf" + OWN.encode() + b"x,1,1\n"))


# --- trace helpers -------------------------------------------------------------------------------


def test_scale_to_rate_head_and_window(azure) -> None:
    trace = azure["chat"]
    rate = 5.53 if FULL_TRACES else 4.63  # 19,366 requests in ~58 min; the first 1,000 in 216 s
    assert mean_rate(trace) == pytest.approx(rate, rel=0.01)
    fast = scale_to_rate(trace, 20.0)
    assert mean_rate(fast) == pytest.approx(20.0)
    assert [r.prompt_tokens for r in fast] == [r.prompt_tokens for r in trace]
    first = head(trace, 100)
    assert first == trace[:100]
    window = time_window(trace, 60.0, 120.0)
    _valid(window)
    assert len(window) == sum(60.0 <= r.arrival_s < 120.0 for r in trace)
    assert window[0].arrival_s >= 0.0 and window[-1].arrival_s < 60.0
    with pytest.raises(ValueError):
        scale_to_rate(trace[:1], 1.0)
