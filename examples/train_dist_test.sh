#!/usr/bin/env bash
# The trainer's --distributed mode on the CPU backend under mpirun:
#   - 2 ranks at batch 32 train as 1 process at batch 64: after 20 steps the
#     checkpoints agree within float32 error, with the data in order and
#     shuffled (DistributedSampler's shards), for SGD and Adam;
#   - only rank 0 prints, and its test accuracy line is the one process's;
#   - a checkpoint from 2 ranks resumes on 1 (at batch 64, where the 2 ranks
#     stopped), ending where 20 straight steps do; a batch that does not
#     divide the position it stopped at is refused, naming the numbers;
#   - a rank that fails ends the job with its rank named;
#   - the GPT trainer: 2 ranks at batch 4 train as 1 process at batch 8
#     (in order, no dropout), and only rank 0 reports.
# Usage: train_dist_test.sh train_mlp checkpoints_close mpi_lib.sh train_gpt
set -uo pipefail
bin="$1"
close="$2"
. "$3"
gpt="$4"
. "$(dirname "$0")/trainer_test_lib.sh"
export TMP_MISSING="$tmp/no-such-file" # for the failing rank below

common=(--device cpu --data "$data" --hidden 32 --epochs 1)
for opt in "sgd --lr 0.05" "adam"; do
    for order in --no-shuffle "--seed 3"; do
        tag="${opt%% *} ${order}"
        # shellcheck disable=SC2086 # opt and order are word lists
        "${mpirun[@]}" 2 "$bin" "${common[@]}" --optimizer $opt $order --distributed --batch 32 --steps 20 \
            --save "$tmp/two.safetensors" >"$tmp/two.out" 2>"$tmp/two.err"
        rc=$?
        check "$tag: 2 ranks run ($(tail -n 2 "$tmp/two.err"))" "$rc"
        # shellcheck disable=SC2086
        "$bin" "${common[@]}" --optimizer $opt $order --batch 64 --steps 20 --save "$tmp/one.safetensors" \
            >"$tmp/one.out" 2>&1
        rc=$?
        check "$tag: 1 process runs" "$rc"
        "$close" "$tmp/two.safetensors" "$tmp/one.safetensors" >"$tmp/close.out"
        rc=$?
        check "$tag: 2 ranks x 32 == 1 x 64 after 20 steps ($(tail -n 1 "$tmp/close.out"))" "$rc"
        [ "$tag" = "adam --seed 3" ] && cp "$tmp/one.safetensors" "$tmp/adam_seed3_straight.safetensors"
        [ "$(grep -c '^test accuracy' "$tmp/two.out")" = 1 ]
        rc=$?
        check "$tag: one rank prints (got $(grep -c '^test accuracy' "$tmp/two.out") accuracy lines)" "$rc"
        [ "$(tail -n 1 "$tmp/two.out")" = "$(tail -n 1 "$tmp/one.out")" ]
        rc=$?
        check "$tag: the same test accuracy line ($(tail -n 1 "$tmp/two.out") / $(tail -n 1 "$tmp/one.out"))" "$rc"
    done
done

# --bucket-mb: 4 KiB buckets (a layer's weight gradient alone is 100 KiB: one all-reduce per gradient)
# give the same parameters as the default bucket, and the flag wants --distributed.
"${mpirun[@]}" 2 "$bin" "${common[@]}" --optimizer adam --seed 3 --distributed --bucket-mb 0.004 --batch 32 \
    --steps 20 --save "$tmp/buckets.safetensors" >/dev/null 2>"$tmp/buckets.err"
