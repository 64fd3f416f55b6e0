#!/usr/bin/env bash
# Smoke test of the trainer on the CPU: a short run ends with the exact
# accuracy line; bad flags, a missing data dir, corrupt or mismatched files
# are one line on stderr with exit 2 / 1; save, resume and --init work.
set -uo pipefail
bin="$1"
# shellcheck source=examples/trainer_test_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/trainer_test_lib.sh"

last_line_ok() {
    tail -n 1 "$1" | grep -Eq '^test accuracy: 0\.[0-9]{4} \([0-9]+/10000\)$'
}

"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --save "$tmp/a.safetensors" >"$tmp/run1" 2>"$tmp/err1"
rc=$?
check "short run exits 0 ($(cat "$tmp/err1"))" "$rc"
last_line_ok "$tmp/run1"
rc=$?
check "short run last line: $(tail -n 1 "$tmp/run1")" "$rc"
test -s "$tmp/a.safetensors"
rc=$?
check "--save wrote the checkpoint" "$rc"

"$bin" --device cpu --data "$data" --hidden 16 --steps 10 --resume "$tmp/a.safetensors" --plan-report \
    >"$tmp/run2" 2>"$tmp/err2"
rc=$?
check "resume exits 0 ($(cat "$tmp/err2"))" "$rc"
last_line_ok "$tmp/run2"
rc=$?
check "resumed run last line" "$rc"
grep -Eq '^plan: arena_bytes=[0-9]+ lower_bound_bytes=[0-9]+ naive_bytes=[0-9]+' "$tmp/run2"
rc=$?
check "--plan-report prints the plan line" "$rc"

"$bin" --device cpu --data "$data" --hidden 16 --steps 5 --init "$tmp/a.safetensors" >"$tmp/run3" 2>&1
rc=$?
check "--init from a checkpoint of the same model" "$rc"

# --time-launches: the train key's report gives each launch's time and the step's sum
"$bin" --device cpu --data "$data" --hidden 16 --steps 4 --time-launches >"$tmp/run4" 2>&1
rc=$?
check "--time-launches exits 0" "$rc"
grep -Eq '^node +[0-9]+ linear_grad_weight +[0-9]+\.[0-9] us +[0-9]+\.[0-9]%' "$tmp/run4"
rc=$?
check "--time-launches times each launch" "$rc"
grep -Eq '^launch time per step: [0-9]+\.[0-9] us \(the mean of 3 steps after the key.s first\)$' "$tmp/run4"
rc=$?
check "--time-launches sums the step over the timed steps" "$rc"

# --precision bf16 (CPU: the GEMMs' operands rounded): it trains, and not on fp32's path
"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --precision bf16 --save "$tmp/bf16.safetensors" \
    >"$tmp/run5" 2>"$tmp/err5"
rc=$?
check "--precision bf16 exits 0 ($(cat "$tmp/err5"))" "$rc"
! cmp -s "$tmp/a.safetensors" "$tmp/bf16.safetensors"
rc=$?
check "--precision bf16 lands elsewhere than fp32 after the same 20 steps" "$rc"
# --precision fp16: fp16 operands under dynamic loss scaling; it trains, not
# on bf16's path, and reports the scale (65536 after 20 clean steps)
"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --precision fp16 --save "$tmp/fp16.safetensors" \
    >"$tmp/run6" 2>"$tmp/err6"
rc=$?
check "--precision fp16 exits 0 ($(cat "$tmp/err6"))" "$rc"
! cmp -s "$tmp/bf16.safetensors" "$tmp/fp16.safetensors" && ! cmp -s "$tmp/a.safetensors" "$tmp/fp16.safetensors"
rc=$?
check "--precision fp16 lands elsewhere than bf16 and fp32" "$rc"
grep -q '^loss scale: 65536, 0 step(s) skipped' "$tmp/run6"
rc=$?
check "--precision fp16 reports its loss scale ($(grep 'loss scale' "$tmp/run6"))" "$rc"
"$bin" --device cpu --data "$data" --precision fp8 >/dev/null 2>"$tmp/err7"
[ $? -eq 2 ] && grep -q 'expected fp32, tf32, bf16 or fp16' "$tmp/err7"
rc=$?
check "--precision fp8 is refused ($(cat "$tmp/err7"))" "$rc"

