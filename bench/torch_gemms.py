"""What PyTorch's own fp32 GEMM calls take for the medium MLP's five big GEMMs.

An independent check beside //bench:gemm_floor: the same products as
PyTorch's autograd issues them for nn.Linear (addmm with the bias forward, mm
for the input and weight gradients), TF32 off, each timed alone: 50 copies
captured in one CUDA graph (no launch gaps), replayed 7 times, the median
replay divided by 50. Runs on the GPU machine: python3 bench/torch_gemms.py
"""
import torch

COPIES = 50
REPLAYS = 7


def main():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    batch, n_in, hidden = 256, 784, 1024
    x = torch.randn(batch, n_in, device=dev)
    h1 = torch.randn(batch, hidden, device=dev)
    dh2 = torch.randn(batch, hidden, device=dev)
    dh1 = torch.randn(batch, hidden, device=dev)
    w1, b1 = torch.randn(hidden, n_in, device=dev), torch.randn(hidden, device=dev)
    w2, b2 = torch.randn(hidden, hidden, device=dev), torch.randn(hidden, device=dev)
    # name, (m, n, k) of the product, the call
    cases = [
        ("fc1 addmm", (batch, hidden, n_in), lambda: torch.addmm(b1, x, w1.t())),
        ("fc2 addmm", (batch, hidden, hidden), lambda: torch.addmm(b2, h1, w2.t())),
        ("dx2 mm", (batch, hidden, hidden), lambda: torch.mm(dh2, w2)),
        ("dW2 mm", (hidden, hidden, batch), lambda: torch.mm(dh2.t(), h1)),
        ("dW1 mm", (hidden, n_in, batch), lambda: torch.mm(dh1.t(), x)),
    ]
    print("torch_gemms: %s, torch %s, fp32 (TF32 off)" % (torch.cuda.get_device_name(), torch.__version__))
    total = 0.0
    for name, (m, n, k), call in cases:
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            for _ in range(3):
                call()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(COPIES):
                call()
        for _ in range(3):
            graph.replay()
        samples = []
        for _ in range(REPLAYS):
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            stop.record()
            stop.synchronize()
            samples.append(start.elapsed_time(stop) * 1000.0 / COPIES)
        us = sorted(samples)[REPLAYS // 2]
        total += us
        print("%-10s m%d n%d k%d  %7.2f us  %5.1f TFLOP/s" % (name, m, n, k, us, 2.0 * m * n * k / us / 1e6))
    print("sum of %d GEMMs: %.1f us" % (len(cases), total))


if __name__ == "__main__":
    main()
