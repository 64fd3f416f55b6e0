#!/usr/bin/env bash
# Smoke test of the GPT trainer on the CPU, on a tiny model: the loss
# falls from ln(vocab) (a uniform guess) well below it in 150 steps, the
# output ends with the exact best-val-loss line after a sample of the
# requested length, one seed gives the same run twice, --save writes the
# nanoGPT-named checkpoint, --precision bf16 trains on its own path, and bad
# flags or a missing corpus are one line on stderr with exit 2 / 1.
set -uo pipefail
bin="$1"
# shellcheck source=examples/trainer_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/trainer_test_lib.sh"

tiny=(--device cpu --n-layer 1 --n-head 2 --n-embd 32 --block-size 32 --batch 8 --max-iters 150 --warmup 10
    --lr 3e-3 --eval-interval 75 --eval-iters 4 --dropout 0.1 --sample 64)
"$bin" "${tiny[@]}" --save "$tmp/gpt.safetensors" >"$tmp/run1" 2>"$tmp/err1"
rc=$?
check "tiny run exits 0 ($(cat "$tmp/err1"))" "$rc"
tail -n 1 "$tmp/run1" | grep -Eq '^best val loss: [0-9]+\.[0-9]{4}$'
rc=$?
check "last line: $(tail -n 1 "$tmp/run1")" "$rc"
first=$(sed -n 's/^step 0: train loss [0-9.]*, val loss \([0-9.]*\)$/\1/p' "$tmp/run1")
best=$(sed -n 's/^best val loss: \([0-9.]*\)$/\1/p' "$tmp/run1")
awk -v a="${first:-0}" -v b="${best:-9}" 'BEGIN { exit !(a > 4.3 && a < 4.6 && b < 3.3) }'
rc=$?
check "val loss falls from ln(vocab) (${first:-?}) below 3.3 (${best:-?})" "$rc"
# the planned device memory: the parts add up to the total, parameters and
# AdamW's two state slots among them, no bf16 copies in fp32 (bench/gpt_speed.py
# reads the total)
sed -n 's/^device memory: \([0-9.]*\) MiB planned for the train step (parameters \([0-9.]*\), their bf16 copies \([0-9.]*\), gradients \([0-9.]*\), optimizer state \([0-9.]*\), arena \([0-9.]*\), inputs \([0-9.]*\), workspace \([0-9.]*\))$/\1 \2 \3 \4 \5 \6 \7 \8/p' \
    "$tmp/run1" | awk 'NF == 8 { sum = $2 + $3 + $4 + $5 + $6 + $7 + $8; ok = $2 > 0 && $3 == 0 && $5 >= 1.9 * $2 && sum - $1 < 0.04 && $1 - sum < 0.04 } END { exit !ok }'
rc=$?
check "the planned device memory line: $(grep '^device memory' "$tmp/run1")" "$rc"
[ "$(sed -n '/^sample (64 characters):$/,/^best val loss/p' "$tmp/run1" | sed '1d;$d' | wc -c)" -ge 64 ]
rc=$?
check "a sample of 64 characters follows its header" "$rc"
grep -q 'transformer.h.0.attn.c_attn.weight' "$tmp/gpt.safetensors" &&
    grep -q 'transformer.wte.weight' "$tmp/gpt.safetensors" && grep -q 'transformer.ln_f.bias' "$tmp/gpt.safetensors" &&
    grep -q 'lm_head.weight' "$tmp/gpt.safetensors"
rc=$?
check "--save writes nanoGPT's parameter names" "$rc"

"$bin" "${tiny[@]}" >"$tmp/run2" 2>&1
cmp -s <(grep -v 'ms/step\|^generation: ' "$tmp/run1") <(grep -v 'ms/step\|^generation: ' "$tmp/run2")
rc=$?
check "one seed, one run (losses and sample)" "$rc"

# --init from the saved checkpoint: the first evaluation sees the trained
# model (below 3.5), not a fresh one (ln 82 = 4.41)
"$bin" "${tiny[@]}" --init "$tmp/gpt.safetensors" --max-iters 1 >"$tmp/run3" 2>&1
rc=$?
check "--init from a checkpoint of the same model ($(tail -n 1 "$tmp/run3"))" "$rc"
first=$(sed -n 's/^step 0: train loss [0-9.]*, val loss \([0-9.]*\)$/\1/p' "$tmp/run3")
awk -v a="${first:-9}" 'BEGIN { exit !(a < 3.5) }'
rc=$?
check "--init starts from the trained model (val loss ${first:-?})" "$rc"

