"""The animated Gantt: colours, bars, frames, pinned axes, subplots, translations and readout."""

from __future__ import annotations

import time

import numpy as np
import pytest
from fake_runs import make_run, request_row, segment_row, step_row

from sim.cluster.topologies import simulate
from sim.config import SimConfig
from sim.scenarios import get_scenario
from sim.workloads.workload import WorkloadConfig, generate
from ui import gantt_frames as gf
from ui import gantt_layout as gl
from ui.gantt import (
    CLIP_MAX_BARS,
    choose_design,
    frame_times,
    static_timeline_figure,
    timeline_figure,
)
from ui.i18n import catalog, t
from ui.theme import COLORS, CURSOR, OUTLINE, SLOWED_PATTERN

PHASES = gf.TRACE_PHASES


def tiny_run():
    """Three requests on worker I0 plus a second worker I1 that only holds KV (times in s).

    At t = 2.2 s: R2 is preempted (queue 1), R0 and R1 decode (running 2), KV = I0's step 2
    (500) + I1's step 0 (200) over 2 x 1000 = 35 %, tokens = R0's 3 + R1's 2 = 5.
    """
    requests = [
        request_row(0, 0.0, 1.0, 3.0, output_tokens=5),
        request_row(1, 0.5, 1.5, 3.0, output_tokens=3),
        request_row(2, 1.0, 3.0, 3.0, output_tokens=1),
    ]
    segments = [
        segment_row(0, "I0", "prefill", 0.0, 1.0, tokens=100, step_first=0, step_last=0),
        segment_row(0, "I0", "decode", 1.0, 3.0, tokens=4, step_first=1, step_last=2),
        segment_row(1, "I0", "queued", 0.5, 1.0),
        segment_row(1, "I0", "prefill", 1.0, 1.5, tokens=100, step_first=1, step_last=1),
        segment_row(1, "I0", "decode", 1.5, 3.0, tokens=2, slowed=True, step_first=2, step_last=2),
        segment_row(2, "I0", "queued", 1.0, 2.0),
        segment_row(2, "I0", "preempted", 2.0, 2.5),
        segment_row(2, "I0", "stall", 2.5, 2.6, step_first=2, step_last=2),
        segment_row(
            2, "I0", "prefill", 2.6, 3.0, tokens=100, recompute=True, step_first=2, step_last=2
        ),
    ]
    steps = [
        step_row("I0", 0, 0.0, 1.0, kv_used_tokens=100),
        step_row("I0", 1, 1.0, 1.5, kv_used_tokens=300),
        step_row("I0", 2, 1.5, 3.0, kv_used_tokens=500),
        step_row("I1", 0, 0.0, 2.0, kv_used_tokens=200),
    ]
    token_times = {0: [1.0, 1.5, 2.0, 2.5, 3.0], 1: [1.5, 2.0, 3.0], 2: [3.0]}
    return make_run(requests, segments, steps, token_times)


@pytest.fixture(scope="module")
def c5_runs():
    """The two variants of lesson C5 (9 requests each): small, so the 'clip' design."""
    scenario = get_scenario("c5")
    return [(v.label, simulate(scenario.requests(v), v.config)) for v in scenario.variants]


def bar_traces(fig, panel: int = 0):
    """The bar traces of one subplot, in TRACE_PHASES order."""
    yref = gl.axis_refs(panel)[1]
    return [tr for tr in fig.data if tr.type == "bar" and tr.yaxis == yref]


def test_trace_colours_are_the_theme_colours():
    fig = timeline_figure([("run", tiny_run())])
    traces = bar_traces(fig)
    assert [tr.legendgroup for tr in traces] == list(PHASES)
    for tr in traces:
        colour = COLORS["decode"] if tr.legendgroup == "decode_slowed" else COLORS[tr.legendgroup]
        assert tr.marker.color == colour
    by_phase = {tr.legendgroup: tr for tr in traces}
    assert by_phase["decode_slowed"].marker.pattern.shape == SLOWED_PATTERN
    assert by_phase["stall"].marker.line.color == OUTLINE
    assert fig.layout.shapes[-1].line.color == CURSOR


