"""ge2 checkpoints <-> PyTorch, checked with the real safetensors and torch.

Run on a machine with torch + safetensors (the GPU machine):

    python3 tests/torch/checkpoint_interop.py --train-mlp gpu_stage/bin/train_mlp \
        --data gpu_stage/data/fashion-mnist --work /tmp/interop

Two directions, each judged by test-set accuracy computed independently:
1. ge2 trains and saves; safetensors.torch.load_file + load_state_dict puts
   the parameters into the equivalent torch model, whose test accuracy must
   equal the one ge2 printed (fp32 on both sides: within 2 images of 10,000).
2. torch makes weights (its own nn.Linear init) and saves them with
   safetensors.torch.save_file; ge2 --init loads them and, with --steps 0,
   evaluates: its accuracy must equal torch's on the same weights.
Prints one line per check and "N passed, N failed" last; exits non-zero on failure.
"""
import argparse
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ge2_torch import read_idx, run_trainer


class MLP(torch.nn.Module):
    """fc1..fcK with ReLU between, the names ge2's trainer uses."""

    def __init__(self, sizes):
        super().__init__()
        self.depth = len(sizes) - 1
        for i in range(self.depth):
            setattr(self, f"fc{i + 1}", torch.nn.Linear(sizes[i], sizes[i + 1]))

    def forward(self, x):
        for i in range(self.depth):
            x = getattr(self, f"fc{i + 1}")(x)
            if i + 1 < self.depth:
                x = torch.relu(x)
        return x


def torch_accuracy(model, images, labels):
    with torch.no_grad():
        logits = model(images)
        return int((logits.argmax(dim=1) == labels).sum())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-mlp", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", default="/tmp/ge2_interop")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False

    images = torch.tensor(read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")),
                          dtype=torch.float32).reshape(-1, 784) / 255.0
    labels = torch.tensor(read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))
    images, labels = images.to(a.device), labels.to(a.device)
    sizes = [784, 256, 128, 10]
    results = []

    # 1. ge2 -> torch
    ck = os.path.join(a.work, "ge2_trained.safetensors")
    ge2_correct = run_trainer(a.train_mlp, a.data, ["--device", a.device, "--steps", "300", "--save", ck])
    state = load_file(ck)
    params = {k: v for k, v in state.items() if not k.startswith("optim.")}
    model = MLP(sizes).to(a.device)
    model.load_state_dict(params, strict=True)
    torch_correct = torch_accuracy(model, images, labels)
    ok = abs(torch_correct - ge2_correct) <= 2
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} ge2->torch: ge2 {ge2_correct}/10000, torch on loaded weights "
          f"{torch_correct}/10000 ({len(params)} tensors, {len(state) - len(params)} optimizer tensors)")

    # 2. torch -> ge2
    torch.manual_seed(7)
    fresh = MLP(sizes)
    init = os.path.join(a.work, "torch_init.safetensors")
    save_file({k: v.contiguous() for k, v in fresh.state_dict().items()}, init)
    torch_correct = torch_accuracy(fresh.to(a.device), images, labels)
    ge2_correct = run_trainer(a.train_mlp, a.data, ["--device", a.device, "--steps", "0", "--init", init])
    ok = abs(torch_correct - ge2_correct) <= 2
    results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'} torch->ge2: torch {torch_correct}/10000, ge2 --init {ge2_correct}/10000")

    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