# 30 steps straight == 20 steps, save, resume, 10 steps: the same checkpoint, byte for byte
common=(--device cpu --data "$data" --hidden 16 --optimizer sgd --momentum 0.9 --lr 0.05)
"$bin" "${common[@]}" --steps 30 --save "$tmp/straight.safetensors" >"$tmp/s1" 2>&1 &&
    "$bin" "${common[@]}" --steps 20 --save "$tmp/part.safetensors" >"$tmp/s2" 2>&1 &&
    "$bin" "${common[@]}" --steps 10 --resume "$tmp/part.safetensors" --save "$tmp/resumed.safetensors" \
        >"$tmp/s3" 2>&1
rc=$?
check "save/resume runs ($(tail -n 1 "$tmp/s3"))" "$rc"
cmp -s "$tmp/straight.safetensors" "$tmp/resumed.safetensors"
rc=$?
check "resumed checkpoint is byte-identical to the straight one" "$rc"
[ "$(tail -n 1 "$tmp/s1")" = "$(tail -n 1 "$tmp/s3")" ]
rc=$?
check "resumed run reaches the same test accuracy" "$rc"

# the training set kept by the program, run 7 steps a launch (the default: an epoch) or one step a
# call fed by the batcher (--steps-per-launch 1): the same checkpoint, byte for byte, and the same lines
"$bin" "${common[@]}" --steps 30 --steps-per-launch 7 --log-interval 10 --save "$tmp/k7.safetensors" \
    >"$tmp/k7" 2>&1 &&
    "$bin" "${common[@]}" --steps 30 --steps-per-launch 1 --log-interval 10 --save "$tmp/k1.safetensors" \
        >"$tmp/k1" 2>&1
rc=$?
check "--steps-per-launch 7 and 1 run ($(tail -n 1 "$tmp/k7"))" "$rc"
cmp -s "$tmp/straight.safetensors" "$tmp/k7.safetensors" && cmp -s "$tmp/straight.safetensors" "$tmp/k1.safetensors"
rc=$?
check "--steps-per-launch 7, 1 and an epoch train the same model" "$rc"
[ "$(sed 's/ [0-9]* examples.s.*//' "$tmp/k7")" = "$(sed 's/ [0-9]* examples.s.*//' "$tmp/k1")" ]
rc=$?
check "--steps-per-launch 7 and 1 print the same lines" "$rc"
expect_error "negative --steps-per-launch" 2 --steps-per-launch -1

expect_error "unknown flag" 2 --bogus
expect_error "bad number" 2 --batch abc
expect_error "missing value" 2 --lr
expect_error "bad optimizer" 2 --optimizer rmsprop
expect_error "zero lr" 2 --lr 0
expect_error "label smoothing of 1" 2 --label-smoothing 1
expect_error "momentum without sgd" 2 --optimizer adam --momentum 0.9
expect_error "missing data dir" 1 --device cpu --data "$tmp/nowhere"
expect_error "--init of another model" 1 --device cpu --data "$data" --hidden 17 --steps 1 --init "$tmp/a.safetensors"
grep -q 'fc1.weight has shape \[16,784\], the model has \[17,784\]' "$tmp/err"
rc=$?
check "--init mismatch names the tensor and shapes" "$rc"
head -c 100 "$tmp/a.safetensors" >"$tmp/cut.safetensors"
expect_error "truncated checkpoint" 1 --device cpu --data "$data" --hidden 16 --steps 1 --resume "$tmp/cut.safetensors"
expect_error "missing --init file" 1 --device cpu --data "$data" --hidden 16 --init "$tmp/none.safetensors"

# --log-interval and --log-file: a line every N steps on the CPU, and the
# curve as CSV (and JSON lines), which tools/plot_log draws
"$bin" --device cpu --data "$data" --hidden 16 --steps 60 --log-interval 20 --log-file "$tmp/curve.csv" \
    >"$tmp/log1" 2>&1
rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '^step [0-9]* (epoch 1/10, batch [0-9]*/938): loss' "$tmp/log1")" = 3 ]
rc=$?
check "--log-interval 20 prints 3 lines in 60 steps ($(head -n 3 "$tmp/log1" | tail -n 1))" "$rc"
[ "$(head -n 1 "$tmp/curve.csv")" = "step,kind,loss,accuracy,lr,examples_per_s" ] &&
    [ "$(grep -c '^[0-9]*,train,[0-9.]*,[0-9.]*,0.001,[0-9.]*$' "$tmp/curve.csv")" = 3 ] &&
    grep -q '^60,test,[0-9.]*,0\.[0-9]*,,$' "$tmp/curve.csv"
rc=$?
check "--log-file writes CSV rows for each log line and the test ($(tr '\n' ' ' <"$tmp/curve.csv"))" "$rc"
"$bin" --device cpu --data "$data" --hidden 16 --steps 20 --log-interval 10 --log-file "$tmp/curve.jsonl" \
    >/dev/null 2>&1
grep -q '^{"step": 10, "kind": "train", "loss": [0-9.]*, "accuracy": [0-9.]*, "lr": 0.001, "examples_per_s": [0-9.e+]*}$' \
    "$tmp/curve.jsonl"
rc=$?
check "--log-file writes JSON lines ($(head -n 1 "$tmp/curve.jsonl"))" "$rc"
plot_log="$(dirname "${BASH_SOURCE[0]}")/../tools/plot_log"
if command -v gnuplot >/dev/null; then
    "$plot_log" -o "$tmp/curve.png" "$tmp/curve.csv" "$tmp/curve.jsonl" >/dev/null &&
        [ "$(head -c 8 "$tmp/curve.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ]
    rc=$?
    check "tools/plot_log draws both logs as a PNG" "$rc"
fi

# a diverging run stops at the first non-finite loss, naming the step, and
# leaves the checkpoint it was given alone
cp "$tmp/a.safetensors" "$tmp/good.safetensors"
expect_error "a NaN loss stops the run" 1 --device cpu --data "$data" --hidden 16 --steps 30 --lr 1e30 \
    --save "$tmp/good.safetensors"
grep -Eq 'step [0-9]+: the training loss is (NaN|infinite)' "$tmp/err"
rc=$?
check "the NaN stop names the step" "$rc"
cmp -s "$tmp/a.safetensors" "$tmp/good.safetensors"
rc=$?
check "the diverged run did not overwrite the checkpoint" "$rc"

# a checkpoint holding a NaN is refused by --init and --resume, by name
python3 - "$tmp/a.safetensors" "$tmp/nan.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
at = 8 + n + h["fc1.weight"]["data_offsets"][0] + 4 * 5
open(sys.argv[2], "wb").write(b[:at] + struct.pack("<f", float("nan")) + b[at + 4:])
PY
expect_error "--init with a NaN" 1 --device cpu --data "$data" --hidden 16 --steps 1 --init "$tmp/nan.safetensors"
grep -q 'tensor fc1.weight holds a NaN at element 5' "$tmp/err"
rc=$?
check "--init names the tensor and the element of the NaN ($(cat "$tmp/err"))" "$rc"
expect_error "--resume with a NaN" 1 --device cpu --data "$data" --hidden 16 --steps 1 --resume "$tmp/nan.safetensors"

# inputs that would hang or overflow
mkfifo "$tmp/fifo"
expect_error "a FIFO as --init" 1 --device cpu --data "$data" --hidden 16 --steps 1 --init "$tmp/fifo"
grep -q 'is a FIFO' "$tmp/err"
rc=$?
check "the FIFO is named, not opened for good" "$rc"
mkdir "$tmp/odd"
python3 - "$data" "$tmp/odd" <<'PY'
# Fashion-MNIST with 29 columns: the trainers' feeds take 28x28
import gzip, os, struct, sys
src, dst = sys.argv[1], sys.argv[2]
def read(name):
    for suffix in (".gz", ""):
        p = os.path.join(src, name + suffix)
        if os.path.exists(p):
            return (gzip.open if suffix else open)(p, "rb").read()
