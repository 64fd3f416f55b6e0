#!/usr/bin/env bash
# train_cnn's test accuracy over training recipes and seeds, on the GPU
# machine from the repository root after tools/stage_gpu.sh (each run is a
# few seconds there): the evidence for train_cnn's defaults. Prints one
# line per run and a table of each recipe's mean, min and max last.
#
#   bash tools/cnn_sweep.sh [SEEDS] [OUT_DIR]     # SEEDS default "1 2 3"
#
# Recipes are flag strings, one per line of the RECIPES variable (default
# below); the model flags (--channels, --fc) stay at their defaults, as the
# issue's accuracy target is for the default model.
set -u -o pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
stage="$root/gpu_stage"
seeds="${1:-1 2 3}"
out="${2:-$stage/cnn_sweep}"
mkdir -p "$out"
export LD_LIBRARY_PATH="$stage/bin:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
data="${GE2_DATA_DIR:-$stage/data/fashion-mnist}"
recipes="${RECIPES:-"
--optimizer adamw --weight-decay 0.05 --schedule cosine --epochs 10 --label-smoothing 0
--optimizer adamw --weight-decay 0.05 --schedule cosine --epochs 10 --label-smoothing 0.1
--optimizer adamw --weight-decay 0.05 --schedule cosine --epochs 15 --label-smoothing 0.1
--optimizer adamw --weight-decay 0.05 --schedule cosine --epochs 15 --label-smoothing 0
--optimizer adamw --weight-decay 0.05 --schedule cosine --epochs 20 --label-smoothing 0
--optimizer adamw --weight-decay 0.1 --schedule cosine --epochs 15 --lr 2e-3 --batch 128 --label-smoothing 0
--optimizer sgd --momentum 0.9 --lr 0.05 --weight-decay 5e-4 --schedule cosine --epochs 15 --label-smoothing 0
--optimizer sgd --momentum 0.9 --lr 0.1 --weight-decay 5e-4 --schedule cosine --epochs 20 --batch 128 --label-smoothing 0
"}"
declare -a table=()
while IFS= read -r recipe; do
    [ -n "$recipe" ] || continue
    accs=()
    for seed in $seeds; do
        log="$out/$(echo "$recipe --seed $seed" | tr -c 'A-Za-z0-9.-' '_').log"
        # shellcheck disable=SC2086
        "$stage/bin/train_cnn" --device cuda --data "$data" $recipe --seed "$seed" >"$log" 2>&1
        acc="$(sed -n 's/^test accuracy: \([0-9.]*\).*/\1/p' "$log")"
        echo "$recipe --seed $seed: ${acc:-failed}"
        accs+=("${acc:-0}")
    done
    table+=("$(printf '%s\n' "${accs[@]}" | awk -v r="$recipe" \
        '{ s += $1; if (NR == 1 || $1 < lo) lo = $1; if ($1 > hi) hi = $1 }
         END { printf "| %s | %.4f | %.4f | %.4f |", r, s / NR, lo, hi }')")
done <<<"$recipes"
printf '| recipe | mean | min | max |\n|---|---|---|---|\n'
printf '%s\n' "${table[@]}"