rc=$?
check "--bucket-mb 0.004: 2 ranks run ($(tail -n 1 "$tmp/buckets.err"))" "$rc"
"$close" "$tmp/buckets.safetensors" "$tmp/adam_seed3_straight.safetensors" >"$tmp/close.out"
rc=$?
check "--bucket-mb 0.004: 2 ranks x 32 == 1 x 64 ($(tail -n 1 "$tmp/close.out"))" "$rc"
"$bin" "${common[@]}" --bucket-mb 1 --steps 1 >/dev/null 2>"$tmp/bucket_alone.err"
[ $? -eq 2 ] && grep -q -- '--bucket-mb applies to --distributed only' "$tmp/bucket_alone.err"
rc=$?
check "--bucket-mb without --distributed is refused ($(cat "$tmp/bucket_alone.err"))" "$rc"

# 2 ranks x 32 for 10 steps, then 1 process x 64 for 10 more == the 20 straight adam, shuffled steps above.
"${mpirun[@]}" 2 "$bin" "${common[@]}" --optimizer adam --seed 3 --distributed --batch 32 --steps 10 \
    --save "$tmp/part.safetensors" >/dev/null 2>"$tmp/part.err"
rc=$?
check "resume: 2 ranks save ($(tail -n 1 "$tmp/part.err"))" "$rc"
"$bin" "${common[@]}" --optimizer adam --seed 3 --batch 64 --steps 10 --resume "$tmp/part.safetensors" \
    --save "$tmp/resumed.safetensors" >/dev/null 2>"$tmp/resumed.err"
rc=$?
check "resume: 1 process continues ($(cat "$tmp/resumed.err"))" "$rc"
"$close" "$tmp/resumed.safetensors" "$tmp/adam_seed3_straight.safetensors" >"$tmp/close.out"
rc=$?
check "resume: 2 ranks then 1 == 20 straight steps ($(tail -n 1 "$tmp/close.out"))" "$rc"
expect_error "resume: a batch that does not divide the position" 2 "${common[@]}" --seed 3 --batch 48 \
    --steps 1 --resume "$tmp/part.safetensors"
grep -q "640 examples into epoch 1" "$tmp/err"
rc=$?
check "resume: the refusal names the position ($(cat "$tmp/err"))" "$rc"

# A rank that fails while the other waits for it in a collective (rank 1
# alone is given a missing --init file; rank 0 goes on to the broadcast of
# rank 0's state): every rank ends, non-zero, the message naming rank 1.
start=$(date +%s)
timeout 120 "${mpirun[@]}" 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$0" "$@" --init "$TMP_MISSING"; fi
exec "$0" "$@"' "$bin" "${common[@]}" --distributed --batch 32 --steps 5 >"$tmp/fail.out" 2>&1
rc=$?
took=$(($(date +%s) - start))
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "train_mlp: rank 1: .*no-such-file" "$tmp/fail.out" &&
    ! grep -q "^test accuracy" "$tmp/fail.out"
ok=$?
check "one failing rank ends the job naming it (exit $rc after ${took} s: $(grep -m1 'rank 1' "$tmp/fail.out"))" "$ok"

# Ranks given different models fail at the start, every rank, naming the
# field (they used to end with MPI_ERR_TRUNCATE in the state broadcast).
timeout 120 "${mpirun[@]}" 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$0" "$@" --hidden 33; fi
exec "$0" "$@"' "$bin" "${common[@]}" --distributed --batch 32 --steps 5 >"$tmp/mismatch.out" 2>&1
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] &&
    grep -q "rank 1: the model is 'model 784-33-10 relu' here but 'model 784-32-10 relu' on rank 0" "$tmp/mismatch.out"
ok=$?
check "ranks with other models fail naming the field ($(grep -m1 'rank 1' "$tmp/mismatch.out"))" "$ok"

# A bad flag under mpirun: each rank's message names its rank.
timeout 60 "${mpirun[@]}" 2 "$bin" --distributed --batch x >"$tmp/flag.out" 2>&1
rc=$?
[ "$rc" != 0 ] && grep -q "^train_mlp: rank 0: --batch: expected a positive integer, got 'x'" "$tmp/flag.out" &&
    grep -q "^train_mlp: rank 1: --batch" "$tmp/flag.out"
ok=$?
check "a bad flag is reported by rank ($(grep -m1 'rank' "$tmp/flag.out"))" "$ok"

