#!/usr/bin/env bash
# gpu_stage/run.sh (copied there by tools/stage_gpu.sh): runs every staged GPU
# test binary, prints each suite's Check summary line and a final
# "N passed, N failed"; exits non-zero if any failed.
#
# Usage: ./run.sh [test names...]   (default: every name in tests.txt)
#        ./run.sh --sanitize [TOOL...]   short capture stability runs under
#                                   compute-sanitizer (memcheck and racecheck)
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

# The device's CUDA libraries (cudart, cuBLAS, cuBLASLt). Binaries also carry
# the build machine's toolkit path in their rpath; this covers other layouts.
cuda_lib=""
for d in "${CUDA_PATH:-/nonexistent}/lib64" /usr/local/cuda/lib64 /usr/local/cuda-13*/lib64 \
    /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    if [ -e "$d/libcublasLt.so.13" ]; then
        cuda_lib="$d"
        break
    fi
done
if [ -n "$cuda_lib" ]; then
    echo "run.sh: CUDA libraries from $cuda_lib"
else
    echo "run.sh: warning: libcublasLt.so.13 not found; set CUDA_PATH to the CUDA 13 toolkit"
fi
export LD_LIBRARY_PATH="$here/bin${cuda_lib:+:$cuda_lib}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Trainers and benchmarks find the dataset here.
export GE2_DATA_DIR="$here/data/fashion-mnist"
# The data-parallel tests start as MPI singletons (or under mpirun); the
# device machine runs us as root, which Open MPI refuses unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

if [ -x bin/smoke ]; then
    bin/smoke 2>&1 | sed 's/^/run.sh: /'
fi

# --sanitize [TOOL...]: the capture suites with GE2_TEST_SHORT=1 (a few
# steps) and CK_FORK=no (the sanitizer then sees the test's own CUDA work),
# once per tool (memcheck and racecheck unless named), each test from an
# empty kernel cache (a HOME of its own) and otherwise default options: the
# sanitizer slows the GPU enough that timings, hence the autotuner's
# choices, differ from run to run, and replay must still equal eager.
# Each test runs in a process of its own (GE2_TEST_ONLY), GE2_SANITIZE_JOBS
# of them side by side (default 6), each verdict printed as it comes: a
# whole suite in one process under racecheck takes longer than a device
# call allows, and one test's small kernels leave the GPU mostly idle.
# GE2_SANITIZE_TIMEOUT (seconds, default 1800) bounds each process.
# racecheck looks at ge2's own kernels (every one is named ge2_*): the
# libraries' (cuBLASLt, cuDNN) are their makers' to check, and instrumenting
# their shared memory makes one test take longer than a device call allows.
if [ "${1:-}" = "--sanitize" ]; then
    shift
    tools=("$@")
    [ "${#tools[@]}" -gt 0 ] || tools=(memcheck racecheck)
    san="$(command -v compute-sanitizer || echo "${cuda_lib%/*}/bin/compute-sanitizer")"
    [ -x "$san" ] || san=/usr/local/cuda/bin/compute-sanitizer
    jobs_max="${GE2_SANITIZE_JOBS:-6}"
    per_test="${GE2_SANITIZE_TIMEOUT:-1800}"
    case "$jobs_max$per_test" in
    *[!0-9]*) echo "sanitize: GE2_SANITIZE_JOBS and GE2_SANITIZE_TIMEOUT take whole numbers" >&2; exit 2 ;;
    esac
    [ "$jobs_max" -ge 1 ] || jobs_max=1
    mkdir -p logs
    bad=0
    pending=()
    # Prints the verdict of each started run whose .rc exists, keeps the rest
    report_finished() {
        local still=() run tool t name log rc took verdict
        for run in ${pending[@]+"${pending[@]}"}; do
            read -r tool t name log <<<"$run"
            if [ ! -e "$log.rc" ]; then
                still+=("$run")
                continue
            fi
            read -r rc took <"$log.rc"
            verdict=clean
            [ "$rc" -eq 0 ] || verdict="FAIL (exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after $per_test s"))"
            echo "sanitize $tool $t $name (empty kernel cache, $took s): $verdict  $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|Checks:' "$log" | tr '\n' ' ')"
            [ "$rc" -eq 0 ] || { bad=1; tail -n 20 "$log" | sed 's/^/    /'; }
        done
        pending=(${still[@]+"${still[@]}"})
    }
    for tool in "${tools[@]}"; do
        filter=()
        if [ "$tool" = racecheck ]; then
            if "$san" --help 2>&1 | grep -q -- '--kernel-name '; then
                filter=(--kernel-name kns=ge2_)
            else
                echo "sanitize: this compute-sanitizer has no --kernel-name; racecheck instruments every kernel"
            fi
        fi
        for t in capture_replay_test capture_soak_test; do
            if ! names="$(GE2_TEST_LIST=1 "bin/$t")" || [ -z "$names" ]; then
                echo "sanitize $tool $t: FAIL (its tests could not be listed)"
                bad=1
                continue
            fi
            for name in $names; do
                while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do
                    wait -n
                    report_finished
                done
                log="logs/sanitize-$tool-$t-$name.log"
                rm -f "$log.rc"
                pending+=("$tool $t $name $log")
                (
                    home="$(mktemp -d)"
                    start=$SECONDS
                    HOME="$home" GE2_TEST_SHORT=1 CK_FORK=no GE2_TEST_ONLY="$name" timeout -k 30 "$per_test" \
                        "$san" --tool "$tool" ${filter[@]+"${filter[@]}"} --error-exitcode 86 "bin/$t" >"$log" 2>&1
                    echo "$? $((SECONDS - start))" >"$log.rc"
                    rm -rf "$home"
                ) &
            done
        done
    done
    while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
        wait -n
        report_finished
    done
    wait
    report_finished
    exit "$bad"
fi

if [ "$#" -gt 0 ]; then
    tests=("$@")
else
    mapfile -t tests <tests.txt
fi

mkdir -p logs
passed=0
failed=0
for t in "${tests[@]}"; do
    log="logs/$t.log"
    if [ ! -x "bin/$t" ]; then
        echo "$t: FAIL (no such staged binary)"
        failed=$((failed + 1))
        continue
    fi
    timeout 900 "bin/$t" >"$log" 2>&1
    rc=$?
    summary="$(grep -E '^[0-9]+%: Checks: ' "$log" | tail -n 1)"
    [ -n "$summary" ] || summary="$(tail -n 1 "$log")"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        echo "$t: PASS  $summary"
    else
        failed=$((failed + 1))
        echo "$t: FAIL (exit $rc)  $summary"
        sed 's/^/    /' "$log" | tail -n 40
    fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
