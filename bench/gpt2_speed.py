#!/usr/bin/env python3
"""GPT-2 training speed: ge2 against llm.c and PyTorch, in one call on one GPU.

    python3 bench/gpt2_speed.py --stage gpu_stage --llmc .llmc [--rows 124m,d6,350m,124m-accum]
                                [--steps 30] [--torch eager,compile,graph] [--out DIR]

The same model for all three: GPT-2's body (pre-LayerNorm blocks, GELU tanh,
biases, tied embedding), its vocabulary padded to 50,304 columns, bf16
GEMMs with fp32 sums, dropout 0, AdamW with gradient clipping at 1.0, from
random weights on random token ids (tools/write_token_shards.py --random,
the shards both ge2 and llm.c read).

- ge2: gpu_stage/bin/train_gpt --precision bf16 (the captured step);
  ms/step is the mean of its log lines after the first --skip steps.
- llm.c: train_gpt2cu built from source on this machine by the timing kit
  (../shared/llmc_kit, carried in the ignored folder --llmc; cuDNN
  attention when the headers are found), -r 0 (no recompute); ms/step is the
  mean of its per-step times after --skip steps.
- PyTorch: the kit's nanoGPT-style model (nanogpt_124m.py) in eager,
  torch.compile and whole-step CUDA graph modes, each in a process of its own.

Rows: 124m (12/12/768, T 1024, B 16), d6 (6/6/384, T 256, B 64), 350m
(24/16/1024, T 1024, B 8), 124m-accum (B 16 with gradient accumulation to
524,288 tokens a step: 32 micro-batches; ge2's --grad-accum, llm.c's -d;
no PyTorch row), and
124m-max (the largest batch, a multiple of 8, each of ge2 and llm.c runs
at T 1024 up to --max-batch: 16 doubled while it runs, then bisected).

Peak device memory is the same measure for every system: the largest
used_memory nvidia-smi reports for the process while it runs (its CUDA
context included), sampled every 0.2 s.
MFU: (6·N + 6·L·C·T) FLOPs a token (llm.c's convention; N counts every
parameter, the padded embedding included) against the GPU's dense bf16
peak. Prints a markdown table last; logs go to --out."""
import argparse
import os
import re
import statistics
import subprocess
import sys
import threading
import time

ROWS = {
    "124m": dict(layers=12, heads=12, embd=768, T=1024, B=16, ge2=["--model", "gpt2"], llmc=["-e", "d12"]),
    "124m-max": dict(layers=12, heads=12, embd=768, T=1024, B=16, ge2=["--model", "gpt2"], llmc=["-e", "d12"]),
    "124m-accum": dict(layers=12, heads=12, embd=768, T=1024, B=16, accum=524288,
                       ge2=["--model", "gpt2"], llmc=["-e", "d12"]),
    "d6": dict(layers=6, heads=6, embd=384, T=256, B=64,
               ge2=["--n-layer", "6", "--n-head", "6", "--n-embd", "384", "--block-size", "256", "--vocab-size",
                    "50257", "--pad-vocab", "128", "--gelu", "tanh", "--dropout", "0"], llmc=["-e", "d6"]),
    "350m": dict(layers=24, heads=16, embd=1024, T=1024, B=8, ge2=["--model", "gpt2-medium"], llmc=["-e", "d24"]),
}
VOCAB, PADDED_VOCAB = 50257, 50304
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0}  # dense, SXM, NVIDIA's datasheets


def params(r):
    """Every parameter, as llm.c counts them (padded wte tied to the head, wpe, biases, LayerNorms)."""
    c, l = r["embd"], r["layers"]
    return PADDED_VOCAB * c + 1024 * c + l * (12 * c * c + 13 * c) + 2 * c


def flops_per_step(r, tokens):
    return (6 * params(r) + 6 * r["layers"] * r["embd"] * r["T"]) * tokens