# --precision bf16 on the CPU: the GEMMs' operands rounded to bf16; it trains
# as fp32 does, on another path (its losses differ from run1's)
"$bin" "${tiny[@]}" --precision bf16 >"$tmp/bf16" 2>"$tmp/bf16err"
rc=$?
check "--precision bf16 runs ($(cat "$tmp/bf16err"))" "$rc"
bf=$(sed -n 's/^best val loss: \([0-9.]*\)$/\1/p' "$tmp/bf16")
# "not fp32": some evaluation's losses differ (the best alone, to four
# decimals, can agree by chance)
evals() { grep '^step [0-9]*: train loss' "$1"; }
awk -v b="${bf:-9}" 'BEGIN { exit !(b < 3.3) }' && ! cmp -s <(evals "$tmp/bf16") <(evals "$tmp/run1")
rc=$?
check "bf16 trains (best val ${bf:-?}, fp32 ${best:-?}) and its evaluations are not fp32's" "$rc"

# --precision fp16: fp16 operands under dynamic loss scaling; it trains too,
# on a path of its own, and its progress lines report the scale
"$bin" "${tiny[@]}" --precision fp16 >"$tmp/fp16" 2>"$tmp/fp16err"
rc=$?
check "--precision fp16 runs ($(cat "$tmp/fp16err"))" "$rc"
hf=$(sed -n 's/^best val loss: \([0-9.]*\)$/\1/p' "$tmp/fp16")
awk -v b="${hf:-9}" 'BEGIN { exit !(b < 3.3) }' && ! cmp -s <(evals "$tmp/fp16") <(evals "$tmp/bf16") &&
    grep -q '^iter [0-9]*: .*, loss scale [0-9.e+]* ([0-9]* skipped)$' "$tmp/fp16"
rc=$?
check "fp16 trains (best val ${hf:-?}) on its own path and reports its loss scale" "$rc"

# 40 steps straight == 20 steps, save, resume, 20 steps (dropout on: its
# stream resumes too): the same checkpoint, byte for byte
short=("${tiny[@]}" --max-iters 40 --eval-interval 20 --sample 0)
"$bin" "${short[@]}" --save "$tmp/straight.safetensors" >"$tmp/s1" 2>&1 &&
    "$bin" "${short[@]}" --steps 20 --save "$tmp/part.safetensors" >"$tmp/s2" 2>&1 &&
    "$bin" "${short[@]}" --resume "$tmp/part.safetensors" --save "$tmp/resumed.safetensors" >"$tmp/s3" 2>&1
rc=$?
check "save/resume runs ($(tail -n 1 "$tmp/s3"))" "$rc"
cmp -s "$tmp/straight.safetensors" "$tmp/resumed.safetensors"
rc=$?
check "the resumed checkpoint is byte-identical to the straight one" "$rc"

# the model's settings travel with the checkpoint: --resume without model
# flags rebuilds the same model (byte-identical result); a flag that
# contradicts the file, or a corpus of another vocabulary, is refused
noflags=(--device cpu --batch 8 --max-iters 40 --warmup 10 --lr 3e-3 --eval-interval 20 --eval-iters 4 --dropout 0.1 --sample 0)
"$bin" "${noflags[@]}" --resume "$tmp/part.safetensors" --save "$tmp/resumed_noflags.safetensors" >"$tmp/nf.out" 2>&1
rc=$?
[ "$rc" = 0 ] && cmp -s "$tmp/resumed.safetensors" "$tmp/resumed_noflags.safetensors"
rc=$?
check "--resume without model flags rebuilds the saved model ($(head -n 1 "$tmp/nf.out" | head -c 120))" "$rc"
expect_error "a flag that contradicts the checkpoint" 2 "${noflags[@]}" --n-layer 3 --resume "$tmp/part.safetensors"
grep -q -- "--n-layer is 3, but .*part.safetensors was saved with 1" "$tmp/err"
rc=$?
check "the contradiction names both values ($(cat "$tmp/err"))" "$rc"

