#!/usr/bin/env python3
"""PyTorch's half of the ge2 benchmark (bench/README.md).

The same workloads as bench/ge2_bench.c, trained the way a PyTorch user
would: nn.Sequential of Linear/ReLU (the CNN rows: Conv2d/BatchNorm2d/ReLU/
MaxPool2d blocks first, cudnn.benchmark on), F.cross_entropy (mean),
Adam(lr=1e-3).
Two modes per workload:

  eager  the plain loop; Adam's default (foreach) implementation.
  graph  the whole step (forward, loss, backward, Adam(capturable=True))
         captured in one torch.cuda.graph after a warm-up on a side stream,
         static input tensors copied into before each replay - the recipe of
         PyTorch's CUDA Graphs documentation ("whole network capture").

Both modes stage every batch host -> device from pinned memory, as ge2 does.
Timing matches ge2_bench: a block of N steps between two synchronizations,
CUDA events recorded after each, median over blocks of (block time / N).
Host time: perf_counter around one step, in bursts of HOST_BURST steps after a
synchronization. Kernels per step: torch.profiler (CUPTI) over PROFILE_STEPS
steps. Device memory: torch.cuda.max_memory_allocated() over the whole row
(and max_memory_reserved(), what the caching allocator took from the device).

Prints the torch version and device on stderr and as an "env" JSON line,
then one JSON line per (workload, mode) on stdout. Exits 1 if a row failed.
--cpu runs the eager rows on the CPU, timed by the host clock: it checks
this script on a machine without a GPU (figures meaningless).
"""
import argparse
import gc
import gzip
import json
import math
import os
import statistics
import struct
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# Same table as ge2_bench.c's WORKLOADS.
WORKLOADS = [
    dict(name="mlp_small", dims=[784, 256, 128, 10], batch=64, tf32_row=False, epoch=False),
    dict(name="mlp_medium", dims=[784, 1024, 1024, 10], batch=256, tf32_row=False, epoch=False),
    dict(name="mlp_large", dims=[784, 4096, 4096, 4096, 10], batch=256, tf32_row=True, epoch=False, bf16_row=True),
    dict(name="epoch", dims=[784, 256, 128, 10], batch=64, tf32_row=False, epoch=True),
    # CNN: features, conv1 and conv2 channels, fc1 width, classes (train_cnn's model)
    dict(name="cnn64", dims=[784, 32, 64, 128, 10], batch=64, tf32_row=True, epoch=False, cnn=True, bf16_row=True),
    dict(name="cnn256", dims=[784, 32, 64, 128, 10], batch=256, tf32_row=True, epoch=False, cnn=True, bf16_row=True),
    dict(name="cnn_epoch", dims=[784, 32, 64, 128, 10], batch=64, tf32_row=False, epoch=True, cnn=True),
]
# (mode, precision); the TF32 row only for workloads with tf32_row, the
# bf16 one (autocast) for those with bf16_row.
MODES = [("eager", "fp32"), ("graph", "fp32"), ("graph", "tf32"), ("graph", "bf16")]

SYNTHETIC_BATCHES = 4
HOST_BURST = 2  # as ge2_bench: only the host's own time, never a wait for the device
HOST_SAMPLES = 400
PROFILE_STEPS = 5
WARMUP_STEPS = 20
SEED = 1234
DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
DEVICE = "cuda"  # "cpu" with --cpu


def sync():
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def staged(t):
    """Host batches live in pinned memory so copies to the GPU are asynchronous."""
    return t.pin_memory() if DEVICE == "cuda" else t


def set_tf32(on):
    """TF32 for matmuls and cuDNN convolutions; returns the API used (2.9+ has fp32_precision)."""
    matmul = torch.backends.cuda.matmul
    try:
        matmul.fp32_precision = "tf32" if on else "ieee"
        torch.backends.cudnn.conv.fp32_precision = "tf32" if on else "ieee"
        return "torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision"
    except (AttributeError, AssertionError):  # before 2.9 (old versions assert on unknown names)
        matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        return "torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32"


# ------------------------------------------------------------------- data


