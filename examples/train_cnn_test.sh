#!/usr/bin/env bash
# Smoke test of the CNN trainer on the CPU, small widths: a short run ends
# with the exact accuracy line; the checkpoint holds batch norm's buffers
# (num_batches_tracked counting the steps); save + resume equals a straight
# run byte for byte, running statistics included; --schedule cosine runs;
# bad flags and mismatched files are one line on stderr with exit 2 / 1.
set -uo pipefail
bin="$1"
# shellcheck source=examples/trainer_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/trainer_test_lib.sh"

small=(--device cpu --data "$data" --channels 4,8 --fc 16 --batch 32)

"$bin" "${small[@]}" --steps 12 --save "$tmp/a.safetensors" >"$tmp/run1" 2>"$tmp/err1"
rc=$?
check "short run exits 0 ($(cat "$tmp/err1"))" "$rc"
tail -n 1 "$tmp/run1" | grep -Eq '^test accuracy: 0\.[0-9]{4} \([0-9]+/10000\)$'
rc=$?
check "short run last line: $(tail -n 1 "$tmp/run1")" "$rc"
# The header lists every tensor; num_batches_tracked is an I64 scalar that
# counted the 12 train steps (8 little-endian bytes in the data section).
for name in conv1.weight bn1.weight bn1.bias bn1.running_mean bn1.running_var conv2.weight bn2.running_var \
    fc1.weight fc2.bias; do
    grep -aq "\"$name\"" "$tmp/a.safetensors"
    rc=$?
    check "checkpoint holds $name" "$rc"
done
grep -aq '"bn1.num_batches_tracked":{"dtype":"I64","shape":\[\]' "$tmp/a.safetensors"
rc=$?
check "num_batches_tracked is an I64 scalar" "$rc"

# --precision bf16 (CPU: the convolutions' and linear layers' GEMM operands
# rounded): it runs and lands elsewhere than fp32 after the same 12 steps
"$bin" "${small[@]}" --steps 12 --precision bf16 --save "$tmp/bf16.safetensors" >"$tmp/run_bf16" 2>"$tmp/err_bf16"
rc=$?
check "--precision bf16 exits 0 ($(cat "$tmp/err_bf16"))" "$rc"
! cmp -s "$tmp/a.safetensors" "$tmp/bf16.safetensors"
rc=$?
check "--precision bf16 is not fp32's path" "$rc"

# 16 steps straight == 10 steps, save, resume, 6 steps: the same checkpoint, byte for byte
"$bin" "${small[@]}" --steps 16 --save "$tmp/straight.safetensors" >"$tmp/s1" 2>&1 &&
    "$bin" "${small[@]}" --steps 10 --save "$tmp/part.safetensors" >"$tmp/s2" 2>&1 &&
    "$bin" "${small[@]}" --steps 6 --resume "$tmp/part.safetensors" --save "$tmp/resumed.safetensors" >"$tmp/s3" 2>&1
rc=$?
check "save/resume runs ($(tail -n 1 "$tmp/s3"))" "$rc"
cmp -s "$tmp/straight.safetensors" "$tmp/resumed.safetensors"
rc=$?
check "resumed checkpoint (running statistics included) is byte-identical to the straight one" "$rc"

"$bin" "${small[@]}" --steps 4 --init "$tmp/a.safetensors" --schedule cosine --epochs 2 >"$tmp/run3" 2>&1
rc=$?
check "--init and --schedule cosine ($(tail -n 1 "$tmp/run3"))" "$rc"
grep -q 'adamw lr 0.001 cosine, batch 32, 2 epochs' "$tmp/run3"
rc=$?
check "the header names the schedule" "$rc"

expect_error "bad --channels" 2 --channels 4
expect_error "bad --fc" 2 --fc 0
expect_error "bad --schedule" 2 --schedule linear
expect_error "--init of other widths" 1 --device cpu --data "$data" --channels 4,9 --fc 16 --steps 1 \
    --init "$tmp/a.safetensors"
grep -q 'conv2.weight has shape \[8,4,3,3\], the model has \[9,4,3,3\]' "$tmp/err"
rc=$?
check "--init mismatch names the tensor and shapes" "$rc"

trainer_test_summary
