#!/usr/bin/env bash
# --config=asan's --run_under: runs the test with LeakSanitizer reading
# tools/lsan_suppressions.txt (Open MPI's libraries only), found beside this
# script in its runfiles whatever the test's working directory.
set -euo pipefail
here="${BASH_SOURCE[0]}"
for supp in "$here.runfiles/ge2/tools/lsan_suppressions.txt" "$(dirname "$here")/lsan_suppressions.txt"; do
    if [ -f "$supp" ]; then
        export LSAN_OPTIONS="suppressions=$(cd "$(dirname "$supp")" && pwd)/$(basename "$supp")${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
        break
    fi
done
# Open MPI's libraries keep no frame pointers: the fast unwinder loses the
# stack of their allocations in them, before the frame that names them.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
exec "$@"
