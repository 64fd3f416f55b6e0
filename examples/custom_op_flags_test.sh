#!/usr/bin/env bash
# train_custom_op's flags: a value it cannot read is refused naming the
# flag, not taken as 0 steps or as "auto".
set -uo pipefail
bin="$1"
# shellcheck source=examples/trainer_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/trainer_test_lib.sh"
expect_error "--steps abc" 2 --steps abc
grep -q -- "--steps: expected a non-negative integer, got 'abc'" "$tmp/err"
rc=$?
check "--steps abc is named ($(cat "$tmp/err"))" "$rc"
expect_error "--device gpu" 2 --device gpu
grep -q -- "--device: expected cpu, cuda or auto, got 'gpu'" "$tmp/err"
rc=$?
check "--device gpu is named ($(cat "$tmp/err"))" "$rc"
expect_error "--steps without a value" 2 --steps
expect_error "an unknown flag" 2 --bogus
"$bin" --device cpu --steps 0 >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -Eq 'gradient check .*: pass, worst difference [0-9.e+-]+ \(its bound [0-9.e+-]+\)' "$tmp/out"
rc=$?
check "the gradient check prints its worst difference and bound ($(head -n 1 "$tmp/out"))" "$rc"
trainer_test_summary