for split in ("train", "t10k"):
    img = read(f"{split}-images-idx3-ubyte")
    n, rows, cols = struct.unpack(">III", img[4:16])
    n = min(n, 100)
    pix = img[16:16 + n * rows * cols]
    out = bytearray(img[:4] + struct.pack(">III", n, rows, cols + 1))
    for r in range(n * rows):
        out += pix[r * cols:(r + 1) * cols] + b"\0"
    open(os.path.join(dst, f"{split}-images-idx3-ubyte"), "wb").write(out)
    lab = read(f"{split}-labels-idx1-ubyte")
    open(os.path.join(dst, f"{split}-labels-idx1-ubyte"), "wb").write(lab[:4] + struct.pack(">I", n) + lab[8:8 + n])
PY
expect_error "28x29 images" 1 --device cpu --data "$tmp/odd" --hidden 16 --steps 3
grep -q 'train-images-idx3-ubyte: 28x29 images (812 values each); Fashion-MNIST takes 28x28 images' "$tmp/err"
rc=$?
check "28x29 images are refused naming the file ($(cat "$tmp/err"))" "$rc"

# a model larger than the machine fails at once with the figures, instead
# of being killed by the OOM killer part way through its initialisation
start=$(date +%s)
expect_error "a model larger than memory" 1 --device cpu --data "$data" --hidden 100000,100000 --steps 1
grep -Eq "parameters \(10079600128 values\).* need [0-9]+ MiB of host memory, and [0-9]+ MiB are free" "$tmp/err" &&
    [ $(($(date +%s) - start)) -lt 30 ]
rc=$?
check "the memory refusal gives the figures ($(cat "$tmp/err"))" "$rc"

# --save through a symbolic link writes its target; a directory is refused
ln -s good.safetensors "$tmp/link.safetensors"
"$bin" --device cpu --data "$data" --hidden 16 --steps 2 --save "$tmp/link.safetensors" >/dev/null 2>"$tmp/err"
rc=$?
[ "$rc" = 0 ] && [ -L "$tmp/link.safetensors" ] && ! cmp -s "$tmp/a.safetensors" "$tmp/good.safetensors"
rc=$?
check "--save writes through a symbolic link ($(cat "$tmp/err"))" "$rc"
expect_error "--save onto a folder" 1 --device cpu --data "$data" --hidden 16 --steps 1 --save "$tmp/odd"

# a checkpoint past --epochs is refused, one at its end trains nothing and says so
"$bin" --device cpu --data "$data" --hidden 16 --epochs 1 --steps 938 --save "$tmp/done.safetensors" >/dev/null 2>&1
"$bin" --device cpu --data "$data" --hidden 16 --epochs 1 --resume "$tmp/done.safetensors" >"$tmp/out" 2>&1
rc=$?
[ "$rc" = 0 ] && grep -q '^nothing to train: the checkpoint finished all 1 epochs' "$tmp/out"
rc=$?
check "resuming a finished run says there is nothing to train" "$rc"
"$bin" --device cpu --data "$data" --hidden 16 --epochs 3 --steps 940 --save "$tmp/e2.safetensors" >/dev/null 2>&1
expect_error "a checkpoint past --epochs" 2 --device cpu --data "$data" --hidden 16 --epochs 1 \
    --resume "$tmp/e2.safetensors"

# a checkpoint whose metadata says epoch 1000000 (damaged) is refused, not resumed into zero steps
python3 - "$tmp/e2.safetensors" "$tmp/epoch.safetensors" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h["__metadata__"]["epoch"] = "1000000"
head = json.dumps(h).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + b[8 + n:])
PY
expect_error "a checkpoint at epoch 1000000" 2 --device cpu --data "$data" --hidden 16 --epochs 3 \
    --resume "$tmp/epoch.safetensors"
grep -q 'the checkpoint is at epoch 1000001, batch [0-9]*, past --epochs 3' "$tmp/err"
rc=$?
check "epoch 1000000 is refused naming both ($(cat "$tmp/err"))" "$rc"

expect_error "--device cuda without a GPU" 1 --device cuda --data "$data" --hidden 16 --steps 1
grep -q 'no CUDA device is usable here; --device cpu' "$tmp/err"
rc=$?
check "no GPU: the message names --device cpu" "$rc"

trainer_test_summary
