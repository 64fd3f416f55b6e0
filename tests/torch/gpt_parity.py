"""train_gpt against PyTorch: K training steps from one initialisation.

Run on a machine with torch + safetensors (the GPU machine):

    python3 tests/torch/gpt_parity.py --train-gpt gpu_stage/bin/train_gpt \
        --data gpu_stage/data/austen.txt --work /tmp/gpt_parity

A small GPT of train_gpt's structure (nanoGPT's blocks with GELU-tanh,
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
import math
import os
import subprocess
import sys

import torch
from safetensors.torch import load_file, save_file


class Block(torch.nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1 = torch.nn.LayerNorm(c)
        self.attn = torch.nn.Module()
        self.attn.c_attn = torch.nn.Linear(c, 3 * c)
        self.attn.c_proj = torch.nn.Linear(c, c)
        self.ln_2 = torch.nn.LayerNorm(c)
        self.mlp = torch.nn.Module()
        self.mlp.c_fc = torch.nn.Linear(c, 4 * c)
        self.mlp.c_proj = torch.nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.attn.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))
        h = torch.nn.functional.gelu(self.mlp.c_fc(self.ln_2(x)), approximate="tanh")
        return x + self.mlp.c_proj(h)


class GPT(torch.nn.Module):
    """nanoGPT's GPT with train_gpt's choices, under nanoGPT's names."""

    def __init__(self, vocab, block, n_layer, n_head, n_embd):
        super().__init__()
        self.transformer = torch.nn.Module()
        self.transformer.wte = torch.nn.Embedding(vocab, n_embd)
        self.transformer.wpe = torch.nn.Embedding(block, n_embd)
        self.transformer.h = torch.nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.transformer.ln_f = torch.nn.LayerNorm(n_embd)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * n_layer))
            elif name.endswith("weight") and p.dim() == 2:
                torch.nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                torch.nn.init.zeros_(p)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.transformer.wte(idx) + self.transformer.wpe(torch.arange(t))
        for block in self.transformer.h:
            x = block(x)
        return self.transformer.ln_f(x) @ self.transformer.wte.weight.t()  # the tied LM head


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
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.99))
    for x, y in data:
        opt.zero_grad()
        logits = model(x)
        torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def normwise(a, b):
    return ((a.double() - b.double()).norm() / max(b.double().norm().item(), 1e-30)).item()


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
        ok = "lm_head.weight" in got and torch.equal(got["lm_head.weight"], got["transformer.wte.weight"])
        worst, worst_name = 0.0, ""
        for name, ref in want.items():
            bound = 10 * max(normwise(f32[name], ref), 1e-6)
            err = normwise(got[name], ref)
            if err / bound > worst:
                worst, worst_name = err / bound, f"{name}: {err:.2e} vs bound {bound:.2e}"
            ok &= err <= bound
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {dev}: {a.steps} AdamW steps vs PyTorch float64, worst {worst_name} "
              f"(ge2 error / bound {worst:.2f})")
    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