# A rank given fewer --steps is refused at the start like any other flag.
timeout 120 "${mpirun[@]}" 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then exec "$0" "$@" --steps 2; fi
exec "$0" "$@" --steps 200' "$bin" "${common[@]}" --distributed --batch 32 >"$tmp/steps.out" 2>&1
rc=$?
[ "$rc" != 0 ] && grep -q "rank 1: --steps is '2' here but '200' on rank 0" "$tmp/steps.out"
ok=$?
check "a rank with fewer --steps is refused at the start ($(grep -m1 'rank 1' "$tmp/steps.out"))" "$ok"

# A rank that stops (SIGSTOP) leaves the other waiting in a collective: it
# fails after --dist-timeout, naming itself, and waits without burning a
# core (its CPU time over 3 s of waiting).
rank_pid() { # the train_mlp process of rank $1
    local p
    for p in $(pgrep -x train_mlp); do
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p" && return
    done
}
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null; }
start=$(date +%s)
timeout 120 "${mpirun[@]}" 2 "$bin" "${common[@]}" --hidden 1024 --distributed --batch 32 --dist-timeout 6 \
    >"$tmp/stall.out" 2>&1 &
job=$!
r0="" r1=""
for _ in $(seq 100); do
    r0=$(rank_pid 0) r1=$(rank_pid 1)
    [ -n "$r0" ] && [ -n "$r1" ] && grep -q '^train_mlp: cpu' "$tmp/stall.out" && break
    sleep 0.1
done
sleep 1
kill -STOP "$r1" 2>/dev/null
sleep 1
t0=$(cpu_ticks "$r0")
sleep 3
t1=$(cpu_ticks "$r0")
wait "$job"
rc=$?
took=$(($(date +%s) - start))
waited=$(( ${t1:-0} - ${t0:-0} ))
[ "$rc" != 0 ] && [ "$rc" != 124 ] && grep -q "rank 0: .*did not complete in 6 s" "$tmp/stall.out" &&
    [ -n "$t0" ] && [ "$waited" -lt 30 ]
ok=$?
echo "stopped rank: the waiting rank used $waited ticks of CPU in 3 s"
check "a stopped rank: the other fails after --dist-timeout, using ${waited}/300 ticks of a core while it waits (exit $rc after ${took} s: $(grep -m1 'did not' "$tmp/stall.out"))" "$ok"

# The GPT trainer (embedding, attention, layer norm, the tied head's
# gradient summed before it is all-reduced, clipping on the averaged norm).
small=(--device cpu --n-layer 1 --n-head 2 --n-embd 32 --block-size 32 --max-iters 8 --warmup 2 --lr 3e-3
    --eval-interval 4 --eval-iters 4 --dropout 0 --sample 0 --no-shuffle)
"${mpirun[@]}" 2 "$gpt" "${small[@]}" --batch 4 --distributed --save "$tmp/gpt2.safetensors" >"$tmp/gpt2.out" 2>&1
rc=$?
check "gpt: 2 ranks run ($(tail -n 1 "$tmp/gpt2.out"))" "$rc"
"$gpt" "${small[@]}" --batch 8 --save "$tmp/gpt1.safetensors" >"$tmp/gpt1.out" 2>&1
rc=$?
check "gpt: 1 process runs ($(tail -n 1 "$tmp/gpt1.out"))" "$rc"
"$close" "$tmp/gpt2.safetensors" "$tmp/gpt1.safetensors" >"$tmp/close.out"
rc=$?
check "gpt: 2 ranks x 4 == 1 x 8 after 8 steps ($(tail -n 1 "$tmp/close.out"))" "$rc"
[ "$(grep -c '^best val loss' "$tmp/gpt2.out")" = 1 ] && grep -q 'batch 4 x 2 rank(s)' "$tmp/gpt2.out"
rc=$?
check "gpt: rank 0 alone reports, naming the ranks" "$rc"

trainer_test_summary
