#!/usr/bin/env bash
# Runs the data-parallel test under mpirun (tests/dist/data_parallel_test.c):
# its checks on 1 and on 2 ranks, then two jobs with a rank that misbehaves,
# which must end, with a non-zero exit and a message naming the rank, well
# within a bound (never a hang): one rank failing a step (bad input), and
# one rank that stops stepping (the others' all-reduce times out).
#
# Usage: run_mpi.sh path/to/data_parallel_test
set -uo pipefail

bin="$1"
. "$(dirname "$0")/mpi_lib.sh"

passed=0
failed=0
pass() { echo "ok: $*"; passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }

for np in 1 2; do
    if timeout 120 "${mpirun[@]}" "$np" "$bin"; then
        pass "$np rank(s): every check"
    else
        fail "$np rank(s): see the lines above"
    fi
done

# A job with a bad rank: it must stop, non-zero, naming the rank, in time.
misbehaving_job() { # what flag expected-text
    local what="$1" flag="$2" expected="$3" log="$TMPDIR/$2.log" start rc
    start=$(date +%s)
    timeout 60 "${mpirun[@]}" 2 "$bin" "$flag" 1 >"$log" 2>&1
    rc=$?
    local took=$(($(date +%s) - start))
    sed 's/^/    | /' "$log" | head -20
    if [ "$rc" -eq 124 ]; then
        fail "$what: the job hung (killed after 60 s)"
    elif [ "$rc" -eq 0 ]; then
        fail "$what: the job exited 0"
    elif ! grep -q "$expected" "$log"; then
        fail "$what: exit $rc, but no line says '$expected'"
    elif grep -q "finished although" "$log"; then
        fail "$what: a rank finished its steps"
    else
        pass "$what: every rank ended (exit $rc, ${took} s), the message names the rank"
    fi
}
misbehaving_job "a rank failing a step" --fail-rank "rank 1: step 2: .*x"
misbehaving_job "a rank that stops stepping" --hang-rank "rank 0: .*did not complete in 2 s"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
