"""Every lesson's default view shows its effect (issue 26).

ui/effects.py computes, for each lesson and tab, the figure its text promises, from the same
builders and defaults as the page (ui/lesson_setups.py). A change of defaults that leaves a
lesson showing nothing fails here, with the figures in the message.
"""

import pytest

from ui import effects
from ui import lesson_setups as ls


@pytest.mark.parametrize("contract", effects.CONTRACTS, ids=lambda c: c.page)
def test_the_default_view_shows_the_promised_effect(contract):
    figures = contract.measure()
    assert contract.holds(figures), f"{contract.page}: {contract.promise}; got {figures}"


def test_every_lesson_page_has_a_contract():
    pages = {c.page.split("/")[0] for c in effects.CONTRACTS}
    assert pages >= {
        "home",
        "prefill-vs-decode",
        "batching",
        "chunked-prefill",
        "long-prompts",
        "memory",
        "prefix-caching",
        "disaggregation",
        "speculative-decoding",
    }
    tabs = {c.page for c in effects.CONTRACTS}
    assert {
        "long-prompts/blocking",
        "long-prompts/starvation",
        "prefix-caching/system",
        "prefix-caching/trace",
        "prefix-caching/eviction",
        "disaggregation/wins",
        "disaggregation/loses",
    } <= tabs


def test_the_old_defaults_showed_nothing_where_the_issue_said():
    """The contracts catch what issue 26 found: at the old defaults they fail."""
    holds = {c.page: c.holds for c in effects.CONTRACTS}
    assert not holds["long-prompts/starvation"](effects.starvation(aging=2.0))
    assert not holds["prefix-caching/system"](effects.prefix_system(system=2000))
    assert effects.prefix_evict(24000)["hit_rate_default"] == 0


def test_home_compares_the_same_number_of_gpus():
    runs = effects._runs(ls.home_specs())
    assert len({run.meta["num_gpus"] for run in runs.values()}) == 1


@pytest.mark.parametrize("seed", [1, 2])
def test_the_disaggregation_verdicts_do_not_hang_on_one_draw_of_requests(seed):
    holds = {c.page: c.holds for c in effects.CONTRACTS}
    for preset in ("wins", "loses"):
        figures = effects.disagg_goodput(preset, seed=seed)
        assert holds[f"disaggregation/{preset}"](figures), (preset, seed, figures)


def test_the_new_sections_show_nothing_where_their_knob_says_so():
    """Issue 29: TGI at ratio 0 joins at once (as vLLM V1 does), and llm-d's default
    non_cached_tokens 0 sends every prompt to P (as always does): each contract then fails."""
    holds = {c.page: c.holds for c in effects.CONTRACTS}
    assert {"batching/tgi", "disaggregation/deciders"} <= set(holds)
    assert not holds["batching/tgi"](effects.tgi(0.0))
    zero = effects.deciders(0)
    assert zero["remote_llm-d-prefix"] == zero["remote_always"]
    assert not holds["disaggregation/deciders"](zero)


def test_the_speculative_crossover_moves_with_the_acceptance():
    """Issue 31: the acceptance rate moves the crossover. With high rates (0.9 per draft) the
    chart's low curve is the only one to cross; with rates as low as 0.3 per draft the visitor's
    own curve crosses too, at a smaller batch than the 0.5 curve, and the contract fails."""
    holds = {c.page: c.holds for c in effects.CONTRACTS}["speculative-decoding/crossover"]
    figures = effects.speculative(accept="geometric", alpha=0.3)
    assert figures["ratio_last_chosen"] > figures["ratio_last_low"] > 1
    assert figures["crossover_chosen"] < figures["crossover_low"]
    assert not holds(figures)
    rows = [(1, 0.5), (64, 0.8), (128, 1.2), (256, 1.3)]
    assert ls.crossover_batch(*zip(*rows, strict=True)) == pytest.approx(2 ** (6 + 0.5))
    assert ls.crossover_batch([1, 8], [0.5, 0.9]) is None
    assert ls.crossover_batch([1, 8], [1.1, 1.2]) == 1.0
