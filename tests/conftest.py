import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # import sim/ from the checkout without installing it
sys.path.insert(0, str(ROOT / "tests"))

# app.py turns an exception no page caught into a polite st.error; the tests want the exception
# itself (AppTest's at.exception, an "exception" element from a test server).
os.environ.setdefault("PDLAB_RAISE_ERRORS", "1")

TRACES = ROOT.parent / "shared" / "data" / "traces"  # the real Azure traces stay outside
EXCERPTS = ROOT / "tests" / "data"  # their first 1,000 rows, shipped (tests/data/README.md)
FULL_TRACES = (TRACES / "AzureLLMInferenceTrace_conv.csv").exists()
NEEDS_FULL_TRACES = (
    f"needs the full Azure traces at {TRACES} (the checkout's sibling ../shared); "
    "tests/data/ has only their first 1,000 rows"
)


def azure_trace(name: str) -> Path:
    """The Azure trace `name` ("conv" or "code"): the full hour from ../shared where it is there,
    else the excerpt in tests/data/ (its first 1,000 rows)."""
    full = TRACES / f"AzureLLMInferenceTrace_{name}.csv"
    return full if full.exists() else EXCERPTS / f"AzureLLMInferenceTrace_{name}_head1000.csv"


# The property tests run with a fixed seed per test everywhere, CI or a newcomer's fresh clone:
# the same examples on every run, so a red run is reproducible and never a dice roll.
# PDLAB_HYPOTHESIS=explore lets hypothesis search new random examples (a failure it finds is
# printed with its @reproduce_failure blob and kept in .hypothesis/ for the next run).
HYPOTHESIS_PROFILE = os.environ.get("PDLAB_HYPOTHESIS", "fixed") or "fixed"
if HYPOTHESIS_PROFILE not in ("fixed", "explore"):
    raise ValueError(f"PDLAB_HYPOTHESIS must be 'explore' or 'fixed', got {HYPOTHESIS_PROFILE!r}")

from hypothesis import settings  # noqa: E402

settings.register_profile("fixed", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(HYPOTHESIS_PROFILE)
