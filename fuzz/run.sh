#!/usr/bin/env bash
# Builds the checkpoint-reader fuzzer with clang (libFuzzer + ASan + UBSan)
# and runs it on fuzz/corpus/ for SECONDS (default 120). New interesting
# inputs are written to a scratch corpus, not the committed one; crashes
# land in fuzz/artifacts/. Usage: fuzz/run.sh [SECONDS] [extra libFuzzer flags]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
shift || true
out="${FUZZ_OUT:-/tmp/ge2_fuzz}"
mkdir -p "$out/corpus" fuzz/artifacts
clang -std=c11 -g -O1 -D_GNU_SOURCE -DGE2_NO_JEMALLOC -I. -Iinclude \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    fuzz/checkpoint_fuzz.c capture/checkpoint_json.c capture/checkpoint_safetensors.c \
    graph/alloc.c graph/error.c graph/dtype.c -lm -o "$out/checkpoint_fuzz"
"$out/checkpoint_fuzz" -max_total_time="$seconds" -max_len=4096 -artifact_prefix=fuzz/artifacts/ \
    -dict=fuzz/safetensors.dict "$@" "$out/corpus" fuzz/corpus
