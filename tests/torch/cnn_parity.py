"""train_cnn against PyTorch: K training steps and checkpoints both ways.

Run on a machine with torch + safetensors (the GPU machine):

    python3 tests/torch/cnn_parity.py --train-cnn gpu_stage/bin/train_cnn \
        --data gpu_stage/data/fashion-mnist --work /tmp/cnn_parity

1. From one PyTorch initialisation (saved with safetensors.torch, batch
   norm's buffers included), train_cnn --init --no-shuffle runs K Adam steps
   on the CPU and on CUDA; PyTorch runs the same K steps in float64 (the
   reference) and in float32. Every parameter and running statistic of ge2
   must be within 10x PyTorch's own float32 error of the float64 result
   (normwise per tensor, with a floor of 1e-6 for tensors float32 gets
   exactly), and num_batches_tracked must equal K.
2. ge2's checkpoint loads into the torch model with load_state_dict(strict),
   and the loaded model's eval-mode test accuracy equals what ge2 printed.
Prints one line per check and "N passed, N failed" last; exits non-zero on failure.
"""
import argparse
import os
import sys

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from ge2_torch import read_idx, run_trainer, within_float32_error


class CNN(torch.nn.Module):
    """The model train_cnn builds, with its module names."""

    def __init__(self, c1=32, c2=64, fc=128):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, c1, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(c1)
        self.conv2 = torch.nn.Conv2d(c1, c2, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(c2)
        self.fc1 = torch.nn.Linear(c2 * 7 * 7, fc)
        self.fc2 = torch.nn.Linear(fc, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def torch_train(init, images, labels, steps, batch, dtype):
    model = CNN()
    model.load_state_dict(init)
    model = model.to(dtype)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for s in range(steps):
        x = images[s * batch:(s + 1) * batch].to(dtype)
        y = labels[s * batch:(s + 1) * batch]
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    return {k: v.detach() for k, v in model.state_dict().items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train-cnn", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", default="/tmp/ge2_cnn_parity")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--devices", default="cpu,cuda")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(11)

    n = a.steps * a.batch
    train_images = torch.tensor(read_idx(os.path.join(a.data, "train-images-idx3-ubyte.gz"))[:n],
                                dtype=torch.float64).reshape(-1, 1, 28, 28) / 255.0
    train_labels = torch.tensor(read_idx(os.path.join(a.data, "train-labels-idx1-ubyte.gz"))[:n].astype(np.int64))
    test_images = torch.tensor(read_idx(os.path.join(a.data, "t10k-images-idx3-ubyte.gz")),
                               dtype=torch.float32).reshape(-1, 1, 28, 28) / 255.0
    test_labels = torch.tensor(read_idx(os.path.join(a.data, "t10k-labels-idx1-ubyte.gz")).astype(np.int64))

    init = {k: v.contiguous() for k, v in CNN().state_dict().items()}
    init_path = os.path.join(a.work, "torch_init.safetensors")
    save_file(init, init_path)
    want = torch_train(init, train_images, train_labels, a.steps, a.batch, torch.float64)
    f32 = torch_train(init, train_images.float(), train_labels, a.steps, a.batch, torch.float32)
    results = []

    for dev in a.devices.split(","):
        ck = os.path.join(a.work, f"ge2_{dev}.safetensors")
        ge2_correct = run_trainer(a.train_cnn, a.data, [
            "--device", dev, "--init", init_path, "--no-shuffle", "--optimizer", "adam", "--weight-decay", "0",
            "--schedule", "constant", "--label-smoothing", "0", "--steps", str(a.steps), "--batch", str(a.batch),
            "--save", ck])
        got = load_file(ck)
        ok, worst_name, worst = within_float32_error(got, want, f32, skip=("num_batches_tracked",))
        for name in want:
            if name.endswith("num_batches_tracked"):
                ok &= got[name].dtype == torch.int64 and int(got[name]) == a.steps
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {dev}: {a.steps} steps vs PyTorch float64, worst {worst_name} "
              f"(ge2 error / bound {worst:.2f}); num_batches_tracked {int(got['bn1.num_batches_tracked'])}")

        model = CNN()
        model.load_state_dict({k: v for k, v in got.items() if not k.startswith("optim.")}, strict=True)
        model.eval()
        with torch.no_grad():
            torch_correct = int((model(test_images).argmax(1) == test_labels).sum())
        ok = abs(torch_correct - ge2_correct) <= 2
        results.append(ok)
        print(f"{'PASS' if ok else 'FAIL'} {dev} checkpoint -> torch (eval mode): ge2 {ge2_correct}/10000, "
              f"torch on the loaded state_dict {torch_correct}/10000")

    passed = sum(results)
    print(f"{passed} passed, {len(results) - passed} failed")
    sys.exit(0 if passed == len(results) else 1)


if __name__ == "__main__":
    main()