def test_one_bar_per_segment_of_each_kind(c5_runs):
    fig = timeline_figure(c5_runs)
    for panel, (_, run) in enumerate(c5_runs):
        counts = {tr.legendgroup: len(tr.x) for tr in bar_traces(fig, panel)}
        segs = run.segments
        for kind in ("queued", "prefill", "stall", "kv_transfer", "preempted"):
            assert counts[kind] == (segs["kind"] == kind).sum()
        decode = segs[segs["kind"] == "decode"]
        assert counts["decode"] == (~decode["slowed"]).sum()
        assert counts["decode_slowed"] == decode["slowed"].sum()


def test_clip_frames_grow_bars_and_end_on_the_full_chart(c5_runs):
    fig = timeline_figure(c5_runs, num_frames=30)
    assert choose_design(sum(len(tr.x) for tr in fig.data if tr.type == "bar")) == "clip"
    times = frame_times(fig.layout.xaxis.range[1], 30)
    bars = [tr for tr in fig.data if tr.type == "bar"]
    full = [np.asarray(tr.x) for tr in bars]
    for k in (0, 7, 15, 29):
        frame = fig.frames[k]
        frame_bars = [d for d in frame.data if d.type == "bar"]
        assert len(frame.data) == len(fig.data)  # same trace structure in every frame
        for tr, fr in zip(bars, frame_bars, strict=True):
            start = np.asarray(tr.base, dtype=float)
            end = start + np.asarray(tr.x, dtype=float)
            expected = np.maximum(np.minimum(end, times[k]) - start, 0.0)
            np.testing.assert_allclose(np.asarray(fr.x, dtype=float), expected, atol=1e-5)
        assert frame.layout.shapes[-1].x0 == pytest.approx(times[k])
    last = [np.asarray(d.x) for d in fig.frames[-1].data if d.type == "bar"]
    for a, b in zip(last, full, strict=True):
        np.testing.assert_array_equal(a, b)
    assert all(
        len(x) == 0 or x.sum() == 0
        for x in (np.asarray(d.x) for d in fig.frames[0].data if d.type == "bar")
    )


def test_cursor_design_frames_carry_only_layout():
    fig = timeline_figure([("a", tiny_run()), ("b", tiny_run())], num_frames=5, design="cursor")
    times = frame_times(3.0, 5)
    for k, frame in enumerate(fig.frames):
        assert not frame.data
        masks = [s for s in frame.layout.shapes if s.type == "rect"]
        lines = [s for s in frame.layout.shapes if s.type == "line"]
        assert len(masks) == 2 and len(lines) == 1
        assert all(m.x0 == pytest.approx(times[k]) and m.x1 == pytest.approx(3.0) for m in masks)
        assert lines[0].x0 == lines[0].x1 == pytest.approx(times[k])
    # the chart as loaded is the end state: masks of zero width
    assert all(s.x0 == pytest.approx(3.0) for s in fig.layout.shapes if s.type == "rect")


def test_axes_are_pinned(c5_runs):
    fig = timeline_figure(c5_runs)
    t_end = max(run.segments["end_s"].max() for _, run in c5_runs)
    for panel, (_, run) in enumerate(c5_runs):
        xname, yname = gl.axis_names(panel)
        yaxis, xaxis = fig.layout[yname], fig.layout[xname]
        rows = [f"R{i}" for i in sorted(run.requests["request_id"])]
        assert yaxis.categoryorder == "array" and list(yaxis.categoryarray) == rows
        assert list(yaxis.range) == [len(rows) - 0.5, -0.5] and yaxis.autorange is False
        assert list(xaxis.range) == pytest.approx([0, t_end]) and xaxis.autorange is False
    assert list(timeline_figure(c5_runs, t_end=10).layout.xaxis.range) == [0, 10]


