#!/usr/bin/env python3
"""The GPT's whole default run, ge2 against PyTorch, in one call on the GPU
machine: issue 21's quality target (ge2's best validation loss within 0.03
of PyTorch's, same config and corpus, another seed) and the wall-clock of
each.

    python3 bench/gpt_quality.py --train-gpt gpu_stage/bin/train_gpt \\
        --data gpu_stage/data/austen.txt [--precision tf32] [--max-iters 5000]

or on token shards in llm.c's format (issue 41's quality run: a GPT-2-shaped
model, --model gpt2 with the sizes below, on the SentencePiece Austen shards):

    python3 bench/gpt_quality.py --train-gpt gpu_stage/bin/train_gpt \\
        --tokens gpu_stage/data/austen_train_000000.bin gpu_stage/data/austen_val_000000.bin \\
        --vocab-size 8192 --gelu tanh --dropout 0.2 --max-iters 1500

ge2: train_gpt with its defaults (nanoGPT's train_shakespeare_char config)
and --seed 1; its "step N: ... val loss" lines, its best val loss and its
sampled text. Its output goes line by line to $OUT/gpt_quality_ge2.log (or
/tmp), so a call cut short keeps it.
PyTorch: nanoGPT's training loop (train.py) written out here - random
batches of the first 90% of the corpus, its learning-rate schedule (linear
warm-up, cosine decay to --min-lr over the run), AdamW with weight decay on
the >= 2-dim parameters only, gradient clipping at 1.0, an evaluation of
--eval-iters batches of each split every --eval-interval iterations in
eval mode - on tests/torch/nanogpt.py's model with seed 2. By default with
dropout on the attention weights as nanoGPT has it, and as ge2's model has
it (ge2_attention_dropout); --no-attn-dropout leaves it out on PyTorch's
side (for ge2 builds before attention dropout).
Both sides are timed from their first evaluation's line to their last
(training and the evaluations between; ge2's start-up, data load and
compile come before). With two or more GPUs the two runs share the call,
one a GPU. Prints both validation curves and a table last; exits 1 if a run
failed (the 0.03 verdict is in the table, not the exit status: this is a
measurement).
"""
import argparse
import os
import re
import subprocess
import sys
import threading
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "torch"))
from nanogpt import GPT, adamw, lr_at  # noqa: E402


def ge2_command(a):
    data = (["--model", "gpt2", "--train-tokens", a.tokens[0], "--val-tokens", a.tokens[1], "--vocab-size",
             str(a.vocab_size)] if a.tokens else ["--data", a.data])
    return [a.train_gpt, "--device", "cuda"] + data + [
        "--precision", a.precision, "--seed", "1", "--n-layer", str(a.n_layer), "--n-head", str(a.n_head),
        "--n-embd", str(a.n_embd), "--block-size", str(a.block), "--batch", str(a.batch), "--dropout", str(a.dropout),
        "--gelu", a.gelu, "--max-iters", str(a.max_iters), "--eval-interval", str(a.eval_interval), "--eval-iters",
        str(a.eval_iters), "--lr", str(a.lr), "--min-lr", str(a.min_lr), "--warmup", str(a.warmup), "--sample", "300"]


EVAL_LINE = re.compile(r"^(?:torch )?step (\d+): train loss (\S+), val loss (\S+)")


def figures(evals, sample=""):
    """evals: (seconds since start, step, train loss, val loss) of each evaluation line. The span is
    from the first evaluation's line to the last's: training and the evaluations between, the same on
    both sides (ge2's start-up, data load and compile come before its first line)."""
    if not evals:
        return None
    vals = [v for _, _, _, v in evals]
    return dict(best=min(vals), last=vals[-1], secs=evals[-1][0] - evals[0][0], evals=evals, sample=sample)


