import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # import sim/ from the checkout without installing it
sys.path.insert(0, str(ROOT / "tests"))

TRACES = ROOT.parent / "shared" / "data" / "traces"  # the real Azure traces stay outside
