#!/usr/bin/env bash
# Build .venv-dynamo, which holds Dynamo 1.6.1's REAL KvRouter for the router differential
# test (tests/refsched/dynamo/): ai-dynamo-runtime 1.6.1 (one abi3 wheel, Rust _core) and
# ai-dynamo 1.6.1 (pure Python), pinned with their deps in requirements-dynamo.txt and
# installed with --no-deps (ai-dynamo's declared deps, transformers etc., are not needed).
# No GPU, etcd or NATS. Idempotent: a stamp holds the sha256 of the requirements file; when
# it matches nothing is done, else the venv is rebuilt from scratch. .venv is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON_BIN="${PYTHON:-python3}"
venv=".venv-dynamo"
req="tests/refsched/dynamo/requirements-dynamo.txt"
stamp="$venv/.refsched-stamp"
want="$(sha256sum "$req" | cut -d' ' -f1)"

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  echo "dynamo: $venv up to date (ai-dynamo-runtime 1.6.1)"
  exit 0
fi

start=$SECONDS
rm -rf "$venv"
"$PYTHON_BIN" -m venv "$venv"
log="$venv/refsched-install.log"
if ! "$venv/bin/pip" install --disable-pip-version-check --no-deps --only-binary=:all: \
    -r "$req" >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "dynamo: installing $venv from $req failed (full log: $log)" >&2
  exit 1
fi
if ! "$venv/bin/python" -c "from dynamo._core import KvRouter, KvRouterConfig" >>"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "dynamo: $venv installed but dynamo._core does not import (log: $log)" >&2
  exit 1
fi
echo "$want" >"$stamp"
echo "dynamo: $venv installed ($(du -sh "$venv" | cut -f1), $((SECONDS - start))s)"
