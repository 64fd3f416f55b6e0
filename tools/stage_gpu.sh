#!/usr/bin/env bash
# Builds everything that needs a GPU and copies it, self-contained, into
# gpu_stage/ (git-ignored) for a machine that has a GPU but no Bazel:
#
#   gpu_stage/bin/              test binaries tagged "gpu", //examples:smoke,
#                               the trainers and //bench cc_binaries (if they
#                               exist), plus the shared libraries they need:
#                               ge2's own, one per Bazel library (the staged
#                               build links dynamically, so the CUDA kernels
#                               are staged once, not once per binary), and the
#                               non-system ones: the small reference BLAS as
#                               libblas.so.3 (not OpenBLAS: 36 MB) ... Binaries
#                               find them through their $ORIGIN rpath.
#   gpu_stage/tests.txt         the GPU test binaries run.sh runs
#   gpu_stage/data/fashion-mnist/   the dataset (.gz IDX files)
#   gpu_stage/data/austen.txt   the GPT trainer's corpus (tools/setup.sh's), when present, and
#                               its SentencePiece token shards and .vocab (austen_{train,val}_000000.bin)
#   gpu_stage/bench/            bench/ scripts (*.py, *.sh), if any
#   gpu_stage/run.sh            runs every GPU test, prints a tally
#
# CUDA itself (cudart, cuBLAS, cuBLASLt, the driver) is not copied: the device
# machine has the toolkit; run.sh puts its lib64 on LD_LIBRARY_PATH.
#
# Usage: tools/stage_gpu.sh [extra bazel build flags]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stage="$root/gpu_stage"
# The device tool carries at most 64 MiB with the source tree (~2 MiB); the
# dataset is most of it. ge2's libraries are staged once as shared objects,
# so a binary costs its own code and the static jemalloc.
limit_mib=62
data_src="${GE2_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}"

say() { printf 'stage_gpu: %s\n' "$*"; }
die() { printf 'stage_gpu: error: %s\n' "$*" >&2; exit 1; }

# ------------------------------------------------------------------ targets
# Tests tagged exactly "gpu" (the tags list prints as "[a, gpu, b]").
# --keep_going: a broken package elsewhere must not hide the GPU tests (exit 3
# means "partial result"; its errors are still printed).
query() {
    local out rc=0
    out="$(bazel query --keep_going --noshow_progress "$1")" || rc=$?
    [ "$rc" -eq 0 ] || [ "$rc" -eq 3 ] || die "bazel query '$1' failed (exit $rc)"
    printf '%s\n' "$out" | sed '/^$/d' | sort
}
mapfile -t gpu_tests < <(query 'attr(tags, "[\[ ]gpu[,\]]", tests(//...))')
[ "${#gpu_tests[@]}" -gt 0 ] || die "no test tagged gpu under //..."

# Optional binaries: present once their modules exist.
extra=()
for t in //examples:smoke //examples:train_mlp //examples:train_cnn //examples:train_gpt //examples:train_custom_op; do
    if bazel query --noshow_progress "$t" >/dev/null 2>&1; then
        extra+=("$t")
    fi
done
if [ -f bench/BUILD ] || [ -f bench/BUILD.bazel ]; then
    mapfile -t bench_bins < <(query 'kind("cc_binary rule", //bench/...)')
    # step_overhead (host time with no-op kernels) is a diagnostic, 2 MiB of
    # the carry: staged only when GE2_STAGE_STEP_OVERHEAD=1
    for t in "${bench_bins[@]}"; do
        [ "$t" != //bench:step_overhead ] || [ "${GE2_STAGE_STEP_OVERHEAD:-0}" = 1 ] || continue
        extra+=("$t")
    done
fi

# The staged build: sm_90 SASS without PTX (the GPU machine is sm_90, and
# PTX would be a large share of the fatbin), every Bazel library a shared object of its own
# (--dynamic_mode=fully: one copy of ge2 for all binaries), in an output base
# of its own, so that switching between it and the everyday build rebuilds
# nothing, and without convenience symlinks (they would point bazel-bin at it).
stage_base="${GE2_STAGE_OUTPUT_BASE:-$HOME/.cache/ge2-stage-bazel}"
stage_bazel=(bazel --output_base="$stage_base")
stage_flags=(--define=ge2_cuda_ptx=0 --dynamic_mode=fully --symlink_prefix=/)
say "building ${#gpu_tests[@]} GPU test(s) and ${#extra[@]} binary(ies) (output base $stage_base)"
"${stage_bazel[@]}" build --noshow_progress "${stage_flags[@]}" "$@" "${gpu_tests[@]}" "${extra[@]}"
bin_dir="$("${stage_bazel[@]}" info "${stage_flags[@]}" "$@" bazel-bin 2>/dev/null)"

# -------------------------------------------------------------------- copy
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/data/fashion-mnist"

label_path() { # //pkg/sub:name -> pkg/sub/name
    local l="${1#//}"
    printf '%s/%s' "${l%%:*}" "${l##*:}"
}

copy_bin() { # label
    local src
    src="$bin_dir/$(label_path "$1")"
    local name="${1##*:}"
    [ -f "$src" ] || die "$1 built no file at $src"
    [ ! -e "$stage/bin/$name" ] || die "two staged binaries are named $name"
    # stripped: the symbol tables are ~180 KB a binary, and the carry limit
    # counts every byte (host backtraces lose function names; the device
    # code, which compute-sanitizer reports on, keeps its own)
    install -s -m 755 "$src" "$stage/bin/$name"
}

: >"$stage/tests.txt"
for t in "${gpu_tests[@]}"; do
    copy_bin "$t"
    echo "${t##*:}" >>"$stage/tests.txt"
done
for t in "${extra[@]}"; do
    copy_bin "$t"
done

# ------------------------------------------------------- shared libraries
# glibc's own libraries exist on every Linux; CUDA's come from the device's
# toolkit/driver. Everything else a binary needs is copied beside it.
is_provided() {
    case "$1" in
    libc.so.* | libm.so.* | libdl.so.* | librt.so.* | libpthread.so.* | \
        ld-linux*.so.* | libresolv.so.* | linux-vdso.so.*) return 0 ;;
    libcuda.so.* | libcudart.so.* | libcublas.so.* | libcublasLt.so.* | \
        libnvidia-*.so* | libnvrtc*.so* | libnvJitLink.so.*) return 0 ;;
    # The GPU machine (Ubuntu 24.04, GCC 14 runtime) has newer copies of the
    # compiler runtime than Debian bookworm's; staging ours would only cost space.
    libstdc++.so.* | libgcc_s.so.*) return 0 ;;
    # Open MPI 4.1 is in the GPU machine's system paths, with the same ABI
    # as Debian's (libmpi.so.40); NCCL is opened at run time (dist/nccl.c).
    libmpi.so.*) return 0 ;;
    esac
    return 1
}

