#!/usr/bin/env bash
# Builds a fuzz target with clang (libFuzzer + ASan + UBSan) and runs it on
# its committed corpus for SECONDS (default 120). New interesting inputs go to
# a scratch corpus, not the committed one; crashes land in fuzz/artifacts/.
#
#   fuzz/run.sh [checkpoint|idx|rdb|dataset|tokens] [SECONDS] [extra libFuzzer flags]
#
# checkpoint: the safetensors reader (checkpoint/*.c), corpus fuzz/corpus/
# idx:        the IDX reader, plain and gzip (data/idx.c), corpus fuzz/corpus_idx/
# rdb:        the R lazy-load database reader (data/rdb.c), corpus fuzz/corpus_rdb/
# dataset:    the trainers' dataset path (data/dataset.c: Fashion-MNIST's
#             folder, the shape check, batches into feeds of the model's
#             size), corpus fuzz/corpus_dataset/
# tokens:     llm.c's token shards (data/tokens.c), corpus fuzz/corpus_tokens/
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-checkpoint}"
seconds="${2:-120}"
shift $(($# < 2 ? $# : 2))
common=(graph/alloc.c graph/error.c graph/dtype.c graph/file.c)
case "$target" in
checkpoint)
    srcs=(fuzz/checkpoint_fuzz.c checkpoint/json.c checkpoint/safetensors.c)
    corpus=fuzz/corpus
    flags=(-max_len=4096 -dict=fuzz/safetensors.dict)
    ;;
idx)
    srcs=(fuzz/idx_fuzz.c data/idx.c)
    corpus=fuzz/corpus_idx
    flags=(-max_len=2048 -rss_limit_mb=4096)
    ;;
rdb)
    srcs=(fuzz/rdb_fuzz.c data/rdb.c)
    corpus=fuzz/corpus_rdb
    flags=(-max_len=4096 -rss_limit_mb=4096)
    ;;
dataset)
    srcs=(fuzz/dataset_fuzz.c data/dataset.c data/idx.c)
    corpus=fuzz/corpus_dataset
    flags=(-max_len=8192 -rss_limit_mb=4096)
    ;;
tokens)
    srcs=(fuzz/tokens_fuzz.c data/tokens.c)
    corpus=fuzz/corpus_tokens
    flags=(-max_len=4096)
    ;;
*)
    echo "usage: fuzz/run.sh [checkpoint|idx|rdb|dataset|tokens] [SECONDS] [libFuzzer flags]" >&2
    exit 2
    ;;
esac
out="${FUZZ_OUT:-/tmp/ge2_fuzz}/$target"
mkdir -p "$out/corpus" fuzz/artifacts
clang -std=c11 -g -O1 -D_GNU_SOURCE -DGE2_NO_JEMALLOC -I. -Iinclude \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    "${srcs[@]}" "${common[@]}" -lz -lm -o "$out/fuzz"
"$out/fuzz" -max_total_time="$seconds" -artifact_prefix=fuzz/artifacts/ "${flags[@]}" "$@" "$out/corpus" "$corpus"