# a checkpoint's block size is checked against the corpus like a flag's:
# its 512 does not fit a 309-character validation split (the default 256
# would, so the check must come after the file's settings)
python3 - "${GE2_CORPUS_DIR:-/usr/local/share/ge2}/austen.txt" "$tmp/short.txt" <<'PY'
import sys
text = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(bytes(sorted(set(text))) + text[:3000])  # the same vocabulary, 3082 bytes
PY
"$bin" --device cpu --n-layer 1 --n-head 2 --n-embd 16 --block-size 512 --batch 1 --max-iters 1 --steps 1 \
    --eval-interval 100 --eval-iters 1 --sample 0 --save "$tmp/block512.safetensors" >/dev/null 2>&1
expect_error "a checkpoint's block past the corpus" 1 --device cpu --batch 1 --data "$tmp/short.txt" \
    --resume "$tmp/block512.safetensors"
grep -q 'a split is shorter than a block of 512' "$tmp/err"
rc=$?
check "the checkpoint's block is checked against the corpus ($(cat "$tmp/err"))" "$rc"

expect_error "unknown flag" 2 --bogus
expect_error "bad number" 2 --n-layer x
expect_error "heads must divide the width" 2 --n-embd 30 --n-head 4
expect_error "missing corpus" 1 --device cpu --data "$tmp/none.txt"
expect_error "fp8 is not a precision" 2 --precision fp8
expect_error "--init with --resume" 2 --init a --resume b
expect_error "a block size past the cap" 2 --block-size 4600
grep -q -- "--block-size: bad value '4600'; expected an integer in \[1, 4096\]" "$tmp/err"
rc=$?
check "the flag and its range are named ($(cat "$tmp/err"))" "$rc"
expect_error "a value missing" 2 --lr
grep -q -- '--lr needs a value' "$tmp/err"
rc=$?
check "the flag without its value is named ($(cat "$tmp/err"))" "$rc"
grep -q -- '--block-size N.*at most 4096' <("$bin" --help)
rc=$?
check "--help gives the block size's cap" "$rc"
: >"$tmp/empty.txt"
expect_error "an empty corpus" 1 --device cpu --data "$tmp/empty.txt"
grep -q 'is empty' "$tmp/err"
rc=$?
check "an empty corpus is said so ($(cat "$tmp/err"))" "$rc"
expect_error "a folder as the corpus" 1 --device cpu --data "$tmp"
grep -q 'is a folder' "$tmp/err"
rc=$?
check "a folder is named as one ($(cat "$tmp/err"))" "$rc"
head -c 20000 "$bin" >"$tmp/binary.txt"
"$bin" "${tiny[@]}" --data "$tmp/binary.txt" --max-iters 2 --eval-interval 2 --eval-iters 1 --sample 0 \
    >/dev/null 2>"$tmp/err"
grep -q 'warning: .*binary.txt does not look like text' "$tmp/err"
rc=$?
check "a binary corpus is warned about ($(head -c 300 "$tmp/err"))" "$rc"

# --log-interval and --log-file: training rows and each evaluation's
"$bin" "${tiny[@]}" --max-iters 20 --eval-interval 10 --eval-iters 2 --sample 0 --log-interval 5 \
    --log-file "$tmp/gpt.csv" >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '^iter [0-9]*: loss' "$tmp/out")" = 4 ] &&
    [ "$(grep -c ',train,' "$tmp/gpt.csv")" = 4 ] && [ "$(grep -c ',val,' "$tmp/gpt.csv")" = 3 ] &&
    grep -q '^step,kind,loss,accuracy,lr,tokens_per_s$' "$tmp/gpt.csv"
rc=$?
check "--log-interval 5 and --log-file over 20 steps ($(tr '\n' ' ' <"$tmp/gpt.csv" | head -c 300))" "$rc"

# token shards in llm.c's format: generated ones (ids below 50), then the
# SentencePiece Austen shards tools/setup.sh makes
python3 - "$tmp" <<'PY'
import random, struct, sys
random.seed(1)
def shard(path, ids):
    open(path, "wb").write(struct.pack("<3i", 20240520, 1, len(ids)) + bytes(1012) + struct.pack(f"<{len(ids)}H", *ids))
