"""Entry point of `python -m live` (see live/cli.py)."""

import sys

from live.cli import main

sys.exit(main())
