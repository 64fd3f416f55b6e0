#!/usr/bin/env bash
# Installs what building and testing ge2 needs on Debian bookworm, and makes
# the GPT trainer's text corpus and its BPE token shards. Idempotent: packages already installed are
# skipped, the corpus is made once, and when nothing is missing it does not
# touch apt at all (so it also works offline). Run it as yourself or as
# root: what needs root (apt-get install, writing the corpus under
# /usr/local/share) runs through sudo when you are not root.
#
# The CUDA 13 toolkit is not a Debian package: install it from NVIDIA first
# (default /usr/local/cuda, or set CUDA_PATH). ge2 compiles its CUDA code in
# every build, so nvcc is required even on machines without a GPU.
set -euo pipefail

packages=(
    bazel-bootstrap       # Bazel 4.2.3, the build system (offline, WORKSPACE mode)
    build-essential       # gcc/g++: C toolchain and nvcc's host compiler
    check                 # unit-test framework (linked statically)
    libsubunit-dev        # Check's static dependency
    libjemalloc-dev       # host allocator (linked statically)
    zlib1g-dev            # reading the .gz datasets
    libopenblas-dev       # <cblas.h> and a fast libblas.so.3 for the CPU backend
    libblas3              # reference BLAS: small libblas.so.3 staged for the GPU machine
    dataset-fashion-mnist # /usr/share/datasets/fashion-mnist/*.gz
    openmpi-bin           # mpirun: launches data-parallel runs (one process per GPU)
    libopenmpi-dev        # <mpi.h> and libmpi.so: bootstrap and the CPU backend's collectives
    pkg-config
    python3               # the benchmark report's test (//bench:report_test) and tools/ scripts
    python-is-python3     # `python`: Bazel 4's Python test launcher starts with `#!/usr/bin/env python`
    gnuplot-nox           # tools/plot_log: the trainers' --log-file curves as PNG
    clang                 # fuzz/run.sh: libFuzzer targets (CI runs each briefly)
    libclang-rt-14-dev    # ... and their fuzzer, ASan and UBSan runtimes
    sentencepiece         # spm_train / spm_encode: the Austen corpus as BPE token shards
)

say() { printf 'setup: %s\n' "$*"; }

# runs "$@" as root: directly in a root shell, else through sudo
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        say "needs root for: $* (no sudo here); run tools/setup.sh as root" >&2
        exit 1
    fi
}

missing=()
for p in "${packages[@]}"; do
    if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
        say "have $p"
    else
        missing+=("$p")
    fi
done

if [ "${#missing[@]}" -gt 0 ]; then
    say "installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
else
    say "all ${#packages[@]} packages present; nothing to install"
fi

# The GPT trainer's corpus: the six Jane Austen novels of Debian's
# r-cran-janeaustenr (about 4 MB, 82 distinct bytes) as plain text, one line
# of the books per line, in the package's order (Emma, Mansfield Park,
# Northanger Abbey, Persuasion, Pride and Prejudice, Sense and Sensibility).
# Installing the package would pull in R: apt-get download + dpkg -x, then
# tools/corpus_text.c decodes the package's R data file.
corpus_dir="${GE2_CORPUS_DIR:-/usr/local/share/ge2}"
corpus="$corpus_dir/austen.txt"
if [ -s "$corpus" ]; then
    say "have $corpus"
else
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    work="$(mktemp -d)"
    chmod 755 "$work" # apt-get download drops to the _apt user
    trap 'rm -rf "$work"' EXIT
    say "making $corpus from r-cran-janeaustenr"
    if ! (cd "$work" && apt-get download r-cran-janeaustenr >/dev/null 2>&1); then
        as_root apt-get update >/dev/null
        (cd "$work" && apt-get download r-cran-janeaustenr)
    fi
    dpkg -x "$work"/r-cran-janeaustenr_*.deb "$work/pkg"
    cc -std=c11 -O2 -D_GNU_SOURCE -DGE2_NO_JEMALLOC -I"$here" -I"$here/include" "$here/tools/corpus_text.c" \
        "$here/data/rdb.c" "$here/graph/alloc.c" "$here/graph/error.c" -lz -o "$work/corpus_text"
    "$work/corpus_text" "$work/pkg/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb" "$work/austen.txt"
    if mkdir -p "$corpus_dir" 2>/dev/null && [ -w "$corpus_dir" ]; then
        install -m 644 "$work/austen.txt" "$corpus"
    else
        as_root install -D -m 644 "$work/austen.txt" "$corpus"
    fi
fi

# The same corpus as token shards in llm.c's format (data/tokens.h), made by
# a real tokenizer: a byte-fallback BPE of 8192 pieces that SentencePiece
# trains on the text, the text encoded with it, and the ids written by
# tools/write_token_shards.py (90% train, 10% validation). train_gpt reads
# them with --train-tokens, --val-tokens and --vocab-size 8192.
bpe="$corpus_dir/austen_bpe"
if [ -s "$bpe.vocab" ] && [ -s "${bpe%_bpe}_train_000000.bin" ] && [ -s "${bpe%_bpe}_val_000000.bin" ]; then
    say "have $bpe.{model,vocab} and its token shards"
else
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    tok="$(mktemp -d)"
    say "training a BPE tokenizer on $corpus and writing its token shards"
    (cd "$tok" && spm_train --input="$corpus" --model_prefix=austen_bpe --vocab_size=8192 --model_type=bpe \
        --byte_fallback=true --character_coverage=1.0 --minloglevel=2 >/dev/null)
    spm_encode --model="$tok/austen_bpe.model" --output_format=id <"$corpus" |
        python3 "$here/tools/write_token_shards.py" --vocab "$tok/austen_bpe.vocab" --out "$tok/austen"
    for f in austen_bpe.model austen_bpe.vocab austen_train_000000.bin austen_val_000000.bin; do
        if mkdir -p "$corpus_dir" 2>/dev/null && [ -w "$corpus_dir" ]; then
            install -m 644 "$tok/$f" "$corpus_dir/$f"
        else
            as_root install -D -m 644 "$tok/$f" "$corpus_dir/$f"
        fi
    done
    rm -rf "$tok"
fi

cuda="${CUDA_PATH:-/usr/local/cuda}"
if [ -x "$cuda/bin/nvcc" ]; then
    say "CUDA toolkit: $cuda ($("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
else
    say "error: no nvcc at $cuda/bin/nvcc; install the CUDA 13 toolkit or set CUDA_PATH" >&2
    exit 1
fi
