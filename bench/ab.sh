#!/usr/bin/env bash
# A before/after comparison in one call on the GPU machine, from the staged
# folder: two ge2_bench binaries (the staged one and an earlier build's),
# run in turn, ABAB, against one PyTorch run; a report per run, then a
# table of the ratio of each row's step time after/before.
#
#   gpu_stage/bench/ab.sh BEFORE_BINARY [ge2_bench options]
set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stage="$(cd "$here/.." && pwd)"
before="${1:?usage: ab.sh BEFORE_BINARY [options]}"
shift
out="${GE2_BENCH_OUT:-$stage/results}"
python="${PYTHON:-python3}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
export GE2_DATA_DIR="${GE2_DATA_DIR:-$stage/data/fashion-mnist}"
export LD_LIBRARY_PATH="$stage/bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
rc=0
for round in 1 2; do
    for side in before after; do
        bin="$stage/bin/ge2_bench"
        [ "$side" = before ] && bin="$before"
        echo "ab.sh: round $round, $side"
        timeout 300 "$bin" --data "$GE2_DATA_DIR" "$@" >"$out/$side$round.jsonl" || { echo "ab.sh: $side failed"; rc=1; }
    done
done
timeout 300 "$python" "$here/torch_bench.py" --data "$GE2_DATA_DIR" "$@" >"$out/torch.jsonl" || { echo "ab.sh: torch failed"; rc=1; }
for side in before after; do
    for round in 1 2; do
        echo "## $side, round $round"
        "$python" "$here/report.py" --commit "$side" "$out/$side$round.jsonl" "$out/torch.jsonl" || rc=1
    done
done
exit "$rc"
