#!/usr/bin/env python3
"""One training step of train_gpt's default model, ge2 against PyTorch, on
the GPU machine, in one call:

    python3 bench/gpt_speed.py --train-gpt gpu_stage/bin/train_gpt \
        --data gpu_stage/data/austen.txt [--steps 60] [--precisions fp32,tf32]

ge2: train_gpt with the default config (6 layers, 6 heads, 384 wide, block
256, batch 64, dropout 0.2, AdamW with clipping), its ms/step as it prints
it every 10 steps (the median of the lines after the first 20 steps; each
of those lines includes one synchronization).
PyTorch: the same model (tests/torch/nanogpt.py) and optimizer, three ways:
eager, the whole step captured in one CUDA graph (capturable AdamW, static
inputs), and torch.compile of the model; CUDA events around blocks of 10
steps after a warm-up, the median block; the peak device memory (ge2: the
train step's planned pools, arena, inputs and workspace, as train_gpt
prints them; PyTorch: torch.cuda.max_memory_allocated).
Each PyTorch row runs in a process of its own (this script again, with
--torch-row), so its peak is its own: in one process what earlier rows
still hold (their models and optimizer states until collected, a CUDA
graph's memory pool) counts in later rows' peaks.
--precisions takes bf16 too: ge2's --precision bf16 against PyTorch
autocast-bf16.
Prints a markdown table last: ms/step, tokens/s, model FLOPs utilisation
against the GPU's bf16 dense peak, the peak MiB, and ge2's ratio to each
(time and memory); exits 1 when any row failed.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from nanogpt import GPT, adamw  # noqa: E402

CFG = dict(n_layer=6, n_head=6, n_embd=384, block=256, batch=64, dropout=0.2)


def ge2_ms(binary, data, precision, steps):
    args = [binary, "--device", "cuda", "--data", data, "--precision", precision, "--max-iters", "5000",
            "--steps", str(steps), "--eval-interval", "1000000", "--eval-iters", "1", "--sample", "0"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"train_gpt failed ({out.returncode}): {out.stderr.strip()}")
    ms = [float(m.group(2)) for m in re.finditer(r"^iter (\d+): loss [-0-9.naif]+, ([0-9.]+) ms/step", out.stdout, re.M)
          if int(m.group(1)) > 20]
    if not ms:
        raise RuntimeError(f"no ms/step lines after step 20 in: {out.stdout[-400:]}")
    mib = re.search(r"^device memory: ([0-9.]+) MiB", out.stdout, re.M)
    return statistics.median(ms), float(mib.group(1)) if mib else float("nan")


def torch_ms(mode, precision, vocab, steps):
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.manual_seed(1)
    dev = "cuda"
    model = GPT(vocab, CFG["block"], CFG["n_layer"], CFG["n_head"], CFG["n_embd"], CFG["dropout"],
                attn_dropout=True).to(dev)  # as train_gpt's model (ge2_attention_dropout)
    opt = adamw(model, 1e-3, capturable=(mode == "graph"))
    x = torch.randint(0, vocab, (CFG["batch"], CFG["block"]), device=dev)
    y = torch.randint(0, vocab, (CFG["batch"], CFG["block"]), device=dev)
    fwd = torch.compile(model) if mode == "compile" else model

    def step():
        opt.zero_grad(set_to_none=(mode != "graph"))
        # bf16: autocast, as PyTorch trains in bf16 (no weight cache: a CUDA graph replays the casts)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16", cache_enabled=False):
            logits = fwd(x)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    torch.cuda.reset_peak_memory_stats()
    if mode == "graph":
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            step()
        run = graph.replay
    else:
        for _ in range(5 if mode == "eager" else 10):
            step()
        run = step
    torch.cuda.synchronize()
    times = []
    for _ in range(max(1, steps // 10)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(10):
            run()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) / 10)
    return statistics.median(times), torch.cuda.max_memory_allocated() / 2**20


def torch_row(mode, precision, vocab, steps):
    """torch_ms in a fresh process (see the top): (ms, MiB)."""
    args = [sys.executable, os.path.abspath(__file__), "--torch-row", mode, precision, "--vocab", str(vocab),
            "--steps", str(steps)]
    out = subprocess.run(args, capture_output=True, text=True)
    m = re.search(r"^torch row: ([0-9.]+) ms, ([0-9.]+) MiB$", out.stdout, re.M)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"exit {out.returncode}: {(out.stderr or out.stdout).strip()[-400:]}")
    return float(m.group(1)), float(m.group(2))


# Dense bf16 tensor-core peaks (NVIDIA's datasheets, SXM, without sparsity),
# by the name torch reports: the MFU column's denominator.
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0}


def train_flops_per_step(vocab):
    """A training step's model FLOPs as nanoGPT's estimate_mfu counts them (PaLM's
    appendix B): 6 per parameter per token (forward and backward), plus the
    attention scores' 12·layers·heads·head_dim·T per token."""
    c, layers, t = CFG["n_embd"], CFG["n_layer"], CFG["block"]
    params = layers * 12 * c * c + vocab * c  # the blocks' weights and the tied embedding (biases, LN: negligible)
    per_token = 6 * params + 12 * layers * c * t
    return per_token * CFG["batch"] * t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-gpt")
    ap.add_argument("--data")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--precisions", default="fp32,tf32")
    ap.add_argument("--torch-row", nargs=2, metavar=("MODE", "PRECISION"), help=argparse.SUPPRESS)
    ap.add_argument("--vocab", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_row:  # one PyTorch row, for torch_row in the parent
        ms, mib = torch_ms(a.torch_row[0], a.torch_row[1], a.vocab, a.steps)
        print(f"torch row: {ms:.4f} ms, {mib:.1f} MiB")
        return
    if not a.train_gpt or not a.data:
        ap.error("--train-gpt and --data are required")
    vocab = len(set(open(a.data, "rb").read()))
    tokens = CFG["batch"] * CFG["block"]
    rows = []
    for precision in a.precisions.split(","):
        try:
            g, g_mib = ge2_ms(a.train_gpt, a.data, precision, a.steps)
        except Exception as e:  # a failed half still leaves the other's figures
            print(f"ge2 {precision}: {e}", file=sys.stderr)
            g, g_mib = float("nan"), float("nan")
        rows.append((precision, "ge2 replay", g, g_mib))
        for mode in ("eager", "graph", "compile"):  # compile: torch.compile(model), default mode
            try:
                ms, mib = torch_row(mode, precision, vocab, a.steps)
            except Exception as e:
                print(f"torch {mode} {precision}: {e}", file=sys.stderr)
                ms, mib = float("nan"), float("nan")
            rows.append((precision, f"torch {mode}", ms, mib))
    name = torch.cuda.get_device_name()
    peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if k in name), float("nan"))
    flops = train_flops_per_step(vocab)
    print(f"GPU: {name}, torch {torch.__version__}; model {CFG}, vocab {vocab}; "
          f"{flops / 1e12:.3f} TFLOP a step; MFU against the bf16 dense peak ({peak:.0f} TFLOP/s)")
    print("| precision | impl | ms/step | tokens/s | MFU | peak MiB | ge2 / this: time | memory |")
    print("|---|---|---|---|---|---|---|---|")
    for precision, impl, ms, mib in rows:
        ge2 = next(r for r in rows if r[0] == precision and r[1] == "ge2 replay")
        mfu = flops / (ms * 1e-3) / (peak * 1e12)
        print(f"| {precision} | {impl} | {ms:.2f} | {tokens / ms * 1e3:.0f} | {100 * mfu:.1f}% | {mib:.0f} | "
              f"{ge2[2] / ms:.2f}x | {ge2[3] / mib:.2f}x |")
    sys.exit(1 if any(math.isnan(r[2]) for r in rows) else 0)


if __name__ == "__main__":
    main()