def test_two_runs_share_the_time_axis_and_one_cursor(c5_runs):
    fig = timeline_figure(c5_runs)
    assert fig.layout.yaxis2.domain[1] < fig.layout.yaxis.domain[0]  # stacked, no overlap
    assert fig.layout.xaxis2.matches == "x"
    assert [s.type for s in fig.layout.shapes] == ["line"]
    assert fig.layout.shapes[0].yref == "paper"
    assert [a.text for a in fig.layout.annotations[2:]] == [f"<b>{lab}</b>" for lab, _ in c5_runs]
    # each phase's legend entry is shown once
    shown = [tr.legendgroup for tr in fig.data if tr.type == "bar" and tr.showlegend]
    assert sorted(shown) == sorted(set(shown))


def test_korean_labels():
    fig = timeline_figure([("실행", tiny_run())], lang="ko", num_frames=3)
    ko = catalog("ko")
    assert {tr.name for tr in bar_traces(fig)} == {ko[f"gantt.phase.{p}"] for p in PHASES}
    assert fig.layout.xaxis.title.text == "시간(초)"  # glossary: "(" attached
    assert fig.layout.annotations[0].text.startswith("대기 ")
    assert fig.layout.sliders[0].steps[1].label == "t = 1.5초"
    assert "일시정지" in fig.layout.updatemenus[0].buttons[-1].label
    assert fig.layout.yaxis.categoryarray[0] == "요청 0"  # rows name requests as the tables do
    assert bar_traces(fig)[0].hovertemplate.startswith("<b>%{y}</b>")  # the row says 요청 0


def test_readout_numbers_by_hand():
    run = tiny_run()
    readout = gf.readout(run, np.array([0.0, 2.2, 3.0, 5.0]))
    assert readout.queue.tolist() == [0, 1, 0, 0]
    assert readout.running.tolist() == [1, 2, 0, 0]
    assert readout.kv_fraction[:2] == pytest.approx([0.15, 0.35])  # (100 + 200) / 2000
    assert readout.tokens.tolist() == [0, 5, 9, 9]
    fig = timeline_figure([("run", run)], num_frames=3, t_end=4.4)  # frame 1 is t = 2.2 s
    expected = t("gantt.readout", "en", queue=1, running=2, kv=35.0, tokens=5)
    assert fig.frames[1].layout.annotations[0].text == expected
    tokens = [d for d in fig.frames[1].data if d.type == "scatter"][0]
    assert list(tokens.text) == ["3 tok", "2 tok", "0 tok"]


def test_hover_names_request_phase_worker_steps_tokens_and_times():
    tr = {tr.legendgroup: tr for tr in bar_traces(timeline_figure([("r", tiny_run())]))}
    template = tr["prefill"].hovertemplate
    for word in ("request", "phase", "worker", "steps", "tokens", "time"):
        assert word in template
    assert list(tr["prefill"].customdata[0]) == [0.0, 1.0, 100.0, 0.0, 0.0]
    assert "recomputes" in tr["prefill"].hovertext[-1]


def test_design_threshold_and_merged_bars_for_big_runs():
    assert choose_design(CLIP_MAX_BARS) == "clip"
    assert choose_design(CLIP_MAX_BARS + 1) == "cursor"
    run = simulate(generate(WorkloadConfig(rate_per_s=12, num_requests=1000, seed=1)), SimConfig())
    start = time.perf_counter()
    fig = timeline_figure([("chunked", run)])
    assert time.perf_counter() - start < 5.0  # about 0.2 s here; generous for busy CI
    bars = sum(len(tr.x) for tr in fig.data if tr.type == "bar")
    assert bars < len(run.segments) / 5  # back-to-back segments merged on 0.6-px rows
    assert not fig.frames[0].data  # cursor design
    tick_px = gl.label_stride(1000, 660) * 660 / 1000
    assert tick_px >= gl.ROW_LABEL_PX  # row labels never overlap
    assert len(fig.to_json()) < 2_000_000