def ge2_run(a, env, log_path, result):
    """train_gpt's whole run, its output line by line into log_path (kept if the call is cut short);
    result["ge2"]: its figures, or None with result["why"]."""
    result["ge2"], result["why"] = None, ""
    try:
        start = time.perf_counter()
        lines, evals = [], []
        with open(log_path, "w", errors="replace") as log, subprocess.Popen(
                ge2_command(a), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
                env=env) as proc:
            for line in proc.stdout:
                log.write(line)
                log.flush()
                lines.append(line)
                m = EVAL_LINE.match(line)
                if m:
                    evals.append((time.perf_counter() - start, int(m.group(1)), float(m.group(2)),
                                  float(m.group(3))))
        out = "".join(lines)
        best = re.search(r"^best val loss: (\S+)", out, re.M)
        if proc.returncode != 0 or not best:
            result["why"] = f"train_gpt exited {proc.returncode}:\n{out[-1500:]}"
            return
        sample = re.search(r"^sample \(\d+ (?:characters|tokens)\):\n(.*)", out[:best.start()], re.M | re.S)
        result["ge2"] = figures(evals, sample.group(1).rstrip("\n") if sample else "(no sample)")
        result["ge2"]["best_printed"] = float(best.group(1))
    except Exception as e:  # a wrong path, an unreadable line: say so, the other run still reports
        result["why"] = f"train_gpt: {e!r}"


