#!/usr/bin/env bash
# The ge2 vs PyTorch benchmark, run on the GPU machine from the staged folder
# (tools/stage_gpu.sh copies this file to gpu_stage/bench/):
#
#   GE2_COMMIT=<sha> gpu_stage/bench/run.sh [--seconds S] [--epochs E] [--only WORKLOAD]
#
# Runs bin/ge2_bench, then torch_bench.py, then report.py on both outputs; the
# report comes last. JSON lines and the report are kept in $GE2_BENCH_OUT
# (default gpu_stage/results/). Options go to both programs. Exits non-zero if
# any of the three fails (a row that failed makes its program fail). Each
# program is stopped after GE2_BENCH_TIMEOUT seconds (default 300), so a hung
# ge2 still leaves time for PyTorch's numbers and the report.
set -u -o pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stage="$(cd "$here/.." && pwd)"
out="${GE2_BENCH_OUT:-$stage/results}"
python="${PYTHON:-python3}"
limit="${GE2_BENCH_TIMEOUT:-300}"
mkdir -p "$out"

export PYTHONUNBUFFERED=1
export GE2_DATA_DIR="${GE2_DATA_DIR:-$stage/data/fashion-mnist}"
# ge2_bench carries the build machine's toolkit path in its rpath; this covers
# a toolkit installed elsewhere (cuBLASLt 13 is the library that must match).
for d in "${CUDA_PATH:-/nonexistent}/lib64" /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64; do
    if [ -e "$d/libcublasLt.so.13" ]; then
        export LD_LIBRARY_PATH="$stage/bin:$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        break
    fi
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm \
    --format=csv,noheader | sed 's/^/run.sh: gpu: /'

rc=0
echo "run.sh: ge2_bench"
timeout "$limit" "$stage/bin/ge2_bench" --data "$GE2_DATA_DIR" "$@" | tee "$out/ge2.jsonl" ||
    { echo "run.sh: ge2_bench failed"; rc=1; }
echo "run.sh: torch_bench.py"
timeout "$limit" "$python" "$here/torch_bench.py" --data "$GE2_DATA_DIR" "$@" | tee "$out/torch.jsonl" ||
    { echo "run.sh: torch_bench.py failed"; rc=1; }
echo
"$python" "$here/report.py" --commit "${GE2_COMMIT:-unknown}" "$out/ge2.jsonl" "$out/torch.jsonl" |
    tee "$out/report.md" || { echo "run.sh: report.py failed"; rc=1; }
exit "$rc"
