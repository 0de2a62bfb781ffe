#!/usr/bin/env bash
# The live engine's figures on a CUDA GPU, in one run: CUDA correctness tests, the prefill/decode
# roofline against the GPU's measured peaks (1B and 8B shapes), the calibrated simulator's
# fidelity, and live continuous batching vs transformers generate(). Meant for a GPU machine
# with python3 + torch + transformers + pandas and no network (the project's device tool):
#
#   once, here:  echo /.whl/ >> .git/info/exclude
#                pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                    --implementation cp -d .whl simpy==4.1.2      # the one package it lacks
#   there:       bash bench/gpu_figures.sh      (carry .whl; results land in $OUT or artifacts/gpu)
#
# Random weights of real shapes (1b-like = Llama-3.2-1B, 8b-like = Llama-3.1-8B): timing does not
# depend on weight values, and the SmolLM2 wheel (93 MB) is too big to carry. Each step has its
# own timeout, so one slow step cannot eat the machine's whole lease; about 6-8 minutes in all.
# To try the script itself on a CPU: GPU_FIGURES_DEVICE=cpu GPU_FIGURES_MODEL=smollm2-135m-shape
# GPU_FIGURES_ROOFLINE=smollm2-135m-shape (an 8B model does not fit a small machine's memory).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-artifacts/gpu}
dev=${GPU_FIGURES_DEVICE:-cuda}
model=${GPU_FIGURES_MODEL:-1b-like}
roofline=${GPU_FIGURES_ROOFLINE:-1b-like 8b-like}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
if ! python3 -c "import simpy" 2>/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl ||
        { echo "simpy is missing and no wheel was carried in .whl/ (see the header)"; exit 2; }
    export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi

step() {  # step NAME SECONDS COMMAND...: run it, keep its output in $out/NAME.txt
    local name=$1 limit=$2
    shift 2
    echo "== $name ($(date +%T)): $*"
    timeout "$limit" "$@" 2>&1 | tee "$out/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]}"
}

step device 60 python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__,
torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA')"
if [ "$dev" = cuda ]; then nvidia-smi | tee "$out/nvidia-smi.txt"; fi
PD_LAB_TEST_DEVICE=$dev step tests 180 python3 -m pytest -q -p no:cacheprovider \
    tests/test_live_cuda.py tests/test_live_model.py
for shape in $roofline; do
    step "roofline-$shape" 150 python3 bench/bench_live_model.py --device "$dev" --model "$shape"
done
step fidelity 240 python3 bench/bench_fidelity.py --device "$dev" --model "$model" --repeats 2 \
    --json "$out/fidelity.json"
step vs-transformers 180 python3 bench/bench_vs_transformers.py --device "$dev" \
    --model "$model" --repeats 2
echo "results in $out: $(ls "$out" | tr '\n' ' ')"
