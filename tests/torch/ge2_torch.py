"""What the PyTorch cross-checks in tests/torch share: reading the
Fashion-MNIST IDX files and running a ge2 trainer for its test accuracy."""
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