class PeakMemory:
    """The largest used_memory (MiB) nvidia-smi shows for one process."""

    def __init__(self, pid):
        self.pid, self.peak, self.done = pid, 0, False
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()

    def poll(self):
        while not self.done:
            out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True).stdout
            for line in out.splitlines():
                fields = [f.strip() for f in line.split(",")]
                if len(fields) == 2 and fields[0] == str(self.pid) and fields[1].isdigit():
                    self.peak = max(self.peak, int(fields[1]))
            time.sleep(0.2)

    def stop(self):
        self.done = True
        self.thread.join()
        return self.peak or float("nan")


def run_logged(cmd, log, timeout, env=None):
    """Runs cmd with its output in log; returns (exit code, output, peak MiB)."""
    with open(log, "w") as f:
        f.write("$ " + " ".join(cmd) + "\n")
        f.flush()
        p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        mem = PeakMemory(p.pid)
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
        peak = mem.stop()
    with open(log, errors="replace") as f:
        return rc, f.read(), peak


def ge2_row(a, r, batch, shards, log):
    accum = ["--grad-accum", str(r["accum"] // (batch * r["T"]))] if r.get("accum") else []
    cmd = [os.path.join(a.stage, "bin", "train_gpt"), "--device", "cuda", "--precision", "bf16", *r["ge2"], *accum,
           "--batch", str(batch), "--train-tokens", shards + "_train_*.bin", "--val-tokens", shards + "_val_*.bin",
           "--steps", str(a.steps), "--log-interval", "1", "--eval-interval", "1000000", "--eval-iters", "1",
           "--sample", "0", "--grad-clip", "1.0"]
    rc, out, peak = run_logged(cmd, log, 300)
    steps = [(int(m.group(1)), float(m.group(2)), float(m.group(3)))
             for m in re.finditer(r"^iter (\d+): loss ([-0-9.naif]+), ([0-9.]+) ms/step", out, re.M)]
    ms = [t for s, _, t in steps if s > a.skip]
    if rc != 0 or not ms:
        return dict(error=f"exit {rc}: {out.strip()[-300:]}")
    return dict(ms=statistics.mean(ms), loss=steps[-1][1], mib=peak)


def llmc_binaries(a):
    """The kit's builds, cuDNN's first (run.sh's own link falls back to the other when its first run is skipped)."""
    paths = [os.path.join(a.llmc, "build", name) for name in ("train_gpt2cu_cudnn", "train_gpt2cu_nocudnn")]
    return [p for p in paths if os.path.exists(p)]


def llmc_binary(a):
    found = llmc_binaries(a)
    return found[0] if found else None


def llmc_row(a, r, batch, shards, log, accum=None):
    """The first of the kit's builds that runs (cuDNN's may not find its library at run time)."""
    res = dict(error="llm.c is not built")
    for binary in llmc_binaries(a):
        res = llmc_row_of(a, binary, r, batch, shards, log, accum)
        if "error" not in res:
            break
    return res


def llmc_row_of(a, binary, r, batch, shards, log, accum):
    tokens = accum or batch * r["T"]
    cmd = [binary, "-i", shards + "_train_*.bin", "-j", shards + "_val_*.bin", "-x", str(a.steps), "-v", "100000",
           "-m", "1", "-s", "0", "-n", "0", "-h", "0", "-l", "3e-4", "-c", "0.1", "-r", "0", *r["llmc"],
           "-b", str(batch), "-t", str(r["T"]), "-d", str(tokens)]
    rc, out, peak = run_logged(cmd, log, 300)
    steps = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in re.finditer(
        r"^step\s+(\d+)/\d+ \| loss\s+([-0-9.naif]+).*?\| ([0-9.]+) ms \|", out, re.M)]
    ms = [t for s, _, t in steps if s > a.skip]
    if rc != 0 or not ms:
        return dict(error=f"exit {rc}: {out.strip()[-300:]}")
    return dict(ms=statistics.mean(ms), loss=steps[-1][1], mib=peak, binary=os.path.basename(binary))


def torch_row(a, r, mode, log):
    script = os.path.join(a.llmc, "nanogpt_124m.py")
    cmd = [sys.executable, script, "--modes", mode, "--steps", str(a.steps), "--warmup", str(a.skip),
           "--B", str(r["B"]), "--T", str(r["T"]), "--n-layer", str(r["layers"]), "--n-head", str(r["heads"]),
           "--n-embd", str(r["embd"]), "--vocab", str(PADDED_VOCAB)]
    rc, out, peak = run_logged(cmd, log, 400)
    m = re.search(rf"^{mode}: \d+ steps \| ms/step mean ([0-9.]+).*?last loss ([-0-9.naif]+)", out, re.M)
    if rc != 0 or not m:
        return dict(error=f"exit {rc}: {out.strip()[-300:]}")
    return dict(ms=float(m.group(1)), loss=float(m.group(2)), mib=peak)


def build_llmc(a, log):
    """The kit's own build (run.sh with no time left for its runs): both binaries, cuDNN when found."""
    env = dict(os.environ, STEPS="1", EXTRAS="0", BUDGET_S="0", LOGDIR=os.path.join(a.out, "llmc_build"))
    with open(log, "w") as f:
        return subprocess.Popen(["bash", os.path.join(a.llmc, "run.sh")], stdout=f, stderr=subprocess.STDOUT, env=env)


def largest_batch(run, start, limit, step=8):
    """The largest multiple of step from start to limit that runs, and its
    result: start doubled while it runs, then bisected between the last
    batch that ran and the first that did not (a batch that fails is taken
    to fail above it too, as running out of memory does)."""
    limit = limit // step * step
    best, failed = None, limit + step
    batch = start
    while batch <= limit:
        res = run(batch)
        if "error" in res:
            failed = batch
            break
        best = (batch, res)
        batch = batch * 2 if batch * 2 <= limit or batch == limit else limit
    if best is None:
        return None
    low = best[0]
    while failed - low > step:
        mid = (low + failed) // 2 // step * step
        if mid <= low:
            break
        res = run(mid)
        if "error" in res:
            failed = mid
        else:
            best, low = (mid, res), mid
    return best


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stage", default="gpu_stage")
    p.add_argument("--llmc", default=".llmc", help="the llm.c timing kit's folder (llm.c not built: its rows are skipped)")
    p.add_argument("--rows", default="124m")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--skip", type=int, default=10, help="warm-up steps left out of the means")
    p.add_argument("--torch", default="eager,compile,graph", help="PyTorch modes ('' for none)")
    p.add_argument("--out", default=os.environ.get("OUT", "gpt2_speed_logs"))
    p.add_argument("--max-batch", type=int, default=256, help="124m-max: the largest batch tried")
    p.add_argument("--rebuild-llmc", action="store_true", help="build llm.c even when the kit's binaries exist")
    a = p.parse_args(argv)
    a.out = os.path.join(a.out, "gpt2_speed")
    os.makedirs(a.out, exist_ok=True)
    rows = [x for x in a.rows.split(",") if x]
    for x in rows:
        if x not in ROWS:
            sys.exit(f"gpt2_speed: unknown row '{x}' (rows: {', '.join(ROWS)})")
    here = os.path.dirname(os.path.abspath(__file__))
    shards = os.path.join(a.out, "random")
    subprocess.run([sys.executable, os.path.join(here, "..", "tools", "write_token_shards.py"), "--random",
                    "8000000", "--vocab-size", str(VOCAB), "--out", shards], check=True, stdout=subprocess.DEVNULL)
    have_llmc = os.path.isfile(os.path.join(a.llmc, "run.sh")) and os.path.isfile(os.path.join(a.llmc, "train_gpt2.cu"))
    builder = None
    if have_llmc and (a.rebuild_llmc or not llmc_binary(a)):
        builder = build_llmc(a, os.path.join(a.out, "llmc_build.log"))
    elif have_llmc:
        print(f"gpt2_speed: llm.c already built: {llmc_binary(a)}", flush=True)
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout.strip().splitlines()[0]
    peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name), float("nan"))
    results = []  # (row, system, batch, tokens a step, result)

    def add(row, system, batch, tokens, res):
        results.append((row, system, batch, tokens, res))
        print(f"{row} {system} B={batch}: {res}", flush=True)

    if builder:  # built first: its compilers would take the host's cores from the timed runs
        rc = builder.wait()
        print(f"gpt2_speed: llm.c binary {llmc_binary(a)}", flush=True)
        if not llmc_binary(a):
            print(f"gpt2_speed: llm.c's build failed (exit {rc}); see {a.out}/llmc_build.log", flush=True)
    for row in rows:
        r = ROWS[row]
        if row == "124m-max":
            best = largest_batch(lambda b: ge2_row(a, r, b, shards, os.path.join(a.out, f"ge2_{row}_B{b}.log")),
                                 r["B"], a.max_batch)
            add(row, "ge2", best[0] if best else 0, None, best[1] if best else dict(error="B=16 failed"))
        else:
            add(row, "ge2", r["B"], r.get("accum"), ge2_row(a, r, r["B"], shards, os.path.join(a.out, f"ge2_{row}.log")))
    for row in rows:
        r = ROWS[row]
        if not have_llmc or not llmc_binary(a):
            add(row, "llm.c", r["B"], None, dict(error="not built (no --llmc kit, or its build failed)"))
        elif row == "124m-max":
            best = largest_batch(lambda b: llmc_row(a, r, b, shards, os.path.join(a.out, f"llmc_{row}_B{b}.log")),
                                 r["B"], a.max_batch)
            add(row, "llm.c", best[0] if best else 0, None, best[1] if best else dict(error="B=16 failed"))
        else:
            add(row, "llm.c", r["B"], r.get("accum"),
                llmc_row(a, r, r["B"], shards, os.path.join(a.out, f"llmc_{row}.log"), r.get("accum")))
    for row in rows:
        if row in ("124m-max", "124m-accum"):
            continue
        for mode in [m for m in a.torch.split(",") if m]:
            add(row, f"torch {mode}", ROWS[row]["B"], None,
                torch_row(a, ROWS[row], mode, os.path.join(a.out, f"torch_{mode}_{row}.log")))

    print(f"\nGPU: {name}; bf16, random GPT-2 ids, vocabulary padded to {PADDED_VOCAB}; ge2 and llm.c: the mean "
          f"of steps {a.skip + 1}-{a.steps} (ge2: host time between its per-step log lines, each a sync; llm.c: its "
          f"CUDA events), PyTorch: {a.steps} steps after {a.skip} of warm-up; MFU (6N + 6LCT) a token against "
          f"{peak:.0f} TFLOP/s")
    print("| row | system | B | ms/step | tokens/s | MFU | peak MiB | last loss | ge2 / this (time) |")
    print("|---|---|---|---|---|---|---|---|---|")
    failed = 0
    for row, system, batch, tokens, res in results:
        r = ROWS[row]
        tokens = tokens or batch * r["T"]
        if "error" in res:
            failed += system == "ge2"
            print(f"| {row} | {system} | {batch} | - | - | - | - | - | {res['error'][:80]} |")
            continue
        ge2 = next((x[4] for x in results if x[0] == row and x[1] == "ge2"), {})
        ratio = f"{ge2['ms'] / res['ms']:.2f}x" if "ms" in ge2 and row != "124m-max" else "-"
        mfu = flops_per_step(r, tokens) / (res["ms"] * 1e-3) / (peak * 1e12)
        print(f"| {row} | {system} | {batch} | {res['ms']:.2f} | {tokens / res['ms'] * 1e3:,.0f} | {100 * mfu:.1f}% | "
              f"{res['mib']:.0f} | {res['loss']:.3f} | {ratio} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
