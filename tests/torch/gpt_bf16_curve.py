"""train_gpt --precision bf16 against PyTorch autocast-bf16 on the same
batches: issue 21's loss-curve parity (within 2% over a short run).

Run on the GPU machine (torch + safetensors):

    python3 tests/torch/gpt_bf16_curve.py --train-gpt gpu_stage/bin/train_gpt \
        --data gpu_stage/data/austen.txt --work /tmp/gpt_bf16_curve

The default model (6 layers, 6 heads, 384 wide, 256 positions, batch 64)
from one nanoGPT initialisation, no dropout (the two sides draw different
masks), --no-shuffle batches, nanoGPT's optimizer (AdamW, weight decay on
matrices only, clipping at 1.0) and learning-rate schedule (warm-up, then
cosine). ge2 prints the mean training loss of every 10 steps ("iter N:
loss X"); PyTorch's model runs under torch.autocast(bfloat16) on the same
batches and its losses are averaged over the same windows. Each window's
relative difference must stay within --tolerance. PyTorch in fp32 (TF32
off) runs too, as a yardstick: how far bf16 itself moves the curve. Prints
a table and "N passed, N failed" last; exits non-zero on failure.
"""
import argparse
import os
import re
import subprocess
import sys

import torch
from safetensors.torch import save_file

from gpt_parity import batches
from nanogpt import GPT, adamw, lr_at

LOG_INTERVAL = 10  # train_gpt's: each "iter N: loss X" is the mean of steps N-9..N


def torch_curve(init, cfg, data, a, autocast):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    model = GPT(*cfg).cuda()
    model.load_state_dict(init)
    opt = adamw(model, a.lr)
    losses = []
    for it, (x, y) in enumerate(data):
        for group in opt.param_groups:
            group["lr"] = lr_at(it, a.lr, a.min_lr, a.warmup, a.steps)
        x, y = x.cuda(), y.cuda()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(x)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)).float(), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    return [sum(losses[i - LOG_INTERVAL:i]) / LOG_INTERVAL for i in range(LOG_INTERVAL, len(losses) + 1, LOG_INTERVAL)]


def ge2_curve(a, init_path, cfg):
    vocab, block, n_layer, n_head, n_embd = cfg
    args = [a.train_gpt, "--device", "cuda", "--precision", "bf16", "--data", a.data, "--init", init_path,
            "--no-shuffle", "--n-layer", str(n_layer), "--n-head", str(n_head), "--n-embd", str(n_embd),
            "--block-size", str(block), "--batch", str(a.batch), "--dropout", "0", "--lr", str(a.lr),
            "--min-lr", str(a.min_lr), "--warmup", str(a.warmup), "--max-iters", str(a.steps),
            "--eval-interval", "1000000", "--eval-iters", "1", "--sample", "0"]
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"train_gpt exited {out.returncode}: {out.stderr.strip()[-800:]}")
    curve = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"^iter (\d+): loss (\S+),", out.stdout, re.M)}
    return [curve.get(i) for i in range(LOG_INTERVAL, a.steps + 1, LOG_INTERVAL)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-gpt", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", default="/tmp/ge2_gpt_bf16_curve")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--tolerance", type=float, default=0.02, help="relative, per 10-step window")
    a = ap.parse_args()
    if a.steps % LOG_INTERVAL:
        ap.error(f"--steps must be a multiple of {LOG_INTERVAL}")
    os.makedirs(a.work, exist_ok=True)
    torch.manual_seed(7)
    block, n_layer, n_head, n_embd = 256, 6, 6, 384
    vocab, data = batches(a.data, a.steps, a.batch, block)
    cfg = (vocab, block, n_layer, n_head, n_embd)
    init = {k: v.contiguous() for k, v in GPT(*cfg).state_dict().items()}
    init_path = os.path.join(a.work, "torch_init.safetensors")
    save_file(init, init_path)

    bf16 = torch_curve(init, cfg, data, a, True)
    fp32 = torch_curve(init, cfg, data, a, False)
    try:
        ge2 = ge2_curve(a, init_path, cfg)
    except RuntimeError as e:
        print(f"FAIL: {e}")
        print("0 passed, 1 failed")
        sys.exit(1)

    print("step   ge2 bf16  torch bf16  rel diff   torch fp32  bf16 vs fp32")
    worst, worst_step, yard = 0.0, 0, 0.0
    for i, (g, t, f) in enumerate(zip(ge2, bf16, fp32)):
        step = (i + 1) * LOG_INTERVAL
        rel = abs(g - t) / t if g is not None else float("inf")
        yard = max(yard, abs(t - f) / f)
        if rel > worst:
            worst, worst_step = rel, step
        if step % 50 == 0 or step == LOG_INTERVAL:
            print(f"{step:5d}  {g if g is not None else float('nan'):8.4f}  {t:10.4f}  {rel:8.2%}   {f:10.4f}  "
                  f"{abs(t - f) / f:10.2%}")
    ok = worst <= a.tolerance
    print(f"{'PASS' if ok else 'FAIL'} bf16 loss curve: {a.steps} steps, worst window {worst:.2%} at step "
          f"{worst_step} (tolerance {a.tolerance:.0%}); PyTorch bf16 vs its own fp32: at most {yard:.2%}")
    print(f"{int(ok)} passed, {int(not ok)} failed")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