def test_merge_joins_back_to_back_segments_of_one_kind():
    """Thin rows merge a request's back-to-back segments. A slowed step hatches what joins it
    within its 1/200 of the time axis (so it stays visible), not the whole stretch around it
    (issue 26: a merged bar keeps the evidence, and plain decoding still looks plain)."""
    run = make_run(
        [request_row(0, 0.0, 1.0, 3.0, output_tokens=8)],
        [
            # one bin of 2.0 s / 200 = 10 ms: a plain and a slowed step start in it
            segment_row(0, "I0", "decode", 1.000, 1.004, tokens=1, step_first=1, step_last=1),
            segment_row(
                0, "I0", "decode", 1.004, 1.008, tokens=1, slowed=True, step_first=2, step_last=2
            ),
            # then plain decoding over many bins: one plain bar
            segment_row(0, "I0", "decode", 1.008, 1.5, tokens=2, step_first=3, step_last=4),
            segment_row(0, "I0", "decode", 1.5, 2.0, tokens=1, step_first=5, step_last=5),
            segment_row(
                0, "I0", "decode", 2.0, 2.5, tokens=1, slowed=True, step_first=6, step_last=6
            ),
            segment_row(0, "I0", "stall", 2.5, 2.6, step_first=7, step_last=7),
            segment_row(0, "I0", "decode", 2.6, 3.0, tokens=2, step_first=8, step_last=9),
        ],
    )
    bars = gf.split_bars(run, merge=True)
    hatched, plain = bars["decode_slowed"], bars["decode"]
    assert hatched.start.tolist() == [1.0, 2.0]
    assert hatched.end.tolist() == pytest.approx([1.01, 2.5])  # the first drawn one bin wide
    assert hatched.tokens.tolist() == [2, 1] and hatched.step_last.tolist() == [2, 6]
    assert plain.start.tolist() == [1.008, 2.6] and plain.end.tolist() == [2.0, 3.0]
    assert plain.tokens.tolist() == [3, 2] and plain.step_first.tolist() == [3, 8]
    assert bars["stall"].start.tolist() == [2.5] and bars["stall"].end.tolist() == [2.6]
    unmerged = gf.split_bars(run)
    assert len(unmerged["decode"]) == 4 and len(unmerged["decode_slowed"]) == 2


def test_merged_rows_keep_the_hatching_of_a_busy_colocated_run():
    """Many requests on thin rows: every request whose decode was ever slowed stays hatched."""
    run = simulate(generate(WorkloadConfig(rate_per_s=12, num_requests=300, seed=1)), SimConfig())
    segs = run.segments
    slowed_ids = set(segs[(segs.kind == "decode") & segs.slowed].request_id)
    assert slowed_ids  # chunked prefill slows decodes in this run
    merged = gf.split_bars(run, merge=True)
    hatched = {int(r[1:]) for r in merged["decode_slowed"].row}
    assert hatched == slowed_ids


def test_token_counters_only_for_few_rows(c5_runs):
    assert any(tr.type == "scatter" for tr in timeline_figure(c5_runs).data)
    assert not any(tr.type == "scatter" for tr in timeline_figure(c5_runs, design="cursor").data)


def test_controls_and_static_figure():
    fig = timeline_figure([("r", tiny_run())], num_frames=4)
    labels = [b.label for b in fig.layout.updatemenus[0].buttons]
    assert labels == ["▶ 0.5×", "▶ 1×", "▶ 2×", "▶ 4×", "❚❚ pause"]
    assert all(b.args[1]["frame"]["redraw"] is False for b in fig.layout.updatemenus[0].buttons)
    steps = fig.layout.sliders[0].steps
    assert [s.label for s in steps] == ["t = 0.0 s", "t = 1.0 s", "t = 2.0 s", "t = 3.0 s"]
    static = static_timeline_figure([("r", tiny_run())])
    assert not static.frames and not static.layout.sliders and not static.layout.shapes
    assert [a.text for a in static.layout.annotations] == ["<b>r</b>"]
    assert len(static.data) == len(PHASES)