def torch_run(a, device):
    torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
    torch.manual_seed(2)
    if a.tokens:  # llm.c's shards: 256 int32 of header, then uint16 ids
        data = {name: torch.from_numpy(np.fromfile(path, dtype="<u2", offset=1024).astype(np.int64)).to(device)
                for name, path in zip(("train", "val"), a.tokens)}
        vocab_size = a.vocab_size
    else:
        raw = open(a.data, "rb").read()
        vocab = sorted(set(raw))
        lut = torch.zeros(256, dtype=torch.long)
        lut[torch.tensor(vocab)] = torch.arange(len(vocab))
        ids = lut[torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()]
        split = int(0.9 * len(ids))
        data = {"train": ids[:split].to(device), "val": ids[split:].to(device)}
        vocab_size = len(vocab)
    block, batch = a.block, a.batch
    model = GPT(vocab_size, block, a.n_layer, a.n_head, a.n_embd, a.dropout, attn_dropout=not a.no_attn_dropout,
                gelu=a.gelu).to(device)
    opt = adamw(model, a.lr, weight_decay=0.1, beta2=0.99)
    offsets = torch.arange(block, device=device)

    def get_batch(split_name):
        d = data[split_name]
        ix = torch.randint(len(d) - block, (batch,), device=device)
        x = d[ix[:, None] + offsets]
        y = d[ix[:, None] + offsets + 1]
        return x, y

    def loss_of(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits = model(x)
            return torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

    @torch.no_grad()
    def estimate():
        model.eval()
        out = {}
        for s in ("train", "val"):
            out[s] = torch.stack([loss_of(*get_batch(s)) for _ in range(a.eval_iters)]).mean().item()
        model.train()
        return out

    evals = []
    torch.cuda.synchronize(device)
    start = time.perf_counter()
    for it in range(a.max_iters + 1):
        for group in opt.param_groups:
            group["lr"] = lr_at(it, a.lr, a.min_lr, a.warmup, a.max_iters)
        if it % a.eval_interval == 0 or it == a.max_iters:
            losses = estimate()
            evals.append((time.perf_counter() - start, it, losses["train"], losses["val"]))
            print(f"torch step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}", flush=True)
        if it == a.max_iters:
            break
        loss = loss_of(*get_batch("train"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return figures(evals)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-gpt", required=True)
    ap.add_argument("--data", help="a character corpus (the default model's)")
    ap.add_argument("--tokens", nargs=2, metavar=("TRAIN", "VAL"), help="token shards instead (one file each)")
    ap.add_argument("--vocab-size", type=int, default=0)
    ap.add_argument("--n-layer", type=int, default=6)
    ap.add_argument("--n-head", type=int, default=6)
    ap.add_argument("--n-embd", type=int, default=384)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dropout", type=float, default=0.2)
    ap.add_argument("--gelu", choices=("erf", "tanh"), default="erf")
    ap.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="tf32")
    ap.add_argument("--max-iters", type=int, default=5000)
    ap.add_argument("--eval-interval", type=int, default=250)
    ap.add_argument("--eval-iters", type=int, default=200)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--no-attn-dropout", action="store_true", help="PyTorch's model without attention dropout")
    a = ap.parse_args()
    if not a.data and not (a.tokens and a.vocab_size):
        ap.error("give --data, or --tokens TRAIN VAL with --vocab-size")

    gpus = torch.cuda.device_count()
    env = dict(os.environ)
    if gpus >= 2:  # ge2 on GPU 0 while PyTorch trains on GPU 1
        env["CUDA_VISIBLE_DEVICES"] = "0"
    log_path = os.path.join(os.environ.get("OUT", "/tmp"), "gpt_quality_ge2.log")
    result, t = {}, None
    worker = threading.Thread(target=ge2_run, args=(a, env, log_path, result))
    worker.start()
    try:
        if gpus < 2:  # one GPU: one run after the other
            worker.join()
        t = torch_run(a, "cuda:1" if gpus >= 2 else "cuda:0")
    except Exception as e:
        print(f"torch run failed: {e!r}", file=sys.stderr)
    finally:
        worker.join()
    g = result.get("ge2")
    if g is None:
        print(result.get("why", "train_gpt: no result"), file=sys.stderr)
    print(f"GPU: {torch.cuda.get_device_name()} x {gpus}, torch {torch.__version__}; {a.precision}, "
          f"{a.max_iters} iterations, eval every {a.eval_interval} x {a.eval_iters} batches; "
          f"{a.n_layer} layers, {a.n_head} heads, {a.n_embd} wide, block {a.block}, batch {a.batch}, dropout {a.dropout}, "
          f"{'token shards ' + a.tokens[0] if a.tokens else a.data}; "
          f"PyTorch: train_gpt's model (biases, GELU {a.gelu}, {'autocast-bf16' if a.precision == 'bf16' else a.precision}, "
          f"eager) in nanoGPT's loop, "
          f"{'without' if a.no_attn_dropout else 'with'} attention dropout; "
          f"{'side by side on two GPUs' if gpus >= 2 else 'one after the other'}; ge2's output: {log_path}")
    if g:
        print("ge2's sample:\n" + g["sample"])
    curves = {name: {step: val for _, step, _, val in r["evals"]} for name, r in (("ge2", g), ("torch", t)) if r}
    steps = sorted(set().union(*[c.keys() for c in curves.values()])) if curves else []
    print("| step | " + " | ".join(f"{n} val loss" for n in curves) + " |")
    print("|---|" + "---|" * len(curves))
    for step in steps:
        print(f"| {step} | " + " | ".join(f"{c[step]:.4f}" if step in c else "" for c in curves.values()) + " |")
    print("| impl | seed | best val loss | last val loss | s from the first evaluation to the last |")
    print("|---|---|---|---|---|")
    for name, seed, r in (("ge2", 1, g), ("torch (nanoGPT loop)", 2, t)):
        if r:
            print(f"| {name} | {seed} | {r['best']:.4f} | {r['last']:.4f} | {r['secs']:.1f} |")
    if g and t:
        d = g["best"] - t["best"]
        print(f"ge2 - torch best val loss: {d:+.4f} (target within 0.03, PyTorch "
              f"{'without' if a.no_attn_dropout else 'with'} attention dropout: "
              f"{'met' if abs(d) <= 0.03 else 'missed'}); time ratio ge2 / torch {g['secs'] / t['secs']:.2f}"
              f"{' (side by side, the two share the host)' if gpus >= 2 else ''}")
    sys.exit(0 if g and t else 1)


if __name__ == "__main__":
    main()
