"""The one visual grammar of PD Lab: a fixed colour per phase, everywhere (the seeds' colours).

prefill orange, decode blue, stall white (outlined), KV transfer green, queued light grey; under
speculative decoding a verify step is dark blue where its tokens were accepted (decode's family:
tokens kept) and dark red, hatched, where drafts were rejected (computed, then thrown away).
Sizes are chosen to stay readable on a classroom projector.
"""

COLORS = {
    "prefill": "#F28E2B",  # orange
    "decode": "#1F77B4",  # blue
    "stall": "#FFFFFF",  # white, drawn with an outline
    "kv_transfer": "#2CA02C",  # green
    "queued": "#D9D9D9",  # light grey
    "preempted": "#B07AA1",  # muted purple: evicted, waiting to come back
    "cached": "#FBD3A9",  # pale orange: prompt tokens served from the prefix cache, not computed
    "accepted": "#0B3C6E",  # dark blue (decode's family): a verify step's accepted drafts + 1
    "rejected": "#B2182B",  # dark red: the verify step's rejected drafts (computed, thrown away)
}
OUTLINE = "#555555"  # edge of stall bars (white on white would vanish)
SLOWED_PATTERN = "/"  # hatch on decode bars that shared their step with a prefill chunk
CACHED_PATTERN = "x"  # cross-hatch on cached bars (drawn as a thin band over the prefill bar)
REJECTED_PATTERN = "\\"  # back-slash hatch on rejected bars: not only a hue (colour-blind readers)
CURSOR = "#D62728"  # the time cursor
MARK = "#FFF1B8"  # pale yellow band behind a row the lesson talks about (e.g. a long prompt)
FONT_SIZE = 15  # base font of every figure (projector-readable)
FONT_FAMILY = "Noto Sans, Noto Sans CJK KR, Malgun Gothic, Apple SD Gothic Neo, sans-serif"

# Order of phases in legends and in the drawing order (later = on top).
PHASES = (
    "queued",
    "prefill",
    "decode",
    "accepted",
    "rejected",
    "stall",
    "kv_transfer",
    "preempted",
    "cached",
)
