#!/usr/bin/env bash
# Runs tests/dist/collective_test.c under mpirun on 1 to 4 ranks (more than
# the machine's cores is fine: the ranks wait in MPI, not in loops).
#
# Usage: collective.sh path/to/collective_test
set -uo pipefail

bin="$1"
. "$(dirname "$0")/mpi_lib.sh"

failed=0
for np in 1 2 3 4; do
    if ! timeout 120 "${mpirun[@]}" "$np" "$bin"; then
        echo "FAIL: $np rank(s)"
        failed=$((failed + 1))
    fi
done
echo "$((4 - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]