shard(f"{sys.argv[1]}/gen_train_000000.bin", [random.randrange(50) for _ in range(3000)])
shard(f"{sys.argv[1]}/gen_train_000001.bin", [random.randrange(50) for _ in range(2000)])
shard(f"{sys.argv[1]}/gen_val_000000.bin", [random.randrange(50) for _ in range(1000)])
shard(f"{sys.argv[1]}/bad_val_000000.bin", [1, 2, 3] * 100 + [50] + [4] * 100)
PY
shards=(--device cpu --n-layer 1 --n-head 2 --n-embd 32 --block-size 16 --batch 4 --max-iters 10 --eval-interval 5
    --eval-iters 2 --sample 8)
"$bin" "${shards[@]}" --train-tokens "$tmp/gen_train_*.bin" --val-tokens "$tmp/gen_val_*.bin" --vocab-size 50 \
    >"$tmp/gen.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q 'vocab 50 (padded to 128), .*: 5000 train / 1000 val tokens' "$tmp/gen.out" &&
    grep -q '^sample (8 tokens):' "$tmp/gen.out" && grep -q '^best val loss: ' "$tmp/gen.out"
rc=$?
check "a tiny GPT trains on two generated shards ($(grep -m1 'vocab 50' "$tmp/gen.out" | head -c 200))" "$rc"

# the padded vocabulary: 128 rows in the model, its 50 real ones in the
# checkpoint (the parameter and AdamW's state), and a resume that takes the
# vocabulary and the model from the file
shape_of() {
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
print(json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])[sys.argv[2]]["shape"])
PY
}
"$bin" "${shards[@]}" --sample 0 --train-tokens "$tmp/gen_train_*.bin" --val-tokens "$tmp/gen_val_*.bin" \
    --vocab-size 50 --max-iters 4 --save "$tmp/padded.safetensors" >/dev/null 2>&1 &&
    [ "$(shape_of "$tmp/padded.safetensors" transformer.wte.weight)" = "[50, 32]" ] &&
    [ "$(shape_of "$tmp/padded.safetensors" optim.transformer.wte.weight.exp_avg)" = "[50, 32]" ] &&
    "$bin" --device cpu --batch 4 --max-iters 6 --eval-interval 5 --eval-iters 2 --sample 4 \
        --train-tokens "$tmp/gen_train_*.bin" --val-tokens "$tmp/gen_val_*.bin" --resume "$tmp/padded.safetensors" \
        >"$tmp/padded.out" 2>&1 && grep -q '1 layers, 2 heads, 32 embd, block 16, vocab 50 (padded to 128)' "$tmp/padded.out"
rc=$?
check "a padded vocabulary saves its real rows and resumes without flags ($(head -c 300 "$tmp/padded.out"))" "$rc"
# the run's settings travel with the checkpoint: a --resume that contradicts
# one (the precision, the dropout) is refused naming both values
resume=(--device cpu --batch 4 --max-iters 6 --eval-interval 5 --eval-iters 2 --sample 0
    --train-tokens "$tmp/gen_train_*.bin" --val-tokens "$tmp/gen_val_*.bin" --resume "$tmp/padded.safetensors")
expect_error "--resume in another precision" 2 "${resume[@]}" --precision bf16
grep -q -- '--precision is bf16, but .*padded.safetensors was saved with fp32' "$tmp/err"
rc=$?
check "the precision's refusal names both ($(cat "$tmp/err"))" "$rc"
expect_error "--resume with another dropout" 2 "${resume[@]}" --dropout 0.1
grep -q -- '--dropout is 0.1, but .*padded.safetensors was saved with 0.2' "$tmp/err"
rc=$?
check "the dropout's refusal names both ($(cat "$tmp/err"))" "$rc"

# generation: the key-value caches give the tokens the whole window gives
# (the prompt and the sample within a block), and the prompt comes first
gen=(--device cpu --generate-only --init "$tmp/gpt.safetensors" --n-layer 1 --n-head 2 --n-embd 32 --block-size 32
    --batch 8 --sample 20 --prompt "It is a truth" --top-k 10 --temperature 0.8)
"$bin" "${gen[@]}" >"$tmp/cached.out" 2>&1 && "$bin" "${gen[@]}" --no-kv-cache >"$tmp/window.out" 2>&1 &&
    grep -q '^generation: 20 tokens in .* tokens/s (key-value caches)$' "$tmp/cached.out" &&
    cmp -s <(sed -n '/^sample/,$p' "$tmp/cached.out") <(sed -n '/^sample/,$p' "$tmp/window.out") &&
    [ "$(sed -n '/^sample (20 characters):$/{n;p}' "$tmp/cached.out" | head -c 13)" = "It is a truth" ]
