# What the trainers' smoke tests share (sourced after setting bin, the
# trainer binary): a scratch folder, pass/fail counting and the one-line
# error check. The caller ends with trainer_test_summary.
data="${GE2_DATA_DIR:-/usr/share/datasets/fashion-mnist}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0

# check NAME STATUS: STATUS 0 passes. Take the status into a variable
# first (rc=$?, then check "..." "$rc"): a $(...) in NAME would otherwise
# replace $? before it is read.
check() {
    if [ "$2" = 0 ]; then passes=$((passes + 1)); else echo "FAIL: $1"; failures=$((failures + 1)); fi
}

# expect_error NAME CODE ARGS...: exit code CODE and exactly one stderr
# line, which starts with the program's name
expect_error() {
    local name="$1" code="$2"
    shift 2
    "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    [ "$rc" = "$code" ] && [ "$(wc -l <"$tmp/err")" = 1 ] && grep -q "^$(basename "$bin"): " "$tmp/err"
    local ok=$?
    check "$name (rc $rc, stderr: $(cat "$tmp/err"))" "$ok"
}

trainer_test_summary() {
    echo "$passes passed, $failures failed"
    [ "$failures" = 0 ]
}
