"""train_gpt against PyTorch: K training steps from one initialisation.

Run on a machine with torch + safetensors (the GPU machine):

    python3 tests/torch/gpt_parity.py --train-gpt gpu_stage/bin/train_gpt \
        --data gpu_stage/data/austen.txt --work /tmp/gpt_parity

A small GPT of train_gpt's structure (nanoGPT's blocks with the exact GELU,
biases, the LM head tied to the token embedding, no dropout) is initialised
in PyTorch and saved with safetensors (without lm_head.weight, which is
wte; ge2's checkpoints carry it, equal to wte, which is checked too). train_gpt --init --no-shuffle runs K AdamW steps on the CPU and on
CUDA (constant lr, weight decay for matrices only, gradient clipping at 1.0:
nanoGPT's optimizer); PyTorch runs the same K steps on the same batches in
float64 (the reference) and in float32. Every parameter of ge2 must be
within 10x PyTorch's own float32 error of the float64 result (normwise per
tensor, with a floor of 1e-6). Prints one line per device and
"N passed, N failed" last; exits non-zero on failure.
"""
import argparse
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file

from ge2_torch import within_float32_error
from nanogpt import GPT, adamw


def batches(path, steps, b, t):
    data = open(path, "rb").read()
    vocab = sorted(set(data))
    stoi = {ch: i for i, ch in enumerate(vocab)}
    train = torch.tensor([stoi[ch] for ch in data[: int(0.9 * len(data))]], dtype=torch.long)
    span = len(train) - t - 1
    out = []
    for s in range(steps):
        starts = [((s * b + r) * t) % span for r in range(b)]
        out.append((torch.stack([train[i: i + t] for i in starts]), torch.stack([train[i + 1: i + 1 + t] for i in starts])))
    return len(vocab), out


def torch_train(init, cfg, data, dtype, lr):
    model = GPT(*cfg)
    model.load_state_dict(init)
    model = model.to(dtype)
    opt = adamw(model, lr)
    for x, y in data:
        opt.zero_grad()
        logits = model(x)
        torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-gpt", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", default="/tmp/ge2_gpt_parity")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--devices", default="cpu,cuda")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(5)
    n_layer, n_head, n_embd, block, batch, lr = 2, 2, 32, 32, 8, 3e-3
    vocab, data = batches(a.data, a.steps, batch, block)
    cfg = (vocab, block, n_layer, n_head, n_embd)
    init = {k: v.contiguous() for k, v in GPT(*cfg).state_dict().items()}
    init_path = os.path.join(a.work, "torch_init.safetensors")
    save_file(init, init_path)
    want = torch_train(init, cfg, data, torch.float64, lr)
    f32 = torch_train(init, cfg, data, torch.float32, lr)
    results = []
    for dev in a.devices.split(","):
        ck = os.path.join(a.work, f"ge2_{dev}.safetensors")
        args = [a.train_gpt, "--device", dev, "--data", a.data, "--init", init_path, "--no-shuffle",
                "--n-layer", str(n_layer), "--n-head", str(n_head), "--n-embd", str(n_embd),
                "--block-size", str(block), "--batch", str(batch), "--dropout", "0", "--lr", str(lr),
                "--min-lr", str(lr), "--warmup", "0", "--max-iters", str(a.steps), "--eval-interval", "1000000",
                "--eval-iters", "1", "--sample", "0", "--save", ck]
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            print(f"FAIL {dev}: train_gpt exited {out.returncode}: {out.stderr.strip()}")
            results.append(False)
            continue
        got = load_file(ck)
        # the checkpoint is nanoGPT's state_dict: lm_head.weight is the tied wte
        tied = "lm_head.weight" in got and torch.equal(got["lm_head.weight"], got["transformer.wte.weight"])
        ok, worst_name, worst = within_float32_error(got, want, f32)
        ok &= tied
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {dev}: {a.steps} AdamW steps vs PyTorch float64, worst {worst_name} "
              f"(ge2 error / bound {worst:.2f})")
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
