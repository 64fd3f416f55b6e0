#!/usr/bin/env bash
# Data-parallel throughput on the GPU machine (staged to gpu_stage/bench/):
#
#   gpu_stage/bench/dp_speed.sh [GPUS]     (default: every GPU, at least 2)
#
# The large MLP (784-4096-4096-4096-10, Adam, batch 1024 per GPU) trained by
# train_mlp on 1 GPU and with --distributed on GPUS GPUs at the same batch
# per GPU, and PyTorch DDP on the same model and GPUs (bench/ddp_mlp.py,
# default bucketing). A run's steady-state step time is the difference
# of the wall times of a 60-step and a 1060-step run (start-up, data
# loading, warm-up, tuning and capture cancel out). Then the GPT (train_gpt's defaults, batch 64 per GPU, no
# evaluation in between): its steady ms/step (the last progress line of 200
# steps) on 1 and on GPUS GPUs. Prints a table last: examples/s of each,
# the scaling (target >= 1.85x one GPU), the exposed communication (step
# time beyond the one-GPU step, target <= 10% of the step) and ge2 against
# DDP (the MLP's; DDP on the GPT is not measured here).
set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stage="$(cd "$here/.." && pwd)"
gpus="${1:-$(nvidia-smi -L | wc -l)}"
[ "$gpus" -ge 2 ] || { echo "dp_speed: needs 2 or more GPUs (have $gpus)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export LD_LIBRARY_PATH="$stage/bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
data="${GE2_DATA_DIR:-$stage/data/fashion-mnist}"
model=(--device cuda --data "$data" --hidden 4096,4096,4096 --batch 1024 --epochs 100)

die() { echo "dp_speed: $*" >&2; exit 1; }

# wall seconds of a whole run of N steps on R ranks; dies if it fails
run_secs() { # ranks steps
    local launcher=() start end
    [ "$1" -gt 1 ] && launcher=(mpirun --bind-to none -np "$1")
    start=$(date +%s.%N)
    timeout 600 "${launcher[@]}" "$stage/bin/train_mlp" "${model[@]}" --steps "$2" \
        $([ "$1" -gt 1 ] && echo --distributed) >"$log" 2>&1 || { tail -n 5 "$log" >&2; die "train_mlp on $1 GPU(s), $2 steps failed"; }
    end=$(date +%s.%N)
    awk -v a="$start" -v b="$end" 'BEGIN { printf "%.6f\n", b - a }'
}
step_ms() { # ranks -> steady-state ms per step
    local short long
    short=$(run_secs "$1" 60) || exit 1
    long=$(run_secs "$1" 1060) || exit 1
    awk -v a="$short" -v b="$long" 'BEGIN { ms = (b - a) * 1000 / 1000; if (ms <= 0) exit 1; printf "%.4f\n", ms }' ||
        die "no steady-state time on $1 GPU(s) ($short s, $long s)"
}
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
one=$(step_ms 1) || exit 1
many=$(step_ms "$gpus") || exit 1
ddp1=$(timeout 600 torchrun --nproc_per_node 1 "$here/ddp_mlp.py" --batch 1024 2>/dev/null | sed -n 's/.*(\(.*\) ms\/step)/\1/p')
ddpn=$(timeout 600 torchrun --nproc_per_node "$gpus" "$here/ddp_mlp.py" --batch 1024 2>/dev/null | sed -n 's/.*(\(.*\) ms\/step)/\1/p')
# the GPT's ms/step on R ranks: its last "iter N: loss L, X ms/step, ..." line
gpt_ms() { # ranks
    local launcher=()
    [ "$1" -gt 1 ] && launcher=(mpirun --bind-to none -np "$1")
    timeout 600 "${launcher[@]}" "$stage/bin/train_gpt" --device cuda --data "$stage/data/austen.txt" --max-iters 200 \
        --eval-interval 1000 --eval-iters 1 --sample 0 $([ "$1" -gt 1 ] && echo --distributed) 2>&1 |
        sed -n 's/^iter [0-9]*: loss [0-9.]*, \([0-9.]*\) ms\/step.*/\1/p' | tail -n 1
}
gpt1=$(gpt_ms 1)
gptn=$(gpt_ms "$gpus")

nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1
awk -v one="$one" -v many="$many" -v n="$gpus" -v d1="${ddp1:-0}" -v dn="${ddpn:-0}" 'BEGIN {
    ex1 = 1024 / one * 1000; exn = 1024 * n / many * 1000
    printf "| run | ms/step | examples/s |\n|---|---|---|\n"
    printf "| ge2 1 GPU | %.3f | %.0f |\n| ge2 %d GPUs | %.3f | %.0f |\n", one, ex1, n, many, exn
    if (d1 > 0) printf "| DDP 1 GPU | %.3f | %.0f |\n", d1, 1024 / d1 * 1000
    if (dn > 0) printf "| DDP %d GPUs | %.3f | %.0f |\n", n, dn, 1024 * n / dn * 1000
    printf "scaling %.2fx one GPU (target >= 1.85x); exposed communication %.1f%% of the step (target <= 10%%)\n",
           exn / ex1, 100 * (many - one) / many
    if (dn > 0) printf "ge2 / DDP throughput on %d GPUs: %.2fx (target >= 1)\n", n, dn / many
}'
awk -v one="${gpt1:-0}" -v many="${gptn:-0}" -v n="$gpus" 'BEGIN {
    if (one <= 0 || many <= 0) { print "gpt: no step times (see train_gpt)"; exit 1 }
    printf "gpt (64 x 256 tokens per GPU): 1 GPU %.2f ms/step, %d GPUs %.2f ms/step: scaling %.2fx, exposed communication %.1f%%\n",
           one, n, many, n * one / many, 100 * (many - one) / many
}'
