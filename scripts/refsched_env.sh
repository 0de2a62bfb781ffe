#!/usr/bin/env bash
# Build the virtualenvs that hold the REAL schedulers for the differential tests
# (tests/refsched/): .venv-vllm-v1 (vllm 0.33.0, V1), .venv-vllm-v0 (vllm 0.10.2, V0) and
# .venv-sglang (sglang 0.5.23; its GPU-only kernels are stubbed by tests/refsched/sglang/stubs),
# and .venv-dynamo (ai-dynamo-runtime 1.6.1: Dynamo's real KvRouter, Rust, no torch).
# Each comes from a pinned freeze file installed with --no-deps: the engines' declared deps clash
# with the app's and would pull a CUDA torch (torch here is the 2.13.0+cpu wheel on disk).
# Idempotent: a stamp in each venv holds the sha256 of its requirements file; when it
# matches, nothing is done. When it does not, the venv is rebuilt from scratch so that no
# package from an older list lingers. The app's .venv is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON_BIN="${PYTHON:-python3}"

for engine in ${REFSCHED_ENGINES:-vllm-v1 vllm-v0 sglang dynamo}; do
  venv=".venv-$engine"
  req="tests/refsched/requirements-$engine.txt"
  stamp="$venv/.refsched-stamp"
  want="$(sha256sum "$req" | cut -d' ' -f1)"
  vllm_pin="$(grep -E '^(vllm|sglang|ai-dynamo-runtime)==' "$req")"

  if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "refsched: $venv up to date ($vllm_pin)"
    continue
  fi

  start=$SECONDS
  rm -rf "$venv"
  "$PYTHON_BIN" -m venv "$venv"
  log="$venv/refsched-install.log"
  if ! "$venv/bin/pip" install --disable-pip-version-check --no-deps --only-binary=:all: \
      -r "$req" >"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "refsched: installing $venv from $req failed (full log: $log)" >&2
    exit 1
  fi
  # The scheduler (the router, for Dynamo) must import, on CPU torch where it takes torch (a
  # CUDA build would mean a wrong wheel). Dynamo's KvRouter is Rust: no torch, no GPU, no etcd.
  torch_check="import torch
assert torch.__version__.endswith('+cpu'), torch.__version__"
  case "$engine" in
    vllm-v1) check="import vllm.v1.core.sched.scheduler" ;;
    vllm-v0) check="import vllm.core.scheduler" ;;
    sglang) check="import sys; sys.path.insert(0, 'tests/refsched/sglang/stubs')
import os; os.environ['SGLANG_USE_CPU_ENGINE'] = '1'
import sglang.srt.managers.scheduler" ;;
    dynamo) check="from dynamo._core import KvRouter, KvRouterConfig" torch_check="" ;;
  esac
  if ! VLLM_LOGGING_LEVEL=ERROR "$venv/bin/python" -c "
$torch_check
$check
" >>"$log" 2>&1; then
    tail -n 30 "$log" >&2
    echo "refsched: $venv installed but the scheduler does not import (log: $log)" >&2
    exit 1
  fi
  echo "$want" >"$stamp"
  echo "refsched: $venv installed ($vllm_pin, $(du -sh "$venv" | cut -f1), $((SECONDS - start))s)"
done