rc=$?
check "cached generation equals the whole window's ($(tail -n 2 "$tmp/cached.out" | tr '\n' ' ') / $(tail -n 1 "$tmp/window.out"))" "$rc"
expect_error "a prompt byte the corpus lacks" 1 "${gen[@]}" --prompt "caf$(printf '\xc3\xa9')"
expect_error "--generate-only without a model" 2 --generate-only
expect_error "--model on the character corpus" 2 --model gpt2

# transformers' GPT2LMHeadModel layout: --save-hf writes the Conv1D weights
# [in, out] (the transpose of the nanoGPT checkpoint's), no lm_head.weight,
# and a config.json; --init reads the folder back
"$bin" "${tiny[@]}" --init "$tmp/gpt.safetensors" --max-iters 1 --sample 0 --save "$tmp/nano.safetensors" \
    --save-hf "$tmp/hf" >/dev/null 2>&1 &&
    python3 - "$tmp/nano.safetensors" "$tmp/hf/model.safetensors" "$tmp/hf/config.json" <<'PY'
import json, struct, sys
def read(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    def tensor(name):
        e = h[name]
        lo, hi = e["data_offsets"]
        return e["shape"], struct.unpack(f"<{(hi - lo) // 4}f", b[8 + n + lo:8 + n + hi])
    return h, tensor
nano_h, nano = read(sys.argv[1])
hf_h, hf = read(sys.argv[2])
cfg = json.load(open(sys.argv[3]))
assert "lm_head.weight" not in hf_h and hf_h["__metadata__"]["format"] == "pt"
assert cfg["n_embd"] == 32 and cfg["n_layer"] == 1 and cfg["n_head"] == 2 and cfg["activation_function"] == "gelu"
for name in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"):
    (o, i), w = nano(f"transformer.h.0.{name}.weight")
    shape, t = hf(f"transformer.h.0.{name}.weight")
    assert shape == [i, o], (name, shape)
    assert all(t[c * o + r] == w[r * i + c] for r in range(o) for c in range(i)), name
assert hf("transformer.wte.weight") == nano("transformer.wte.weight")
PY
rc=$?
"$bin" "${tiny[@]}" --init "$tmp/hf" --max-iters 1 --sample 0 >"$tmp/hf.out" 2>&1 &&
    "$bin" "${tiny[@]}" --init "$tmp/nano.safetensors" --max-iters 1 --sample 0 >"$tmp/nano.out" 2>&1 &&
    [ "$(grep '^step 0:' "$tmp/hf.out")" = "$(grep '^step 0:' "$tmp/nano.out")" ]
rc2=$?
check "--save-hf writes transformers' layout, --init reads it (rc $rc, $rc2: $(grep '^step 0:' "$tmp/hf.out"))" "$((rc | rc2))"

# --model gpt2: GPT-2 124M, llm.c's 124,475,904 parameters (the tied
# embedding once, padded to 50304 rows); a few CPU steps at a short block
# and a resume that needs no model flags
python3 - "$tmp" <<'PY'
import random, struct, sys
random.seed(2)
for split, n in (("train", 3000), ("val", 2000)):
    ids = [random.randrange(50257) for _ in range(n)]
    open(f"{sys.argv[1]}/gpt2_{split}_000000.bin", "wb").write(
        struct.pack("<3i", 20240520, 1, n) + bytes(1012) + struct.pack(f"<{n}H", *ids))
PY
g2=(--device cpu --train-tokens "$tmp/gpt2_train_*.bin" --val-tokens "$tmp/gpt2_val_*.bin" --batch 1 --eval-iters 1)
"$bin" "${g2[@]}" --model gpt2 --steps 0 --sample 0 >"$tmp/g2.out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q '12 layers, 12 heads, 768 embd, block 1024, vocab 50257 (padded to 50304), GELU tanh, 124475904 parameters' "$tmp/g2.out"
rc=$?
check "--model gpt2 builds GPT-2 124M ($(head -n 1 "$tmp/g2.out" | head -c 240))" "$rc"
"$bin" "${g2[@]}" --model gpt2 --block-size 64 --max-iters 3 --steps 2 --eval-interval 100 --sample 0 \
    --save "$tmp/g2.safetensors" >"$tmp/g2a.out" 2>&1 &&
    "$bin" "${g2[@]}" --resume "$tmp/g2.safetensors" --max-iters 3 --eval-interval 100 --sample 2 >"$tmp/g2b.out" 2>&1 &&
    grep -q '12 layers, 12 heads, 768 embd, block 64, vocab 50257 (padded to 50304), GELU tanh' "$tmp/g2b.out" &&
    grep -q '^step 3: train loss' "$tmp/g2b.out"
rc=$?
check "--model gpt2 trains on the CPU and resumes without flags ($(tail -n 3 "$tmp/g2a.out" "$tmp/g2b.out" | tr '\n' ' ' | head -c 400))" "$rc"
expect_error "--model whose sizes contradict the checkpoint" 2 "${g2[@]}" --model gpt2 --resume "$tmp/g2.safetensors" \
    --max-iters 3
grep -q -- '--model gpt2 sets --block-size 1024, but .*g2.safetensors was saved with 64 (give --block-size 64' "$tmp/err"
rc=$?
check "a preset's contradiction names --model, not a flag never typed ($(cat "$tmp/err"))" "$rc"
rm -f "$tmp/g2.safetensors"
expect_error "an id past --vocab-size" 1 "${shards[@]}" --train-tokens "$tmp/gen_train_*.bin" \
    --val-tokens "$tmp/bad_val_*.bin" --vocab-size 50
grep -q 'bad_val_000000.bin: token 300 is 50, outside the vocabulary of 50' "$tmp/err"
rc=$?
check "an id past the vocabulary names the shard and the position ($(cat "$tmp/err"))" "$rc"
expect_error "shards without --vocab-size" 2 --train-tokens "$tmp/gen_train_*.bin" --val-tokens "$tmp/gen_val_*.bin"
expect_error "a pattern matching nothing" 1 "${shards[@]}" --train-tokens "$tmp/none_*.bin" \
    --val-tokens "$tmp/gen_val_*.bin" --vocab-size 50
corpus_dir="${GE2_CORPUS_DIR:-/usr/local/share/ge2}"
if [ -s "$corpus_dir/austen_train_000000.bin" ]; then
    "$bin" "${shards[@]}" --train-tokens "$corpus_dir/austen_train_*.bin" --val-tokens "$corpus_dir/austen_val_*.bin" \
        --vocab-size 8192 --tokenizer "$corpus_dir/austen_bpe.vocab" >"$tmp/bpe.out" 2>&1
    rc=$?
    [ "$rc" = 0 ] && grep -Eq 'vocab 8192, .*: [1-9][0-9]* train / [1-9][0-9]* val tokens' "$tmp/bpe.out" &&
        grep -A1 '^sample (8 tokens):' "$tmp/bpe.out" | tail -n 1 | grep -q '[a-z]'
    rc=$?
    check "a tiny GPT trains on the SentencePiece Austen shards and prints text ($(grep -m1 'vocab 8192' "$tmp/bpe.out" | head -c 200))" "$rc"
else
    check "tools/setup.sh made the Austen token shards in $corpus_dir" 1
fi

# --gelu erf builds nanoGPT's exact GELU: the banner says so, and it lands
# elsewhere than tanh's approximation after the same steps
g=("${tiny[@]}" --max-iters 6 --eval-interval 100 --sample 0 --dropout 0)
"$bin" "${g[@]}" --gelu erf --save "$tmp/erf.safetensors" >"$tmp/erf.out" 2>&1 &&
    "$bin" "${g[@]}" --gelu tanh --save "$tmp/tanh.safetensors" >/dev/null 2>&1
rc=$?
# (the files' metadata differ anyway: compare the tensors' bytes)
tensors_differ() {
    python3 - "$1" "$2" <<'PY'
import struct, sys
def data(p):
    b = open(p, "rb").read()
    return b[8 + struct.unpack("<Q", b[:8])[0]:]
sys.exit(0 if data(sys.argv[1]) != data(sys.argv[2]) else 1)
PY
}
[ "$rc" = 0 ] && grep -q ', GELU erf, ' "$tmp/erf.out" && tensors_differ "$tmp/erf.safetensors" "$tmp/tanh.safetensors"
rc=$?
check "--gelu erf trains another model than tanh ($(head -n 1 "$tmp/erf.out" | head -c 160))" "$rc"
expect_error "--gelu of another kind" 2 --gelu relu

# a diverging run stops at its first non-finite loss, without saving
expect_error "a NaN loss stops the run" 1 "${tiny[@]}" --max-iters 30 --eval-interval 100 --sample 0 --lr 10 \
    --warmup 0 --grad-clip 0 --weight-decay 10 --save "$tmp/nan.safetensors"
grep -Eq 'step [0-9]+: the training loss is (NaN|infinite)' "$tmp/err" && [ ! -e "$tmp/nan.safetensors" ]
rc=$?
check "the GPT's NaN stop names the step and saves nothing ($(cat "$tmp/err"))" "$rc"

# --grad-accum 2 at --batch 4 reads, unshuffled, the rows --batch 8 reads
# and takes their mean gradient: the same model after 10 steps, to fp32's
# summation order, which Adam's state magnifies where a gradient is tiny
# (1.1e-4 of a tensor's largest at worst, 1.2e-6 typically; --batch 4 alone
# lands 0.96 away)
acc=(--device cpu --n-layer 1 --n-head 2 --n-embd 32 --block-size 32 --max-iters 10 --warmup 2 --lr 3e-3
    --eval-interval 100 --eval-iters 1 --dropout 0 --sample 0 --no-shuffle)
"$bin" "${acc[@]}" --batch 8 --save "$tmp/b8.safetensors" >"$tmp/b8.out" 2>&1 &&
    "$bin" "${acc[@]}" --batch 4 --grad-accum 2 --save "$tmp/b4x2.safetensors" >"$tmp/b4x2.out" 2>&1 &&
    "$bin" "${acc[@]}" --batch 4 --save "$tmp/b4.safetensors" >/dev/null 2>&1
rc=$?
close_models() { # close_models A B: every f32 tensor of A within 1e-3 (relative to its largest) of B's own
    python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head, data = json.loads(b[8:8 + n]), b[8 + n:]
    return {k: struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f",
                             data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in head.items() if k != "__metadata__" and v["dtype"] == "F32"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
worst = max(max(abs(x - y) for x, y in zip(a[k], b[k])) / max(1e-12, max(abs(x) for x in a[k])) for k in a)
print(f"worst relative difference {worst:.2e}")
sys.exit(0 if a.keys() <= b.keys() and worst < 1e-3 else 1)  # (accumulation keeps a slot more)
PY
}
[ "$rc" = 0 ] && grep -q 'x 2 micro-batches a step' "$tmp/b4x2.out" && close_models "$tmp/b8.safetensors" "$tmp/b4x2.safetensors" >"$tmp/acc.txt" &&
    ! close_models "$tmp/b8.safetensors" "$tmp/b4.safetensors" >/dev/null
rc=$?
check "--grad-accum 2 at --batch 4 trains --batch 8's model ($(cat "$tmp/acc.txt"); $(grep -m1 '^iter' "$tmp/b4x2.out"))" "$rc"
expect_error "--grad-accum 0 is refused" 2 --grad-accum 0

# the accumulation travels with the checkpoint: 5 steps, save, resume
# without the flag, 5 steps == 10 straight steps, byte for byte; another N
# is refused naming both
"$bin" "${acc[@]}" --batch 4 --grad-accum 2 --steps 5 --save "$tmp/acc_part.safetensors" >/dev/null 2>&1 &&
    "$bin" "${acc[@]}" --batch 4 --resume "$tmp/acc_part.safetensors" --save "$tmp/acc_resumed.safetensors" >/dev/null 2>&1 &&
    cmp -s "$tmp/b4x2.safetensors" "$tmp/acc_resumed.safetensors"
rc=$?
check "--resume continues the checkpoint's --grad-accum" "$rc"
expect_error "--resume with another --grad-accum is refused" 2 "${acc[@]}" --batch 4 --grad-accum 3 \
    --resume "$tmp/acc_part.safetensors"
grep -q -- '--grad-accum is 3, but .* was saved with 2' "$tmp/err"
rc=$?
check "the refusal names both accumulations ($(cat "$tmp/err"))" "$rc"

trainer_test_summary
