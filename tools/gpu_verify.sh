#!/usr/bin/env bash
# Everything the GPU machine has to prove, in one call (device time is scarce):
#
#   tools/stage_gpu.sh                       # here
#   tools/gpu_verify.sh [OUT_DIR]            # there, from the repository root
#
# 1. every GPU suite (Check summaries), 2. the capture suites under
# compute-sanitizer memcheck + racecheck, 3. the trainer on CUDA with default
# flags (accuracy), 4. CPU and CUDA checkpoints after the same 200 steps agree
# within fp32 error, 5. checkpoints <-> PyTorch with the real safetensors,
# 6. the benchmark against PyTorch. Logs go to OUT_DIR (default gpu_stage/verify);
# a summary table is printed last. Exits non-zero if any part fails.
set -u -o pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stage="$root/gpu_stage"
out="${1:-$stage/verify}"
mkdir -p "$out"
export GE2_DATA_DIR="$stage/data/fashion-mnist"
export LD_LIBRARY_PATH="$stage/bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
train="$stage/bin/train_mlp"
declare -a rows=()
record() { rows+=("$(printf '| %-34s | %-6s | %s |' "$1" "$2" "$3")"); }

bash "$stage/run.sh" >"$out/suites.log" 2>&1
record "GPU suites" "$([ $? -eq 0 ] && echo PASS || echo FAIL)" "$(tail -n 1 "$out/suites.log")"

bash "$stage/run.sh" --sanitize >"$out/sanitize.log" 2>&1
rc=$?
record "compute-sanitizer memcheck+racecheck" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" \
    "$(grep -c ': clean' "$out/sanitize.log") clean, $(grep -c 'FAIL' "$out/sanitize.log") failing"

start=$(date +%s)
"$train" --device cuda --data "$GE2_DATA_DIR" >"$out/train_cuda.log" 2>&1
rc=$?
secs=$(($(date +%s) - start))
record "train_mlp --device cuda (defaults)" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" \
    "$(tail -n 1 "$out/train_cuda.log"), ${secs} s wall incl. data load"

for dev in cpu cuda; do
    "$train" --device "$dev" --data "$GE2_DATA_DIR" --steps 200 --save "$out/ck_$dev.safetensors" \
        >"$out/train_${dev}_200.log" 2>&1 || echo "train_mlp --device $dev --steps 200 failed" >>"$out/agree.log"
done
python3 - "$out/ck_cpu.safetensors" "$out/ck_cuda.safetensors" >>"$out/agree.log" 2>&1 <<'PY'
import sys
from safetensors.torch import load_file
a, b = load_file(sys.argv[1]), load_file(sys.argv[2])
assert a.keys() == b.keys(), "different tensors"
worst = max(((a[k].double() - b[k].double()).norm() / max(a[k].double().norm(), 1e-30)).item()
            for k in a if not k.startswith("optim."))
print(f"params: worst normwise relative difference cpu vs cuda after 200 Adam steps: {worst:.2e}")
sys.exit(0 if worst < 1e-4 else 1)
PY
rc=$?
record "CPU vs CUDA after 200 steps" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "$(tail -n 1 "$out/agree.log")"

python3 "$root/tests/torch/checkpoint_interop.py" --train-mlp "$train" --data "$GE2_DATA_DIR" \
    --work "$out/interop" >"$out/interop.log" 2>&1
rc=$?
record "checkpoints <-> PyTorch" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "$(tail -n 1 "$out/interop.log")"

GE2_BENCH_OUT="$out/bench" bash "$stage/bench/run.sh" >"$out/bench.log" 2>&1
rc=$?
record "benchmark vs PyTorch" "$([ $rc -eq 0 ] && echo PASS || echo FAIL)" "report: $out/bench.log"

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
printf '| %-34s | %-6s | %s |\n|---|---|---|\n' part result detail
printf '%s\n' "${rows[@]}"
! printf '%s\n' "${rows[@]}" | grep -q '| FAIL '
