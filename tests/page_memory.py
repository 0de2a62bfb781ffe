"""Open one page of the app in THIS fresh process (AppTest) and print, as JSON, its errors, the
wall time and the resident memory the view added at its peak (run as a script by
tests/test_limits.py: a process high-water mark measures a run only in a process of its own).

    python tests/page_memory.py app_pages/playground.py '{"n": "1000", ...}'
"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import conftest  # noqa: E402,F401  (sys.path and PDLAB_RAISE_ERRORS, as in the tests)
from streamlit.testing.v1 import AppTest  # noqa: E402


def status_mb(field: str) -> float:
    """VmRSS (resident now) or VmHWM (its peak) of this process, in MB (Linux /proc)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def main() -> None:
    page, params = sys.argv[1], json.loads(sys.argv[2])
    at = AppTest.from_file("../app.py", default_timeout=300)
    for key, value in params.items():
        at.query_params[key] = value
    at.run()  # the home page: imports and app start-up, before the measured part
    try:
        Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS (Linux >= 4.0)
    except OSError:
        print(json.dumps({"unmeasured": "cannot reset VmHWM (/proc/self/clear_refs)"}))
        return
    before, start = status_mb("VmRSS"), time.perf_counter()
    at.switch_page(page).run()
    seconds, peak = time.perf_counter() - start, status_mb("VmHWM")
    print(
        json.dumps(
            {
                "exception": [str(e.value) for e in at.exception],
                "errors": [e.value for e in at.error],
                "seconds": seconds,
                "grown_mb": peak - before,
                "before_mb": before,
            }
        )
    )


if __name__ == "__main__":
    main()