# The reference BLAS (libblas3), whatever Debian's alternatives say libblas.so.3 is.
ref_blas="$(readlink -f /usr/lib/x86_64-linux-gnu/blas/libblas.so.3 2>/dev/null || true)"
[ -f "$ref_blas" ] || die "reference BLAS not found (apt-get install libblas3)"

resolve() { # soname -> path on this machine
    # awk reads all of its input (no early exit): an early exit breaks the
    # pipe, ldconfig dies of SIGPIPE and pipefail turns that into exit 141.
    ldconfig -p | awk -v n="$1" '$1 == n && /x86-64/ && !found { print $NF; found = 1 }'
}

declare -A seen=()
stage_lib() { # soname
    local so="$1" path dep
    [ -z "${seen[$so]:-}" ] || return 0
    seen[$so]=1
    is_provided "$so" && return 0
    if [ -e "$bin_dir/_solib_k8/$so" ]; then
        # one of ge2's own libraries; they find each other's symbols through
        # the binary, which needs them all
        install -m 644 "$(readlink -f "$bin_dir/_solib_k8/$so")" "$stage/bin/$so"
        strip --strip-unneeded "$stage/bin/$so"
        return 0
    fi
    if [ "$so" = "libblas.so.3" ]; then
        path="$ref_blas"
    else
        path="$(resolve "$so")"
        [ -n "$path" ] || die "cannot find $so, needed by a staged binary"
    fi
    install -m 644 "$(readlink -f "$path")" "$stage/bin/$so"
    for dep in $(needed "$path"); do stage_lib "$dep"; done
}

needed() { # file -> its DT_NEEDED sonames
    readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}

for f in "$stage/bin"/*; do
    for so in $(needed "$f"); do stage_lib "$so"; done
done

# -------------------------------------------------------------- data, bench
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz \
    t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz; do
    [ -f "$data_src/$f" ] || die "missing $data_src/$f (apt-get install dataset-fashion-mnist)"
    install -m 644 "$data_src/$f" "$stage/data/fashion-mnist/$f"
done

corpus_dir="${GE2_CORPUS_DIR:-/usr/local/share/ge2}"
for f in austen.txt austen_train_000000.bin austen_val_000000.bin austen_bpe.vocab; do
    if [ -f "$corpus_dir/$f" ]; then
        install -m 644 "$corpus_dir/$f" "$stage/data/$f"
    else
        echo "stage_gpu: warning: no $corpus_dir/$f (tools/setup.sh makes it): the GPT parts of gpu_verify.sh will fail" >&2
    fi
done

shopt -s nullglob
bench_files=(bench/*.py bench/*.sh bench/*.txt)
if [ "${#bench_files[@]}" -gt 0 ]; then
    mkdir -p "$stage/bench"
    for f in "${bench_files[@]}"; do
        install -m "$([ -x "$f" ] && echo 755 || echo 644)" "$f" "$stage/bench/"
    done
fi
shopt -u nullglob

install -m 755 tools/gpu_run.sh "$stage/run.sh"

# -------------------------------------------------------------------- size
bytes="$(du -sb "$stage" | cut -f1)"
mib=$(((bytes + 1048575) / 1048576))
say "staged into gpu_stage/: $(wc -l <"$stage/tests.txt") GPU test(s), $(ls "$stage/bin" | wc -l) file(s) in bin/"
say "gpu_stage/ size: ${mib} MiB ($bytes bytes; limit ${limit_mib} MiB)"
[ "$mib" -le "$limit_mib" ] || die "gpu_stage/ is over ${limit_mib} MiB"
say "on the GPU machine: gpu_stage/run.sh"
