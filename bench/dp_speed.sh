#!/usr/bin/env bash
# Data-parallel throughput on the GPU machine (staged to gpu_stage/bench/):
#
#   gpu_stage/bench/dp_speed.sh [GPUS]     (default: every GPU, at least 2)
#
# Two models, each trained by ge2 on 1 GPU and with --distributed on GPUS
# GPUs at the same batch per GPU, and by PyTorch DDP (bench/ddp_speed.py,
# default bucketing, random data on the GPU) on the same GPUs:
# - the large MLP (784-4096-4096-4096-10, Adam, batch 1024 per GPU, fp32):
#   ge2's steady throughput is the median of train_mlp's examples/s over
#   epochs 3-10 (the first tunes and captures; the rate counts every rank's
#   examples, the data pipeline included);
# - the GPT (train_gpt's defaults, batch 64 x 256 tokens per GPU, no
#   evaluation in between), in fp32 and in TF32 (DDP likewise): the median
#   of its ms/step lines after step 20.
# Prints a table last: ms/step and examples/s of each, the scaling (target
# >= 1.85x one GPU), the exposed communication (the step time beyond the
# one-GPU step, target <= 10% of the step) and ge2 against DDP (target >= 1).
# GE2_DP_FLAGS adds trainer flags to ge2's multi-GPU runs (e.g. "--bucket-mb 8").
set -u -o pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
stage="$(cd "$here/.." && pwd)"
gpus="${1:-$(nvidia-smi -L | wc -l)}"
[ "$gpus" -ge 2 ] || { echo "dp_speed: needs 2 or more GPUs (have $gpus)" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# NVLink multicast stays off on the shared GPU machines (its KINDS.md)
export NCCL_NVLS_ENABLE=0
export LD_LIBRARY_PATH="$stage/bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
data="${GE2_DATA_DIR:-$stage/data/fashion-mnist}"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

die() { echo "dp_speed: $*" >&2; exit 1; }
launcher() { # ranks -> the command prefix
    [ "$1" -gt 1 ] && echo mpirun --bind-to none -np "$1"
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

# the MLP's examples/s on R ranks (all ranks' examples)
mlp_rate() { # ranks
    timeout 300 $(launcher "$1") "$stage/bin/train_mlp" --device cuda --data "$data" --hidden 4096,4096,4096 \
        --batch 1024 --epochs 10 $([ "$1" -gt 1 ] && echo --distributed ${GE2_DP_FLAGS:-}) >"$log" 2>&1 ||
        { tail -n 5 "$log" >&2; die "train_mlp on $1 GPU(s) failed"; }
    sed -n 's/^epoch \([0-9]*\)\/[0-9]*: .* \([0-9.]*\) examples\/s .*/\1 \2/p' "$log" | awk '$1 >= 3 { print $2 }' | median
}
# the GPT's ms/step on R ranks at a precision (fp32, tf32)
gpt_ms() { # ranks precision
    timeout 300 $(launcher "$1") "$stage/bin/train_gpt" --device cuda --data "$stage/data/austen.txt" --max-iters 200 \
        --precision "$2" \
        --eval-interval 1000 --eval-iters 1 --sample 0 $([ "$1" -gt 1 ] && echo --distributed ${GE2_DP_FLAGS:-}) >"$log" 2>&1 ||
        { tail -n 5 "$log" >&2; die "train_gpt on $1 GPU(s) failed"; }
    sed -n 's/^iter \([0-9]*\): loss [-0-9.naif]*, \([0-9.]*\) ms\/step.*/\1 \2/p' "$log" | awk '$1 > 20 { print $2 }' | median
}
ddp_ms() { # model ranks [extra ddp_speed.py flags]
    timeout 300 torchrun --nproc_per_node "$2" "$here/ddp_speed.py" --model "$1" "${@:3}" 2>/dev/null |
        sed -n 's/.*(\(.*\) ms\/step)/\1/p'
}

mlp1=$(mlp_rate 1) && [ -n "$mlp1" ] || die "no MLP rate on 1 GPU"
mlpn=$(mlp_rate "$gpus") && [ -n "$mlpn" ] || die "no MLP rate on $gpus GPUs"
gpt1=$(gpt_ms 1 fp32) && [ -n "$gpt1" ] || die "no GPT step time on 1 GPU"
gptn=$(gpt_ms "$gpus" fp32) && [ -n "$gptn" ] || die "no GPT step time on $gpus GPUs"
tf1=$(gpt_ms 1 tf32) && [ -n "$tf1" ] || die "no TF32 GPT step time on 1 GPU"
tfn=$(gpt_ms "$gpus" tf32) && [ -n "$tfn" ] || die "no TF32 GPT step time on $gpus GPUs"
ddp_mlp1=$(ddp_ms mlp 1); ddp_mlpn=$(ddp_ms mlp "$gpus")
ddp_gpt1=$(ddp_ms gpt 1); ddp_gptn=$(ddp_ms gpt "$gpus")
ddp_tf1=$(ddp_ms gpt 1 --tf32); ddp_tfn=$(ddp_ms gpt "$gpus" --tf32)

nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1
# per model: examples per GPU per step, then ge2's and DDP's ms/step on 1 and n GPUs
awk -v n="$gpus" -v m1="$mlp1" -v mn="$mlpn" -v g1="$gpt1" -v gn="$gptn" -v t1="$tf1" -v tn="$tfn" \
    -v dm1="${ddp_mlp1:-0}" -v dmn="${ddp_mlpn:-0}" -v dg1="${ddp_gpt1:-0}" -v dgn="${ddp_gptn:-0}" \
    -v dt1="${ddp_tf1:-0}" -v dtn="${ddp_tfn:-0}" 'BEGIN {
    name[1] = "mlp"; batch[1] = 1024; one[1] = 1024 / m1 * 1000; many[1] = 1024 * n / mn * 1000; d1[1] = dm1; dn[1] = dmn
    name[2] = "gpt"; batch[2] = 64;   one[2] = g1;               many[2] = gn;                   d1[2] = dg1; dn[2] = dgn
    name[3] = "gpt tf32"; batch[3] = 64; one[3] = t1;            many[3] = tn;                   d1[3] = dt1; dn[3] = dtn
    printf "| model | run | ms/step | examples/s |\n|---|---|---|---|\n"
    for (i = 1; i <= 3; i++) {
        printf "| %s | ge2 1 GPU | %.3f | %.0f |\n", name[i], one[i], batch[i] / one[i] * 1000
        printf "| %s | ge2 %d GPUs | %.3f | %.0f |\n", name[i], n, many[i], batch[i] * n / many[i] * 1000
        if (d1[i] > 0) printf "| %s | DDP 1 GPU | %.3f | %.0f |\n", name[i], d1[i], batch[i] / d1[i] * 1000
        if (dn[i] > 0) printf "| %s | DDP %d GPUs | %.3f | %.0f |\n", name[i], n, dn[i], batch[i] * n / dn[i] * 1000
    }
    for (i = 1; i <= 3; i++) {
        printf "%s: scaling %.2fx one GPU (target >= 1.85x); exposed communication %.1f%% of the step (target <= 10%%)",
               name[i], n * one[i] / many[i], 100 * (many[i] - one[i]) / many[i]
        if (dn[i] > 0) printf "; ge2 / DDP throughput on %d GPUs %.2fx (target >= 1)", n, dn[i] / many[i]
        printf "\n"
    }
}'
