"""What the PyTorch cross-checks in tests/torch share: reading the
Fashion-MNIST IDX files, running a ge2 trainer for its test accuracy, and
comparing ge2's tensors with PyTorch's float64 ones against PyTorch's own
float32 error."""
import gzip
import re
import subprocess

import numpy as np


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def run_trainer(binary, data, args):
    """Runs a trainer (train_mlp, train_cnn) and returns the test images it got right."""
    out = subprocess.run([binary, "--data", data] + args, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{binary} {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    last = out.stdout.strip().splitlines()[-1]
    m = re.fullmatch(r"test accuracy: (0\.\d{4}) \((\d+)/10000\)", last)
    if not m:
        raise RuntimeError(f"unexpected last line: {last!r}")
    return int(m.group(2))


def normwise(a, b):
    return ((a.double() - b.double()).norm() / max(b.double().norm().item(), 1e-30)).item()


def within_float32_error(got, want, f32, skip=()):
    """Every tensor of want (PyTorch float64) in got (ge2) within 10x
    PyTorch's own float32 error (f32), normwise, with a floor of 1e-6 for
    tensors float32 gets exactly; names ending in one of skip are left out.
    Returns (ok, the worst tensor as text, its error / bound)."""
    worst, worst_name, ok = 0.0, "", True
    for name, ref in want.items():
        if name.endswith(tuple(skip)):
            continue
        bound = 10 * max(normwise(f32[name], ref), 1e-6)
        err = normwise(got[name], ref)
        if err / bound > worst:
            worst, worst_name = err / bound, f"{name}: {err:.2e} vs bound {bound:.2e}"
        ok &= err <= bound
    return ok, worst_name, worst
