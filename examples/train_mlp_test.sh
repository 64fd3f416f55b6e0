#!/usr/bin/env bash
# Smoke test of the trainer on the CPU: a short run ends with the exact
# accuracy line; bad flags, a missing data dir, corrupt or mismatched files
# are one line on stderr with exit 2 / 1; save, resume and --init work.
set -uo pipefail
bin="$1"
# shellcheck source=examples/trainer_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/trainer_test_lib.sh"

last_line_ok() {
    tail -n 1 "$1" | grep -Eq '^test accuracy: 0\.[0-9]{4} \([0-9]+/10000\)$'
}

"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --save "$tmp/a.safetensors" >"$tmp/run1" 2>"$tmp/err1"
rc=$?
check "short run exits 0 ($(cat "$tmp/err1"))" "$rc"
last_line_ok "$tmp/run1"
rc=$?
check "short run last line: $(tail -n 1 "$tmp/run1")" "$rc"
test -s "$tmp/a.safetensors"
rc=$?
check "--save wrote the checkpoint" "$rc"

"$bin" --device cpu --data "$data" --hidden 16 --steps 10 --resume "$tmp/a.safetensors" --plan-report \
    >"$tmp/run2" 2>"$tmp/err2"
rc=$?
check "resume exits 0 ($(cat "$tmp/err2"))" "$rc"
last_line_ok "$tmp/run2"
rc=$?
check "resumed run last line" "$rc"
grep -Eq '^plan: arena_bytes=[0-9]+ lower_bound_bytes=[0-9]+ naive_bytes=[0-9]+' "$tmp/run2"
rc=$?
check "--plan-report prints the plan line" "$rc"

"$bin" --device cpu --data "$data" --hidden 16 --steps 5 --init "$tmp/a.safetensors" >"$tmp/run3" 2>&1
rc=$?
check "--init from a checkpoint of the same model" "$rc"

# --time-launches: the train key's report gives each launch's time and the step's sum
"$bin" --device cpu --data "$data" --hidden 16 --steps 4 --time-launches >"$tmp/run4" 2>&1
rc=$?
check "--time-launches exits 0" "$rc"
grep -Eq '^node +[0-9]+ linear_grad_weight +[0-9]+\.[0-9] us +[0-9]+\.[0-9]%' "$tmp/run4"
rc=$?
check "--time-launches times each launch" "$rc"
grep -Eq '^launch time per step: [0-9]+\.[0-9] us \(the mean of 3 steps after the key.s first\)$' "$tmp/run4"
rc=$?
check "--time-launches sums the step over the timed steps" "$rc"

# --precision bf16 (CPU: the GEMMs' operands rounded): it trains, and not on fp32's path
"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --precision bf16 --save "$tmp/bf16.safetensors" \
    >"$tmp/run5" 2>"$tmp/err5"
rc=$?
check "--precision bf16 exits 0 ($(cat "$tmp/err5"))" "$rc"
! cmp -s "$tmp/a.safetensors" "$tmp/bf16.safetensors"
rc=$?
check "--precision bf16 lands elsewhere than fp32 after the same 20 steps" "$rc"
# --precision fp16: fp16 operands under dynamic loss scaling; it trains, not
# on bf16's path, and reports the scale (65536 after 20 clean steps)
"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --precision fp16 --save "$tmp/fp16.safetensors" \
    >"$tmp/run6" 2>"$tmp/err6"
rc=$?
check "--precision fp16 exits 0 ($(cat "$tmp/err6"))" "$rc"
! cmp -s "$tmp/bf16.safetensors" "$tmp/fp16.safetensors" && ! cmp -s "$tmp/a.safetensors" "$tmp/fp16.safetensors"
rc=$?
check "--precision fp16 lands elsewhere than bf16 and fp32" "$rc"
grep -q '^loss scale: 65536, 0 step(s) skipped' "$tmp/run6"
rc=$?
check "--precision fp16 reports its loss scale ($(grep 'loss scale' "$tmp/run6"))" "$rc"
"$bin" --device cpu --data "$data" --precision fp8 >/dev/null 2>"$tmp/err7"
[ $? -eq 2 ] && grep -q 'expected fp32, tf32, bf16 or fp16' "$tmp/err7"
rc=$?
check "--precision fp8 is refused ($(cat "$tmp/err7"))" "$rc"

# 30 steps straight == 20 steps, save, resume, 10 steps: the same checkpoint, byte for byte
common=(--device cpu --data "$data" --hidden 16 --optimizer sgd --momentum 0.9 --lr 0.05)
"$bin" "${common[@]}" --steps 30 --save "$tmp/straight.safetensors" >"$tmp/s1" 2>&1 &&
    "$bin" "${common[@]}" --steps 20 --save "$tmp/part.safetensors" >"$tmp/s2" 2>&1 &&
    "$bin" "${common[@]}" --steps 10 --resume "$tmp/part.safetensors" --save "$tmp/resumed.safetensors" \
        >"$tmp/s3" 2>&1
rc=$?
check "save/resume runs ($(tail -n 1 "$tmp/s3"))" "$rc"
cmp -s "$tmp/straight.safetensors" "$tmp/resumed.safetensors"
rc=$?
check "resumed checkpoint is byte-identical to the straight one" "$rc"
[ "$(tail -n 1 "$tmp/s1")" = "$(tail -n 1 "$tmp/s3")" ]
rc=$?
check "resumed run reaches the same test accuracy" "$rc"

expect_error "unknown flag" 2 --bogus
expect_error "bad number" 2 --batch abc
expect_error "missing value" 2 --lr
expect_error "bad optimizer" 2 --optimizer rmsprop
expect_error "zero lr" 2 --lr 0
expect_error "label smoothing of 1" 2 --label-smoothing 1
expect_error "momentum without sgd" 2 --optimizer adam --momentum 0.9
expect_error "missing data dir" 1 --device cpu --data "$tmp/nowhere"
expect_error "--init of another model" 1 --device cpu --data "$data" --hidden 17 --steps 1 --init "$tmp/a.safetensors"
grep -q 'fc1.weight has shape \[16,784\], the model has \[17,784\]' "$tmp/err"
rc=$?
check "--init mismatch names the tensor and shapes" "$rc"
head -c 100 "$tmp/a.safetensors" >"$tmp/cut.safetensors"
expect_error "truncated checkpoint" 1 --device cpu --data "$data" --hidden 16 --steps 1 --resume "$tmp/cut.safetensors"
expect_error "missing --init file" 1 --device cpu --data "$data" --hidden 16 --init "$tmp/none.safetensors"

trainer_test_summary