def test_frame_times():
    assert frame_times(3.0, 4).tolist() == [0.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError):
        frame_times(3.0, 1)


def test_zoom_keeps_thirty_rows_with_the_evidence_and_the_marked_ones():
    """A 403-request run shows 30 rows: the marked long prompts among them, plus the stretch of
    arrivals where requests waited or stalled; the readout still counts the whole run."""
    from sim.scenarios import requests_from_rows
    from ui.gantt_rows import ZOOM_ROWS, evidence, marked_ids, zoom_rows

    rows = [(i / 50, 600, 30) for i in range(400)]
    rows += [(1.0, 12000, 20), (2.0, 12000, 20), (3.0, 12000, 20)]
    run = simulate(requests_from_rows(rows), SimConfig())
    marks = marked_ids(run, [("prompt_tokens", 10000, "long")])
    q = run.requests
    longs = sorted(q.request_id[q.prompt_tokens > 10000].tolist())
    assert sorted(marks) == longs and len(longs) == 3 and set(marks.values()) == {"long"}
    ids = gf.request_ids(run)
    shown = zoom_rows([run], ids, marks)
    assert len(shown) == ZOOM_ROWS and set(longs) <= set(shown.tolist())
    score = evidence(run, ids)
    assert score[np.isin(ids, shown)].mean() > score.mean()  # the busy rows, not the first 30
    fig = timeline_figure([("fcfs", run)], show=shown.tolist(), marks=marks)
    assert len(fig.layout.yaxis.categoryarray) == ZOOM_ROWS
    assert f"long R{longs[1]}" in fig.layout.yaxis.categoryarray
    assert f"long R{longs[1]}" in fig.layout.yaxis.tickvals  # a marked row keeps its label
    bands = [s for s in fig.layout.shapes if s.type == "rect" and s.layer == "below"]
    assert len(bands) == 3  # a pale band behind each marked row
    full = timeline_figure([("fcfs", run)], design="cursor")
    assert fig.layout.annotations[0].text == full.layout.annotations[0].text  # same readout
    assert zoom_rows([run], ids[:12], {}).tolist() == ids[:12].tolist()  # few rows: all shown


def test_title_and_readout_sit_on_two_lines_and_compact_fits_a_projector():
    run = simulate(get_scenario("c5-long-prompt-freeze").workload, SimConfig())
    fig = timeline_figure([("a", run), ("b", run), ("c", run)], compact=True)
    assert fig.layout.height <= gl.COMPACT_PX
    readout, title = fig.layout.annotations[0], fig.layout.annotations[3]
    assert title.yshift - readout.yshift >= gl.READOUT_PX  # never printed over each other


# ---- speculative decoding: a verify step's accepted and rejected parts ----


@pytest.fixture(scope="module")
def spec_run():
    """Four requests verifying EAGLE drafts under vLLM V1 (k = 3, the EAGLE-3 Llama table)."""
    from sim.config import with_overrides
    from sim.scenarios import requests_from_rows

    rows = [(0.002 * i, 256, 24) for i in range(4)]
    config = with_overrides(SimConfig(), {"speculative": "eagle"})
    return simulate(requests_from_rows(rows), config)


