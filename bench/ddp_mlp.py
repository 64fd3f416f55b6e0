"""PyTorch DistributedDataParallel on the data-parallel benchmark's MLP, the
reference bench/dp_speed.sh measures ge2 against on the same GPUs in the
same call.

    torchrun --nproc_per_node N bench/ddp_mlp.py --hidden 4096,4096,4096 --batch 1024

Each rank trains 784-hidden...-10 (ReLU, mean cross-entropy, Adam) on
random data already on its GPU at --batch examples per step, with DDP's
default bucketing (bucket_cap_mb 25), for --warmup then --steps timed steps.
Rank 0 prints one line: "ddp ranks N batch B steps S: X ex/s (Y ms/step)",
examples counted over every rank.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden", default="4096,4096,4096")
    ap.add_argument("--batch", type=int, default=1024, help="examples per rank per step")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    a = ap.parse_args()

    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(1)

    dims = [784] + [int(h) for h in a.hidden.split(",")] + [10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append(nn.Linear(dims[i], dims[i + 1]))
        if i + 2 < len(dims):
            layers.append(nn.ReLU())
    model = nn.parallel.DistributedDataParallel(nn.Sequential(*layers).cuda(), device_ids=[local])
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand(a.batch, 784, device="cuda")
    y = torch.randint(0, 10, (a.batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    torch.cuda.synchronize()
    secs = time.perf_counter() - start
    if rank == 0:
        ex = a.steps * a.batch * world
        print(f"ddp ranks {world} batch {a.batch} steps {a.steps}: {ex / secs:.0f} ex/s "
              f"({1e3 * secs / a.steps:.3f} ms/step)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