def read_idx(path):
    """A u8 IDX file (plain or gzip); every header field is checked."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4:
        raise ValueError(f"{path}: shorter than an IDX header")
    zero, kind, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or kind != 0x08 or not 1 <= ndim <= 4:
        raise ValueError(f"{path}: not a u8 IDX file (magic {raw[:4].hex()})")
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise ValueError(f"{path}: truncated header")
    dims = struct.unpack(">" + "I" * ndim, raw[4:head])
    if len(raw) - head != math.prod(dims):
        raise ValueError(f"{path}: {len(raw) - head} data bytes, header says {dims}")
    return np.frombuffer(raw, dtype=np.uint8, offset=head).reshape(dims)


def find_file(folder, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{folder}: no {stem}[.gz]")


def fashion_mnist(folder):
    """Training split as pinned tensors: images [n, 784] pixel/255, labels [n] int64."""
    images = read_idx(find_file(folder, "train-images-idx3-ubyte"))
    labels = read_idx(find_file(folder, "train-labels-idx1-ubyte"))
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{folder}: {images.shape[0]} images but {labels.shape[0]} labels")
    x = torch.from_numpy(images.reshape(images.shape[0], -1).astype(np.float32) / 255.0)
    y = torch.from_numpy(labels.astype(np.int64))
    return staged(x), staged(y)


def synthetic(dims, batch):
    """SYNTHETIC_BATCHES batches of N(0,1) features and uniform labels."""
    g = torch.Generator().manual_seed(SEED)
    n = SYNTHETIC_BATCHES * batch
    x = torch.randn(n, dims[0], generator=g)
    y = torch.randint(0, dims[-1], (n,), generator=g)
    return staged(x), staged(y)


class Feeder:
    """Consecutive batches (no shuffle), the last one partial, wrapping around."""

    def __init__(self, x, y, batch):
        self.x, self.y, self.batch, self.pos = x, y, batch, 0
        self.per_epoch = -(-x.shape[0] // batch)

    def rewind(self):
        self.pos = 0

    def next(self):
        end = min(self.pos + self.batch, self.x.shape[0])
        xb, yb = self.x[self.pos:end], self.y[self.pos:end]
        self.pos = 0 if end == self.x.shape[0] else end
        return xb, yb


# ------------------------------------------------------------------ model


def make_model(dims, cnn=False):
    torch.manual_seed(SEED)
    layers = []
    if cnn:  # train_cnn's blocks on the flat [B, 784] batches
        c1, c2 = dims[1], dims[2]
        layers += [nn.Unflatten(1, (1, 28, 28)),
                   nn.Conv2d(1, c1, 3, padding=1, bias=False), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
                   nn.Conv2d(c1, c2, 3, padding=1, bias=False), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
                   nn.Flatten()]
        dims = [c2 * 7 * 7] + list(dims[3:])
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(nn.ReLU())
    return nn.Sequential(*layers).to(DEVICE)


AUTOCAST_BF16 = False  # the bf16 rows: forward and loss under torch.autocast(bfloat16), as a user trains in bf16


def train_body(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    with torch.autocast(device_type=DEVICE, dtype=torch.bfloat16, enabled=AUTOCAST_BF16):
        loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    # Detached: a loss kept for reading later must not keep this step's autograd
    # graph (and its AccumulateGrad nodes, bound to this step's stream) alive.
    return loss.detach()


class EagerTrainer:
    def __init__(self, dims, cnn=False):
        self.model = make_model(dims, cnn)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def step(self, xb, yb):
        x = xb.to(DEVICE, non_blocking=True)
        y = yb.to(DEVICE, non_blocking=True)
        return train_body(self.model, self.opt, x, y)


class GraphTrainer:
    """One captured graph per batch size (the epoch's last batch is smaller),
    each with its own static inputs and memory pool."""

    def __init__(self, dims, cnn=False):
        self.model = make_model(dims, cnn)
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3, capturable=True)
        self.graphs = {}
        self.first_loss = None  # the very first training step's loss (a warm-up one)

    def _capture(self, xb, yb):
        sx = torch.empty(xb.shape, dtype=xb.dtype, device="cuda")
        sy = torch.empty(yb.shape, dtype=yb.dtype, device="cuda")
        sx.copy_(xb)
        sy.copy_(yb)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                loss = train_body(self.model, self.opt, sx, sy)
                if self.first_loss is None:
                    self.first_loss = loss
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        self.opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            loss = train_body(self.model, self.opt, sx, sy)
        self.graphs[xb.shape[0]] = (g, sx, sy, loss)

    def step(self, xb, yb):
        entry = self.graphs.get(xb.shape[0])
        if entry is None:
            # Warm-up + capture train this batch already; the replay trains it once more.
            self._capture(xb, yb)
            entry = self.graphs[xb.shape[0]]
        g, sx, sy, loss = entry
        sx.copy_(xb, non_blocking=True)
        sy.copy_(yb, non_blocking=True)
        g.replay()
        return loss


# ----------------------------------------------------------------- timing


def time_block(trainer, feeder, n, events):
    """µs per step of n steps between two synchronizations (events: CUDA's, or None for the host clock)."""
    sync()
    t0 = time.perf_counter()
    if events:
        events[0].record()
    for _ in range(n):
        trainer.step(*feeder.next())
    sync()
    if not events:
        return (time.perf_counter() - t0) * 1e6 / n
    events[1].record()
    events[1].synchronize()
    return events[0].elapsed_time(events[1]) * 1e3 / n


def quantiles(values):
    v = sorted(values)

    def q(p):
        return v[int(math.floor(p * (len(v) - 1) + 0.5))]

    return q(0.5), q(0.1), q(0.9)


def time_steps(trainer, feeder, seconds, events, row):
    probe = time_block(trainer, feeder, 10, events)
    per_block = min(1000, max(10, math.ceil(1e4 / probe)))
    blocks = min(200, max(7, int(seconds * 1e6 / (probe * per_block))))
    us = [time_block(trainer, feeder, per_block, events) for _ in range(blocks)]
    row["us_per_step"], row["us_p10"], row["us_p90"] = quantiles(us)
    row["steps_timed"] = blocks * per_block


def time_epochs(trainer, feeder, epochs, events, row):
    steps = feeder.per_epoch
    ms = []
    for e in range(-1, epochs):  # epoch -1 warms up (captures both batch sizes)
        feeder.rewind()
        us = time_block(trainer, feeder, steps, events)
        if e >= 0:
            ms.append(us * steps * 1e-3)
    med, p10, p90 = quantiles(ms)
    row.update(ms_per_epoch=med, us_per_step=med * 1e3 / steps, us_p10=p10 * 1e3 / steps,
               us_p90=p90 * 1e3 / steps, steps_timed=epochs * steps, steps_per_epoch=steps)


def time_host(trainer, feeder, row):
    samples = []
    for i in range(HOST_SAMPLES):
        if i % HOST_BURST == 0:
            sync()
        xb, yb = feeder.next()
        t0 = time.perf_counter()
        trainer.step(xb, yb)
        samples.append((time.perf_counter() - t0) * 1e6)
    sync()
    row["host_us_per_step"] = statistics.median(samples)


def count_kernels(trainer, feeder, row):
    """Kernels per step as CUPTI sees them, graph replays included: events
    of category "kernel" in the profiler's trace (copies and memsets have
    categories of their own)."""
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(PROFILE_STEPS):
            trainer.step(*feeder.next())
        sync()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    kernels = sum(1 for e in events if str(e.get("cat", "")).lower() == "kernel")
    row["kernels_per_step"] = kernels / PROFILE_STEPS
    row["kernels_source"] = "torch.profiler"


# ------------------------------------------------------------------- rows


def run_row(w, mode, precision, args, data, device):
    global AUTOCAST_BF16
    tf32 = precision == "tf32"
    row = dict(impl="torch", workload=w["name"], model="cnn" if w.get("cnn") else "mlp", mode=mode, tf32=tf32,
               precision=precision, batch=w["batch"], dims="-".join(map(str, w["dims"])), device=device)
    trainer = None
    AUTOCAST_BF16 = precision == "bf16"
    try:
        gc.collect()
        if DEVICE == "cuda":
            # cuBLAS keeps a workspace per (handle, stream) for the process's
            # life, allocated through the caching allocator: without this, each
            # earlier row's streams would count in this row's peak.
            clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
            if clear_workspaces:
                clear_workspaces()
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
            row["allocated_at_start"] = torch.cuda.memory_allocated()
        row["tf32_api"] = set_tf32(tf32)
        x, y = data if w["epoch"] else synthetic(w["dims"], w["batch"])
        feeder = Feeder(x, y, w["batch"])
        trainer = (GraphTrainer if mode == "graph" else EagerTrainer)(w["dims"], w.get("cnn", False))
        row["optimizer"] = "Adam(lr=1e-3%s)" % (", capturable=True" if mode == "graph" else "")
        events = None
        if DEVICE == "cuda":
            events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

        first = trainer.step(*feeder.next())
        warm = getattr(trainer, "first_loss", None)  # graph mode: its first warm-up step came first
        row["loss_first"] = (first if warm is None else warm).item()
        for _ in range(WARMUP_STEPS):
            trainer.step(*feeder.next())
        if w["epoch"]:
            time_epochs(trainer, feeder, args.epochs, events, row)
        else:
            time_steps(trainer, feeder, args.seconds, events, row)
        time_host(trainer, feeder, row)
        row["loss_last"] = trainer.step(*feeder.next()).item()
        row["device_bytes"] = torch.cuda.max_memory_allocated() if DEVICE == "cuda" else None
        # What the caching allocator took from the device (ge2's twin: the cudaMemGetInfo drop).
        row["taken_bytes"] = torch.cuda.max_memory_reserved() if DEVICE == "cuda" else None
        try:
            if DEVICE == "cuda":
                count_kernels(trainer, feeder, row)
        except Exception as exc:  # the profiler is optional; the timing stands
            row["kernels_per_step"] = None
            row["kernels_source"] = f"profiler failed: {exc}"
    except Exception as exc:
        traceback.print_exc()
        row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        del trainer
        set_tf32(False)
        AUTOCAST_BF16 = False
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=os.environ.get("GE2_DATA_DIR") or DEFAULT_DATA,
                    help="Fashion-MNIST folder for the epoch workload")
    ap.add_argument("--only", help="one workload: " + ", ".join(w["name"] for w in WORKLOADS))
    ap.add_argument("--seconds", type=float, default=1.0, help="timed seconds per (workload, mode)")
    ap.add_argument("--epochs", type=int, default=5, help="timed epochs per mode")
    ap.add_argument("--cpu", action="store_true", help="eager rows on the CPU: checks the script, figures meaningless")
    args = ap.parse_args()

    global DEVICE
    DEVICE = "cpu" if args.cpu else "cuda"
    if DEVICE == "cuda" and not torch.cuda.is_available():
        print("torch_bench: no CUDA device (--cpu checks the script on the CPU)", file=sys.stderr)
        return 1
    set_tf32(False)
    torch.backends.cudnn.benchmark = True  # the fastest convolution algorithm per shape, as a tuned user runs
    device = torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu"
    env = dict(impl="torch", env=True, torch=torch.__version__, cuda=torch.version.cuda, device=device,
               python=sys.version.split()[0])
    print(f"torch_bench: torch {env['torch']}, CUDA {env['cuda']}, device {device}", file=sys.stderr)
    print(json.dumps(env), flush=True)

    failures = 0
    data = None
    for w in WORKLOADS:
        if args.only and args.only != w["name"]:
            continue
        if w["epoch"] and data is None:
            try:
                data = fashion_mnist(args.data)
            except (OSError, ValueError) as exc:
                data = exc
        for mode, precision in MODES:
            if (precision == "tf32" and not w["tf32_row"]) or (precision == "bf16" and not w.get("bf16_row")) or \
                    (mode == "graph" and DEVICE != "cuda"):
                continue
            if w["epoch"] and isinstance(data, Exception):
                row = dict(impl="torch", workload=w["name"], mode=mode, tf32=precision == "tf32", precision=precision,
                           batch=w["batch"], dims="-".join(map(str, w["dims"])), device=device, error=f"epoch: {data}")
            else:
                row = run_row(w, mode, precision, args, data, device)
            failures += "error" in row
            print(json.dumps(row), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
