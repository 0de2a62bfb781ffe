"""ui/decisions.py: the per-request table of who prefilled where, and why (pure, no browser)."""

import math

import pytest

from ui.decisions import decision_table, path, remote_counts, why
from ui.i18n import t


def T(key, **fmt):
    return t(key, "en", **fmt)


def decision(mode, remote, prompt, cached, token_t=math.nan, ratio_t=math.nan):
    return {
        "request_id": 0,
        "mode": mode,
        "remote": remote,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "uncached_tokens": prompt - cached,
        "token_threshold": token_t,
        "ratio_threshold": ratio_t,
        "prefill_busy": None,
    }


def test_path_says_where_the_prompt_was_prefilled():
    assert path("P0>D0", T) == "P0 → D0"
    assert path("D1", T) == "D1 (local)"


@pytest.mark.parametrize(
    "d, text",
    [
        (decision("always", True, 300, 0), ""),
        (decision("isl_bounding", True, 9000, 0, 2048, 0.7), "9,000 ≥ 2,048"),
        (
            decision("isl_bounding", True, 300, 0, 2048, 0.7),
            "300 < 2,048 but 1.00 ≥ 0.7",
        ),
        (
            decision("isl_bounding", False, 6400, 6000, 2048, 0.7),
            "400 < 2,048 and 0.06 < 0.7",
        ),
        (decision("llm-d-prefix", False, 300, 0, 1024), "300 < 1,024"),
        (decision("llm-d-prefix", True, 3200, 1792, 1024), "1,408 ≥ 1,024"),
        (decision("llm-d-prefix", True, 300, 0, 0), "threshold 0"),
    ],
)
def test_why_names_the_test_with_the_requests_numbers(d, text):
    assert why(d, T) == text


def test_the_lesson_trace_differs_under_the_three_deciders():
    from sim.cluster.topologies import simulate
    from ui import lesson_setups as ls

    runs = [(m, simulate(list(w), c)) for m, w, c in ls.decider_specs(1024)]
    table = decision_table(runs, T)
    assert len(table) == len(ls.decider_trace())
    assert table.loc[0, "Request"] == "R0"  # as the timeline names its rows
    assert table.loc[0, "always"] == "P0 → D0"  # always tests nothing
    assert remote_counts(runs) == {"always": 10, "isl_bounding": 7, "llm-d-prefix": 5}
    # request 6 (system prompt, second use): Dynamo keeps it on D, llm-d sends it to P
    assert table.loc[6, "isl_bounding"].startswith("D0 (local)")
    assert table.loc[6, "llm-d-prefix"].startswith("P0 → D0")


def test_a_run_without_decisions_is_refused_in_words():
    from sim.cluster.topologies import simulate
    from sim.config import SimConfig
    from ui import lesson_setups as ls

    run = simulate(list(ls.decider_trace()), SimConfig())
    with pytest.raises(ValueError, match="kept no decisions"):
        decision_table([("colocated", run)], T)
