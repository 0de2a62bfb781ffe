#!/usr/bin/env bash
# Issue 27's figures on a CUDA GPU, in one run of at most 6 minutes: the CUDA correctness tests,
# decode and prefill steps against the GPU's measured copy bandwidth and matmul peak, the
# calibrated simulator's fidelity (two live runs each), and the Live page's default recordings.
# Every step has a time limit (`timeout`), cut further so the whole run ends by DEADLINE_S.
# All results go into ONE archive in the output folder; the run ends with one table: each
# figure beside its target (bench/gpu_table.py).
#
#   once, here:  echo /.whl/ >> .git/info/exclude
#                pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                    --implementation cp -d .whl simpy==4.1.2      # the one package it lacks
#   there:       PDLAB_COMMIT=<this commit> bash bench/gpu_figures.sh   (carry .whl; the archive
#                lands in $OUT or artifacts/gpu; the machine's copy may carry a stale git HEAD)
#   here, a smoke test of the script itself on the CPU (tiny sizes, minutes):
#                PYTHON=.venv/bin/python bash bench/gpu_figures.sh --cpu-smoke
#
# Random weights of a real shape (8b-like = Llama-3.1-8B, bf16): timing does not depend on
# weight values, and the SmolLM2 wheel is too big to carry.
set -uo pipefail
cd "$(dirname "$0")/.."
smoke=0
[ "${1:-}" = "--cpu-smoke" ] && smoke=1
py=${PYTHON:-python3}
out=${OUT:-artifacts/gpu}
deadline=$((SECONDS + ${DEADLINE_S:-345}))  # 6 minutes less 15 s to pack and print
work=$(mktemp -d "${TMPDIR:-/tmp}/gpu_figures.XXXXXX")
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
if ! $py -c "import simpy" 2>/dev/null; then
    $py -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl ||
        { echo "simpy is missing and no wheel was carried in .whl/ (see the header)"; exit 2; }
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

step() {  # step NAME SECONDS COMMAND...: run it under a time limit, keep its output
    local name=$1 limit=$2 left=$((deadline - SECONDS))
    shift 2
    if [[ " ${SKIP:-} " == *" $name "* ]]; then  # SKIP="tests probe": a rerun with little time
        echo "== $name: skipped (SKIP)" | tee -a "$work/steps.txt"
        return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    if [ "$limit" -lt 10 ]; then
        echo "== $name: skipped, the run's time is spent" | tee -a "$work/steps.txt"
        return
    fi
    echo "== $name ($(date +%T), limit ${limit}s): $*"
    timeout -k 5 "$limit" "$@" 2>&1 | tee "$work/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - start_s))s in all" |
        tee -a "$work/steps.txt"
}
start_s=$SECONDS

if [ "$smoke" = 1 ]; then  # the CPU-runnable parts, tiny sizes: catches syntax/import errors
    dev=cpu fig_args=(--model tiny --batches 1,8 --ctx 64 --chunk 128 --reps 3)
    model=smollm2-135m-shape fid_args=(--workloads three --policies prefill-first)
    tests=(tests/test_live_flat.py) rec_args=(--only three-vllm-prefill-first-disaggregated)
else
    dev=cuda fig_args=(--model 8b-like) model=8b-like fid_args=()
    tests=(tests/test_live_cuda.py tests/test_live_flat.py) rec_args=()
fi

step device 20 $py -c "import torch, sys, json; from live.engine.provenance import device_provenance
print(sys.version.split()[0], json.dumps(device_provenance('$dev')))"
if [ "$dev" = cuda ]; then timeout 20 nvidia-smi > "$work/nvidia-smi.txt" 2>&1; fi
PD_LAB_TEST_DEVICE=$dev step tests 60 $py -m pytest -q -p no:cacheprovider "${tests[@]}"
step figures 75 $py bench/bench_gpu_step.py --device "$dev" "${fig_args[@]}" \
    --json "$work/figures.json"
step fidelity 150 $py bench/bench_fidelity.py --device "$dev" --model "$model" --repeats 2 \
    "${fid_args[@]}" --json "$work/fidelity.json"
# The Live page's default set, recorded on this device (ship them in assets/live_runs/).
step recording 120 $py -m live.engine.recording --model "$model" --out "$work/runs" "${rec_args[@]}"
# Last, as it only diagnoses: which call raised the 2026-12-04 device-side assert.
if [ "$dev" = cuda ]; then step probe 60 $py bench/gpu_probe.py; fi

$py bench/gpu_table.py "$work" > "$work/table.txt" 2>&1
echo "${PDLAB_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null)}" > "$work/commit.txt"
archive="$out/gpu_figures-$(date -u +%Y%m%dT%H%M%SZ).tar.gz"
tar -czf "$archive" -C "$work" . && rm -rf "$work"
echo "== all results in ONE archive: $archive ($((SECONDS - start_s)) s in all)"
tar -xzOf "$archive" ./table.txt
