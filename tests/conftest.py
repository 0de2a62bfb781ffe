import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # import sim/ from the checkout without installing it
sys.path.insert(0, str(ROOT / "tests"))

TRACES = ROOT.parent / "shared" / "data" / "traces"  # the real Azure traces stay outside

# CI runs the property tests with a fixed seed (reproducible: a red CI is never a dice roll);
# local runs keep exploring new examples.
if os.environ.get("CI"):
    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.load_profile("ci")