def test_verify_colours_stand_apart_from_every_other_phase():
    others = {p: c for p, c in COLORS.items() if p not in ("accepted", "rejected")}
    for kind in ("accepted", "rejected"):
        assert COLORS[kind] not in others.values() and COLORS[kind] != CURSOR
    assert COLORS["accepted"] != COLORS["rejected"]
    assert gf.TRACE_PHASES.index("accepted") < gf.TRACE_PHASES.index("rejected")
    assert {"accepted", "rejected"} <= set(gf.RUNNING_KINDS)


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_speculative_verify_steps_are_drawn_and_in_the_legend(spec_run, lang):
    fig = timeline_figure([("spec", spec_run)], lang=lang)
    traces = {tr.legendgroup: tr for tr in bar_traces(fig)}
    segs = spec_run.segments
    for kind in ("accepted", "rejected"):
        tr = traces[kind]
        assert len(tr.x) == (segs.kind == kind).sum() > 0  # one bar per segment
        assert tr.showlegend and tr.name == t(f"gantt.phase.{kind}", lang)
        assert tr.marker.color == COLORS[kind]
        assert t(f"gantt.hover.phase.{kind}", lang) in tr.hovertemplate
        assert t(f"gantt.hover.tokens_{kind}", lang) in tr.hovertemplate  # "tokens accepted: n"
    assert traces["rejected"].marker.pattern.shape  # hatched: not only a hue
    assert traces["accepted"].name != traces["decode"].name
    spec = spec_run.meta["speculation"]  # accepted parts hold the kept drafts + 1 per verify
    assert traces["accepted"].customdata[:, 2].sum() == spec["accepted"] + spec["verify_steps"]
    assert traces["rejected"].customdata[:, 2].sum() == spec["drafted"] - spec["accepted"]


def test_speculative_timeline_plays_and_counts_a_verifying_request_once(spec_run):
    fig = timeline_figure([("spec", spec_run)], num_frames=20)
    assert choose_design(sum(len(tr.x) for tr in bar_traces(fig))) == "clip"
    kinds = [tr.legendgroup for tr in bar_traces(fig)]
    first, last = fig.frames[0], fig.frames[-1]
    for k in (kinds.index("accepted"), kinds.index("rejected")):
        assert np.asarray(first.data[k].x, dtype=float).sum() == 0  # grows from nothing ...
        np.testing.assert_array_equal(  # ... to the full chart
            np.asarray(last.data[k].x), np.asarray(bar_traces(fig)[k].x)
        )
    segs = spec_run.segments
    verify = segs[segs.kind.isin(["accepted", "rejected"])]
    times = np.linspace(verify.start_s.min(), verify.end_s.max(), 50, endpoint=False)
    running = gf.readout(spec_run, times).running
    assert running.max() <= len(spec_run.requests) and running.min() > 0


def test_a_cache_hit_is_drawn_wide_enough_to_find_but_hovers_its_real_times():
    """Prefix caching's lesson asks students to find the cached band, yet a hit takes no time of
    its own: it rides on the prefill step it shortened, a pixel wide on the lesson's chart. It is
    drawn at least CACHED_LEAST of the time axis, at the last frame and in every frame once
    begun; its hover (customdata) keeps the real start and end."""
    from ui import lesson_setups as ls
    from ui.gantt import CACHED_LEAST

    specs, config = ls.system_prompt_specs(1000, 8.0)[0][1:]  # request specs, caching on
    run = simulate(list(specs), config)
    fig = timeline_figure([("on", run)], design="clip")
    name = t("gantt.phase.cached", "en")
    (index,) = [i for i, d in enumerate(fig.data) if d.name == name]
    trace, t_end = fig.data[index], fig.layout.xaxis.range[1]
    real = np.asarray(trace.customdata)[:, 1] - np.asarray(trace.customdata)[:, 0]
    drawn = np.asarray(trace.x, dtype=float)
    assert len(drawn) > 10 and real.max() < CACHED_LEAST * t_end / 2  # hits thinner than that
    assert drawn.min() >= CACHED_LEAST * t_end * 0.999  # float32 widths
    for frame in fig.frames:
        widths = np.asarray(frame.data[index].x, dtype=float)
        begun = widths > 0
        assert (widths[begun] >= CACHED_LEAST * t_end * 0.99).all()
